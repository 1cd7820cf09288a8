"""Host-program overhead of the GPU runtime: the time a call of an exported cuda artifact spends
in Python (shape checks, the interpreted host program, kernel-argument packing) when the driver
does no work at all, per call and per launch. On a GPU this is the floor under every call, so it
is what small shapes measure. No reference runs here (jax.jit's dispatch is another machine's
matter): bench/gpu_check.py reports the ratio on a GPU.

Run: .venv/bin/python bench/host_overhead.py [--reps R]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))


class NullDriver:
    """The hostprog driver protocol doing nothing but what the CuPy driver does on the host:
    packing the kernel parameters."""

    def __init__(self):
        import numpy as np

        from relax_mlir.runtime import cuda

        self.np, self.pack = np, cuda.pack_args
        self.launches, self._next = 0, 1 << 20

    def alloc(self, nbytes):
        # A device address, as CuPy's `array.data.ptr`: its memory pool hands a steady sequence of
        # calls the same blocks again, so the addresses repeat from call to call (sync ends one).
        self._next += max(nbytes, 1)
        return self._next

    def upload(self, handle, data):
        pass

    def download(self, handle, nbytes):
        return bytes(nbytes)

    def copy(self, src, dst, nbytes):
        pass

    def launch(self, module, kernel, grid, block, shared, args):
        self.pack(args, int)
        self.launches += 1

    def sync(self):
        self._next = 1 << 20

    def free(self, handle):
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    a = ap.parse_args()
    import model_zoo as zoo

    import relax_mlir
    from relax_mlir.runtime import load

    print(f"{'model':18s} {'n':>5s} {'launches':>8s} {'us/call':>9s} {'us/launch':>10s}")
    for name in ("demo_mlp", "demo_transformer", "demo_decoder"):
        exe = relax_mlir.compile(zoo.relax_text(name), target="cuda")
        with tempfile.TemporaryDirectory() as d:
            exe.export(d)
            drv = NullDriver()
            f = load(d, driver=drv)
            n = zoo.MODELS[name].sizes[-1]
            args = zoo.MODELS[name].args(n)
            f(*args)
            drv.launches = 0
            best = float("inf")
            for _ in range(5):
                t = time.perf_counter()
                for _ in range(a.reps // 5):
                    f(*args)
                best = min(best, (time.perf_counter() - t) / (a.reps // 5))
            per_call = drv.launches // (5 * (a.reps // 5))
            print(f"{name:18s} {n:5d} {per_call:8d} {best * 1e6:9.1f} {best * 1e6 / per_call:10.1f}")


if __name__ == "__main__":
    main()
