"""Elementwise ops: unary math, binary arithmetic with numpy broadcasting, comparisons, logic,
`where` and `astype`.

Each class carries its scalar semantics (`scalar`) as MLIR text; `relax-legalize` wraps it in a
`linalg.generic` with broadcasting indexing maps (see ops/kernel.py).
"""
from __future__ import annotations

from typing import ClassVar

from relax_mlir.dialect.spec import (DeduceError, OpInfo, OpSpec, TENSOR, attr, operand, relax_op,
                                     result_)
from relax_mlir.dialect.types import DTYPES, FLOAT_DTYPES, TensorType
from relax_mlir.dialect.spec import short_name
from relax_mlir.ops.common import broadcast_shapes, require_float, require_rank, require_same_dtype
from relax_mlir.ops.kernel import Kernel, Legalized, broadcast_map, identity_map, scalar_body


# --- unary -------------------------------------------------------------------------------------

class UnaryOp(OpSpec):
    x = operand(TENSOR)
    result = result_(TENSOR)
    float_only: ClassVar[bool] = True
    bool_result: ClassVar[bool] = False
    bool_only: ClassVar[bool] = False
    # Scalar body: a list of lines using %x (the input) and assigning %r; `{t}` is the dtype.
    scalar: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        if cls.float_only:
            require_float(x, "operand")
        if cls.bool_only and x.dtype != "i1":
            raise DeduceError(f"operand must be i1, got {x.dtype}")
        return [TensorType(x.dims, "i1") if cls.bool_result else x]


def _unary(opname: str, doc: str, scalar: tuple[str, ...], *, float_only=True, bool_result=False,
           bool_only=False, int_scalar: tuple[str, ...] = ()):
    cls = type(opname.split(".")[1].title().replace("_", "") + "Op", (UnaryOp,), {
        "__doc__": doc, "name": opname, "scalar": scalar, "float_only": float_only,
        "bool_result": bool_result, "bool_only": bool_only, "int_scalar": int_scalar,
        "__module__": __name__})
    return relax_op(cls)


ExpOp = _unary("relax.exp", "e**x, elementwise.", ("%r = math.exp %x : {t}",))
LogOp = _unary("relax.log", "Natural logarithm, elementwise.", ("%r = math.log %x : {t}",))
Log1pOp = _unary("relax.log1p", "log(1 + x), elementwise.", ("%r = math.log1p %x : {t}",))
TanhOp = _unary("relax.tanh", "Hyperbolic tangent, elementwise.", ("%r = math.tanh %x : {t}",))
SqrtOp = _unary("relax.sqrt", "Square root, elementwise.", ("%r = math.sqrt %x : {t}",))
RsqrtOp = _unary("relax.rsqrt", "1 / sqrt(x), elementwise.", ("%r = math.rsqrt %x : {t}",))
SinOp = _unary("relax.sin", "Sine, elementwise.", ("%r = math.sin %x : {t}",))
CosOp = _unary("relax.cos", "Cosine, elementwise.", ("%r = math.cos %x : {t}",))
ErfOp = _unary("relax.erf", "Error function, elementwise.", ("%r = math.erf %x : {t}",))
FloorOp = _unary("relax.floor", "Round down, elementwise.", ("%r = math.floor %x : {t}",))
CeilOp = _unary("relax.ceil", "Round up, elementwise.", ("%r = math.ceil %x : {t}",))
NegativeOp = _unary("relax.negative", "-x, elementwise.", ("%r = arith.negf %x : {t}",),
                    float_only=False, int_scalar=("%z = arith.constant 0 : {t}", "%r = arith.subi %z, %x : {t}"))
AbsOp = _unary("relax.abs", "|x|, elementwise.", ("%r = math.absf %x : {t}",),
               float_only=False, int_scalar=("%r = math.absi %x : {t}",))
SignOp = _unary("relax.sign", "Sign of x (-1, 0, 1), elementwise.", (
    "%z = arith.constant 0.0 : {t}", "%o = arith.constant 1.0 : {t}", "%m = arith.constant -1.0 : {t}",
    "%gt = arith.cmpf ogt, %x, %z : {t}", "%lt = arith.cmpf olt, %x, %z : {t}",
    "%a = arith.select %gt, %o, %z : {t}", "%r = arith.select %lt, %m, %a : {t}"), float_only=False,
    int_scalar=("%z = arith.constant 0 : {t}", "%o = arith.constant 1 : {t}", "%m = arith.constant -1 : {t}",
                "%gt = arith.cmpi sgt, %x, %z : {t}", "%lt = arith.cmpi slt, %x, %z : {t}",
                "%a = arith.select %gt, %o, %z : {t}", "%r = arith.select %lt, %m, %a : {t}"))
