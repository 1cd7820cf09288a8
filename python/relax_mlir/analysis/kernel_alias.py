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
        # (upstream erases the op only when every yielded value is an argument; any one that is
        # counts here, erring on the safe side)
        folds = isinstance(v, ir.BlockArgument) and v.owner == body and v.arg_number < len(ins)
        out.append(v.arg_number if folds else None)  # (an init's value: its destination)
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
_INF, _NAN = float("inf"), float("nan")
_FLOAT_IDENTITY = {  # op -> (the constants that leave the other operand as it is, commutative)
    "arith.addf": ((-0.0,), True), "arith.subf": ((0.0,), False), "arith.mulf": ((1.0,), True),
    "arith.divf": ((1.0,), False), "arith.maximumf": ((-_INF,), True), "arith.minimumf": ((_INF,), True),
    "arith.maxnumf": ((-_INF, _NAN), True), "arith.minnumf": ((_INF, _NAN), True)}
_IDEMPOTENT = frozenset({"arith.andi", "arith.ori", "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui",
                         "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf"})
_SELF_CANCELLING = frozenset({"arith.subi", "arith.xori"})  # x - x, x ^ x: 0
_ROUND_TRIPS = {"arith.trunci": ("arith.extsi", "arith.extui"), "arith.truncf": ("arith.extf",),
                "arith.negf": ("arith.negf",)}


class Const(tuple):
    """A constant a value folds to that no `arith.constant` holds yet: (value, type)."""


def _width(t: ir.Type) -> int | None:
    if isinstance(t, ir.IntegerType):
        return ir.IntegerType(t).width
    return 64 if isinstance(t, ir.IndexType) else None


def _signed(x: int, width: int) -> int:
    x &= (1 << width) - 1  # two's complement: -1 is all ones at any width (i1 true is -1)
    return x - (1 << width) if x >> (width - 1) else x


def _constant(v):
    """The Python value of a scalar constant (an `arith.constant`, a Const): an int (signed, at its
    width), a float; else None."""
    if isinstance(v, Const):
        return v[0]
    if isinstance(v, ir.BlockArgument) or v.owner.name != "arith.constant":
        return None
    attr = v.owner.attributes["value"]
    if isinstance(attr, ir.BoolAttr):
        return -1 if attr.value else 0
    if isinstance(attr, ir.IntegerAttr):
        return _signed(ir.IntegerAttr(attr).value, _width(attr.type) or 64)
    if isinstance(attr, ir.FloatAttr):
        return ir.FloatAttr(attr).value
    return None


def _same(x, c) -> bool:
    """A constant equal to `c` (a float also in its sign: -0.0 is not 0.0; NaN is NaN)."""
    if x is None or isinstance(c, float) != isinstance(x, float):
        return False
    if isinstance(c, float):
        if math.isnan(c):
            return math.isnan(x)
        return x == c and math.copysign(1.0, x) == math.copysign(1.0, c)
    return x == c


_FLOATS = {"f16": "float16", "f32": "float32", "f64": "float64"}
_CMPI = {0: lambda a, b, ua, ub: a == b, 1: lambda a, b, ua, ub: a != b, 2: lambda a, b, ua, ub: a < b,
         3: lambda a, b, ua, ub: a <= b, 4: lambda a, b, ua, ub: a > b, 5: lambda a, b, ua, ub: a >= b,
         6: lambda a, b, ua, ub: ua < ub, 7: lambda a, b, ua, ub: ua <= ub, 8: lambda a, b, ua, ub: ua > ub,
         9: lambda a, b, ua, ub: ua >= ub}


