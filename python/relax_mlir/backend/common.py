"""What every backend (cpu.py, gpu.py, spirv.py) shares: the lowering error, running an upstream
pipeline one pass at a time, small IR walks, and the stage loop behind each backend's `lower()`."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mlir import ir
from mlir.passmanager import PassManager

from relax_mlir.core.diagnostics import CompileError

__all__ = ["LoweringError", "as_op", "const_int", "run_pipeline", "run_stages", "split_pipeline", "top_funcs", "verify",
           "walk"]


class LoweringError(CompileError):
    """A lowering step failed (any target): names the stage, the failing pass and MLIR's
    diagnostics. A CompileError: every target's compile raises CompileError for what it cannot
    compile."""

    def __init__(self, stage: str, pipeline: str, diagnostics: str):
        self.stage = stage
        self.pipeline = pipeline  # the failing pass (or step), as pipeline text
        self.diagnostics = diagnostics
        super().__init__(f"stage {stage!r} failed in {pipeline!r}:\n{diagnostics}")


def as_op(module: ir.Module | ir.Operation | ir.OpView) -> ir.Operation:
    """The operation of a module, an OpView or an operation."""
    if isinstance(module, ir.Module):
        return module.operation
    if isinstance(module, ir.OpView):
        return module.operation
    return module


def const_int(v: ir.Value) -> int | None:
    """The value of `v` when an `arith.constant` of an integer or index defines it, else None."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation if isinstance(owner, ir.OpView) else owner
    if op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    return attr.value if isinstance(attr, ir.IntegerAttr) else None


def split_pipeline(pipeline: str) -> list[str]:
    """Split a textual pipeline at its top-level commas (not inside `()` or `{}`)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(pipeline):
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(pipeline[start:i].strip())
            start = i + 1
    parts.append(pipeline[start:].strip())
    return [p for p in parts if p]


def run_pipeline(module, pipeline: str, stage: str, *, verify_each: bool = True) -> None:
    """Run `pipeline` on `module` one top-level pass at a time, so that a failure names its pass;
    raise LoweringError with the diagnostics. `verify_each=False` skips MLIR's verification of the
    whole module after every pass (the caller verifies once, `verify()`)."""
    op = as_op(module)
    for step in split_pipeline(pipeline):
        try:
            pm = PassManager.parse(f"builtin.module({step})", context=op.context)
        except ValueError as e:
            raise LoweringError(stage, step, f"cannot parse pass pipeline: {e}") from None
        if not verify_each:
            pm.enable_verifier(False)
        try:
            pm.run(op)
        except ir.MLIRError as e:
            raise LoweringError(stage, step, str(e)) from None


def verify(module, stage: str, after: str) -> None:
    """Verify `module` (after the steps `after` of `stage`); raise LoweringError with MLIR's
    diagnostics if it is invalid."""
    try:
        as_op(module).verify()
    except ir.MLIRError as e:
        raise LoweringError(stage, after, str(e)) from None


def walk(op: ir.Operation, fn: Callable[[ir.Operation], None]) -> None:
    """Call `fn` on every operation nested in `op` (pre-order, `op` included)."""
    def cb(o):
        fn(o)
        return ir.WalkResult.ADVANCE

    op.walk(cb, ir.WalkOrder.PRE_ORDER)


def top_funcs(module_op: ir.Operation) -> list[ir.OpView]:
    """The `func.func`s at the top level of a module."""
    return [op for op in module_op.regions[0].blocks[0].operations if op.operation.name == "func.func"]


def run_stages(stages: Mapping[str, Callable[[Any, Any], None]], module, options, until: str | None,
               backend: str) -> None:
    """Run a backend's `stages` in order on `module` (in place); stop after stage `until` if given
    (ValueError naming the stages if there is no such stage)."""
    if until is not None and until not in stages:
        raise ValueError(f"unknown {backend} stage {until!r}; stages: {', '.join(stages)}")
    for name, stage in stages.items():
        stage(module, options)
        if name == until:
            break
