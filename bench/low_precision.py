"""bf16 / f16 products, relax-mlir against jax.jit: a Llama feed-forward block (SwiGLU,
d = 1024, hidden 2816) with bf16 (or f16) weights and activations, at 1, 8 and 64 rows.

relax-mlir computes f16/bf16 dots in f32 (the operands converted, the f32 matmul kernels, one
rounding at the end), as XLA's CPU backend does. One export with a symbolic row count compiled
once; jax.jit per shape. Calls interleaved, median of `--rounds` rounds, ms per call; results
checked against jax.jit first (within two ulps of the output's scale).

    python bench/low_precision.py --dtype bfloat16 --rows 1,8,64 --rounds 15
"""
from __future__ import annotations

import argparse
import os
import numpy as np

from _jaxbench import interleaved_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--rows", default="1,8,64")
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=2816)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    import jax
    import jax.numpy as jnp

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    dt = jnp.dtype(args.dtype)

    def ffn(x, w1, w2, w3):
        return (jax.nn.silu(x @ w1) * (x @ w2)) @ w3

    (m,) = jax.export.symbolic_shape("m")
    d, h = args.d, args.hidden
    shapes = [(d, h), (d, h), (h, d)]
    exe = relax_mlir.compile(from_jax(ffn, jax.ShapeDtypeStruct((m, d), dt),
                                      *[jax.ShapeDtypeStruct(s, dt) for s in shapes]))
    ref = jax.jit(ffn)
    rng = np.random.default_rng(0)
    ws = [(rng.standard_normal(s) * 0.02).astype(dt) for s in shapes]
    print(f"load average before: {os.getloadavg()}")
    print(f"| rows | jax.jit ms | relax-mlir ms | / jax |   ({args.dtype}, d = {d}, hidden {h})")
    print("|---|---|---|---|")
    for rows in (int(r) for r in args.rows.split(",")):
        x = rng.standard_normal((rows, d)).astype(dt)
        got, want = np.asarray(exe(x, *ws), np.float32), np.asarray(ref(x, *ws), np.float32)
        scale = float(np.abs(want).max())
        assert float(np.abs(got - want).max()) <= 2 * float(jnp.finfo(dt).eps) * scale
        t = interleaved_ms({"jax": lambda: jax.block_until_ready(ref(x, *ws)), "ours": lambda: exe(x, *ws)},
                           args.rounds)
        a, c = t["jax"], t["ours"]
        print(f"| {rows} | {a:.3f} | {c:.3f} | {c / a:.2f} |", flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
