"""relax-dispatch-library: matmuls through BLAS sgemm agree with numpy and with generated code, at
several shapes from one compile, including transposes, batches, folded leading dims, an empty
dim, and an exported artifact."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import relax_mlir
from relax_mlir.runtime import library
from relax_mlir.transforms import PASSES

pytestmark = pytest.mark.skipif(not library.available(), reason="scipy-openblas32 is not installed")
RNG = np.random.default_rng(0)


def T(dims, dt="f32"):
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + f"], {dt}>"


U2, U3 = T(["?", "?"]), T(["?", "?", "?"])

QK = f"""
func.func @main(%q: {T(["s", 64])}, %k: {T(["s", 64])}, %v: {T(["s", 64])}) -> {U2} {{
  %kt = "relax.permute_dims"(%k) {{axes = [1, 0]}} : ({T(["s", 64])}) -> {U2}
  %s = "relax.matmul"(%q, %kt) : ({T(["s", 64])}, {U2}) -> {U2}
  %p = "relax.softmax"(%s) {{axis = -1 : i64}} : ({U2}) -> {U2}
  %o = "relax.matmul"(%p, %v) : ({U2}, {T(["s", 64])}) -> {U2}
  return %o : {U2}
}}"""

BATCHED = f"""
func.func @main(%a: {T(["b", "n", 32])}, %b: {T(["b", 32, 16])}, %c: {T([16])}) -> {U3} {{
  %m = "relax.matmul"(%a, %b) : ({T(["b", "n", 32])}, {T(["b", 32, 16])}) -> {U3}
  %r = "relax.add"(%m, %c) : ({U3}, {T([16])}) -> {U3}
  %t = "relax.tanh"(%r) : ({U3}) -> {U3}
  return %t : {U3}
}}"""

LEAD = f"""
func.func @main(%x: {T([2, "n", 24])}, %w: {T([24, "m"])}, %y: {T([24, "n"])}) -> ({U3}, {U2}) {{
  %m = "relax.matmul"(%x, %w) : ({T([2, "n", 24])}, {T([24, "m"])}) -> {U3}
  %yt = "relax.permute_dims"(%y) {{axes = [1, 0]}} : ({T([24, "n"])}) -> {U2}
  %g = "relax.matmul"(%yt, %w) : ({U2}, {T([24, "m"])}) -> {U2}
  return %m, %g : {U3}, {U2}
}}"""


# q k^T per head with q and k both [h, e, s] (jax's einsum "hse,hte->hst" after its transposes):
# a batched lhs that is transposed (was an internal error: the sgemm_ta kernel dropped its batch
# dims)
BATCHED_TA = f"""
func.func @main(%q: {T([4, 16, "s"])}, %k: {T([4, 16, "s"])}) -> {U3} {{
  %qt = "relax.permute_dims"(%q) {{axes = [0, 2, 1]}} : ({T([4, 16, "s"])}) -> {U3}
  %m = "relax.matmul"(%qt, %k) : ({U3}, {T([4, 16, "s"])}) -> {U3}
  return %m : {U3}
}}"""


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _compile(src, mode, monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_LIBRARY", mode)
    return relax_mlir.compile(src)


def test_dispatched_module_calls_the_library(monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "always")
    passes = [p for p in relax_mlir.OPTIMIZE_PIPELINE if p in PASSES][:-2]
    text = str(relax_mlir.run_passes(QK, passes))
    assert text.count("relax.library = \"sgemm\"") >= 2 and "relax.permute_dims" not in text
    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "never")
    assert "relax.library" not in str(relax_mlir.run_passes(QK, passes))


@pytest.mark.parametrize("mode", ["always", "never"])
def test_attention_matches_numpy(mode, monkeypatch):
    exe = _compile(QK, mode, monkeypatch)
    for s in (1, 13, 300):
        q, k, v = (RNG.standard_normal((s, 64), dtype=np.float32) for _ in range(3))
        np.testing.assert_allclose(exe(q, k, v), _softmax(q @ k.T) @ v, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["always", "never"])
def test_batched_with_fused_epilogue(mode, monkeypatch):
    exe = _compile(BATCHED, mode, monkeypatch)
    c = RNG.standard_normal(16, dtype=np.float32)
    for b, n in ((1, 1), (3, 13), (2, 257), (2, 0)):
        a = RNG.standard_normal((b, n, 32), dtype=np.float32)
        w = RNG.standard_normal((b, 32, 16), dtype=np.float32)
        np.testing.assert_allclose(exe(a, w, c), np.tanh(a @ w + c), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["always", "never"])
def test_leading_dims_and_transposed_lhs(mode, monkeypatch):
    exe = _compile(LEAD, mode, monkeypatch)
    for n, m in ((1, 1), (13, 7), (130, 257)):
        x = RNG.standard_normal((2, n, 24), dtype=np.float32)
        w = RNG.standard_normal((24, m), dtype=np.float32)
        y = RNG.standard_normal((24, n), dtype=np.float32)
        got_m, got_g = exe(x, w, y)
        np.testing.assert_allclose(got_m, x @ w, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got_g, y.T @ w, rtol=1e-4, atol=1e-4)


def test_exported_artifact_ships_the_library(tmp_path, monkeypatch):
    exe = _compile(QK, "always", monkeypatch)
    art = tmp_path / "att"
    exe.export(str(art))
    assert any(p.name.startswith("libscipy_openblas") for p in art.iterdir())
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        from relax_mlir.runtime import load
        exe = load({str(art)!r})
        rng = np.random.default_rng(1)
        for s in (1, 13, 300):
            q, k, v = (rng.standard_normal((s, 64), dtype=np.float32) for _ in range(3))
            e = np.exp(q @ k.T - (q @ k.T).max(-1, keepdims=True))
            np.testing.assert_allclose(exe(q, k, v), (e / e.sum(-1, keepdims=True)) @ v, rtol=1e-4, atol=1e-5)
        assert not any(m == "mlir" or m.startswith("mlir.") for m in sys.modules)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_products_run_on_the_pool(monkeypatch):
    """The helpers call the run-time library's pooled sgemm (runtime/relax_rt.c); products of at
    least RELAX_MLIR_BLAS_PARALLEL_MIN multiply-adds are split over its threads, smaller ones run
    on the calling thread, and results are the same either way (both kinds run in one module)."""
    from relax_mlir.backend.cpu_library import helper_text, sgemm_callee
    from relax_mlir.runtime import native_rt

    monkeypatch.setenv("RELAX_MLIR_BLAS_THREADS", "2")
    assert sgemm_callee() == native_rt.SGEMM_SYMBOL
    assert f"call @{native_rt.SGEMM_SYMBOL}(" in helper_text("h", 2, 2, 2, False, True, sgemm_callee())
    lib = native_rt.load()
    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "always")
    exe = relax_mlir.compile(QK)
    try:
        native_rt.configure(lib, threads=2)
        lib.relax_rt_configure(2, 40 * 40 * 64, 1024, -1, 0)
        before = native_rt.stats()
        for s in (1, 13, 257):  # 13*13*64 is below the threshold, 257*257*64 above
            q, k, v = (RNG.standard_normal((s, 64)).astype(np.float32) for _ in range(3))
            np.testing.assert_allclose(exe(q, k, v), _softmax(q @ k.T) @ v, rtol=1e-4, atol=1e-5)
        after = native_rt.stats()
        assert after["serial"] > before["serial"] and after["parallel"] > before["parallel"]
    finally:
        native_rt.configure(lib)


def test_one_blas_thread_calls_openblas_directly(monkeypatch):
    """RELAX_MLIR_BLAS_THREADS=1: no pool, the helpers call OpenBLAS's sgemm themselves."""
    from relax_mlir.backend.cpu_library import helper_text, sgemm_callee

    monkeypatch.setenv("RELAX_MLIR_BLAS_THREADS", "1")
    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "always")
    assert sgemm_callee() == library.SGEMM_SYMBOL
    assert f"call @{library.SGEMM_SYMBOL}(" in helper_text("h", 2, 2, 2, False, True, sgemm_callee())
    exe = relax_mlir.compile(QK)
    for s in (1, 13, 257):
        q, k, v = (RNG.standard_normal((s, 64)).astype(np.float32) for _ in range(3))
        np.testing.assert_allclose(exe(q, k, v), _softmax(q @ k.T) @ v, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["always", "never"])
