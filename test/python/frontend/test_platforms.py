"""A function exported for several platforms (`jax.export(f, platforms=("cpu", "cuda"))`) takes jax's
platform index as @main's first argument, and the lowerings that differ (the solvers' custom calls,
even the products' precision configs) sit in `stablehlo.case` ops on it. relax-mlir imports the CPU
lowering: the executable takes the export's own arguments, as for a one-platform export, and the
other platforms' ops (cuSOLVER calls it does not convert) are not imported."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import relax_mlir

jax = pytest.importorskip("jax")
jnp = jax.numpy

from relax_mlir.frontend.jax import import_exported  # noqa: E402
from relax_mlir.frontend.stablehlo import UnsupportedOpError, import_stablehlo  # noqa: E402
from relax_mlir.frontend.stablehlo.platforms import choose_platform  # noqa: E402


def _f(x, w):
    """A product, a solve (LAPACK on CPU, cuSOLVER on CUDA) and random bits, over a symbolic batch."""
    a = x.T @ x + 4.0 * jnp.eye(3, dtype=x.dtype)
    noise = jax.random.uniform(jax.random.key(3), (3,), x.dtype)
    return jnp.tanh(x @ w), jnp.linalg.solve(a, x.sum(0) + noise)


@pytest.mark.parametrize("platforms", [("cpu", "cuda"), ("cuda", "tpu", "cpu")])
def test_several_platforms_one_compile(platforms, caplog):
    n = jax.export.symbolic_shape("n")[0]
    exp = jax.export.export(jax.jit(_f), platforms=platforms)(
        jax.ShapeDtypeStruct((n, 3), jnp.float32), jax.ShapeDtypeStruct((3, 5), jnp.float32))
    assert "_platform_index" in exp.mlir_module()
    with caplog.at_level(logging.WARNING):
        exe = relax_mlir.compile(import_exported(exp))
    # jax's LAPACK calls carry sdy.sharding_rule: a rule, not a sharding, and nothing to warn about
    assert not [r for r in caplog.records if "sharding" in r.getMessage()]
    w = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    for k in (1, 7, 300):
        x = np.random.default_rng(k).standard_normal((k, 3)).astype(np.float32)
        got = exe(x, w)
        want = jax.jit(_f)(x, w)
        for g, r in zip(got, want):
            np.testing.assert_allclose(g, np.asarray(r), rtol=2e-5, atol=2e-5)
    with pytest.raises(ValueError, match="takes 2 arguments"):
        exe(np.int32(0), x, w)


def test_several_platforms_under_x64():
    """Under x64 the platform index is a tensor<i64>, converted to i32 before the cases."""
    def f(x):
        return jnp.linalg.solve(x @ x.T + 3.0 * jnp.eye(3, dtype=x.dtype), x.sum(1)), x.astype(jnp.int64) * 3

    with jax.enable_x64(True):
        n = jax.export.symbolic_shape("n")[0]
        exp = jax.export.export(jax.jit(f), platforms=("cuda", "cpu"))(jax.ShapeDtypeStruct((3, n), jnp.float64))
        assert "tensor<i64> {jax.global_constant = \"_platform_index\"}" in exp.mlir_module()
        exe = relax_mlir.compile(exp)
        for k in (1, 9):
            x = np.random.default_rng(k).standard_normal((3, k))
            for g, w in zip(exe(x), jax.jit(f)(x)):
                np.testing.assert_allclose(g, np.asarray(w), rtol=1e-12, atol=1e-12)


def test_choose_platform():
    assert choose_platform(["cpu"]) is None
    assert choose_platform(["cuda", "cpu"]) == 1
    assert choose_platform(["CUDA", "tpu"]) == 0
    assert choose_platform(["tpu", "rocm"]) == 1


def test_text_import_needs_the_index():
    exp = jax.export.export(jax.jit(lambda x: jnp.sin(x) @ jnp.ones((3, 2))), platforms=("cuda", "cpu"))(
        jax.ShapeDtypeStruct((4, 3), jnp.float32))
    text = exp.mlir_module()
    with pytest.raises(UnsupportedOpError, match="platform index.*platform_index="):
        import_stablehlo(text)
    with pytest.raises(UnsupportedOpError, match="platform_index 5 selects none of the 2 lowerings"):
        import_stablehlo(text, platform_index=5)
    exe = relax_mlir.compile(import_stablehlo(text, platform_index=1))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(exe(x), np.sin(x) @ np.ones((3, 2), np.float32), rtol=1e-6)


def _tpu_linalg(a, b):
    """jnp.linalg.cholesky and lax.linalg.triangular_solve in every configuration: a TPU export
    has them as the StableHLO ops cholesky and triangular_solve."""
    spd = a @ jnp.swapaxes(a, -1, -2) + 3.0 * jnp.eye(a.shape[-1], dtype=a.dtype)
    outs = [jnp.linalg.cholesky(spd), jnp.linalg.cholesky(a)]  # the second fails for most a: NaN
    for left in (True, False):
        for lower in (True, False):
            for trans in (0, 1):
                for unit in (False, True):
                    outs.append(jax.lax.linalg.triangular_solve(
                        spd, b if left else jnp.swapaxes(b, -1, -2), left_side=left, lower=lower,
                        transpose_a=bool(trans), unit_diagonal=unit))
    return outs


def test_tpu_cholesky_and_triangular_solve():
    n = jax.export.symbolic_shape("n")[0]
    exp = jax.export.export(jax.jit(_tpu_linalg), platforms=("tpu",))(
        jax.ShapeDtypeStruct((n, 4, 4), jnp.float32), jax.ShapeDtypeStruct((n, 4, 2), jnp.float32))
    text = exp.mlir_module()
    assert "stablehlo.cholesky" in text and "stablehlo.triangular_solve" in text
    exe = relax_mlir.compile(import_exported(exp))
    for k in (1, 5, 64):
        rng = np.random.default_rng(k)
        a = rng.standard_normal((k, 4, 4)).astype(np.float32)
        b = rng.standard_normal((k, 4, 2)).astype(np.float32)
        got, want = exe(a, b), jax.jit(_tpu_linalg)(a, b)  # jax.jit: the CPU lowering (LAPACK)
        assert np.isnan(np.asarray(want[1])).any()  # some matrix of a is not positive definite
        for i, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_allclose(g, np.asarray(w), rtol=2e-4, atol=2e-4, err_msg=f"result {i} at n = {k}")


def test_stablehlo_cholesky_upper():
    text = """func.func @main(%a: tensor<3x3xf64>) -> tensor<3x3xf64> {
      %0 = "stablehlo.cholesky"(%a) {lower = false} : (tensor<3x3xf64>) -> tensor<3x3xf64>
      return %0 : tensor<3x3xf64>
    }"""
    exe = relax_mlir.compile(import_stablehlo(text))
    m = np.array([[4.0, 2.0, -2.0], [2.0, 10.0, 2.0], [-2.0, 2.0, 5.0]])
    u = np.triu(exe(m))
    np.testing.assert_allclose(u.T @ u, m, rtol=1e-12)
    np.testing.assert_allclose(u, np.linalg.cholesky(m).T, rtol=1e-12)
    assert np.isnan(exe(-m)).all()
