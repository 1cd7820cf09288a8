"""Shared helper of the tests that go through JAX: export a function with symbolic dims, compile it
ONCE, run it at several bindings and compare every result with jax.jit's.

    mod = check(lambda x: x[::2], [spec((b, 3))], lambda n: [rnd(n, 3)]).module

Without `rtol`/`atol` the comparison is exact (`same`: shape, dtype, values, NaN positions and
signed zeros); with them, shapes and dtypes must still match and the values are `allclose`.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

import relax_mlir


def spec(shape, dtype=None):
    """A `jax.ShapeDtypeStruct` (f32 unless told)."""
    import jax
    import jax.numpy as jnp

    return jax.ShapeDtypeStruct(shape, jnp.float32 if dtype is None else dtype)


def rand(rng: np.random.Generator, shape, dtype=np.float32, ints: tuple[int, int] = (-8, 8)) -> np.ndarray:
    """Test data of `dtype`: integers uniform in [ints[0], ints[1]), floats standard normal."""
    if np.issubdtype(dtype, np.integer):
        return rng.integers(ints[0], ints[1], size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def as_list(v) -> list:
    return list(v) if isinstance(v, (tuple, list)) else [v]


def same(want, got, err_msg: str = "") -> None:
    """Exactly equal: shape, dtype, values; for floats also NaN positions and the signs of zeros."""
    want, got = np.asarray(want), np.asarray(got)
    assert want.shape == got.shape and want.dtype == got.dtype, (err_msg, want.shape, want.dtype, got.shape,
                                                                 got.dtype)
    if want.dtype.kind == "c":  # each part as a float
        same(want.real, got.real, err_msg)
        same(want.imag, got.imag, err_msg)
        return
    np.testing.assert_array_equal(got, want, err_msg=err_msg)
    if want.dtype.kind == "f":  # -0.0 vs 0.0 and NaN positions
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=err_msg)
        num = ~np.isnan(want)  # (a NaN's sign is not specified)
        np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]), err_msg=err_msg)


def close(want, got, rtol: float, atol: float, err_msg: str = "") -> None:
    """Same shape and dtype, values allclose (NaNs equal)."""
    want, got = np.asarray(want), np.asarray(got)
    assert want.shape == got.shape and want.dtype == got.dtype, (err_msg, want.shape, want.dtype, got.shape,
                                                                 got.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=err_msg)


def compare(want, got, rtol: float | None = None, atol: float | None = None, err_msg: str = "") -> None:
    """One result or a tuple of them: as many, each `same` (no tolerance given) or `close`."""
    want, got = as_list(want), as_list(got)
    assert len(got) == len(want), (err_msg, len(got), len(want))
    for w, g in zip(want, got):
        if rtol is None and atol is None:
            same(w, g, err_msg)
        else:
            close(w, g, 1e-7 if rtol is None else rtol, 0.0 if atol is None else atol, err_msg)


class Checked(NamedTuple):
    module: Any  # the imported relax_mlir.Module
    exe: Any  # its executable, compiled once

    @property
    def text(self) -> str:
        return str(self.module)


def check(fn: Callable, specs: Sequence, make_args: Callable, sizes: Sequence, *, rtol: float | None = None,
          atol: float | None = None, cases: bool = False) -> Checked:
    """Export `fn` for `specs`, compile ONCE; at each size n run it on `make_args(n)` (with `cases`,
    on each argument tuple of the list `make_args(n)` gives) and compare with jax.jit(fn)."""
    import jax

    from relax_mlir.frontend.jax import from_jax

    mod = from_jax(fn, *specs)
    exe = relax_mlir.compile(mod)
    ref = jax.jit(fn)
    for n in sizes:
        for args in (make_args(n) if cases else [make_args(n)]):
            compare(ref(*args), exe(*args), rtol, atol, err_msg=f"n = {n}")
    return Checked(mod, exe)
