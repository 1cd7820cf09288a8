"""Integer bits and element math: and/or/not (logical on i1, bitwise on integers), xor, shifts,
popcnt, clz, rounding, bitcast_convert, reduce_precision, unsigned constants (ops/bits.py).
"""
from __future__ import annotations

import numpy as np
from mlir import ir

from relax_mlir.frontend.stablehlo.common import _NP_DTYPES, _dtype_attr, _elt, _ints, _merge_dims, _res, _splat
from relax_mlir.frontend.stablehlo.elementwise import _binary, _logic, _unary
from relax_mlir.frontend.stablehlo.registry import register_converters


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
    from jax._src.lib.mlir import ir as jir

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
        raise ValueError("bitcast_convert between element types of different bit widths")
    if dt == x.dtype:
        return x
    return im.emit("relax.bitcast", [x], len(dims), dt, {"dtype": _dtype_attr(dt)}, dims=_merge_dims(dims, x.dims))


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
