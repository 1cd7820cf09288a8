"""Shared driver for bench/mlp.py and bench/transformer.py: compile ONCE with relax-mlir (from a
JAX export with a symbolic dim), then time, interleaved in one run, relax-mlir (with and without
relax-fuse-kernels) against jax.jit at several shapes. Writes bench/results/<name>.json."""
from __future__ import annotations

import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


def run(name: str, fn, specs, make_args, shapes, reps: int = 30, rtol=1e-3, atol=1e-3) -> dict:
    import jax

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax
    from relax_mlir.transforms import PASSES

    t0 = time.perf_counter()
    text = from_jax(fn, *specs)
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
        ref = np.asarray(jitted(*args).block_until_ready())
        jax_compile_s += time.perf_counter() - t0
        ours = exe(*args)
        ours_nf = exe_nf(*args)
        err = float(np.max(np.abs(ours - ref)))
        assert np.allclose(ours, ref, rtol=rtol, atol=atol), (name, n, err)
        assert np.allclose(ours_nf, ref, rtol=rtol, atol=atol), (name, n)
        ts = {"ours": [], "ours_nofuse": [], "jax": []}
        for _ in range(3):  # warm-up
            exe(*args), exe_nf(*args), jitted(*args).block_until_ready()
        for _ in range(reps):  # interleaved
            t = time.perf_counter(); exe(*args); ts["ours"].append(time.perf_counter() - t)
            t = time.perf_counter(); exe_nf(*args); ts["ours_nofuse"].append(time.perf_counter() - t)
            t = time.perf_counter(); jitted(*args).block_until_ready(); ts["jax"].append(time.perf_counter() - t)
        med = {k: float(np.median(v)) * 1e3 for k, v in ts.items()}
        row = {"n": n, "ours_ms": med["ours"], "ours_nofuse_ms": med["ours_nofuse"], "jax_ms": med["jax"],
               "ratio_ours_over_jax": med["ours"] / med["jax"],
               "ratio_fused_over_unfused": med["ours"] / med["ours_nofuse"], "max_abs_err": err}
        rows.append(row)
        print(f"{name:12s} n={n:5d}  ours {med['ours']:8.3f} ms  (unfused {med['ours_nofuse']:8.3f})  "
              f"jax {med['jax']:8.3f} ms  ours/jax {row['ratio_ours_over_jax']:5.2f}  err {err:.1e}", flush=True)
    jit_compiles = jitted._cache_size() if hasattr(jitted, "_cache_size") else len(shapes)
    out = {
        "model": name, "shapes": list(shapes), "reps": reps, "rows": rows,
        "compile": {"relax_mlir_compiles": 1, "relax_mlir_compile_s": t_compile,
                    "relax_mlir_compile_nofuse_s": t_compile_nf, "jax_export_s": t_export,
                    "jax_jit_compiles": jit_compiles, "jax_first_call_total_s": jax_compile_s},
        "call_tir_count": kernels,
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
                 "jax": jax.__version__},
    }
    print(f"{name}: relax-mlir 1 compile ({t_compile:.2f} s; {kernels['fused']} kernels fused vs "
          f"{kernels['unfused']} unfused), jax.jit {jit_compiles} compiles ({jax_compile_s:.2f} s first calls)")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"{name}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    print("wrote", path)
    return out
