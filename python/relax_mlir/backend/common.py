"""What every backend (cpu.py, gpu.py, spirv.py) shares: the lowering error, running an upstream
pipeline one pass at a time, small IR walks, and the stage loop behind each backend's `lower()`."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from mlir import ir
from mlir.passmanager import PassManager

from relax_mlir.core.diagnostics import CompileError
from relax_mlir.passes import PassError

__all__ = ["INT32_MAX", "LoweringError", "as_op", "const_int", "option_bool", "option_int", "option_ints",
           "require_upstream", "run_pipeline", "run_stages", "split_pipeline", "top_funcs", "verify", "walk"]


class LoweringError(CompileError):
    """A lowering step failed (any target): names the stage, the failing pass and MLIR's
    diagnostics. A CompileError: every target's compile raises CompileError for what it cannot
    compile."""

    def __init__(self, stage: str, pipeline: str, diagnostics: str):
        self.stage = stage
        self.pipeline = pipeline  # the failing pass (or step), as pipeline text
        self.diagnostics = diagnostics
        super().__init__(f"stage {stage!r} failed in {pipeline!r}:\n{diagnostics}")


# --- option checks (each backend's options dataclass, in __post_init__) ---------------------------
# A bad value is a ValueError naming the option, its repr and what is accepted; `get_target`
# reports it as a CompileError before any pass runs.

# Options that reach an upstream pass option (async-parallel-for's min-task-size, num-workers)
# are 32-bit there: LLVM's option parser refuses larger values with a raw message.
INT32_MAX = 2**31 - 1


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def option_int(name: str, v, lo: int, hi: int = INT32_MAX, what: str = "") -> int:
    """`v` as an int when it is an integer (not a bool) in lo..hi; else a ValueError naming the
    option, the value and the range (`what` says more about the accepted values)."""
    if _is_int(v) and lo <= v <= hi:
        return int(v)
    if _is_int(v) and v > hi and hi == INT32_MAX:
        raise ValueError(f"{name} must be at most {hi} (a 32-bit option){what}, got {v!r}")
    rng = f">= {lo}" if hi == INT32_MAX else f"in {lo}..{hi}"
    raise ValueError(f"{name} must be an integer {rng}{what}, got {v!r}")


def option_bool(name: str, v) -> bool:
    """`v` when it is a bool; else a ValueError (a truthy string such as 'no' is no bool)."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise ValueError(f"{name} must be True or False, got {v!r}")


def option_ints(name: str, v, count: tuple[int, int], lo: int, hi: int = INT32_MAX, what: str = "") -> tuple[int, ...]:
    """`v` (a tuple or list of count[0]..count[1] integers in lo..hi) as a tuple (hashable: the
    options are a compile-cache key); else a ValueError naming the option."""
    if isinstance(v, (tuple, list)) and count[0] <= len(v) <= count[1] and all(_is_int(x) and lo <= x <= hi for x in v):
        return tuple(int(x) for x in v)
    n = str(count[0]) if count[0] == count[1] else f"{count[0]} to {count[1]}"
    rng = f">= {lo}" if hi == INT32_MAX else f"in {lo}..{hi}"
    raise ValueError(f"{name} must be a tuple of {n} integers {rng}{what}, got {v!r}")


def require_upstream(module: ir.Operation, pass_name: str) -> None:
    """A backend stage pass runs on the output of relax-to-upstream: a relax op left in `module`
    is a located error saying so (PassError), not a failure deep in an upstream pipeline."""
    found: list = []

    def visit(o):
        name = o.operation.name
        if name.startswith(("relax.", "relax_v.")):
            found.append(o.operation)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    as_op(module).walk(visit, ir.WalkOrder.PRE_ORDER)
    if found:
        raise PassError(found[0], f"'{found[0].name}' op is relax graph IR: {pass_name} runs on upstream dialects "
                                  f"only; run relax-to-upstream first (the named pipelines relax-lower or "
                                  f"relax-compile-<target> end with it)")


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


def unshare_empty_tensors(module) -> int:
    """Give each use of a `tensor.empty` its own (a clone just before the user); the number made.
    CSE merges equal tensor.empty ops, so one empty can be the destination of several kernels,
    one of whose results another of them reads: one-shot bufferization then gave a kernel call
    (sgemm, which zeroes its output before reading its inputs) one buffer as input and output
    (fuzz seed 2440695 without relax-plan-memory: a matmul of a switch's result read 0)."""
    empties = []
    walk(as_op(module), lambda o: empties.append(o) if o.name == "tensor.empty" else None)
    made = 0
    for e in empties:
        for use in list(e.results[0].uses)[1:]:
            user = use.owner
            user = user.operation if isinstance(user, ir.OpView) else user
            clone = e.clone(ip=ir.InsertionPoint(user))
            user.operands[use.operand_number] = clone.results[0]
            made += 1
    return made


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
