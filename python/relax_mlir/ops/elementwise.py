"""Elementwise ops: unary math, binary arithmetic with numpy broadcasting, comparisons, logic,
`where` and `astype`.

Each class carries its scalar semantics (`scalar`) as MLIR text; `relax-legalize` wraps it in a
`linalg.generic` with broadcasting indexing maps (see ops/kernel.py).
"""
from __future__ import annotations

from typing import ClassVar

from mlir import ir

from relax_mlir.dialect.spec import (OPS, DeduceError, OpInfo, OpSpec, TENSOR, attr, attr_dict, operand,
                                     relax_op, result_)
from relax_mlir.dialect.types import DTYPES, FLOAT_DTYPES, TensorType, is_unsigned, signless, view
from relax_mlir.dialect.spec import short_name
from relax_mlir.ops.common import (broadcast_shapes, require_float, require_rank, require_same_dtype,
                                   splat_constant, splat_source)
from relax_mlir.patterns import RewritePattern
from relax_mlir.shape import Facts
from relax_mlir.ops.int_scalars import convert_unsigned, int_power_scalar
from relax_mlir.ops.kernel import (Kernel, Legalized, broadcast_map, highest_literal, identity_map,
                                   scalar_body, via_f32)


# --- the kernel of every elementwise op -------------------------------------------------------

def _elementwise(op: OpInfo, short: str, operands: list[TensorType], template, renames_of) -> Legalized:
    """One parallel linalg.generic over the result, the operands broadcast into it; `template` is the
    scalar body with operand i named %<renames_of[i]>."""
    r = op.result_types[0]
    rank = len(r.dims)
    k = Kernel(short, operands, [r])
    names = {f"%{n}": f"%a{i}" for i, n in enumerate(renames_of)}
    body, res = scalar_body(template, signless(operands[-1].dtype), names)
    ins = [(k.inp(i), t, broadcast_map(t, rank, r)) for i, t in enumerate(operands)]
    g = k.generic(ins, [(k.out(0), r, identity_map(rank))], ["parallel"] * rank, body, [res])
    return Legalized(k, g)


# --- unary -------------------------------------------------------------------------------------
# Scalar semantics follow StableHLO/XLA (and numpy where StableHLO has no opinion) on every target.
# Integer templates avoid the ops whose meaning a Vulkan driver may take from the *signedness* of
# the SPIR-V type (MLIR emits signless ints as `OpTypeInt 32 0`, which wgpu's naga reads as u32):
# signed max/min/abs/div/rem and int<->float conversions are spelled with compares, selects and
# unsigned magnitudes, which every target reads alike (LLVM folds them back to smax, abs, ...).

class UnaryOp(OpSpec):
    """Base of the unary elementwise ops: the result has x's shape (i1 where `bool_result`); the
    kernel applies the scalar template for x's dtype to each element."""

    x = operand(TENSOR)
    result = result_(TENSOR)
    float_only: ClassVar[bool] = True
    bool_result: ClassVar[bool] = False
    bool_only: ClassVar[bool] = False
    # Scalar body: a list of lines using %x (the input) and assigning %r; `{t}` is the dtype.
    scalar: ClassVar[tuple[str, ...]] = ()
    int_scalar: ClassVar[tuple[str, ...]] = ()
    # On i1 (bool); None: the op is not defined on i1 (StableHLO and numpy reject it too).
    bool_scalar: ClassVar[tuple[str, ...] | None] = None
    # Unsigned integers (ui8..ui64): `unsigned_ok` ops run int_scalar on the bits (sign-agnostic),
    # others need a `uint_scalar`; neither: the op is not defined on unsigned types.
    unsigned_ok: ClassVar[bool] = False
    uint_scalar: ClassVar[tuple[str, ...]] = ()
    # Exact in any float type (negation, floor, ...). Every other op on f16 / bf16 is computed in
    # f32 and rounded once, as XLA computes them (jax.jit and op by op): in the half type each step
    # of the template rounded (f16 rsqrt as a square root, then a division: 1 ulp off for a fifth
    # of the inputs; log1p likewise), enough to turn -0.9995 into -1.0 ahead of a power (fuzz seed
    # 2413417: NaN in jax, -1 here).
    exact: ClassVar[bool] = False

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        if cls.float_only:
            require_float(x, "operand")
        if is_unsigned(x.dtype) and not (cls.unsigned_ok or cls.uint_scalar):
            raise DeduceError(f"{short_name(cls.name)} is not defined on unsigned {x.dtype}")
        if cls.bool_only and x.dtype != "i1":
            raise DeduceError(f"operand must be i1, got {x.dtype}")
        if x.dtype == "i1" and not cls.bool_only and cls.bool_scalar is None:
            raise DeduceError(f"{short_name(cls.name)} is not defined on i1 (booleans); "
                              f"cast with relax.astype first")
        return [TensorType(x.dims, "i1") if cls.bool_result else x]

    @classmethod
    def template(cls, dtype: str) -> tuple[str, ...]:
        if dtype in FLOAT_DTYPES:
            return cls.scalar if cls.exact or cls.bool_result else via_f32(dtype, cls.scalar, ("%x",))
        if dtype == "i1" and cls.bool_scalar is not None:
            return cls.bool_scalar
        if is_unsigned(dtype) and cls.uint_scalar:
            return cls.uint_scalar
        return cls.int_scalar or cls.scalar

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x = op.tensor(0)
        tmpl = cls.template(x.dtype)
        if x.dtype in FLOAT_DTYPES:
            tmpl = tuple(line.replace("{inf}", highest_literal(x.dtype)) for line in tmpl)
        return _elementwise(op, short_name(cls.name), [x], tmpl, ["x"])


