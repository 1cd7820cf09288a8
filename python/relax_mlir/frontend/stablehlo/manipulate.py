"""Shape-manipulating converters: reshape, broadcast_in_dim, transpose, concatenate, and
dot_general as relax.matmul (ops/manipulate.py).
"""
from __future__ import annotations

from relax_mlir.frontend.stablehlo.common import Val, _dtype_attr, _ints, _known_ok, _merge_dims, _res
from relax_mlir.frontend.stablehlo.registry import register_converters
from relax_mlir.shape import const


def _reshape(im, op, ins):
    x = ins[0]
    dims, dt = _res(op)
    if x.known is not None and (len(dims) <= 1 or all(d is not None and d.is_const for d in dims)):
        return Val(None, dt, dims, list(x.known))
    return im.reshape(x, dims)


def _dynamic_reshape(im, op, ins):
    x, shp = ins
    dims, dt = _res(op)
    if shp.known is None:
        raise ValueError("output shape is not a known shape computation")
    dims = _merge_dims(dims, shp.known)
    if x.known is not None and (len(dims) <= 1 or all(d is not None and d.is_const for d in dims)):
        return Val(None, dt, dims, list(x.known))
    return im.reshape(x, dims)


def _broadcast_in_dim_impl(im, op, x: Val, bdims, rdims, dt):
    if x.known is not None and len(rdims) <= 1 and all(d is not None and d.is_const and d.value <= 64 for d in rdims):
        n = rdims[0].value if rdims else 1
        if len(x.known) in (1, n):
            return Val(None, dt, rdims, list(x.known) * (n if len(x.known) == 1 and n != 1 else 1))
    # an operand dim is 1 or the result's: one that is neither provably is the result's (jax
    # broadcasts a symbolic dim only onto itself), checked at run time
    keep = [i for i, d in enumerate(x.dims) if not (d is not None and d.is_const and d.value == 1)]
    if keep and len(bdims) == len(x.dims):
        x = im.align_axes(Val(None, dt, list(rdims)), [bdims[i] for i in keep], x, keep, op.operation.name)
    order = sorted(range(len(bdims)), key=lambda i: bdims[i])
    x = im.permute(x, order)
    bsorted = [bdims[i] for i in order]
    inter = [const(1)] * len(rdims)
    for i, ax in enumerate(bsorted):
        inter[ax] = x.dims[i]
    x = im.reshape(x, inter)
    return im.broadcast(x, rdims)


def _broadcast_in_dim(im, op, ins):
    (x,) = ins
    rdims, dt = _res(op)
    bdims = _ints(op.attributes["broadcast_dimensions"])
    return _broadcast_in_dim_impl(im, op, x, bdims, rdims, dt)


def _dynamic_broadcast_in_dim(im, op, ins):
    x, shp = ins[0], ins[1]
    rdims, dt = _res(op)
    if shp.known is None:
        raise ValueError("output_dimensions is not a known shape computation")
    rdims = _merge_dims(rdims, shp.known)
    bdims = _ints(op.attributes["broadcast_dimensions"])
    return _broadcast_in_dim_impl(im, op, x, bdims, rdims, dt)


def _transpose(im, op, ins):
    (x,) = ins
    perm = _ints(op.attributes["permutation"])
    return im.permute(x, perm)


def _concatenate(im, op, ins):
    rdims, dt = _res(op)
    axis = _ints(op.attributes["dimension"])[0]
    if _known_ok(ins) and (len(rdims) == 1 or axis == 0 and all(d is not None for d in rdims)):
        k = []
        for v in ins:
            k.extend(v.known)
        return Val(None, dt, rdims, k)
    others = [i for i in range(len(rdims)) if i != axis]
    ins = [ins[0]] + [im.align_axes(ins[0], others, v, others, "stablehlo.concatenate") for v in ins[1:]]
    dims = list(ins[0].dims)
    tot = const(0)
    for v in ins:
        tot = None if (tot is None or v.dims[axis] is None) else tot + v.dims[axis]
    dims[axis] = tot
    dims = _merge_dims(rdims, dims, *[v.dims for v in ins])
    if len(ins) == 1:
        return ins[0]
    return im.emit("relax_v.concat", ins, len(rdims), dt, {"axis": axis}, dims=dims)


_FLOAT_WIDTH = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}
_HALF = ("f16", "bf16")
_INT_WIDTH = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
_UINT_WIDTH = {"ui8": 8, "ui16": 16, "ui32": 32, "ui64": 64}


