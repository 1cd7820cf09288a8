"""Integer bit ops and the remaining StableHLO element math (issue 16).

Bits: bitwise and/or/xor/not, shifts (StableHLO/APInt semantics: the shift amount is read as an
unsigned number; an amount >= the bit width gives 0, or the sign fill for an arithmetic right
shift, never LLVM's poison), popcount, count_leading_zeros, bitcast between same-width types.
Math: atan2, cbrt, tan, round to nearest (ties to even, ties away from zero), reduce_precision.
f16 and bf16 compute in f32 and round once (as XLA's CPU backend does).

Unsigned integers (ui8..ui64, see the section at the end): scalar templates use signless integers;
an unsigned dtype runs the signless template of its width (every op here is sign-agnostic on the
bits except where it says otherwise); conversions and the legalization rule for other families
live here too.
"""
from __future__ import annotations

from typing import ClassVar

from relax_mlir.dialect.spec import DeduceError, OpInfo, OpSpec, TENSOR, attr, operand, relax_op, result_, short_name
from relax_mlir.dialect.types import DTYPES, FLOAT_DTYPES, TensorType, is_unsigned, signless
from relax_mlir.ops.common import broadcast_shapes, require_rank, require_same_dtype
from relax_mlir.ops.elementwise import BinaryOp, UnaryOp, _elementwise
from relax_mlir.ops.int_scalars import convert_unsigned, int_power_scalar, width  # noqa: F401
from relax_mlir.ops.kernel import Legalized, via_f32


# --- bitwise logic -------------------------------------------------------------------------------

class _IntBinary(BinaryOp):
    """A binary op on integers (i1 included where `bool_scalar` is set), sign-agnostic."""

    unsigned_ok: ClassVar[bool] = True


@relax_op
class BitwiseAndOp(_IntBinary):
    """a & b with numpy broadcasting (integers and i1)."""

    name = "relax.bitwise_and"
    int_scalar = ("%r = arith.andi %a, %b : {t}",)
    bool_scalar = ("%r = arith.andi %a, %b : i1",)


@relax_op
class BitwiseOrOp(_IntBinary):
    """a | b with numpy broadcasting (integers and i1)."""

    name = "relax.bitwise_or"
    int_scalar = ("%r = arith.ori %a, %b : {t}",)
    bool_scalar = ("%r = arith.ori %a, %b : i1",)


@relax_op
class BitwiseXorOp(_IntBinary):
    """a ^ b with numpy broadcasting (integers and i1)."""

    name = "relax.bitwise_xor"
    int_scalar = ("%r = arith.xori %a, %b : {t}",)
    bool_scalar = ("%r = arith.xori %a, %b : i1",)


class _IntUnary(UnaryOp):
    """A unary op on integers only (i1 where `bool_scalar` is set)."""

    float_only = False
    unsigned_ok: ClassVar[bool] = True

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        if x.dtype in FLOAT_DTYPES:
            raise DeduceError(f"operand must have an integer element type, got {x.dtype}")
        return super().deduce(op)


@relax_op
class BitwiseNotOp(_IntUnary):
    """~x, elementwise (integers and i1)."""

    name = "relax.bitwise_not"
    int_scalar = ("%m = arith.constant -1 : {t}", "%r = arith.xori %x, %m : {t}")
    bool_scalar = ("%o = arith.constant true", "%r = arith.xori %x, %o : i1")


