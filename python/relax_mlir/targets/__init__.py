"""The compilation targets (`cpu`, `cuda`, `vulkan`, `webgpu`) and the full pass registry.

`get_target(name, options)` validates a target and its options before any pass runs;
`registry()` is every relax pass (graph passes from `transforms`, backend stages from each
target) and every named pipeline (`relax-optimize`, `relax-lower`, `relax-compile-<target>`), as
`relax-opt` and `relax_mlir.compile` read them."""
from __future__ import annotations

from relax_mlir.core.diagnostics import CompileError
from relax_mlir.core.pipeline import PassRegistry, expand_items
from relax_mlir.passes import PipelineError
from relax_mlir.targets import cpu, cuda, vulkan, webgpu  # noqa: F401  (each registers its target)
from relax_mlir.targets.base import CPU_ONLY_PASSES, PIPELINES, TARGETS, Target, get_target
from relax_mlir.transforms import PASSES as GRAPH_PASSES

__all__ = ["CPU_ONLY_PASSES", "PIPELINES", "TARGETS", "Target", "all_passes", "get_target", "refuse_cpu_only", "registry"]


def all_passes() -> dict:
    """Every relax pass by CLI name: the graph passes, then each target's stage passes."""
    out = dict(GRAPH_PASSES)
    for t in TARGETS.values():
        out.update({p.name: p for p in t.stage_passes})
    return out


_REGISTRY: PassRegistry | None = None


def registry() -> PassRegistry:
    """The relax passes and named pipelines, for `core.pipeline.run_pipeline`."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = PassRegistry(all_passes(), dict(PIPELINES))
    return _REGISTRY


def refuse_cpu_only(passes, target: str) -> None:
    """CompileError up front for a pass whose output only the CPU backend runs (BLAS calls, the
    fused attention kernel: CPU_ONLY_PASSES) in an explicit pipeline for `target`, also inside a
    named pipeline (relax-compile-cpu) or a comma-separated item. A malformed pipeline is left to
    the run, which reports it."""
    try:
        items = registry().expand(expand_items(list(passes)))
    except PipelineError:
        return
    names = (p.split("{", 1)[0].strip() for p in items)
    cpu_only = list(dict.fromkeys(n for n in names if n in CPU_ONLY_PASSES))
    if cpu_only:
        raise CompileError(f"{', '.join(cpu_only)}: CPU-only pass(es) (BLAS calls, CPU kernels) in the "
                           f"pipeline for target '{target}'; its own pipeline is relax-compile-{target}")
