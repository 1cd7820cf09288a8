"""A strict stand-in for the part of CuPy that runtime/cuda.py's CupyDriver uses, for machines
without a GPU: device memory is numpy bytes, kernels are looked up in the PTX files and checked,
and nothing runs. It enforces what CuPy and the CUDA driver would refuse: `ndarray.set` only from
a host array of the same shape and dtype, kernel arguments only as device arrays or numpy
scalars, one argument per `.param` of the `.entry` with the same byte size, grid and block
within CUDA's limits, shared memory within the 48 KiB a launch gets without opting in.

`install(monkeypatch)` puts it in sys.modules as `cupy`; the launches it saw are in `LAUNCHES`.
"""
from __future__ import annotations

import re
import sys
import types

import numpy as np

LAUNCHES: list[dict] = []
_PARAM = re.compile(r"\.param\s+\.(\w+)")
_SIZES = {"u8": 1, "s8": 1, "b8": 1, "u16": 2, "s16": 2, "b16": 2, "f16": 2, "u32": 4, "s32": 4, "b32": 4,
          "f32": 4, "u64": 8, "s64": 8, "b64": 8, "f64": 8}


def entry_param_sizes(ptx: str, kernel: str) -> list[int]:
    """The byte size of each parameter of `.entry kernel` in `ptx`."""
    m = re.search(r"\.entry\s+" + re.escape(kernel) + r"\s*\(([^)]*)\)", ptx)
    if m is None:
        raise RuntimeError(f"CUDA_ERROR_NOT_FOUND: no .entry {kernel}")
    return [_SIZES[t] for t in _PARAM.findall(m.group(1))]


class _Memory:
    def __init__(self, nbytes):
        self.bytes = np.zeros(nbytes, np.uint8)


class _Pointer:
    def __init__(self, ptr):
        self.ptr = ptr


class ndarray:
    """A 1-D device byte array (all CupyDriver allocates) or a slice of one."""

    def __init__(self, mem: _Memory, start: int, stop: int, dtype):
        self._mem, self._start, self._stop = mem, start, stop
        self.dtype = np.dtype(dtype)
        self.shape = ((stop - start) // self.dtype.itemsize,)

    @property
    def data(self):
        return _Pointer(self._mem.bytes.ctypes.data + self._start)

    def _host(self) -> np.ndarray:
        return self._mem.bytes[self._start:self._stop].view(self.dtype)

    def __getitem__(self, s):
        if not isinstance(s, slice) or s.step not in (None, 1):
            raise TypeError("the fake supports a[start:stop] only")
        start, stop, _ = s.indices(self.shape[0])
        k = self.dtype.itemsize
        return ndarray(self._mem, self._start + start * k, self._start + max(start, stop) * k, self.dtype)

    def __setitem__(self, s, value):
        if not isinstance(value, ndarray):
            raise TypeError("device-to-device assignment expects a cupy.ndarray")
        dst = self[s]
        if dst.shape != value.shape or dst.dtype != value.dtype:
            raise ValueError(f"operands could not be broadcast together with shapes {dst.shape} {value.shape}")
        dst._host()[...] = value._host()

    def set(self, arr):
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"Only numpy.ndarray can be set to cupy.ndarray, not {type(arr)}")
        if arr.shape != self.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self.shape}, new shape: {arr.shape}")
        if arr.dtype != self.dtype:
            raise TypeError(f"{arr.dtype} array cannot be set to {self.dtype} array")
        self._host()[...] = arr

    def get(self):
        return self._host().copy()


def empty(shape, dtype=np.float32):
    n = shape if isinstance(shape, int) else int(np.prod(shape))
    if n < 1:
        raise ValueError("the driver never allocates 0 bytes")
    return ndarray(_Memory(n * np.dtype(dtype).itemsize), 0, n * np.dtype(dtype).itemsize, dtype)


uint8 = np.uint8


class _Function:
    def __init__(self, ptx: str, name: str):
        self.name = name
        self.sizes = entry_param_sizes(ptx, name)

    def __call__(self, grid, block, args, *, shared_mem=0):
        if not (isinstance(grid, tuple) and isinstance(block, tuple) and isinstance(args, tuple)):
            raise TypeError("grid, block and args must be tuples")
        gx, gy, gz = (tuple(grid) + (1, 1))[:3]
        bx, by, bz = (tuple(block) + (1, 1))[:3]
        if not (1 <= gx < 2**31 and 1 <= gy <= 65535 and 1 <= gz <= 65535):
            raise RuntimeError(f"CUDA_ERROR_INVALID_VALUE: grid {grid}")
        if min(bx, by, bz) < 1 or bx * by * bz > 1024 or bz > 64:
            raise RuntimeError(f"CUDA_ERROR_INVALID_VALUE: block {block}")
        if not 0 <= int(shared_mem) <= 48 * 1024:
            raise RuntimeError(f"CUDA_ERROR_INVALID_VALUE: shared_mem {shared_mem}")
        if len(args) != len(self.sizes):
            raise RuntimeError(f"{self.name}: {len(args)} arguments for {len(self.sizes)} parameters")
        for i, (a, size) in enumerate(zip(args, self.sizes)):
            got = 8 if isinstance(a, ndarray) else (a.dtype.itemsize if isinstance(a, np.generic) else None)
            if got is None:
                raise TypeError(f"{self.name}: argument #{i} is a {type(a).__name__}; pass numpy scalars")
            if got != size:
                raise RuntimeError(f"{self.name}: argument #{i} has {got} bytes, its .param {size}")
        if sum(self.sizes) > 4096:
            raise RuntimeError(f"{self.name}: {sum(self.sizes)} bytes of parameters, over 4 KiB")
        LAUNCHES.append({"kernel": self.name, "grid": grid, "block": block, "args": args})


class RawModule:
    def __init__(self, code=None, *, path=None, **_):
        if path is None:
            raise TypeError("CupyDriver loads modules from files")
        with open(path, encoding="utf-8") as f:
            self.ptx = f.read()
        if ".entry" not in self.ptx or ".target" not in self.ptx:
            raise RuntimeError(f"CUDA_ERROR_INVALID_PTX: {path}")

    def get_function(self, name):
        return _Function(self.ptx, name)


def _module() -> types.ModuleType:
    m = types.ModuleType("cupy")
    m.__version__ = "fake"
    m.ndarray, m.empty, m.uint8, m.RawModule = ndarray, empty, uint8, RawModule
    stream = types.SimpleNamespace(synchronize=lambda: None)
    runtime = types.SimpleNamespace(getDeviceCount=lambda: 1)
    m.cuda = types.SimpleNamespace(runtime=runtime, get_current_stream=lambda: stream)
    return m


def install(monkeypatch) -> None:
    LAUNCHES.clear()
    monkeypatch.setitem(sys.modules, "cupy", _module())
