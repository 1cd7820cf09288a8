"""reduce_window (pooling, cumulative sums) and the `stablehlo.dynamic_reduce_window` custom call
-> relax.reduce_window (ops/window.py).
"""
from __future__ import annotations

from mlir import ir

from relax_mlir.frontend.stablehlo.common import (Val, _body_ops, _cmp_info, _dtype_attr, _ints, _merge_dims, _res,
                                                  _splat_value, _string)
from relax_mlir.frontend.stablehlo.indexing import scatter_kind
from relax_mlir.frontend.stablehlo.reduce import _REDUCE_COMBINE, _is_identity
from relax_mlir.frontend.stablehlo.unsigned import signed_order, unsigned_from_order
from relax_mlir.frontend.stablehlo.registry import register_converters, register_custom_calls
from relax_mlir.ops.window import dilated, window_out
from relax_mlir.shape import Expr, const


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


def _emit_reduce_window(im, op, x: Val, init: Val, init_value, kind: str, window, strides, bdil, wdil, lo, hi):
    rdims, dt = _res(op)
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
    if len(op.results) != 1 or len(ins) != 2:
        raise ValueError("variadic reduce_window (several operands) is not supported")
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
    k_total = 1
    for w in win:
        k_total *= w
    if k_total > MAX_SELECT_WINDOW:
        raise ValueError(f"select_and_scatter window of {k_total} elements (at most {MAX_SELECT_WINDOW} are "
                         f"unrolled)")
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

    def window_slice(t: Val, offsets) -> Val:
        end = [offsets[i] + (odims[i] - 1) * strides[i] + 1 for i in range(r)]
        return im.emit("relax.strided_slice", [t], r, t.dtype,
                       {"axes": list(range(r)), "begin": list(offsets), "end": end, "strides": list(strides)},
                       dims=odims)

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
        v, ok = window_slice(xp, off), window_slice(valid, off)
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
