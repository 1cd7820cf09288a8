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


def test_a_view_too_big_to_copy_is_a_value_error_naming_it():
    """A zero-stride view of 2^45 floats (128 TiB, more than the address space) passes the shape
    checks of an unbounded symbol; its contiguous copy fails: a ValueError naming the argument
    (was numpy's MemoryError)."""
    unbounded = relax_mlir.compile(SRC.replace(" attributes {relax.symbol_bounds = {n = 1024}}", ""), optimize=False)
    huge = np.broadcast_to(np.float32(1), (2 ** 45, 4))
    with pytest.raises(ValueError, match=r"argument #0 is a non-contiguous \(35184372088832, 4\) float32 view: "
                                         r"its C-contiguous copy \(524288.0 GiB\) cannot be allocated"):
        unbounded(huge)


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


def test_bool_bytes_other_than_0_and_1_are_true():
    """A bool argument whose bytes are not 0 / 1 (uint8 data viewed as bool, a foreign buffer)
    reads as numpy and jax.jit's select read it, any nonzero byte true (it was its lowest bit:
    2 and 4 were false)."""
    src = """
func.func @main(%c: !relax.tensor<["n"], i1>, %y: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> {
  %m = "relax.negative"(%y) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  %r = "relax.where"(%c, %y, %m) : (!relax.tensor<["n"], i1>, !relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %r : !relax.tensor<["n"], f32>
}
"""
    exe = relax_mlir.compile(src)
    c = np.array([0, 1, 2, 255, 4, 128, 0], np.uint8).view(np.bool_)
    y = np.arange(1, 8, dtype=np.float32)
    np.testing.assert_array_equal(exe(c, y), np.where(c.view(np.uint8) != 0, y, -y))


def test_python_numbers_take_the_parameter_dtype():
    """A Python int or float is converted to the parameter's dtype where its value fits, as
    jax.jit takes a weakly typed scalar; otherwise the dtype error names the argument. (A list
    keeps numpy's dtype and its exact-dtype check: test_partial.py.)"""
    src = """
func.func @main(%x: !relax.tensor<["n"], f32>, %k: !relax.tensor<[], i32>) -> !relax.tensor<["n"], f32> {
  %c = "relax.astype"(%k) {dtype = f32} : (!relax.tensor<[], i32>) -> !relax.tensor<[], f32>
  %r = "relax.multiply"(%x, %c) : (!relax.tensor<["n"], f32>, !relax.tensor<[], f32>) -> !relax.tensor<["n"], f32>
  return %r : !relax.tensor<["n"], f32>
}
"""
    exe = relax_mlir.compile(src)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(exe(x, 3), np.array([3, 6, 9], np.float32))
    np.testing.assert_array_equal(exe(x, -2), np.array([-2, -4, -6], np.float32))
    np.testing.assert_array_equal(exe(x, True), x)  # a Python bool as 1 / 0, as jax.jit
    np.testing.assert_array_equal(exe(x, False), 0 * x)
    with pytest.raises(ValueError, match="argument #1 has dtype bool, expected int32"):
        exe(x, np.array(True))  # (a numpy bool keeps the exact-dtype check)
    for k, msg in [(2 ** 40, r"argument #1 must have dtype int32 \(i32\); 1099511627776 does not fit in int32"),
                   (np.int64(-2 ** 40), r"argument #1 must have dtype int32 \(i32\); np.int64\(-1099511627776\) does not fit"),
                   (1.5, r"argument #1 must have dtype int32 \(i32\); 1.5 \(float64\) would not keep its value"),
                   ([1], r"argument #1 must have dtype int32 \(i32\); a list converts to int64: pass np.asarray")]:
        with pytest.raises(ValueError, match=msg):
            exe(x, k)
    # numpy scalars of another width where their value is kept, as jax.jit takes them
    for k in (np.int64(3), np.uint8(3), np.int16(3)):
        np.testing.assert_array_equal(exe(x, k), np.array([3, 6, 9], np.float32))


def test_a_result_larger_than_any_memory_is_a_value_error():
    """Result dims whose product passes 2^63 bytes (four arguments of 2^16 elements, an outer
    product of 2^64): a ValueError naming the result and the symbols (was an OverflowError from
    the descriptor words)."""
    src = """
func.func @main(%a: !relax.tensor<["a", 1], f32>, %b: !relax.tensor<[1, "b"], f32>, %c: !relax.tensor<["c"], f32>, %d: !relax.tensor<["d"], f32>) -> !relax.tensor<["a * b * c * d"], f32> {
  %ab = "relax.multiply"(%a, %b) : (!relax.tensor<["a", 1], f32>, !relax.tensor<[1, "b"], f32>) -> !relax.tensor<["a", "b"], f32>
  %cd = "relax.reshape"(%ab) {shape = ["a * b"]} : (!relax.tensor<["a", "b"], f32>) -> !relax.tensor<["a * b"], f32>
  %e = "relax.reshape"(%cd) {shape = ["a * b", 1]} : (!relax.tensor<["a * b"], f32>) -> !relax.tensor<["a * b", 1], f32>
  %c2 = "relax.reshape"(%c) {shape = [1, "c"]} : (!relax.tensor<["c"], f32>) -> !relax.tensor<[1, "c"], f32>
  %f = "relax.multiply"(%e, %c2) : (!relax.tensor<["a * b", 1], f32>, !relax.tensor<[1, "c"], f32>) -> !relax.tensor<["a * b", "c"], f32>
  %g = "relax.reshape"(%f) {shape = ["a * b * c", 1]} : (!relax.tensor<["a * b", "c"], f32>) -> !relax.tensor<["a * b * c", 1], f32>
  %d2 = "relax.reshape"(%d) {shape = [1, "d"]} : (!relax.tensor<["d"], f32>) -> !relax.tensor<[1, "d"], f32>
  %h = "relax.multiply"(%g, %d2) : (!relax.tensor<["a * b * c", 1], f32>, !relax.tensor<[1, "d"], f32>) -> !relax.tensor<["a * b * c", "d"], f32>
  %r = "relax.reshape"(%h) {shape = ["a * b * c * d"]} : (!relax.tensor<["a * b * c", "d"], f32>) -> !relax.tensor<["a * b * c * d"], f32>
  return %r : !relax.tensor<["a * b * c * d"], f32>
}
"""
    exe = relax_mlir.compile(src)
    v = np.ones(1 << 16, np.float32)
    with pytest.raises(ValueError, match=r"result #0 would have shape \(18446744073709551616,\).*more than any memory "
                                         r"\(a = 65536, b = 65536, c = 65536, d = 65536\)"):
        exe(v[:, None], v[None, :], v, v)
    np.testing.assert_array_equal(exe(np.ones((2, 1), np.float32), np.ones((1, 3), np.float32), v[:2], v[:1]),
                                  np.ones(12, np.float32))
