"""Matrix-vector speed of the LLM decode step's weight products: GB/s of W read per call.

    python bench/gemv.py [--shapes 1024x1024,1024x256,1024x2816,2816x1024,1024x32000] [--rows 1,2,4]
                         [--pool-mib 640] [--budget 0.3] [--cpu]
                         [--impls ours1,ours2,old1,old2,sgemv1,sgemm1,sgemm2,jax]

`[m, K] x [K, N]` with the weights row-major `[K, N]` (x @ W), f32, as the decode step of
bench/llm.py's Llama (d = 1024, KV 256, SwiGLU 2816, vocab 32000) at batch m. Each call reads a
different copy of W from a pool of `--pool-mib` MiB (the decode step streams 766 MiB of weights per
token: more than this machine's L3 shares with its neighbours), so the numbers are the memory-bound
ones the decode step sees, not those of a W resident in cache.

Implementations, called alternately (one call of each per round, `--budget` seconds per shape and
row count in all), the median per implementation:

* ours1 / ours2: the generated kernel (backend/cpu_matmul.py, ONE compile with dynamic M; the
  variant for each M is chosen inside the kernel), built for 1 and for 2 threads;
* old1 / old2: the same without the gemv variant and with every streaming variant split over the
  threads (the schedule before the gemv variant: M = 1 ran the small 4 x 64 tile, rows padded);
* sgemv1: OpenBLAS `cblas_sgemv` (m = 1 only), one thread; sgemm1 / sgemm2: `cblas_sgemm`, one and
  two threads (the thread count switched around the call, as runtime/library.py does);
* jax: `jax.jit(lambda x, w: x @ w)` (XLA's CPU runtime, its own thread pool).

The load average is printed with the table; compare ratios of one run only. On a loaded machine
a call longer than a scheduler time slice is preempted in proportion to the load (the 131 MB vocab
projection takes 10-30 ms): `--cpu` prints, for the single-threaded implementations, GB/s over the
calling thread's CPU time (`time.thread_time`) instead, which leaves out the time spent waiting.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import time

import numpy as np


def _blas():
    from relax_mlir.runtime import library

    lib = library.load()
    p, i, f = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
    gemm = lib.scipy_cblas_sgemm
    gemm.argtypes = [i] * 6 + [f, p, i, p, i, f, p, i]
    gemv = lib.scipy_cblas_sgemv
    gemv.argtypes = [i, i, i, i, f, p, i, p, i, f, p, i]
    return lib.scipy_openblas_set_num_threads, gemm, gemv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="1024x1024,1024x256,1024x2816,2816x1024,1024x32000")
    ap.add_argument("--rows", default="1,2,4")
    ap.add_argument("--pool-mib", type=int, default=640)
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--impls", default="ours1,ours2,old1,old2,sgemv1,sgemm1,sgemm2,jax")
    ap.add_argument("--cpu", action="store_true", help="GB/s over thread CPU time (single-threaded impls)")
    args = ap.parse_args()
    impls = args.impls.split(",")
    rows = [int(r) for r in args.rows.split(",")]
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]

    from relax_mlir.backend.cpu_matmul import MatmulConfig, compile_matmul

    old = MatmulConfig(gemv_m_max=0, stream_parallel_min=0)

    setn, gemm, gemv = _blas()
    jfn = None
    if "jax" in impls:
        import jax

        jfn = jax.jit(lambda x, w: x @ w)
    rng = np.random.default_rng(0)
    print(f"load average {os.getloadavg()}")
    unit = "GB/s of W over thread CPU time" if args.cpu else "GB/s of W"
    print(f"{'K x N':>11s} {'m':>2s} " + " ".join(f"{n:>7s}" for n in impls) + f"   ({unit})")
    for k, n in shapes:
        ours = {f"ours{t}": compile_matmul(None, k, n, num_threads=t) for t in (1, 2) if f"ours{t}" in impls}
        ours.update({f"old{t}": compile_matmul(None, k, n, num_threads=t, config=old) for t in (1, 2)
                     if f"old{t}" in impls})
        copies = max(2, (args.pool_mib << 20) // (k * n * 4))
        pool = [rng.standard_normal((k, n), dtype=np.float32) * 0.02 for _ in range(copies)]
        jpool = [jax.device_put(w) for w in pool] if jfn else []
        for m in rows:
            x = rng.standard_normal((m, k), dtype=np.float32)
            jx = jax.device_put(x) if jfn else None
            out = np.zeros((m, n), np.float32)
            ref = x.astype(np.float64) @ pool[0].astype(np.float64)
            state = {"i": 0}

            def w():
                state["i"] = (state["i"] + 1) % copies
                return pool[state["i"]]

            fns = {}
            for name, fn in ours.items():
                fns[name] = lambda fn=fn: fn(x, w(), out)
            if m == 1:
                fns["sgemv1"] = lambda: gemv(101, 112, k, n, 1.0, w().ctypes.data, n, x.ctypes.data, 1, 0.0,
                                             out.ctypes.data, 1)

            def sgemm(t):
                def run():
                    if t > 1:
                        setn(t)
                    gemm(101, 111, 111, m, n, k, 1.0, x.ctypes.data, k, w().ctypes.data, n, 0.0,
                         out.ctypes.data, n)
                    if t > 1:
                        setn(1)
                return run
            fns["sgemm1"], fns["sgemm2"] = sgemm(1), sgemm(2)
            if jfn:
                def jrun():
                    state["i"] = (state["i"] + 1) % copies
                    jfn(jx, jpool[state["i"]]).block_until_ready()
                fns["jax"] = jrun
            fns = {name: fns[name] for name in impls if name in fns}
            for name, fn in fns.items():  # warm up and check each against float64
                state["i"] = copies - 1
                out[:] = np.nan
                fn()
                got = np.asarray(jfn(jx, jpool[0])) if name == "jax" else out
                err = np.max(np.abs(got - ref)) / max(1e-30, np.max(np.abs(ref)))
                assert err < 1e-4, (name, k, n, m, err)
            times = {name: [] for name in fns}
            clock = time.thread_time if args.cpu else time.perf_counter
            end = time.perf_counter() + args.budget * len(fns)
            while time.perf_counter() < end or min(len(v) for v in times.values()) < 5:
                for name, fn in fns.items():
                    t0 = clock()
                    fn()
                    times[name].append(clock() - t0)
            if args.cpu:  # the calling thread's CPU time says nothing about multi-threaded calls
                times = {name: v for name, v in times.items() if name in ("ours1", "old1", "sgemv1", "sgemm1")}
            gbs = {name: k * n * 4 / statistics.median(v) / 1e9 for name, v in times.items()}
            cells = " ".join(f"{gbs[i]:7.1f}" if i in gbs else f"{'-':>7s}" for i in impls)
            ratio = ""
            if "jax" in gbs:
                ratio = "  " + " ".join(f"{i}={gbs[i] / gbs['jax']:.2f}" for i in gbs if i.startswith("ours"))
            elif "old1" in gbs and "ours1" in gbs:
                ratio = f"  ours1/old1={gbs['ours1'] / gbs['old1']:.2f}"
            print(f"{k:5d}x{n:<5d} {m:2d} {cells}{ratio}", flush=True)
        del pool, jpool
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
