"""What the GPU targets (cuda.py, vulkan.py) share: compiling a module after relax-to-upstream
into an Executable that runs the host program of each entry (runtime/hostprog.py) and the kernel
binaries through a device driver."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mlir import ir

from relax_mlir.backend.cpu_runtime import entry_signatures
from relax_mlir.runtime.executable import Executable
from relax_mlir.runtime.hostprog import extract, platform_name
from relax_mlir.runtime.loader import gpu_executable

__all__ = ["compile_gpu", "module_op"]


def module_op(module) -> tuple[ir.Operation, ir.Context]:
    """(operation, context) of a `relax_mlir.Module`, an `ir.Module`, an OpView or an operation."""
    if hasattr(module, "op") and hasattr(module, "context"):
        return module.op, module.context
    op = module.operation if hasattr(module, "operation") else module
    return op, op.context


def compile_gpu(module, target: str, lower: Callable[[ir.Operation], None],
                binaries: Callable[[ir.Operation], dict], kind: str, driver: Callable[[dict], Any]) -> Executable:
    """A module after relax-to-upstream -> an Executable of GPU target `target` ("cuda", "vulkan").

    `lower(op)` lowers the module in place until its entries are host code only (the host program
    is extracted then); `binaries(op)` finishes the kernels and returns {gpu.module name: binary},
    kept in the artifact under `kind` ("ptx", "spirv"); `driver(binaries)` makes the device driver
    when the executable first runs."""
    op, ctx = module_op(module)
    with ctx:
        if not entry_signatures(op):
            raise ValueError("the module has no public graph function to call")
        _refuse_cpu_only(op, target)
        if target == "cuda":
            _refuse_control_flow(op, target)
        lower(op)
        sigs = entry_signatures(op)  # after mapping: workspace blocks no kernel uses are dropped
        program = json.loads(json.dumps(extract(op, target)))  # exactly what an artifact holds
        bins = binaries(op)
    return gpu_executable(target, sigs, program, {kind: bins}, lambda: driver(bins))


def _refuse_cpu_only(op: ir.Operation, target: str) -> None:
    """Kernels that are one sequential scalar loop nest (dense linear algebra) have no GPU mapping:
    refused as the other GPU refusals are worded ("... is not supported on Vulkan yet"). The
    graph's loops and branches (relax_v.while / if / case, scf ops marked `relax.control_flow`)
    run on the host program, which reads their conditions back from the device."""
    platform = platform_name(target)
    for f in op.regions[0].blocks[0].operations:
        if f.operation.name == "func.func" and "relax.kernel" in f.attributes \
                and ir.StringAttr(f.attributes["relax.kernel"]).value in _SEQUENTIAL:
            kind = ir.StringAttr(f.attributes["relax.kernel"]).value
            raise ValueError(f"{_SEQUENTIAL[kind]} (a kernel of sequential scalar loops, CPU only: "
                             f"@{ir.StringAttr(f.attributes['sym_name']).value}) is not supported on {platform} yet")


def _refuse_control_flow(op: ir.Operation, target: str) -> None:
    """The graph's loops and branches on CUDA: its lowering leaves strided-metadata ops on the host
    beside them, which the host program does not run (Vulkan and WebGPU run them)."""
    platform = platform_name(target)

    def walk(o):
        for r in o.regions:
            for b in r.blocks:
                for inner in b.operations:
                    inner = inner.operation
                    if "relax.control_flow" in inner.attributes:
                        kind = ir.StringAttr(inner.attributes["relax.control_flow"]).value
                        raise ValueError(f"control flow ('{kind}' at {inner.location}) is not supported on "
                                         f"{platform} yet")
                    walk(inner)
    for f in op.regions[0].blocks[0].operations:
        if f.operation.name == "func.func" and "relax.kernel" not in f.attributes:
            walk(f.operation)


# Kernels that are one sequential loop nest over scalars (ops/linear_algebra.py): no GPU mapping
# (on Vulkan the first try ran and returned NaN).
_SEQUENTIAL = {"cholesky": "relax_v.cholesky", "trsm": "relax.triangular_solve", "lu": "relax_v.lu",
               "geqrf": "relax_v.qr", "orgqr": "relax.householder_product", "syevj": "relax_v.eigvalsh",
               "gesvj": "relax_v.svdvals", "gtsv": "relax_v.tridiagonal_solve"}
