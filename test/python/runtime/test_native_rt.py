"""The run-time library's pooled sgemm (runtime/relax_rt.c) against numpy: every transpose, beta,
one-row (sgemv) and one-column products, empty dimensions, several thread counts, concurrent
callers, a forked child; the contention back-off's bookkeeping."""
from __future__ import annotations

import ctypes
import itertools
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from relax_mlir.runtime import native_rt

pytestmark = pytest.mark.skipif(not native_rt.available(),
                                reason="relax-mlir's run-time library needs a C compiler and scipy-openblas32")

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
P = ctypes.c_void_p


@pytest.fixture
def rt():
    lib = native_rt.load()
    f = lib.relax_rt_sgemm
    f.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, P, ctypes.c_int, P, ctypes.c_int, ctypes.c_float, P,
                                       ctypes.c_int]
    yield lib
    native_rt.configure(lib)  # back to the RELAX_MLIR_* settings


def _product(lib, m, n, k, ta, tb, alpha, beta, rng):
    a = rng.standard_normal((k, m) if ta else (m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n), dtype=np.float32)
    c = rng.standard_normal((m, n), dtype=np.float32)
    want = alpha * ((a.T if ta else a).astype(np.float64) @ (b.T if tb else b)) + beta * c
    lib.relax_rt_sgemm(ROW_MAJOR, TRANS if ta else NO_TRANS, TRANS if tb else NO_TRANS, m, n, k, alpha,
                       a.ctypes.data, max(1, a.shape[1]), b.ctypes.data, max(1, b.shape[1]), beta,
                       c.ctypes.data, max(1, n))
    return c, want


SHAPES = [(1, 1000, 37), (1, 3001, 517), (3, 700, 129), (200, 5, 300), (64, 1031, 257), (517, 130, 64),
          (1, 1, 5), (7, 1, 300), (2, 2, 0), (0, 5, 5), (5, 0, 3), (300, 300, 300)]


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_matches_numpy(rt, threads):
    """Every product split into small chunks (parallel_min 0, chunk_min 1024) and unsplit."""
    rng = np.random.default_rng(threads)
    for split in (True, False):
        rt.relax_rt_configure(threads, 0 if split else 1 << 40, 1024, -1, 0)
        for (m, n, k), ta, tb, beta in itertools.product(SHAPES, (False, True), (False, True), (0.0, 1.0)):
            c, want = _product(rt, m, n, k, ta, tb, 0.5, beta, rng)
            np.testing.assert_allclose(c, want, rtol=2e-4, atol=2e-4,
                                       err_msg=f"m={m} n={n} k={k} ta={ta} tb={tb} beta={beta} split={split}")


def test_beta_zero_ignores_nan_in_c(rt):
    """BLAS semantics: with beta = 0 the old C is not read (NaN there does not propagate)."""
    rt.relax_rt_configure(2, 0, 1024, -1, 0)
    rng = np.random.default_rng(3)
    for m, n, k in ((1, 2000, 300), (96, 700, 64)):
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        c = np.full((m, n), np.nan, np.float32)
        rt.relax_rt_sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, n, 0.0,
                          c.ctypes.data, n)
        np.testing.assert_allclose(c, a @ b, rtol=2e-4, atol=2e-4)


def test_concurrent_callers(rt):
    """Python threads calling at once (ctypes releases the GIL): one holds the pool, the others run
    on their own thread; every result is right."""
    rt.relax_rt_configure(2, 0, 1024, -1, 0)
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(20):
            m, n, k = (int(x) for x in rng.integers(1, 200, 3))
            c, want = _product(rt, m, n, k, bool(seed % 2), False, 1.0, 0.0, rng)
            if not np.allclose(c, want, rtol=2e-4, atol=2e-4):
                errors.append((seed, m, n, k))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_stats_count_split_and_serial_products(rt):
    """Structure, not time: split products count as parallel, small ones as serial; chunks add up
    (adapt = 0: split whatever the machine's load)."""
    rng = np.random.default_rng(5)
    rt.relax_rt_configure(2, 1 << 20, 1 << 16, -1, 0)
    s0 = native_rt.stats()
    _product(rt, 4, 8, 8, False, False, 1.0, 0.0, rng)
    s1 = native_rt.stats()
    assert s1["serial"] == s0["serial"] + 1 and s1["parallel"] == s0["parallel"]
    _product(rt, 128, 512, 256, False, False, 1.0, 0.0, rng)
    s2 = native_rt.stats()
    assert s2["parallel"] == s1["parallel"] + 1 and s2["serial"] == s1["serial"]
    assert s2["chunks"] - s1["chunks"] >= 2 and s2["worker_chunks"] - s1["worker_chunks"] <= s2["chunks"] - s1["chunks"]
    rt.relax_rt_configure(1, 0, -1, -1, 0)  # one thread: never split
    _product(rt, 128, 512, 256, False, False, 1.0, 0.0, rng)
    assert native_rt.stats()["parallel"] == s2["parallel"]


