"""Load an exported CPU artifact: `kernels.so` (native code) + `manifest.json` (the host program's
data: symbolic signatures, check messages, derived symbols). Uses numpy and ctypes only."""
from __future__ import annotations

import ctypes
import json
import os

import numpy as np

from relax_mlir.runtime.executable import Executable, Function, Signature, TensorSig
from relax_mlir.shape import parse as parse_expr

MANIFEST = "manifest.json"
LIBRARY = "kernels.so"


def _sig(entry: dict) -> Signature:
    def tsig(t):
        return TensorSig(tuple(None if d is None else parse_expr(str(d)) for d in t["dims"]), t["dtype"])

    return Signature.make(entry["name"], [tsig(t) for t in entry["params"]], [tsig(t) for t in entry["results"]],
                          entry["arg_names"], entry["messages"], entry.get("derived", {}),
                          entry.get("upper", {}))


def _descriptor(a: np.ndarray) -> np.ndarray:
    """A ranked memref descriptor {allocated, aligned, offset, sizes..., strides...} (int64)."""
    ptr = a.ctypes.data
    strides = [s // a.itemsize for s in a.strides] if a.ndim else []
    return np.array([ptr, ptr, 0, *a.shape, *strides], dtype=np.int64)


class NativeEntry:
    def __init__(self, lib: ctypes.CDLL, name: str, nargs: int):
        self.fn = getattr(lib, "_mlir_ciface_" + name)
        self.fn.restype = None
        self.fn.argtypes = [ctypes.c_void_p] * nargs

    def __call__(self, *arrays: np.ndarray) -> None:
        descs = [_descriptor(a) for a in arrays]
        self.fn(*[d.ctypes.data for d in descs])


def load(path: str) -> Executable:
    with open(os.path.join(path, MANIFEST), encoding="utf-8") as f:
        manifest = json.load(f)
    if manifest.get("format") != "relax-mlir-cpu-1":
        raise ValueError(f"{path}: not a relax-mlir CPU artifact")
    lib = ctypes.CDLL(os.path.join(os.path.abspath(path), LIBRARY))
    funcs = {}
    for entry in manifest["entries"]:
        sig = _sig(entry)
        native = NativeEntry(lib, sig.name, len(sig.params) + len(sig.results) + 1)
        funcs[sig.name] = Function(sig, native)
    return Executable(funcs, manifest["main"], keepalive=lib)
