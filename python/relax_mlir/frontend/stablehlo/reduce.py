"""stablehlo.reduce: one add/max/min/mul/and/or/xor body as a relax reduction (plus the init value
where it is not the identity); jax's argmax/argmin variadic form as relax.argmax/argmin
(ops/reduce.py, ops/indexing.py).
"""
from __future__ import annotations

from relax_mlir.frontend.stablehlo.common import (_FLOATS, _body_ops, _cmp_info, _dtype_attr, _ints, _merge_dims,
                                                  _owner, _res, _splat_value)
from relax_mlir.frontend.stablehlo.unsigned import signed_order, unsigned_from_order
from relax_mlir.frontend.stablehlo.registry import register_converters
from relax_mlir.shape import const


_REDUCE_KIND = {"stablehlo.add": "relax.sum", "stablehlo.maximum": "relax.max", "stablehlo.minimum": "relax.min",
                "stablehlo.multiply": "relax.prod", "stablehlo.or": "relax.reduce_bitwise_or",
                "stablehlo.and": "relax.reduce_bitwise_and", "stablehlo.xor": "relax.reduce_bitwise_xor"}


# On i1 (StableHLO): add is or, multiply is and; relax.max / relax.min on i1 are or / and.
_REDUCE_KIND_I1 = {"stablehlo.add": "relax.max", "stablehlo.maximum": "relax.max", "stablehlo.or": "relax.max",
                   "stablehlo.multiply": "relax.min", "stablehlo.minimum": "relax.min", "stablehlo.and": "relax.min",
                   "stablehlo.xor": "relax.reduce_bitwise_xor"}


# The elementwise op that combines the init value with the reduced value.
_REDUCE_COMBINE = {"relax.sum": "relax.add", "relax.prod": "relax.multiply", "relax.max": "relax.maximum",
                   "relax.min": "relax.minimum", "relax.reduce_bitwise_and": "relax.bitwise_and",
                   "relax.reduce_bitwise_or": "relax.bitwise_or", "relax.reduce_bitwise_xor": "relax.bitwise_xor"}


def _is_identity(kind: str, dt: str, v) -> bool:
    """Whether `v` is the identity of the relax reduction `kind` on `dt` (so the init can go)."""
    import math
    if v is None:
        return False
    if dt == "i1":
        return bool(v) == (kind == "relax.min")
    if kind == "relax.sum":
        return v == 0
    if kind == "relax.prod":
        return v == 1
    if kind in ("relax.reduce_bitwise_or", "relax.reduce_bitwise_xor"):
        return v == 0
    if kind == "relax.reduce_bitwise_and":
        return v == -1 or (dt.startswith("ui") and v == (1 << int(dt[2:])) - 1) or (dt == "i1" and bool(v))
    lo = kind == "relax.max"
    if dt in ("f16", "bf16", "f32", "f64"):
        return math.isinf(v) and (v < 0) == lo
    if dt.startswith("ui"):
        return v == (0 if lo else (1 << int(dt[2:])) - 1)
    w = int(dt[1:])
    return v == (-(1 << (w - 1)) if lo else (1 << (w - 1)) - 1)


def _reduce(im, op, ins):
    if len(op.results) != 1:
        return _variadic_reduce(im, op, ins)
    body = [o for o in op.regions[0].blocks[0].operations]
    kinds = [o.operation.name for o in body if o.operation.name != "stablehlo.return"]
    table = _REDUCE_KIND_I1 if ins[0].dtype == "i1" else _REDUCE_KIND
    if len(kinds) != 1 or kinds[0] not in table:
        raise ValueError(f"reduce body {kinds} is not a single add/max/min/mul/and/or/xor")
    return _reduce_one(im, op, 0, ins[0], ins[1], kinds[0])


def _reduce_one(im, op, i, x, init, body_op: str):
    """Result `i` of `op`: operand `x` reduced with the combiner `body_op` from `init`."""
    table = _REDUCE_KIND_I1 if x.dtype == "i1" else _REDUCE_KIND
    if body_op in ("stablehlo.and", "stablehlo.or", "stablehlo.xor") and x.dtype in _FLOATS:
        raise ValueError(f"reduce with {body_op} on {x.dtype}: bitwise ops need integers")
    axes = _ints(op.attributes["dimensions"])
    rdims, dt = _res(op, i)
    dims = [d for k, d in enumerate(x.dims) if k not in axes]
    dims = _merge_dims(rdims, dims)
    kind = table[body_op]
    identity = _is_identity(kind, dt, _splat_value(op.operands[len(op.results) + i]))
    if dt.startswith("ui") and kind in ("relax.max", "relax.min"):
        # unsigned max / min: on the values mapped onto the signed order (unsigned.signed_order)
        sdt = dt[1:]
        r = im.emit(kind, [signed_order(im, x)], len(rdims), sdt, {"axes": axes, "keepdims": False}, dims=dims)
        if not identity:
            r = im.emit(_REDUCE_COMBINE[kind], [r, signed_order(im, init)], len(rdims), sdt, dims=dims)
        return unsigned_from_order(im, r, dt)
    r = im.emit(kind, [x], len(rdims), dt, {"axes": axes, "keepdims": False}, dims=dims)
    if identity:
        return r
    # reduce(x, init) = init (+) reduce(x): the init counts once, also over zero elements
    return im.emit(_REDUCE_COMBINE[kind], [r, init], len(rdims), dt, dims=dims)


