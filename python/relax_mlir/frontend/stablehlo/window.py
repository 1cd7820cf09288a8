"""reduce_window (pooling, cumulative sums) and the `stablehlo.dynamic_reduce_window` custom call
-> relax.reduce_window (ops/window.py).
"""
from __future__ import annotations

from mlir import ir

from relax_mlir.frontend.stablehlo.common import (Val, _body_ops, _cmp_info, _dtype_attr, _ints, _jax_ttype,
                                                  _merge_dims, _res, _splat, _splat_value, _string)
from relax_mlir.frontend.stablehlo.indexing import scatter_kind
from relax_mlir.frontend.stablehlo.reduce import _REDUCE_COMBINE, _independent_pairs, _is_identity
from relax_mlir.frontend.stablehlo.unsigned import _total_order_key, signed_order, unsigned_from_order
from relax_mlir.frontend.stablehlo.registry import register_converters, register_custom_calls
from relax_mlir.ops.window import dilated, window_out
from relax_mlir.shape import Expr, const, max_


_WINDOW_KIND = {"stablehlo.add": "sum", "stablehlo.maximum": "max", "stablehlo.minimum": "min",
                "stablehlo.multiply": "prod"}
_WINDOW_KIND_I1 = {"stablehlo.or": "max", "stablehlo.add": "max", "stablehlo.maximum": "max",
                   "stablehlo.and": "min", "stablehlo.multiply": "min", "stablehlo.minimum": "min"}
_WINDOW_RELAX = {"sum": "relax.sum", "max": "relax.max", "min": "relax.min", "prod": "relax.prod"}


def _is_logaddexp(body_ops) -> bool:
    """Whether a two-argument body computes jax's logaddexp (lax.cumlogsumexp):
    select(isnan(a - b), a + b, max(a, b) + log1p(exp(-|a - b|)))."""
    if not body_ops or body_ops[-1].operation.name not in ("stablehlo.return", "func.return"):
        return False
    ret = body_ops[-1].operation
    blk = ret.block
    if len(ret.operands) != 1 or len(blk.arguments) != 2:
        return False
    a, b = blk.arguments[0], blk.arguments[1]

    def op_of(v, name, n):
        o = v.owner
        o = getattr(o, "operation", o)
        if getattr(o, "name", None) != name or len(o.operands) != n:
            return None
        return o

    def pair(o):
        return o is not None and {o.operands[0], o.operands[1]} == {a, b} and o.operands[0] != o.operands[1]

    sel = op_of(ret.operands[0], "stablehlo.select", 3)
    if sel is None:
        return False
    cmp_, plain, stable = (op_of(sel.operands[0], "stablehlo.compare", 2), op_of(sel.operands[1], "stablehlo.add", 2),
                           op_of(sel.operands[2], "stablehlo.add", 2))
    if cmp_ is None or _cmp_info(cmp_)[0] != "NE" or cmp_.operands[0] != cmp_.operands[1] or not pair(plain):
        return False
    delta = op_of(cmp_.operands[0], "stablehlo.subtract", 2)
    if delta is None or not pair(delta) or stable is None:
        return False
    for mx_v, l_v in ((stable.operands[0], stable.operands[1]), (stable.operands[1], stable.operands[0])):
        mx, l1p = op_of(mx_v, "stablehlo.maximum", 2), op_of(l_v, "stablehlo.log_plus_one", 1)
        if pair(mx) and l1p is not None:
            ex = op_of(l1p.operands[0], "stablehlo.exponential", 1)
            ng = ex and op_of(ex.operands[0], "stablehlo.negate", 1)
            ab = ng and op_of(ng.operands[0], "stablehlo.abs", 1)
            return ab is not None and ab.operands[0] == delta.results[0]
    return False


def _window_kind(body_ops, dt: str) -> str:
    if dt in ("f16", "bf16", "f32", "f64") and _is_logaddexp(body_ops):
        return "logaddexp"
    kinds = [o.operation.name for o in body_ops if o.operation.name not in ("stablehlo.return", "func.return")]
    table = _WINDOW_KIND_I1 if dt == "i1" else _WINDOW_KIND
    if len(kinds) != 1 or kinds[0] not in table:
        raise ValueError(f"reduce_window body {kinds} is not a single add/max/min/mul (or and/or on i1)")
    return table[kinds[0]]


