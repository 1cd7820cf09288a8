"""`result_aliases`: which inputs a destination-passing kernel's results may share storage with.

A kernel writes its results into its destination arguments, but once kernels are inlined into
their callers upstream canonicalization may drop a write whose value equals an input: a
`linalg.copy` (or an identity `linalg.generic`) of a slice becomes the slice itself, a view of the
input's storage. Bufferization then reads that storage where the graph-level memory plan believed
the kernel had made a copy, so a planner must keep such inputs alive as long as the result.

The analysis walks back from each returned value (a use-def chain, no IR is changed) and answers
conservatively: a value produced by an op it does not know may alias every tensor input.
"""
from __future__ import annotations

import math

from mlir import ir

# Ops whose result is a view of their first operand (no new storage once bufferized).
VIEW_OPS = frozenset({"tensor.extract_slice", "tensor.expand_shape", "tensor.collapse_shape", "tensor.cast",
                      "tensor.reshape", "tensor.bitcast", "bufferization.materialize_in_destination"})


ANY = -1  # _identity_sources: the result may become any of the inputs


def _identity_sources(op: ir.Operation) -> list[int | None]:
    """For each result of a linalg op that canonicalization may erase, replacing its results with
    its inputs (a copy, an identity transpose, a generic whose indexing maps are identities and
    whose body yields block arguments once folded): the position among its `ins` of the input the
    result may become. None for a result that stays its own storage."""
    none = [None] * len(op.results)
    if op.name == "linalg.copy":
        return [0]
    if op.name == "linalg.transpose":
        perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        return [0] if perm == list(range(len(perm))) else none
    if op.name != "linalg.generic":
        return none
    ins, inits = _dps_inits(op)
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if not all(_identity_map(m, x.type) for m, x in zip(maps, ins + inits)):
        return none
    body = op.regions[0].blocks[0]
    ops = list(body.operations)
    yld = ops[len(ops) - 1]
    if yld.operation.name != "linalg.yield":
        return none
    out, memo = [], {"steps": 0}
    for y in yld.operands:
        try:
            v = _folded(y, {}, memo)
        except _TooLarge:
            return [ANY] * len(op.results)
        if not isinstance(v, ir.BlockArgument) or v.owner != body:
            return none  # (upstream erases the op only when every yielded value is an argument)
        out.append(v.arg_number if v.arg_number < len(ins) else None)  # (an init's value: its destination)
    return out


def _identity_map(m: ir.AffineMap, t: ir.Type) -> bool:
    """An indexing map that reads its operand in the loops' own order, up to unit dims (d0, 0)
    that folding unit extents makes the identity."""
    if len(m.results) != m.n_dims:
        return False
    shape = ir.ShapedType(t).shape if isinstance(t, ir.ShapedType) else []
    for j, e in enumerate(m.results):
        if isinstance(e, ir.AffineDimExpr) and ir.AffineDimExpr(e).position == j:
            continue
        if isinstance(e, ir.AffineConstantExpr) and ir.AffineConstantExpr(e).value == 0 \
                and j < len(shape) and shape[j] == 1:
            continue
        return False
    return True


_INT_IDENTITY = {  # op -> (the constant that leaves the other operand as it is, commutative)
    "arith.addi": (0, True), "arith.subi": (0, False), "arith.muli": (1, True), "arith.divsi": (1, False),
    "arith.divui": (1, False), "arith.ori": (0, True), "arith.xori": (0, True), "arith.andi": (-1, True),
    "arith.shli": (0, False), "arith.shrsi": (0, False), "arith.shrui": (0, False),
    "arith.floordivsi": (1, False), "arith.ceildivsi": (1, False), "arith.ceildivui": (1, False)}
_FLOAT_IDENTITY = {"arith.addf": (-0.0, True), "arith.subf": (0.0, False), "arith.mulf": (1.0, True),
                   "arith.divf": (1.0, False)}
_IDEMPOTENT = frozenset({"arith.andi", "arith.ori", "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui",
                         "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf"})
_ROUND_TRIPS = {"arith.trunci": ("arith.extsi", "arith.extui"), "arith.truncf": ("arith.extf",),
                "arith.negf": ("arith.negf",)}


