"""Unsigned integers through the signed kernels: order-sensitive ops on the signed order, unsigned
indices widened (the converters of reduce.py, window.py and indexing.py use these).

Kernels compare signless integers as signed. Flipping the top bit maps the unsigned order onto the
signed one (u <u v iff u ^ 2^(w-1) <s v ^ 2^(w-1)), so an order-sensitive op on unsigned values
(max, min, argmax, sort, max-pooling, scatter max/min) runs on the flipped signed values, and value
results are flipped back.
"""
from __future__ import annotations

from relax_mlir.frontend.stablehlo.common import Val, _dtype_attr, _splat


def _flip_top_bit(im, x: Val, to_dt: str) -> Val:
    """x's bits with the top bit flipped, as `to_dt` (the same width, signed or unsigned)."""
    sdt = x.dtype[1:] if x.dtype.startswith("ui") else x.dtype
    w = int(sdt[1:])
    s = x if x.dtype == sdt else im.emit("relax.bitcast", [x], len(x.dims), sdt, {"dtype": _dtype_attr(sdt)},
                                         dims=x.dims)
    top = im.emit("relax.constant", [], 0, sdt, {"value": _splat([], sdt, -(1 << (w - 1)))}, dims=[])
    f = im.emit("relax.bitwise_xor", [s, top], len(x.dims), sdt, dims=x.dims)
    if to_dt == sdt:
        return f
    return im.emit("relax.bitcast", [f], len(x.dims), to_dt, {"dtype": _dtype_attr(to_dt)}, dims=x.dims)


def signed_order(im, x: Val) -> Val:
    """An unsigned tensor as the signed tensor of its width with the same order."""
    return _flip_top_bit(im, x, x.dtype[1:])


def unsigned_from_order(im, x: Val, dt: str) -> Val:
    """The inverse of signed_order: the unsigned `dt` tensor whose signed order value is x."""
    return _flip_top_bit(im, x, dt)


def signed_index(im, i: Val) -> Val:
    """Unsigned indices as i64 (kernels read indices as signed: a ui32 index of 2^31 or more would
    read as negative, clamped to 0 instead of to the last position). ui64 indices of 2^63 or more
    become the largest i64, as out of range as they were."""
    if not i.dtype.startswith("ui"):
        return i
    r = len(i.dims)
    if i.dtype != "ui64":
        return im.emit("relax.astype", [i], r, "i64", {"dtype": _dtype_attr("i64")}, dims=i.dims)
    s = im.emit("relax.bitcast", [i], r, "i64", {"dtype": _dtype_attr("i64")}, dims=i.dims)
    zero = im.emit("relax.constant", [], 0, "i64", {"value": _splat([], "i64", 0)}, dims=[])
    big = im.emit("relax.constant", [], 0, "i64", {"value": _splat([], "i64", (1 << 63) - 1)}, dims=[])
    neg = im.emit("relax.less", [s, zero], r, "i1", dims=i.dims)
    return im.emit("relax.where", [neg, big, s], r, "i64", dims=i.dims)


_TOTAL_ORDER_INT = {"f16": "i16", "bf16": "i16", "f32": "i32", "f64": "i64"}


def _total_order_key(im, x: Val) -> Val:
    """x's bits as a signed integer that orders as IEEE-754 totalOrder orders x (-NaN < -inf <
    ... < -0.0 < +0.0 < ... < +inf < +NaN, StableHLO's TOTALORDER compare): a negative value's
    magnitude bits flipped, bits ^ ((bits >> (w - 1)) & (2^(w-1) - 1))."""
    it = _TOTAL_ORDER_INT[x.dtype]
    w, r = int(it[1:]), len(x.dims)

    def c(v):
        return im.emit("relax.constant", [], 0, it, {"value": _splat([], it, v)}, dims=[])  # (broadcast by the op)
    bits = im.emit("relax.bitcast", [x], r, it, {"dtype": _dtype_attr(it)}, dims=x.dims)
    sign = im.emit("relax.right_shift_arithmetic", [bits, c(w - 1)], r, it, dims=x.dims)
    flip = im.emit("relax.bitwise_and", [sign, c((1 << (w - 1)) - 1)], r, it, dims=x.dims)
    return im.emit("relax.bitwise_xor", [bits, flip], r, it, dims=x.dims)