def _init_value(v):
    """The splat value behind a reduce_window init, through scalar broadcast_in_dim / reshape."""
    while getattr(v.owner, "name", None) in ("stablehlo.broadcast_in_dim", "stablehlo.reshape"):
        v = v.owner.operands[0]
    return _splat_value(v)


def _window_known(v: Val, what: str) -> list[Expr]:
    if v.known is None:
        raise ValueError(f"the {what} of dynamic_reduce_window is not a known shape computation")
    return list(v.known)


def _const_ints(es: list[Expr], what: str) -> list[int]:
    if not all(e.is_const for e in es):
        raise ValueError(f"symbolic {what} {[str(e) for e in es]} (only window sizes and padding may be symbolic)")
    return [e.value for e in es]


def _emit_reduce_window(im, op, x: Val, init: Val, init_value, kind: str, window, strides, bdil, wdil, lo, hi,
                        result: int = 0):
    rdims, dt = _res(op, result)
    r = len(x.dims)
    if not (len(window) == len(strides) == len(bdil) == len(wdil) == len(lo) == len(hi) == r):
        raise ValueError("reduce_window attributes do not match the operand rank")
    # The result's symbolic dims now (relax.reduce_window deduces the same later): a converter
    # reading them (broadcast_in_dim of pooled window counts, flax's avg_pool with
    # count_include_pad=False) must not see '?'
    facts = im.int_facts()
    rdims = _merge_dims(rdims, [None if n is None else window_out(n, lo[i], hi[i], bdil[i], window[i], wdil[i],
                                                                  strides[i], facts)
                                for i, n in enumerate(x.dims)])
    if kind == "logaddexp":  # -inf is its identity; another init would be one more term
        if init_value is None or not (init_value == float("-inf")):
            raise ValueError("reduce_window logaddexp with an init value other than -inf is not supported")
        return im.emit("relax.reduce_window", [x], r, dt, {"kind": ir.StringAttr.get(kind), "window": list(window),
                       "strides": list(strides), "base_dilation": list(bdil), "window_dilation": list(wdil),
                       "pad_lo": list(lo), "pad_hi": list(hi)}, dims=rdims)
    identity = _is_identity(_WINDOW_RELAX[kind], dt, init_value)
    holes = any(p != const(0) for p in list(lo) + list(hi)) or any(d != 1 for d in bdil)
    if not identity and kind in ("sum", "prod") and holes:
        raise ValueError(f"reduce_window {kind} with a non-identity init value and padding or base "
                         f"dilation (the padding would hold the init value) is not supported")
    attrs = {"kind": ir.StringAttr.get(kind), "window": list(window), "strides": list(strides),
             "base_dilation": list(bdil), "window_dilation": list(wdil), "pad_lo": list(lo), "pad_hi": list(hi)}
    flip = dt.startswith("ui") and kind in ("max", "min")
    if flip:  # unsigned max / min pooling: on the signed order (unsigned.signed_order); padding holds
        # the signed identity, the unsigned one mapped
        x, init, udt, dt = signed_order(im, x), signed_order(im, init), dt, dt[1:]
    res = im.emit("relax.reduce_window", [x], r, dt, attrs, dims=rdims)
    if not identity:
        # max/min are idempotent: the init counts once however many padding elements a window holds
        res = im.emit(_REDUCE_COMBINE[_WINDOW_RELAX[kind]], [res, init], r, dt, dims=rdims)
    return unsigned_from_order(im, res, udt) if flip else res


def _reduce_window(im, op, ins, init_value=None):
    """`init_value`: the init's value where the caller knows it (a part of a complex constant)."""
    n = len(op.results)
    if len(ins) != 2 * n:
        raise ValueError(f"reduce_window with {n} results takes {2 * n} operands, not {len(ins)}")
    if n > 1:
        return _variadic_reduce_window(im, op, ins[:n], ins[n:])
    x, init = ins
    kind = _window_kind(op.regions[0].blocks[0].operations, x.dtype)
    r = len(x.dims)
    a = op.attributes

    def ints(name, default):
        return _ints(a[name]) if name in a else [default] * r

    window = [const(v) for v in _ints(a["window_dimensions"])]
    pads = _ints(a["padding"]) if "padding" in a else [0] * (2 * r)
    if init_value is None:
        init_value = _init_value(op.operands[1])
    return _emit_reduce_window(im, op, x, init, init_value, kind, window,
                               ints("window_strides", 1), ints("base_dilations", 1), ints("window_dilations", 1),
                               [const(p) for p in pads[0::2]], [const(p) for p in pads[1::2]])


