"""Run compiled relax programs. `load(path)` runs an exported artifact with numpy and ctypes only
(no MLIR, no LLVM in the process)."""
from __future__ import annotations


def load(path: str):
    from relax_mlir.runtime.loader import load as _load

    return _load(path)
