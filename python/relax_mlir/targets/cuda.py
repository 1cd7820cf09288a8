"""target="cuda": PTX for NVIDIA GPUs (backend/gpu.py), launched through CuPy (runtime/cuda.py)."""
from __future__ import annotations

from mlir import ir

from relax_mlir.backend import gpu
from relax_mlir.runtime.cuda import CudaExecutable, CupyDriver
from relax_mlir.targets.base import Target, register
from relax_mlir.targets.gpu import compile_gpu


def compile_cuda(module, options: gpu.GPUOptions | None = None) -> CudaExecutable:
    """A `relax_mlir.Module` after relax-to-upstream -> a CudaExecutable (kernels as PTX in `.ptx`)."""
    options = options or gpu.GPUOptions()

    def to_ptx(op: ir.Operation) -> dict[str, str]:
        # to-ptx runs on a clone (a child process when options.isolate): the mapped module is kept
        copy = op.clone(ip=False)
        try:
            gpu.stage_to_ptx(copy, options)
            return gpu.ptx_of(copy)
        finally:
            copy.erase()

    return compile_gpu(module, "cuda", lambda op: gpu.lower(op, options, until="map"), to_ptx, "ptx", CupyDriver)


@register
class CUDATarget(Target):
    """NVIDIA GPUs (sm_90 by default): PTX kernels and a host program run with CuPy."""

    name = "cuda"
    options_class = gpu.GPUOptions
    stage_passes = gpu.PASSES

    def build(self, module):
        return compile_cuda(module, self.options)
