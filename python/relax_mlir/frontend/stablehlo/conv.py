"""convolution / dynamic_conv -> relax.conv in the canonical layout [b, f, spatial...] x
[o, i, spatial...], with permute_dims around it (ops/conv.py).
"""
from __future__ import annotations

from relax_mlir.frontend.stablehlo.common import _bools, _dtype_attr, _ints, _merge_dims, _res
from relax_mlir.frontend.stablehlo.manipulate import _dot_operands
from relax_mlir.frontend.stablehlo.registry import register_converters
from relax_mlir.ops.window import window_out
from relax_mlir.shape import const, floordiv


def _convolution(im, op, ins):
    from jaxlib.mlir.dialects import stablehlo as hlo

    lhs, rhs = ins[0], ins[1]
    rdims, dt = _res(op)
    try:  # i8 x i8 -> i32, bf16 x bf16 -> f32 (preferred_element_type): as a dot_general's operands
        lhs, rhs, ct = _dot_operands(im, lhs, rhs, dt)
    except ValueError:
        raise ValueError(f"mixed element types in convolution ({lhs.dtype} x {rhs.dtype} -> {dt})") from None
    a = op.attributes
    dn = hlo.ConvDimensionNumbers(a["dimension_numbers"])
    ib, if_, isp = dn.input_batch_dimension, dn.input_feature_dimension, list(dn.input_spatial_dimensions)
    ki, ko, ksp = dn.kernel_input_feature_dimension, dn.kernel_output_feature_dimension, \
        list(dn.kernel_spatial_dimensions)
    ob, of, osp = dn.output_batch_dimension, dn.output_feature_dimension, list(dn.output_spatial_dimensions)
    ns = len(isp)

    def ints(name, default):
        return _ints(a[name]) if name in a else [default] * ns

    if "window_reversal" in a and any(_bools(a["window_reversal"])):
        raise ValueError("window_reversal is not supported")
    if op.operation.name == "stablehlo.dynamic_conv":
        if ins[2].known is None:
            raise ValueError("the padding of dynamic_conv is not a known shape computation")
        pads = list(ins[2].known)
    else:
        pads = [const(p) for p in (_ints(a["padding"]) if "padding" in a else [0] * (2 * ns))]
    fgc = _ints(a["feature_group_count"])[0] if "feature_group_count" in a else 1
    bgc = _ints(a["batch_group_count"])[0] if "batch_group_count" in a else 1
    x = im.permute(lhs, [ib, if_] + isp)
    w = im.permute(rhs, [ko, ki] + ksp)
    canon = [None] * (ns + 2)
    order = [ob, of] + osp
    for j, pos in enumerate(order):
        canon[j] = rdims[pos]
    strides, ldil, rdil = ints("window_strides", 1), ints("lhs_dilation", 1), ints("rhs_dilation", 1)
    # The result's symbolic dims now (relax.conv deduces the same later): StableHLO's type has '?'
    # for a symbolic size, and a converter reading them (a dot_general after the conv) needs them
    facts = im.int_facts()
    b, o = x.dims[0], w.dims[0]
    deduced = [b if bgc == 1 or b is None else floordiv(b, bgc), o]
    deduced += [None if n is None or k is None else window_out(n, pads[2 * j], pads[2 * j + 1], ldil[j], k, rdil[j],
                                                               strides[j], facts)
                for j, (n, k) in enumerate(zip(x.dims[2:], w.dims[2:]))]
    canon = _merge_dims(canon, deduced)
    attrs = {"strides": strides, "lhs_dilation": ldil, "rhs_dilation": rdil, "pad_lo": pads[0::2],
             "pad_hi": pads[1::2], "feature_group_count": fgc, "batch_group_count": bgc}
    c = im.emit("relax.conv", [x, w], ns + 2, ct, attrs, dims=canon)
    if ct != dt:
        c = im.emit("relax.astype", [c], ns + 2, dt, {"dtype": _dtype_attr(dt)}, dims=canon)
    inv = [order.index(j) for j in range(ns + 2)]
    return im.permute(c, inv)


CONVERTERS = register_converters({
    "stablehlo.convolution": _convolution,
    "stablehlo.dynamic_conv": _convolution,
})