_IDENTITY = ("%true = arith.constant true", "%r = arith.select %true, %x, %x : {t}")


@relax_op
class ExpOp(UnaryOp):
    """e**x, elementwise."""

    name = "relax.exp"
    scalar = ("%r = math.exp %x : {t}",)


@relax_op
class LogOp(UnaryOp):
    """Natural logarithm, elementwise."""

    name = "relax.log"
    scalar = ("%r = math.log %x : {t}",)


@relax_op
class Log1pOp(UnaryOp):
    """log(1 + x), elementwise."""

    name = "relax.log1p"
    # Accurate near 0 (Kahan): u = 1 + x; u == 1 -> x (keeps -0); u == inf -> inf;
    # else log(u) * (x / (u - 1)). (math.log1p's CPU expansion was log(1 + x): 5e-5 off at 1e-3.)
    scalar = (
        "%o = arith.constant 1.0 : {t}", "%inf = arith.constant {inf} : {t}", "%u = arith.addf %o, %x : {t}",
        "%l = math.log %u : {t}", "%d = arith.subf %u, %o : {t}", "%q = arith.divf %x, %d : {t}",
        "%k = arith.mulf %l, %q : {t}", "%e = arith.cmpf oeq, %u, %o : {t}", "%i = arith.cmpf oeq, %u, %inf : {t}",
        "%k2 = arith.select %i, %u, %k : {t}", "%r = arith.select %e, %x, %k2 : {t}")


@relax_op
class TanhOp(UnaryOp):
    """Hyperbolic tangent, elementwise."""

    name = "relax.tanh"
    scalar = ("%r = math.tanh %x : {t}",)


@relax_op
class SqrtOp(UnaryOp):
    """Square root, elementwise."""

    name = "relax.sqrt"
    scalar = ("%r = math.sqrt %x : {t}",)


@relax_op
class RsqrtOp(UnaryOp):
    """1 / sqrt(x), elementwise."""

    name = "relax.rsqrt"
    scalar = ("%r = math.rsqrt %x : {t}",)


@relax_op
class SinOp(UnaryOp):
    """Sine, elementwise."""

    name = "relax.sin"
    scalar = ("%r = math.sin %x : {t}",)


@relax_op
class CosOp(UnaryOp):
    """Cosine, elementwise."""

    name = "relax.cos"
    scalar = ("%r = math.cos %x : {t}",)


@relax_op
class ErfOp(UnaryOp):
    """Error function, elementwise."""

    name = "relax.erf"
    scalar = ("%r = math.erf %x : {t}",)


@relax_op
class FloorOp(UnaryOp):
    """Round down, elementwise."""

    name = "relax.floor"
    exact = True
    scalar = ("%r = math.floor %x : {t}",)


@relax_op
class CeilOp(UnaryOp):
    """Round up, elementwise."""

    name = "relax.ceil"
    exact = True
    scalar = ("%r = math.ceil %x : {t}",)


@relax_op
class NegativeOp(UnaryOp):
    """-x, elementwise (integers wrap: -INT_MIN = INT_MIN)."""

    name = "relax.negative"
    exact = True
    scalar = ("%r = arith.negf %x : {t}",)
    int_scalar = ("%z = arith.constant 0 : {t}", "%r = arith.subi %z, %x : {t}")
    float_only = False
    unsigned_ok = True


