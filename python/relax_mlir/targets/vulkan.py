"""target="vulkan": SPIR-V kernels (backend/spirv.py) and a host program run with wgpu
(runtime/vulkan.py)."""
from __future__ import annotations

import json

from relax_mlir.backend import spirv
from relax_mlir.backend.cpu_runtime import entry_signatures
from relax_mlir.runtime.hostprog import extract
from relax_mlir.runtime.loader import gpu_executable
from relax_mlir.runtime.vulkan import WgpuDriver
from relax_mlir.targets.base import Target, register


def _module_op(module):
    if hasattr(module, "op") and hasattr(module, "context"):
        return module.op, module.context
    op = module.operation if hasattr(module, "operation") else module
    return op, op.context


def _lower(module, options: spirv.SPIRVOptions):
    """Lower in place; returns (host program, {gpu.module name: SPIR-V})."""
    op, ctx = _module_op(module)
    with ctx:
        spirv.lower(op, options, until="to-spirv")
        program = extract(op, "vulkan")
        spirv.stage_serialize(op, options)
        bins = spirv.spirv_binaries(op)
    return program, bins


def spirv_binaries(module, options: spirv.SPIRVOptions | None = None) -> dict[str, bytes]:
    """Lower a module after relax-to-upstream (in place) and return {kernel module name: SPIR-V}."""
    return _lower(module, options or spirv.SPIRVOptions())[1]


def compile_vulkan(module, options: spirv.SPIRVOptions | None = None):
    """A module after relax-to-upstream -> an Executable running on Vulkan through wgpu.

    Lowering needs no adapter; calling raises VulkanUnavailable when there is none. Raises
    LoweringError when the lowering fails."""
    options = options or spirv.SPIRVOptions()
    op, ctx = _module_op(module)
    with ctx:
        if not entry_signatures(op):
            raise ValueError("the module has no public graph function to call")
    program, bins = _lower(module, options)
    with ctx:
        sigs = entry_signatures(op)  # after mapping: workspace blocks no kernel uses are dropped
    program = json.loads(json.dumps(program))  # exactly what an artifact holds
    return gpu_executable("vulkan", sigs, program, {"spirv": bins}, lambda: WgpuDriver(bins))


@register
class VulkanTarget(Target):
    """Vulkan through wgpu (Mesa's lavapipe on CPU-only machines): SPIR-V kernels."""

    name = "vulkan"
    options_class = spirv.SPIRVOptions
    stage_passes = spirv.PASSES

    def build(self, module):
        return compile_vulkan(module, self.options)