def test_forked_child_restarts_the_pool():
    """A child forked after the pool started has no workers: it starts its own at its first split
    product and gets the right result (multiprocessing's fork start method does this)."""
    script = textwrap.dedent("""
        import ctypes, os, numpy as np
        from relax_mlir.runtime import native_rt
        lib = native_rt.load()
        f = lib.relax_rt_sgemm
        P = ctypes.c_void_p
        f.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, P, ctypes.c_int, P, ctypes.c_int, ctypes.c_float, P, ctypes.c_int]
        lib.relax_rt_configure(2, 0, 1024, -1, 0)
        def product(m, n, k):
            a = np.random.rand(m, k).astype(np.float32); b = np.random.rand(k, n).astype(np.float32)
            c = np.zeros((m, n), np.float32)
            f(101, 111, 111, m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, n, 0.0, c.ctypes.data, n)
            return np.allclose(c, a @ b, rtol=2e-4, atol=2e-4)
        assert product(64, 900, 200)
        pid = os.fork()
        if pid == 0:
            ok = all(product(64, 900, 200) for _ in range(5))
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert product(64, 900, 200)
        print("ok")
    """)
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def _threaded_softmax_module():
    import jax
    import jax.numpy as jnp

    from relax_mlir.frontend.jax import from_jax

    (n,) = jax.export.symbolic_shape("n")
    f = lambda x, w: jax.nn.softmax(jnp.tanh(x @ w) + 1.0, axis=-1) * 2.0  # noqa: E731
    return f, from_jax(f, jax.ShapeDtypeStruct((n, 256), jnp.float32), jax.ShapeDtypeStruct((256, 256), jnp.float32))


@pytest.mark.parametrize("runtime", ["relax", "mlir"])
def test_threaded_build_on_either_async_runtime(monkeypatch, runtime):
    """A threaded build's parallel loops run as async tasks on the run-time library's pool (the
    default; the awaiting thread runs queued tasks itself) or on MLIR's async runtime; same results
    as jax at row counts on both sides of the parallel split, from one compile."""
    import jax

    import relax_mlir
    from relax_mlir.backend.cpu import CPUOptions

    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "never")
    monkeypatch.setenv("RELAX_MLIR_PARALLEL_MIN_ELEMENTS", "1")  # every call takes the threaded build
    monkeypatch.setenv("RELAX_MLIR_ASYNC_RUNTIME", runtime)
    f, module = _threaded_softmax_module()
    exe = relax_mlir.compile(module, options=CPUOptions(num_threads=2))
    before = native_rt.stats()
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((256, 256)) * 0.05).astype(np.float32)
    for m in (1, 7, 97, 1024, 5003):
        x = rng.standard_normal((m, 256)).astype(np.float32)
        np.testing.assert_allclose(exe(x, w), np.asarray(jax.jit(f)(x, w)), rtol=1e-5, atol=1e-6, err_msg=f"m={m}")
    tasks = native_rt.stats()["tasks"] - before["tasks"]
    assert (tasks > 0) == (runtime == "relax")


def test_async_tasks_on_one_thread_run_at_once(rt, monkeypatch):
    """With one thread (or while backing off) each task runs in its launcher at once."""
    import jax

    import relax_mlir
    from relax_mlir.backend.cpu import CPUOptions

    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "never")
    monkeypatch.setenv("RELAX_MLIR_PARALLEL_MIN_ELEMENTS", "1")
    f, module = _threaded_softmax_module()
    exe = relax_mlir.compile(module, options=CPUOptions(num_threads=2))
    rt.relax_rt_configure(1, -1, -1, -1, 0)
    before = native_rt.stats()
    x = np.random.default_rng(4).standard_normal((3001, 256)).astype(np.float32)
    w = np.eye(256, dtype=np.float32)
    np.testing.assert_allclose(exe(x, w), np.asarray(jax.jit(f)(x, w)), rtol=1e-5, atol=1e-6)
    after = native_rt.stats()
    assert after["tasks"] > before["tasks"]
    assert after["tasks"] - before["tasks"] == after["tasks_inline"] - before["tasks_inline"]
    assert after["tasks_by_workers"] == before["tasks_by_workers"]