@relax_op
class AbsOp(UnaryOp):
    """|x|, elementwise (integers wrap: |INT_MIN| = INT_MIN; i1: x)."""

    name = "relax.abs"
    exact = True
    scalar = ("%r = math.absf %x : {t}",)
    int_scalar = (
        "%z = arith.constant 0 : {t}", "%n = arith.cmpi slt, %x, %z : {t}",
        "%m = arith.subi %z, %x : {t}", "%r = arith.select %n, %m, %x : {t}")
    bool_scalar = _IDENTITY
    float_only = False


@relax_op
class SignOp(UnaryOp):
    """Sign of x (-1, 0, 1; floats: +-0 and NaN give x), elementwise."""

    name = "relax.sign"
    exact = True
    scalar = (
        # ueq is true for NaN and +-0, where the result is x itself; elsewhere copysign(1, x).
        "%z = arith.constant 0.0 : {t}", "%o = arith.constant 1.0 : {t}", "%s = math.copysign %o, %x : {t}",
        "%e = arith.cmpf oeq, %x, %z : {t}", "%q = arith.cmpf oeq, %x, %x : {t}", "%t = arith.constant true",
        "%nan = arith.xori %q, %t : i1", "%keep = arith.ori %e, %nan : i1", "%r = arith.select %keep, %x, %s : {t}")
    int_scalar = (
        "%z = arith.constant 0 : {t}", "%o = arith.constant 1 : {t}", "%m = arith.constant -1 : {t}",
        "%gt = arith.cmpi sgt, %x, %z : {t}", "%lt = arith.cmpi slt, %x, %z : {t}",
        "%a = arith.select %gt, %o, %z : {t}", "%r = arith.select %lt, %m, %a : {t}")
    float_only = False


@relax_op
class SigmoidOp(UnaryOp):
    """1 / (1 + e**-x), elementwise."""

    name = "relax.sigmoid"
    scalar = (
        "%o = arith.constant 1.0 : {t}", "%n = arith.negf %x : {t}", "%e = math.exp %n : {t}",
        "%d = arith.addf %o, %e : {t}", "%r = arith.divf %o, %d : {t}")


@relax_op
class ReluOp(UnaryOp):
    """max(x, 0), elementwise (i1: x)."""

    name = "relax.relu"
    exact = True
    scalar = ("%z = arith.constant 0.0 : {t}", "%r = arith.maximumf %x, %z : {t}")
    int_scalar = ("%z = arith.constant 0 : {t}", "%p = arith.cmpi sgt, %x, %z : {t}",
                  "%r = arith.select %p, %x, %z : {t}")
    bool_scalar = _IDENTITY
    float_only = False


@relax_op
class GeluOp(UnaryOp):
    """x * Phi(x) (the exact, erf form of GELU), elementwise."""

    name = "relax.gelu"
    scalar = (
        "%h = arith.constant 0.5 : {t}", "%o = arith.constant 1.0 : {t}",
        "%s = arith.constant 0.70710678118654752 : {t}", "%a = arith.mulf %x, %s : {t}", "%e = math.erf %a : {t}",
        "%b = arith.addf %o, %e : {t}",
        "%c = arith.mulf %x, %h : {t}", "%r = arith.mulf %c, %b : {t}")


@relax_op
class GeluTanhOp(UnaryOp):
    """GELU, tanh approximation, elementwise."""

    name = "relax.gelu_tanh"
    scalar = (
        "%h = arith.constant 0.5 : {t}", "%o = arith.constant 1.0 : {t}",
        "%k = arith.constant 0.7978845608028654 : {t}", "%q = arith.constant 0.044715 : {t}", "%x2 = arith.mulf %x, %x : {t}", "%x3 = arith.mulf %x2, %x : {t}",
        "%a = arith.mulf %x3, %q : {t}", "%b = arith.addf %x, %a : {t}", "%c = arith.mulf %b, %k : {t}",
        "%th = math.tanh %c : {t}", "%d = arith.addf %o, %th : {t}", "%e = arith.mulf %x, %h : {t}",
        "%r = arith.mulf %e, %d : {t}")


@relax_op
class SiluOp(UnaryOp):
    """x * sigmoid(x), elementwise (silu(-inf) = NaN, as jax.nn.silu)."""

    name = "relax.silu"
    scalar = (
        "%o = arith.constant 1.0 : {t}", "%n = arith.negf %x : {t}", "%e = math.exp %n : {t}",
        "%d = arith.addf %o, %e : {t}", "%r = arith.divf %x, %d : {t}")


