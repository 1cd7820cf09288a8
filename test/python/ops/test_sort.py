"""relax_v.sort through jax.export with symbolic dims: jnp.sort / argsort / lax.sort with several
operands and num_keys, along any axis; stable; floats in jax's order (-0.0 == 0.0 keeps input
order, NaNs last); numerics equal to jax.jit. Also jnp.arange / iota with symbolic dims."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import export, lax  # noqa: E402

from jaxcheck import check as check_against_jax  # noqa: E402

S = jax.ShapeDtypeStruct
BIND = (1, 7, 97)  # jax dimension variables are >= 1
rng = np.random.default_rng(4)


def special(shape):
    """Floats with ties, signed zeros, infinities and NaNs."""
    pool = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, 2.5], np.float32)
    return pool[rng.integers(0, len(pool), shape)].astype(np.float32)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_sort_any_axis_special_floats(axis):
    (n,) = export.symbolic_shape("n")
    check_against_jax(lambda x: jnp.sort(x, axis=axis), (S((n, 6), jnp.float32),), lambda b: (special((b, 6)),), BIND)


@pytest.mark.parametrize("axis", [0, 1])
def test_argsort_stable_with_ties_and_signed_zeros(axis):
    (n,) = export.symbolic_shape("n")
    check_against_jax(lambda x: jnp.argsort(x, axis=axis), (S((n, 6), jnp.float32),),
                      lambda b: (special((b, 6)),), BIND)


def test_sort_descending_and_integers():
    (n,) = export.symbolic_shape("n")
    check_against_jax(lambda x: jnp.sort(x, descending=True), (S((3, n), jnp.float32),),
                      lambda b: (special((3, b)),), BIND)
    check_against_jax(lambda x: (jnp.sort(x, axis=0), jnp.argsort(x, axis=0)), (S((n, 4), jnp.int32),),
                      lambda b: (rng.integers(-3, 3, (b, 4)).astype(np.int32),), BIND)


def test_lax_sort_several_operands_num_keys():
    (n,) = export.symbolic_shape("n")
    specs = (S((n,), jnp.int32), S((n,), jnp.float32), S((n,), jnp.float32))
    def make(b):
        return rng.integers(0, 3, b).astype(np.int32), special(b), rng.standard_normal(b).astype(np.float32)

    check_against_jax(lambda a, b, c: lax.sort((a, b, c), num_keys=2), specs, make, BIND)
    check_against_jax(lambda a, b, c: lax.sort((a, b, c), num_keys=1), specs, make, BIND)
    check_against_jax(lambda a, b, c: lax.sort((b, a, c), num_keys=3, is_stable=False), specs, make, BIND)


def test_sort_symbolic_rows_and_columns():
    n, m = export.symbolic_shape("n, m")
    check_against_jax(lambda x: jnp.sort(x, axis=1), (S((n, m), jnp.float32),),
                      lambda b: (special((b, b + 3)),), BIND)


def test_sort_bool_keys():
    (n,) = export.symbolic_shape("n")
    check_against_jax(lambda x, y: lax.sort((x, y), num_keys=1), (S((n,), jnp.bool_), S((n,), jnp.int32)),
                      lambda b: (rng.integers(0, 2, b).astype(bool), np.arange(b, dtype=np.int32)), BIND)


def test_arange_and_iota_symbolic():
    (n,) = export.symbolic_shape("n")
    fn = lambda x: (jnp.arange(x.shape[0]) * 2, jnp.arange(2 * x.shape[0] + 1, dtype=jnp.float32),  # noqa: E731
                    lax.broadcasted_iota(jnp.int32, (x.shape[0], 3), 1), x + jnp.arange(3.0))
    check_against_jax(fn, (S((n, 3), jnp.float32),), lambda b: (rng.standard_normal((b, 3)).astype(np.float32),), BIND)


@pytest.mark.parametrize("k", [1, 3, 8])
def test_top_k_special_floats_and_ties(k):
    """chlo.top_k (a composite): descending IEEE total order (NaN first, 0.0 before -0.0), ties in
    index order."""
    (n,) = export.symbolic_shape("n")
    check_against_jax(lambda x: lax.top_k(x, k), (S((n, 8), jnp.float32),), lambda b: (special((b, 8)),), BIND)


def test_partition_over_a_symbolic_axis():
    """jnp.partition / argpartition along a symbolic axis: top_k with a k computed from the dim
    (jax's `stablehlo.dynamic_top_k` custom call) next to the static one."""
    b, v = export.symbolic_shape("b, v")
    f = lambda x: (jnp.partition(x, 2, axis=-1), jnp.argpartition(x, 2, axis=-1), jnp.partition(x, 0, axis=-1))  # noqa: E731
    check_against_jax(f, (S((b, v + 3), jnp.float32),), lambda n: (special((n % 5 + 1, n + 3)),), BIND)


def test_approx_top_k_is_exact_on_the_cpu():
    """`lax.approx_max_k` / `approx_min_k` (custom_call @ApproxTopK, whose CPU fallback sorts):
    exact, ties in index order; float16 too. Floats without NaN: XLA sorts them with a plain `<`,
    which orders nothing when NaN is present (see the converter)."""
    (n,) = export.symbolic_shape("n")

    def floats(b):
        pool = np.array([np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, 2.5], np.float32)
        return (pool[rng.integers(0, len(pool), (b, 16))] + rng.integers(0, 3, (b, 16)).astype(np.float32),)
    f = lambda x: (*lax.approx_max_k(x, 3), *lax.approx_min_k(x, 5), *lax.approx_max_k(x, 2, recall_target=0.5))  # noqa: E731
    check_against_jax(f, (S((n, 16), jnp.float32),), floats, BIND)
    check_against_jax(lambda x: lax.approx_min_k(x, 4), (S((n, 9), jnp.float16),),
                      lambda b: (rng.integers(-3, 3, (b, 9)).astype(np.float16),), BIND)


def test_top_k_integers():
    (n,) = export.symbolic_shape("n")
    check_against_jax(lambda x: lax.top_k(x, 2), (S((n, 5), jnp.int32),),
                      lambda b: (rng.integers(-2, 2, (b, 5)).astype(np.int32),), BIND)


@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.uint16, jnp.uint32])
def test_top_k_unsigned(dtype):
    """top_k of unsigned integers (the values past the signed range first): sorted on the signed
    order (the top bit flipped) and mapped back, as stablehlo.sort's unsigned keys (was a
    CompileError: "unsigned element types are not supported by relax_v.sort")."""
    (n,) = export.symbolic_shape("n")
    info = np.iinfo(dtype)

    def args(b):
        x = rng.integers(0, info.max, (b, 6), endpoint=True).astype(dtype)
        x[0, :2] = info.max  # ties at the top, and the type's ends
        x[-1, 3] = 0
        return (x,)
    check_against_jax(lambda x: lax.top_k(x, 3), (S((n, 6), dtype),), args, BIND)