SigmoidOp = _unary("relax.sigmoid", "1 / (1 + e**-x), elementwise.", (
    "%o = arith.constant 1.0 : {t}", "%n = arith.negf %x : {t}", "%e = math.exp %n : {t}",
    "%d = arith.addf %o, %e : {t}", "%r = arith.divf %o, %d : {t}"))
ReluOp = _unary("relax.relu", "max(x, 0), elementwise.", (
    "%z = arith.constant 0.0 : {t}", "%r = arith.maximumf %x, %z : {t}"), float_only=False,
    int_scalar=("%z = arith.constant 0 : {t}", "%r = arith.maxsi %x, %z : {t}"))
GeluOp = _unary("relax.gelu", "x * Phi(x) (the exact, erf form of GELU), elementwise.", (
    "%h = arith.constant 0.5 : {t}", "%o = arith.constant 1.0 : {t}", "%s = arith.constant 0.70710678118654752 : {t}",
    "%a = arith.mulf %x, %s : {t}", "%e = math.erf %a : {t}", "%b = arith.addf %o, %e : {t}",
    "%c = arith.mulf %x, %h : {t}", "%r = arith.mulf %c, %b : {t}"))
GeluTanhOp = _unary("relax.gelu_tanh", "GELU, tanh approximation, elementwise.", (
    "%h = arith.constant 0.5 : {t}", "%o = arith.constant 1.0 : {t}", "%k = arith.constant 0.7978845608028654 : {t}",
    "%q = arith.constant 0.044715 : {t}", "%x2 = arith.mulf %x, %x : {t}", "%x3 = arith.mulf %x2, %x : {t}",
    "%a = arith.mulf %x3, %q : {t}", "%b = arith.addf %x, %a : {t}", "%c = arith.mulf %b, %k : {t}",
    "%th = math.tanh %c : {t}", "%d = arith.addf %o, %th : {t}", "%e = arith.mulf %x, %h : {t}",
    "%r = arith.mulf %e, %d : {t}"))
SiluOp = _unary("relax.silu", "x * sigmoid(x), elementwise.", (
    "%o = arith.constant 1.0 : {t}", "%n = arith.negf %x : {t}", "%e = math.exp %n : {t}",
    "%d = arith.addf %o, %e : {t}", "%r = arith.divf %x, %d : {t}"))
IsFiniteOp = _unary("relax.isfinite", "True where x is neither inf nor nan, elementwise.", (
    "%a = math.absf %x : {t}", "%inf = arith.constant 0x7F800000 : f32", "%af = arith.extf %a : {t} to f64",
    "%inf64 = arith.extf %inf : f32 to f64", "%r = arith.cmpf olt, %af, %inf64 : f64"), bool_result=True)
LogicalNotOp = _unary("relax.logical_not", "Boolean not, elementwise.", (
    "%o = arith.constant true", "%r = arith.xori %x, %o : i1"), float_only=False, bool_only=True)


# --- binary ------------------------------------------------------------------------------------

class BinaryOp(OpSpec):
    lhs = operand(TENSOR)
    rhs = operand(TENSOR)
    result = result_(TENSOR)
    # Scalar body on %a, %b assigning %r; float and integer variants.
    float_scalar: ClassVar[tuple[str, ...]] = ()
    int_scalar: ClassVar[tuple[str, ...]] = ()
    bool_result: ClassVar[bool] = False
    bool_only: ClassVar[bool] = False

    @classmethod
    def deduce(cls, op: OpInfo):
        a, b = op.tensor(0), op.tensor(1)
        dt = require_same_dtype([a, b], ["lhs", "rhs"])
        if cls.bool_only and dt != "i1":
            raise DeduceError(f"operands must be i1, got {dt}")
        if not cls.int_scalar and dt not in FLOAT_DTYPES:
            raise DeduceError(f"operands must have a floating-point element type, got {dt}")
        if not cls.float_scalar and dt in FLOAT_DTYPES:
            raise DeduceError(f"operands must have an integer element type, got {dt}")
        dims = broadcast_shapes([require_rank(a, "lhs"), require_rank(b, "rhs")], ["lhs", "rhs"], op.facts)
        return [TensorType(dims, "i1" if cls.bool_result else dt)]