@relax_op
class IsFiniteOp(UnaryOp):
    """True where x is neither inf nor nan, elementwise."""

    name = "relax.isfinite"
    scalar = (
        "%a = math.absf %x : {t}", "%inf = arith.constant {inf} : {t}", "%r = arith.cmpf olt, %a, %inf : {t}")
    bool_result = True


@relax_op
class LogicalNotOp(UnaryOp):
    """Boolean not, elementwise."""

    name = "relax.logical_not"
    scalar = ("%o = arith.constant true", "%r = arith.xori %x, %o : i1")
    float_only = False
    bool_only = True


# --- canonicalization --------------------------------------------------------------------------

class ScalarizeSplatOperand(RewritePattern):
    """An operand that is a splat constant (possibly reshaped and broadcast) becomes the 0-d
    constant, which the op broadcasts itself, when the op's result type stays the same."""

    def match_and_rewrite(self, op, rewriter) -> bool:
        spec = OPS[op.name]
        types = [view(v.type) for v in op.operands]
        for i, v in enumerate(op.operands):
            t = types[i]
            if not isinstance(t, TensorType) or t.dims == ():
                continue
            src = splat_source(v)
            if src is None:
                continue
            scalar = TensorType((), t.dtype)
            try:
                deduced = spec.deduce(OpInfo(op, Facts(), types[:i] + [scalar] + types[i + 1:]))
            except DeduceError:
                continue
            if deduced != [view(op.results[0].type)]:
                continue
            with rewriter.ip:
                if view(src.results[0].type) == scalar:
                    c = src.results[0]
                else:
                    c = splat_constant(src, (), op.location).results[0]
                operands = list(op.operands)
                operands[i] = c
                new = ir.Operation.create(op.name, results=[op.results[0].type], operands=operands,
                                          attributes=attr_dict(op), loc=op.location)
            rewriter.replace_op(op, new)
            return True
        return False


# --- binary ------------------------------------------------------------------------------------

class BinaryOp(OpSpec):
    """Base of the binary elementwise ops: lhs and rhs of one dtype, broadcast as numpy does; the
    kernel applies the scalar template for their dtype to each pair."""

    lhs = operand(TENSOR)
    rhs = operand(TENSOR)
    result = result_(TENSOR)
    # Scalar body on %a, %b assigning %r; float, integer and i1 variants (bool_scalar None: the
    # op is not defined on i1, as in StableHLO and numpy).
    float_scalar: ClassVar[tuple[str, ...]] = ()
    int_scalar: ClassVar[tuple[str, ...]] = ()
    bool_scalar: ClassVar[tuple[str, ...] | None] = None
    bool_result: ClassVar[bool] = False
    bool_only: ClassVar[bool] = False
    # Unsigned integers: as in UnaryOp (`unsigned_ok`: int_scalar is sign-agnostic; `uint_scalar`).
    unsigned_ok: ClassVar[bool] = False
    uint_scalar: ClassVar[tuple[str, ...]] = ()
    # Exact in any float type (negation, floor, ...). Every other op on f16 / bf16 is computed in
    # f32 and rounded once, as XLA computes them (jax.jit and op by op): in the half type each step
    # of the template rounded (f16 rsqrt as a square root, then a division: 1 ulp off for a fifth
    # of the inputs; log1p likewise), enough to turn -0.9995 into -1.0 ahead of a power (fuzz seed
    # 2413417: NaN in jax, -1 here).
    exact: ClassVar[bool] = False
    canonicalization_patterns = (ScalarizeSplatOperand,)

    @classmethod
    def deduce(cls, op: OpInfo):
        a, b = op.tensor(0), op.tensor(1)
        dt = require_same_dtype([a, b], ["lhs", "rhs"])
        if is_unsigned(dt) and not (cls.unsigned_ok or cls.uint_scalar):
            raise DeduceError(f"{short_name(cls.name)} is not defined on unsigned {dt}")
        if cls.bool_only and dt != "i1":
            raise DeduceError(f"operands must be i1, got {dt}")
        if not cls.int_scalar and dt not in FLOAT_DTYPES:
            raise DeduceError(f"operands must have a floating-point element type, got {dt}")
        if not cls.float_scalar and dt in FLOAT_DTYPES:
            raise DeduceError(f"operands must have an integer element type, got {dt}")
        if dt == "i1" and cls.bool_scalar is None:
            raise DeduceError(f"{short_name(cls.name)} is not defined on i1 (booleans); "
                              f"cast with relax.astype first")
        dims = broadcast_shapes([require_rank(a, "lhs"), require_rank(b, "rhs")], ["lhs", "rhs"], op.facts)
        return [TensorType(dims, "i1" if cls.bool_result else dt)]

    @classmethod
    def template(cls, dtype: str) -> tuple[str, ...]:
        if dtype in FLOAT_DTYPES:
            return cls.float_scalar
        if dtype == "i1" and cls.bool_scalar is not None:
            return cls.bool_scalar
        if is_unsigned(dtype) and cls.uint_scalar:
            return cls.uint_scalar
        return cls.int_scalar

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        a, b = op.tensor(0), op.tensor(1)
        return _elementwise(op, short_name(cls.name), [a, b], cls.template(a.dtype), ["a", "b"])


