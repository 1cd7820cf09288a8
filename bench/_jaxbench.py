"""Shared driver for bench/mlp.py, bench/transformer.py and bench/decoder.py: compile ONCE with
relax-mlir (from a JAX export with symbolic dims), then time, interleaved in rounds in one run, relax-mlir
(with and without relax-fuse-kernels) against jax.jit at several shapes; then measure each side's
peak memory per shape in child processes. Writes bench/results/<name>.json.

Peak memory (the "peak_memory" section of the JSON): for each (side, shape) a fresh child process
re-runs the calling script with RELAX_BENCH_MEM_CHILD set. The child compiles its side only (ours:
from_jax + relax_mlir.compile; jax: jax.jit), builds the inputs, makes 3 warm-up calls (jax's
per-shape compile happens here), then resets the kernel's peak-RSS mark (`5` into
/proc/self/clear_refs), makes N calls and reads VmHWM - VmRSS-before-the-calls from
/proc/self/status. That delta is the extra resident memory one call at that shape needs beyond the
resident inputs, weights and compiled code (temporaries, outputs, jax's host->device argument
copies). The children run with glibc's mmap threshold fixed at 64 KiB (MALLOC_MMAP_THRESHOLD_):
otherwise glibc raises it once the warm-up frees its buffers and keeps them in the heap, so the
baseline already holds the call's buffers and the delta reads ~0. Resolution is still coarse: the
kernel batches its RSS counters and allocators reuse pages already resident, so deltas under
~1 MiB are noise (checked on the decoder: a held 2 MiB output showed as +1 MiB at L = 2048, its
8 MiB output as +8 MiB at L = 8192). Where clear_refs cannot be written, the child falls back to
getrusage's ru_maxrss, whose lifetime high-water mark includes the compile and may hide the call.
XLA's static figure, `compiled.memory_analysis()` (temp/output/argument bytes), is recorded beside
it. Set RELAX_BENCH_MEMORY=0 to skip the memory step.
"""
from __future__ import annotations

import gc
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

_CHILD_ENV = "RELAX_BENCH_MEM_CHILD"
_CHILD_TAG = "RELAX_BENCH_MEM_RESULT "
_SCRIPT = os.path.abspath(sys.argv[0])
MEM_CALLS = 10
# Blocks >= 64 KiB are mmap'ed and unmapped on free (no dynamic threshold, no heap caching).
_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "131072"}


ROUNDS = 5  # timing rounds per shape (reps calls per side in all)

def is_memory_child() -> bool:
    """True inside a peak-memory child process (scripts skip their extra work there)."""
    return bool(os.environ.get(_CHILD_ENV))


def _status_kb(field: str) -> int | None:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _mem_child(fn, specs, make_args, spec: dict) -> None:
    """Runs in the child: compile one side, call it at one shape, print the peak-RSS growth."""
    side, n, calls = spec["side"], spec["n"], spec["calls"]
    if side == "ours":
        import relax_mlir
        from relax_mlir.frontend.jax import from_jax

        exe = relax_mlir.compile(from_jax(fn, *specs))
        call = lambda a: exe(*a)  # noqa: E731
    else:
        import jax

        jitted = jax.jit(fn)
        call = lambda a: jax.block_until_ready(jitted(*a))  # noqa: E731
    args = make_args(n)
    for _ in range(3):
        call(args)
    gc.collect()
    before_kb = _status_kb("VmRSS")
    reset = _reset_peak()
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(calls):
        call(args)
    if reset:
        peak_kb = _status_kb("VmHWM")
    else:
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        before_kb = maxrss_before
    # Our storage blocks stay resident between calls (runtime-owned workspace), so they are in
    # the RSS before the calls: count them back in, as memory a call needs.
    ws_kb = exe[exe.main].workspace_bytes() // 1024 if side == "ours" else 0
    res = {"side": side, "n": n, "calls": calls, "rss_before_calls_kb": before_kb, "peak_rss_kb": peak_kb,
           "workspace_kb": ws_kb, "peak_delta_kb": peak_kb - before_kb + ws_kb, "method": "VmHWM-reset" if reset else "ru_maxrss",
           "input_bytes": int(sum(np.asarray(a).nbytes for a in args))}
    print(_CHILD_TAG + json.dumps(res), flush=True)


