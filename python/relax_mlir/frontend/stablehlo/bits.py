"""Integer bits and element math: and/or/not (logical on i1, bitwise on integers), xor, shifts,
popcnt, clz, rounding, bitcast_convert, reduce_precision, unsigned constants (ops/bits.py).
"""
from __future__ import annotations

import numpy as np
from mlir import ir

from relax_mlir.frontend.stablehlo.common import _NP_DTYPES, _dtype_attr, _elt, _ints, _merge_dims, _res, _splat
from relax_mlir.frontend.stablehlo.elementwise import _binary, _logic, _unary
from relax_mlir.frontend.stablehlo.registry import register_converters
from relax_mlir.shape import const


def _bitwise(bool_name, int_name):
    """and/or/not: logical on i1, bitwise on integers."""
    def conv(im, op, ins):
        dims, dt = _res(op)
        if dt == "i1":  # logical, with known (shape computation) values decided on the symbols
            return _logic(bool_name)(im, op, ins)
        return im.emit(int_name, ins, len(dims), dt, dims=_merge_dims(dims, *[v.dims for v in ins]))
    return conv


def _unsigned_constant(im, attr, dims, dt):
    """An unsigned constant: its bits as a signless relax.constant, bitcast to `dt` (kernels and
    the lowered constants compute on signless integers)."""
    from jaxlib.mlir import ir as jir

    sdt = dt[1:]
    shape = [d.value for d in dims]
    w = int(sdt[1:])
    if attr.is_splat:
        v = int(attr.get_splat_value().value) & ((1 << w) - 1)
        value = _splat(shape, sdt, v - (1 << w) if v >> (w - 1) else v)
    else:
        if not isinstance(attr, jir.DenseElementsAttr):
            raise ValueError(f"a constant value of kind {type(attr).__name__} is not supported")
        arr = np.ascontiguousarray(np.asarray(attr, dtype=_NP_DTYPES[dt]).view(_NP_DTYPES[sdt]))
        value = ir.DenseElementsAttr.get(arr, type=_elt(sdt))
    c = im.emit("relax.constant", [], len(dims), sdt, {"value": value}, dims=dims)
    return im.emit("relax.bitcast", [c], len(dims), dt, {"dtype": _dtype_attr(dt)}, dims=dims)


def _reduce_precision(im, op, ins):
    (x,) = ins
    dims, dt = _res(op)
    attrs = {"exponent_bits": _ints(op.attributes["exponent_bits"])[0],
             "mantissa_bits": _ints(op.attributes["mantissa_bits"])[0]}
    return im.emit("relax.reduce_precision", [x], len(dims), dt, attrs, dims=_merge_dims(dims, x.dims))


def _bitcast_convert(im, op, ins):
    (x,) = ins
    dims, dt = _res(op)
    if len(dims) != len(x.dims):
        return _bitcast_resize(im, x, dims, dt)
    if dt == x.dtype:
        return x
    return im.emit("relax.bitcast", [x], len(dims), dt, {"dtype": _dtype_attr(dt)}, dims=_merge_dims(dims, x.dims))


_WIDTH = {"i1": 8, "bf16": 16, "f16": 16, "f32": 32, "f64": 64}


def _width(dt: str) -> int:
    return _WIDTH.get(dt) or int(dt.lstrip("ui"))


