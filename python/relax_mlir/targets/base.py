"""`Target`: what `relax_mlir.compile(..., target=NAME, options=...)` compiles for, and the registry.

A target has a name, a frozen options dataclass (validated before any pass runs), the named relax
pipeline that `compile()` runs for it (`relax-compile-<name>`, which `relax-opt
--pass-pipeline=...` can name too), its backend stage passes (for relax-opt), and `build()`, which
turns the module after the relax pipeline into an `Executable`."""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from relax_mlir.core.diagnostics import CompileError, suggest

# The relax pipelines. `relax-compile-<target>` is what compile() runs for that target; the
# target's `build()` then lowers the upstream-level module with its own stages.
# relax-expand-attention: relax.attention as its unfused chain; the CPU target drops it from its
# pipeline (its kernel is CPU code), the GPU targets compile the chain.
# Passes whose results only the CPU backend can run (BLAS calls, the fused attention kernel's
# vector code): the CPU pipeline's own, refused by compile() in a pipeline for any other target.
CPU_ONLY_PASSES = ("relax-fuse-attention", "relax-dispatch-library", "relax-multiversion")
LOWER = ("relax-infer-shapes", "relax-expand-attention", "relax-legalize", "relax-lower-shapes", "relax-to-upstream")
OPTIMIZE = ("relax-infer-shapes", "relax-canonicalize", "relax-expand-attention", "relax-legalize", "relax-fuse-kernels", "relax-dce",
            "relax-plan-memory", "relax-lower-shapes", "relax-to-upstream")


def fusion_limited(pipeline: tuple[str, ...], max_buffers: int) -> tuple[str, ...]:
    """`pipeline` with relax-fuse-kernels making kernels of at most `max_buffers` tensors: a GPU
    kernel binds each one (and, on Vulkan, each scalar argument) and devices limit the bindings
    of one shader stage (lavapipe 32, WebGPU's default 8)."""
    return tuple(f"relax-fuse-kernels{{max_buffers={max_buffers}}}" if p == "relax-fuse-kernels" else p
                 for p in pipeline)


PIPELINES: dict[str, tuple[tuple[str, ...], str]] = {
    "relax-lower": (LOWER, "deduce shapes, legalize every graph op, lower shapes, leave only upstream "
                           "dialects (compile(..., optimize=False))"),
    "relax-optimize": (OPTIMIZE, "the target-independent optimizing pipeline down to upstream dialects: "
                                 "canonicalize, legalize, fuse kernels, plan memory, lower shapes"),
}

TARGETS: dict[str, type["Target"]] = {}


def register(cls: type["Target"]) -> type["Target"]:
    """Class decorator: add a target to the registry (and its named pipelines)."""
    TARGETS[cls.name] = cls
    PIPELINES[f"relax-compile-{cls.name}"] = (cls.optimize_pipeline(),
                                              f"what compile(..., target=\"{cls.name}\") runs before its backend")
    return cls


class Target:
    """A compilation target. Subclasses set `name`, `options_class` (a frozen dataclass), and
    implement `build()`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    options_class: ClassVar[type] = type(None)
    # Passes of the backend's stages, nameable in relax-opt (the classes, by CLI name).
    stage_passes: ClassVar[tuple] = ()

    def __init__(self, options):
        self.options = options

    @classmethod
    def optimize_pipeline(cls) -> tuple[str, ...]:
        """The relax passes of `compile(..., optimize=True)` for this target."""
        return OPTIMIZE

    def pipeline(self, optimize: bool) -> list[str]:
        """The pipeline `compile()` runs: a named pipeline."""
        return [f"relax-compile-{self.name}" if optimize else "relax-lower"]

    @classmethod
    def option_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls.options_class)]

    @classmethod
    def make_options(cls, options: Any):
        """`options` (None, an `options_class` instance, or a dict of its fields) as a validated
        `options_class` instance; CompileError naming the valid options otherwise."""
        valid = ", ".join(cls.option_names())
        if options is None:
            options = {}
        if isinstance(options, cls.options_class):
            return options
        if not isinstance(options, dict):
            raise CompileError(f"target '{cls.name}' takes options of type {cls.options_class.__name__} or a dict "
                               f"of its fields ({valid}), got {type(options).__name__}")
        for k in options:
            if k not in cls.option_names():
                raise CompileError(f"target '{cls.name}' has no option '{k}'{suggest(str(k), cls.option_names())} "
                                   f"(options: {valid})")
        try:
            return cls.options_class(**options)
        except (TypeError, ValueError) as e:
            raise CompileError(f"invalid option for target '{cls.name}': {e}") from None

    def build(self, module):
        """The module after `pipeline()` (a `relax_mlir.Module`, upstream dialects only) -> an
        `Executable`. Raises CompileError for what the target cannot compile."""
        raise NotImplementedError


def get_target(name: Any, options: Any = None) -> Target:
    """The target `name` with validated options; CompileError listing the targets otherwise."""
    valid = ", ".join(TARGETS)
    if not isinstance(name, str) or name not in TARGETS:
        hint = suggest(name, TARGETS) if isinstance(name, str) else ""
        raise CompileError(f"unknown target '{name}'{hint} (available: {valid})")
    cls = TARGETS[name]
    return cls(cls.make_options(options))