def _spawn(side: str, n: int, calls: int) -> dict:
    env = dict(os.environ, **_MALLOC_ENV, **{_CHILD_ENV: json.dumps({"side": side, "n": n, "calls": calls})})
    p = subprocess.run([sys.executable, _SCRIPT], env=env, capture_output=True, text=True, timeout=900)
    for line in p.stdout.splitlines():
        if line.startswith(_CHILD_TAG):
            return json.loads(line[len(_CHILD_TAG):])
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    return {"side": side, "n": n, "error": f"child exited {p.returncode}: " + " | ".join(tail)}


def _xla_memory(jitted, args) -> dict | None:
    try:
        m = jitted.lower(*args).compile().memory_analysis()
    except Exception as e:  # not every backend/jax version provides it
        return {"error": f"{type(e).__name__}: {e}"}
    if m is None:
        return None
    keys = ("temp_size_in_bytes", "output_size_in_bytes", "argument_size_in_bytes", "alias_size_in_bytes",
            "generated_code_size_in_bytes")
    return {k: int(getattr(m, k)) for k in keys if hasattr(m, k)}


def _peak_memory(jitted, make_args, shapes, calls: int) -> dict:
    rows = []
    for n in shapes:
        ours, jx = _spawn("ours", n, calls), _spawn("jax", n, calls)
        row = {"n": n, "ours": ours, "jax": jx, "xla_memory_analysis": _xla_memory(jitted, make_args(n))}
        if "peak_delta_kb" in ours and "peak_delta_kb" in jx:
            row["ours_peak_delta_kb"], row["jax_peak_delta_kb"] = ours["peak_delta_kb"], jx["peak_delta_kb"]
            xla = row["xla_memory_analysis"] or {}
            print(f"  memory n={n:5d}  ours +{ours['peak_delta_kb']:7d} KiB  jax +{jx['peak_delta_kb']:7d} KiB  "
                  f"(rss before calls: ours {ours['rss_before_calls_kb'] // 1024} MiB, "
                  f"jax {jx['rss_before_calls_kb'] // 1024} MiB; xla temp {xla.get('temp_size_in_bytes', '-')} B, "
                  f"out {xla.get('output_size_in_bytes', '-')} B)", flush=True)
        else:
            print(f"  memory n={n:5d}  failed: {ours.get('error') or jx.get('error')}", flush=True)
        rows.append(row)
    methods = sorted({r[s]["method"] for r in rows for s in ("ours", "jax") if "method" in r[s]})
    return {
        "method": ("one fresh child process per (side, shape): compile that side, build the inputs, 3 warm-up "
                   "calls, reset the peak-RSS mark (5 > /proc/self/clear_refs), then "
                   f"{calls} calls; peak_delta_kb = VmHWM - VmRSS before the calls (coarse: deltas under ~1 MiB "
                   "are noise, from the kernel's batched RSS counters and allocators reusing resident pages). "
                   "Inputs, weights and compiled code are resident before the calls, so the delta is "
                   "per-call temporaries + outputs (+ jax's argument copies). Children run with glibc "
                   "blocks >= 64 KiB mmap'ed and returned on free (child_env), so freed buffers do not sit "
                   "in the baseline. xla_memory_analysis is jax's compiled.memory_analysis() at that shape."),
        "measured_with": methods, "child_env": dict(_MALLOC_ENV), "calls": calls, "rows": rows,
    }


