"""`relax-conv-to-matmul`: a convolution becomes the product of its input's windows with its kernel.

Graph level, first in the CPU pipeline (before `relax-canonicalize`, which folds the transposes
it adds into the importer's). A `relax.conv` of f32 operands with one feature and one batch
group and a static window, in the canonical layout lhs [B, C, S...], rhs [O, C, K...], becomes

    xl = permute_dims(lhs, [0, 2.., 1])             # [B, S..., C]: channels last
    p  = window_patches(xl) {window = K..., ...}    # [B, Q..., K..., C]   (im2col; absent for a
    a  = reshape(p, [B * Q..., K... * C])           #  1x1 window, stride 1, unpadded)
    w  = reshape(permute_dims(rhs, [2.., 1, 0]), [K... * C, O])
    y  = permute_dims(reshape(matmul(a, w), [B, Q..., O]), [0, n + 1, 1..])   # [B, O, Q...]

so the convolution runs as the register-blocked matmul kernel (or BLAS through
`relax-dispatch-library`, which runs later) instead of the direct loop nest: 4-16x faster at
realistic widths here (bench/conv.py; jax's NHWC convolutions import with a transpose on each
side, which canonicalization cancels against these). The rows hold each window's positions in
order, channels innermost, so each output sums its products in XLA's order (window positions,
then channels, each step a fused multiply-add), as the direct kernel does. Other convolutions
(groups, windows of more than MAX_WINDOW positions, f16/bf16 left to the kernel's own f32
accumulation, integers) keep the direct kernel. The rows are a temporary of up to MAX_WINDOW
times the input (9 times for a 3x3 window at stride 1), as an im2col convolution has.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mlir import ir

from relax_mlir.dialect.build import array_attr, make, matmul, permute, reshape
from relax_mlir.dialect.types import TensorType, view
from relax_mlir.ops.common import product
from relax_mlir.passes import ModulePass
from relax_mlir.transforms.infer_shapes import check_module, graph_ops_named

_CONV_ATTRS = ("strides", "lhs_dilation", "rhs_dilation", "pad_lo", "pad_hi")
# The rows hold each input element once per window position that reads it: up to this many
# positions (8 x 8) the copy is worth it; a longer window (a 1-D convolution over 128 positions)
# keeps the direct kernel rather than a temporary 128 times its input.
MAX_WINDOW = 64


def _int_attr(op: ir.Operation, name: str, default: int) -> int:
    return ir.IntegerAttr(op.attributes[name]).value if name in op.attributes else default


def _window(op: ir.Operation) -> list[int] | None:
    """The static window sizes of a convertible convolution, else None."""
    lhs, rhs, r = (view(v.type) for v in (op.operands[0], op.operands[1], op.results[0]))
    if not all(isinstance(t, TensorType) and t.known for t in (lhs, rhs, r)):
        return None
    if lhs.dtype != "f32" or len(lhs.dims) < 3:
        return None
    if _int_attr(op, "feature_group_count", 1) != 1 or _int_attr(op, "batch_group_count", 1) != 1:
        return None
    if not all(d.is_const for d in rhs.dims[1:]):  # the channels and the window: the product's K
        return None
    window = [d.value for d in rhs.dims[2:]]
    size = 1
    for w in window:
        size *= w
    return window if size <= MAX_WINDOW else None


def _is_plain(op: ir.Operation, window: list[int]) -> bool:
    """A 1x1 window read at every position: the windows are the channels-last input itself."""
    if any(w != 1 for w in window):
        return False
    for name in ("strides", "lhs_dilation", "rhs_dilation"):
        if name in op.attributes and any(ir.IntegerAttr(a).value != 1 for a in ir.ArrayAttr(op.attributes[name])):
            return False
    for name in ("pad_lo", "pad_hi"):
        if name in op.attributes and any(not (isinstance(a, ir.IntegerAttr) and a.value == 0)
                                         for a in (ir.ArrayAttr(op.attributes[name]))):
            return False
    return True


def rewrite(op: ir.Operation, window: list[int]) -> None:
    lhs, rhs = op.operands[0], op.operands[1]
    lt, rt, r = view(lhs.type), view(rhs.type), view(op.results[0].type)
    ns, dt = len(window), lt.dtype
    b, q, o, c = r.dims[0], list(r.dims[2:]), r.dims[1], rt.dims[1]
    with ir.InsertionPoint(op), op.location:
        xl = permute(lhs, [0, *range(2, 2 + ns), 1])
        if _is_plain(op, window):
            rows = xl
        else:
            attrs = {n: op.attributes[n] for n in _CONV_ATTRS if n in op.attributes}
            attrs["window"] = array_attr(window)
            rows = make("relax.window_patches", [xl], [b, *q, *(rt.dims[2:]), c], dt, attrs)
        kc = product([*rt.dims[2:], c])
        a = reshape(rows, [product([b, *q]), kc])
        w = reshape(permute(rhs, [*range(2, 2 + ns), 1, 0]), [kc, o])
        y = permute(reshape(matmul(a, w), [b, *q, o]), [0, ns + 1, *range(1, ns + 1)])
    op.results[0].replace_all_uses_with(y)
    op.erase()


@dataclass(frozen=True)
class ConvToMatmulPass(ModulePass):
    """Convolutions (f32, one group, static window) as window_patches (im2col) and a matmul."""

    name: ClassVar[str] = "relax-conv-to-matmul"

    def run(self, module: ir.Operation) -> None:
        check_module(module, infer=True)
        for op in graph_ops_named(module, ("relax.conv",)):
            window = _window(op)
            if window is not None:
                rewrite(op, window)


PASSES = (ConvToMatmulPass,)
