"""relax-multiversion: run-time versions of symbolic-row matmuls (BLAS / generated code) in one
artifact. Every version runs, from ONE compile, at row counts on both sides of each predicate,
against jax.jit; the lowered module shows which versions the kernels hold."""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relax_mlir
from relax_mlir.backend.cpu import CPUOptions, lower
from relax_mlir.backend.cpu_matmul import MatmulConfig
from relax_mlir.frontend.jax import from_jax
from relax_mlir.runtime import library
from relax_mlir.transforms.multiversion import GENERATED_VARIANTS, leaves, versions_for

pytestmark = pytest.mark.skipif(not library.available(), reason="needs scipy-openblas32")  # noqa: the CPU extra


def test_generated_variants_match_the_backend():
    """The pass splits generated row ranges where cpu_matmul's schedules change."""
    cfg = MatmulConfig()
    assert [v for v, _ in GENERATED_VARIANTS] == [v for v, _ in cfg.variants()]
    assert dict(GENERATED_VARIANTS) == dict(cfg.variants())


def test_cost_table_and_leaves(monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_BLAS_THREADS", "1")  # BLAS products on the calling thread only
    assert versions_for(2048, 512) == [(16, "generated"), (None, "sgemm")]
    assert versions_for(256, 256) == [(8, "sgemm"), (None, "generated")]
    assert versions_for(256, 1024) == [(2, "sgemm"), (None, "generated")]
    assert versions_for(512, 1024) == [(None, "generated")]
    assert versions_for(64, 256) == []
    assert leaves([(32, "generated"), (None, "sgemm")]) == [(1, "gemv"), (4, "small"), (16, "medium"),
                                                             (32, "large"), (None, "sgemm")]
    # the LLM's weights (d = 1024, 4 KV heads of 64, SwiGLU 2816, vocab 32000): BLAS past 16 rows
    assert versions_for(1024, 256) == [(2, "sgemm"), (16, "generated"), (None, "sgemm")]
    for k, n in ((512, 2048), (1024, 1024), (1024, 2816), (2816, 1024), (1024, 32000)):
        assert versions_for(k, n) == [(16, "generated"), (None, "sgemm")], (k, n)
        assert leaves(versions_for(k, n)) == [(1, "gemv"), (4, "small"), (16, "medium"), (None, "sgemm")]
    assert leaves([(2, "sgemm"), (16, "generated"), (None, "sgemm")]) == [(2, "sgemm"), (4, "small"),
                                                                          (16, "medium"), (None, "sgemm")]
    assert leaves([(8, "sgemm"), (None, "generated")]) == [(8, "sgemm"), (16, "medium"), (None, "large")]
    assert leaves([(2, "sgemm"), (None, "generated")]) == [(2, "sgemm"), (4, "small"), (16, "medium"),
                                                           (None, "large")]
    assert leaves([(16, "generated"), (None, "sgemm")]) == [(1, "gemv"), (4, "small"), (16, "medium"),
                                                             (None, "sgemm")]
    assert leaves([(1, "sgemm"), (None, "generated")]) == [(1, "sgemm"), (4, "small"), (16, "medium"),
                                                           (None, "large")]


def test_one_row_on_the_pool(monkeypatch):
    """With the run-time library's pool (RELAX_MLIR_BLAS_THREADS > 1), a large weight's one-row
    product is pooled sgemv; weights that already have a small-row BLAS version keep the table."""
    from relax_mlir.runtime import native_rt

    if not native_rt.available():
        pytest.skip(f"relax-mlir's run-time library cannot be built here: {native_rt.unavailable_reason()}")
    monkeypatch.setenv("RELAX_MLIR_BLAS_THREADS", "2")
    for k, n in ((512, 2048), (1024, 1024), (1024, 2816), (2816, 1024), (1024, 32000)):
        assert versions_for(k, n) == [(1, "sgemm"), (16, "generated"), (None, "sgemm")], (k, n)
        assert leaves(versions_for(k, n)) == [(1, "sgemm"), (4, "small"), (16, "medium"), (None, "sgemm")]
    assert versions_for(1024, 256) == [(2, "sgemm"), (16, "generated"), (None, "sgemm")]
    assert versions_for(256, 256) == [(8, "sgemm"), (None, "generated")]


def _two_layer(x, w1, w2):
    # [b, 2048] @ [2048, 256]: generated up to 16 rows, BLAS above;
    # [b, 256] @ [256, 256]: BLAS up to 8 rows, generated above.
    return jnp.tanh(x @ w1) @ w2


# Both sides of every predicate: 1, 2 | 3, 4 | 5, 8 | 9, 16 | 17, 32 | 33, a prime, a large one.
ROWS = (1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 97, 300)


def _projections(x, wk, wo):
    # [b, s, 1024] @ [1024, 256] (an LLM's key projection): BLAS up to 2 rows, generated up to
    # 16, BLAS above; [b, s, 256] @ [256, 1024]: BLAS up to 2 rows, generated above. The rows
    # are b*s: each product is one sgemm / one generated matmul over the flattened rows.
    return jnp.tanh(x @ wk) @ wo


def test_three_d_products_version_on_flattened_rows(monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "auto")
    b, s = jax.export.symbolic_shape("b, s")
    specs = [jax.ShapeDtypeStruct((b, s, 1024), jnp.float32), jax.ShapeDtypeStruct((1024, 256), jnp.float32),
             jax.ShapeDtypeStruct((256, 1024), jnp.float32)]
    exe = relax_mlir.compile(from_jax(_projections, *specs), options=CPUOptions(num_threads=1))
    text = str(exe.artifacts["upstream"])
    assert text.count('relax.kernel = "sgemm_versions"') == 2
    assert re.findall(r'matmul_variant = "(\w+)"', text) == ["small", "medium", "small", "medium", "large"]
    rng = np.random.default_rng(11)
    wk = (rng.standard_normal((1024, 256)) * 0.03).astype(np.float32)
    wo = (rng.standard_normal((256, 1024)) * 0.06).astype(np.float32)
    ref = jax.jit(_projections)
    # rows b*s on both sides of 2 | 3, 4 | 5 and 16 | 17, a prime and a large count
    for bb, ss in ((1, 1), (2, 1), (1, 3), (2, 2), (5, 1), (4, 4), (1, 17), (3, 11), (1, 97), (2, 150)):
        x = rng.standard_normal((bb, ss, 1024)).astype(np.float32)
        got = exe(x, wk, wo)
        assert got.shape == (bb, ss, 1024)
        np.testing.assert_allclose(got, np.asarray(ref(x, wk, wo)), rtol=2e-4, atol=2e-4, err_msg=f"{bb}x{ss}")


@pytest.mark.parametrize("blas_threads", ["1", "2"])
def test_every_version_matches_jax(monkeypatch, blas_threads):
    """On one thread the one-row product is the generated gemv; with the run-time library's pool,
    OpenBLAS's sgemv over the pool (a third BLAS call in the first kernel)."""
    from relax_mlir.runtime import native_rt

    pooled = blas_threads == "2"
    if pooled and not native_rt.available():
        pytest.skip(f"relax-mlir's run-time library cannot be built here: {native_rt.unavailable_reason()}")
    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "auto")
    monkeypatch.setenv("RELAX_MLIR_BLAS_THREADS", blas_threads)
    (b,) = jax.export.symbolic_shape("b")
    specs = [jax.ShapeDtypeStruct((b, 2048), jnp.float32), jax.ShapeDtypeStruct((2048, 256), jnp.float32),
             jax.ShapeDtypeStruct((256, 256), jnp.float32)]
    exe = relax_mlir.compile(from_jax(_two_layer, *specs), options=CPUOptions(num_threads=1))

    # Structure: two versioned kernels, each scheduled as register-blocked matmuls for its
    # generated versions, and one BLAS call per kernel for its library version.
    up = exe.artifacts["upstream"]
    text = str(up)
    assert text.count('relax.kernel = "sgemm_versions"') == 2
    assert re.findall(r'matmul_variant = "(\w+)"', text) == ["gemv"] * (not pooled) + ["small", "medium", "medium",
                                                                                       "large"]
    with up.context:
        op = up.clone(ip=False)
        lower(op, CPUOptions(num_threads=1), until="bufferize")
        low = str(op)
    assert len(re.findall(r"call @__relax_sgemm_222_nn\(", low)) == 2 + pooled
    assert low.count('relax.library') == 0  # every tagged op became a BLAS call
    # ... that says whether its sizes fit CBLAS's 32-bit ints; where not, the op runs as loops
    calls = re.findall(r"(%\w+) = func.call @__relax_sgemm_222_nn\(.*\) -> i1", low)
    assert len(calls) == 2 + pooled
    for done in calls:
        missed = re.search(rf"(%\w+) = arith.xori {done}, %\w+ : i1\n\s*scf.if \1 {{\n(\s*linalg.fill.*\n)?"
                           r"\s*linalg.generic", low)
        assert missed, done
    assert "cmpi sle, %d" in low and "2147483647" in low
    assert len(re.findall(r'relax_cpu.schedules = \["matmul-register-blocked"\]', low)) == 2

    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((2048, 256)) * 0.05).astype(np.float32)
    w2 = (rng.standard_normal((256, 256)) * 0.1).astype(np.float32)
    ref = jax.jit(_two_layer)
    for n in ROWS:
        x = rng.standard_normal((n, 2048)).astype(np.float32)
        got = exe(x, w1, w2)
        np.testing.assert_allclose(got, np.asarray(ref(x, w1, w2)), rtol=2e-4, atol=2e-4, err_msg=f"b={n}")


