"""`relax-plan-memory`: graph-level static memory planning with symbolic sizes.

After relax-legalize, every intermediate tensor is a `call_tir` result. Its lifetime is
[defining op, last use] in program order (a `reshape`/`match_cast` view extends its source's
lifetime). Sizes are symbolic byte counts, evaluated at the symbols' upper bounds
(`relax.symbol_bounds`) when every symbol has one, else kept symbolic (sized per call). Tensors are
assigned greedily, largest first, to storage blocks whose occupants do not overlap in time
(best fit). Results that leave the function are not planned: they are written straight into the
caller's buffers. An in-place kernel (IN_PLACE_KERNELS: dynamic_update_slice, scatter) whose input
dies at the call writes its result into that input's storage: a planned block, or in a private
function (a loop body, a branch) a parameter, which is the caller's buffer. The result of a
control-flow op or func.call may therefore be one of its operands' buffers, which stay alive as
long as it does.

The plan is attached as attributes that relax-to-upstream lowers: `relax.storage = [block]` on
each planned `call_tir` result, and on the function `relax.memory_plan = {blocks = [sizes],
planned_peak_bytes, live_peak_bytes, unplanned_bytes}` (sizes as integers or expressions). A block
with an expression size is allocated per call, where its first tensor is defined, at that tensor's
byte count; live_peak_bytes is given only when every size is bounded.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from mlir import ir

from relax_mlir.analysis.kernel_alias import result_aliases
from relax_mlir.dialect.types import TensorType, view
from relax_mlir.ops.control_flow import CONTROL_FLOW
from relax_mlir.passes import ModulePass
from relax_mlir.shape import Expr, const
from relax_mlir.transforms.infer_shapes import function_facts, graph_functions

ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
            "ui8": 1, "ui16": 2, "ui32": 4, "ui64": 8}
VIEW_OPS = ("relax.reshape", "relax.match_cast")


def nbytes(t: TensorType) -> Expr:
    n: Expr = const(ITEMSIZE[t.dtype])
    for d in t.dims:
        n = n * d
    return n


@dataclass
class Interval:
    value: ir.Value
    op: ir.Operation
    start: int
    end: int
    size: Expr
    bound: int | None
    # call_tir results placed in this tensor's storage, written in place (see IN_PLACE_KERNELS)
    followers: list = field(default_factory=list)


# Kernels (by their relax.kernel name) whose result may be written into the storage of input 0
# when that input dies at the call: the symbolic argument at the given position is then set to 1
# (the kernel skips copying input 0 into its destination).
IN_PLACE_KERNELS = {"dynamic_update_slice": 0, "scatter": 0}


def _kernel_table(f: ir.Operation) -> dict[str, ir.Operation]:
    module = f.parent
    table = {}
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func":
            table[ir.StringAttr(op.attributes["sym_name"]).value] = op.operation
    return table


def plan_function(f: ir.Operation, kernels: dict[str, ir.Operation] | None = None):
    """The planned intervals of `f` (lifetimes in op indices), its symbol facts, and the in-place
    kernel calls that write a buffer of `f`'s caller (a parameter that dies at the call).

    A kernel result that may share storage with one of the kernel's inputs (analysis/kernel_alias:
    a copy that canonicalization turns into a view once kernels are inlined) keeps those inputs
    alive as long as the result."""
    if kernels is None:
        kernels = _kernel_table(f)
    alias_memo: dict[str, list] = {}
    aliases: list[tuple[ir.Value, list[ir.Value]]] = []
    facts = function_facts(f)
    block = f.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    index = {}
    for i, op in enumerate(ops):
        index[op] = i
    root: dict = {}  # view value -> the planned value it aliases
    intervals: dict = {}
    escaping = set()
    in_place: list[tuple[int, ir.Operation]] = []
    last_use: dict = {}  # value -> index of the last op that reads it (nested regions: the region op)
    for i, op in enumerate(ops):
        if op.name == "relax_v.call_tir":
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            kernel = kernels.get(callee)
            if _in_place_flag(op, kernel) is not None:
                in_place.append((i, op))
            if callee not in alias_memo:
                alias_memo[callee] = result_aliases(kernel, len(op.operands)) if kernel is not None \
                    and kernel.regions[0].blocks else None
            per_result = alias_memo[callee]
            for k, r in enumerate(op.results):
                srcs = range(len(op.operands)) if per_result is None else per_result[k]
                if srcs:
                    aliases.append((r, [op.operands[j] for j in srcs]))
            for r in op.results:
                t = view(r.type)
                if isinstance(t, TensorType) and t.known:
                    sz = nbytes(t)
                    intervals[r] = Interval(r, op, i, i, sz, facts.upper_bound(sz))
        elif op.name in CONTROL_FLOW or op.name == "func.call":
            # After bufferization a loop's, branch's or called function's result may share the
            # buffer of any tensor it reads (a carried value or parameter updated in place, a
            # captured value or argument returned as it is).
            for r in op.results:
                aliases.append((r, list(op.operands)))
        elif op.name in VIEW_OPS and op.operands[0] in (intervals.keys() | root.keys()):
            root[op.results[0]] = root.get(op.operands[0], op.operands[0])
        for v in op.operands:
            last_use[v] = i
            v = root.get(v, v)
            if v in intervals:
                intervals[v].end = max(intervals[v].end, i)
                if op.name == "func.return":
                    escaping.add(v)
        # Uses inside nested regions (dataflow) count at the region op.
        for reg in op.regions:
            for b in reg.blocks:
                for inner in b.operations:
                    for v in inner.operation.operands:
                        last_use[v] = i
                        v = root.get(v, v)
                        if v in intervals:
                            intervals[v].end = max(intervals[v].end, i)
    # An in-place kernel's result takes its input's storage when the input dies at the call
    # (and neither leaves the function): one interval, the result a follower of the input.
    merged: dict = {}
    on_callers_buffer: list[ir.Operation] = []
    # A private function's parameters live in its caller's buffers (a loop body's carried
    # values, a branch's captures): an in-place kernel whose input is such a parameter, read by
    # nothing after the call, writes the caller's buffer and needs no storage of its own. A scan
    # that stacks its outputs then writes one row per iteration instead of copying the whole
    # stack. Whether the caller's buffer may really be written is bufferization's decision: the
    # kernel computes the same tensor either way, and where the caller still reads the old value
    # one-shot bufferization copies it there.
    callers_buffers = set(block.arguments) if _is_private(f) else set()
    for i, op in in_place:
        r, x = op.results[0], op.operands[0]
        if x in callers_buffers and last_use.get(x) == i:
            intervals.pop(r, None)
            callers_buffers.add(r)
            on_callers_buffer.append(op)
            continue
        x = merged.get(root.get(x, x), root.get(x, x))
        if x in intervals and r in intervals and x not in escaping and r not in escaping \
                and intervals[x].end == i and intervals[x].size == intervals[r].size:
            ivr = intervals.pop(r)
            intervals[x].end = max(intervals[x].end, ivr.end)
            intervals[x].followers.append((ivr.op, r))
            merged[r] = x
    # Aliases, latest first: a result's lifetime is final before it extends its sources'.
    for r, srcs in reversed(aliases):
        r = merged.get(r, r)
        end = intervals[r].end if r in intervals else len(ops)
        for s in srcs:
            # (a source an in-place kernel wrote lives in the interval it was merged into: fuzz
            # seed 2,390,232, a scatter's result passed through a lax.switch branch as it is and
            # returned, its storage reused by a later concat)
            s = root.get(s, s)
            s = merged.get(s, s)
            if s in intervals:
                intervals[s].end = max(intervals[s].end, end)
    # Tensors without an upper bound are planned too: their blocks are sized per call by the
    # symbolic byte count, and shared only by tensors of exactly that symbolic size.
    planned = [iv for v, iv in intervals.items() if v not in escaping]
    return planned, facts, on_callers_buffer


def _is_private(f: ir.Operation) -> bool:
    return "sym_visibility" in f.attributes and ir.StringAttr(f.attributes["sym_visibility"]).value == "private"


def _in_place_flag(op: ir.Operation, kernel: ir.Operation | None) -> int | None:
    """The position of the in-place flag among a call_tir's symbolic arguments, if its kernel is
    one of IN_PLACE_KERNELS and the flag is still 0."""
    if kernel is None or "relax.kernel" not in kernel.attributes or "sym_args" not in op.attributes:
        return None
    tag, sym_args = kernel.attributes["relax.kernel"], op.attributes["sym_args"]
    if not isinstance(tag, ir.StringAttr) or not isinstance(sym_args, ir.ArrayAttr):
        return None  # not one of ours (a hand-written or malformed tag): never planned in place
    pos = IN_PLACE_KERNELS.get(tag.value)
    args = [ir.StringAttr(a).value if isinstance(a, ir.StringAttr) else None for a in sym_args]
    if pos is None or pos >= len(args) or args[pos] != "0" or len(op.results) != 1:
        return None
    return pos


def _set_in_place(op: ir.Operation, kernels: dict[str, ir.Operation]) -> None:
    """Set an in-place kernel call's flag to 1: its result is written into input 0's storage."""
    pos = _in_place_flag(op, kernels.get(ir.FlatSymbolRefAttr(op.attributes["callee"]).value))
    args = [a for a in ir.ArrayAttr(op.attributes["sym_args"])]
    args[pos] = ir.StringAttr.get("1")
    op.attributes["sym_args"] = ir.ArrayAttr.get(args)


def assign(planned: list[Interval]) -> list[tuple[Expr, list[Interval]]]:
    """Greedy best fit: largest first; a block is reused when no occupant overlaps in time."""
    def key(iv):
        return (-(iv.bound if iv.bound is not None else 1 << 62), iv.start)

    blocks: list[tuple[Expr, int | None, list[Interval]]] = []
    for iv in sorted(planned, key=key):
        best = None
        for bi, (size, bound, occ) in enumerate(blocks):
            if any(not (iv.end < o.start or o.end < iv.start) for o in occ):
                continue
            fits = (bound is not None and iv.bound is not None and iv.bound <= bound) or size == iv.size
            if fits and (best is None or (blocks[best][1] or 0) > (bound or 0)):
                best = bi
        if best is None:
            blocks.append((iv.size if iv.bound is None else const(iv.bound), iv.bound, [iv]))
        else:
            blocks[best][2].append(iv)
    return [(size, occ) for size, _, occ in blocks]


def live_peak(planned: list[Interval]) -> int | None:
    """Largest total size of simultaneously live tensors (at upper bounds)."""
    if any(iv.bound is None for iv in planned):
        return None
    peak = 0
    for t in sorted({iv.start for iv in planned}):
        peak = max(peak, sum(iv.bound for iv in planned if iv.start <= t <= iv.end))
    return peak


@dataclass(frozen=True)
class PlanMemoryPass(ModulePass):
    """Assign intermediate tensors to reusable storage blocks sized at symbolic upper bounds."""

    name: ClassVar[str] = "relax-plan-memory"

    def run(self, module: ir.Operation) -> None:
        i64 = ir.IntegerType.get_signless(64)
        for f in graph_functions(module):
            if not f.regions[0].blocks:
                continue
            kernels = _kernel_table(f)
            planned, _, on_callers_buffer = plan_function(f, kernels)
            for op in on_callers_buffer:
                _set_in_place(op, kernels)
            blocks = assign(planned)
            for bi, (_, occ) in enumerate(blocks):
                for iv in occ:
                    for op, value in [(iv.op, iv.value)] + iv.followers:
                        res_index = list(op.results).index(value)
                        old = op.attributes["relax.storage"] if "relax.storage" in op.attributes else None
                        vals = [ir.IntegerAttr(a).value for a in old] if old is not None else [-1] * len(op.results)
                        vals[res_index] = bi
                        op.attributes["relax.storage"] = ir.ArrayAttr.get([ir.IntegerAttr.get(i64, v) for v in vals])
                    for op, _ in iv.followers:  # written in place: the kernel skips its copy
                        _set_in_place(op, kernels)

            def attr(e: Expr):
                return ir.IntegerAttr.get(i64, e.value) if e.is_const else ir.StringAttr.get(str(e))

            sizes = [s for s, _ in blocks]
            planned_peak = sum((s for s in sizes), const(0))
            unplanned = sum((const(iv.bound) if iv.bound is not None else iv.size for iv in planned), const(0))
            lp = live_peak(planned)
            plan = {"blocks": ir.ArrayAttr.get([attr(s) for s in sizes]), "planned_peak_bytes": attr(planned_peak),
                    "unplanned_bytes": attr(unplanned)}
            if lp is not None:
                plan["live_peak_bytes"] = ir.IntegerAttr.get(i64, lp)
            f.attributes["relax.memory_plan"] = ir.DictAttr.get(plan)


PASSES = (PlanMemoryPass,)