def _constant(v: ir.Value):
    """The Python value of a scalar `arith.constant` (an int, a float), else None."""
    if isinstance(v, ir.BlockArgument) or v.owner.name != "arith.constant":
        return None
    attr = v.owner.attributes["value"]
    if isinstance(attr, ir.BoolAttr):
        return -1 if attr.value else 0  # (i1 true is -1, as an i1 IntegerAttr's all ones)
    if isinstance(attr, ir.IntegerAttr):
        a = ir.IntegerAttr(attr)
        width = ir.IntegerType(a.type).width if isinstance(a.type, ir.IntegerType) else 64
        x = a.value & ((1 << width) - 1)  # two's complement: -1 is all ones at any width
        return x - (1 << width) if x >> (width - 1) else x  # (i1 true is -1)
    if isinstance(attr, ir.FloatAttr):
        return ir.FloatAttr(attr).value
    return None


def _same(x, c) -> bool:
    """A constant equal to `c` (a float also in its sign: -0.0 is not 0.0)."""
    if x is None or isinstance(x, bool) != isinstance(c, bool):
        return False
    if isinstance(c, float):
        return isinstance(x, float) and x == c and math.copysign(1.0, x) == math.copysign(1.0, c)
    return isinstance(x, int) and x == c


class _TooLarge(Exception):
    """A body too large to follow within _BUDGET steps: every input may be the result."""


_BUDGET = 20000  # _folded steps per linalg op (a body of thousands of ops; sharing is memoized)


def _folded(v: ir.Value, assume: dict, memo: dict | None = None) -> ir.Value:
    """The value `v` may fold to under upstream canonicalization, given conditions assumed true or
    false on the way (`assume`: value -> bool). Erring towards folding is safe (the result is then
    taken to share its input's storage: a longer lifetime); missing a fold is a wrong result once
    the kernel, inlined, becomes a view of its input while the plan reuses the input's storage
    (fuzz seed 2412170: select(c, select(c, x, 0), x), canonicalized to x, returned while a later
    kernel wrote the storage of x). Covered: a select of one value on both sides or on a known
    condition (constant, or the same condition as an enclosing select: select(c, select(c, a, b),
    x) is select(c, a, x)); select(c, true, false) of i1, which is c; an operation with its
    identity constant (x + 0, x * 1, x | 0, x & -1, x >> 0, x + -0.0, x / 1.0, ...) or with one
    operand twice (x & x, max(x, x)); casts that round-trip (trunc(ext(x)), negf(negf(x)),
    bitcasts back to the same type)."""
    if memo is None:
        memo = {"steps": 0}
    key0 = (v, frozenset(assume.items()))
    if key0 in memo:
        return memo[key0]
    out = _fold_steps(v, assume, memo)
    memo[key0] = out
    return out


def _fold_steps(v: ir.Value, assume: dict, memo: dict) -> ir.Value:
    while not isinstance(v, ir.BlockArgument):
        memo["steps"] += 1
        if memo["steps"] > _BUDGET:
            raise _TooLarge
        o = v.owner
        name = o.name
        ops = list(o.operands)
        if name == "arith.select":
            c, a, b = ops
            key = _folded(c, assume, memo)
            known = assume.get(key)
            if known is None:
                known = _constant(key)
            if known is not None:
                v = a if known else b
                continue
            if isinstance(v.type, ir.IntegerType) and ir.IntegerType(v.type).width == 1 \
                    and _constant(a) == -1 and _constant(b) == 0:
                v = c
                continue
            fa = _folded(a, {**assume, key: True}, memo)
            fb = _folded(b, {**assume, key: False}, memo)
            return fa if fa == fb else v
        if name in ("arith.bitcast", "arith.index_cast", "arith.index_castui"):
            src = ops[0]
            while not isinstance(src, ir.BlockArgument) and src.owner.name == name and src.type != v.type:
                src = src.owner.operands[0]
            if src.type == v.type:
                v = src
                continue
            return v
        if name in _ROUND_TRIPS:
            src = ops[0]
            if not isinstance(src, ir.BlockArgument) and src.owner.name in _ROUND_TRIPS[name] \
                    and src.owner.operands[0].type == v.type:
                v = src.owner.operands[0]
                continue
            return v
        if len(ops) == 2 and name in _IDEMPOTENT and _folded(ops[0], assume, memo) == _folded(ops[1], assume, memo):
            v = ops[0]
            continue
        ident = _INT_IDENTITY.get(name) or _FLOAT_IDENTITY.get(name)
        if ident is not None and len(ops) == 2:
            unit, commutative = ident
            if _same(_constant(ops[1]), unit):
                v = ops[0]
                continue
            if commutative and _same(_constant(ops[0]), unit):
                v = ops[1]
                continue
        if name in _BOUNDS and len(ops) == 2 and isinstance(v.type, ir.IntegerType):
            width = ir.IntegerType(v.type).width
            bound = _BOUNDS[name](width)
            if _constant(ops[1]) == bound:
                v = ops[0]
                continue
            if _constant(ops[0]) == bound:
                v = ops[1]
                continue
        inner = _undone(name, ops, assume, memo)
        if inner is not None:
            v = inner
            continue
        if name in ("complex.re", "complex.im") and not isinstance(ops[0], ir.BlockArgument) \
                and ops[0].owner.name == "complex.create":
            v = ops[0].owner.operands[0 if name == "complex.re" else 1]
            continue
        return v
    return v


