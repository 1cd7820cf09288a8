"""Denormal floats in compiled CPU code (backend/cpu_fpmode.py): by default the code runs in its
caller's floating-point mode (IEEE denormals: numpy's results), and the run-time library's workers
take the caller's mode with each task, so a threaded build computes as the one-thread build even
under a caller that flushes denormals. `RELAX_MLIR_DENORMALS=flush` (`CPUOptions.flush_denormals`)
reads and produces denormals as zero as XLA on CPU does, on the calling thread and on the workers,
and restores the caller's mode after each call.

What must match jax.jit in the flush mode is every decision a denormal could change (comparisons,
signs, division by a denormal, conversions to bool, sort order, NaN and inf); a value that only
moves through a select or a copy may keep a denormal's bits where XLA's instruction flushed it, so
float results are compared within 2e-38 (below the smallest normal f32, 1.18e-38)."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir import knobs  # noqa: E402
from relax_mlir.backend.cpu import CPUOptions  # noqa: E402
from relax_mlir.backend.cpu_fpmode import host_supports_flush  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402
from relax_mlir.runtime import native_rt  # noqa: E402

from fuzz.campaign import run_like_xla  # noqa: E402
from jaxcheck import compare  # noqa: E402

# The flush mode sets x86-64's MXCSR; other hosts compile the option away (documented), so there is
# nothing of it to test there. The default (IEEE) mode is tested everywhere.
x86_only = pytest.mark.skipif(not host_supports_flush(), reason="the flush mode sets x86-64's MXCSR; this host ignores it")

TINY = np.float32([1e-40, -1e-40, 1e-38, -1e-38, 2e-38, 0.0, -0.0, 1.5, -2.0, 3e-39, np.nan, np.inf])


def _f(x, y):
    return (x * 0.5, jnp.sign(x), x > 0, 1.0 / x, jnp.sqrt(jnp.abs(x)), x.astype(bool), jnp.sort(x), jnp.argsort(x),
            jnp.maximum(x, y), x - y, jnp.floor(x), jnp.exp(x - 90.0), jnp.sum(x * y))


def _data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = np.resize(TINY, n) * rng.choice(np.float32([1, -1]), n)
    return x.astype(np.float32), rng.permutation(x).astype(np.float32)


def _vec():
    n = jax.export.symbolic_shape("n")[0]
    return jax.ShapeDtypeStruct((n,), jnp.float32)


@x86_only
def test_flush_matches_jax_at_every_size():
    v = _vec()
    exe = relax_mlir.compile(from_jax(_f, v, v), options=CPUOptions(flush_denormals=True))
    ref = jax.jit(_f)
    for k in (1, 12, 13, 4099):
        x, y = _data(k, k)
        compare(ref(x, y), exe(x, y), rtol=1e-6, atol=2e-38, err_msg=f"n = {k}")
        # the caller's mode is back: numpy still computes IEEE denormals
        assert np.float32(1e-40) * np.float32(0.5) != 0
        assert np.sign(np.float32(1e-40)) == 1


@x86_only
def test_flush_on_every_worker(monkeypatch):
    """The threaded build (every call, split over the pool) flushes as jax does."""
    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "never")
    monkeypatch.setenv("RELAX_MLIR_PARALLEL_MIN_ELEMENTS", "1")
    g = lambda x: (x * 0.5, jnp.sign(x) + x, jnp.exp(x - 100.0) * 2.0)  # noqa: E731
    n = jax.export.symbolic_shape("n")[0]
    with knobs.overridden(RELAX_MLIR_DENORMALS="flush"):
        exe = relax_mlir.compile(from_jax(g, jax.ShapeDtypeStruct((n, 512), jnp.float32)),
                                 options=CPUOptions(num_threads=2))
    for rows in (1, 97, 2048):
        x = np.resize(TINY, rows * 512).reshape(rows, 512).astype(np.float32)
        compare(jax.jit(g)(x), exe(x), rtol=1e-6, atol=2e-38, err_msg=f"rows = {rows}")


def _ieee(x):
    with np.errstate(all="ignore"):
        return (x * np.float32(0.5), np.sign(x), x > 0, np.float32(1) / x)


def test_default_keeps_ieee_denormals():
    h = lambda x: (x * 0.5, jnp.sign(x), x > 0, 1.0 / x)  # noqa: E731
    exe = relax_mlir.compile(from_jax(h, _vec()))
    x = np.float32([1e-40, -1e-40, 1e-38, -1e-38, 2e-38, 3e-39, 1.5, -2.0])  # (numpy's sign(-0.0) is +0.0)
    compare(_ieee(x), exe(x))


def test_workers_take_the_callers_mode(monkeypatch):
    """Default mode, the caller flushing (as the fuzzer's XLA-mode rerun does): the threaded build's
    workers compute in that mode too, the same bits as the one-thread build."""
    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "never")
    g = lambda x: (x * 0.5, jnp.exp(x - 100.0) * 3.0, (x * x) > 0)  # noqa: E731
    n = jax.export.symbolic_shape("n")[0]
    module = from_jax(g, jax.ShapeDtypeStruct((n, 512), jnp.float32))
    x = np.resize(TINY, 2048 * 512).reshape(2048, 512).astype(np.float32)
    one = relax_mlir.compile(module, options=CPUOptions(num_threads=1))
    monkeypatch.setenv("RELAX_MLIR_PARALLEL_MIN_ELEMENTS", "1")
    threaded = relax_mlir.compile(module, options=CPUOptions(num_threads=2))
    want = run_like_xla(lambda: one(x))
    if want is None:
        pytest.skip("no C compiler to set this thread's MXCSR")
    lib = native_rt.load()
    lib.relax_rt_configure(2, 0, 1024, -1, 0)  # no back-off: the workers take tasks whatever the load
    try:
        threaded(x)  # the workers start in this thread's own (IEEE) mode: new threads inherit it
        before = native_rt.stats()["tasks_by_workers"]
        for _ in range(5):
            compare(want, run_like_xla(lambda: threaded(x)))
        assert native_rt.stats()["tasks_by_workers"] > before
    finally:
        native_rt.configure(lib)
    compare(jax.jit(g)(x), want, rtol=1e-6, atol=2e-38)


def test_setting_is_validated():
    with knobs.overridden(RELAX_MLIR_DENORMALS="fast"):
        with pytest.raises(ValueError, match="RELAX_MLIR_DENORMALS must be 'keep' or 'flush'"):
            CPUOptions()
