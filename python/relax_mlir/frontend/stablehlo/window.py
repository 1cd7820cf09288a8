"""reduce_window (pooling, cumulative sums) and the `stablehlo.dynamic_reduce_window` custom call
-> relax.reduce_window (ops/window.py).
"""
from __future__ import annotations

from mlir import ir

from relax_mlir.frontend.stablehlo.common import Val, _ints, _merge_dims, _res, _splat_value, _string
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


def _window_kind(body_ops, dt: str) -> str:
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


def _reduce_window(im, op, ins):
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
    return _emit_reduce_window(im, op, x, init, _init_value(op.operands[1]), kind, window,
                               ints("window_strides", 1), ints("base_dilations", 1), ints("window_dilations", 1),
                               [const(p) for p in pads[0::2]], [const(p) for p in pads[1::2]])


def _dynamic_reduce_window(im, op, ins):
    """`stablehlo.custom_call @stablehlo.dynamic_reduce_window(x, init, window_dimensions,
    window_strides, base_dilations, window_dilations, padding)`, body in `called_computations`."""
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
    return _emit_reduce_window(im, op, x, init, _init_value(op.operands[1]), kind, window, strides, bdil, wdil,
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


CONVERTERS = register_converters({
    "stablehlo.reduce_window": _reduce_window,
})

CUSTOM_CALLS = register_custom_calls({
    "stablehlo.dynamic_reduce_window": lambda im, op, ins: _dynamic_reduce_window(im, op, ins),
})
