"""Indexing converters: gather (relax.take, a static slice, or relax.gather), scatter, and sort
with jax's comparator forms (ops/indexing.py).
"""
from __future__ import annotations

from mlir import ir

from relax_mlir.frontend.stablehlo.common import (_FLOATS, Val, _body_ops, _cmp_info, _emit_multi, _ints,
                                                  _merge_dims, _owner, _res, _splat_value)
from relax_mlir.frontend.stablehlo.unsigned import signed_index, signed_order, unsigned_from_order
from relax_mlir.frontend.stablehlo.registry import register_converters
from relax_mlir.frontend.stablehlo.signs import index_columns_alike, splat_through
from relax_mlir.shape import const, max_, min_


def _gather(im, op, ins):
    """stablehlo.gather / dynamic_gather: relax.take for the one-axis row lookups (x[idx]), the
    general relax.gather otherwise."""
    x, idx = ins[0], signed_index(im, ins[1])
    rdims, dt = _res(op)
    from jaxlib.mlir.dialects import stablehlo as hlo

    dn = hlo.GatherDimensionNumbers(op.attributes["dimension_numbers"])
    offset, collapsed, smap = list(dn.offset_dims), list(dn.collapsed_slice_dims), list(dn.start_index_map)
    obatch, ibatch, ivd = list(dn.operand_batching_dims), list(dn.start_indices_batching_dims), int(dn.index_vector_dim)
    if op.operation.name == "stablehlo.dynamic_gather":
        if ins[2].known is None:
            raise ValueError("slice_sizes is not a known shape computation")
        sizes = list(ins[2].known)
    else:
        sizes = [const(v) for v in _ints(op.attributes["slice_sizes"])]
    r = len(x.dims)
    if not obatch and idx.known is not None and len(idx.dims) == 1 and ivd == 0 and len(smap) == len(idx.known):
        # One start vector known as shape computations (x[:, s - 1:] of a symbolic dim): a static
        # slice, each start clamped into [0, dim - size] as StableHLO's gather does.
        facts = im.int_facts()
        begin = [const(0)] * r
        for j, ax in enumerate(smap):
            b, d = idx.known[j], x.dims[ax]
            if d is None:
                break
            hi = d - sizes[ax]
            b = b if facts.prove_ge(b, 0) else max_(b, const(0))
            begin[ax] = b if facts.prove_le(b, hi) else min_(b, hi)
        else:
            sl = im.emit("relax.strided_slice", [x], r, dt,
                         {"axes": list(range(r)), "begin": begin, "end": [b + z for b, z in zip(begin, sizes)]},
                         dims=list(sizes))
            keep = [sizes[i] for i in range(r) if i not in collapsed]
            return im.reshape(sl, keep) if collapsed else sl
    if not obatch and len(smap) == 1 and collapsed == smap and sizes[smap[0]] == const(1):
        ax = smap[0]
        nb = len(idx.dims) - (1 if ivd < len(idx.dims) else 0)
        vec_ok = ivd == len(idx.dims) or (ivd == len(idx.dims) - 1 and idx.dims[ivd] == const(1))
        full = all(i == ax or (x.dims[i] is not None and sizes[i] == x.dims[i]) for i in range(r))
        if vec_ok and full and offset == [i for i in range(len(rdims)) if not ax <= i < ax + nb]:
            ind = im.reshape(idx, idx.dims[:ivd]) if ivd < len(idx.dims) else idx
            return im.emit("relax.take", [x, ind], len(rdims), dt, {"axis": ax},
                           dims=_merge_dims(rdims, x.dims[:ax] + ind.dims + x.dims[ax + 1:]))
    attrs = {"offset_dims": offset, "collapsed_slice_dims": collapsed, "operand_batching_dims": obatch,
             "start_indices_batching_dims": ibatch, "start_index_map": smap, "index_vector_dim": ivd,
             "slice_sizes": sizes}
    # The result dims (relax.gather's deduction, kept here so later shape computations see them):
    # offset dims take the window sizes of the dims neither collapsed nor batching, the others
    # the index dims but index_vector_dim, in order.
    window = [sizes[d] for d in range(r) if d not in collapsed and d not in obatch]
    batch = [idx.dims[i] for i in range(len(idx.dims)) if i != ivd]
    wi, bi = iter(window), iter(batch)
    dims = [next(wi) if i in offset else next(bi) for i in range(len(offset) + len(batch))]
    return im.emit("relax.gather", [x, idx], len(rdims), dt, attrs, dims=_merge_dims(rdims, dims))


_SCATTER_KIND = {"stablehlo.add": "add", "stablehlo.multiply": "mul", "stablehlo.maximum": "max",
                 "stablehlo.minimum": "min", "stablehlo.or": "add", "stablehlo.and": "mul"}