def _binary(opname: str, doc: str, float_scalar, int_scalar, *, bool_result=False, bool_only=False):
    cls = type("".join(p.title() for p in opname.split(".")[1].split("_")) + "Op", (BinaryOp,), {
        "__doc__": doc, "name": opname, "float_scalar": float_scalar, "int_scalar": int_scalar,
        "bool_result": bool_result, "bool_only": bool_only, "__module__": __name__})
    return relax_op(cls)


AddOp = _binary("relax.add", "a + b with numpy broadcasting.", ("%r = arith.addf %a, %b : {t}",), ("%r = arith.addi %a, %b : {t}",))
SubtractOp = _binary("relax.subtract", "a - b with numpy broadcasting.", ("%r = arith.subf %a, %b : {t}",), ("%r = arith.subi %a, %b : {t}",))
MultiplyOp = _binary("relax.multiply", "a * b with numpy broadcasting.", ("%r = arith.mulf %a, %b : {t}",), ("%r = arith.muli %a, %b : {t}",))
DivideOp = _binary("relax.divide", "a / b with numpy broadcasting (integers: truncating).", ("%r = arith.divf %a, %b : {t}",), ("%r = arith.divsi %a, %b : {t}",))
PowerOp = _binary("relax.power", "a ** b with numpy broadcasting.", ("%r = math.powf %a, %b : {t}",), ())
MaximumOp = _binary("relax.maximum", "max(a, b) with numpy broadcasting.", ("%r = arith.maximumf %a, %b : {t}",), ("%r = arith.maxsi %a, %b : {t}",))
MinimumOp = _binary("relax.minimum", "min(a, b) with numpy broadcasting.", ("%r = arith.minimumf %a, %b : {t}",), ("%r = arith.minsi %a, %b : {t}",))
RemainderOp = _binary("relax.remainder", "C-style remainder (sign of a) with numpy broadcasting.", ("%r = arith.remf %a, %b : {t}",), ("%r = arith.remsi %a, %b : {t}",))


def _cmp(opname, doc, f, i):
    return _binary(opname, doc, (f"%r = arith.cmpf {f}, %a, %b : {{t}}",), (f"%r = arith.cmpi {i}, %a, %b : {{t}}",), bool_result=True)


EqualOp = _cmp("relax.equal", "a == b (i1) with numpy broadcasting.", "oeq", "eq")
NotEqualOp = _cmp("relax.not_equal", "a != b (i1) with numpy broadcasting.", "une", "ne")
LessOp = _cmp("relax.less", "a < b (i1) with numpy broadcasting.", "olt", "slt")
LessEqualOp = _cmp("relax.less_equal", "a <= b (i1) with numpy broadcasting.", "ole", "sle")
GreaterOp = _cmp("relax.greater", "a > b (i1) with numpy broadcasting.", "ogt", "sgt")
GreaterEqualOp = _cmp("relax.greater_equal", "a >= b (i1) with numpy broadcasting.", "oge", "sge")
LogicalAndOp = _binary("relax.logical_and", "Boolean and (i1) with numpy broadcasting.", (), ("%r = arith.andi %a, %b : {t}",), bool_only=True)
LogicalOrOp = _binary("relax.logical_or", "Boolean or (i1) with numpy broadcasting.", (), ("%r = arith.ori %a, %b : {t}",), bool_only=True)


@relax_op
class WhereOp(OpSpec):
    """cond ? x : y with numpy broadcasting of all three."""

    name = "relax.where"
    condition = operand(TENSOR)
    x = operand(TENSOR)
    y = operand(TENSOR)
    result = result_(TENSOR)

    @classmethod
    def deduce(cls, op: OpInfo):
        c, x, y = op.tensor(0), op.tensor(1), op.tensor(2)
        if c.dtype != "i1":
            raise DeduceError(f"condition must be i1, got {c.dtype}")
        dt = require_same_dtype([x, y], ["x", "y"])
        dims = broadcast_shapes([require_rank(c, "condition"), require_rank(x, "x"), require_rank(y, "y")],
                                ["condition", "x", "y"], op.facts)
        return [TensorType(dims, dt)]