# |a| and |b| as unsigned magnitudes (|INT_MIN| = 2**(w-1) fits), and a divisor that is never 0.
_MAGNITUDES = (
    "%z = arith.constant 0 : {t}", "%o = arith.constant 1 : {t}",
    "%an = arith.cmpi slt, %a, %z : {t}", "%bn = arith.cmpi slt, %b, %z : {t}",
    "%na = arith.subi %z, %a : {t}", "%nb = arith.subi %z, %b : {t}",
    "%ua = arith.select %an, %na, %a : {t}", "%ub = arith.select %bn, %nb, %b : {t}",
    "%b0 = arith.cmpi eq, %b, %z : {t}", "%sb = arith.select %b0, %o, %ub : {t}")
# XLA's integer division: truncating, x / 0 = -1, INT_MIN / -1 = INT_MIN (the magnitude quotient
# 2**(w-1) negated wraps to INT_MIN); never a trap.
_INT_DIV = _MAGNITUDES + (
    "%m1 = arith.constant -1 : {t}", "%uq = arith.divui %ua, %sb : {t}", "%neg = arith.xori %an, %bn : i1",
    "%nq = arith.subi %z, %uq : {t}", "%q = arith.select %neg, %nq, %uq : {t}",
    "%r = arith.select %b0, %m1, %q : {t}")
# XLA's integer remainder: the sign of a, x % 0 = x, INT_MIN % -1 = 0; never a trap.
_INT_REM = _MAGNITUDES + (
    "%ur = arith.remui %ua, %sb : {t}", "%nr = arith.subi %z, %ur : {t}",
    "%sr = arith.select %an, %nr, %ur : {t}", "%r = arith.select %b0, %a, %sr : {t}")


# Unsigned (XLA): x / 0 = all ones (UINT_MAX), x % 0 = x.
_UINT_DIV = ("%z = arith.constant 0 : {t}", "%o = arith.constant 1 : {t}", "%m1 = arith.constant -1 : {t}",
             "%b0 = arith.cmpi eq, %b, %z : {t}", "%sb = arith.select %b0, %o, %b : {t}",
             "%q = arith.divui %a, %sb : {t}", "%r = arith.select %b0, %m1, %q : {t}")
_UINT_REM = ("%z = arith.constant 0 : {t}", "%o = arith.constant 1 : {t}", "%b0 = arith.cmpi eq, %b, %z : {t}",
             "%sb = arith.select %b0, %o, %b : {t}", "%q = arith.remui %a, %sb : {t}",
             "%r = arith.select %b0, %a, %q : {t}")


def _select_by(pred: str) -> tuple[str, ...]:
    return (f"%c = arith.cmpi {pred}, %a, %b : {{t}}", "%r = arith.select %c, %a, %b : {t}")


# On i1 (StableHLO): add is OR, multiply AND, maximum OR, minimum AND; false < true.


@relax_op
class AddOp(BinaryOp):
    """a + b with numpy broadcasting (i1: or; integers wrap)."""

    name = "relax.add"
    float_scalar = ("%r = arith.addf %a, %b : {t}",)
    int_scalar = ("%r = arith.addi %a, %b : {t}",)
    bool_scalar = ("%r = arith.ori %a, %b : i1",)
    unsigned_ok = True


@relax_op
class SubtractOp(BinaryOp):
    """a - b with numpy broadcasting (integers wrap)."""

    name = "relax.subtract"
    float_scalar = ("%r = arith.subf %a, %b : {t}",)
    int_scalar = ("%r = arith.subi %a, %b : {t}",)
    unsigned_ok = True


