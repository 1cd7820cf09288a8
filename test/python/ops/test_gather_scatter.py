"""relax.gather / relax_v.scatter / relax.argmax / relax.argmin through jax.export with symbolic
dims: StableHLO gather (start indices clamped), scatter (out-of-bounds windows dropped, duplicate
indices accumulated), jax's argmax/argmin (first index, first NaN); numerics equal to jax.jit."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import export, lax  # noqa: E402

from jaxcheck import check as check_against_jax  # noqa: E402

S = jax.ShapeDtypeStruct
BIND = (1, 7, 97)  # jax dimension variables are >= 1
rng = np.random.default_rng(16)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def sym(names):
    return export.symbolic_shape(names)


# --- gather ---------------------------------------------------------------------------------------


def test_rows_negative_and_clamped_indices():
    (n,) = sym("n")
    idx = np.array([0, -1, 2, -3, 5, 100, -100], np.int32)  # jax wraps negatives once, then clamps
    check_against_jax(lambda x, i: x[i], (S((n, 5), jnp.float32), S((7,), jnp.int32)),
                      lambda b: (f32(b, 5), idx), BIND)


def test_columns_symbolic_rows():
    (n,) = sym("n")
    idx = np.array([0, -1, 4, 9, -9], np.int32)
    check_against_jax(lambda x, i: x[:, i], (S((n, 5), jnp.float32), S((5,), jnp.int32)),
                      lambda b: (f32(b, 5), idx), BIND)


def test_two_index_arrays():
    (n,) = sym("n")
    check_against_jax(lambda x, i, j: x[i, j],
                      (S((n, 6), jnp.float32), S((4,), jnp.int32), S((4,), jnp.int32)),
                      lambda b: (f32(b, 6), np.array([0, -1, 9, 3], np.int32), np.array([1, -2, 3, 40], np.int32)),
                      BIND)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_take_along_any_axis(axis):
    (n,) = sym("n")
    fn = lambda x, i: jnp.take(x, i, axis=axis)  # noqa: E731
    check_against_jax(fn, (S((3, n, 4), jnp.float32), S((2, 3), jnp.int32)),
                      lambda b: (f32(3, b, 4), rng.integers(-6, 6, (2, 3)).astype(np.int32)), BIND)


def test_take_along_axis_batched_gather():
    (n,) = sym("n")
    fn = lambda x, i: jnp.take_along_axis(x, i, axis=1)  # noqa: E731
    check_against_jax(fn, (S((n, 5), jnp.float32), S((n, 3), jnp.int32)),
                      lambda b: (f32(b, 5), rng.integers(-7, 7, (b, 3)).astype(np.int32)), BIND)


def test_embedding_lookup_symbolic_batch_and_sequence():
    b, s = sym("b, s")
    fn = lambda table, ids: table[ids] * 2.0  # noqa: E731
    check_against_jax(fn, (S((50, 8), jnp.float32), S((b, s), jnp.int32)),
                      lambda k: (f32(50, 8), rng.integers(-60, 60, (k, k + 2)).astype(np.int32)), BIND)


def test_gather_i64_indices_and_int_table():
    """(XLA's CPU gather reads an i64 index past 2**32 modulo 2**32, e.g. 2**40 as 0, where StableHLO
    clamps it to the last column as relax.gather does: the indices here stay below 2**31.)"""
    (n,) = sym("n")
    jax.config.update("jax_enable_x64", True)
    try:
        check_against_jax(lambda x, i: x[:, i], (S((n, 4), jnp.int64), S((3,), jnp.int64)),
                          lambda b: (rng.integers(-9, 9, (b, 4)), np.array([-1, 3, 2**30], np.int64)), BIND)
    finally:
        jax.config.update("jax_enable_x64", False)


# --- scatter --------------------------------------------------------------------------------------

SCATTER = {"set": lambda x, i, u: x.at[i].set(u), "add": lambda x, i, u: x.at[i].add(u),
           "multiply": lambda x, i, u: x.at[i].multiply(u), "min": lambda x, i, u: x.at[i].min(u),
           "max": lambda x, i, u: x.at[i].max(u)}


@pytest.mark.parametrize("op", sorted(SCATTER))
def test_scatter_rows_unique_and_out_of_bounds(op):
    (n,) = sym("n")
    idx = np.array([0, -1, 200, -200], np.int32)  # -1 is the last row; +-200 are dropped
    check_against_jax(SCATTER[op], (S((n, 3), jnp.float32), S((4,), jnp.int32), S((4, 3), jnp.float32)),
                      lambda b: (f32(b, 3), idx, f32(4, 3)), BIND)


@pytest.mark.parametrize("op", ["add", "multiply", "min", "max"])
def test_scatter_duplicate_indices_accumulate(op):
    (n,) = sym("n")
    idx = np.array([1, 1, 0, 1, 0, 3], np.int32)
    check_against_jax(SCATTER[op], (S((n, 2), jnp.float32), S((6,), jnp.int32), S((6, 2), jnp.float32)),
                      lambda b: (f32(b, 2), idx % b, f32(6, 2)), BIND)


def test_scatter_add_integers_into_symbolic_histogram():
    (n, k) = sym("n, k")
    fn = lambda h, i: h.at[i].add(1)  # noqa: E731
    check_against_jax(fn, (S((n,), jnp.int32), S((k,), jnp.int32)),
                      lambda b: (np.zeros(b, np.int32), rng.integers(-b - 2, b + 2, (3 * b,)).astype(np.int32)),
                      BIND)


def test_scatter_columns_and_scalar_updates():
    (n,) = sym("n")
    check_against_jax(lambda x, i: x.at[:, i].set(-1.0), (S((n, 5), jnp.float32), S((2,), jnp.int32)),
                      lambda b: (f32(b, 5), np.array([4, -5], np.int32)), BIND)
    check_against_jax(lambda x, i: x.at[i].add(10.0), (S((n,), jnp.float32), S((), jnp.int32)),
                      lambda b: (f32(b), np.int32(b - 1)), BIND)


def test_scatter_nan_min_max():
    (n,) = sym("n")
    u = np.array([[np.nan, 1.0], [-np.inf, np.nan]], np.float32)
    for op in ("min", "max"):
        check_against_jax(SCATTER[op], (S((n, 2), jnp.float32), S((2,), jnp.int32), S((2, 2), jnp.float32)),
                          lambda b: (f32(b, 2), np.array([0, 0], np.int32), u), BIND)


# --- argmax / argmin ------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [jnp.argmax, jnp.argmin])
@pytest.mark.parametrize("axis", [0, 1])
def test_argmax_argmin_first_index(fn, axis):
    (n,) = sym("n")
    check_against_jax(lambda x: fn(x, axis=axis), (S((n, 6), jnp.float32),),
                      lambda b: (np.round(f32(b, 6)),), BIND)  # rounding makes ties


@pytest.mark.parametrize("fn", [jnp.argmax, jnp.argmin])
def test_argmax_argmin_nan_inf_and_signed_zero(fn):
    (n,) = sym("n")

    def make(b):
        x = np.full((b, 6), -np.inf if fn is jnp.argmax else np.inf, np.float32)
        x[:, 1] = np.nan
        x[:, 3] = np.nan
        x[0, :] = [0.0, -0.0, 3.0, -0.0, 3.0, 1.0]
        if b > 2:
            x[2, :] = [-0.0, 0.0, -0.0, 0.0, -0.0, 0.0]
        return (x,)

    check_against_jax(lambda x: fn(x, axis=1), (S((n, 6), jnp.float32),), make, BIND)
    check_against_jax(lambda x: fn(x, axis=0), (S((n, 6), jnp.float32),), make, BIND)


def test_argmax_integers_and_keepdims():
    (n,) = sym("n")
    check_against_jax(lambda x: jnp.argmax(x, axis=0, keepdims=True), (S((n, 3), jnp.int32),),
                      lambda b: (rng.integers(-3, 3, (b, 3)).astype(np.int32),), BIND)
    check_against_jax(lambda x: jnp.argmin(x, axis=-1), (S((3, n), jnp.int32),),
                      lambda b: (rng.integers(-3, 3, (3, b)).astype(np.int32),), BIND)


@pytest.mark.parametrize("dt", [jnp.uint8, jnp.uint16, jnp.uint32, jnp.int8, jnp.int16])
def test_argmax_argmin_of_a_narrow_or_unsigned_index_dtype(dt):
    """lax.argmax / argmin with an unsigned `index_dtype`: the index in a signed type, converted
    (was refused: "the index type must be an integer type, got ui8")."""
    (n,) = sym("n")
    fn = lambda x: (lax.argmax(x, 1, dt), lax.argmin(x, 0, dt))  # noqa: E731
    check_against_jax(fn, (S((n, 5), jnp.float32),), lambda b: (np.round(f32(b, 5)),), BIND)


def test_lax_reduce_value_index_pairs_max():
    """lax.argmax itself (the (value, iota) variadic reduce), with its value output used too."""
    (n,) = sym("n")
    fn = lambda x: (lax.argmax(x, 1, jnp.int32), jnp.max(x, axis=1))  # noqa: E731
    check_against_jax(fn, (S((n, 5), jnp.float32),), lambda b: (f32(b, 5),), BIND)


# --- relax programs: run-time checks, semantics on the op directly -----------------------------------

def _gather_src(slice_w: str) -> str:
    x, i, w, r = ('!relax.tensor<["n", 4], f32>', '!relax.tensor<["k", 1], i32>', '!relax.tensor<["w"], f32>',
                  '!relax.tensor<["?", "?", "?"], f32>')
    return (f"func.func @main(%x: {x}, %i: {i}, %w: {w}) -> {r} {{\n"
            f'  %0 = "relax.gather"(%x, %i) {{offset_dims = [1, 2], start_index_map = [0], index_vector_dim = 1, '
            f'slice_sizes = ["{slice_w}", 4]}} : ({x}, {i}) -> {r}\n  return %0 : {r}\n}}\n')


def _np_gather_rows(x, idx, w):
    n = x.shape[0]
    return np.stack([x[min(max(int(s), 0), n - w):min(max(int(s), 0), n - w) + w] for s in idx[:, 0]])


def test_gather_symbolic_slice_size_checked_at_run_time():
    import relax_mlir

    exe = relax_mlir.compile(_gather_src("w"))
    idx = np.array([[-5], [0], [2], [3], [50]], np.int32)
    for n, w in ((1, 1), (5, 2), (5, 5), (9, 3)):
        x = f32(n, 4)
        np.testing.assert_array_equal(exe(x, idx, np.zeros(w, np.float32)), _np_gather_rows(x, idx, w))
    with pytest.raises(ValueError, match="slice size w of dim 0 exceeds"):
        exe(f32(2, 4), idx, np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="slice size w of dim 0 exceeds"):
        exe(f32(0, 4), idx, np.zeros(1, np.float32))


STABLEHLO_SCATTER_SUB = """
func.func public @main(%x: tensor<4xf32>, %i: tensor<2x1xi32>, %u: tensor<2xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.subtract %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32> loc("scatter_sub_here")
  return %0 : tensor<4xf32>
}
"""

STABLEHLO_REDUCE_PAIR_SUM = """
func.func public @main(%x: tensor<4xf32>, %y: tensor<4xi32>) -> tensor<i32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %zi = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.reduce(%x init: %z), (%y init: %zi) across dimensions = [0] : (tensor<4xf32>, tensor<4xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, tensor<i32>)
   reducer(%a: tensor<f32>, %c: tensor<f32>) (%ai: tensor<i32>, %ci: tensor<i32>) {
    %s = stablehlo.add %a, %c : tensor<f32>
    %f = stablehlo.convert %ci : (tensor<i32>) -> tensor<f32>
    %m = stablehlo.add %s, %f : tensor<f32>
    %si = stablehlo.add %ai, %ci : tensor<i32>
    stablehlo.return %m, %si : tensor<f32>, tensor<i32>
  } loc("pair_sum_here")
  return %0#1 : tensor<i32>
}
"""

STABLEHLO_SORT_RAW_FLOAT = """
func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.sort"(%x) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) : (tensor<4xf32>) -> tensor<4xf32> loc("raw_sort_here")
  return %0 : tensor<4xf32>
}
"""


@pytest.mark.parametrize("src, where, what", [
    (STABLEHLO_SCATTER_SUB, "scatter_sub_here", "scatter update computation ['stablehlo.subtract']"),
    (STABLEHLO_REDUCE_PAIR_SUM, "pair_sum_here", "variadic reduce: only jax's argmax/argmin form"),
    (STABLEHLO_SORT_RAW_FLOAT, "raw_sort_here", "sort comparator is not"),
])
def test_importer_refuses_other_regions_with_located_errors(src, where, what):
    from relax_mlir.frontend.stablehlo import UnsupportedOpError, import_stablehlo

    with pytest.raises(UnsupportedOpError) as e:
        import_stablehlo(src)
    assert what in str(e.value) and where in str(e.value)


def test_scatter_set_duplicates_last_wins_and_bool_argmax():
    """.at[i].set with a repeated index: the updates apply in order, so the last one stays (XLA's
    CPU backend does the same); argmax/argmin of booleans."""
    (n,) = sym("n")
    check_against_jax(SCATTER["set"], (S((n, 2), jnp.float32), S((5,), jnp.int32), S((5, 2), jnp.float32)),
                      lambda b: (f32(b, 2), np.array([1, 1, 0, 1, 0], np.int32) % b, f32(5, 2)), BIND)
    for fn in (jnp.argmax, jnp.argmin):
        check_against_jax(lambda x: fn(x, axis=1), (S((n, 4), jnp.bool_),),
                          lambda b: (rng.integers(0, 2, (b, 4)).astype(bool),), BIND)
    check_against_jax(lambda x: (jnp.argmax(x), jnp.argmin(x, axis=0)), (S((n, 3), jnp.float16),),
                      lambda b: (np.round(f32(b, 3)).astype(np.float16),), BIND)


def test_gather_mixed_index_forms():
    """Index vectors over non-adjacent dims, a 2-D index array, an ellipsis, a scalar index."""
    (n,) = sym("n")
    i2 = np.array([[0, -1], [2, 7]], np.int32)
    cases = [
        (lambda x, i, j: x[i, :, j], lambda b: (f32(b, 4, 5), np.array([0, -1, 3], np.int32) % b,
                                                np.array([4, -5, 9], np.int32))),
        (lambda x, i, j: x[:, i, j], lambda b: (f32(b, 4, 5), np.array([0, -1, 3], np.int32),
                                                np.array([4, -5, 1], np.int32))),
        (lambda x, i, j: x[..., i2] + j[0], lambda b: (f32(b, 4, 5), np.array([1, 2, 3], np.int32),
                                                       np.array([1, 2, 3], np.int32))),
        (lambda x, i, j: x[:, i[0]] * j[1], lambda b: (f32(b, 4, 5), np.array([-1, 2, 3], np.int32),
                                                       np.array([1, 2, 3], np.int32))),
    ]
    for fn, make in cases:
        check_against_jax(fn, (S((n, 4, 5), jnp.float32), S((3,), jnp.int32), S((3,), jnp.int32)), make, BIND)


def test_scatter_batched_put_along_axis_and_points():
    """Scatter with batching dims (put_along_axis's form, through lax.scatter_add) and 2-D point
    updates."""
    (n,) = sym("n")
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(1,),
                                     scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                                     scatter_indices_batching_dims=(0,))
    fn = lambda x, i, u: lax.scatter_add(x, i[..., None], u, dn, mode="drop")  # noqa: E731
    check_against_jax(fn, (S((n, 5), jnp.float32), S((n, 3), jnp.int32), S((n, 3), jnp.float32)),
                      lambda b: (f32(b, 5), rng.integers(-2, 7, (b, 3)).astype(np.int32), f32(b, 3)), BIND)
    fn2 = lambda x, i, j, u: x.at[i, j].add(u)  # noqa: E731
    check_against_jax(fn2, (S((n, 5), jnp.float32), S((4,), jnp.int32), S((4,), jnp.int32), S((4,), jnp.float32)),
                      lambda b: (f32(b, 5), np.array([0, 0, -1, 3], np.int32) % b, np.array([1, 1, 9, -2], np.int32),
                                 f32(4)), BIND)


def test_scatter_window_larger_than_input_is_dropped():
    """A relax scatter whose update window (symbolic m) exceeds the input's dim (n) at run time:
    every window is out of bounds and dropped (never a write outside the input)."""
    import relax_mlir

    x, i, u = ('!relax.tensor<["n", "n"], f32>', '!relax.tensor<[2, 1], i32>', '!relax.tensor<[2, "m"], f32>')
    src = (f"func.func @main(%x: {x}, %i: {i}, %u: {u}) -> {x} {{\n"
           f'  %0 = "relax_v.scatter"(%x, %i, %u) {{update_window_dims = [1], inserted_window_dims = [0], '
           f'scatter_dims_to_operand_dims = [0], index_vector_dim = 1, combiner = "add"}} : ({x}, {i}, {u}) -> {x}\n'
           f"  return %0 : {x}\n}}\n")
    exe = relax_mlir.compile(src)
    idx = np.array([[0], [2]], np.int32)
    for n, m in ((3, 5), (3, 3), (4, 2), (0, 1)):
        xv, uv = f32(n, n), f32(2, m)
        want = xv.copy()
        for r, s in zip(idx[:, 0], uv):
            if m <= n and 0 <= r < n:
                want[r, :m] += s
        np.testing.assert_array_equal(exe(xv, idx, uv), want)


@pytest.mark.parametrize("target", ["cpu", "vulkan"])
def test_scatter_into_an_empty_array(target):
    """A scatter into a statically empty array writes nothing (every update dropped): its kernel is
    empty, so no zero-size buffer reaches SPIR-V (fuzz seed 2,380,454: "failed to legalize operation
    'gpu.func'" on Vulkan)."""
    import relax_mlir
    import toolchecks
    from relax_mlir.frontend.jax import from_jax

    if target == "vulkan" and not toolchecks.vulkan_adapter():
        pytest.skip("wgpu or a Vulkan adapter (lavapipe) is not available")
    fn = lambda x, i, u: (x.at[i].set(u, mode="drop"), x.astype(jnp.int32).at[i].add(u.astype(jnp.int32)))  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, S((0,), jnp.bool_), S((5,), jnp.int32), S((5,), jnp.bool_)), target=target)
    args = (np.zeros(0, bool), np.arange(5, dtype=np.int32), np.ones(5, bool))
    for got, want in zip(exe(*args), jax.jit(fn)(*args)):
        assert got.shape == want.shape == (0,) and got.dtype == want.dtype
