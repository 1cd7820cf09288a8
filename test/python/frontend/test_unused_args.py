"""jax.export drops the arguments a function does not use from @main; the imported relax function
still takes every argument (in the caller's order) and checks their shapes, as jax.jit does."""
from __future__ import annotations

import numpy as np
import pytest

import relax_mlir

jax = pytest.importorskip("jax")
jnp = jax.numpy

from relax_mlir.frontend.jax import from_jax  # noqa: E402


def _f(a, b, c):
    return b * 2, jnp.arange(a.shape[0])  # a: only its shape is used; c: not used at all


def test_unused_arguments_are_kept_in_order():
    n = jax.export.symbolic_shape("n")[0]
    specs = (jax.ShapeDtypeStruct((n, 3), jnp.bool_), jax.ShapeDtypeStruct((n,), jnp.float32),
             jax.ShapeDtypeStruct((7,), jnp.int32))
    exe = relax_mlir.compile(from_jax(_f, *specs))
    c = np.zeros(7, np.int32)
    for k in (1, 13, 300):
        a, b = np.ones((k, 3), bool), np.arange(k, dtype=np.float32)
        for got, want in zip(exe(a, b, c), jax.jit(_f)(a, b, c)):
            np.testing.assert_array_equal(got, np.asarray(want))
    with pytest.raises(ValueError, match="argument #1 .* must be n"):
        exe(np.ones((2, 3), bool), np.arange(3, dtype=np.float32), c)
    with pytest.raises(ValueError, match="argument #2"):
        exe(np.ones((2, 3), bool), np.arange(2, dtype=np.float32), np.zeros(6, np.int32))
    with pytest.raises(ValueError, match="takes 3 arguments"):
        exe(np.ones((2, 3), bool), np.arange(2, dtype=np.float32))
