"""Run compiled relax programs. `load(path)` runs an exported artifact without MLIR in the process:
a cpu artifact with numpy and ctypes, a vulkan one with numpy and wgpu, a cuda one with numpy and
CuPy (runtime/loader.py)."""
from __future__ import annotations


def load(path: str, *, driver=None):
    """Load an artifact written by `Executable.export`; `driver` replaces a GPU artifact's driver."""
    from relax_mlir.runtime.loader import load as _load

    return _load(path, driver=driver)
