"""CUDA runtime: run a module lowered by backend/gpu.py with CuPy.

`relax_mlir.targets.cuda.compile_cuda(module, options)` takes a module after `relax-to-upstream`, maps it onto the GPU
(backend/gpu.py up to `map`), extracts the host side of each entry as a host program
(runtime/hostprog.py), compiles the kernels to PTX (`to-ptx` on a copy) and returns a
`CudaExecutable`: `.ptx` holds the PTX of each gpu.module; calling it checks shapes first, then
runs the host program with `CupyDriver`. `exe.export(path)` writes an artifact that
`relax_mlir.runtime.load(path)` runs with numpy and CuPy only.

Kernel ABI (the `gpu-lower-to-nvvm-pipeline` default calling convention): a memref argument of
rank r is 3 + 2r parameters, {allocated pointer, aligned pointer, offset, sizes[r], strides[r]}
(pointers and index values 64-bit); a scalar is one parameter of its type (index: 64-bit).
Importing this module needs numpy only; CuPy is imported when a driver is created.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np

from relax_mlir.runtime.executable import Executable

__all__ = ["CudaExecutable", "CudaUnavailable", "CupyDriver", "pack_args"]

_CTYPES = {"i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8, "f32": np.float32,
           "f64": np.float64, "f16": np.float16}


class CudaUnavailable(RuntimeError):
    """CuPy or a CUDA device is not available."""


_DESCRIPTORS: dict = {}  # (address, shape) -> the memref descriptor's parameters


def _descriptor(ptr: int, shape: tuple) -> list:
    key = (ptr, shape)
    d = _DESCRIPTORS.get(key)
    if d is None:
        if len(_DESCRIPTORS) > 4096:  # buffers come back from the pool at the same addresses; bound it
            _DESCRIPTORS.clear()
        rank = len(shape)
        strides = [1] * rank
        for k in range(rank - 1, 0, -1):
            strides[k - 1] = strides[k] * shape[k]
        p = np.uint64(ptr)
        d = _DESCRIPTORS[key] = [p, p, np.int64(0)] + [np.int64(s) for s in shape] + [np.int64(s) for s in strides]
    return d


def pack_args(args, pointer) -> list:
    """The kernel parameters of a launch's (abi, value) arguments, as numpy scalars; `pointer(handle)`
    gives a device buffer's address. A memref is its descriptor {pointer, pointer, offset 0, sizes,
    row-major strides} (every buffer a kernel gets is whole: subviews are folded into indices)."""
    out = []
    for abi, v in args:
        if abi["kind"] == "memref":
            shape = tuple(v.shape)
            if abi["rank"] == 0 and shape == (1,):  # a scalar the host program holds as one element
                shape = ()
            if len(shape) != abi["rank"]:
                raise ValueError(f"a rank-{abi['rank']} memref argument got a buffer of shape {v.shape}")
            out += _descriptor(pointer(v.handle), shape)
        else:
            out.append(_CTYPES[abi["ctype"]](v))
    return out


class CupyDriver:
    """The host-program driver for PTX kernels through CuPy; `ptx` maps each gpu.module name to a
    .ptx file path or to PTX text."""

    def __init__(self, ptx: dict[str, str]):
        try:
            import cupy
        except Exception as e:  # ImportError, or a broken CUDA installation
            raise CudaUnavailable(f"target='cuda' needs a CUDA device and CuPy to run; CuPy is not importable: {e}") from None
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:
            raise CudaUnavailable(f"target='cuda' needs a CUDA device and CuPy to run; no CUDA driver: {e}") from None
        if count < 1:
            raise CudaUnavailable("target='cuda' needs a CUDA device and CuPy to run; CuPy sees no CUDA device")
        self.cupy = cupy
        self._tmp = None
        self.files = {}
        for module, src in ptx.items():
            if src.endswith(".ptx") and os.path.isfile(src):
                self.files[module] = src
            else:  # PTX text: RawModule loads PTX from a file (cuModuleLoad)
                if self._tmp is None:
                    self._tmp = tempfile.TemporaryDirectory(prefix="relax-mlir-ptx-")
                p = os.path.join(self._tmp.name, f"{module}.ptx")
                with open(p, "w", encoding="utf-8") as f:
                    f.write(src)
                self.files[module] = p
        self._modules = {}
        self._functions = {}

    def function(self, module: str, kernel: str):
        key = (module, kernel)
        fn = self._functions.get(key)
        if fn is None:
            mod = self._modules.get(module)
            if mod is None:
                if module not in self.files:
                    raise RuntimeError(f"no PTX for gpu.module @{module}")
                mod = self._modules[module] = self.cupy.RawModule(path=self.files[module])
            fn = self._functions[key] = mod.get_function(kernel)
        return fn

    @staticmethod
    def pointer(handle) -> int:
        return handle.data.ptr

    # the protocol of runtime/hostprog.py
    def alloc(self, nbytes: int):
        return self.cupy.empty(max(int(nbytes), 1), dtype=self.cupy.uint8)

    def upload(self, handle, data: np.ndarray) -> None:
        handle[:data.size].set(np.ascontiguousarray(data, dtype=np.uint8))

    def download(self, handle, nbytes: int):
        return handle[:nbytes].get()

    def copy(self, src, dst, nbytes: int) -> None:
        dst[:nbytes] = src[:nbytes]

    def launch(self, module: str, kernel: str, grid, block, shared: int, args) -> None:
        fn = self.function(module, kernel)
        fn(tuple(grid), tuple(block), tuple(pack_args(args, self.pointer)), shared_mem=int(shared))

    def sync(self) -> None:
        self.cupy.cuda.get_current_stream().synchronize()

    def free(self, handle) -> None:
        pass  # the array returns to CuPy's pool when its last reference goes (stream-ordered)


class CudaExecutable(Executable):
    """target="cuda": an Executable whose kernels are PTX (`.ptx`: {gpu.module name: PTX text}).
    Calling it needs CuPy and a CUDA device; shape checks run before either is asked for."""

    @property
    def ptx(self) -> dict[str, str]:
        return self.artifacts["ptx"]
