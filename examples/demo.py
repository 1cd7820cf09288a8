"""The main job: export JAX models with symbolic dims, import, compile ONCE, run several shapes.

Prints a table: shape, relax-mlir time, jax.jit time, jax.jit compile count vs ours (one).
"""
from __future__ import annotations

import time

import numpy as np


def median_time(f, reps=20):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2]


def main() -> None:
    import jax
    import jax.numpy as jnp

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    rng = np.random.default_rng(0)
    d, h = 64, 128
    w1 = rng.standard_normal((d, h), dtype=np.float32) * 0.1
    w2 = rng.standard_normal((h, d), dtype=np.float32) * 0.1
    g = np.ones(d, np.float32)
    wq, wk, wv = (rng.standard_normal((d, d), dtype=np.float32) * 0.1 for _ in range(3))

    from models import mlp

    from models import transformer_block as block

    (b,) = jax.export.symbolic_shape("b")
    (s,) = jax.export.symbolic_shape("s")
    models = [
        ("mlp", mlp, [jax.ShapeDtypeStruct((b, d), jnp.float32), w1, w2], lambda n: [rng.standard_normal((n, d), dtype=np.float32), w1, w2],
         (1, 7, 64, 256)),
        ("transformer block", block, [jax.ShapeDtypeStruct((s, d), jnp.float32), g, wq, wk, wv, w1, w2],
         lambda n: [rng.standard_normal((n, d), dtype=np.float32), g, wq, wk, wv, w1, w2], (16, 31, 64, 128)),
    ]
    print(f"{'model':18s} {'shape':>6s} {'relax-mlir ms':>14s} {'jax.jit ms':>11s} {'max |err|':>10s}")
    for name, fn, specs, make, shapes in models:
        specs = [sp if isinstance(sp, jax.ShapeDtypeStruct) else jax.ShapeDtypeStruct(sp.shape, sp.dtype) for sp in specs]
        t0 = time.perf_counter()
        mod = from_jax(fn, *specs)
        exe = relax_mlir.compile(mod)
        ct = time.perf_counter() - t0
        jitted = jax.jit(fn)
        for n in shapes:
            args = make(n)
            ours = exe(*args)
            ref = np.asarray(jitted(*args))
            err = float(np.max(np.abs(ours - ref)))
            assert np.allclose(ours, ref, rtol=1e-3, atol=1e-3), (name, n, err)
            t_ours = median_time(lambda: exe(*args))
            t_jax = median_time(lambda: jitted(*args).block_until_ready())
            print(f"{name:18s} {n:6d} {t_ours * 1e3:14.3f} {t_jax * 1e3:11.3f} {err:10.2e}")
        jit_compiles = jitted._cache_size() if hasattr(jitted, "_cache_size") else len(shapes)
        print(f"{name:18s} compiles: relax-mlir 1 ({ct:.2f} s, one artifact for every shape), jax.jit {jit_compiles}")


if __name__ == "__main__":
    main()
