"""Argument conversion checks dtype, rank, shape and symbol bounds before copying anything, and
takes ndarray subclasses (or refuses them with a ValueError naming the argument)."""
from __future__ import annotations

import numpy as np
import pytest

import relax_mlir

SRC = """
func.func @main(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> attributes {relax.symbol_bounds = {n = 1024}} {
  %0 = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %0 : !relax.tensor<["n", 4], f32>
}
"""


@pytest.fixture(scope="module")
def exe():
    return relax_mlir.compile(SRC, optimize=False)


def test_upper_bound_checked_before_copying_a_huge_view(exe):
    # 2^40 x 4 floats as a zero-stride view: copying it would need 16 TiB.
    huge = np.broadcast_to(np.float32(1), (2 ** 40, 4))
    with pytest.raises(ValueError, match=r"symbol n = 1099511627776 .* exceeds its upper bound 1024"):
        exe(huge)


def test_shape_checked_before_copying_a_huge_view(exe):
    huge = np.broadcast_to(np.float32(1), (2 ** 40, 5))
    with pytest.raises(ValueError, match=r"argument #0 has shape \(1099511627776, 5\), but dim 1 must be 4"):
        exe(huge)


def test_non_contiguous_view_within_bounds_runs(exe):
    x = np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4))
    np.testing.assert_allclose(exe(x), np.exp(x), rtol=1e-6)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_ndarray_subclasses(exe):
    m = np.matrix(np.ones((2, 4), np.float32))
    np.testing.assert_allclose(exe(m), np.exp(np.ones((2, 4), np.float32)), rtol=1e-6)

    class Tagged(np.ndarray):
        pass

    t = np.arange(8, dtype=np.float32).reshape(2, 4).view(Tagged)
    out = exe(t)
    assert type(out) is np.ndarray
    np.testing.assert_allclose(out, np.exp(np.asarray(t)), rtol=1e-6)


def test_masked_array_is_refused_by_name(exe):
    ma = np.ma.masked_array(np.ones((2, 4), np.float32), mask=np.eye(2, 4, dtype=bool))
    with pytest.raises(ValueError, match=r"@main: argument #0 is a masked array"):
        exe(ma)


def test_ragged_list_is_a_value_error(exe):
    with pytest.raises(ValueError, match=r"argument #0 cannot be made a numpy array"):
        exe([[1.0, 2.0], [3.0]])


def test_array_likes_are_read_through_numpy(exe):
    """An object with `__array__` (a jax array) is converted like a list; its dtype is still checked."""
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.arange(8, dtype=jnp.float32).reshape(2, 4)
    np.testing.assert_allclose(exe(x), np.exp(np.asarray(x)), rtol=1e-6)
    with pytest.raises(ValueError, match=r"argument #0 has dtype int32, expected float32"):
        exe(jnp.zeros((2, 4), jnp.int32))

    class Opaque:
        pass

    with pytest.raises(ValueError, match=r"argument #0 must be a numpy array, got Opaque"):
        exe(Opaque())