def test_never_keeps_generated_code_only(monkeypatch):
    """RELAX_MLIR_LIBRARY=never: no BLAS version anywhere; still right at every row count."""
    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "never")
    (b,) = jax.export.symbolic_shape("b")
    f = lambda x, w: x @ w  # noqa: E731
    exe = relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((b, 256), jnp.float32),
                                      jax.ShapeDtypeStruct((256, 256), jnp.float32)))
    assert "sgemm" not in str(exe.artifacts["upstream"])
    rng = np.random.default_rng(3)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    for n in (1, 8, 9, 97):
        x = rng.standard_normal((n, 256)).astype(np.float32)
        np.testing.assert_allclose(exe(x, w), x @ w, rtol=1e-4, atol=1e-3)


def test_zero_rows_take_each_first_version(monkeypatch):
    """m = 0 (legal in relax text, below jax's lower bound of 1) selects the first version: BLAS
    for the narrow matmul (M = 0 sgemm), generated code for the deep one; both give [0, N]."""
    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "auto")
    src = """func.func @main(%x: !relax.tensor<["m", 256], f32>, %w: !relax.tensor<[256, 256], f32>, %y: !relax.tensor<["m", 2048], f32>, %v: !relax.tensor<[2048, 512], f32>) -> (!relax.tensor<["m", 256], f32>, !relax.tensor<["m", 512], f32>) {
  %a = "relax.matmul"(%x, %w) : (!relax.tensor<["m", 256], f32>, !relax.tensor<[256, 256], f32>) -> !relax.tensor<["m", 256], f32>
  %b = "relax.matmul"(%y, %v) : (!relax.tensor<["m", 2048], f32>, !relax.tensor<[2048, 512], f32>) -> !relax.tensor<["m", 512], f32>
  return %a, %b : !relax.tensor<["m", 256], f32>, !relax.tensor<["m", 512], f32>
}"""
    exe = relax_mlir.compile(src, options=CPUOptions(num_threads=1))
    assert str(exe.artifacts["upstream"]).count('relax.kernel = "sgemm_versions"') == 2
    rng = np.random.default_rng(5)
    w, v = rng.standard_normal((256, 256)).astype(np.float32), rng.standard_normal((2048, 512)).astype(np.float32)
    for m in (0, 1, 9, 40):
        x, y = rng.standard_normal((m, 256)).astype(np.float32), rng.standard_normal((m, 2048)).astype(np.float32)
        a, b = exe(x, w, y, v)
        assert a.shape == (m, 256) and b.shape == (m, 512)
        np.testing.assert_allclose(a, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(b, y.astype(np.float64) @ v, rtol=1e-4, atol=2e-3)