def _pattern(byte: int, w: int) -> str:
    """The w-bit integer whose bytes are all `byte`, as the signed literal arith takes."""
    v = int.from_bytes(bytes([byte]) * (w // 8), "little")
    return str(v - (1 << w) if v >> (w - 1) else v)


def _popcount_lines(x: str, w: int, out: str = "%r") -> list[str]:
    """Set bits of x by the SWAR sums (plain arith: every target lowers it; LLVM finds the ctpop)."""
    lines = [f"%p1 = arith.constant 1 : {{t}}", f"%p2 = arith.constant 2 : {{t}}", f"%p4 = arith.constant 4 : {{t}}",
             f"%m55 = arith.constant {_pattern(0x55, w)} : {{t}}", f"%m33 = arith.constant {_pattern(0x33, w)} : {{t}}",
             f"%m0f = arith.constant {_pattern(0x0F, w)} : {{t}}",
             f"%q1 = arith.shrui {x}, %p1 : {{t}}", f"%q2 = arith.andi %q1, %m55 : {{t}}", f"%y1 = arith.subi {x}, %q2 : {{t}}",
             "%y2 = arith.andi %y1, %m33 : {t}", "%q3 = arith.shrui %y1, %p2 : {t}", "%q4 = arith.andi %q3, %m33 : {t}",
             "%y3 = arith.addi %y2, %q4 : {t}", "%q5 = arith.shrui %y3, %p4 : {t}", "%y4 = arith.addi %y3, %q5 : {t}"]
    if w == 8:
        return lines + [f"{out} = arith.andi %y4, %m0f : {{t}}"]
    return lines + ["%y5 = arith.andi %y4, %m0f : {t}", f"%m01 = arith.constant {_pattern(0x01, w)} : {{t}}",
                    "%y6 = arith.muli %y5, %m01 : {t}", f"%top = arith.constant {w - 8} : {{t}}",
                    f"{out} = arith.shrui %y6, %top : {{t}}"]


@relax_op
class PopcountOp(_IntUnary):
    """The number of set bits of x, elementwise (integers)."""

    name = "relax.popcount"
    int_scalar = ("(built per width: _popcount_lines)",)

    @classmethod
    def template(cls, dtype: str) -> tuple[str, ...]:
        return tuple(_popcount_lines("%x", width(dtype)))


@relax_op
class CountLeadingZerosOp(_IntUnary):
    """The number of leading zero bits of x (the bit width for 0), elementwise (integers)."""

    name = "relax.count_leading_zeros"
    int_scalar = ("(built per width: the set bits of ~smear(x))",)

    @classmethod
    def template(cls, dtype: str) -> tuple[str, ...]:
        # smear the highest set bit into every lower one; the zeros left are the leading zeros
        w, v, lines = width(dtype), "%x", []
        k = 1
        while k < w:
            lines += [f"%c{k} = arith.constant {k} : {{t}}", f"%h{k} = arith.shrui {v}, %c{k} : {{t}}",
                      f"%s{k} = arith.ori {v}, %h{k} : {{t}}"]
            v, k = f"%s{k}", k * 2
        lines += ["%all = arith.constant -1 : {t}", f"%inv = arith.xori {v}, %all : {{t}}"]
        return tuple(lines + _popcount_lines("%inv", w))


# --- shifts ---------------------------------------------------------------------------------------
# The amount b is unsigned (a negative amount is a huge one); b >= width selects the saturated
# result, so the poison of an over-wide LLVM shift is never chosen.

class _Shift(_IntBinary):
    @classmethod
    def template(cls, dtype: str) -> tuple[str, ...]:
        return tuple(line.replace("{w}", str(width(dtype))) for line in cls.int_scalar)


@relax_op
class LeftShiftOp(_Shift):
    """a << b with numpy broadcasting (integers; b >= the bit width or b < 0 gives 0)."""

    name = "relax.left_shift"
    int_scalar = ("%w = arith.constant {w} : {t}", "%z = arith.constant 0 : {t}",
                  "%big = arith.cmpi uge, %b, %w : {t}", "%s = arith.shli %a, %b : {t}",
                  "%r = arith.select %big, %z, %s : {t}")


@relax_op
class RightShiftLogicalOp(_Shift):
    """a >> b filling with zeros, numpy broadcasting (integers; b >= the bit width or b < 0 gives 0)."""

    name = "relax.right_shift_logical"
    int_scalar = ("%w = arith.constant {w} : {t}", "%z = arith.constant 0 : {t}",
                  "%big = arith.cmpi uge, %b, %w : {t}", "%s = arith.shrui %a, %b : {t}",
                  "%r = arith.select %big, %z, %s : {t}")


@relax_op
class RightShiftArithmeticOp(_Shift):
    """a >> b filling with the sign bit, numpy broadcasting (integers; b >= the bit width or b < 0
    shifts by width - 1: 0 or -1)."""

    name = "relax.right_shift_arithmetic"
    int_scalar = ("%w = arith.constant {w} : {t}", "%w1 = arith.constant 1 : {t}",
                  "%wm = arith.subi %w, %w1 : {t}", "%big = arith.cmpi uge, %b, %w : {t}",
                  "%n = arith.select %big, %wm, %b : {t}", "%r = arith.shrsi %a, %n : {t}")


@relax_op
class TanOp(UnaryOp):
    """Tangent, elementwise."""

    name = "relax.tan"
    scalar = ("%r = math.tan %x : {t}",)


@relax_op
class CbrtOp(UnaryOp):
    """Cube root (cbrt(-8) = -2), elementwise."""

    name = "relax.cbrt"
    scalar = ("%r = math.cbrt %x : {t}",)


@relax_op
class RoundOp(UnaryOp):
    """Round to the nearest integer, ties away from zero (StableHLO round_nearest_afz), elementwise."""

    name = "relax.round"
    scalar = ("%r = math.round %x : {t}",)
    exact = True


@relax_op
class RoundEvenOp(UnaryOp):
    """Round to the nearest integer, ties to even (StableHLO round_nearest_even), elementwise."""

    name = "relax.round_even"
    scalar = ("%r = math.roundeven %x : {t}",)
    exact = True


@relax_op
class Atan2Op(BinaryOp):
    """atan2(a, b) (the angle of the point (b, a)) with numpy broadcasting, elementwise."""

    name = "relax.atan2"
    float_scalar = ("%r = math.atan2 %a, %b : {t}",)

    @classmethod
    def template(cls, dtype: str) -> tuple[str, ...]:
        return via_f32(dtype, cls.float_scalar, ("%a", "%b"))


# --- bitcast --------------------------------------------------------------------------------------

@relax_op
class BitcastOp(OpSpec):
    """Reinterpret each element's bits as another element type of the same width. Attribute: dtype."""

    name = "relax.bitcast"
    x = operand(TENSOR)
    result = result_(TENSOR)
    dtype = attr("type", optional=False, doc="the result element type (same bit width)")

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        dt = str(op.attr("dtype"))
        if dt not in DTYPES:
            raise DeduceError(f"unsupported dtype {dt}")
        if "i1" in (dt, x.dtype) or _bits(dt) != _bits(x.dtype):
            raise DeduceError(f"bitcast needs element types of one bit width (not i1), got {x.dtype} -> {dt}")
        return [TensorType(x.dims, dt)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, r = op.tensor(0), op.result_types[0]
        src, dst = signless(x.dtype), signless(r.dtype)
        if src == dst:
            tmpl = ("%true = arith.constant true", "%r = arith.select %true, %x, %x : {t}")
        else:
            tmpl = (f"%r = arith.bitcast %x : {src} to {dst}",)
        return _elementwise(op, "bitcast", [x], tmpl, ["x"])


def _bits(dt: str) -> int:
    return {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}.get(dt) or width(dt)


# --- unsigned integers ------------------------------------------------------------------------------
# ui8..ui64 are relax dtypes; kernels compute on the signless type of the same width. Elementwise ops
# say how they treat them (`unsigned_ok`: sign-agnostic; `uint_scalar`: an unsigned template); the
# ops of other families listed here compute the same bits for either signedness and are legalized
# as if their types were signless; every other op refuses unsigned types at legalization.

SIGN_AGNOSTIC = frozenset({
    "relax.broadcast_to", "relax.permute_dims", "relax.strided_slice", "relax_v.concat", "relax_v.split",
    "relax.arange", "relax.zeros", "relax.ones", "relax.sum", "relax.prod", "relax.take", "relax.where",
    "relax.reduce_bitwise_and", "relax.reduce_bitwise_or", "relax.reduce_bitwise_xor",
    # data movement (indices are signed: the importer widens unsigned ones, bits.signed_index)
    "relax.reverse", "relax.pad", "relax.gather", "relax.dynamic_slice", "relax.dynamic_update_slice",
})


def _sign_agnostic_here(name: str, info: OpInfo) -> bool:
    """Ops whose bits do not depend on signedness in some configurations: a matmul of one integer
    type throughout (wrapping), a window sum or product,
    a scatter that replaces, adds or multiplies (wrapping), a sort whose unsigned operands are all
    payload (the keys are signed or float)."""
    if name == "relax.reduce_window":
        return info.attr("kind") in ("sum", "prod")
    if name == "relax.matmul":  # products and sums wrap alike when nothing widens
        ts = _tensors(info.operand_types) + _tensors(info.result_types)
        return len({t.dtype for t in ts}) == 1
    if name == "relax_v.scatter":  # x.at[i].set / add / multiply on unsigned data (indices are signed)
        return info.attr("combiner") in ("replace", "add", "mul") and not is_unsigned(info.tensor(1).dtype)
    if name == "relax_v.sort":
        nk = info.attr("num_keys", 1)
        keys = [t for t in info.operand_types[:nk] if isinstance(t, TensorType)]
        return isinstance(nk, int) and not any(is_unsigned(t.dtype) for t in keys)
    return False


def _tensors(types):
    return [t for t in types if isinstance(t, TensorType)]


def unsigned_legalize_info(spec, info: OpInfo) -> OpInfo:
    """The OpInfo an op's legalize() sees when unsigned types are involved: unchanged for the ops
    that handle them, with signless types for SIGN_AGNOSTIC ones; else a LegalizeError."""
    from relax_mlir.ops.elementwise import AstypeOp
    from relax_mlir.ops.kernel import LegalizeError

    types = _tensors(info.operand_types) + _tensors(info.result_types)
    unsigned = sorted({t.dtype for t in types if is_unsigned(t.dtype)})
    if not unsigned:
        return info
    if issubclass(spec, (UnaryOp, BinaryOp, AstypeOp, BitcastOp)):  # their deduce() checked the dtype
        return info
    if spec.name not in SIGN_AGNOSTIC and not _sign_agnostic_here(spec.name, info):
        raise LegalizeError(f"unsigned element types ({', '.join(unsigned)}) are not supported by {spec.name}")

    def sl(t):
        return t.with_dtype(signless(t.dtype)) if isinstance(t, TensorType) else t

    new = OpInfo(info.op, info.facts, [sl(t) for t in info.operand_types])
    new.result_types = [sl(t) for t in info.result_types]
    return new


# --- reduce_precision -----------------------------------------------------------------------------

_FLOAT_LAYOUT = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52)}  # exponent, mantissa bits


@relax_op
class ReducePrecisionOp(UnaryOp):
    """x rounded to a float format of `exponent_bits` and `mantissa_bits` and back (StableHLO
    reduce_precision: mantissa rounded to nearest even, exponent overflow -> +-inf, underflow
    (denormals included) -> +-0; NaN stays NaN, as XLA). Attributes:
    exponent_bits (>= 1), mantissa_bits (>= 0)."""

    name = "relax.reduce_precision"
    exponent_bits = attr("int", optional=False, doc="exponent bits of the format (>= 1)")
    mantissa_bits = attr("int", optional=False, doc="mantissa bits of the format (>= 0)")

    @classmethod
    def deduce(cls, op: OpInfo):
        e, m = op.attr("exponent_bits"), op.attr("mantissa_bits")
        if not isinstance(e, int) or e < 1:
            raise DeduceError(f"exponent_bits must be an integer >= 1, got {e}")
        if not isinstance(m, int) or m < 0:
            raise DeduceError(f"mantissa_bits must be an integer >= 0, got {m}")
        return super().deduce(op)

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x = op.tensor(0)
        tmpl = reduce_precision_scalar(x.dtype, op.attr("exponent_bits"), op.attr("mantissa_bits"))
        return _elementwise(op, "reduce_precision", [x], tmpl, ["x"])


def reduce_precision_scalar(dtype: str, exp_bits: int, mant_bits: int) -> tuple[str, ...]:
    se, sm = _FLOAT_LAYOUT[dtype]
    w = 1 + se + sm
    it = f"i{w}"

    def lit(v: int) -> str:  # an unsigned w-bit pattern as the signed literal arith takes
        v &= (1 << w) - 1
        return str(v - (1 << w) if v >> (w - 1) else v)

    lines = [f"%v0 = arith.bitcast %x : {{t}} to {it}"]
    v = "%v0"
    if mant_bits < sm:
        last = 1 << (sm - mant_bits)
        lines += [f"%lm = arith.constant {lit(last)} : {it}", f"%sh = arith.constant {sm - mant_bits} : {it}",
                  f"%bb = arith.constant {lit((last >> 1) - 1)} : {it}", f"%l = arith.andi {v}, %lm : {it}",
                  f"%lb = arith.shrui %l, %sh : {it}", f"%bias = arith.addi %lb, %bb : {it}",
                  f"%s = arith.addi {v}, %bias : {it}", f"%tm = arith.constant {lit(~(last - 1))} : {it}",
                  f"%v1 = arith.andi %s, %tm : {it}"]
        v = "%v1"
    if exp_bits < se:
        exp_mask = ((1 << se) - 1) << sm
        bias = (1 << (se - 1)) - 1
        rbias = (1 << (exp_bits - 1)) - 1
        lines += [f"%em = arith.constant {lit(exp_mask)} : {it}", f"%sm = arith.constant {lit(1 << (w - 1))} : {it}",
                  f"%xe = arith.andi {v}, %em : {it}",
                  f"%hi = arith.constant {lit((bias + rbias) << sm)} : {it}",
                  f"%lo = arith.constant {lit((bias - rbias) << sm)} : {it}",
                  f"%ov = arith.cmpi ugt, %xe, %hi : {it}", f"%un = arith.cmpi ule, %xe, %lo : {it}",
                  f"%sz = arith.andi {v}, %sm : {it}", f"%si = arith.ori %sz, %em : {it}",
                  f"%v2 = arith.select %ov, %si, {v} : {it}", f"%v3 = arith.select %un, %sz, %v2 : {it}"]
        v = "%v3"
    # NaN stays x, also with 0 mantissa bits (as XLA; the reference interpreter gives +inf there)
    lines += [f"%rf = arith.bitcast {v} : {it} to {{t}}", "%ord = arith.cmpf oeq, %x, %x : {t}",
              "%r = arith.select %ord, %rf, %x : {t}"]
    return tuple(lines)
