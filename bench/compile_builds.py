"""compile() time with every build (RELAX_MLIR_BUILDS=all, the default) against only the first
(RELAX_MLIR_BUILDS=first: the build the smallest calls take; the multi-threaded one waits for a
call that needs it), interleaved in one process: each program over a symbolic dim compiled
alternately under each setting, `--rounds` times; then, under `first`, the first call large
enough to take the deferred build. Prints a markdown table (median wall seconds and their ratio)
with the load average before and after.

    .venv/bin/python bench/compile_builds.py [--rounds 3] [--threads 2]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))


def programs():
    """name -> (exported jax function, a call's arguments at a size taking the threaded build)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import export

    import models

    (n,) = export.symbolic_shape("n")
    f32 = jnp.float32
    d, h = 64, 256  # weights under the threshold: a small call takes the one-thread build
    out = {"mlp": (models.mlp, [jax.ShapeDtypeStruct((n, d), f32), jax.ShapeDtypeStruct((d, h), f32),
                                jax.ShapeDtypeStruct((h, d), f32)],
                   [np.ones((4096, d), np.float32), np.ones((d, h), np.float32) / d, np.ones((h, d), np.float32) / h])}
    dd = 64
    blk = [jax.ShapeDtypeStruct((n, dd), f32), jax.ShapeDtypeStruct((dd,), f32)] + \
        [jax.ShapeDtypeStruct((dd, dd), f32)] * 3 + [jax.ShapeDtypeStruct((dd, 4 * dd), f32),
                                                     jax.ShapeDtypeStruct((4 * dd, dd), f32)]
    blk_args = [np.ones((2048, dd), np.float32), np.ones(dd, np.float32)] + \
        [np.full((dd, dd), 0.01, np.float32)] * 3 + [np.full((dd, 4 * dd), 0.01, np.float32),
                                                     np.full((4 * dd, dd), 0.01, np.float32)]
    out["transformer_block"] = (models.transformer_block, blk, blk_args)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="CPUOptions.num_threads (both builds need >= 2)")
    a = ap.parse_args(argv)
    import relax_mlir
    from relax_mlir import knobs
    from relax_mlir.backend.cpu import CPUOptions
    from relax_mlir.frontend.jax import from_jax

    load0 = os.getloadavg()
    print("| program | compile s, all builds | compile s, first build | ratio | deferred build at its first call, s |")
    print("|---|---|---|---|---|")
    for name, (fn, specs, big) in programs().items():
        times = {"all": [], "first": []}
        deferred = []
        for r in range(a.rounds):
            for setting in (("all", "first") if r % 2 == 0 else ("first", "all")):
                module = from_jax(fn, *specs)
                with knobs.overridden(RELAX_MLIR_BUILDS=setting):
                    t = time.perf_counter()
                    exe = relax_mlir.compile(module, options=CPUOptions(num_threads=a.threads))
                    times[setting].append(time.perf_counter() - t)
                if setting == "first":
                    t = time.perf_counter()
                    exe(*big)
                    deferred.append(time.perf_counter() - t)
        m_all, m_first = statistics.median(times["all"]), statistics.median(times["first"])
        print(f"| {name} | {m_all:.2f} | {m_first:.2f} | {m_first / m_all:.2f} | {statistics.median(deferred):.2f} |")
    load1 = os.getloadavg()
    print(f"\nload average {load0[0]:.2f} before, {load1[0]:.2f} after; {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
