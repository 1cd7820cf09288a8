"""Every RELAX_MLIR_* environment setting, in one place."""
from __future__ import annotations

import os


def num_threads() -> int:
    """RELAX_MLIR_NUM_THREADS: kernel threads (default: all cores; 1 = single-threaded)."""
    v = os.environ.get("RELAX_MLIR_NUM_THREADS")
    return max(1, int(v)) if v else (os.cpu_count() or 1)


def dump_ir() -> bool:
    """RELAX_MLIR_DUMP_IR=1: print the IR after each compile stage to stderr."""
    return os.environ.get("RELAX_MLIR_DUMP_IR", "") not in ("", "0")


def use_library() -> str:
    """RELAX_MLIR_LIBRARY=auto|always|never: library dispatch of matmuls (default auto)."""
    return os.environ.get("RELAX_MLIR_LIBRARY", "auto")


def blas_threads() -> int:
    """RELAX_MLIR_BLAS_THREADS: OpenBLAS threads for the large products of relax.call_library
    (at least RELAX_MLIR_BLAS_PARALLEL_MIN multiply-adds; smaller ones run on one thread).
    Default: all cores."""
    v = os.environ.get("RELAX_MLIR_BLAS_THREADS")
    return max(1, int(v)) if v else (os.cpu_count() or 1)


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
