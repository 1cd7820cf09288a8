"""MLIR's native libraries, loaded so that another LLVM in the process cannot bind to them.

The MLIR wheel brings its own libLLVM.so and libMLIRPythonCAPI.so. A library loaded earlier with
RTLD_GLOBAL that carries another copy of LLVM (tensorflow's pywrap, which the `gemma` package
imports) would interpose its symbols on those, and `import mlir.ir` after `import tensorflow`
dies with SIGSEGV. `install()` (run by `import relax_mlir`) puts a finder first on sys.meta_path
that loads MLIR's extension modules (`mlir._mlir_libs._*`, and with them their libraries) with
RTLD_DEEPBIND: each looks its symbols up in its own dependencies first. Nothing is imported
here, so the MLIR-free paths (an exported artifact run with `relax_mlir.runtime.load`) stay free
of MLIR; only those extension modules see the flag. Where the platform has no RTLD_DEEPBIND,
nothing changes.

The other direction (tensorflow imported after a compile) is the CPU backend's part: it opens
MLIR's runtime libraries RTLD_LOCAL (backend/cpu.py `_load_local`), so LLVM never reaches the
global scope for tensorflow's libraries to bind to; and lavapipe's LLVM is shielded by
runtime/vulkan.py `shield_drivers`.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

_PREFIX = "mlir._mlir_libs._"


class _DeepBindLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.machinery.ExtensionFileLoader):
        self.inner = inner

    def create_module(self, spec):
        flags = sys.getdlopenflags()
        sys.setdlopenflags(flags | os.RTLD_DEEPBIND)
        try:
            return self.inner.create_module(spec)
        finally:
            sys.setdlopenflags(flags)

    def exec_module(self, module) -> None:
        self.inner.exec_module(module)


class _DeepBindFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if not name.startswith(_PREFIX):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            spec.loader = _DeepBindLoader(spec.loader)
            return spec
        return None


def install() -> None:
    if hasattr(os, "RTLD_DEEPBIND") and not any(isinstance(f, _DeepBindFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _DeepBindFinder())
