"""Benchmark: the examples/demo.py transformer block (layer norm, causal attention, gelu MLP) from
JAX with a symbolic sequence length, compiled ONCE by relax-mlir, vs jax.jit, seq 16..512.
Writes bench/results/transformer.json.

Run: .venv/bin/python bench/transformer.py [--reps R]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    import jax
    import jax.numpy as jnp

    from _jaxbench import run

    rng = np.random.default_rng(0)
    d, h = 64, 128
    w1 = rng.standard_normal((d, h), dtype=np.float32) * 0.1
    w2 = rng.standard_normal((h, d), dtype=np.float32) * 0.1
    g = np.ones(d, np.float32)
    wq, wk, wv = (rng.standard_normal((d, d), dtype=np.float32) * 0.1 for _ in range(3))

    from models import transformer_block as block

    (s,) = jax.export.symbolic_shape("s")
    ws = [g, wq, wk, wv, w1, w2]
    specs = [jax.ShapeDtypeStruct((s, d), jnp.float32)] + [jax.ShapeDtypeStruct(w.shape, w.dtype) for w in ws]
    run("transformer", block, specs, lambda n: [rng.standard_normal((n, d), dtype=np.float32)] + ws,
        (16, 32, 64, 128, 256, 512), reps=a.reps)


if __name__ == "__main__":
    main()
