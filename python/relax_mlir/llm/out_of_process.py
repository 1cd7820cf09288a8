"""Compiling in a child process (`Generator(..., out_of_process=True)`): the child deserializes the
`jax.export` exports, compiles each with `relax_mlir.compile`, and writes CPU artifacts
(`Executable.export`); this process loads them with `relax_mlir.runtime.load`, so no IR, no pass
and no JIT ever runs here (an artifact needs no MLIR library: backend/cpu_artifact.py): its peak memory is the model's weights, the KV
cache and the workspace, plus numpy and jax (bench/llm.py --rss-only --out-of-process). The
artifacts carry the multi-threaded build where the compile uses threads (the default options;
their parallel loops run on relax_rt.c's pool, compiled into the artifact) beside the one-thread
one, and the export adds their lowerings and `opt`/`llc` to the compile time.

    python -m relax_mlir.llm.out_of_process DIR   (what the child runs, `main`: DIR/<k>.jaxexport -> DIR/<k>/)
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile

import relax_mlir
from relax_mlir.core.diagnostics import CompileError
from relax_mlir.runtime import load

__all__ = ["compile_out_of_process", "return_freed_memory"]

_REFUSED = 3  # the child's exit status for a CompileError (its message on stderr)


def return_freed_memory() -> None:
    """Collect garbage and hand the C heap's free pages back to the system (glibc `malloc_trim`):
    what a compile freed (its IR, LLVM's temporaries) then stops counting in this process's
    resident memory, so the cache and workspaces allocated next reuse it instead of raising the
    peak (measured in bench/llm.py --rss-only). Nothing happens where there is no glibc."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def compile_out_of_process(exports: list, target: str = "cpu",
                           options=None) -> tuple[list, tempfile.TemporaryDirectory]:
    """Executables (loaded artifacts) of the `jax.export.Exported` functions `exports`, compiled in a
    child process; and the directory that holds their files (removed when it is collected)."""
    if target != "cpu":
        raise ValueError(f"out_of_process compiles CPU artifacts; target {target!r} is not supported")
    work = tempfile.TemporaryDirectory(prefix="relax-mlir-llm-")
    done = False
    try:
        for k, ex in enumerate(exports):
            with open(os.path.join(work.name, f"{k}.jaxexport"), "wb") as f:
                f.write(ex.serialize())
        with open(os.path.join(work.name, "options.pickle"), "wb") as f:
            pickle.dump(options, f)
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(relax_mlir.__file__)))
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        # (-c, not -m: relax_mlir.llm imports this module, and runpy would warn about running it again)
        r = subprocess.run([sys.executable, "-c", "import sys; from relax_mlir.llm.out_of_process import main; "
                            "sys.exit(main(sys.argv[1]))", work.name], env=env, capture_output=True, text=True)
        if r.returncode == _REFUSED:  # the compiler's own error: its message, not the child's traceback
            raise CompileError(f"compiling in a child process: {r.stderr.strip()[-4000:]}")
        if r.returncode != 0:
            raise CompileError(f"compiling in a child process failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
        loaded = [load(os.path.join(work.name, str(k))) for k in range(len(exports))]
        done = True
        return loaded, work
    finally:
        if not done:
            work.cleanup()  # nothing of a failed compile stays in the temporary directory


def _child(work: str) -> None:
    import jax

    from relax_mlir.frontend.jax import import_exported  # the compiler: in the child only

    with open(os.path.join(work, "options.pickle"), "rb") as f:
        options = pickle.load(f)
    k = 0
    while os.path.exists(os.path.join(work, f"{k}.jaxexport")):
        with open(os.path.join(work, f"{k}.jaxexport"), "rb") as f:
            ex = jax.export.deserialize(bytearray(f.read()))
        exe = relax_mlir.compile(import_exported(ex), "cpu", options=options)
        exe.export(os.path.join(work, str(k)))
        del exe
        k += 1


def main(work: str) -> int:
    """The child: compile and export `work`'s exports; a CompileError is its message on stderr and
    exit status _REFUSED (anything else is a bug: its traceback)."""
    try:
        _child(work)
    except CompileError as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return _REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
