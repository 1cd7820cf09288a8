"""bf16 end to end on CPU: imported from jax, compiled, called with ml_dtypes arrays (what jax uses
for numpy bf16), compared with jax.jit."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402

BF16 = jnp.bfloat16


def _check(fn, *arrays, rtol=2e-2, atol=2e-2):
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays]
    exe = relax_mlir.compile(from_jax(fn, *specs))
    got = exe(*arrays)
    want = np.asarray(jax.jit(fn)(*arrays))
    assert got.dtype == want.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=rtol, atol=atol)
    return exe


def test_bf16_elementwise_reduce_matmul():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 8)).astype(BF16)
    w = rng.standard_normal((8, 3)).astype(BF16)
    _check(lambda x, w: jnp.tanh(x @ w) + jnp.sum(jnp.exp(x), axis=1, keepdims=True)[:, :1], x, w, rtol=5e-2,
           atol=5e-2)


def test_bf16_convert_round_trip_and_symbolic_dim():
    b = jax.export.symbolic_shape("b")[0]
    fn = lambda x: (x.astype(jnp.float32) * 3.0).astype(BF16)  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((b, 4), BF16)))
    for n in (1, 7):
        x = np.arange(4 * n, dtype=np.float32).reshape(n, 4).astype(BF16)
        np.testing.assert_array_equal(exe(x), np.asarray(jax.jit(fn)(x)))


def test_bf16_wrong_dtype_is_a_value_error():
    exe = _check(lambda x: x + 1, np.ones((2,), BF16))
    with pytest.raises(ValueError, match=r"argument #0 has dtype float32, expected bfloat16 \(bf16\)"):
        exe(np.ones((2,), np.float32))


@pytest.mark.parametrize("name", ["sigmoid", "gelu_tanh", "gelu_erf", "mean_square", "u16_to_bf16_to_f32",
                                  "bf16_product_to_f32"])
def test_bf16_rounding_is_xla_s(name):
    """Chains of bf16 ops round like XLA's CPU backend, bit for bit: each op's result is rounded to
    bf16 (the f32 emulation's `contract` flags would otherwise let consecutive ops skip it), except
    where the program converts an arithmetic result to f32 (computed in f32: XLA's excess
    precision); a conversion to bf16 always rounds."""
    fns = {
        "sigmoid": lambda a: jax.nn.sigmoid(a),
        "gelu_tanh": lambda a: jax.nn.gelu(a, approximate=True),
        "gelu_erf": lambda a: jax.nn.gelu(a, approximate=False),
        "mean_square": lambda a: jnp.mean(jnp.square(a), axis=-1),
        "u16_to_bf16_to_f32": lambda a: jax.lax.bitcast_convert_type(a, jnp.uint16).astype(BF16).astype(jnp.float32),
        "bf16_product_to_f32": lambda a: (a * a).astype(jnp.float32) * 3.0,
    }
    b = jax.export.symbolic_shape("b")[0]
    exe = relax_mlir.compile(from_jax(fns[name], jax.ShapeDtypeStruct((b, 64), BF16)))
    for n in (1, 13, 64):
        x = (np.random.default_rng(n).standard_normal((n, 64)) * 2).astype(BF16)
        want = np.asarray(jax.jit(fns[name])(x))
        got = exe(x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32), err_msg=f"n={n}")
