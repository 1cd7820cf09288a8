"""Export differential-fuzzer programs (test/python/fuzz/gen.py) as target="cuda" artifacts, with
their inputs and references, for bench/gpu_fuzz_check.py on a GPU machine without MLIR.

Each seed is first checked on the CPU exactly as the campaign does (`campaign.check_program`,
full pipeline); only programs that pass there are exported, so that a mismatch on the GPU is the
GPU's. Each exported program is compiled ONCE for cuda (a clean refusal of the target is
counted, not exported) and keeps, per binding of its symbols: the inputs, jax.jit's results and
the CPU build's results (which the GPU's are also compared with: the campaign judged those
against jax.jit with its secondary references, wider floats and the like), plus each result's
comparison flags (exact, precision, order dependence, unit scale).

Run: .venv/bin/python bench/export_gpu_fuzz.py OUT_DIR --seeds 2371700-2371739,2362960-2362999
(`--target vulkan`: artifacts that bench/gpu_fuzz_check.py runs here on lavapipe.)
A later run into the same OUT_DIR adds its seeds to index.json. Layout: OUT_DIR/index.json; OUT_DIR/<seed>/ (the artifact), OUT_DIR/<seed>/case.npz and case.json.
bfloat16 arrays are stored as their uint16 bits (npz has no bfloat16), named in case.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))


def seed_list(text: str) -> list[int]:
    """'a-b,c' -> [a, ..., b, c] (inclusive ranges)."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def storable(a) -> tuple[np.ndarray, str]:
    a = np.asarray(a)
    if str(a.dtype) == "bfloat16":
        return a.view(np.uint16), "bfloat16"
    return a, str(a.dtype)


def export_seed(seed: int, out_dir: str, target: str = "cuda") -> dict:
    import jax

    import relax_mlir
    from fuzz import campaign, gen
    from relax_mlir.frontend.jax import import_exported

    prog = gen.generate(seed)
    res = campaign.check_program(prog, "cpu", [None])
    if res["status"] != "ok":
        return {"seed": seed, "status": f"cpu-{res['status']}"}
    text = import_exported(jax.export.export(jax.jit(prog.function()))(*prog.specs()))
    try:
        gpu = relax_mlir.compile(text, target=target)
    except relax_mlir.CompileError as e:
        if campaign.refused_by_target(e, target):
            return {"seed": seed, "status": "refused", "detail": str(e).splitlines()[0][:200]}
        return {"seed": seed, "status": "compile-error", "detail": str(e)[:500]}
    cpu = relax_mlir.compile(text)
    jitted = jax.jit(prog.function(reference=True))
    path = os.path.join(out_dir, str(seed))
    gpu.export(path)
    arrays, bindings = {}, []
    for b, env in enumerate(prog.bindings()):
        args = gen.make_inputs(prog, env)
        want = [np.asarray(w) for w in campaign.as_list(jitted(*args))]
        ours = [np.asarray(g) for g in campaign.as_list(cpu(*args))]
        dtypes = {}
        for kind, vals in (("arg", args), ("want", want), ("cpu", ours)):
            for i, v in enumerate(vals):
                arrays[f"{kind}{b}_{i}"], dtypes[f"{kind}{i}"] = storable(v)
        bindings.append({"env": env, "args": len(args), "results": len(want), "dtypes": dtypes})
    zero = None
    if prog.symbols:  # a symbol bound to 0 (below jax.export's lower bound 1) must be refused
        env0 = {s: 0 for s in prog.symbols}
        for i, v in enumerate(gen.make_inputs(prog, env0)):
            arrays[f"zero_{i}"], _ = storable(v)
        zero = {"env": env0, "args": len(prog.specs()), "dtypes": [storable(v)[1] for v in gen.make_inputs(prog, env0)]}
    np.savez(os.path.join(path, "case.npz"), **arrays)
    case = {"seed": seed, "families": prog.families, "bindings": bindings, "zero": zero,
            "exact": prog.exact_outputs(), "precision": prog.output_precisions(),
            "order_dependent": prog.order_dependent_outputs(), "unit_scale": prog.unit_scale_outputs()}
    with open(os.path.join(path, "case.json"), "w") as f:
        json.dump(case, f, indent=1, default=str)
    kernels = gpu.ptx if target == "cuda" else gpu.artifacts["spirv"]
    return {"seed": seed, "status": "exported", "kernels": len(kernels)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--seeds", required=True, help="comma-separated seeds or inclusive ranges a-b")
    ap.add_argument("--target", choices=("cuda", "vulkan"), default="cuda",
                    help="vulkan: the same check here on lavapipe")
    a = ap.parse_args()
    import jax

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_enable_x64", True)  # as the campaign's workers
    out_dir = os.path.abspath(a.out_dir)
    os.makedirs(out_dir, exist_ok=True)
    seeds = seed_list(a.seeds)
    index = os.path.join(out_dir, "index.json")
    rows = []
    if os.path.exists(index):  # a later run adds its seeds (and replaces their earlier rows)
        with open(index) as f:
            rows = [r for r in json.load(f)["rows"] if r["seed"] not in set(seeds)]
    for seed in seeds:
        t0 = time.perf_counter()
        try:
            row = export_seed(seed, out_dir, a.target)
        except Exception as e:  # reported, the others go on
            row = {"seed": seed, "status": "export-error", "detail": f"{type(e).__name__}: {e}"[:500]}
        row["seconds"] = round(time.perf_counter() - t0, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(index, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print("statuses:", counts)


if __name__ == "__main__":
    main()
