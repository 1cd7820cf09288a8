"""Benchmark: one GPT-style decoder layer generating one token against a KV cache of symbolic
length L (multi-head: caches [h, L, dh]), compiled ONCE by relax-mlir, vs jax.jit (one compile per
L), at L = 1, 16, 127, 512, 2048. Writes bench/results/decoder.json.

    x [1, d], k_cache, v_cache [h, L, dh]
    xn = layer_norm(x); q, k, v = heads(xn @ wq), heads(xn @ wk), heads(xn @ wv)
    K, V = concat([k_cache, k], axis=1), concat([v_cache, v], axis=1)     # [h, L+1, dh]
    a = merge_heads(softmax(q K^T / sqrt(dh)) V)       # the new token sees every position
    y = x + a @ wo; out = y + gelu(layer_norm(y) @ w1) @ w2             -> (out, K, V)

Run: .venv/bin/python bench/decoder.py [--reps R]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

D, FFN = 128, 512


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    import jax
    import jax.numpy as jnp

    from _jaxbench import run
    from models import DECODER_HEADS as HEADS, decoder_layer as decoder

    DH = D // HEADS

    rng = np.random.default_rng(0)

    def mat(*shape):
        return rng.standard_normal(shape, dtype=np.float32) * 0.1

    ws = [np.ones(D, np.float32), np.zeros(D, np.float32), mat(D, D), mat(D, D), mat(D, D), mat(D, D),
          np.ones(D, np.float32), np.zeros(D, np.float32), mat(D, FFN), mat(FFN, D)]

    f32 = jnp.float32
    (n,) = jax.export.symbolic_shape("L")
    specs = [jax.ShapeDtypeStruct((1, D), f32), jax.ShapeDtypeStruct((HEADS, n, DH), f32),
             jax.ShapeDtypeStruct((HEADS, n, DH), f32)] + [jax.ShapeDtypeStruct(w.shape, w.dtype) for w in ws]
    extra = {"layer": {"d_model": D, "heads": HEADS, "d_head": DH, "ffn": FFN, "new_tokens": 1,
                       "cache_layout": "[heads, L, d_head]", "symbolic_dims": ["L"]}}

    def make_args(length):
        x = rng.standard_normal((1, D), dtype=np.float32)
        kc = rng.standard_normal((HEADS, length, DH), dtype=np.float32)
        vc = rng.standard_normal((HEADS, length, DH), dtype=np.float32)
        return [x, kc, vc] + ws

    if os.environ.get("DECODER_DUMP"):  # the imported relax module, for profiling
        from relax_mlir.frontend.jax import from_jax

        with open(os.environ["DECODER_DUMP"], "w") as f:
            f.write(str(from_jax(decoder, *specs)))
        return
    run("decoder", decoder, specs, make_args, (1, 16, 127, 512, 2048), reps=a.reps, shape_name="L", extra=extra)


if __name__ == "__main__":
    main()