def _variadic_reduce_window(im, op, xs: list[Val], inits: list[Val]) -> list[Val]:
    """A reduce_window of several operands (jax writes them in forward-mode derivatives: the jvp
    of a max / min pool selects each window's tangent with its value, `(select(a0 >= b0, a0, b0),
    select(a0 >= b0, a1, b1))`; that of a generic sum pool adds values and tangents side by side).
    A body that combines each operand on its own with one add / max / min / mul -> one
    reduce_window each; any other body of elementwise ops -> unrolled over the window's static
    positions as XLA evaluates it: the accumulator starts at the inits and takes each valid
    (non-padding) element of the window in row-major order, `acc = body(acc, element)`."""
    n = len(xs)
    r = len(xs[0].dims)
    a = op.attributes

    def ints(name, default):
        return _ints(a[name]) if name in a else [default] * r

    window, strides = ints("window_dimensions", 1), ints("window_strides", 1)
    bdil, wdil = ints("base_dilations", 1), ints("window_dilations", 1)
    pads = _ints(a["padding"]) if "padding" in a else [0] * (2 * r)
    lo, hi = pads[0::2], pads[1::2]
    if not all(len(v) == r for v in (window, strides, bdil, wdil, lo, hi)) or any(len(x.dims) != r for x in xs):
        raise ValueError("reduce_window attributes do not match the operand rank")
    pairs = _independent_pairs(op)
    if pairs is not None and all(k in (_WINDOW_KIND_I1 if x.dtype == "i1" else _WINDOW_KIND)
                                 for k, x in zip(pairs, xs)):
        return [_emit_reduce_window(im, op, xs[i], inits[i], _init_value(op.operands[n + i]),
                                    (_WINDOW_KIND_I1 if xs[i].dtype == "i1" else _WINDOW_KIND)[k],
                                    [const(w) for w in window], strides, bdil, wdil, [const(p) for p in lo],
                                    [const(p) for p in hi], result=i)
                for i, k in enumerate(pairs)]
    k_total = _unrolled_window(window, "variadic reduce_window: a window")
    if any(v < 1 for v in window + strides + bdil + wdil) or any(p < 0 for p in pads):
        raise ValueError(f"variadic reduce_window window {window}, strides {strides}, dilations {bdil} / {wdil}, "
                         f"padding {pads}: sizes must be positive and padding non-negative")
    if any(d is None for x in xs for d in x.dims):
        raise ValueError("variadic reduce_window with an operand dim of unknown size")
    facts = im.int_facts()
    x0 = xs[0]
    odims = [window_out(d, const(lo[i]), const(hi[i]), bdil[i], const(window[i]), wdil[i], strides[i], facts)
             for i, d in enumerate(x0.dims)]
    padded = [dilated(d, bdil[i], facts) + lo[i] + hi[i] for i, d in enumerate(x0.dims)]
    scalars = [init_scalar(im, v) for v in inits]
    holes = any(lo) or any(hi) or any(b != 1 for b in bdil)  # padding: elements the body never takes
    if holes:
        pad_attrs = {"low": list(lo), "high": list(hi), "interior": [b - 1 for b in bdil]}
        xps = [im.emit("relax.pad", [x, s_], r, x.dtype, pad_attrs, dims=padded) for x, s_ in zip(xs, scalars)]
        true_, false_ = Val(None, "i1", [], [const(1)]), Val(None, "i1", [], [const(0)])
        xps.append(im.emit("relax.pad", [im.broadcast(true_, list(x0.dims)), false_], r, "i1", pad_attrs, dims=padded))
    else:
        xps = list(xs)
    slicers = [_window_slices(im, t, odims, strides, "reduce_window") for t in xps]

    block = op.regions[0].blocks[0]
    accs = [im.broadcast(s_, odims) for s_ in scalars]
    for k in range(k_total):
        offsets, rest = [], k
        for i in reversed(range(r)):
            offsets.append((rest % window[i]) * wdil[i])
            rest //= window[i]
        offsets = offsets[::-1]
        new = _apply_body(im, block, accs + [sl(offsets) for sl in slicers[:n]], odims)
        if holes:
            ok = slicers[n](offsets)
            new = [im.emit("relax.where", [ok, v, acc], r, acc.dtype, dims=odims) for v, acc in zip(new, accs)]
        accs = new
    return [Val(acc.value, acc.dtype, _merge_dims(_res(op, i)[0], odims)) for i, acc in enumerate(accs)]


