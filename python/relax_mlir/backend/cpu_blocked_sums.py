"""Blocked float sums (CPU backend, the end of `relax-cpu-vectorize`).

A vectorized reduction is an `scf.for` that carries its running sum in registers:

    %s = scf.for %i = %lb to %ub step %c iter_args(%acc = %init) -> (vector<16xf32>) {
      ...  %x = <the terms of iteration %i>
      %t = arith.addf %x, %acc          (or vector.reduction <add>, %v, %acc; a 0-d %acc extracted
      scf.yield %t                       and its sum broadcast back)
    }

Each lane adds one term per iteration, so its rounding error grows with the trip count: a column
sum of 10^6 f32 rows was 3.7e-5 off (relative) and a sum over 2 * 10^5 rows 8e-6, where XLA's CPU
reductions stay near 1e-7. Every mean over a batch, every bias gradient, every BatchNorm statistic
is such a sum.

Blocked here: the loop becomes two, an outer loop over blocks of BLOCK iterations carrying the
total, and the old body inside, summing one block from -0.0 (IEEE addition's identity: a block of
-0.0 terms stays -0.0, any other term replaces it exactly); each block's sum is added to the total.
Applied LEVELS times (the outer loop of one blocking is again such a loop), a sum of N terms per
lane has LEVELS * BLOCK + N / BLOCK^LEVELS additions on any path instead of N: at 10^6 rows the
column sum is 2e-7 off. The same terms are added, in another order; NaN, Inf and signed zeros come
out as before (a sum of -0.0 terms onto +0.0 is +0.0 either way). The cost is one vector add per
block of BLOCK iterations.

Only loops whose every carried value is such a float accumulator, read nowhere but by its own
update and the loop's yield, are rewritten (a scan that writes each prefix keeps its order); loops
with a static trip count of at most BLOCK are left alone.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf

from relax_mlir.backend.common import const_int

__all__ = ["BLOCK", "LEVELS", "block_float_sums"]

BLOCK = 32
LEVELS = 3


def _op(v: ir.Value) -> ir.Operation | None:
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if isinstance(owner, ir.OpView) else owner


def _float_like(t: ir.Type) -> bool:
    if isinstance(t, ir.VectorType):
        t = t.element_type
    return isinstance(t, (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type))


def _only_use(v: ir.Value) -> ir.Operation | None:
    uses = list(v.uses)
    return uses[0].owner if len(uses) == 1 else None


def _is_accumulator(acc: ir.BlockArgument, yielded: ir.Value) -> bool:
    """True if `yielded` is `acc` plus terms that do not depend on `acc`: `addf(acc, x)` or
    `vector.reduction <add>, x, acc`; a 0-d vector `acc` is read with `vector.extract` and the scalar
    sum broadcast back."""
    if not _float_like(acc.type) or acc.type != yielded.type:
        return False
    # the sum is only carried: a running value read elsewhere (a scan writing each prefix) would
    # see a block's partial sum
    if _only_use(yielded) is None or _only_use(yielded).name != "scf.yield":
        return False
    total, core = acc, _op(yielded)
    if core is not None and core.name == "vector.broadcast":
        ext = _only_use(acc)
        if (not isinstance(acc.type, ir.VectorType) or acc.type.rank != 0 or ext is None
                or ext.name != "vector.extract" or _only_use(ext.results[0]) is None):
            return False
        total, core = ext.results[0], _op(core.operands[0])
        if core is None or _only_use(core.results[0]) is None:
            return False
    user = _only_use(total)  # (an MLIR op compared with None raises: both checked first)
    if core is None or user is None or user != core:
        return False
    operands = list(core.operands)
    if core.name == "arith.addf":
        return operands.count(total) == 1
    return (core.name == "vector.reduction" and len(operands) == 2 and operands[1] == total
            and str(core.attributes["kind"]) == "#vector.kind<add>")


def _sum_loop(loop: ir.Operation) -> bool:
    if loop.name != "scf.for":
        return False
    body = loop.regions[0].blocks[0]
    carried = list(body.arguments)[1:]
    if not carried or len(carried) != len(loop.results):
        return False
    yielded = list(body.operations[len(body.operations) - 1].operands)
    if not all(_is_accumulator(a, y) for a, y in zip(carried, yielded)):
        return False
    lb, ub, step = (const_int(v) for v in list(loop.operands)[:3])
    return not (lb is not None and ub is not None and step and (ub - lb + step - 1) // step <= BLOCK)


def _minus_zero(t: ir.Type) -> ir.Value:
    elem = t.element_type if isinstance(t, ir.VectorType) else t
    z = ir.FloatAttr.get(elem, -0.0)
    return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, z) if isinstance(t, ir.VectorType) else z).result


def _block(loop: ir.Operation) -> ir.Operation:
    """Rewrite one sum loop into blocks (see the module doc); returns the new outer loop."""
    lb, ub, step = list(loop.operands)[:3]
    inits = list(loop.operands)[3:]
    body = loop.regions[0].blocks[0]
    index = ir.IndexType.get()
    with ir.InsertionPoint(loop), loop.location:
        c = const_int(step)
        span = (arith.ConstantOp(index, c * BLOCK).result if c is not None
                else arith.MulIOp(step, arith.ConstantOp(index, BLOCK).result).result)
        outer = scf.ForOp(lb, ub, span, inits)
        with ir.InsertionPoint(outer.body):
            end = arith.MinSIOp(arith.AddIOp(outer.induction_variable, span).result, ub).result
            inner = scf.ForOp(outer.induction_variable, end, step, [_minus_zero(v.type) for v in inits])
            totals = [arith.AddFOp(t, s).result for t, s in zip(outer.inner_iter_args, inner.results)]
            scf.YieldOp(totals)
    body.arguments[0].replace_all_uses_with(inner.induction_variable)
    for old, new in zip(list(body.arguments)[1:], inner.inner_iter_args):
        old.replace_all_uses_with(new)
    dest = inner.body
    for op in list(body.operations):
        op.detach_from_parent()
        ir.InsertionPoint(dest).insert(op)
    for old, new in zip(loop.results, outer.results):
        old.replace_all_uses_with(new)
    loop.erase()
    return outer.operation


def block_float_sums(func: ir.Operation) -> int:
    """Block every float sum loop in `func` LEVELS times; returns how many loops were blocked."""
    loops: list[ir.Operation] = []

    def visit(o):
        if o.name == "scf.for":
            loops.append(o)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.POST_ORDER)
    n = 0
    for loop in loops:
        if not _sum_loop(loop):
            continue
        n += 1
        for _ in range(LEVELS):
            loop = _block(loop)
            if not _sum_loop(loop):
                break
    return n
