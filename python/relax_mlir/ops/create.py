"""Tensor creation: constant, full, zeros, ones, arange."""
from __future__ import annotations

from mlir import ir

from relax_mlir.dialect.spec import DeduceError, OpInfo, OpSpec, TENSOR, attr, operand, relax_op, result_
from relax_mlir.dialect.types import DTYPES, FLOAT_DTYPES, TensorType, as_dim
from relax_mlir.ops.common import ZERO
from relax_mlir.ops.kernel import Kernel, Legalized, identity_map, one_literal, scalar_body, zero_literal
from relax_mlir.shape import ceildiv, max_


@relax_op
class ConstantOp(OpSpec):
    """A constant tensor. Attribute: value (dense elements attribute)."""

    name = "relax.constant"
    result = result_(TENSOR)
    value = attr("any", optional=False, doc="dense<...> : tensor<...>")

    @classmethod
    def deduce(cls, op: OpInfo):
        v = op.op.attributes["value"]
        if not isinstance(v, ir.DenseElementsAttr):
            raise DeduceError("'value' must be a dense elements attribute")
        t = ir.RankedTensorType(ir.DenseElementsAttr(v).type)
        dt = str(t.element_type)
        if dt not in DTYPES:
            raise DeduceError(f"unsupported element type {dt}")
        if dt.startswith("ui"):  # kernels and lowered constants are signless (ops/bits.py)
            raise DeduceError(f"an unsigned constant ({dt}) must be written signless, then relax.bitcast")
        return [TensorType.of(list(t.shape), dt)]


def _dtype_attr(op: OpInfo, default=None) -> str:
    dt = op.attr("dtype")
    dt = default if dt is None else str(dt)
    if dt not in DTYPES:
        raise DeduceError(f"unsupported dtype {dt}")
    return dt


def _shape(op: OpInfo):
    from relax_mlir.ops.manipulate import _exprs, _shape_attr
    return tuple(_exprs(_shape_attr(op), "shape"))


@relax_op
class FullOp(OpSpec):
    """A tensor of `shape` filled with a rank-0 value. Attributes: shape, dtype (default: the fill's)."""

    name = "relax.full"
    fill_value = operand(TENSOR)
    result = result_(TENSOR)
    shape = attr("array", optional=False)
    dtype = attr("type")

    @classmethod
    def deduce(cls, op: OpInfo):
        f = op.tensor(0)
        if f.dims != ():
            raise DeduceError(f"fill value must be a rank-0 tensor, got rank {f.rank}")
        return [TensorType(_shape(op), _dtype_attr(op, f.dtype))]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        f, r = op.tensor(0), op.result_types[0]
        k = Kernel("full", [f], [r])
        v = k.fresh("v")
        k.emit(f"{v} = tensor.extract {k.inp(0)}[] : {k.ty(f)}")
        if f.dtype != r.dtype:
            from relax_mlir.ops.elementwise import convert_scalar
            lines, res = scalar_body(convert_scalar(f.dtype, r.dtype), f.dtype, {"%x": v})
            for l in lines:
                k.emit(l)
            v = res
        g = k.fresh("fl")
        k.emit(f"{g} = linalg.fill ins({v} : {r.dtype}) outs({k.out(0)} : {k.ty(r)}) -> {k.ty(r)}")
        return Legalized(k, [g])


@relax_op
class ZerosOp(OpSpec):
    """A tensor of zeros. Attributes: shape, dtype."""

    name = "relax.zeros"
    result = result_(TENSOR)
    shape = attr("array", optional=False)
    dtype = attr("type", optional=False)
    fill: float = 0.0

    @classmethod
    def deduce(cls, op: OpInfo):
        return [TensorType(_shape(op), _dtype_attr(op))]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        r = op.result_types[0]
        k = Kernel(cls.name.split(".")[1], [], [r])
        lit = one_literal(r.dtype) if cls.fill == 1.0 else zero_literal(r.dtype)
        return Legalized(k, [k.fill(lit, k.out(0), r)])


@relax_op
class OnesOp(ZerosOp):
    """A tensor of ones. Attributes: shape, dtype."""

    name = "relax.ones"
    fill: float = 1.0


@relax_op
class ArangeOp(OpSpec):
    """[start, start + step, ...) below end. Attributes: start (default 0), end, step (default 1),
    each an int or an expression string; dtype."""

    name = "relax.arange"
    result = result_(TENSOR)
    end = attr("any", optional=False)
    start = attr("any")
    step = attr("int")
    dtype = attr("type", optional=False)

    @classmethod
    def deduce(cls, op: OpInfo):
        start, end = as_dim(op.attr("start", 0)), as_dim(op.attr("end"))
        step = op.attr("step", 1)
        if start is None or end is None:
            raise DeduceError("start and end must be known")
        if not isinstance(step, int) or step == 0:
            raise DeduceError(f"step must be a non-zero integer, got {step}")
        span = end - start if step > 0 else start - end
        n = ceildiv(span, abs(step)) if abs(step) != 1 else span
        if not op.facts.prove_ge(n, ZERO):
            n = max_(n, ZERO)
        return [TensorType((n,), _dtype_attr(op))]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        r = op.result_types[0]
        start = as_dim(op.attr("start", 0))
        step = op.attr("step", 1)
        k = Kernel("arange", [], [r])
        syms = []
        if start.is_const:
            st = f"%st = arith.constant {start.value} : index"
        else:
            syms.append(start)
            k.n_syms = 1
            st = None
        body = ["%i = linalg.index 0 : index", f"%step = arith.constant {step} : index"]
        if st:
            body.append(st)
        s_name = "%st" if st else k.sym(0)
        body += ["%m = arith.muli %i, %step : index", f"%v = arith.addi {s_name}, %m : index"]
        # Cast straight to the element type (through i32 for f16/f32, whose integers are exact only
        # far below 2^31 anyway): no i64 in the kernel, which SPIR-V without Int64 cannot take.
        if r.dtype in FLOAT_DTYPES:
            wide = "i64" if r.dtype == "f64" else "i32"
            body += [f"%w = arith.index_cast %v : index to {wide}", f"%y = arith.sitofp %w : {wide} to {r.dtype}"]
        else:
            body.append(f"%y = arith.index_cast %v : index to {r.dtype}")
        g = k.generic([], [(k.out(0), r, identity_map(1))], ["parallel"], body, ["%y"])
        return Legalized(k, g, syms)