def _dot_operands(im, a, b, dt):
    """The operands of a dot_general or convolution converted to the type the products are
    computed in, and that type: the result type where it is at least as wide as both operands
    (bf16 x bf16 -> f32 by `preferred_element_type`, i8 x i8 -> i32: exact conversions, products
    accumulated there, as XLA's CPU backend does), else the widest operand type (rounded to the
    result at the end). f16 and bf16 products are computed in f32 (XLA's CPU backend upcasts
    them): exact there, each multiply-add an f32 FMA of the f32 kernels, so that a product that
    overflows f32 next to an infinite partial sum keeps XLA's infinity (1e30 * -1e30 + inf = inf;
    rounding the product first gives inf - inf = NaN). Floats and integers do not mix, nor signed
    and unsigned integers (jax converts them to one type first); ui8 x ui8 -> ui32 widens both
    operands (zero extension) and multiplies there."""
    if a.dtype == b.dtype == dt and dt not in _HALF:
        return a, b, dt
    for table in (_FLOAT_WIDTH, _INT_WIDTH, _UINT_WIDTH):
        if a.dtype in table and b.dtype in table and dt in table:
            if (a.dtype, b.dtype) in (("f16", "bf16"), ("bf16", "f16")):
                break
            wide = max((a.dtype, b.dtype, dt), key=lambda t: table[t])
            ct = dt if table[dt] >= table[wide] else wide
            if ct in _HALF and {a.dtype, b.dtype} - {ct}:
                break
            ct = "f32" if ct in _HALF else ct

            def up(x):  # (internal: a bf16 operand computed by its producer stays rounded, as XLA's upcast)
                attrs = {"dtype": _dtype_attr(ct), **({"internal": True} if x.dtype in _HALF else {})}
                return x if x.dtype == ct else im.emit("relax.astype", [x], len(x.dims), ct, attrs, dims=x.dims)
            return up(a), up(b), ct
    # Operands of another family than the result (ui8 x ui8 -> i32, i8 x i8 -> f32, i1 x i1 -> i32:
    # `preferred_element_type` of quantized products): XLA converts each operand to the result
    # type and computes there; an f16 / bf16 result computes in f32 as above.
    every = {**_FLOAT_WIDTH, **_INT_WIDTH, **_UINT_WIDTH, "i1": 1}
    if a.dtype in every and b.dtype in every and dt in every \
            and (a.dtype, b.dtype) not in (("f16", "bf16"), ("bf16", "f16")):
        ct = "f32" if dt in _HALF else dt

        def conv(x):
            if x.dtype == ct:
                return x
            if dt in _HALF and x.dtype != dt:  # rounded to the result type first, as XLA's convert
                x = im.emit("relax.astype", [x], len(x.dims), dt, {"dtype": _dtype_attr(dt)}, dims=x.dims)
            return im.emit("relax.astype", [x], len(x.dims), ct, {"dtype": _dtype_attr(ct)}, dims=x.dims)
        return conv(a), conv(b), ct
    raise ValueError(f"dot_general of {a.dtype} x {b.dtype} -> {dt} (mixed element types) is not supported")


def _dot_general(im, op, ins):
    a, b = ins
    rdims, dt = _res(op)
    from jaxlib.mlir.dialects import stablehlo as hlo

    dn = hlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
    lb, rb = list(dn.lhs_batching_dimensions), list(dn.rhs_batching_dimensions)
    lc, rc = list(dn.lhs_contracting_dimensions), list(dn.rhs_contracting_dimensions)
    a, b, ct = _dot_operands(im, a, b, dt)
    b = im.align_axes(a, lb + lc, b, rb + rc, "stablehlo.dot_general")
    ra, rb_ = len(a.dims), len(b.dims)
    lf = [i for i in range(ra) if i not in lb and i not in lc]
    rf = [i for i in range(rb_) if i not in rb and i not in rc]
    from relax_mlir.ops.common import product
    ap = im.permute(a, lb + lf + lc)
    bp = im.permute(b, rb + rc + rf)
    batch = [a.dims[i] for i in lb]
    m = product([a.dims[i] for i in lf])
    k = product([a.dims[i] for i in lc])
    n = product([b.dims[i] for i in rf])
    a3 = im.reshape(ap, batch + [m, k])
    b3 = im.reshape(bp, batch + [k, n])
    out = im.emit("relax.matmul", [a3, b3], len(batch) + 2, ct, dims=batch + [m, n])
    if ct != dt:
        out = im.emit("relax.astype", [out], len(batch) + 2, dt, {"dtype": _dtype_attr(dt)}, dims=batch + [m, n])
    final = batch + [a.dims[i] for i in lf] + [b.dims[i] for i in rf]
    final = _merge_dims(final, rdims)
    return im.reshape(out, final)


CONVERTERS = register_converters({
    "stablehlo.broadcast_in_dim": _broadcast_in_dim,
    "stablehlo.dynamic_broadcast_in_dim": _dynamic_broadcast_in_dim,
    "stablehlo.reshape": _reshape,
    "stablehlo.dynamic_reshape": _dynamic_reshape,
    "stablehlo.transpose": _transpose,
    "stablehlo.dot_general": _dot_general,
    "stablehlo.concatenate": _concatenate,
})
