"""The malformed-IR fuzzer: seeded mutants of the lit inputs through `relax-opt` (the verifier, each
pipeline stage, the default pipelines) and of StableHLO text through `relax-import-stablehlo`.

Pass criteria for every mutant: no signal, no hang, no Python traceback, no "internal error", and
every error located (`file:line:col: error: ...` with the real file name) or explicitly about the
whole file (`file: error: ...`).

CI runs RELAX_MLIR_FUZZ_MUTANTS (default 2,000) mutants from RELAX_MLIR_FUZZ_SEED (default 0) on
RELAX_MLIR_FUZZ_JOBS worker processes (default 2); a long campaign:

    RELAX_MLIR_FUZZ_MUTANTS=20000 RELAX_MLIR_FUZZ_SEED=1 pytest test/python/fuzz/test_malformed_ir.py

Findings are written (input and output) under RELAX_MLIR_FUZZ_OUT (default build/fuzz-malformed).
"""
from __future__ import annotations

import glob
import os
import random
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mutate  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# The stages each relax mutant runs through: the verifier alone, each pass after the ones it
# needs, and the two default pipelines of relax_mlir.compile.
_DEFAULT = "relax-infer-shapes,relax-legalize,relax-lower-shapes,relax-to-upstream"
_OPTIMIZE = ("relax-infer-shapes,relax-canonicalize,relax-dispatch-library,relax-legalize,relax-fuse-kernels,"
             "relax-dce,relax-plan-memory,relax-lower-shapes,relax-to-upstream")
STAGES = (
    [],
    ["--relax-infer-shapes"],
    ["--pass-pipeline=builtin.module(relax-infer-shapes,relax-canonicalize)"],
    ["--pass-pipeline=builtin.module(relax-infer-shapes,relax-legalize)"],
    ["--pass-pipeline=builtin.module(relax-infer-shapes,relax-legalize,relax-lower-shapes)"],
    ["--pass-pipeline=builtin.module(relax-legalize,relax-lower-shapes,relax-to-upstream)"],
    ["--pass-pipeline=builtin.module(relax-infer-shapes,relax-dispatch-library,relax-legalize,relax-fuse-kernels,"
     "relax-dce,relax-plan-memory)"],
    [f"--pass-pipeline=builtin.module({_DEFAULT})"],
    [f"--pass-pipeline=builtin.module({_OPTIMIZE})"],
)


def relax_seeds() -> list[tuple[str, bytes]]:
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "**", "*.mlir"), recursive=True)):
        rel = os.path.relpath(path, ROOT)
        if rel.startswith(os.path.join("test", "frontend")):
            continue
        with open(path, encoding="utf-8") as f:
            for i, chunk in enumerate(mutate.split_chunks(f.read())):
                out.append((f"{rel}#{i}", chunk.encode()))
    return out


