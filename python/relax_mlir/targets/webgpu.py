"""target="webgpu": WGSL kernels (backend/wgsl.py, emitted from the GPU kernels of the SPIR-V
backend's mapping) and the Vulkan host program, run in-process on wgpu-py (runtime/webgpu.py)
or in a browser from an exported artifact (runtime/web/relax_runtime.js)."""
from __future__ import annotations

import json

from mlir import ir

from relax_mlir.backend import spirv, wgsl
from relax_mlir.backend.common import LoweringError
from relax_mlir.backend.cpu_runtime import entry_signatures
from relax_mlir.runtime.hostprog import extract
from relax_mlir.runtime.loader import gpu_executable
from relax_mlir.targets.base import OPTIMIZE, Target, fusion_limited, register
from relax_mlir.targets.gpu import _refuse_cpu_only, module_op

FORMAT_KEY = "webgpu"


def webgpu_kernels(op: ir.Operation, program: dict) -> dict:
    """The WGSL of every kernel of `op` (after the SPIR-V backend's `flatten` stage) and the
    artifact's kernel table {"limits", "kernels"}; checks that each launch of `program` passes
    the scalars its kernel's uniform struct expects."""
    infos = wgsl.emit_module(op)
    for entry in program["entries"].values():
        _check_launches(entry["body"], infos)
    return {"wgsl": {m: k.wgsl for m, k in infos.items()},
            "webgpu": {"limits": wgsl.required_limits(infos), "kernels": {m: k.as_json() for m, k in infos.items()}}}


def _check_launches(body: list, infos: dict) -> None:
    for ins in body:
        for key in ("then", "else", "body"):
            if isinstance(ins.get(key), list):
                _check_launches(ins[key], infos)
        if ins.get("op") != "launch":
            continue
        k = infos.get(ins["module"])
        if k is None:
            raise LoweringError("wgsl", "check launches", f"a launch of @{ins['module']}, which has no WGSL kernel")
        n_scalars = sum(1 for a in ins["abi"] if a["kind"] != "buffer")
        n_buffers = len(ins["abi"]) - n_scalars
        if n_scalars + 3 != len(k.uniform_fields) or n_buffers != k.storage_buffers:
            raise LoweringError("wgsl", "check launches", f"the launch of @{ins['module']} does not match its kernel's "
                                f"bindings ({n_buffers} buffers, {n_scalars} scalars)")


def compile_webgpu(module, options: spirv.SPIRVOptions | None = None):
    """A module after relax-to-upstream -> an Executable of WGSL kernels (wgpu-py in-process;
    `export()` writes a browser artifact). Raises CompileError for what WebGPU cannot run."""
    options = options or spirv.SPIRVOptions()
    op, ctx = module_op(module)
    with ctx:
        if not entry_signatures(op):
            raise ValueError("the module has no public graph function to call")
        _refuse_cpu_only(op, "webgpu")
        try:
            spirv.lower(op, options, until="flatten")
        except LoweringError as e:  # the GPU mapping's refusals (f64, powf) hold for WebGPU too
            if "on Vulkan" not in e.diagnostics:
                raise
            raise LoweringError(e.stage, e.pipeline, e.diagnostics.replace("on Vulkan", "on WebGPU")) from None
        sigs = entry_signatures(op)
        program = json.loads(json.dumps(extract(op, "vulkan", "WebGPU")))  # the Vulkan ABI: index as i32
        program["target"] = "webgpu"
        kernels = webgpu_kernels(op, program)

    def driver():
        from relax_mlir.runtime.webgpu import WebGPUDriver

        return WebGPUDriver(kernels["wgsl"], kernels["webgpu"])

    return gpu_executable("webgpu", sigs, program, kernels, driver)


@register
class WebGPUTarget(Target):
    """WebGPU: WGSL kernels, run on wgpu-py here and in browsers (headless Chromium in the tests)."""

    name = "webgpu"
    options_class = spirv.SPIRVOptions

    @classmethod
    def optimize_pipeline(cls) -> tuple[str, ...]:
        # fused kernels of at most 8 tensors: WebGPU's default limit of storage buffers per
        # shader stage (scalars go in a uniform), so that every device runs them
        return fusion_limited(OPTIMIZE, 8)

    def build(self, module):
        return compile_webgpu(module, self.options)
