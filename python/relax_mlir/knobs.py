"""Every RELAX_MLIR_* environment setting, in one place."""
from __future__ import annotations

import contextlib
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


def _count_setting(name: str) -> int | None:
    """The setting `name` as given (None: unset); ValueError unless an integer >= 1."""
    env = os.environ.get(name)
    if not env:
        return None
    try:
        n = int(env)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {env!r}") from None
    if n < 1:
        raise ValueError(f"{name} must be >= 1, got {n}")
    return n


def num_threads_setting() -> int | None:
    """RELAX_MLIR_NUM_THREADS as given (None: unset); ValueError unless an integer >= 1."""
    return _count_setting("RELAX_MLIR_NUM_THREADS")


def profile() -> bool:
    """RELAX_MLIR_PROFILE=1: the CPU backend times every kernel call of the host program and the
    process prints a table per executable at exit (backend/cpu_profile.py). Default off."""
    return os.environ.get("RELAX_MLIR_PROFILE", "") not in ("", "0")


def flush_denormals() -> bool:
    """RELAX_MLIR_DENORMALS=keep|flush: compiled CPU code runs in its caller's floating-point mode
    (IEEE denormals, numpy's and StableHLO's results; the default) or flushes denormal floats to
    zero (FTZ and DAZ, as XLA on CPU runs jax.jit's code)."""
    v = os.environ.get("RELAX_MLIR_DENORMALS", "keep") or "keep"
    if v not in ("flush", "keep"):
        raise ValueError(f"RELAX_MLIR_DENORMALS must be 'keep' or 'flush', got {v!r}")
    return v == "flush"


def use_library() -> str:
    """RELAX_MLIR_LIBRARY=auto|always|never: library dispatch of matmuls (default auto)."""
    v = os.environ.get("RELAX_MLIR_LIBRARY", "auto") or "auto"
    if v not in ("auto", "always", "never"):
        raise ValueError(f"RELAX_MLIR_LIBRARY must be auto, always or never, got {v!r}")
    return v


def blas_threads() -> int:
    """RELAX_MLIR_BLAS_THREADS: threads of the run-time library's pool for the large products of
    relax.call_library (runtime/relax_rt.c), the calling thread included (default: the cores this
    process may use, at most 8; 1: every product on the calling thread). The pool claims chunks
    dynamically and backs off to one thread while the machine's other cores are busy, so the
    default is safe on a shared machine (a static split measured 10-250x slower under load)."""
    v = os.environ.get("RELAX_MLIR_BLAS_THREADS")
    if v:
        return max(1, int(v))
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def jit_threads() -> int:
    """RELAX_MLIR_JIT_THREADS: threads that generate a CPU build's machine code, each LLVM on its
    own part of the module (backend/cpu_engine.py; default: the cores this process may use, at
    most 8; 1: the whole module on the calling thread, as MLIR's ExecutionEngine does)."""
    n = _count_setting("RELAX_MLIR_JIT_THREADS")
    if n is not None:
        return n
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def blas_parallel_min() -> int:
    """RELAX_MLIR_BLAS_PARALLEL_MIN: multiply-adds from which a BLAS product is split over the
    pool (default 1M: about 50 us on one core, against 5-20 us to wake a worker)."""
    v = os.environ.get("RELAX_MLIR_BLAS_PARALLEL_MIN")
    return int(v) if v else 1 << 20


def async_runtime() -> str:
    """RELAX_MLIR_ASYNC_RUNTIME=relax|mlir: the implementation of MLIR's async runtime API that
    threaded builds call: relax-mlir's run-time library (default: its contention-aware pool, where
    the awaiting thread runs queued tasks itself; runtime/relax_rt.c) or MLIR's own
    libmlir_async_runtime (an LLVM thread pool; the awaiting thread sleeps)."""
    v = os.environ.get("RELAX_MLIR_ASYNC_RUNTIME", "relax")
    if v not in ("relax", "mlir"):
        raise ValueError(f"RELAX_MLIR_ASYNC_RUNTIME must be relax or mlir, got {v!r}")
    return v


def parallel_min_elements(default: int = 1 << 22) -> int:
    """RELAX_MLIR_PARALLEL_MIN_ELEMENTS: a call runs the multi-threaded build only when its
    arguments and results hold at least this many elements (default `default`: the CPU backend
    passes 256K when relax-mlir's run-time library runs the parallel loops, 4M on MLIR's async
    runtime, whose sleeping pool costs 50-100 us to wake per loop; backend/cpu_runtime.py)."""
    v = os.environ.get("RELAX_MLIR_PARALLEL_MIN_ELEMENTS")
    return int(v) if v else default


def builds() -> str:
    """RELAX_MLIR_BUILDS=all|first: a CPU program that may run both single- and multi-threaded
    (by its calls' sizes) gets both builds in `compile()` (`all`, the default: no call compiles),
    or only the one its smallest calls take (`first`; the other is compiled at the first call that
    needs it: compile() costs about half, as jax.jit compiles a shape at its first call). A
    lowering error of the deferred build is then a CompileError of that call."""
    v = os.environ.get("RELAX_MLIR_BUILDS", "all") or "all"
    if v not in ("all", "first"):
        raise ValueError(f"RELAX_MLIR_BUILDS must be 'all' or 'first', got {v!r}")
    return v


@contextlib.contextmanager
def overridden(**settings: str):
    """Set RELAX_MLIR_* environment settings for the duration of a `with` block (the compiles
    inside it read them), restoring the previous values after it:
    `with knobs.overridden(RELAX_MLIR_BLAS_THREADS="1"): exe = relax_mlir.compile(...)`."""
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