def scatter_kind(op, region: int, dt: str, what: str) -> str:
    """The combiner of an update computation (region `region` of `op`, of element type `dt`):
    "replace" (return the update), or add / mul / max / min (or / and on i1 as add / mul);
    ValueError naming `what` otherwise."""
    args = list(op.regions[region].blocks[0].arguments)
    body = _body_ops(op, region)
    if len(body) == 1 and body[0].operands[0] == args[1]:
        return "replace"
    if (len(body) == 2 and body[0].name in _SCATTER_KIND and body[1].operands[0] == body[0].results[0]
            and {body[0].operands[0], body[0].operands[1]} == {args[0], args[1]}
            and (body[0].name not in ("stablehlo.or", "stablehlo.and") or dt == "i1")):
        return _SCATTER_KIND[body[0].name]
    raise ValueError(f"{what} {[o.name for o in body[:-1]]} is not one of replace, add, multiply, maximum, "
                     f"minimum")


def _diagonal(op, x, idx, upd):
    """(p, q) where this scatter (an add or set into zeros) writes only where the operand's indices
    along axes p and q are equal: each index vector is [i, i] (its two columns computed alike),
    scattered into those two axes. The result is then diagonal over (p, q) (signs.py)."""
    from jaxlib.mlir.dialects import stablehlo as hlo

    dn = hlo.ScatterDimensionNumbers(op.attributes["scatter_dimension_numbers"])
    axes = list(dn.scattered_dims_to_operand_dims)
    if len(axes) != 2 or sorted(dn.inserted_window_dims) != sorted(axes) or list(dn.input_batching_dims) \
            or splat_through(op.operands[0]) != 0 or getattr(upd, "signs", None) is not None:
        return None
    if not index_columns_alike(idx, int(dn.index_vector_dim)):
        return None
    return tuple(axes)


def _scatter(im, op, ins):
    """stablehlo.scatter of one input with an update computation that is replace (return the
    update), add, multiply, maximum or minimum."""
    if len(op.results) != 1:
        raise ValueError("scatter of several inputs is not supported")
    out = _scatter_one(im, op, ins)
    if isinstance(out, Val) and scatter_kind(op, 0, out.dtype, "scatter update computation") in ("add", "replace"):
        out.diag = _diagonal(op, ins[0], ins[1], ins[2])
    return out


def _scatter_one(im, op, ins):
    x, idx, upd = ins[0], signed_index(im, ins[1]), ins[2]
    rdims, dt = _res(op)
    from jaxlib.mlir.dialects import stablehlo as hlo

    kind = scatter_kind(op, 0, dt, "scatter update computation")
    dn = hlo.ScatterDimensionNumbers(op.attributes["scatter_dimension_numbers"])
    attrs = {"update_window_dims": list(dn.update_window_dims), "inserted_window_dims": list(dn.inserted_window_dims),
             "input_batching_dims": list(dn.input_batching_dims),
             "scatter_indices_batching_dims": list(dn.scatter_indices_batching_dims),
             "scatter_dims_to_operand_dims": list(dn.scattered_dims_to_operand_dims),
             "index_vector_dim": int(dn.index_vector_dim), "combiner": ir.StringAttr.get(kind)}
    # the updates' scatter dims are the indices' batch dims (checked at run time where not provable)
    batch = [a for a in range(len(idx.dims)) if a != int(dn.index_vector_dim)]
    scattered = [j for j in range(len(upd.dims)) if j not in list(dn.update_window_dims)]
    if len(batch) == len(scattered):
        upd = im.align_axes(idx, batch, upd, scattered, "stablehlo.scatter")
    if dt.startswith("ui") and kind in ("max", "min"):  # on the signed order (unsigned.signed_order)
        r = im.emit("relax_v.scatter", [signed_order(im, x), idx, signed_order(im, upd)], len(rdims), dt[1:], attrs,
                    dims=_merge_dims(rdims, x.dims))
        return unsigned_from_order(im, r, dt)
    return im.emit("relax_v.scatter", [x, idx, upd], len(rdims), dt, attrs, dims=_merge_dims(rdims, x.dims))