@relax_op
class MultiplyOp(BinaryOp):
    """a * b with numpy broadcasting (i1: and; integers wrap)."""

    name = "relax.multiply"
    float_scalar = ("%r = arith.mulf %a, %b : {t}",)
    int_scalar = ("%r = arith.muli %a, %b : {t}",)
    bool_scalar = ("%r = arith.andi %a, %b : i1",)
    unsigned_ok = True


@relax_op
class DivideOp(BinaryOp):
    """a / b with numpy broadcasting (integers: truncating, as XLA: x / 0 = -1, INT_MIN / -1 = INT_MIN)."""

    name = "relax.divide"
    float_scalar = ("%r = arith.divf %a, %b : {t}",)
    int_scalar = _INT_DIV
    uint_scalar = _UINT_DIV


@relax_op
class PowerOp(BinaryOp):
    """a ** b with numpy broadcasting (integers: wrapping; for b < 0, 1 and -1 keep their powers, others give 0)."""

    name = "relax.power"
    float_scalar = ("%r = math.powf %a, %b : {t}",)
    int_scalar = ("(built per width by ops/bits.py: int_power_scalar)",)
    unsigned_ok = True

    @classmethod
    def template(cls, dtype: str) -> tuple[str, ...]:
        if dtype in FLOAT_DTYPES:
            return cls.float_scalar
        return int_power_scalar(dtype)


# max(+0, -0) = +0 and min(+0, -0) = -0 (as XLA): arith.maximumf's CPU expansion returns b for
# equal operands, so equal operands pick by a's sign bit.
_SIGN_OF_A = ("%one = arith.constant 1.0 : {t}", "%zero = arith.constant 0.0 : {t}",
              "%sa = math.copysign %one, %a : {t}", "%an = arith.cmpf olt, %sa, %zero : {t}",
              "%eq = arith.cmpf oeq, %a, %b : {t}")


@relax_op
class MaximumOp(BinaryOp):
    """max(a, b) with numpy broadcasting (NaN wins; i1: or)."""

    name = "relax.maximum"
    float_scalar = _SIGN_OF_A + ("%m = arith.maximumf %a, %b : {t}", "%pa = arith.select %an, %b, %a : {t}",
                                 "%r = arith.select %eq, %pa, %m : {t}")
    int_scalar = _select_by("sgt")
    uint_scalar = _select_by("ugt")
    bool_scalar = ("%r = arith.ori %a, %b : i1",)


@relax_op
class MinimumOp(BinaryOp):
    """min(a, b) with numpy broadcasting (NaN wins; i1: and)."""

    name = "relax.minimum"
    float_scalar = _SIGN_OF_A + ("%m = arith.minimumf %a, %b : {t}", "%pa = arith.select %an, %a, %b : {t}",
                                 "%r = arith.select %eq, %pa, %m : {t}")
    int_scalar = _select_by("slt")
    uint_scalar = _select_by("ult")
    bool_scalar = ("%r = arith.andi %a, %b : i1",)


@relax_op
class RemainderOp(BinaryOp):
    """C-style remainder (sign of a) with numpy broadcasting (integers, as XLA: x % 0 = x, INT_MIN % -1 = 0)."""

    name = "relax.remainder"
    float_scalar = ("%r = arith.remf %a, %b : {t}",)
    int_scalar = _INT_REM
    uint_scalar = _UINT_REM


