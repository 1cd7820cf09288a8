"""FFTs, relax-mlir against jax.jit (XLA's CPU FFT, DUCC).

relax-mlir imports `stablehlo.fft` as discrete Fourier transforms built from matrix products
(frontend/stablehlo/complex.py: one twiddle table up to length 512, Cooley-Tukey splits above), so
its cost grows as n^2 per row up to 512 where DUCC's grows as n log n: this script shows where
that stands. One export per (function, length) with a symbolic batch b, compiled once by
relax-mlir, run at every batch; jax.jit per shape. Calls interleaved (one of each side per round),
median of `--rounds` rounds, ms per call; results checked against jax.jit first.

    python bench/fft.py --lengths 64,512,4096 --batches 1,64 --rounds 15
"""
from __future__ import annotations

import argparse
import os
import numpy as np

from _jaxbench import interleaved_ms


def functions():
    import jax.numpy as jnp

    def parts(z):
        return z.real, z.imag

    return {
        "rfft": lambda x: parts(jnp.fft.rfft(x)),
        "fft": lambda x: parts(jnp.fft.fft(x)),
        "irfft(rfft)": lambda x: jnp.fft.irfft(jnp.fft.rfft(x), n=x.shape[-1]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="64,512,4096")
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    import jax
    import jax.numpy as jnp

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    (b,) = jax.export.symbolic_shape("b")
    print(f"load average before: {os.getloadavg()}")
    print("| function | length | batch | jax.jit ms | relax-mlir ms | / jax |")
    print("|---|---|---|---|---|---|")
    for name, f in functions().items():
        for n in (int(s) for s in args.lengths.split(",")):
            exe = relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((b, n), jnp.float32)))
            ref = jax.jit(f)
            for m in (int(s) for s in args.batches.split(",")):
                x = np.random.default_rng(m).standard_normal((m, n)).astype(np.float32)
                want = [np.asarray(w) for w in jax.tree.leaves(ref(x))]
                got = exe(x)
                got = list(got) if isinstance(got, (list, tuple)) else [got]
                for g, w in zip(got, want):
                    np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4 * max(1.0, float(np.abs(w).max())))
                t = interleaved_ms({"ours": lambda: exe(x), "jax": lambda: jax.block_until_ready(ref(x))},
                                   args.rounds)
                a, c = t["jax"], t["ours"]
                print(f"| {name} | {n} | {m} | {a:.3f} | {c:.3f} | {c / a:.2f} |", flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