@relax_op
class AstypeOp(OpSpec):
    """Convert the element type. Attribute: dtype (type)."""

    name = "relax.astype"
    x = operand(TENSOR)
    result = result_(TENSOR)
    dtype = attr("type", optional=False, doc="the result element type")

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        dt = str(op.attr("dtype"))
        if dt not in DTYPES:
            raise DeduceError(f"unsupported dtype {dt}")
        return [TensorType(x.dims, dt)]


# --- legalization ------------------------------------------------------------------------------

def _elementwise(op: OpInfo, short: str, operands: list[TensorType], template, renames_of) -> Legalized:
    r = op.result_types[0]
    rank = len(r.dims)
    k = Kernel(short, operands, [r])
    names = {f"%{n}": f"%a{i}" for i, n in enumerate(renames_of)}
    body, res = scalar_body(template, operands[-1].dtype, names)
    ins = [(k.inp(i), t, broadcast_map(t, rank, r)) for i, t in enumerate(operands)]
    g = k.generic(ins, [(k.out(0), r, identity_map(rank))], ["parallel"] * rank, body, [res])
    return Legalized(k, g)


def _unary_legalize(cls, op: OpInfo) -> Legalized:
    x = op.tensor(0)
    tmpl = cls.scalar if (x.dtype in FLOAT_DTYPES or not getattr(cls, "int_scalar", ())) else cls.int_scalar
    return _elementwise(op, short_name(cls.name), [x], tmpl, ["x"])


def _binary_legalize(cls, op: OpInfo) -> Legalized:
    a, b = op.tensor(0), op.tensor(1)
    tmpl = cls.float_scalar if a.dtype in FLOAT_DTYPES else cls.int_scalar
    return _elementwise(op, short_name(cls.name), [a, b], tmpl, ["a", "b"])


UnaryOp.legalize = classmethod(_unary_legalize)
BinaryOp.legalize = classmethod(_binary_legalize)


def _where_legalize(cls, op: OpInfo) -> Legalized:
    return _elementwise(op, "where", [op.tensor(0), op.tensor(1), op.tensor(2)],
                        ("%r = arith.select %c, %x, %y : {t}",), ["c", "x", "y"])


WhereOp.legalize = classmethod(_where_legalize)


def convert_scalar(src: str, dst: str) -> tuple[str, ...]:
    """Scalar conversion %x : src -> %r : dst."""
    fsrc, fdst = src in FLOAT_DTYPES, dst in FLOAT_DTYPES
    width = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
    if src == dst:
        return ("%true = arith.constant true", f"%r = arith.select %true, %x, %x : {src}")
    if fsrc and fdst:
        if width[src] < width[dst] or (src, dst) == ("bf16", "f16") or (src, dst) == ("f16", "bf16"):
            if (src, dst) in (("bf16", "f16"), ("f16", "bf16")):
                return (f"%w = arith.extf %x : {src} to f32", f"%r = arith.truncf %w : f32 to {dst}")
            return (f"%r = arith.extf %x : {src} to {dst}",)
        return (f"%r = arith.truncf %x : {src} to {dst}",)
    if not fsrc and not fdst:
        if width[src] < width[dst]:
            op = "extui" if src == "i1" else "extsi"
            return (f"%r = arith.{op} %x : {src} to {dst}",)
        if dst == "i1":
            return (f"%z = arith.constant 0 : {src}", f"%r = arith.cmpi ne, %x, %z : {src}")
        return (f"%r = arith.trunci %x : {src} to {dst}",)
    if not fsrc and fdst:
        op = "uitofp" if src == "i1" else "sitofp"
        return (f"%r = arith.{op} %x : {src} to {dst}",)
    if dst == "i1":
        return (f"%z = arith.constant 0.0 : {src}", f"%r = arith.cmpf une, %x, %z : {src}")
    return (f"%r = arith.fptosi %x : {src} to {dst}",)


def _astype_legalize(cls, op: OpInfo) -> Legalized:
    x = op.tensor(0)
    return _elementwise(op, "astype", [x], convert_scalar(x.dtype, op.result_types[0].dtype), ["x"])


AstypeOp.legalize = classmethod(_astype_legalize)
