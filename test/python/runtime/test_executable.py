"""The runtime never trusts its caller: every bad call raises ValueError naming argument, dim, symbol."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import relax_mlir
from relax_mlir import knobs

SRC = """
func.func @main(%x: !relax.tensor<["n", 4], f32>, %y: !relax.tensor<["n", 4], f32>, %w: !relax.tensor<[4, "m"], f32>) -> !relax.tensor<["?", "?"], f32> {
  %a = "relax.add"(%x, %y) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["?", "?"], f32>
  %m = "relax.matmul"(%a, %w) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<[4, "m"], f32>) -> !relax.tensor<["?", "?"], f32>
  return %m : !relax.tensor<["?", "?"], f32>
}
"""


@pytest.fixture(scope="module")
def exe():
    return relax_mlir.compile(SRC)


def f32(*shape):
    return np.random.default_rng(1).standard_normal(shape).astype(np.float32)


def test_runs_at_many_shapes(exe):
    for n, m in ((1, 1), (13, 7), (512, 33)):
        x, y, w = f32(n, 4), f32(n, 4), f32(4, m)
        np.testing.assert_allclose(exe(x, y, w), (x + y) @ w, rtol=1e-5, atol=1e-5)


def test_wrong_dim_names_symbol(exe):
    with pytest.raises(ValueError, match=r"argument #1 has shape \(5, 4\), but dim 0 must be n \(n = 3 from argument #0 dim 0\)"):
        exe(f32(3, 4), f32(5, 4), f32(4, 2))


def test_wrong_static_dim(exe):
    with pytest.raises(ValueError, match=r"argument #2 .* dim 0 must be 4"):
        exe(f32(3, 4), f32(3, 4), f32(5, 2))


def test_wrong_rank(exe):
    with pytest.raises(ValueError, match=r"argument #0 has rank 1 .* expected rank 2"):
        exe(f32(3), f32(3, 4), f32(4, 2))


def test_wrong_dtype(exe):
    with pytest.raises(ValueError, match=r"argument #0 has dtype float64, expected float32"):
        exe(np.zeros((3, 4)), f32(3, 4), f32(4, 2))


def test_wrong_count_and_type(exe):
    with pytest.raises(ValueError, match="takes 3 arguments, got 2"):
        exe(f32(3, 4), f32(3, 4))
    with pytest.raises(ValueError, match="must be a numpy array"):
        exe("x", f32(3, 4), f32(4, 2))


def test_non_contiguous_and_zero_size(exe):
    x = f32(8, 6)[:, :4]
    y = f32(8, 4)
    w = f32(4, 3)
    np.testing.assert_allclose(exe(x, y, w), (x + y) @ w, rtol=1e-5, atol=1e-5)
    assert exe(f32(0, 4), f32(0, 4), w).shape == (0, 3)


def test_threads(exe):
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(20):
            n = int(rng.integers(1, 64))
            x, y, w = (rng.standard_normal(s).astype(np.float32) for s in ((n, 4), (n, 4), (4, 5)))
            if not np.allclose(exe(x, y, w), (x + y) @ w, rtol=1e-4, atol=1e-4):
                errors.append(n)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_match_cast_checked_at_run_time():
    src = """