_BODY_BINARY = {"stablehlo.add": "relax.add", "stablehlo.subtract": "relax.subtract",
                "stablehlo.multiply": "relax.multiply", "stablehlo.maximum": "relax.maximum",
                "stablehlo.minimum": "relax.minimum", "stablehlo.divide": "relax.divide",
                "stablehlo.xor": "relax.bitwise_xor"}
_BODY_LOGICAL = {"stablehlo.and": ("relax.logical_and", "relax.bitwise_and"),
                 "stablehlo.or": ("relax.logical_or", "relax.bitwise_or"),
                 "stablehlo.not": ("relax.logical_not", "relax.bitwise_not"),
                 "stablehlo.negate": ("relax.negative", "relax.negative"), "stablehlo.abs": ("relax.abs", "relax.abs")}


def _apply_body(im, block, args: list[Val], dims) -> list[Val]:
    """A reducer region's elementwise body applied to whole tensors (`args` in the order of the
    block's arguments, each of shape `dims`; a value it takes from outside, a constant of the
    enclosing function, from the importer's environment) -> the values it returns. Only
    elementwise ops whose relax form keeps StableHLO's semantics are taken (integer max / min on
    unsigned values and anything else is refused by name)."""
    local = dict(zip(list(block.arguments), args))

    def env(v) -> Val:
        got = local.get(v)
        return got if got is not None else im.env[v]
    r = len(dims)
    for o in block.operations:
        name = o.operation.name
        if name in ("stablehlo.return", "func.return"):
            return [env(v) for v in o.operands]
        if name == "stablehlo.constant":
            value = _splat_value(o.results[0])
            dt = _jax_ttype(o.results[0].type)[1]
            if value is None:
                raise ValueError("a reduce_window body constant that is not a splat is not supported")
            local[o.results[0]] = im.emit("relax.constant", [], 0, dt, {"value": _splat([], dt, value)}, dims=[])
            continue
        ins = [env(v) for v in o.operands]
        dt = _jax_ttype(o.results[0].type)[1]
        if name == "stablehlo.compare":
            direction, ctype = _cmp_info(o)
            a, b = ins
            if ctype == "TOTALORDER" and a.dtype in ("f16", "bf16", "f32", "f64"):
                a, b = _total_order_key(im, a), _total_order_key(im, b)
            elif a.dtype.startswith("ui"):
                a, b = signed_order(im, a), signed_order(im, b)
            res = im.emit(_CMP_OPS[direction], [a, b], r, "i1", dims=dims)
        elif name == "stablehlo.select":
            res = im.emit("relax.where", ins, r, dt, dims=dims)
        elif name in _BODY_BINARY and not (dt.startswith("ui") and name in ("stablehlo.maximum", "stablehlo.minimum")):
            res = im.emit(_BODY_BINARY[name], ins, r, dt, dims=dims)
        elif name in _BODY_LOGICAL:
            res = im.emit(_BODY_LOGICAL[name][0 if dt == "i1" else 1], ins, r, dt, dims=dims)
        else:
            raise ValueError(f"variadic reduce_window: its body's '{name}' (on {dt}) is not supported")
        local[o.results[0]] = res
    raise ValueError("a reduce_window body without a return")