def _independent_pairs(op) -> list[str] | None:
    """The combiners of a variadic reduce whose body combines each pair (a_i, b_i) on its own with
    one add/max/min/mul/and/or/xor (`lax.reduce((x, y), ..., lambda a, b: (max(a0, b0), a1 + b1))`),
    else None."""
    n = len(op.results)
    body = _body_ops(op)
    args = list(op.regions[0].blocks[0].arguments)
    ret = body[-1]
    if len(body) != n + 1 or len(ret.operands) != n:
        return None
    kinds = []
    for i, v in enumerate(ret.operands):
        owner = _owner(v)
        dt = str(args[i].type)
        table = _REDUCE_KIND_I1 if dt.endswith("i1>") else _REDUCE_KIND
        if owner is None or owner.name not in table or set(owner.operands) != {args[i], args[n + i]} \
                or len(owner.operands) != 2:
            return None
        kinds.append(owner.name)
    return kinds


def _variadic_reduce(im, op, ins):
    """A reduce of (values, iota) pairs with jax's argmax/argmin body -> relax.argmax/argmin; a
    body that combines each operand on its own -> one reduction each."""
    n = len(op.results)
    pairs = _independent_pairs(op)
    if pairs is not None:
        return [_reduce_one(im, op, i, ins[i], ins[n + i], k) for i, k in enumerate(pairs)]
    why = ("variadic reduce: only jax's argmax/argmin form (values, iota along the axis) and bodies "
           "combining each operand on its own are supported")
    axes = _ints(op.attributes["dimensions"])
    if n != 2 or len(axes) != 1:
        raise ValueError(why)
    axis = axes[0]
    src = _owner(op.operands[1])
    if src is None or src.name not in ("stablehlo.iota", "stablehlo.dynamic_iota") \
            or _ints(src.attributes["iota_dimension"])[0] != axis:
        raise ValueError(why + " (operand #1 is not an iota along the reduced dim)")
    body = _body_ops(op)
    args = list(op.regions[0].blocks[0].arguments)
    names = [o.name for o in body]
    expect = ["stablehlo.compare", "stablehlo.compare", "stablehlo.or", "stablehlo.compare", "stablehlo.compare",
              "stablehlo.and", "stablehlo.or", "stablehlo.select", "stablehlo.select", "stablehlo.return"]
    if names != expect:
        raise ValueError(why + f" (the body is {names[:-1]})")
    c0, cnan, or0, ceq, cidx, and0, or1, s0, s1, ret = body
    d0, d1, d3, d4 = _cmp_info(c0)[0], _cmp_info(cnan)[0], _cmp_info(ceq)[0], _cmp_info(cidx)[0]
    a, ai, b, bi = args
    shape_ok = (list(c0.operands) == [a, b] and d0 in ("GT", "LT") and list(cnan.operands) == [a, a] and d1 == "NE"
                and set(or0.operands) == {c0.results[0], cnan.results[0]} and d3 == "EQ"
                and list(ceq.operands) == [a, b] and d4 == "LT" and list(cidx.operands) == [ai, bi]
                and set(and0.operands) == {ceq.results[0], cidx.results[0]}
                and set(or1.operands) == {or0.results[0], and0.results[0]}
                and list(s0.operands) == [or0.results[0], a, b] and list(s1.operands) == [or1.results[0], ai, bi]
                and list(ret.operands) == [s0.results[0], s1.results[0]])
    if not shape_ok:
        raise ValueError(why + " (the body is not jax's argmax/argmin comparator)")
    x = ins[0]
    greater = d0 == "GT"
    init_v, init_i = _splat_value(op.operands[2]), _splat_value(op.operands[3])
    import math
    if x.dtype in _FLOATS:
        good_v = init_v is not None and math.isinf(init_v) and (init_v < 0) == greater
    elif x.dtype == "i1":
        good_v = init_v is not None and bool(init_v) == (not greater)
    elif x.dtype.startswith("ui"):
        w = int(x.dtype[2:])
        good_v = init_v == (0 if greater else (1 << w) - 1)
    else:
        w = int(x.dtype[1:])
        good_v = init_v == (-(1 << (w - 1)) if greater else (1 << (w - 1)) - 1)
    if not good_v or init_i != 0:
        raise ValueError(why + " (the init values are not jax's argmax/argmin identity)")
    vdims, vdt = _res(op, 0)
    idims, idt = _res(op, 1)
    dims = _merge_dims(idims, [d for i, d in enumerate(x.dims) if i != axis])
    name = "relax.argmax" if greater else "relax.argmin"
    keys = x
    if x.dtype.startswith("ui"):  # the unsigned order as the signed one (unsigned.signed_order)
        keys = signed_order(im, x)
    if idt.startswith("ui"):  # an unsigned index type: the signed index, converted (jax's index_dtype)
        sdt = "i64" if int(idt[2:]) >= 32 else "i32"
        ix = im.emit(name, [keys], len(idims), sdt, {"axis": axis, "dtype": _dtype_attr(sdt)}, dims=dims)
        ix = im.emit("relax.astype", [ix], len(idims), idt, {"dtype": _dtype_attr(idt)}, dims=dims)
    else:
        ix = im.emit(name, [keys], len(idims), idt, {"axis": axis, "dtype": _dtype_attr(idt)}, dims=dims)
    # the value output: x at the index (a batched gather), usually dead
    r = len(x.dims)
    others = [i for i in range(r) if i != axis]
    val = im.emit("relax.gather", [x, im.reshape(ix, dims + [const(1)])], len(dims), vdt,
                  {"offset_dims": [], "collapsed_slice_dims": [axis], "operand_batching_dims": others,
                   "start_indices_batching_dims": list(range(r - 1)), "start_index_map": [axis],
                   "index_vector_dim": r - 1, "slice_sizes": [1] * r}, dims=dims)
    return [val, ix]


CONVERTERS = register_converters({
    "stablehlo.reduce": _reduce,
})