def _evaluate(op, name: str, args: list, t: ir.Type):
    """The value of `name` on constant arguments, as upstream folds it; raises _TooLarge for an
    operation (or a case: division by zero, an oversized shift) this analysis does not evaluate."""
    w = _width(t)
    if w is not None:
        win = _width(op.operands[0].type) or w
        a = args[0]
        if name in ("arith.extsi", "arith.trunci", "arith.index_cast"):
            return _signed(a, w)
        if name in ("arith.extui", "arith.index_castui"):
            return _signed(a & ((1 << win) - 1), w)
        if name == "arith.cmpi":
            b = args[1]
            pred = ir.IntegerAttr(op.attributes["predicate"]).value
            m = (1 << win) - 1
            return -1 if _CMPI[pred](a, b, a & m, b & m) else 0
        if len(args) != 2 or not all(isinstance(x, int) for x in args):
            raise _TooLarge
        b = args[1]
        m = (1 << w) - 1
        ua, ub = a & m, b & m
        if name in ("arith.shli", "arith.shrsi", "arith.shrui") and not 0 <= ub < w:
            raise _TooLarge  # (poison)
        if name in ("arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.floordivsi",
                    "arith.ceildivsi", "arith.ceildivui") and b == 0:
            raise _TooLarge
        table = {
            "arith.addi": lambda: a + b, "arith.subi": lambda: a - b, "arith.muli": lambda: a * b,
            "arith.andi": lambda: a & b, "arith.ori": lambda: a | b, "arith.xori": lambda: a ^ b,
            "arith.shli": lambda: a << ub, "arith.shrsi": lambda: a >> ub, "arith.shrui": lambda: ua >> ub,
            "arith.maxsi": lambda: max(a, b), "arith.minsi": lambda: min(a, b),
            "arith.maxui": lambda: max(ua, ub), "arith.minui": lambda: min(ua, ub),
            "arith.divsi": lambda: int(a / b) if abs(a) < 2 ** 52 else _too_large(),
            "arith.remsi": lambda: a - b * int(a / b) if abs(a) < 2 ** 52 else _too_large(),
            "arith.divui": lambda: ua // ub, "arith.remui": lambda: ua % ub,
            "arith.floordivsi": lambda: a // b, "arith.ceildivsi": lambda: -(-a // b),
            "arith.ceildivui": lambda: -(-ua // ub)}
        if name not in table:
            raise _TooLarge
        return _signed(table[name](), w)
    dt = _FLOATS.get(str(t))
    if dt is None or not all(isinstance(x, float) for x in args):
        raise _TooLarge
    import numpy as np

    f = getattr(np, dt)
    x = [f(v) for v in args]
    with np.errstate(all="ignore"):
        table = {
            "arith.addf": lambda: x[0] + x[1], "arith.subf": lambda: x[0] - x[1], "arith.mulf": lambda: x[0] * x[1],
            "arith.divf": lambda: x[0] / x[1], "arith.negf": lambda: -x[0], "arith.remf": lambda: np.fmod(x[0], x[1]),
            "arith.maximumf": lambda: np.maximum(x[0], x[1]), "arith.minimumf": lambda: np.minimum(x[0], x[1]),
            "arith.maxnumf": lambda: np.fmax(x[0], x[1]), "arith.minnumf": lambda: np.fmin(x[0], x[1]),
            "arith.extf": lambda: x[0], "arith.truncf": lambda: x[0]}
        unary = {"arith.negf": np.negative, "arith.extf": np.asarray, "arith.truncf": np.asarray,
                 "math.absf": np.abs, "math.sqrt": np.sqrt, "math.exp": np.exp, "math.log": np.log,
                 "math.floor": np.floor, "math.ceil": np.ceil, "math.tanh": np.tanh, "math.sin": np.sin,
                 "math.cos": np.cos, "math.rsqrt": lambda a: f(1) / np.sqrt(a),
                 "math.erf": lambda a: f(math.erf(a)) if math.isfinite(a) else np.sign(a)}
        if len(x) == 1 and name in unary:
            return float(unary[name](x[0]))
        if name not in table or len(x) != 2:
            raise _TooLarge
        return float(table[name]())


def _too_large():
    raise _TooLarge


def _absorbed(name: str, a, b, t: ir.Type):
    """The constant an integer operation with an absorbing operand folds to (x * 0, x & 0, x | -1,
    0 / x, x % 1, max(x, INT_MAX), ...), or None."""
    w = _width(t)
    if w is None:
        return None
    smax, smin = (1 << (w - 1)) - 1 if w > 1 else 0, -(1 << (w - 1))
    absorbing = {"arith.muli": (0, 0, True), "arith.andi": (0, 0, True), "arith.ori": (-1, -1, True),
                 "arith.maxsi": (smax, smax, True), "arith.minsi": (smin, smin, True),
                 "arith.maxui": (-1, -1, True), "arith.minui": (0, 0, True)}
    if name in absorbing:
        k, r, _ = absorbing[name]
        if a == k or b == k:
            return r
    if name in ("arith.divsi", "arith.divui", "arith.floordivsi", "arith.ceildivsi", "arith.ceildivui",
                "arith.shli", "arith.shrsi", "arith.shrui") and a == 0:
        return 0
    if name in ("arith.remsi", "arith.remui") and b in (1, -1 if name == "arith.remsi" else 1):
        return 0
    return None


def _const(v: ir.Value, assume: dict, memo: dict):
    """The constant `v` folds to, or None."""
    return _constant(_folded(v, assume, memo))


class _TooLarge(Exception):
    """A body too large to follow within _BUDGET steps, or a constant this analysis does not
    evaluate: every input may then be the result."""


_BUDGET = 20000  # _folded steps per linalg op (a body of thousands of ops; sharing is memoized)


def _folded(v: ir.Value, assume: dict, memo: dict | None = None):
    """The value `v` may fold to under upstream canonicalization (an ir.Value, or a Const), given
    conditions assumed true or false on the way (`assume`: value -> bool). Erring towards folding
    is safe (the result is then taken to share its input's storage: a longer lifetime); missing a
    fold is a wrong result once the kernel, inlined, becomes a view of its input while the plan
    reuses the input's storage (fuzz seed 2412170: select(c, select(c, x, 0), x), canonicalized
    to x, returned while a later kernel wrote the storage of x). Covered: a select of one value on
    both sides or on a known condition (constant, or the same condition as an enclosing select:
    select(c, select(c, a, b), x) is select(c, a, x)); select(c, true, false) of i1, which is c;
    an operation with its identity constant (x + 0, x * 1, x | 0, x & -1, x >> 0, x + -0.0,
    x / 1.0, maxnumf(x, NaN), ...) or with one operand twice (x & x, max(x, x)); an operation
    that undoes another ((a - b) + b, (x ^ a) ^ a); casts that round-trip (trunc(ext(x)),
    negf(negf(x)), bitcasts back to the same type); constants computed from constants, and
    absorbing operands (x * 0, 0 / x, x - x), which may then be some other operation's identity.
    test_kernel_alias checks each against upstream canonicalize."""
    if memo is None:
        memo = {"steps": 0}
    key0 = (v, frozenset(assume.items()))
    if key0 in memo:
        return memo[key0]
    out = _fold_steps(v, assume, memo)
    memo[key0] = out
    return out


def _fold_steps(v: ir.Value, assume: dict, memo: dict):
    while not isinstance(v, (ir.BlockArgument, Const)):
        memo["steps"] += 1
        if memo["steps"] > _BUDGET:
            raise _TooLarge
        o = v.owner
        name = o.name
        ops = list(o.operands)
        if name == "arith.constant" or not ops or o.regions:
            return v
        folded = [_folded(x, assume, memo) for x in ops] if name != "arith.select" else None
        if folded is not None and name.startswith(("arith.", "math.")):
            consts = [_constant(f) for f in folded]
            if all(c is not None for c in consts):
                return Const((_evaluate(o, name, consts, v.type), str(v.type)))
        if name == "arith.select":
            c, a, b = ops
            key = _folded(c, assume, memo)
            known = assume.get(key)
            if known is None:
                known = _constant(key)
            if known is not None:
                v = a if known else b
                continue
            if _width(v.type) == 1 and _const(a, assume, memo) == -1 and _const(b, assume, memo) == 0:
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
        if len(ops) != 2:
            return v
        f0, f1 = folded
        k0, k1 = _constant(f0), _constant(f1)
        if name in _IDEMPOTENT and f0 == f1:
            v = ops[0]
            continue
        if name in _SELF_CANCELLING and f0 == f1:
            return Const((0, str(v.type)))
        absorbed = _absorbed(name, k0, k1, v.type)
        if absorbed is not None:
            return Const((absorbed, str(v.type)))
        if name in _INT_IDENTITY:
            unit, commutative = _INT_IDENTITY[name]
            units = (unit,)
        elif name in _FLOAT_IDENTITY:
            units, commutative = _FLOAT_IDENTITY[name]
        elif name in _BOUNDS and _width(v.type):
            units, commutative = (_BOUNDS[name](_width(v.type)),), True
        else:
            units, commutative = (), False
        if any(_same(k1, u) for u in units):
            v = ops[0]
            continue
        if commutative and any(_same(k0, u) for u in units):
            v = ops[1]
            continue
        inner = _undone(name, ops, f0, f1, assume, memo)
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


def _undone(name: str, ops: list, f0, f1, assume: dict, memo: dict) -> ir.Value | None:
    """What an operation that undoes its operand's operation folds to: (x ^ a) ^ a, (a - b) + b,
    b + (a - b), (a + b) - b, (a + b) - a (integers only: upstream folds no float pair)."""
    def parts(x, want):
        if isinstance(x, ir.BlockArgument) or x.owner.name != want:
            return None
        return [_folded(y, assume, memo) for y in x.owner.operands], list(x.owner.operands)

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
