"""Forward-mode derivatives of pools, relax-mlir against jax.jit (session 29).

jax writes the jvp of a max / min pool as a variadic reduce_window that selects each window's
tangent with its value; relax-mlir unrolls it over the window's positions into elementwise
selections on strided window slices (frontend/stablehlo/window.py). One export per function with a
symbolic batch, compiled once by relax-mlir; jax.jit per shape. Calls interleaved (one of each side
per round), median of `--rounds` rounds, ms per call; results checked against jax.jit first.

    python bench/forward_mode.py --batches 1,8,32 --rounds 15
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from _jaxbench import interleaved_ms


def functions():
    import jax
    import jax.numpy as jnp
    from jax import lax

    def max_pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), [(0, 0), (1, 1), (1, 1), (0, 0)])

    w = np.random.default_rng(0).standard_normal((3, 3, 16, 16)).astype(np.float32) * 0.1

    def cnn(x):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.mean(max_pool(jax.nn.relu(y)) ** 2)

    return {
        "jvp of max pool 3x3/2, 32x32x16": lambda x, t: jax.jvp(max_pool, (x,), (t,)),
        "hvp of conv + relu + max pool": lambda x, t: jax.jvp(jax.grad(cnn), (x,), (t,)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    import jax

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    (b,) = jax.export.symbolic_shape("b")
    spec = jax.ShapeDtypeStruct((b, 32, 32, 16), np.float32)
    print(f"load average before: {os.getloadavg()}")
    print("| function | batch | jax.jit ms | relax-mlir ms | relax-mlir / jax |")
    print("|---|---|---|---|---|")
    for name, fn in functions().items():
        exe = relax_mlir.compile(from_jax(fn, spec, spec))
        ref = jax.jit(fn)
        for n in (int(v) for v in args.batches.split(",")):
            rng = np.random.default_rng(n)
            x, t = (rng.standard_normal((n, 32, 32, 16)).astype(np.float32) for _ in range(2))
            for g, want in zip(exe(x, t), ref(x, t)):
                np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-3, atol=1e-4)
            ms = interleaved_ms({"jax": lambda: jax.block_until_ready(ref(x, t)), "ours": lambda: exe(x, t)},
                                args.rounds)
            print(f"| {name} | {n} | {ms['jax']:.3f} | {ms['ours']:.3f} | {ms['ours'] / ms['jax']:.2f} |", flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