def interleaved_ms(fns: dict, rounds: int) -> dict:
    """{name: median ms per call}: each round calls every function once, in the dict's order
    (interleaved, so the machine's load falls on all of them alike)."""
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def run(name: str, fn, specs, make_args, shapes, reps: int = 30, rtol=1e-3, atol=1e-3,
        shape_name: str = "n", memory: bool | None = None, extra: dict | None = None) -> dict | None:
    if is_memory_child():
        _mem_child(fn, specs, make_args, json.loads(os.environ[_CHILD_ENV]))
        return None
    if memory is None:
        memory = os.environ.get("RELAX_BENCH_MEMORY", "1") != "0"
    import jax

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax
    from relax_mlir.transforms import PASSES

    t0 = time.perf_counter()
    text = str(from_jax(fn, *specs))  # run_passes below would change a Module in place
    t_export = time.perf_counter() - t0
    t0 = time.perf_counter()
    exe = relax_mlir.compile(text)  # the optimize pipeline (includes relax-fuse-kernels)
    t_compile = time.perf_counter() - t0
    nofuse = [p for p in relax_mlir.OPTIMIZE_PIPELINE if p in PASSES and p != "relax-fuse-kernels"]
    t0 = time.perf_counter()
    exe_nf = relax_mlir.compile(text, passes=nofuse)
    t_compile_nf = time.perf_counter() - t0
    fused_mod = relax_mlir.run_passes(text, [p for p in relax_mlir.OPTIMIZE_PIPELINE if p in PASSES][:-2])
    nf_mod = relax_mlir.run_passes(text, nofuse[:-2])
    kernels = {"fused": str(fused_mod).count('"relax_v.call_tir"'), "unfused": str(nf_mod).count('"relax_v.call_tir"')}

    jitted = jax.jit(fn)
    jax_compile_s = 0.0
    rows = []
    for n in shapes:
        args = make_args(n)
        t0 = time.perf_counter()
        ref = [np.asarray(r) for r in _as_tuple(jax.block_until_ready(jitted(*args)))]
        jax_compile_s += time.perf_counter() - t0
        ours, ours_nf = _as_tuple(exe(*args)), _as_tuple(exe_nf(*args))
        err = max(float(np.max(np.abs(o - r))) for o, r in zip(ours, ref))
        assert len(ours) == len(ref) and all(o.shape == r.shape for o, r in zip(ours, ref)), (name, n)
        assert all(np.allclose(o, r, rtol=rtol, atol=atol) for o, r in zip(ours, ref)), (name, n, err)
        assert all(np.allclose(o, r, rtol=rtol, atol=atol) for o, r in zip(ours_nf, ref)), (name, n)
        ts = {"ours": [], "ours_nofuse": [], "jax": []}
        for _ in range(3):  # warm-up
            exe(*args), exe_nf(*args), jax.block_until_ready(jitted(*args))
        # Interleaved in rounds: each round times every side for a short run of calls after one
        # warm call, so each side runs with its own working set in cache (as a served model
        # does), while load on the shared machine still hits all sides alike. Timing call by
        # call in turn let the unfused build's much larger traffic evict the next side's data:
        # measured on the MLP at batch 512, ours 0.83 ms and jax 0.85 ms alone, but 1.21 and
        # 1.59 ms with the unfused build called between them.
        sides = {"ours": lambda: exe(*args), "ours_nofuse": lambda: exe_nf(*args),
                 "jax": lambda: jax.block_until_ready(jitted(*args))}
        per_round = max(1, reps // ROUNDS)
        for _ in range(ROUNDS):
            for side, call in sides.items():
                call()
                for _ in range(per_round):
                    t = time.perf_counter(); call(); ts[side].append(time.perf_counter() - t)
        med = {k: float(np.median(v)) * 1e3 for k, v in ts.items()}
        row = {"n": n, "ours_ms": med["ours"], "ours_nofuse_ms": med["ours_nofuse"], "jax_ms": med["jax"],
               "ratio_ours_over_jax": med["ours"] / med["jax"],
               "ratio_fused_over_unfused": med["ours"] / med["ours_nofuse"], "max_abs_err": err}
        rows.append(row)
        print(f"{name:12s} {shape_name}={n:5d}  ours {med['ours']:8.3f} ms  (unfused {med['ours_nofuse']:8.3f})  "
              f"jax {med['jax']:8.3f} ms  ours/jax {row['ratio_ours_over_jax']:5.2f}  err {err:.1e}", flush=True)
    jit_compiles = jitted._cache_size() if hasattr(jitted, "_cache_size") else len(shapes)
    out = {
        "model": name, "shape_name": shape_name, "shapes": list(shapes), "reps": reps, "rows": rows,
        "compile": {"relax_mlir_compiles": 1, "relax_mlir_compile_s": t_compile,
                    "relax_mlir_compile_nofuse_s": t_compile_nf, "jax_export_s": t_export,
                    "jax_jit_compiles": jit_compiles, "jax_first_call_total_s": jax_compile_s},
        "call_tir_count": kernels,
        "relax_ops": sorted(set(re.findall(r'"(relax(?:_v)?\.\w+)"', text))),
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
                 "jax": jax.__version__},
    }
    print(f"{name}: relax-mlir 1 compile ({t_compile:.2f} s; {kernels['fused']} kernels fused vs "
          f"{kernels['unfused']} unfused), jax.jit {jit_compiles} compiles ({jax_compile_s:.2f} s first calls)")
    out.update(extra or {})
    if memory:
        print(f"{name}: peak memory, one child process per side and shape ({MEM_CALLS} calls each)", flush=True)
        out["peak_memory"] = _peak_memory(jitted, make_args, shapes, MEM_CALLS)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"{name}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    print("wrote", path)
    return out
