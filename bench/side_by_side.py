"""relax-mlir against XLA (`jax.jit`) and IREE, side by side in one run, interleaved in time.

Each model is exported ONCE with `jax.export` with a symbolic dim; relax-mlir and IREE each compile
that one export once (IREE: `iree-base-compiler`, `llvm-cpu`, the host CPU; run by
`iree-base-runtime`'s local-task driver), jax.jit compiles per shape as its users get it. Weights are
runtime arguments of every side, placed once where the side keeps them (numpy for relax-mlir, device
arrays for jax and IREE); the activation is a fresh numpy array each call. A round calls every side
once at every shape, in turn, each round starting with the next side (a call right after
jax.jit's is slowed by XLA's spinning pool threads); the figure is the median over rounds. Each side's result is checked
against jax.jit's before timing.

    python bench/side_by_side.py [--rounds 15] [--only mlp,attention,block] [--zoo] [--no-iree] [--new-shapes 38]
                                 [--unfused] [--fused-only] [--before] [--growing REPS] [--package DIR] [--json PATH]

`--unfused` adds relax-mlir compiled without relax-fuse-attention (before/after the fused attention
kernel, interleaved in the same rounds); `--fused-only` adds it with relax-fuse-attention{min_keys=0 min_queries=0}
(the fused kernel at every key length, no versioning); `--before` adds relax-mlir without the run-time
library's pool (one-thread OpenBLAS, MLIR's async runtime for threaded builds: `OursBefore`).

Writes bench/results/side_by_side.json and prints a markdown table (ms per call, ratio to XLA).
"first / ord.": relax-mlir's first call at each shape (the warm-up call, wall time) over its median
ordinary call there (issue 18: at most 3); in parentheses the same in the calling thread's CPU
time, which leaves out waiting for a core on a loaded machine (and the share of a multi-threaded
build's workers; process CPU time would count XLA's spinning pool threads). After the rounds,
`--new-shapes N` calls relax-mlir at N shapes it has not seen (the smallest sizes not in the
table, from 2 up), then at the same N again, for three such sets in turn, and prints the first
passes' time over the repeats' (wall and the calling thread's CPU). `--growing REPS` adds
relax-mlir's first calls at shapes growing 17..2047 (each ~1.4x the last, all unseen), each in a
thread of its own whose storage blocks start empty, each over the median of REPS ordinary calls
right after it; three such sequences, the median per position; and, where the executable has
`reserve`, three more after `exe.reserve({sym: largest})`. `--package DIR` imports relax_mlir
from another checkout's python/ folder (`bench/first_calls.py` runs main's and this tree's
alternately); `--json` says where the rows go.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
if "--package" in sys.argv:  # another checkout's relax_mlir (bench/first_calls.py: main against this tree)
    sys.path.insert(0, os.path.abspath(sys.argv[sys.argv.index("--package") + 1]))


# -- the models -------------------------------------------------------------------------------------

def _mlp_case(rng):
    import jax
    import jax.numpy as jnp

    def mlp(x, w1, b1, w2, b2):
        return jax.nn.relu(x @ w1 + b1) @ w2 + b2

    ws = [rng.standard_normal(s, dtype=np.float32) * 0.05 for s in [(512, 2048), (2048,), (2048, 512), (512,)]]
    (b,) = jax.export.symbolic_shape("b")
    specs = [jax.ShapeDtypeStruct((b, 512), jnp.float32)] + [jax.ShapeDtypeStruct(w.shape, w.dtype) for w in ws]
    return "MLP 512-2048-512", "b", mlp, specs, ws, lambda n: rng.standard_normal((n, 512), dtype=np.float32), \
        (1, 7, 32, 128, 512)


def _attention_case(rng, d=256):
    import jax
    import jax.numpy as jnp

    def attention(x, wq, wk, wv):
        q, k, v = x @ wq, x @ wk, x @ wv
        s = (q @ k.T) / np.sqrt(d)
        n = x.shape[0]
        mask = jnp.arange(n)[:, None] >= jnp.arange(n)[None, :]
        return jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1) @ v

    ws = [rng.standard_normal((d, d), dtype=np.float32) * 0.05 for _ in range(3)]
    (s,) = jax.export.symbolic_shape("s")
    specs = [jax.ShapeDtypeStruct((s, d), jnp.float32)] + [jax.ShapeDtypeStruct(w.shape, w.dtype) for w in ws]
    return f"attention d={d}", "s", attention, specs, ws, lambda n: rng.standard_normal((n, d), dtype=np.float32), \
        (16, 64, 128, 512, 2048)


def _block_case(rng, d=256, hidden=1024):
    import jax
    import jax.numpy as jnp
    from models import transformer_block

    ws = [np.ones(d, np.float32)] + [rng.standard_normal((d, d), dtype=np.float32) * 0.05 for _ in range(3)] + \
        [rng.standard_normal((d, hidden), dtype=np.float32) * 0.05, rng.standard_normal((hidden, d), dtype=np.float32) * 0.05]
    (s,) = jax.export.symbolic_shape("s")
    specs = [jax.ShapeDtypeStruct((s, d), jnp.float32)] + [jax.ShapeDtypeStruct(w.shape, w.dtype) for w in ws]
    return f"transformer block d={d}", "s", transformer_block, specs, ws, \
        lambda n: rng.standard_normal((n, d), dtype=np.float32), (16, 64, 128, 512, 2048)


def _zoo_cases():
    """The real-model zoo (test/python/models/zoo.py): every argument per size comes from the case."""
    sys.path.insert(0, os.path.join(HERE, "..", "test", "python", "models"))
    import zoo

    zoo.preload_tensorflow()
    out = []
    for name in sorted(zoo.MODELS):
        if name in zoo.SEPARATE_PROCESS:
            continue  # gemma: its own process (zoo.py); bench/models.py covers it against jax.jit
        out.append((name, zoo.MODELS[name]))
    return out


# -- the sides ----------------------------------------------------------------------------------------

class Ours:
    name = "relax-mlir"
    flat = True  # takes the leaves of the arguments (jax.export flattens pytrees)

    def __init__(self, exported):
        import relax_mlir
        from relax_mlir.frontend.jax import import_exported

        t = time.perf_counter()
        self.exe = relax_mlir.compile(import_exported(exported))
        self.compile_s = time.perf_counter() - t

    def prepare(self, weights):
        return list(weights)

    def __call__(self, x, placed):
        return self.exe(*x, *placed)


class OursBefore(Ours):
    """relax-mlir as it was before the run-time library's pool (this session's baseline): BLAS on
    one thread (OpenBLAS called directly, the generated gemv at one row) and MLIR's async runtime
    for the threaded build's parallel loops. The settings are read when compiling, so both
    builds live in this process side by side."""

    name = "relax-mlir before"

    def __init__(self, exported):
        from relax_mlir import knobs

        with knobs.overridden(RELAX_MLIR_BLAS_THREADS="1", RELAX_MLIR_ASYNC_RUNTIME="mlir"):
            super().__init__(exported)


class OursUnfused(Ours):
    """relax-mlir without relax-fuse-attention (the attention chain as separate kernels)."""
    name = "relax-mlir unfused"

    def __init__(self, exported):
        import relax_mlir
        from relax_mlir.frontend.jax import import_exported
        from relax_mlir.targets import registry

        passes = [p for p in registry().expand(["relax-compile-cpu"]) if p != "relax-fuse-attention"]
        t = time.perf_counter()
        self.exe = relax_mlir.compile(import_exported(exported), passes=passes)
        self.compile_s = time.perf_counter() - t


class OursFusedOnly(Ours):
    """relax-mlir with relax-fuse-attention{min_keys=0 min_queries=0} (the fused kernel at every length)."""
    name = "relax-mlir fused only"

    def __init__(self, exported):
        import relax_mlir
        from relax_mlir.frontend.jax import import_exported
        from relax_mlir.targets import registry

        passes = [p if p != "relax-fuse-attention" else "relax-fuse-attention{min_keys=0 min_queries=0}"
                  for p in registry().expand(["relax-compile-cpu"])]
        t = time.perf_counter()
        self.exe = relax_mlir.compile(import_exported(exported), passes=passes)
        self.compile_s = time.perf_counter() - t


class Xla:
    name = "jax.jit"
    flat = False

    def __init__(self, fn):
        import jax

        self.jax = jax
        self.f = jax.jit(fn)
        self.compile_s = 0.0  # per shape, at the warm-up call

    def prepare(self, weights):
        return [self.jax.device_put(w) for w in weights]

    def __call__(self, x, placed):
        return self.jax.block_until_ready(self.f(*x, *placed))


class Iree:
    name = "IREE"
    flat = True

    def __init__(self, exported):
        import iree.runtime as rt

        # the iree-compile program, not iree.compiler in this process: IREE's Python compiler
        # bundles its own MLIR libraries, whose nanobind symbols clash with the MLIR wheel's
        t = time.perf_counter()
        r = subprocess.run([_iree_compile(), "-", "--iree-input-type=stablehlo", "--iree-hal-target-device=local",
                            "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host",
                            "-o", "-"], input=exported.mlir_module().encode(), capture_output=True, timeout=900)
        if r.returncode != 0:
            raise RuntimeError(r.stderr.decode(errors="replace")[-2000:])
        vmfb = r.stdout
        self.compile_s = time.perf_counter() - t
        self.rt = rt
        self.ctx = rt.SystemContext(config=rt.Config("local-task"))
        vm = rt.VmModule.copy_buffer(self.ctx.instance, vmfb)
        self.ctx.add_vm_module(vm)
        self.f = self.ctx.modules[vm.name]["main"]

    def prepare(self, weights):
        return [self.rt.asdevicearray(self.ctx.config.device, w) for w in weights]

    def __call__(self, x, placed):
        return self.f(*x, *placed)


def _iree_compile() -> str:
    exe = os.path.join(os.path.dirname(sys.executable), "iree-compile")
    return exe if os.path.exists(exe) else shutil.which("iree-compile") or "iree-compile"


def _host(r):
    r = r[0] if isinstance(r, (tuple, list)) and len(r) == 1 else r
    if isinstance(r, (tuple, list)):
        return [_host(e) for e in r]
    return np.asarray(r.to_host() if hasattr(r, "to_host") else r)


def _close(got, want, rtol=2e-3, atol=2e-4) -> bool:
    got, want = _host(got), _host(want)
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(_close(g, w) for g, w in zip(got, want))
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))


def run_model(title, sym, fn, specs, weights, make_x, sizes, rounds, use_iree, new_shapes=0, unfused=False,
              fused_only=False, before=False, growing=0):
    """Times every side at every size, interleaved; returns the rows (dicts)."""
    import jax

    exported = jax.export.export(jax.jit(fn))(*specs)
    sides = [Ours(exported), Xla(fn)] + ([OursUnfused(exported)] if unfused else []) + \
        ([OursFusedOnly(exported)] if fused_only else []) + ([OursBefore(exported)] if before else [])
    iree_error = None
    if use_iree:
        try:
            sides.append(Iree(exported))
        except Exception as e:  # IREE refuses the program: say why, keep the other two
            errs = [ln for ln in str(e).splitlines() if "error:" in ln] or str(e).splitlines()[:1]
            iree_error = errs[0].split("error:", 1)[-1].strip()[:200]
            print(f"  {title}: IREE failed to compile: {iree_error}")
    placed = {s.name: s.prepare(weights) for s in sides}
    inputs = {}
    for n in sizes:
        x = make_x(n)
        x = x if isinstance(x, list) else [x]
        inputs[n] = {False: x, True: [np.asarray(e) for e in jax.tree.leaves(x)]}
    ok, first = {}, {}
    for n in sizes:  # warm up (jax.jit compiles here) and check every side against XLA
        got = {}
        for s in sides:  # relax-mlir first, after a pause: XLA's pool threads do not spin meanwhile
            if s is sides[0]:
                time.sleep(0.1)
            c, t = time.thread_time(), time.perf_counter()
            got[s.name] = s(inputs[n][s.flat], placed[s.name])
            first[(s.name, n)] = time.perf_counter() - t, time.thread_time() - c
        for s in sides:
            ok[(s.name, n)] = _close(got[s.name], got["jax.jit"])
    times = {(s.name, n): [] for s in sides for n in sizes}
    cpu = {n: [] for n in sizes}  # relax-mlir's calls in the calling thread's CPU time
    for r in range(rounds):
        for n in sizes:
            # Each round starts with another side: a call right after jax.jit's runs while XLA's
            # pool threads still spin (measured: the single-head attention at s = 16 took 0.13
            # ms right after an XLA call, 0.08 ms otherwise, whichever relax-mlir build it was).
            for s in sides[r % len(sides):] + sides[:r % len(sides)]:
                args = inputs[n][s.flat]
                c, t = time.thread_time(), time.perf_counter()
                s(args, placed[s.name])
                times[(s.name, n)].append(time.perf_counter() - t)
                if s is sides[0]:
                    cpu[n].append(time.thread_time() - c)
    rows = []
    for n in sizes:
        xla = statistics.median(times[("jax.jit", n)]) * 1e3
        row = {"model": title, "symbol": sym, "n": n, "jax_ms": xla}
        if iree_error:
            row["iree_error"] = iree_error
        for s in sides:
            ms = statistics.median(times[(s.name, n)]) * 1e3
            key = {"relax-mlir": "ours", "jax.jit": "jax", "IREE": "iree", "relax-mlir unfused": "unfused",
                   "relax-mlir fused only": "fused", "relax-mlir before": "before"}[s.name]
            row[f"{key}_ms"] = ms
            row[f"{key}_ratio"] = ms / xla
            row[f"{key}_ok"] = ok[(s.name, n)]
            row[f"{key}_compile_s"] = s.compile_s
            row[f"{key}_first_x"] = first[(s.name, n)][0] * 1e3 / ms
        row["ours_first_cpu_x"] = first[("relax-mlir", n)][1] / max(statistics.median(cpu[n]), 1e-9)
        rows.append(row)
        print(_fmt(row), flush=True)
    if new_shapes:
        rows.append(_new_shapes(title, sym, sides[0], placed[sides[0].name], make_x, sizes, new_shapes))
    if growing:
        rows += _growing_shapes(title, sym, sides[0], placed[sides[0].name], make_x, sizes, growing)
    return rows


GROWING = (17, 23, 33, 47, 67, 95, 135, 191, 271, 383, 543, 767, 1087, 1535, 2047)


def _growing_shapes(title, sym, ours, placed, make_x, sizes, reps, sets=3):
    """relax-mlir's first calls at shapes growing from 17 to 2047 (each ~1.4x the last), each over
    the median of `reps` ordinary calls right after it at that shape (wall, and the calling
    thread's CPU). Each sequence runs in a thread of its own: storage blocks and call buffers are
    per thread, so that thread's blocks grow through the sequence as a fresh program's would (the
    rounds before grew the main thread's to the table's largest shape; one call at the table's
    smallest shape starts the thread). `sets` sequences, every
    shape in them unseen (the next odd size up), and the median over the sets per position: a single
    first call on a loaded 2-core machine is one sample. Where the executable has `reserve` (issue
    18), `sets` more sequences, each thread calling `exe.reserve({sym: its largest shape})` first."""
    import threading

    import jax

    seen = set(sizes)

    def fresh(n):
        while n in seen:
            n += 1
        seen.add(n)
        return n

    def sequence(ns, reserve):
        out = []

        def body():
            # one call at the table's smallest shape first: the thread's own first call (its call
            # buffer, OpenBLAS's buffers for a new calling thread) is not a new shape's cost
            ours([np.asarray(e) for e in jax.tree.leaves(make_x(sizes[0]))], placed)
            if reserve:
                ours.exe.reserve({sym: max(ns)})
            for n in ns:
                x = [np.asarray(e) for e in jax.tree.leaves(make_x(n))]
                c, t = time.thread_time(), time.perf_counter()
                ours(x, placed)
                first, first_cpu = time.perf_counter() - t, time.thread_time() - c
                walls, cpus = [], []
                for _ in range(reps):
                    c, t = time.thread_time(), time.perf_counter()
                    ours(x, placed)
                    walls.append(time.perf_counter() - t)
                    cpus.append(time.thread_time() - c)
                out.append((first / statistics.median(walls), first_cpu / max(statistics.median(cpus), 1e-9),
                            first, statistics.median(walls)))

        t = threading.Thread(target=body)
        t.start()
        t.join()
        return out

    kinds = [("growing", False)] + ([("growing, after reserve", True)] if hasattr(ours.exe, "reserve") else [])
    rows = []
    for kind, reserve in kinds:
        runs, shapes = [], []
        for _ in range(sets):
            ns = [fresh(n) for n in GROWING]
            shapes.append(ns)
            runs.append(sequence(ns, reserve))
        ratios = [statistics.median(r[k][0] for r in runs) for k in range(len(GROWING))]
        cpu_ratios = [statistics.median(r[k][1] for r in runs) for k in range(len(GROWING))]
        worst = max(range(len(GROWING)), key=lambda k: ratios[k])
        row = {"model": title, "symbol": sym, "kind": kind, "shapes": list(GROWING), "sets": shapes,
               "ratios": ratios, "cpu_ratios": cpu_ratios,
               "first_ms": [[g[2] * 1e3 for g in r] for r in runs], "ord_ms": [[g[3] * 1e3 for g in r] for r in runs],
               "ratio_median": statistics.median(ratios), "ratio_max": ratios[worst], "worst": GROWING[worst],
               "cpu_ratio_median": statistics.median(cpu_ratios), "cpu_ratio_max": max(cpu_ratios)}
        rows.append(row)
        print(f"| {title} | {kind}: {sym} = {GROWING[0]}..{GROWING[-1]}, {sets} sets | first / ord., median of "
              f"sets, wall: median {row['ratio_median']:.2f}, max {row['ratio_max']:.2f} ({sym} ~ {row['worst']}); "
              f"CPU: median {row['cpu_ratio_median']:.2f}, max {row['cpu_ratio_max']:.2f} | per shape: "
              + ", ".join(f"{n}: {r:.1f}" for n, r in zip(GROWING, ratios)) + " |", flush=True)
    return rows


def _new_shapes(title, sym, ours, placed, make_x, sizes, count, sets=3):
    """relax-mlir at `count` shapes it has not seen, in a row, against the same shapes again; for
    `sets` sets of unseen shapes in turn (first pass / repeat, wall and process CPU time; the
    median of the sets' ratios)."""
    import jax

    unseen = [n for n in range(2, 2 + sets * count + len(sizes)) if n not in sizes][:sets * count]
    ratios = {"wall": [], "cpu": []}
    totals = {"first": 0.0, "again": 0.0, "first_cpu": 0.0, "again_cpu": 0.0}
    for k in range(sets):
        ns = unseen[k * count:(k + 1) * count]
        xs = {n: [np.asarray(e) for e in jax.tree.leaves(make_x(n))] for n in ns}
        got = {}
        for kind in ("first", "again"):
            c, t = time.thread_time(), time.perf_counter()
            for n in ns:
                ours(xs[n], placed)
            got[kind], got[kind + "_cpu"] = time.perf_counter() - t, time.thread_time() - c
        for key in totals:
            totals[key] += got[key]
        ratios["wall"].append(got["first"] / got["again"])
        ratios["cpu"].append(got["first_cpu"] / max(got["again_cpu"], 1e-9))
    row = {"model": title, "symbol": sym, "new_shapes": unseen, **{f"{k}_ms": v * 1e3 for k, v in totals.items()},
           "ratio": statistics.median(ratios["wall"]), "cpu_ratio": statistics.median(ratios["cpu"]),
           "ratios": ratios}
    print(f"| {title} | {count} new shapes in a row, {sets} sets ({sym} = {unseen[0]}..{unseen[-1]}) | relax-mlir "
          f"first passes / repeats: wall {row['first_ms']:.1f} / {row['again_ms']:.1f} ms, median ratio "
          f"{row['ratio']:.2f}; CPU {row['first_cpu_ms']:.1f} / {row['again_cpu_ms']:.1f} ms, median ratio "
          f"{row['cpu_ratio']:.2f} |", flush=True)
    return row


def _fmt(r) -> str:
    def side(k):
        if f"{k}_ms" not in r:
            return " - | - |"
        bad = "" if r[f"{k}_ok"] else " WRONG"
        return f" {r[f'{k}_ms']:.3f}{bad} | {r[f'{k}_ratio']:.2f} |"
    extra = "".join(side(k) for k in ("unfused", "fused", "before") if f"{k}_ms" in r)
    return (f"| {r['model']} | {r['symbol']} = {r['n']} | {r['jax_ms']:.3f} |{side('ours')} {r['ours_first_x']:.2f} "
            f"({r['ours_first_cpu_x']:.2f}) |{side('iree')}{extra}")


HEADER = ("| model | shape | XLA ms | relax-mlir ms | / XLA | first / ord. | IREE ms | / XLA |\n"
          "|---|---|---|---|---|---|---|---|")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--only", default="mlp,attention,block")
    ap.add_argument("--zoo", action="store_true", help="also the real-model zoo")
    ap.add_argument("--no-iree", action="store_true")
    ap.add_argument("--new-shapes", type=int, default=38, help="relax-mlir's first calls at N unseen shapes (0: off)")
    ap.add_argument("--unfused", action="store_true", help="also relax-mlir without relax-fuse-attention")
    ap.add_argument("--fused-only", action="store_true", help="also relax-mlir with relax-fuse-attention{min_keys=0 min_queries=0}")
    ap.add_argument("--growing", type=int, default=0, metavar="REPS",
                    help="relax-mlir's first calls at shapes growing 17..2047 in a new thread, each over the median "
                         "of REPS ordinary calls (0: off)")
    ap.add_argument("--package", default=None, help="import relax_mlir from this python/ folder instead")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "side_by_side.json"), help="where to write the rows")
    ap.add_argument("--before", action="store_true",
                    help="also relax-mlir without the run-time library's pool (one-thread BLAS, MLIR's async runtime)")
    a = ap.parse_args(argv)
    use_iree = not a.no_iree
    if use_iree:
        try:
            import iree.runtime  # noqa: F401
            if not (os.path.exists(_iree_compile()) or shutil.which("iree-compile")):
                raise ImportError("iree-compile")
        except ImportError:
            print("IREE is not installed (pip install '.[bench]'); running without it")
            use_iree = False
    rng = np.random.default_rng(0)
    load0 = os.getloadavg()
    print(HEADER)
    rows = []
    builders = {"mlp": _mlp_case, "attention": _attention_case, "block": _block_case}
    for key in [k for k in a.only.split(",") if k]:
        rows += run_model(*builders[key](rng), rounds=a.rounds, use_iree=use_iree, new_shapes=a.new_shapes,
                          unfused=a.unfused, fused_only=a.fused_only, before=a.before, growing=a.growing)
    if a.zoo:
        for name, build in _zoo_cases():
            case = build()
            # a zoo case makes every argument per size (its params included): no weights placed once
            rows += run_model(name, "n", case.fn, case.specs, [], lambda n, c=case: list(c.make_args(n)),
                              case.sizes, rounds=a.rounds, use_iree=use_iree)
    load1 = os.getloadavg()
    out = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
           "load_before": load0, "load_after": load1, "rounds": a.rounds, "rows": rows}
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
    print(f"load average before {load0[0]:.2f}, after {load1[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