def _sort_key(v, args):
    """The block-argument position behind a comparator operand: the argument itself, or jax's
    canonicalization of a float argument (-0.0 -> 0.0, NaN -> NaN); (position, canonicalized)."""
    if v in args:
        return args.index(v), False
    o = _owner(v)
    if o is None or o.name != "stablehlo.select":
        return None, False
    c, nan, inner = o.operands
    co, io = _owner(c), _owner(inner)
    if co is None or co.name != "stablehlo.compare" or _cmp_info(co)[0] != "NE" or co.operands[0] != co.operands[1]:
        return None, False
    x = co.operands[0]
    if io is None or io.name != "stablehlo.select":
        return None, False
    c2, zero, x2 = io.operands
    c2o = _owner(c2)
    nv, zv = _splat_value(nan), _splat_value(zero)
    import math
    if x2 != x or c2o is None or c2o.name != "stablehlo.compare" or _cmp_info(c2o)[0] != "EQ" \
            or list(c2o.operands) != [x, zero] or nv is None or not math.isnan(nv) or zv != 0 or x not in args:
        return None, False
    return args.index(x), True


def _sort_less(v, args, dts):
    """The keys (operand number, descending) of jax's lexicographic less-than comparator."""
    o = _owner(v)
    if o is None:
        return None
    if o.name == "stablehlo.compare":
        d, ct = _cmp_info(o)
        (pa, ca), (pb, cb) = _sort_key(o.operands[0], args), _sort_key(o.operands[1], args)
        if pa is None or pb is None or d not in ("LT", "GT") or pa // 2 != pb // 2 or pa == pb:
            return None
        key = pa // 2
        if dts[key] in _FLOATS and not (ca == cb and ct == "TOTALORDER"):
            return None  # (a FLOAT compare is no strict weak order with NaNs)
        if dts[key] not in _FLOATS and ct != ("UNSIGNED" if dts[key] == "i1" or dts[key].startswith("ui")
                                              else "SIGNED"):
            return None
        return [(key, (d == "GT") == (pa % 2 == 0), dts[key] in _FLOATS and not ca)]
    if o.name == "stablehlo.or":
        for lt, rest in (tuple(o.operands), tuple(reversed(list(o.operands)))):
            first = _sort_less(lt, args, dts)
            ao = _owner(rest)
            if first is None or len(first) != 1 or ao is None or ao.name != "stablehlo.and":
                continue
            for eq, p in (tuple(ao.operands), tuple(reversed(list(ao.operands)))):
                eo = _owner(eq)
                if eo is None or eo.name != "stablehlo.compare" or _cmp_info(eo)[0] != "EQ":
                    continue
                keys = sorted(_sort_key(e, args)[0] // 2 for e in eo.operands if _sort_key(e, args)[0] is not None)
                tail = _sort_less(p, args, dts)
                if keys == [first[0][0]] * 2 and tail is not None:
                    return first + tail
    return None


def _sort(im, op, ins):
    """stablehlo.sort with a comparator of jax's form (lax.sort, jnp.sort/argsort): lexicographic
    less-than over the first keys, floats canonicalized and totally ordered."""
    args = list(op.regions[0].blocks[0].arguments)
    return sort_by(im, op, ins, args, [_res(op, i) for i in range(len(op.results))])


def sort_by(im, op, ins, args, results):
    """The sort of `ins` (real Vals) by `op`'s comparator, whose operands are read as `args`: the
    comparator values standing for operand k's left and right elements at args[2k], args[2k + 1]
    (its block arguments; for a complex operand split into two parts, the parts' values)."""
    axis = _ints(op.attributes["dimension"])[0]
    ret = _body_ops(op)[-1]
    dts = [v.dtype for v in ins]
    keys = _sort_less(ret.operands[0], args, dts)
    if keys is None or [kk for kk, _, _ in keys] != list(range(len(keys))):
        raise ValueError("sort comparator is not a lexicographic less-than / greater-than over the leading "
                         "operands of the form jax emits")
    dims = ins[0].dims
    # unsigned keys sort on the signed order (unsigned.signed_order); the sorted keys map back
    flipped = [i < len(keys) and v.dtype.startswith("ui") for i, v in enumerate(ins)]
    if any(flipped):
        ins = [signed_order(im, v) if f else v for v, f in zip(ins, flipped)]
        results = [(d, dt[1:] if f else dt) for (d, dt), f in zip(results, flipped)]
    outs = _emit_multi(im, "relax_v.sort", ins, [(_merge_dims(d, dims), dt) for d, dt in results],
                       {"axis": axis % max(len(dims), 1), "num_keys": len(keys),
                        "descending": [int(dsc) for _, dsc, _ in keys],
                        "total_order": [int(raw) for _, _, raw in keys]})
    if any(flipped):
        outs = [unsigned_from_order(im, v, "u" + v.dtype) if f else v for v, f in zip(outs, flipped)]
    return outs


CONVERTERS = register_converters({
    "stablehlo.gather": _gather,
    "stablehlo.dynamic_gather": _gather,
    "stablehlo.scatter": _scatter,
    "stablehlo.sort": _sort,
})