def test_merge_sort_middle_axis_long_rows():
    """Rows longer than RANK_SORT_MAX (or symbolic) take the merge sort: several merge passes,
    odd lengths, batch dims on both sides of the axis, argsort stability."""
    (n,) = export.symbolic_shape("n")
    fn = lambda x: (jnp.sort(x, axis=1), jnp.argsort(x, axis=1))  # noqa: E731
    check_against_jax(fn, (S((2, n, 3), jnp.float32),), lambda b: (special((2, b, 3)),), (1, 2, 33, 1000))
    check_against_jax(lambda x: jnp.argsort(x, axis=0), (S((100, n), jnp.float32),),
                      lambda b: (special((100, b)),), (1, 5))


def test_zero_size_dims():
    """Empty index arrays, empty rows and empty batches (static zero dims next to symbolic ones)."""
    (n,) = export.symbolic_shape("n")
    fn = lambda x, e, i: (jnp.sort(e, axis=1), jnp.argsort(e, axis=0), jnp.argmax(x[:0], axis=1),  # noqa: E731
                          x[i], x.at[i].add(1.0), jnp.sort(x[:, :0], axis=0))
    check_against_jax(fn, (S((n, 3), jnp.float32), S((n, 0), jnp.float32), S((0,), jnp.int32)),
                      lambda b: (special((b, 3)), np.zeros((b, 0), np.float32), np.zeros(0, np.int32)), BIND)