def _jax_stablehlo() -> list[tuple[str, bytes]]:
    """A few small jax functions exported to StableHLO text (symbolic and static shapes)."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return []
    b = jax.export.symbolic_shape("b")[0]
    f32 = jnp.float32
    fns = {
        "mlp": (lambda x, w: jax.nn.relu(x @ w + 1.0), [((b, 8), f32), ((8, 4), f32)]),
        "softmax": (lambda x: jax.nn.softmax(x, axis=-1), [((b, 16), f32)]),
        "slice_concat": (lambda x: jnp.concatenate([x[:, :2], x[:, 1:3] * 2], axis=1), [((b, 6), f32)]),
        "int_ops": (lambda x, y: jnp.where(x > y, x // 3, y % 5).astype(jnp.int16), [((4, 3), jnp.int32),
                                                                                       ((4, 3), jnp.int32)]),
        "reduce_iota": (lambda x: jnp.sum(x * jnp.arange(x.shape[1], dtype=f32), axis=1), [((b, 5), f32)]),
        "take": (lambda t, i: t[i], [((10, 4), f32), ((b,), jnp.int32)]),
    }
    out = []
    for name, (fn, specs) in fns.items():
        args = [jax.ShapeDtypeStruct(s, d) for s, d in specs]
        text = jax.export.export(jax.jit(fn))(*args).mlir_module()
        # Drop jax's debug locations (they name this file): errors then point into the mutant.
        text = re.sub(r"(?m)^#loc\d*\s*=.*\n?", "", text)
        text = re.sub(r' loc\((#loc\d*|"[^"]*"|unknown)\)', "", text)
        out.append((f"jax:{name}", text.encode()))
    return out


def stablehlo_seeds() -> list[tuple[str, bytes]]:
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "frontend", "*.mlir"))):
        with open(path, encoding="utf-8") as f:
            for i, chunk in enumerate(mutate.split_chunks(f.read())):
                out.append((f"{os.path.relpath(path, ROOT)}#{i}", chunk.encode()))
    return out + _jax_stablehlo()


def bytecode_seeds(relax: list[tuple[str, bytes]], count: int = 40) -> list[tuple[str, bytes]]:
    """MLIR bytecode of the first `count` relax seeds that parse (`relax-opt --emit-bytecode` reads
    it back), their locations naming the mutant's file so that errors count as located."""
    import io

    from relax_mlir.core.session import Session, parse_module

    out = []
    for name, data in relax:
        session = Session("mutant.mlir")
        module = parse_module(session, data.decode())
        if module is None:
            continue
        buf = io.BytesIO()
        with session.ctx:
            module.write_bytecode(buf)
        out.append((name + " (bytecode)", buf.getvalue()))
        if len(out) == count:
            break
    return out


def make_jobs(n: int, seed: int) -> list[mutate.Job]:
    relax, shlo = relax_seeds(), stablehlo_seeds()
    bytecode: list[tuple[str, bytes]] = []
    assert relax and shlo
    lit_files = sorted(p for p in glob.glob(os.path.join(ROOT, "test", "**", "*.mlir"), recursive=True)
                       if "// -----" in open(p, encoding="utf-8").read())
    jobs = []
    for i in range(n):
        rng = random.Random(seed * 1_000_003 + i)
        r = rng.random()
        if r < 0.2:
            name, data = rng.choice(shlo)
            jobs.append(mutate.Job(i, "relax-import-stablehlo", ["{input}"], mutate.mutate(data, rng),
                                   "mutant.mlir", name))
        elif r < 0.25:  # the wrong dialect for each tool
            (name, data), tool = ((rng.choice(relax), "relax-import-stablehlo") if rng.random() < 0.5
                                  else (rng.choice(shlo), "relax-opt"))
            jobs.append(mutate.Job(i, tool, ["{input}"], mutate.mutate(data, rng), "mutant.mlir", name))
        elif r < 0.27:  # MLIR bytecode (read in an isolated mlir-opt)
            bytecode = bytecode or bytecode_seeds(relax)
            name, data = rng.choice(bytecode)
            jobs.append(mutate.Job(i, "relax-opt", ["{input}", "-o", os.devnull] + rng.choice(STAGES),
                                   mutate.mutate_bytes(data, rng), "mutant.mlir", name))
        elif r < 0.3:  # whole lit files, split by the driver
            path = rng.choice(lit_files)
            with open(path, "rb") as f:
                data = f.read()
            jobs.append(mutate.Job(i, "relax-opt", ["{input}", "--split-input-file", "-o", os.devnull]
                                   + rng.choice(STAGES), mutate.mutate(data, rng), "mutant.mlir",
                                   os.path.relpath(path, ROOT)))
        else:
            name, data = rng.choice(relax)
            stage = rng.choice(STAGES)
            jobs.append(mutate.Job(i, "relax-opt", ["{input}", "-o", os.devnull] + stage,
                                   mutate.mutate(data, rng), "mutant.mlir", name))
    return jobs


