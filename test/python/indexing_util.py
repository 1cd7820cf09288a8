"""Shared helper of the indexing tests: import through jax.export with symbolic dims, compile once,
compare with jax.jit at several bindings (NaNs equal, signed zeros distinguished)."""
from __future__ import annotations

import numpy as np

import relax_mlir


def same(want, got) -> None:
    want, got = np.asarray(want), np.asarray(got)
    assert want.shape == got.shape and want.dtype == got.dtype, (want.shape, want.dtype, got.shape, got.dtype)
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind == "f":  # -0.0 vs 0.0 and NaN positions
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        num = ~np.isnan(want)  # (a NaN's sign is not specified)
        np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))


def check_against_jax(fn, specs, make_args, bindings):
    """Compile fn once from its symbolic export; at each binding, compare with jax.jit(fn)."""
    import jax
    from relax_mlir.frontend.jax import from_jax

    exe = relax_mlir.compile(from_jax(fn, *specs))
    jf = jax.jit(fn)
    for b in bindings:
        args = make_args(b)
        want, got = jf(*args), exe(*args)
        if isinstance(want, (tuple, list)):
            assert isinstance(got, (tuple, list)) and len(got) == len(want)
            for w, g in zip(want, got):
                same(w, g)
        else:
            same(want, got)
    return exe
