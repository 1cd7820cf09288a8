"""Structural ops: shape_of, match_cast, dataflow, prim_value."""
from __future__ import annotations

from relax_mlir.dialect.spec import (ANY, PRIM, SHAPE, TENSOR, DeduceError, OpInfo, OpSpec, attr, operand,
                                     region, relax_op, result_)
from relax_mlir.dialect.types import PrimType, ShapeType, TensorType, as_dim
from relax_mlir.ops.common import dims_differ, fmt


@relax_op
class ShapeOfOp(OpSpec):
    """The shape of a tensor as a `!relax.shape` value."""

    name = "relax.shape_of"
    x = operand(TENSOR)
    result = result_(SHAPE)

    @classmethod
    def deduce(cls, op: OpInfo):
        return [ShapeType(op.tensor(0).dims)]


@relax_op
class PrimValueOp(OpSpec):
    """A symbolic integer as a value. Attribute: value (int or expression string)."""

    name = "relax.prim_value"
    result = result_(PRIM)
    value = attr("any", optional=False)

    @classmethod
    def deduce(cls, op: OpInfo):
        return [PrimType(as_dim(op.attr("value")))]


@relax_op
class MatchCastOp(OpSpec):
    """Refine a value's type to the result type (the pattern), checked at run time. New symbols
    in the pattern are bound from the value's actual dims; known ones are asserted equal."""

    name = "relax.match_cast"
    x = operand(ANY)
    result = result_(ANY)
    results_are_declared = True

    @classmethod
    def deduce(cls, op: OpInfo):
        src, pat = op.operand_types[0], op.result_types[0]
        if not isinstance(src, TensorType) or not isinstance(pat, TensorType):
            raise DeduceError(f"casts tensors only, got {src} to {pat}")
        if src.dtype != pat.dtype:
            raise DeduceError(f"can never succeed: element type {src.dtype} vs {pat.dtype}")
        if pat.dims is None:
            raise DeduceError("the pattern must have a known rank")
        if src.dims is not None:
            if len(src.dims) != len(pat.dims):
                raise DeduceError(f"can never succeed: rank {len(src.dims)} vs {len(pat.dims)}")
            for i, (a, b) in enumerate(zip(src.dims, pat.dims)):
                if b is not None and b.is_const and dims_differ(a, b, op.facts):
                    raise DeduceError(f"can never succeed: dim {i} is {fmt(a)}, the pattern says {fmt(b)}")
        return [pat]


@relax_op
class DataflowOp(OpSpec):
    """A side-effect-free block of bindings; its terminator (`gpu.yield`, since an IRDL op cannot
    terminate a region in MLIR 22) lists the values the block exports."""

    name = "relax_v.dataflow"
    results = result_(ANY, variadic=True)
    body = region()
    results_are_declared = True
