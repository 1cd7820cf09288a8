"""target="cuda": PTX for NVIDIA GPUs (backend/gpu.py), launched through CuPy (runtime/cuda.py)."""
from __future__ import annotations

import json

from mlir import ir

from relax_mlir.backend import gpu
from relax_mlir.backend.cpu_runtime import entry_signatures
from relax_mlir.runtime.cuda import CudaExecutable, CupyDriver
from relax_mlir.runtime.hostprog import extract
from relax_mlir.runtime.loader import gpu_executable
from relax_mlir.targets.base import Target, register


def compile_cuda(module, options: gpu.GPUOptions | None = None) -> CudaExecutable:
    """A `relax_mlir.Module` after relax-to-upstream -> a CudaExecutable (kernels as PTX in `.ptx`)."""
    options = options or gpu.GPUOptions()
    op, ctx = module.op, module.context
    with ctx:
        if not entry_signatures(op):
            raise ValueError("the module has no public graph function to call")
        gpu.lower(op, options, until="map")
        sigs = entry_signatures(op)  # after mapping: workspace blocks no kernel uses are dropped
        program = json.loads(json.dumps(extract(op, "cuda")))
        # to-ptx runs on a copy (a child process when options.isolate): the mapped module is kept
        copy = ir.Module.parse(op.get_asm(enable_debug_info=False))
        gpu.stage_to_ptx(copy.operation, options)
        ptx = gpu.ptx_of(copy.operation)
    return gpu_executable("cuda", sigs, program, {"ptx": ptx}, lambda: CupyDriver(ptx))


@register
class CUDATarget(Target):
    """NVIDIA GPUs (sm_90 by default): PTX kernels and a host program run with CuPy."""

    name = "cuda"
    options_class = gpu.GPUOptions
    stage_passes = gpu.PASSES

    def build(self, module):
        return compile_cuda(module, self.options)
