"""target="cpu": LLVM through MLIR's ExecutionEngine (backend/cpu.py), BLAS for large matmuls."""
from __future__ import annotations

from relax_mlir.backend.cpu import CPU_PASSES, CPUOptions
from relax_mlir.backend.cpu_runtime import build_cpu_executable
from relax_mlir.targets.base import CPU_ONLY_PASSES, OPTIMIZE, Target, register


@register
class CPUTarget(Target):
    """This machine's CPU, JIT-compiled; `exe.export(path)` writes a shared library."""

    name = "cpu"
    options_class = CPUOptions
    stage_passes = CPU_PASSES

    @classmethod
    def optimize_pipeline(cls) -> tuple[str, ...]:
        # BLAS is a CPU library: matmuls become relax.call_library before legalization.
        base = tuple(p for p in OPTIMIZE if p != "relax-expand-attention")
        # relax-multiversion: row-count-dependent choices between BLAS and generated code.
        # relax-fuse-attention first: the chain's matmuls must not become library calls.
        # relax-conv-to-matmul before relax-canonicalize, which folds its transposes into the importer's.
        base = base[:1] + ("relax-conv-to-matmul",) + base[1:]
        i = base.index("relax-legalize")
        return base[:i] + CPU_ONLY_PASSES + base[i:]

    def build(self, module):
        return build_cpu_executable(module, self.options)
