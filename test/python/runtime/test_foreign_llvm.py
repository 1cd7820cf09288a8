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
