"""relax-mlir's CPU run-time library (`relax_rt.c`): products on a contention-aware thread pool.

The C source ships with the package and is compiled once per machine with the system C compiler
(`cc`) into a cache directory (RELAX_MLIR_CACHE_DIR, default `~/.cache/relax-mlir`), linked against
the BLAS of `scipy-openblas32` (runtime/library.py). Exported CPU artifacts compile the same source
into their `kernels.so` (backend/cpu_artifact.py). Without a C compiler the compiled modules call
OpenBLAS directly, on one thread (`available()` says which).

Why a pool of our own and not OpenBLAS's threads: see the comment at the top of relax_rt.c and
runtime/library.py (a static split waits for its slowest thread; on a shared machine that thread
waits for a scheduler tick).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading

from relax_mlir import knobs
from relax_mlir.runtime import library

__all__ = ["SGEMM_SYMBOL", "SYMBOL_PREFIX", "available", "configure", "libraries_for", "library_path", "load", "source",
           "start", "stats"]

SYMBOL_PREFIX = "relax_rt_"
ASYNC_PREFIX = "mlirAsyncRuntim"  # MLIR's async runtime API (and its misspelt GetNumWorkerThreads)
SGEMM_SYMBOL = "relax_rt_sgemm"
_SOURCE = os.path.join(os.path.dirname(__file__), "relax_rt.c")
_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_path: str | None = None
_failed: str | None = None


def source() -> str:
    with open(_SOURCE) as f:
        return f.read()


def _cache_dir() -> str:
    d = os.environ.get("RELAX_MLIR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "relax-mlir")
    os.makedirs(d, exist_ok=True)
    return d


def _build(blas: str) -> str:
    """Compile relax_rt.c against `blas` into the cache (once per source, compiler and BLAS);
    the path of the shared library."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise RuntimeError("no C compiler (cc) to build relax-mlir's run-time library")
    key = hashlib.sha256((source() + "\0" + os.path.realpath(cc) + "\0" + os.path.realpath(blas)).encode())
    out = os.path.join(_cache_dir(), f"librelax_rt-{key.hexdigest()[:16]}.so")
    if _intact(out):
        return out
    with tempfile.TemporaryDirectory(dir=os.path.dirname(out)) as tmp:
        tmp_out = os.path.join(tmp, "librelax_rt.so")
        cmd = [cc, "-O2", "-fPIC", "-shared", "-pthread", _SOURCE, "-o", tmp_out, blas,
               "-Wl,-rpath," + os.path.dirname(os.path.realpath(blas))]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"building relax-mlir's run-time library failed ({' '.join(cmd)}):\n{r.stderr}")
        os.replace(tmp_out, out)  # atomic: concurrent builders (pytest workers) write the same file
        record = os.path.join(tmp, "record")
        with open(record, "w") as f:
            f.write(f"{os.path.getsize(out)} {_sha256(out)}\n")
        os.replace(record, out + ".sha256")
    return out


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _intact(out: str) -> bool:
    """Whether the cached library `out` is whole: the size and SHA-256 recorded after it was built
    match (a truncated library with intact headers maps, then faults in dlopen: SIGBUS; a cache
    from before the record is rebuilt once)."""
    try:
        with open(out + ".sha256", encoding="ascii") as f:
            size, digest = f.read().split()
        return os.path.getsize(out) == int(size) and _sha256(out) == digest
    except (OSError, ValueError, UnicodeDecodeError):
        return False


def configure(lib: ctypes.CDLL, threads: int | None = None) -> None:
    """Apply the RELAX_MLIR_* settings (knobs.py) to a loaded runtime (the JIT's or an artifact's
    kernels.so, which compiles the same source)."""
    f = lib.relax_rt_configure
    f.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_int]
    f(knobs.blas_threads() if threads is None else threads, knobs.blas_parallel_min(), -1, -1, 1)


def load() -> ctypes.CDLL | None:
    """The run-time library, built and loaded once per process (RTLD_LOCAL); None where it cannot
    be built (no C compiler, no BLAS), with the reason in `unavailable_reason()`."""
    global _lib, _path, _failed
    with _lock:
        if _lib is None and _failed is None:
            blas = library.library_path()
            if blas is None:
                _failed = "scipy-openblas32 is not installed"
                return None
            library.load()  # OpenBLAS's own settings (one thread, warm buffers)
            try:
                _path = _build(blas)
                lib = ctypes.CDLL(_path)
            except (RuntimeError, OSError) as e:
                _failed = str(e)
                return None
            configure(lib)
            _lib = lib
        return _lib


def start(lib: ctypes.CDLL | None = None) -> int:
    """Start the pool's workers of `lib` (this process's run-time library by default, or an
    artifact's kernels.so, which compiles the same source) now, at build or load time, so that no
    call pays for creating them; the threads a product may use (1: no pool, or none loaded)."""
    lib = lib or load()
    if lib is None or not hasattr(lib, "relax_rt_start"):
        return 1
    return int(lib.relax_rt_start())


def available() -> bool:
    return load() is not None


def unavailable_reason() -> str | None:
    load()
    return _failed


def library_path() -> str | None:
    return _path if load() is not None else None


def stats() -> dict[str, int]:
    """Counters of this process's pool: products split / run on one thread, stalls (a worker
    preempted inside its chunk or task: back-off follows), products no worker joined, chunks run
    by workers / in all, the callers' wait for workers (ns), the current back-off (ns); async
    tasks (parallel loop blocks of threaded builds) in all / run at once by their launcher / run
    by workers; products and tasks kept on the calling thread because the machine's other cores
    were busy."""
    lib = load()
    if lib is None:
        return {}
    out = (ctypes.c_long * 12)()
    lib.relax_rt_stats(out)
    names = ("parallel", "serial", "stalls", "absent", "worker_chunks", "chunks", "wait_ns", "backoff_ns", "tasks",
             "tasks_inline", "tasks_by_workers", "busy")
    return dict(zip(names, out))


def pooled_products() -> bool:
    """Do the BLAS products of modules compiled now run on this library's pool (it can be built,
    and RELAX_MLIR_BLAS_THREADS is above one)? Otherwise they call OpenBLAS on one thread."""
    return knobs.blas_threads() > 1 and load() is not None


def runs_async_tasks() -> bool:
    """Do threaded builds run their parallel loops on this library's pool (it implements MLIR's
    async runtime API: relax_rt.c) rather than on MLIR's libmlir_async_runtime?
    RELAX_MLIR_ASYNC_RUNTIME=mlir chooses MLIR's (for comparison)."""
    return knobs.async_runtime() == "relax" and load() is not None


def libraries_for(symbols) -> list[str]:
    """The shared libraries that define the run-time and BLAS symbols among `symbols` (loading
    them): this library for `relax_rt_*`, OpenBLAS for `scipy_cblas_*` (runtime/library.py)."""
    out = []
    if any(s.startswith(SYMBOL_PREFIX) for s in symbols) or (
            any(s.startswith(ASYNC_PREFIX) for s in symbols) and runs_async_tasks()):
        if load() is None:
            raise RuntimeError("the module calls relax-mlir's run-time library, which cannot be built here: "
                               f"{_failed}")
        out.append(_path)
    return out + library.libraries_for(symbols)
