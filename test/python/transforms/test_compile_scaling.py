"""Compile time grows linearly with program size (issue 15): a stack of 24 transformer blocks
compiles (import + relax pipeline + CPU backend) in less than 2.5 times the time of 12. A pass that
rescans the program after each rewrite, as relax-fuse-kernels once did, made 12 layers take 39 s
against 8.6 s for 6 (4.5x); a linear compile takes about 2x. The stacked model is
bench/compile_time.py's; the same script reports the times per layer count."""
from __future__ import annotations

import os
import sys
import time

import relax_mlir

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench"))
import compile_time  # noqa: E402

LIMIT = 2.5


def _compile_seconds(layers: int) -> float:
    from relax_mlir.frontend.jax import from_jax

    t0 = time.perf_counter()
    mod = from_jax(compile_time.stacked(layers), *compile_time.specs(layers))
    exe = relax_mlir.compile(mod, target="cpu")
    t1 = time.perf_counter()
    assert callable(exe)
    return t1 - t0


def test_24_layers_compile_in_under_2_5x_the_time_of_12():
    _compile_seconds(1)  # warm the caches every compile shares (jax tracing, dialect loading)
    t12, t24 = _compile_seconds(12), _compile_seconds(24)
    if t24 >= LIMIT * t12:
        # Once more each, keeping the best of two: a load spike on a shared 2-core machine must
        # not fail the test; a quadratic pass fails both times.
        t12, t24 = min(t12, _compile_seconds(12)), min(t24, _compile_seconds(24))
    assert t24 < LIMIT * t12, f"24 layers took {t24:.2f} s, 12 layers {t12:.2f} s: ratio {t24 / t12:.2f} >= {LIMIT}"