# min / max with the bound that leaves the other operand as it is (signed: as _constant reads)
_BOUNDS = {"arith.maxsi": lambda w: -(1 << (w - 1)), "arith.minsi": lambda w: (1 << (w - 1)) - 1 if w > 1 else 0,
           "arith.maxui": lambda w: 0, "arith.minui": lambda w: -1}


def _undone(name: str, ops: list, assume: dict, memo: dict) -> ir.Value | None:
    """What an operation that undoes its operand's operation folds to: (x ^ a) ^ a, (a - b) + b,
    b + (a - b), (a + b) - b, (a + b) - a (integers only: upstream folds no float pair)."""
    def parts(x, want):
        if isinstance(x, ir.BlockArgument) or x.owner.name != want:
            return None
        return [_folded(y, assume, memo) for y in x.owner.operands], list(x.owner.operands)

    if len(ops) != 2:
        return None
    f0, f1 = _folded(ops[0], assume, memo), _folded(ops[1], assume, memo)
    if name == "arith.xori":
        for x, other in ((ops[0], f1), (ops[1], f0)):
            p = parts(x, "arith.xori")
            if p is not None and other in p[0]:
                return p[1][1 - p[0].index(other)]
    elif name == "arith.addi":
        for x, other in ((ops[0], f1), (ops[1], f0)):
            p = parts(x, "arith.subi")
            if p is not None and p[0][1] == other:
                return p[1][0]
    elif name == "arith.subi":
        p = parts(ops[0], "arith.addi")
        if p is not None and f1 in p[0]:
            return p[1][1 - p[0].index(f1)]
    return None


def _dps_inits(op: ir.Operation) -> tuple[list[ir.Value], list[ir.Value]]:
    """(inputs, inits) of a linalg op (operandSegmentSizes = [ins, outs])."""
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    vals = list(op.operands)
    return vals[:sizes[0]], vals[sizes[0]:sizes[0] + sizes[1]]


def _sources(value: ir.Value, inputs: dict, all_inputs: frozenset, seen: set) -> frozenset:
    """Kernel input positions `value` may share storage with."""
    if isinstance(value, ir.BlockArgument):
        return frozenset({inputs[value]}) if value in inputs else frozenset()
    if value in seen:
        return frozenset()
    seen.add(value)
    op = value.owner
    name = op.name
    if name in VIEW_OPS:
        return _sources(op.operands[0], inputs, all_inputs, seen)
    if name.startswith("linalg.") and "operandSegmentSizes" in op.attributes:
        ins, inits = _dps_inits(op)
        k = list(op.results).index(value)
        out = _sources(inits[k], inputs, all_inputs, seen) if k < len(inits) else all_inputs
        src = _identity_sources(op)[k] if k < len(op.results) else None
        for x in (ins if src == ANY else [] if src is None else [ins[src]]):
            out |= _sources(x, inputs, all_inputs, seen)
        return out
    if name in ("tensor.insert_slice", "tensor.parallel_insert_slice"):
        out = _sources(op.operands[1], inputs, all_inputs, seen)
        if op.operands[0].type == op.results[0].type:  # a full-size insert folds to its source
            out |= _sources(op.operands[0], inputs, all_inputs, seen)
        return out
    if name == "tensor.insert":
        return _sources(op.operands[1], inputs, all_inputs, seen)
    if name in ("tensor.empty", "arith.constant", "tensor.splat", "tensor.generate", "tensor.from_elements",
                "bufferization.alloc_tensor"):
        return frozenset()
    return all_inputs  # unknown: may alias anything


def result_aliases(kernel: ir.Operation, n_inputs: int) -> list[frozenset[int]]:
    """For each result of `kernel` (a func.func in destination-passing style whose first `n_inputs`
    arguments are its tensor inputs), the input positions whose storage the result may share."""
    body = kernel.regions[0].blocks[0]
    tensor_inputs = {a: i for i, a in enumerate(list(body.arguments)[:n_inputs])
                     if isinstance(a.type, ir.RankedTensorType)}
    all_inputs = frozenset(tensor_inputs.values())
    ret = list(body.operations)[-1]
    return [_sources(v, tensor_inputs, all_inputs, set()) for v in ret.operands]
