"""Value-creating converters: constant, iota, dynamic_iota (ops/create.py).
"""
from __future__ import annotations

from relax_mlir.frontend.stablehlo.bits import _unsigned_constant
from relax_mlir.frontend.stablehlo.common import (Val, _DTYPES, _FLOATS, _dense_from_jax, _dtype_attr, _ints,
                                                  _merge_dims, _res)
from relax_mlir.frontend.stablehlo.errors import UnsupportedOpError
from relax_mlir.frontend.stablehlo.importer import Importer
from relax_mlir.frontend.stablehlo.registry import register_converters
from relax_mlir.shape import const


def _constant(im: Importer, op, ins):
    from jaxlib.mlir import ir as jir

    attr = op.attributes["value"]
    dims, dt = _res(op)
    if dt not in _DTYPES:
        raise UnsupportedOpError(op.operation.name, str(op.location), f"element type {dt}")
    if dt.startswith("i") and dt != "i1" and len(dims) <= 1 and isinstance(attr, jir.DenseIntElementsAttr):
        n = dims[0].value if dims else 1
        if n <= 64:
            vals = [int(attr.get_splat_value().value)] * n if attr.is_splat else \
                [int(attr[i]) for i in range(len(attr))]
            if len(vals) == n:
                return Val(None, dt, dims, [const(x) for x in vals])
    if dt.startswith("ui"):
        return _unsigned_constant(im, attr, dims, dt)
    value = _dense_from_jax(attr, [d.value for d in dims], dt)
    return im.emit("relax.constant", [], len(dims), dt, {"value": value}, dims=dims)


def _iota_impl(im, rdims, dt, axis):
    n = rdims[axis]
    if n is None:
        raise ValueError("iota dim is unknown")
    if dt in _FLOATS:
        r = im.emit("relax.arange", [], 1, "i64", {"end": n, "dtype": _dtype_attr("i64")}, dims=[n])
        r = im.emit("relax.astype", [r], 1, dt, {"dtype": _dtype_attr(dt)}, dims=[n])
    else:
        r = im.emit("relax.arange", [], 1, dt, {"end": n, "dtype": _dtype_attr(dt)}, dims=[n])
    inter = [const(1)] * len(rdims)
    inter[axis] = n
    r = im.reshape(r, inter)
    return im.broadcast(r, rdims)


def _iota(im, op, ins):
    rdims, dt = _res(op)
    axis = _ints(op.attributes["iota_dimension"])[0]
    if len(rdims) == 1 and rdims[0] is not None and rdims[0].is_const and dt.startswith("i") and dt != "i1" \
            and rdims[0].value <= 64:
        return Val(None, dt, rdims, [const(i) for i in range(rdims[0].value)])
    return _iota_impl(im, rdims, dt, axis)


def _dynamic_iota(im, op, ins):
    (shp,) = ins
    rdims, dt = _res(op)
    if shp.known is None:
        raise ValueError("output_shape is not a known shape computation")
    rdims = _merge_dims(rdims, shp.known)
    axis = _ints(op.attributes["iota_dimension"])[0]
    return _iota_impl(im, rdims, dt, axis)


CONVERTERS = register_converters({
    "stablehlo.constant": _constant,
    "stablehlo.iota": _iota,
    "stablehlo.dynamic_iota": _dynamic_iota,
})