func.func @main(%x: !relax.tensor<["n", 4], f32>, %y: !relax.tensor<["k", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %c = "relax.match_cast"(%y) : (!relax.tensor<["k", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %a = "relax.add"(%x, %c) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %a : !relax.tensor<["n", 4], f32>
}
"""
    exe = relax_mlir.compile(src)
    x = f32(3, 4)
    np.testing.assert_allclose(exe(x, x), 2 * x)
    with pytest.raises(ValueError, match=r"shape check failed: match_cast at .*dim 0 is k, the pattern requires n"):
        exe(x, f32(5, 4))


def test_compile_error_is_located():
    with pytest.raises(relax_mlir.CompileError, match=r"<string>:3:8: error: 'relax.matmul' op inner dimensions differ: 4 vs 5"):
        relax_mlir.compile("""
func.func @main(%x: !relax.tensor<["n", 4], f32>, %w: !relax.tensor<[5, 2], f32>) -> !relax.tensor<["?", "?"], f32> {
  %m = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[5, 2], f32>) -> !relax.tensor<["?", "?"], f32>
  return %m : !relax.tensor<["?", "?"], f32>
}
""")


def test_parallel_build_matches(monkeypatch):
    """Large calls run the multi-threaded build (forced here for every call); same results."""
    monkeypatch.setenv("RELAX_MLIR_PARALLEL_MIN_ELEMENTS", "1")
    monkeypatch.setenv("RELAX_MLIR_NUM_THREADS", "2")
    exe = relax_mlir.compile(SRC)
    for n in (1, 13, 700):
        x, y, w = f32(n, 4), f32(n, 4), f32(4, 9)
        np.testing.assert_allclose(exe(x, y, w), (x + y) @ w, rtol=1e-5, atol=1e-5)


def test_every_build_compiled_up_front():
    """compile() builds every variant a call may choose (issue 18): the single-threaded build with
    its machine code generated (the engine is lazy: looked up here, not at the first call), and the
    multi-threaded build whenever some call can reach RELAX_MLIR_PARALLEL_MIN_ELEMENTS (an
    unbounded symbol can); a module no call of which reaches it has none."""
    from relax_mlir.backend.cpu import CPUOptions

    def run_of(text, builds="all"):
        with knobs.overridden(RELAX_MLIR_BUILDS=builds):  # (the test suite's default is "first")
            exe = relax_mlir.compile(text, options=CPUOptions(num_threads=2))
        return exe, exe._keepalive[1]

    big = """func.func @main(%x: !relax.tensor<["n", 2048], f32>, %w: !relax.tensor<[2048, 2048], f32>) -> !relax.tensor<["n", 2048], f32> {
  %0 = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 2048], f32>, !relax.tensor<[2048, 2048], f32>) -> !relax.tensor<["n", 2048], f32>
  return %0 : !relax.tensor<["n", 2048], f32>
}"""
    exe, run = run_of(big)
    assert run.built == (False, True)  # no call can take the one-thread build: not compiled
    assert "main" in run.jitn._funcs  # its machine code generated at compile(), not at a call
    x, w = np.ones((3, 2048), np.float32), np.full((2048, 2048), 0.5, np.float32)
    np.testing.assert_allclose(exe(x, w), np.full((3, 2048), 1024.0, np.float32))
    exe, run = run_of(big.replace("2048", "64"))
    assert run.built == (True, True)  # n is unbounded: a large enough call takes the threaded build
    assert "main" in run.jit1._funcs
    x, w = np.ones((3, 64), np.float32), np.full((64, 64), 0.5, np.float32)
    np.testing.assert_allclose(exe(x, w), np.full((3, 64), 32.0, np.float32))
    exe, run = run_of(big.replace("2048", "64").replace('"n"', "3"))
    assert run.built == (True, False)  # no call reaches the threshold
    x, w = np.ones((3, 64), np.float32), np.full((64, 64), 0.5, np.float32)
    np.testing.assert_allclose(exe(x, w), np.full((3, 64), 32.0, np.float32))
    # RELAX_MLIR_BUILDS=first: only the build the smallest calls take; the other at its first call
    exe, run = run_of(big, "first")
    assert run.built == (False, True)  # every call is threaded: that build is the first
    exe, run = run_of(big.replace("2048", "64"), "first")
    assert run.built == (True, False)
    np.testing.assert_allclose(exe(x, w), np.full((3, 64), 32.0, np.float32))
    assert run.built == (True, False)  # a small call: still no threaded build
    rows = run.min_elements // 128 + 1  # x and the result: 2 * rows * 64 elements reach the threshold
    x, w = np.ones((rows, 64), np.float32), np.full((64, 64), 0.5, np.float32)
    np.testing.assert_allclose(exe(x, w), np.full((rows, 64), 32.0, np.float32))
    assert run.built == (True, True)
    with knobs.overridden(RELAX_MLIR_BUILDS="some"), pytest.raises(ValueError, match="RELAX_MLIR_BUILDS"):
        relax_mlir.compile(big, options=CPUOptions(num_threads=2))


def test_pickling_names_the_artifact_route():
    """pickle (multiprocessing's spawn, a cache) of a compiled executable was an AttributeError about
    a local lambda; it is a TypeError that says to export the artifact and load it."""
    import pickle

    import jax
    import jax.numpy as jnp

    import relax_mlir

    exe = relax_mlir.compile(jax.export.export(jax.jit(lambda a: a * 2))(jax.ShapeDtypeStruct((3,), jnp.float32)))
    for obj in (exe, exe["main"]):
        with pytest.raises(TypeError, match=r"cannot be pickled.*exe.export\(path\).*runtime.load\(path\)"):
            pickle.dumps(obj)
