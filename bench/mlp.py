"""Benchmark: a 2-layer MLP (bias + gelu epilogue) from JAX with a symbolic batch, compiled ONCE by
relax-mlir, vs jax.jit (one compile per batch size), batch 1..512. Writes bench/results/mlp.json.

Run: .venv/bin/python bench/mlp.py [--reps R]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    import jax
    import jax.numpy as jnp

    from _jaxbench import run

    rng = np.random.default_rng(0)
    d, h = 64, 256
    w1 = rng.standard_normal((d, h), dtype=np.float32) * 0.1
    b1 = rng.standard_normal(h, dtype=np.float32) * 0.1
    w2 = rng.standard_normal((h, d), dtype=np.float32) * 0.1
    b2 = rng.standard_normal(d, dtype=np.float32) * 0.1

    def mlp(x, w1, b1, w2, b2):
        return jnp.tanh(jax.nn.gelu(x @ w1 + b1, approximate=False) @ w2 + b2)

    (b,) = jax.export.symbolic_shape("b")
    specs = [jax.ShapeDtypeStruct((b, d), jnp.float32)] + [jax.ShapeDtypeStruct(w.shape, w.dtype) for w in (w1, b1, w2, b2)]
    run("mlp", mlp, specs, lambda n: [rng.standard_normal((n, d), dtype=np.float32), w1, b1, w2, b2],
        (1, 8, 32, 128, 512), reps=a.reps)


if __name__ == "__main__":
    main()