def _bitcast_resize(im, x, dims, dt):
    """bitcast_convert between widths, as jax defines it on CPU (little-endian): a wide element
    becomes k = W/w narrow ones along a new minor axis, lowest bits first, and back. Built from
    same-width bitcasts, shifts, integer conversions and a concatenation."""
    wx, wr = _width(x.dtype), _width(dt)
    if "i1" in (x.dtype, dt) or max(wx, wr) % min(wx, wr):
        raise ValueError(f"bitcast_convert from {x.dtype} to {dt}")

    def as_int(v, w):  # same-width bitcast to the signless integer type
        t = f"i{w}"
        return v if v.dtype == t else im.emit("relax.bitcast", [v], len(v.dims), t, {"dtype": _dtype_attr(t)},
                                              dims=v.dims)

    def scalar(w, value):
        return im.emit("relax.constant", [], 0, f"i{w}", {"value": _splat([], f"i{w}", value)}, dims=[])

    def cast(v, t, out_dims):
        return v if v.dtype == t else im.emit("relax.bitcast", [v], len(out_dims), t, {"dtype": _dtype_attr(t)},
                                              dims=out_dims)

    if wx > wr:  # [..., ] -> [..., k]
        k = wx // wr
        xi = as_int(x, wx)
        out_dims = _merge_dims(dims, list(x.dims) + [const(k)])
        parts = []
        for j in range(k):
            v = xi if j == 0 else im.emit("relax.right_shift_logical", [xi, scalar(wx, j * wr)], len(x.dims),
                                          f"i{wx}", dims=x.dims)
            v = im.emit("relax.astype", [v], len(x.dims), f"i{wr}", {"dtype": _dtype_attr(f"i{wr}")}, dims=x.dims)
            parts.append(im.reshape(v, list(x.dims) + [const(1)]))
        cat = im.emit("relax_v.concat", parts, len(out_dims), f"i{wr}", {"axis": len(x.dims)}, dims=out_dims)
        return cast(cat, dt, out_dims)
    k = wr // wx  # [..., k] -> [..., ]
    if x.dims[-1] is None or not (x.dims[-1].is_const and x.dims[-1].value == k):
        raise ValueError(f"bitcast_convert from {x.dtype} to {dt} needs a minor dimension of {k}")
    xi = as_int(x, wx)
    lead = list(x.dims[:-1])
    out_dims = _merge_dims(dims, lead)
    acc = None
    mask = scalar(wr, (1 << wx) - 1)
    r = len(x.dims) - 1
    for j in range(k):
        v = im.emit("relax.strided_slice", [xi], r + 1, f"i{wx}",
                    {"axes": [r], "begin": [j], "end": [j + 1], "strides": [1]}, dims=lead + [const(1)])
        v = im.reshape(v, lead)
        v = im.emit("relax.astype", [v], r, f"i{wr}", {"dtype": _dtype_attr(f"i{wr}")}, dims=lead)
        v = im.emit("relax.bitwise_and", [v, mask], r, f"i{wr}", dims=lead)  # the sign extension undone
        if j:
            v = im.emit("relax.left_shift", [v, scalar(wr, j * wx)], r, f"i{wr}", dims=lead)
        acc = v if acc is None else im.emit("relax.bitwise_or", [acc, v], r, f"i{wr}", dims=lead)
    return cast(acc, dt, out_dims)


CONVERTERS = register_converters({
    "stablehlo.not": _bitwise("relax.logical_not", "relax.bitwise_not"),
    "stablehlo.and": _bitwise("relax.logical_and", "relax.bitwise_and"),
    "stablehlo.or": _bitwise("relax.logical_or", "relax.bitwise_or"),
    "stablehlo.xor": _binary("relax.bitwise_xor"),
    "stablehlo.shift_left": _binary("relax.left_shift"),
    "stablehlo.shift_right_logical": _binary("relax.right_shift_logical"),
    "stablehlo.shift_right_arithmetic": _binary("relax.right_shift_arithmetic"),
    "stablehlo.popcnt": _unary("relax.popcount"),
    "stablehlo.count_leading_zeros": _unary("relax.count_leading_zeros"),
    "stablehlo.is_finite": _unary("relax.isfinite"),
    "stablehlo.atan2": _binary("relax.atan2"),
    "stablehlo.cbrt": _unary("relax.cbrt"),
    "stablehlo.tan": _unary("relax.tan"),
    "stablehlo.round_nearest_even": _unary("relax.round_even"),
    "stablehlo.round_nearest_afz": _unary("relax.round"),
    "stablehlo.bitcast_convert": _bitcast_convert,
    "stablehlo.reduce_precision": _reduce_precision,
})
