"""target="vulkan": SPIR-V kernels (backend/spirv.py) and a host program run with wgpu
(runtime/vulkan.py)."""
from __future__ import annotations

from mlir import ir

from relax_mlir.backend import spirv
from relax_mlir.runtime.vulkan import WgpuDriver
from relax_mlir.targets.base import OPTIMIZE, Target, fusion_limited, register
from relax_mlir.targets.gpu import compile_gpu, module_op


def spirv_binaries(module, options: spirv.SPIRVOptions | None = None) -> dict[str, bytes]:
    """Lower a module after relax-to-upstream (in place) and return {kernel module name: SPIR-V}."""
    op, ctx = module_op(module)
    with ctx:
        spirv.lower(op, options or spirv.SPIRVOptions(), until="serialize")
        return spirv.spirv_binaries(op)


def compile_vulkan(module, options: spirv.SPIRVOptions | None = None):
    """A module after relax-to-upstream -> an Executable running on Vulkan through wgpu.

    Lowering needs no adapter; calling raises VulkanUnavailable when there is none. Raises
    LoweringError when the lowering fails."""
    options = options or spirv.SPIRVOptions()

    def serialize(op: ir.Operation) -> dict[str, bytes]:
        spirv.stage_serialize(op, options)
        return spirv.spirv_binaries(op)

    return compile_gpu(module, "vulkan", lambda op: spirv.lower(op, options, until="to-spirv"), serialize, "spirv",
                       WgpuDriver)


@register
class VulkanTarget(Target):
    """Vulkan through wgpu (Mesa's lavapipe on CPU-only machines): SPIR-V kernels."""

    name = "vulkan"
    options_class = spirv.SPIRVOptions
    stage_passes = spirv.PASSES

    @classmethod
    def optimize_pipeline(cls) -> tuple[str, ...]:
        # fused kernels of at most 16 tensors: each scalar argument is a storage buffer too, and
        # 16 tensors leave room for the dims and scalars under lavapipe's 32
        return fusion_limited(OPTIMIZE, 16)

    def build(self, module):
        return compile_vulkan(module, self.options)