def _write_findings(bad: list[mutate.Outcome]) -> str:
    out_dir = os.environ.get("RELAX_MLIR_FUZZ_OUT", os.path.join(ROOT, "build", "fuzz-malformed"))
    os.makedirs(out_dir, exist_ok=True)
    for o in bad:
        base = os.path.join(out_dir, f"mutant-{o.job.id}")
        with open(base + ".mlir", "wb") as f:
            f.write(o.job.data)
        with open(base + ".txt", "w", encoding="utf-8") as f:
            f.write(f"seed input: {o.job.seed_name}\ncommand: {o.job.tool} {' '.join(o.job.args)}\n"
                    f"findings: {o.findings}\nrc: {o.rc} signal: {o.signal}\n\n{o.out}")
    return out_dir


def summarize(outcomes: list[mutate.Outcome]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for o in outcomes:
        for f in o.findings:
            key = f.split(":", 1)[0]
            counts[key] = counts.get(key, 0) + 1
    return counts


def test_malformed_ir_mutants(tmp_path):
    n = int(os.environ.get("RELAX_MLIR_FUZZ_MUTANTS", "2000"))
    seed = int(os.environ.get("RELAX_MLIR_FUZZ_SEED", "0"))
    workers = int(os.environ.get("RELAX_MLIR_FUZZ_JOBS", str(min(2, os.cpu_count() or 1))))
    jobs = make_jobs(n, seed)
    outcomes = mutate.run_jobs(jobs, workers=workers, workdir=str(tmp_path))
    assert len(outcomes) == n
    # The mutants must exercise the tools, not only their parsers: some succeed, some fail.
    assert any(o.rc == 0 for o in outcomes) and any(o.rc == 1 for o in outcomes)
    bad = [o for o in outcomes if o.findings]
    if bad:
        where = _write_findings(bad)
        lines = [f"{len(bad)} of {n} mutants fail the criteria {summarize(outcomes)}; inputs in {where}"]
        for o in bad[:10]:
            lines.append(f"--- mutant {o.job.id} of {o.job.seed_name} via {o.job.tool} {' '.join(o.job.args[1:])}: "
                         f"{o.findings}\n{o.out[-1500:]}")
        pytest.fail("\n".join(lines))


def test_mutations_are_seeded():
    data = relax_seeds()[0][1]
    a = [mutate.mutate(data, random.Random(k)) for k in range(20)]
    b = [mutate.mutate(data, random.Random(k)) for k in range(20)]
    assert a == b and len(set(a)) > 10


def test_classify_catches_each_failure_kind():
    job = mutate.Job(0, "relax-opt", [], b"", "mutant.mlir")
    ok = mutate.Outcome(job, 1, "/tmp/x/mutant.mlir:3:7: error: 'relax.add' op bad\n")
    whole = mutate.Outcome(job, 1, "/tmp/x/mutant.mlir: error: the input is empty\n")
    assert mutate.classify(ok) == [] and mutate.classify(whole) == []
    assert mutate.classify(mutate.Outcome(job, None, "", signal=6)) == ["signal 6"]
    assert "traceback" in mutate.classify(mutate.Outcome(job, 1, "Traceback (most recent call last):\n error"))
    assert mutate.classify(mutate.Outcome(job, 1, "mutant.mlir: error: internal error in x: TypeError"))
    assert mutate.classify(mutate.Outcome(job, 1, "-:3:7: error: op expects\n"))[0].startswith("unlocated")
    assert mutate.classify(mutate.Outcome(job, 1, "error: something\n"))[0].startswith("unlocated")
    assert mutate.classify(mutate.Outcome(job, 1, ""))
    # bytecode names its own locations; a mutated file name there is still a location (seed 53061)
    bc = mutate.Job(0, "relax-opt", [], b"ML\xefR\x00mutant.ml\x7fr", "mutant.mlir")
    assert mutate.classify(mutate.Outcome(bc, 1, "mutant.ml\\7Fr:3:8: error: 'relax.x' op bad\n")) == []
    assert mutate.classify(mutate.Outcome(bc, 1, "error: something\n"))[0].startswith("unlocated")