@pytest.mark.parametrize("blas_threads", ["1", "2"])
def test_artifact_process_runs_openblas_on_one_thread(tmp_path, monkeypatch, blas_threads):
    """A process that only loads an exported CPU artifact (no compile, runtime/library.py never
    loaded) runs the artifact's OpenBLAS on one thread, pooled or not: left at OpenBLAS's default
    (the cores), each pooled chunk started OpenBLAS's threads and concurrent calls ran one at a
    time (a 512x2048x512 product split in two took as long as on one thread)."""
    import jax
    import jax.numpy as jnp

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "always")
    monkeypatch.setenv("RELAX_MLIR_BLAS_THREADS", blas_threads)
    (n,) = jax.export.symbolic_shape("n")
    mod = from_jax(lambda x, w: x @ w, jax.ShapeDtypeStruct((n, 256), jnp.float32),
                   jax.ShapeDtypeStruct((256, 512), jnp.float32))
    relax_mlir.compile(mod).export(str(tmp_path / "a"))
    script = textwrap.dedent(f"""
        import ctypes, glob, sys, numpy as np
        from relax_mlir.runtime import load
        exe = load({str(tmp_path / "a")!r})
        rng = np.random.default_rng(0)
        for m in (1, 7, 300):
            x = rng.standard_normal((m, 256), dtype=np.float32); w = rng.standard_normal((256, 512), dtype=np.float32)
            np.testing.assert_allclose(exe(x, w), x @ w, rtol=2e-4, atol=2e-4)
        assert "relax_mlir.runtime.library" not in sys.modules or sys.modules["relax_mlir.runtime.library"]._lib is None
        (blas,) = glob.glob({str(tmp_path / "a")!r} + "/libscipy_openblas*.so")
        print(ctypes.CDLL(blas).scipy_openblas_get_num_threads())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, OPENBLAS_NUM_THREADS="2"))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "1"


def test_a_damaged_cached_library_is_rebuilt(tmp_path):
    """The cached run-time library carries a record of its size and SHA-256, checked before it is
    loaded: a truncated one (disk full, a killed copy of ~/.cache; its intact headers let it map,
    then dlopen died of SIGBUS: probe s22/rt F2) or one without the record is rebuilt."""
    script = textwrap.dedent("""
        import ctypes, sys
        from relax_mlir.runtime import native_rt
        lib = native_rt.load()
        print("loaded", lib is not None and hasattr(lib, "relax_rt_sgemm"), native_rt.unavailable_reason())
    """)
    env = dict(os.environ, RELAX_MLIR_CACHE_DIR=str(tmp_path))

    def run():
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip()

    assert run().startswith("loaded True")
    (lib,) = [p for p in tmp_path.iterdir() if p.suffix == ".so"]
    good = lib.read_bytes()
    assert (tmp_path / (lib.name + ".sha256")).read_text().split()[0] == str(len(good))
    lib.write_bytes(good[:len(good) // 2])
    assert run().startswith("loaded True")
    assert lib.read_bytes() == good  # rebuilt, whole
    (tmp_path / (lib.name + ".sha256")).unlink()
    assert run().startswith("loaded True") and (tmp_path / (lib.name + ".sha256")).exists()


def test_no_worker_runs_a_product_that_was_not_split():
    """A worker woken for a task must not claim a chunk of a product its caller runs alone: the
    claim word started open (generation 0), and the first one-chunk product of a process ran twice,
    unsynchronized (wrong f16 / bf16 matmuls in 3 of 4 processes: probe s22/big F1). A threaded
    build's tasks wake the workers around a one-chunk pooled product; no chunk may reach a worker
    while no product was split."""
    script = textwrap.dedent("""
        import numpy as np
        import relax_mlir
        from relax_mlir.runtime import native_rt
        src = '''
        func.func @main(%x: !relax.tensor<["m", 16385], f32>, %w: !relax.tensor<[16385, 15], f32>)
            -> (!relax.tensor<["m", 15], f32>, !relax.tensor<["m", 16385], f32>) {
          %y = "relax.matmul"(%x, %w) : (!relax.tensor<["m", 16385], f32>, !relax.tensor<[16385, 15], f32>) -> !relax.tensor<["m", 15], f32>
          %e = "relax.exp"(%x) : (!relax.tensor<["m", 16385], f32>) -> !relax.tensor<["m", 16385], f32>
          return %y, %e : !relax.tensor<["m", 15], f32>, !relax.tensor<["m", 16385], f32>
        }'''
        exe = relax_mlir.compile(src)
        rng = np.random.default_rng(0)
        x = rng.standard_normal((16, 16385)).astype(np.float32)
        w = rng.standard_normal((16385, 15)).astype(np.float32)
        want = x.astype(np.float64) @ w
        for i in range(6):
            y, e = exe(x, w)
            assert np.allclose(y, want, rtol=1e-4, atol=1e-3), i
        st = native_rt.stats()
        print("stats", st["parallel"], st["serial"], st["worker_chunks"], st["tasks"])
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, RELAX_MLIR_NUM_THREADS="2"))
    assert out.returncode == 0, out.stderr[-3000:]
    parallel, serial, worker_chunks, tasks = map(int, out.stdout.split("stats", 1)[1].split())
    assert serial >= 1
    if parallel == 0:
        assert worker_chunks == 0, out.stdout