def _dynamic_reduce_window(im, op, ins, init_value=None):
    """`stablehlo.custom_call @stablehlo.dynamic_reduce_window(x, init, window_dimensions,
    window_strides, base_dilations, window_dilations, padding)`, body in `called_computations`.
    `init_value`: the init's value where the caller knows it (a part of a complex constant)."""
    if len(op.results) != 1 or len(ins) != 7:
        raise ValueError("variadic dynamic_reduce_window (several operands) is not supported")
    x, init = ins[0], ins[1]
    callee = _string(op.attributes["called_computations"][0])
    f = im.funcs.get(callee)
    if f is None:
        raise ValueError(f"unknown reducer @{callee}")
    kind = _window_kind(f.regions[0].blocks[0].operations, x.dtype)
    window = _window_known(ins[2], "window_dimensions")
    bdil = _const_ints(_window_known(ins[4], "base_dilations"), "base dilations")
    wdil = _const_ints(_window_known(ins[5], "window_dilations"), "window dilations")
    pads = _window_known(ins[6], "padding")
    strides = _strides(im, x, _window_known(ins[3], "window_strides"), window, bdil, wdil, pads[0::2], pads[1::2])
    if init_value is None:
        init_value = _init_value(op.operands[1])
    return _emit_reduce_window(im, op, x, init, init_value, kind, window, strides, bdil, wdil,
                               pads[0::2], pads[1::2])


def _strides(im, x: Val, strides: list[Expr], window, bdil, wdil, lo, hi) -> list[int]:
    """Constant strides; a symbolic one only on an axis whose window covers the whole padded,
    dilated axis (one window position whatever the stride: global pooling over a symbolic image
    size, flax's `avg_pool(x, (h, w), strides=(h, w))` in a ResNet head), where it becomes 1."""
    if len(strides) != len(x.dims) or not (len(window) == len(bdil) == len(wdil) == len(lo) == len(hi)
                                           == len(x.dims)):
        raise ValueError("dynamic_reduce_window attributes do not match the operand rank")
    facts = im.int_facts()
    out = []
    for i, s in enumerate(strides):
        if s.is_const:
            out.append(s.value)
            continue
        n = x.dims[i]
        if n is None or not facts.prove_eq(dilated(n, bdil[i], facts) + lo[i] + hi[i],
                                           dilated(window[i], wdil[i], facts)):
            raise ValueError(f"symbolic window strides {[str(e) for e in strides]} (only window sizes and "
                             f"padding may be symbolic, and a stride on an axis its window covers whole)")
        out.append(1)
    return out


def _unrolled_window(window: list[int], what: str) -> int:
    """The number of elements of a window unrolled position by position (at most MAX_SELECT_WINDOW)."""
    k_total = 1
    for w in window:
        k_total *= w
    if k_total > MAX_SELECT_WINDOW:
        raise ValueError(f"{what} of {k_total} elements (at most {MAX_SELECT_WINDOW} are unrolled)")
    return k_total


def _window_slices(im, t: Val, odims, strides, what: str):
    """The function `offsets -> t[offsets[i] :: strides[i]]` of `odims[i]` elements per axis: the
    elements of each window at one window position. An end that could be negative (a dim with no
    window position) is clamped at 0, where numpy's convention would count it from the end; the
    slice's extent, which the deduction writes with clamps it cannot always simplify back to
    `odims` (jax.grad of a 3-wide, stride-2 max pool over a symbolic n), is cast to `odims`
    (checked at run time, equal by construction)."""
    r = len(odims)
    facts = im.int_facts()

    def slice_at(offsets) -> Val:
        end = []
        for i in range(r):
            e = offsets[i] + (odims[i] - 1) * strides[i] + 1
            end.append(e if facts.prove_ge(odims[i], const(1)) else max_(e, const(0)))
        sl = im.emit("relax.strided_slice", [t], r, t.dtype,
                     {"axes": list(range(r)), "begin": list(offsets), "end": end, "strides": list(strides)},
                     dims=odims)
        if all(d.is_const for d in odims) and all(d is not None and d.is_const for d in t.dims):
            return sl  # (static: the deduction gives odims exactly)
        return im.match_dims(sl, odims, what, "the window positions of each offset must agree")
    return slice_at


# The most window elements select_and_scatter unrolls (a 3 x 3 pool has 9; each is a step of an
# elementwise selection chain).
MAX_SELECT_WINDOW = 64
_SELECT_SWAPPED = {"GE": "LE", "GT": "LT", "LE": "GE", "LT": "GT", "EQ": "EQ", "NE": "NE"}


