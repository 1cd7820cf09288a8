"""Control flow: `relax_v.while`, `relax_v.if`, `relax_v.case` (issue 16).

Each region of a StableHLO `while` / `if` / `case` is outlined by the importer into a private graph
function marked `relax.region` (its parameters: the carried values, then the values the region
captures from its enclosing function). The control-flow op names those functions by symbol and
holds no region itself, so every graph-level pass (legalize, fuse, plan-memory, lower-shapes)
already handles the region bodies as ordinary graph functions, and handles the op as an opaque op
that reads its operands.

    %r:N = "relax_v.while"(%init_0, ..., %init_N-1, %cap_0, ...) {cond = @c, body = @b, carried = N}
        @c(carried..., captures...) -> tensor<[], i1>;  @b(carried..., captures...) -> carried types
    %r:M = "relax_v.if"(%pred, %cap...) {then_branch = @t, else_branch = @e}   @t, @e(captures...) -> M results
    %r:M = "relax_v.case"(%index, %cap...) {branches = [@b0, ..., @bK]}  index: tensor<[], i32>;
        out of range selects the last branch (StableHLO semantics)

relax-infer-shapes gives a region function the types of the op's operands as its parameter types
(outlined functions are checked in the context of their op, not on their own), deduces its
results, and requires: the loop body's results equal the carried types (a carried value keeps its
shape across iterations), a branch's results equal every other branch's. relax-plan-memory keeps
every operand of a control-flow op alive as long as the op's results (after bufferization a
loop's or branch's result may share the buffer of a carried or captured operand), and inside a
region function sets the in-place flag of a dynamic_update_slice / scatter whose input is a
parameter read by nothing after it: the update writes the caller's buffer, so a loop that writes
one row of its carried stack per step does O(row) work per step, not a copy of the stack.
relax-to-upstream lowers them to `scf.while` / `scf.if` / `scf.index_switch` calling the
region functions.
"""
from __future__ import annotations

from relax_mlir.dialect.spec import ANY, OpSpec, attr, operand, relax_op, result_

CONTROL_FLOW = ("relax_v.while", "relax_v.if", "relax_v.case")


@relax_op
class WhileOp(OpSpec):
    """Loop while `cond(carried, captures)` holds, `carried = body(carried, captures)`; the results
    are the final carried values. Attributes: cond, body (symbols of region functions), carried
    (how many leading operands are carried; the rest are captures)."""

    name = "relax_v.while"
    args = operand(ANY, variadic=True)
    results = result_(ANY, variadic=True)
    cond = attr("symbol", optional=False)
    body = attr("symbol", optional=False)
    carried = attr("int", optional=False)
    results_are_declared = True


@relax_op
class IfOp(OpSpec):
    """`then(captures)` if the i1 scalar `pred` holds, else `else(captures)`. Operands: pred, then
    the captures. Attributes: then_branch, else_branch (symbols of region functions)."""

    name = "relax_v.if"
    args = operand(ANY, variadic=True)
    results = result_(ANY, variadic=True)
    then_branch = attr("symbol", optional=False)
    else_branch = attr("symbol", optional=False)
    results_are_declared = True


@relax_op
class CaseOp(OpSpec):
    """`branches[index](captures)`, the last branch when the i32 scalar `index` is out of range.
    Operands: index, then the captures. Attribute: branches (array of region-function symbols)."""

    name = "relax_v.case"
    args = operand(ANY, variadic=True)
    results = result_(ANY, variadic=True)
    branches = attr("array", optional=False)
    results_are_declared = True


def region_callees(op) -> list[str]:
    """The region functions a control-flow op calls, in order (while: cond, body; if: then, else;
    case: the branches); a PassError at the op when an attribute is not a symbol reference."""
    from mlir import ir

    from relax_mlir.passes import PassError

    a = op.attributes

    def symbol(attr, what: str) -> str:
        if not isinstance(attr, ir.FlatSymbolRefAttr):
            raise PassError(op, f"'{op.name}' op attribute '{what}' must be a symbol reference, got {attr}")
        return attr.value

    def named(key: str) -> str:
        if key not in a:
            raise PassError(op, f"'{op.name}' op needs the attribute '{key}'")
        return symbol(a[key], key)

    if op.name == "relax_v.while":
        return [named("cond"), named("body")]
    if op.name == "relax_v.if":
        return [named("then_branch"), named("else_branch")]
    if op.name == "relax_v.case":
        if "branches" not in a or not isinstance(a["branches"], ir.ArrayAttr):
            raise PassError(op, f"'{op.name}' op attribute 'branches' must be an array of symbol references")
        br = a["branches"]
        return [symbol(br[i], f"branches[{i}]") for i in range(len(br))]
    return []
