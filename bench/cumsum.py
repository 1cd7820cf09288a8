"""Cumulative sums: relax-mlir's O(n) scan (Kahan-compensated for f32) against jax.jit, interleaved
(one call of each in turn, best of the repeats), with the largest relative error of either against
the float64 running sum. One compile per shape family (symbolic n).

    python bench/cumsum.py [--repeats 15]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import numpy as np  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    import jax
    import jax.numpy as jnp

    import relax_mlir

    n = jax.export.symbolic_shape("n")[0]
    cases = [("1-D", (n,), 0, [(1 << 10,), (1 << 16,), (1 << 20,)]),
             ("axis 0 of [n, 64]", (n, 64), 0, [(1024, 64), (16384, 64)]),
             ("axis 1 of [64, n]", (64, n), 1, [(64, 1024), (64, 16384)])]
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    print(f"{'case':22s} {'shape':>14s} {'ours ms':>9s} {'jax ms':>9s} {'ratio':>6s} {'ours err':>9s} {'jax err':>9s}")
    rng = np.random.default_rng(0)
    for name, spec, axis, shapes in cases:
        def fn(x, axis=axis):
            return jnp.cumsum(x, axis=axis)
        exe = relax_mlir.compile(jax.export.export(jax.jit(fn))(jax.ShapeDtypeStruct(spec, jnp.float32)))
        jf = jax.jit(fn)
        for shape in shapes:
            x = rng.random(shape).astype(np.float32)
            exact = np.cumsum(x.astype(np.float64), axis=axis)
            ours, ref = np.asarray(exe(x), np.float64), np.asarray(jf(x), np.float64)
            t_ours, t_jax = [], []
            for _ in range(args.repeats):
                t = time.perf_counter()
                exe(x)
                t_ours.append(time.perf_counter() - t)
                t = time.perf_counter()
                jf(x).block_until_ready()
                t_jax.append(time.perf_counter() - t)
            a, b = min(t_ours) * 1e3, min(t_jax) * 1e3
            err = lambda v: float(np.max(np.abs(v - exact) / np.abs(exact)))  # noqa: E731
            print(f"{name:22s} {str(shape):>14s} {a:9.3f} {b:9.3f} {a / b:6.2f} {err(ours):9.1e} {err(ref):9.1e}",
                  flush=True)


if __name__ == "__main__":
    main()