def _select_direction(op) -> str:
    """The comparison direction of select_and_scatter's `select` region: `select(a, b)` must be
    one stablehlo.compare of the two arguments (jax's max-pool gradient: GE)."""
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    body = _body_ops(op, 0)
    if len(body) == 2 and body[0].name == "stablehlo.compare" and body[1].operands[0] == body[0].results[0]:
        direction, ctype = _cmp_info(body[0])
        if ctype in (None, "FLOAT", "SIGNED", "UNSIGNED") and direction in _SELECT_SWAPPED:
            if list(body[0].operands) == args:
                return direction
            if list(body[0].operands) == args[::-1]:
                return _SELECT_SWAPPED[direction]
    raise ValueError(f"select_and_scatter select computation {[o.name for o in body[:-1]]} is not one "
                     f"comparison of its two arguments")


def _select_and_scatter(im, op, ins):
    """stablehlo.select_and_scatter (the gradient of max / min pooling): for each window of the
    padded operand, the element `select` keeps over the window's valid (non-padding) elements in
    order (the first valid one, then each later one for which select(kept, it) is false), and
    source's value for that window combined into a tensor of `init` at that element's position.

    Unrolled over the window's K static positions: K strided slices of the padded operand and of
    a validity mask, an elementwise chain that keeps the selected value and position (exactly
    StableHLO's order, NaN included: a comparison with NaN is false, so the later element wins),
    the selected positions as operand indices (-1, out of bounds, dropped, for a window holding
    only padding) and one relax_v.scatter of source with the scatter computation."""
    if len(ins) != 3 or len(op.results) != 1:
        raise ValueError("select_and_scatter takes an operand, a source and an init value")
    x, src, init = ins
    dt = x.dtype
    r = len(x.dims)
    rdims, _ = _res(op)
    a = op.attributes
    win = _ints(a["window_dimensions"]) if "window_dimensions" in a else [1] * r
    strides = _ints(a["window_strides"]) if "window_strides" in a else [1] * r
    pads = _ints(a["padding"]) if "padding" in a else [0] * (2 * r)
    lo, hi = pads[0::2], pads[1::2]
    if not (len(win) == len(strides) == len(lo) == r == len(src.dims)):
        raise ValueError("select_and_scatter attributes do not match the operand rank")
    if any(w < 1 for w in win) or any(s_ < 1 for s_ in strides) or any(p < 0 for p in pads):
        raise ValueError(f"select_and_scatter window {win}, strides {strides}, padding {pads}: windows and "
                         f"strides must be positive, padding non-negative")
    k_total = _unrolled_window(win, "select_and_scatter window")
    if any(d is None for d in x.dims):
        raise ValueError("select_and_scatter with an operand dim of unknown size")
    direction = _select_direction(op)
    kind = scatter_kind(op, 1, dt, "select_and_scatter scatter computation")
    facts = im.int_facts()
    # the window positions (source's dims, which the importer may not have carried)
    odims = [window_out(n, const(lo[i]), const(hi[i]), 1, const(win[i]), 1, strides[i], facts)
             for i, n in enumerate(x.dims)]

    cmp_x = signed_order(im, x) if dt.startswith("ui") else x
    cdt = cmp_x.dtype
    init_s = init_scalar(im, init)
    fill = signed_order(im, init_s) if dt.startswith("ui") else init_s  # the padding (never selected)
    true_, false_ = Val(None, "i1", [], [const(1)]), Val(None, "i1", [], [const(0)])
    padded_dims = [n + lo[i] + hi[i] for i, n in enumerate(x.dims)]
    pad_attrs = {"low": list(lo), "high": list(hi), "interior": [0] * r}
    xp = im.emit("relax.pad", [cmp_x, fill], r, cdt, pad_attrs, dims=padded_dims)
    valid = im.emit("relax.pad", [im.broadcast(true_, list(x.dims)), false_], r, "i1", pad_attrs, dims=padded_dims)

    slice_x, slice_valid = (_window_slices(im, t, odims, strides, "select_and_scatter") for t in (xp, valid))

    def scalar(v: int, dtype: str) -> Val:
        return im.broadcast(Val(None, dtype, [], [const(v)]), odims)

    def offsets_of(k: int) -> list[int]:
        out = []
        for w in reversed(win):
            out.append(k % w)
            k //= w
        return out[::-1]

    cmp_op = _CMP_OPS[direction]
    sel_v, sel_k, have = None, None, None
    for k in range(k_total):
        off = offsets_of(k)
        v, ok = slice_x(off), slice_valid(off)
        if k == 0:
            sel_v, sel_k, have = v, scalar(0, "i64"), ok
            continue
        keep = im.emit("relax.logical_and", [have, im.emit(cmp_op, [sel_v, v], r, "i1", dims=odims)], r, "i1",
                       dims=odims)
        take = im.emit("relax.logical_and", [ok, im.emit("relax.logical_not", [keep], r, "i1", dims=odims)], r,
                       "i1", dims=odims)
        sel_v = im.emit("relax.where", [take, v, sel_v], r, cdt, dims=odims)
        sel_k = im.emit("relax.where", [take, scalar(k, "i64"), sel_k], r, "i64", dims=odims)
        have = im.emit("relax.logical_or", [have, ok], r, "i1", dims=odims)

    cols = []
    inner = 1
    inner_of = []
    for w in reversed(win):
        inner_of.append(inner)
        inner *= w
    inner_of = inner_of[::-1]
    for i in range(r):
        pos = im.emit("relax.arange", [], 1, "i64", {"end": odims[i], "dtype": _dtype_attr("i64")}, dims=[odims[i]])
        shape = [const(1)] * r
        shape[i] = odims[i]
        pos = im.broadcast(im.reshape(pos, shape), odims)
        idx = im.emit("relax.multiply", [pos, scalar(strides[i], "i64")], r, "i64", dims=odims)
        if win[i] > 1:  # the window offset along axis i: (k // inner) % win (no remainder on axis 0)
            kk = sel_k
            if inner_of[i] > 1:
                kk = im.emit("relax.divide", [kk, scalar(inner_of[i], "i64")], r, "i64", dims=odims)
            if i > 0:
                kk = im.emit("relax.remainder", [kk, scalar(win[i], "i64")], r, "i64", dims=odims)
            idx = im.emit("relax.add", [idx, kk], r, "i64", dims=odims)
        if lo[i]:
            idx = im.emit("relax.subtract", [idx, scalar(lo[i], "i64")], r, "i64", dims=odims)
        idx = im.emit("relax.where", [have, idx, scalar(-1, "i64")], r, "i64", dims=odims)
        cols.append(im.reshape(idx, odims + [const(1)]))
    indices = cols[0] if r == 1 else im.emit("relax_v.concat", cols, r + 1, "i64", {"axis": r},
                                             dims=odims + [const(r)])
    base = im.broadcast(init_s, list(x.dims))
    attrs = {"update_window_dims": [], "inserted_window_dims": list(range(r)), "input_batching_dims": [],
             "scatter_indices_batching_dims": [], "scatter_dims_to_operand_dims": list(range(r)),
             "index_vector_dim": r, "combiner": ir.StringAttr.get(kind)}
    if dt.startswith("ui") and kind in ("max", "min"):
        res = im.emit("relax_v.scatter", [signed_order(im, base), indices, signed_order(im, src)], r, dt[1:], attrs,
                      dims=_merge_dims(rdims, x.dims))
        return unsigned_from_order(im, res, dt)
    return im.emit("relax_v.scatter", [base, indices, src], r, dt, attrs, dims=_merge_dims(rdims, x.dims))


def init_scalar(im, init: Val) -> Val:
    return im.emit("relax.reshape", [init], 0, init.dtype, {"shape": []}, dims=[]) if len(init.dims) else init


_CMP_OPS = {"EQ": "relax.equal", "NE": "relax.not_equal", "LT": "relax.less", "LE": "relax.less_equal",
            "GT": "relax.greater", "GE": "relax.greater_equal"}


CONVERTERS = register_converters({
    "stablehlo.reduce_window": _reduce_window,
    "stablehlo.select_and_scatter": _select_and_scatter,
})

CUSTOM_CALLS = register_custom_calls({
    "stablehlo.dynamic_reduce_window": lambda im, op, ins: _dynamic_reduce_window(im, op, ins),
})
