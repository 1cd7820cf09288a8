"""min/max reductions propagate NaN (StableHLO `minimum`/`maximum`, numpy), wherever the NaN is
in the reduced axis, at every length and dtype; -inf/+inf and -0.0 are ordinary values. Each
function is compiled once and run at several sizes (seed 2200167 of the differential fuzzer
reduced a bf16 [33, 33, 33] this way; the reference there, XLA on CPU, drops the NaN)."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
ml_dtypes = pytest.importorskip("ml_dtypes")

import jax.numpy as jnp  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402


def _f(a):
    return (jnp.min(a, axis=2), jnp.max(a, axis=2), jnp.min(a, axis=0), jnp.max(a, axis=(0, 1)),
            jnp.min(a), jnp.max(a, axis=1, keepdims=True))


def _ref(a):
    return (np.min(a, axis=2), np.max(a, axis=2), np.min(a, axis=0), np.max(a, axis=(0, 1)),
            np.min(a), np.max(a, axis=1, keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_min_max_propagate_nan(dtype):
    n = jax.export.symbolic_shape("n")[0]
    exe = relax_mlir.compile(from_jax(_f, jax.ShapeDtypeStruct((n, n, n), dtype)))
    for k in (1, 2, 16, 33, 40):
        rng = np.random.default_rng(k)
        a = rng.standard_normal((k, k, k)).astype(np.float32)
        # NaN at every position of the minor axis (one row each), at the last, and scattered
        for r in range(k):
            a[r % k, (r * 7) % k, r] = np.nan
        a[0, -1, -1] = np.nan
        a[rng.random(a.shape) < 0.01] = np.nan
        a[rng.random(a.shape) < 0.01] = np.inf
        a[rng.random(a.shape) < 0.01] = -np.inf
        a = a.astype(dtype)
        got = exe(a)
        for i, (g, w) in enumerate(zip(got, _ref(a.astype(np.float64)))):
            g = np.asarray(g).astype(np.float64)
            assert g.shape == w.shape, (k, i)
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"n = {k}, result {i}: NaN")
            np.testing.assert_array_equal(g, w.astype(dtype).astype(np.float64), err_msg=f"n = {k}, result {i}")


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_order_signed_zeros(op, axis, dtype):
    """StableHLO's maximum / minimum (IEEE 754-2019) order -0.0 below +0.0 in reductions as in
    elementwise ops, whatever the order of the rows: a column max of {-0.0, +0.0} was -0.0 or
    +0.0 by row order (the CPU lowering's compare-and-select expansion kept the first operand).
    Sign bits equal to jax.jit's at n = 2, 17, 40 from one compile; NaN still wins."""
    (n,) = jax.export.symbolic_shape("n")
    fn = (lambda x: jnp.max(x, axis=axis)) if op == "max" else (lambda x: jnp.min(x, axis=axis))
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((n, n), dtype)))
    rng = np.random.default_rng(3)
    for s in (2, 17, 40):
        x = np.where(rng.random((s, s)) < 0.5, -0.0, 0.0).astype(dtype)
        got, want = np.asarray(exe(x)), np.asarray(jax.jit(fn)(x))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f"n={s}")
        x[s // 2, s // 3] = np.nan
        np.testing.assert_array_equal(np.isnan(exe(x)), np.isnan(np.asarray(jax.jit(fn)(x))), err_msg=f"n={s}")
