"""Convolutions, relax-mlir against jax.jit (XLA's CPU convolution, Eigen), with and without
`relax-conv-to-matmul` (window patches and a matmul, the CPU pipeline's default, against the
direct loop-nest kernel).

One export per convolution with a symbolic batch b, compiled once per pipeline, run at
`--batch`; jax.jit at that shape. Calls interleaved (one of each per round), median of
`--rounds` rounds, ms per call; every result checked against jax.jit first.

    python bench/conv.py --batch 4 --rounds 15
"""
from __future__ import annotations

import argparse
import os
import numpy as np

from _jaxbench import interleaved_ms

# name: (input dims after the batch, kernel dims, strides, padding, dimension numbers)
CASES = {
    "resnet 3x3, 16x16x64": ((16, 16, 64), (3, 3, 64, 64), (1, 1), "SAME", ("NHWC", "HWIO", "NHWC")),
    "3x3, 32x32x32": ((32, 32, 32), (3, 3, 32, 32), (1, 1), "SAME", ("NHWC", "HWIO", "NHWC")),
    "stem 7x7/2, 64x64x3": ((64, 64, 3), (7, 7, 3, 16), (2, 2), "SAME", ("NHWC", "HWIO", "NHWC")),
    "1x1, 16x16x64 -> 128": ((16, 16, 64), (1, 1, 64, 128), (1, 1), "VALID", ("NHWC", "HWIO", "NHWC")),
    "NCHW 3x3, 16x28x28": ((16, 28, 28), (16, 16, 3, 3), (1, 1), "SAME", ("NCHW", "OIHW", "NCHW")),
    "1-D k3/2, 128 x 256 (audio)": ((256, 128), (3, 128, 128), (2,), "VALID", ("NWC", "WIO", "NWC")),
    "1-D k10/5, 1 channel (wav2vec2 stem)": ((4000, 1), (10, 1, 64), (5,), "VALID", ("NWC", "WIO", "NWC")),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    import jax

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax
    from relax_mlir.targets import get_target, registry

    (b,) = jax.export.symbolic_shape("b")
    full = registry().expand(get_target("cpu").pipeline(True))
    direct = [p for p in full if p != "relax-conv-to-matmul"]
    print(f"load average before: {os.getloadavg()}")
    print("| convolution | jax.jit ms | direct kernel ms | patches + matmul ms | direct / jax | patches / jax |")
    print("|---|---|---|---|---|---|")
    for name, (xs, ws, strides, pad, dn) in CASES.items():
        def f(x, w, strides=strides, pad=pad, dn=dn):
            return jax.lax.conv_general_dilated(x, w, strides, pad, dimension_numbers=dn)
        specs = [jax.ShapeDtypeStruct((b, *xs), np.float32), jax.ShapeDtypeStruct(ws, np.float32)]
        exes = [relax_mlir.compile(from_jax(f, *specs), passes=p) for p in (direct, full)]
        ref = jax.jit(f)
        x = np.random.default_rng(0).standard_normal((args.batch, *xs)).astype(np.float32)
        w = np.random.default_rng(1).standard_normal(ws).astype(np.float32)
        want = np.asarray(ref(x, w))
        for exe in exes:
            np.testing.assert_allclose(exe(x, w), want, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(want).max())))
        t = interleaved_ms({"jax": lambda: jax.block_until_ready(ref(x, w)), "direct": lambda: exes[0](x, w),
                            "patches": lambda: exes[1](x, w)}, args.rounds)
        j, d, p = t["jax"], t["direct"], t["patches"]
        print(f"| {name} | {j:.3f} | {d:.3f} | {p:.3f} | {d / j:.2f} | {p / j:.2f} |", flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