def test_batched_transposed_lhs(mode, monkeypatch):
    exe = _compile(BATCHED_TA, mode, monkeypatch)
    if mode == "always":
        assert '"sgemm"' in str(relax_mlir.run_passes(relax_mlir.parse(BATCHED_TA),
                                                      ["relax-infer-shapes", "relax-dispatch-library"]))
    for s in (1, 7, 130):
        q = RNG.standard_normal((4, 16, s), dtype=np.float32)
        k = RNG.standard_normal((4, 16, s), dtype=np.float32)
        np.testing.assert_allclose(exe(q, k), np.swapaxes(q, 1, 2) @ k, rtol=1e-4, atol=1e-4)


def test_jax_einsum_attention_scores(monkeypatch):
    """The single-device compile of a heads-split attention score (examples/spmd's attention)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from relax_mlir.frontend.jax import from_jax

    def f(x, wq, wk):
        q = jnp.einsum("sd,dhe->hse", x, wq)
        k = jnp.einsum("sd,dhe->hse", x, wk)
        return jnp.einsum("hse,hte->hst", q, k)

    (s,) = jax.export.symbolic_shape("s")
    specs = [jax.ShapeDtypeStruct((s, 64), jnp.float32)] + [jax.ShapeDtypeStruct((64, 4, 16), jnp.float32)] * 2
    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "always")
    exe = relax_mlir.compile(from_jax(f, *specs))
    wq, wk = (RNG.standard_normal((64, 4, 16), dtype=np.float32) for _ in range(2))
    for n in (1, 7, 130):
        x = RNG.standard_normal((n, 64), dtype=np.float32)
        np.testing.assert_allclose(exe(x, wq, wk), jax.jit(f)(x, wq, wk), rtol=1e-4, atol=2e-3)
