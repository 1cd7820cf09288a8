"""External libraries that `relax.call_library` may call, and where their code comes from.

One routine today: `sgemm` (C = op(A) op(B), f32, row-major), bound to OpenBLAS's CBLAS from the
PyPI wheel `scipy-openblas32` (its symbols carry the `scipy_` prefix, so it never clashes with the
OpenBLAS that numpy bundles). The JIT loads the library when a module references one of its
symbols (backend/cpu.py `JitModule`); exported CPU artifacts ship a copy beside `kernels.so`.

OpenBLAS itself always runs on one thread here: the compiled modules call `relax_rt_sgemm`
(runtime/relax_rt.c, runtime/native_rt.py), which splits a large product into chunks and runs
them as one-thread OpenBLAS calls on its own contention-aware pool (RELAX_MLIR_BLAS_THREADS threads,
default all cores). The pool's workers spin only briefly, and OpenBLAS's own would spin for about
2^28 cycles after a multi-threaded call (OPENBLAS_THREAD_TIMEOUT=4 is set, in case a user calls
it so): they competed with the single-threaded kernels that followed (the MLP's
[32, 64] x [64, 256] took 11.7 ms instead of 0.085 ms).

Why one thread (issue 18, measured on the shared 2-core machine, load average 3-4, ctypes calls
of this library's sgemm, 512x512x256, median of 40; /tmp-free script in bench/dispatch.py
`--blas`): 1 thread 1.0 ms; 2 threads 16.0 ms median (min 0.6 ms, 1.1 ms; every slow call a
multiple of the 4 ms scheduler tick: 8.2, 16.0, 24.0 ms); with one more busy process 36-40 ms.
A multi-threaded call is a barrier: it ends when its last thread ends, and a worker that finds
its core taken by another process waits for the next tick. The thread-count switch itself is
not the cost (0.6 us). So the single-head attention at s = 512 took 17-100 ms with two threads
and 2.3 ms with one (7.9 ms before on generated code). relax_rt's pool claims chunks dynamically
and the caller takes part, so an absent worker costs nothing (runtime/relax_rt.c).

Measured again for the LLM prefill's weight products (issue 17; `bench/dispatch.py --crossover
--llm`, load average 10-11, medians of interleaved calls): two threads were slower than one at
every shape and row count tried, 1.0-1.4x for [16..512, 1024] x [1024, 32000], 2-15x for
[17..512, 2816] x [2816, 1024], up to 250x for [16..512, 1024] x [1024, 256] (a 1 ms product
waiting 60-90 ms). OpenBLAS's threads are therefore never used.
"""
from __future__ import annotations

import ctypes
import os
import threading

__all__ = ["SGEMM_SYMBOL", "SYMBOL_PREFIX", "available", "library_path", "libraries_for", "load"]

SYMBOL_PREFIX = "scipy_cblas_"
SGEMM_SYMBOL = "scipy_cblas_sgemm"
SET_THREADS_SYMBOL = "scipy_openblas_set_num_threads"
# CBLAS enums
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def library_path() -> str | None:
    """The OpenBLAS shared library of the scipy-openblas32 wheel, or None if it is not installed."""
    try:
        import scipy_openblas32 as sob
    except ImportError:
        return None
    path = os.path.join(sob.get_lib_dir(), sob.get_library(fullname=True))
    return path if os.path.exists(path) else None


def available() -> bool:
    return library_path() is not None


def _warm_up(lib: ctypes.CDLL) -> None:
    """One 1x1x1 sgemm: OpenBLAS allocates its work buffers at its first call, which would
    otherwise land in the first call of a compiled module (issue 18: no first-call surprises)."""
    f = getattr(lib, SGEMM_SYMBOL)
    a = (ctypes.c_float * 3)(1.0, 1.0, 0.0)
    p = ctypes.cast(a, ctypes.c_void_p).value
    f.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                       ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
    f(ROW_MAJOR, NO_TRANS, NO_TRANS, 1, 1, 1, 1.0, p, 1, p + 4, 1, 0.0, p + 8, 1)


def load() -> ctypes.CDLL:
    """dlopen the BLAS once per process, on one thread."""
    global _lib
    with _lock:
        if _lib is None:
            path = library_path()
            if path is None:
                raise RuntimeError("relax.call_library needs the BLAS of PyPI 'scipy-openblas32', which is not "
                                   "installed (pip install scipy-openblas32, or compile with "
                                   "RELAX_MLIR_LIBRARY=never)")
            os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # read once, at the library's init
            lib = ctypes.CDLL(path)
            setter = getattr(lib, SET_THREADS_SYMBOL, None)
            if setter is not None:
                setter.argtypes = [ctypes.c_int]
                setter(1)
            _warm_up(lib)
            _lib = lib
        return _lib


def libraries_for(symbols) -> list[str]:
    """The shared libraries that define the library symbols among `symbols` (loading them)."""
    if any(s.startswith(SYMBOL_PREFIX) for s in symbols):
        load()
        return [library_path()]
    return []
