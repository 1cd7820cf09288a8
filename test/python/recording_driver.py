"""A CUDA host-program driver for machines without a GPU: it keeps buffers as numpy bytes,
records every allocation and launch (packed exactly as the CuPy driver packs them) and runs no
kernel. `check_launches` ties the launches to the PTX: every launched kernel is an `.entry` of
its module, with as many parameters as were packed, of the same sizes."""
from __future__ import annotations

import numpy as np
from fake_cupy import entry_param_sizes

from relax_mlir.runtime import cuda


class RecordingDriver:
    """The hostprog driver protocol over numpy bytes; records allocations and launches and runs
    no kernel."""

    def __init__(self):
        self.allocs, self.launches, self.uploads = [], [], 0

    def alloc(self, nbytes):
        buf = np.zeros(max(nbytes, 1), np.uint8)
        self.allocs.append(nbytes)
        return buf

    def upload(self, handle, data):
        self.uploads += 1
        handle[:data.size] = data

    def download(self, handle, nbytes):
        return handle[:nbytes]

    def copy(self, src, dst, nbytes):
        dst[:nbytes] = src[:nbytes]

    def launch(self, module, kernel, grid, block, shared, args):
        params = cuda.pack_args(args, lambda h: h.ctypes.data)
        self.launches.append({"module": module, "kernel": kernel, "grid": grid, "block": block,
                              "shared": shared, "params": params,
                              "shapes": [getattr(v, "shape", None) for _, v in args]})

    def sync(self):
        pass

    def free(self, handle):
        pass


def check_launches(drv: RecordingDriver, ptx: dict) -> None:
    """Each launch names an `.entry` of its module with as many parameters as were packed, each
    of its `.param`'s byte size, and has a grid and a block that cuLaunchKernel accepts (CUDA's
    limits: grid x < 2^31, y and z <= 65535, at most 1024 threads a block, none of them 0)."""
    assert drv.launches
    for ln in drv.launches:
        assert ln["module"] in ptx, ln["module"]
        sizes = entry_param_sizes(ptx[ln["module"]], ln["kernel"])
        assert sizes == [np.asarray(p).dtype.itemsize for p in ln["params"]], ln
        (gx, gy, gz), (bx, by, bz) = ln["grid"], ln["block"]
        assert 1 <= gx < 2**31 and 1 <= gy <= 65535 and 1 <= gz <= 65535, ln
        assert min(bx, by, bz) >= 1 and bx * by * bz <= 1024 and bz <= 64, ln
