"""The compilation targets (`cpu`, `cuda`, `vulkan`, `webgpu`) and the full pass registry.

`get_target(name, options)` validates a target and its options before any pass runs;
`registry()` is every relax pass (graph passes from `transforms`, backend stages from each
target) and every named pipeline (`relax-optimize`, `relax-lower`, `relax-compile-<target>`), as
`relax-opt` and `relax_mlir.compile` read them."""
from __future__ import annotations

from relax_mlir.core.pipeline import PassRegistry
from relax_mlir.targets import cpu, cuda, vulkan, webgpu  # noqa: F401  (each registers its target)
from relax_mlir.targets.base import CPU_ONLY_PASSES, PIPELINES, TARGETS, Target, get_target
from relax_mlir.transforms import PASSES as GRAPH_PASSES

__all__ = ["CPU_ONLY_PASSES", "PIPELINES", "TARGETS", "Target", "all_passes", "get_target", "registry"]


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
