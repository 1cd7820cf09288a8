"""A second LLVM in the process (tensorflow's, which gemma imports) must not crash relax-mlir,
in any import order: tensorflow first (its LLVM interposed on MLIR's at `import mlir.ir`:
SIGSEGV), tensorflow after a compile (the JIT's runtime libraries put MLIR's LLVM in the global
scope: an LLVM assertion in tensorflow's initialisation, SIGABRT), and lavapipe after tensorflow
(Mesa's LLVM bound to tensorflow's: SIGSEGV at the first kernel). Each order runs in a fresh
interpreter; results are checked against numpy there."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                                reason="tensorflow is not installed (the models extra brings it, with gemma)")

PROGRAM = textwrap.dedent("""
    import numpy as np, jax, jax.numpy as jnp
    from relax_mlir.frontend.jax import from_jax
    n = jax.export.symbolic_shape("n")[0]
    def f(x, w):
        return jnp.tanh(x @ w) + 1.0
    def run(target):
        exe = relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((n, 64), jnp.float32),
                                          jax.ShapeDtypeStruct((64, 32), jnp.float32)), target=target)
        rng = np.random.default_rng(0)
        for m in (1, 7, 300):
            x, w = rng.standard_normal((m, 64), np.float32), rng.standard_normal((64, 32), np.float32)
            np.testing.assert_allclose(exe(x, w), np.tanh(x @ w) + 1.0, rtol=1e-4, atol=1e-4)
        return exe
""")


def run(body: str) -> str:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    r = subprocess.run([sys.executable, "-c", body], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r.stdout


def test_tensorflow_first_then_cpu_and_vulkan():
    out = run("import tensorflow\nimport relax_mlir\n" + PROGRAM + textwrap.dedent("""
        run("cpu")
        from relax_mlir.runtime import vulkan
        print("cpu ok", "vulkan", run("vulkan") is not None if vulkan.available() else "absent")
    """))
    assert "cpu ok" in out


def test_tensorflow_after_a_compile():
    out = run("import relax_mlir\n" + PROGRAM + textwrap.dedent("""
        exe = run("cpu")
        import tensorflow
        x, w = np.ones((5, 64), np.float32), np.ones((64, 32), np.float32)
        np.testing.assert_allclose(exe(x, w), np.tanh(x @ w) + 1.0, rtol=1e-5)
        run("cpu")
        print("after ok")
    """))
    assert "after ok" in out


def test_conversions_llvm_emits_as_library_calls():
    """With MLIR's runtime libraries opened RTLD_LOCAL, the conversions LLVM lowers to library
    calls by itself (f32/f64 -> bf16 and f16: `__truncsfbf2`, `__truncdfhf2`, ...; fuzz seed
    1500047: the engine could not link) are resolved for the engine; results vs jax.jit."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import ml_dtypes
    import numpy as np

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    def f(x, y, h, b):
        return (x.astype(jnp.bfloat16), x.astype(jnp.float16), y.astype(jnp.bfloat16), y.astype(jnp.float16),
                h.astype(jnp.float32), b.astype(jnp.float32), (h * 2).astype(jnp.bfloat16))

    n = jax.export.symbolic_shape("n")[0]
    with jax.enable_x64(True):
        specs = [jax.ShapeDtypeStruct((n,), t) for t in (jnp.float32, jnp.float64, jnp.float16, jnp.bfloat16)]
        exe = relax_mlir.compile(from_jax(f, *specs))
        rng = np.random.default_rng(1)
        for m in (1, 7, 300):
            x = (rng.standard_normal(m) * 1e3).astype(np.float32)
            x[0] = np.nan if m > 1 else 70000.0
            y = rng.standard_normal(m) * 1e-3
            args = (x, y, x.astype(np.float16), x.astype(ml_dtypes.bfloat16))
            for g, w in zip(exe(*args), jax.jit(f)(*args)):
                w = np.asarray(w)
                assert g.dtype == w.dtype
                np.testing.assert_array_equal(g.view(np.uint16) if g.itemsize == 2 else g,
                                              w.view(np.uint16) if w.itemsize == 2 else w)