def test_relax_sort_symbol_bound_to_zero():
    """A relax program (no jax: symbols may be 0): the merge sort and the gather on empty rows."""
    import relax_mlir

    t = '!relax.tensor<["n", 3], f32>'
    ti = '!relax.tensor<["n", 3], i32>'
    src = (f"func.func @main(%x: {t}, %i: {ti}) -> ({t}, {ti}) {{\n"
           f'  %s:2 = "relax_v.sort"(%x, %i) {{axis = 0, num_keys = 1}} : ({t}, {ti}) -> ({t}, {ti})\n'
           f"  return %s#0, %s#1 : {t}, {ti}\n}}\n")
    exe = relax_mlir.compile(src)
    for b in (0, 1, 6, 50):
        x = special((b, 3))
        idx = np.broadcast_to(np.arange(b, dtype=np.int32)[:, None], (b, 3)).copy()
        got = exe(x, idx)
        order = np.argsort(np.where(x == 0, 0, x), axis=0, kind="stable")  # numpy: NaNs last, stable
        np.testing.assert_array_equal(got[1], order.astype(np.int32))
        np.testing.assert_array_equal(got[0], np.take_along_axis(x, order, axis=0))


def test_sort_on_vulkan_static_axis_runs_symbolic_axis_is_refused():
    """On Vulkan a sort along a static axis runs on the device; along a symbolic axis its kernel
    stays on the host (a loop over the elements), which the host program does not run: a clean,
    target-naming refusal (fuzz seed 2351011 raised an internal 'unsupported host constant true'
    before)."""
    import relax_mlir
    from relax_mlir.core.diagnostics import CompileError
    from toolchecks import vulkan_adapter

    (n,) = export.symbolic_shape("n")
    for target, name in (("vulkan", "Vulkan"), ("webgpu", "WebGPU")):
        with pytest.raises(CompileError, match=f"is not supported on {name}"):
            relax_mlir.compile(relax_mlir.from_jax(lambda x: jnp.sort(x, axis=0), S((n, 3), jnp.float32)),
                               target=target)
    f = lambda x: jnp.sort(x, axis=1)  # noqa: E731
    exe = relax_mlir.compile(relax_mlir.from_jax(f, S((n, 6), jnp.float32)), target="vulkan")
    if not vulkan_adapter():
        pytest.skip("no Vulkan adapter (wgpu + lavapipe) to run the static-axis sort")
    for b in (1, 7):
        x = special((b, 6))
        np.testing.assert_array_equal(np.asarray(exe(x)), np.asarray(jax.jit(f)(x)))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16, jnp.bfloat16])
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_total_order(dtype, side):
    """jnp.searchsorted compares with StableHLO's TOTALORDER (-0.0 before +0.0, NaN after +inf):
    a NaN at the end of the sorted array, NaN queries and signed zeros (the IEEE compare gave
    len(a) for finite queries past a trailing NaN, and NaN queries at the end)."""
    (n,) = export.symbolic_shape("n")

    def make(b):
        a = np.sort(special(9)).astype(dtype)  # (NaNs last, as jnp.sort puts them)
        return (a, special((b,)).astype(dtype))
    for method in ("scan", "compare_all"):  # ("sort" does not export over a symbolic length)
        check_against_jax(lambda a, v: jnp.searchsorted(a, v, side=side, method=method),
                          (S((9,), dtype), S((n,), dtype)), make, BIND)
