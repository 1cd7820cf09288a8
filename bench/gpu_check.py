"""On a GPU machine with numpy, CuPy, JAX and a CUDA driver but NO MLIR: load each artifact written
by bench/export_gpu_artifacts.py with `relax_mlir.runtime.load` (CuPy driver), check it against
the stored references at every shape, and time it against jax.jit on the GPU.

Run: bench/gpu_check.sh ARTIFACT_DIR [JSON_OUT]   (or python3 bench/gpu_check.py DIR --json OUT)

Times are medians of warm calls, numpy in and numpy out for relax-mlir (host program interpreted
in Python, inputs uploaded and outputs read back every call). jax.jit is timed twice: numpy in
(the same transfers) and device-resident inputs; both at highest matmul precision (fp32 like our
kernels). Exit status 1 when a result is off or mlir got imported.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))


def median_ms(f, reps: int) -> float:
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e3


def check_one(exe, jitted, a, name, n, rtol, atol, t_load) -> dict:
    """Run one model at one shape against its stored reference and time it; returns the row."""
    import jax

    import model_zoo as zoo

    ref = np.load(os.path.join(a.dir, name, f"ref_{n}.npz"))
    args = [ref[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in ref.files))]
    want = [ref[f"out{i}"] for i in range(sum(k.startswith("out") for k in ref.files))]
    t0 = time.perf_counter()
    got = zoo.as_list(exe(*args))
    t_first = time.perf_counter() - t0
    good = len(got) == len(want) and all(
        g.shape == w.shape and np.allclose(g, w, rtol=rtol, atol=atol) for g, w in zip(got, want))
    err = max((float(np.max(np.abs(g - w))) if w.size else 0.0 for g, w in zip(got, want)
               if g.shape == w.shape), default=float("inf"))
    jax_err = max(float(np.max(np.abs(np.asarray(j) - w))) if w.size else 0.0
                  for j, w in zip(zoo.as_list(jitted(*args)), want))
    dev = [jax.device_put(x) for x in args]
    t_ours = median_ms(lambda: exe(*args), a.reps)
    t_jax_np = median_ms(lambda: jax.block_until_ready(jitted(*args)), a.reps)
    t_jax_dev = median_ms(lambda: jax.block_until_ready(jitted(*dev)), a.reps)
    row = {"model": name, "n": n, "ok": good, "max_abs_err": err, "jax_max_abs_err": jax_err,
           "ours_ms": t_ours, "jax_numpy_in_ms": t_jax_np, "jax_device_in_ms": t_jax_dev,
           "ours_first_call_s": t_first, "load_s": t_load}
    print(f"{name:18s} {n:5d} {t_ours:9.3f} {t_jax_np:11.3f} {t_jax_dev:12.3f} {t_ours / t_jax_np:9.2f} "
          f"{err:9.1e} {'yes' if good else 'NO':>3s}", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--json", default=None)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    with open(os.path.join(a.dir, "index.json")) as f:
        index = json.load(f)

    from relax_mlir.runtime import load
    from relax_mlir.runtime.cuda import CudaUnavailable

    import jax

    import model_zoo as zoo

    jax.config.update("jax_default_matmul_precision", "highest")
    fns = {name: m.fn for name, m in zoo.MODELS.items()}
    rtol, atol = index["rtol"], index["atol"]
    rows, ok = [], True
    print(f"jax devices: {jax.devices()}")
    print(f"{'model':18s} {'n':>5s} {'ours ms':>9s} {'jax(np) ms':>11s} {'jax(dev) ms':>12s} {'ours/jax':>9s} "
          f"{'max|err|':>9s} {'ok':>3s}")
    for m in index["models"]:
        name = m["name"]
        t0 = time.perf_counter()
        exe = load(os.path.join(a.dir, name))
        t_load = time.perf_counter() - t0
        jitted = jax.jit(fns[name])
        for n in m["shapes"]:
            try:
                row = check_one(exe, jitted, a, name, n, rtol, atol, t_load)
            except CudaUnavailable:
                raise
            except Exception as e:  # a failing model must not hide the others
                row = {"model": name, "n": n, "ok": False, "error": f"{type(e).__name__}: {e}"}
                print(f"{name:18s} {n:5d} FAILED {row['error'][:300]}", flush=True)
            ok &= row["ok"]
            rows.append(row)
    mlir_loaded = any(k == "mlir" or k.startswith("mlir.") for k in sys.modules)
    ok &= not mlir_loaded
    print(f"mlir imported: {mlir_loaded}; all results within rtol={rtol} atol={atol}: {ok}")
    out = {"ok": ok, "mlir_imported": mlir_loaded, "rows": rows, "rtol": rtol, "atol": atol,
           "host": {"python": platform.python_version(), "machine": platform.machine(), "jax": jax.__version__,
                    "devices": [str(d) for d in jax.devices()]}}
    try:
        import cupy

        out["host"]["cupy"] = cupy.__version__
        out["host"]["gpu"] = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(errors="replace")
    except Exception as e:  # the check above already ran on CuPy; this is only a label
        out["host"]["cupy"] = f"unknown ({e})"
    path = a.json or os.path.join(a.dir, "gpu_check.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", path)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
