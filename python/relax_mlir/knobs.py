"""Every RELAX_MLIR_* environment setting, in one place."""
from __future__ import annotations

import os


def num_threads() -> int:
    """RELAX_MLIR_NUM_THREADS: kernel threads (default: all cores; 1 = single-threaded)."""
    v = os.environ.get("RELAX_MLIR_NUM_THREADS")
    return max(1, int(v)) if v else (os.cpu_count() or 1)


def debug() -> bool:
    """RELAX_MLIR_DEBUG=1: print the Python traceback of an internal error in a pass; the CPU backend
    verifies the module after every pass of its stages (else once per stage)."""
    return os.environ.get("RELAX_MLIR_DEBUG", "") not in ("", "0")


def dump_ir() -> str | None:
    """RELAX_MLIR_DUMP_IR=DIR: `compile()` writes the IR after each pass under DIR (one file per
    pass, named after it, in MLIR's tree-printing layout). Unset or empty: no dump."""
    v = os.environ.get("RELAX_MLIR_DUMP_IR", "")
    return v or None


def verbose() -> bool:
    """RELAX_MLIR_VERBOSE=1: `compile()` prints each pass with its time (as `verbose=True`)."""
    return os.environ.get("RELAX_MLIR_VERBOSE", "") not in ("", "0")


def num_threads_setting() -> int | None:
    """RELAX_MLIR_NUM_THREADS as given (None: unset); ValueError unless an integer >= 1."""
    env = os.environ.get("RELAX_MLIR_NUM_THREADS")
    if not env:
        return None
    try:
        n = int(env)
    except ValueError:
        raise ValueError(f"RELAX_MLIR_NUM_THREADS must be an integer, got {env!r}") from None
    if n < 1:
        raise ValueError(f"RELAX_MLIR_NUM_THREADS must be >= 1, got {n}")
    return n


def profile() -> bool:
    """RELAX_MLIR_PROFILE=1: the CPU backend times every kernel call of the host program and the
    process prints a table per executable at exit (backend/cpu_profile.py). Default off."""
    return os.environ.get("RELAX_MLIR_PROFILE", "") not in ("", "0")


def use_library() -> str:
    """RELAX_MLIR_LIBRARY=auto|always|never: library dispatch of matmuls (default auto)."""
    return os.environ.get("RELAX_MLIR_LIBRARY", "auto")


def blas_threads() -> int:
    """RELAX_MLIR_BLAS_THREADS: OpenBLAS threads for the large products of relax.call_library
    (at least RELAX_MLIR_BLAS_PARALLEL_MIN multiply-adds; smaller ones run on one thread).
    Default 1: a multi-threaded OpenBLAS call waits at a barrier for its slowest thread, and on a
    machine whose other cores are busy that thread waits for a scheduler tick (measured on the
    shared 2-core machine, runtime/library.py: a 512x512x256 sgemm 1.0 ms on one thread, 16 ms
    median on two, 0.6 ms only when the second core happened to be idle)."""
    v = os.environ.get("RELAX_MLIR_BLAS_THREADS")
    return max(1, int(v)) if v else 1


def blas_parallel_min() -> int:
    """RELAX_MLIR_BLAS_PARALLEL_MIN: multiply-adds from which a BLAS product runs multi-threaded
    (default 8M: the attention products of the transformer block at seq 512 are 16.8M)."""
    v = os.environ.get("RELAX_MLIR_BLAS_PARALLEL_MIN")
    return int(v) if v else 1 << 23


def parallel_min_elements() -> int:
    """RELAX_MLIR_PARALLEL_MIN_ELEMENTS: a call runs the multi-threaded build only when its
    arguments and results hold at least this many elements (default 4M)."""
    v = os.environ.get("RELAX_MLIR_PARALLEL_MIN_ELEMENTS")
    return int(v) if v else 1 << 22