def _compare(f: str, i: str, u: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The float, integer and i1 (unsigned: false < true) templates of a comparison by the
    `arith.cmpf` predicate f and the `arith.cmpi` predicates i and u."""
    if f == "une":  # NaN != x is true; spelled not(oeq), which every target reads alike
        fl = ("%e = arith.cmpf oeq, %a, %b : {t}", "%t = arith.constant true", "%r = arith.xori %e, %t : i1")
    else:
        fl = (f"%r = arith.cmpf {f}, %a, %b : {{t}}",)
    return fl, (f"%r = arith.cmpi {i}, %a, %b : {{t}}",), (f"%r = arith.cmpi {u}, %a, %b : i1",)


@relax_op
class EqualOp(BinaryOp):
    """a == b (i1) with numpy broadcasting."""

    name = "relax.equal"
    bool_result = True
    float_scalar, int_scalar, bool_scalar = _compare("oeq", "eq", "eq")
    unsigned_ok = True


@relax_op
class NotEqualOp(BinaryOp):
    """a != b (i1) with numpy broadcasting (true where either is NaN)."""

    name = "relax.not_equal"
    bool_result = True
    float_scalar, int_scalar, bool_scalar = _compare("une", "ne", "ne")
    unsigned_ok = True


@relax_op
class LessOp(BinaryOp):
    """a < b (i1) with numpy broadcasting (i1: false < true)."""

    name = "relax.less"
    bool_result = True
    float_scalar, int_scalar, bool_scalar = _compare("olt", "slt", "ult")
    uint_scalar = ("%r = arith.cmpi ult, %a, %b : {t}",)


@relax_op
class LessEqualOp(BinaryOp):
    """a <= b (i1) with numpy broadcasting."""

    name = "relax.less_equal"
    bool_result = True
    float_scalar, int_scalar, bool_scalar = _compare("ole", "sle", "ule")
    uint_scalar = ("%r = arith.cmpi ule, %a, %b : {t}",)


@relax_op
class GreaterOp(BinaryOp):
    """a > b (i1) with numpy broadcasting."""

    name = "relax.greater"
    bool_result = True
    float_scalar, int_scalar, bool_scalar = _compare("ogt", "sgt", "ugt")
    uint_scalar = ("%r = arith.cmpi ugt, %a, %b : {t}",)


@relax_op
class GreaterEqualOp(BinaryOp):
    """a >= b (i1) with numpy broadcasting."""

    name = "relax.greater_equal"
    bool_result = True
    float_scalar, int_scalar, bool_scalar = _compare("oge", "sge", "uge")
    uint_scalar = ("%r = arith.cmpi uge, %a, %b : {t}",)


@relax_op
class LogicalAndOp(BinaryOp):
    """Boolean and (i1) with numpy broadcasting."""

    name = "relax.logical_and"
    int_scalar = ("%r = arith.andi %a, %b : {t}",)
    bool_scalar = ("%r = arith.andi %a, %b : i1",)
    bool_only = True


@relax_op
class LogicalOrOp(BinaryOp):
    """Boolean or (i1) with numpy broadcasting."""

    name = "relax.logical_or"
    int_scalar = ("%r = arith.ori %a, %b : {t}",)
    bool_scalar = ("%r = arith.ori %a, %b : i1",)
    bool_only = True


@relax_op
class WhereOp(OpSpec):
    """cond ? x : y with numpy broadcasting of all three."""

    name = "relax.where"
    condition = operand(TENSOR)
    x = operand(TENSOR)
    y = operand(TENSOR)
    result = result_(TENSOR)
    canonicalization_patterns = (ScalarizeSplatOperand,)

    @classmethod
    def deduce(cls, op: OpInfo):
        c, x, y = op.tensor(0), op.tensor(1), op.tensor(2)
        if c.dtype != "i1":
            raise DeduceError(f"condition must be i1, got {c.dtype}")
        dt = require_same_dtype([x, y], ["x", "y"])
        dims = broadcast_shapes([require_rank(c, "condition"), require_rank(x, "x"), require_rank(y, "y")],
                                ["condition", "x", "y"], op.facts)
        return [TensorType(dims, dt)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        return _elementwise(op, "where", [op.tensor(0), op.tensor(1), op.tensor(2)],
                            ("%r = arith.select %c, %x, %y : {t}",), ["c", "x", "y"])


@relax_op
class AstypeOp(OpSpec):
    """Convert the element type. Attributes: dtype (type); internal (bool): a widening the compiler
    inserted, not the program's (f16 / bf16 operands of a product computed in f32), after which a
    value the producer rounded stays rounded (the program's own conversion to f32 keeps XLA's
    excess precision instead: backend/cpu.py `_round_like_xla`)."""

    name = "relax.astype"
    x = operand(TENSOR)
    result = result_(TENSOR)
    dtype = attr("type", optional=False, doc="the result element type")
    internal = attr("any", doc="bool: a widening the compiler inserted (default false)")

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        dt = str(op.attr("dtype"))
        if dt not in DTYPES:
            raise DeduceError(f"unsupported dtype {dt}")
        return [TensorType(x.dims, dt)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x = op.tensor(0)
        return _elementwise(op, "astype", [x], convert_scalar(x.dtype, op.result_types[0].dtype,
                                                                 internal=bool(op.attr("internal", False))), ["x"])


# --- scalar conversion (astype; full with a dtype) -------------------------------------------

_WIDTH = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}


def convert_scalar(src: str, dst: str, internal: bool = False) -> tuple[str, ...]:
    """Scalar conversion %x : src -> %r : dst, with XLA's semantics on every target: float -> int
    truncates toward zero and saturates (NaN -> 0, +-inf -> INT_MAX / INT_MIN); float -> i1 is
    x != 0 (NaN -> true); int -> int wraps; i1 is unsigned (true -> 1). `internal`: a float
    widening the compiler inserted, marked as the bf16 emulation's own (see ops/kernel.py `via_f32`)."""
    if is_unsigned(src) or is_unsigned(dst):
        return convert_unsigned(src, dst)
    fsrc, fdst = src in FLOAT_DTYPES, dst in FLOAT_DTYPES
    width = _WIDTH
    if src == dst:
        return ("%true = arith.constant true", f"%r = arith.select %true, %x, %x : {src}")
    if fsrc and fdst:
        if (src, dst) in (("bf16", "f16"), ("f16", "bf16")):
            return (f"%w = arith.extf %x : {src} to f32", f"%r = arith.truncf %w : f32 to {dst}")
        if width[src] < width[dst]:
            return (f"%r = arith.extf %x{' fastmath<contract>' if internal else ''} : {src} to {dst}",)
        return (f"%r = arith.truncf %x : {src} to {dst}",)
    if not fsrc and not fdst:
        if width[src] < width[dst]:
            op = "extui" if src == "i1" else "extsi"
            return (f"%r = arith.{op} %x : {src} to {dst}",)
        if dst == "i1":
            return (f"%z = arith.constant 0 : {src}", f"%r = arith.cmpi ne, %x, %z : {src}")
        return (f"%r = arith.trunci %x : {src} to {dst}",)
    if not fsrc and fdst:
        if src == "i1":
            return (f"%r = arith.uitofp %x : i1 to {dst}",)
        # sign and unsigned magnitude (|INT_MIN| fits): uitofp rounds |x| as sitofp would.
        return (f"%z = arith.constant 0 : {src}", f"%n = arith.cmpi slt, %x, %z : {src}",
                f"%m = arith.subi %z, %x : {src}", f"%ax = arith.select %n, %m, %x : {src}",
                f"%f = arith.uitofp %ax : {src} to {dst}", f"%nf = arith.negf %f : {dst}",
                f"%r = arith.select %n, %nf, %f : {dst}")
    if dst == "i1":
        # not(x == 0): true for NaN (an unordered `une` is not read alike by every target)
        return (f"%z = arith.constant 0.0 : {src}", f"%e = arith.cmpf oeq, %x, %z : {src}",
                "%t = arith.constant true", "%r = arith.xori %e, %t : i1")
    lines: list[str] = []
    x, s = "%x", src
    if src in ("f16", "bf16"):  # exact in f32, whose range holds every integer bound
        lines.append(f"%x32 = arith.extf %x fastmath<contract> : {src} to f32")  # (internal: see ops/kernel.py via_f32)
        x, s = "%x32", "f32"
    w = width[dst]
    wide = "i64" if w == 64 else "i32"
    # The magnitude, clamped to 2**(w-1) (exact in every float type), converts unsigned; negate it
    # for negatives (-2**(w-1) wraps to INT_MIN); x >= 2**(w-1) saturates to INT_MAX; NaN -> 0.
    lines += [f"%fz = arith.constant 0.0 : {s}", f"%ok = arith.cmpf oeq, {x}, {x} : {s}",
              f"%xs = arith.select %ok, {x}, %fz : {s}", f"%neg = arith.cmpf olt, %xs, %fz : {s}",
              f"%ax = math.absf %xs : {s}", f"%lim = arith.constant {float(2 ** (w - 1))!r} : {s}",
              f"%c = arith.minimumf %ax, %lim : {s}", f"%u = arith.fptoui %c : {s} to {wide}",
              f"%iz = arith.constant 0 : {wide}", f"%nu = arith.subi %iz, %u : {wide}",
              f"%v = arith.select %neg, %nu, %u : {wide}", f"%over = arith.cmpf oge, %xs, %lim : {s}",
              f"%imax = arith.constant {2 ** (w - 1) - 1} : {wide}"]
    if wide == dst:
        lines.append(f"%r = arith.select %over, %imax, %v : {wide}")
    else:
        lines += [f"%sat = arith.select %over, %imax, %v : {wide}", f"%r = arith.trunci %sat : {wide} to {dst}"]
    return tuple(lines)
