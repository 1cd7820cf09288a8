"""Elementwise converters: arithmetic, math, compare, select, clamp, convert (ops/elementwise.py).
Integer operands known as shape computations fold to known values instead of relax ops.
"""
from __future__ import annotations

from relax_mlir.frontend.stablehlo.common import Val, _FLOATS, _dtype_attr, _known_ok, _merge_dims, _res, _splat
from relax_mlir.frontend.stablehlo.errors import UnsupportedOpError
from relax_mlir.frontend.stablehlo.importer import Importer
from relax_mlir.frontend.stablehlo.registry import register_converters
from relax_mlir.frontend.stablehlo.unsigned import _TOTAL_ORDER_INT, _total_order_key
from relax_mlir.frontend.stablehlo.shape_arith import (_INT_FOLD, _and_expr, _bool_decided, _bool_expr, _decide,
                                                       _known_sign, _or_expr, _positive_indicator, _wrap)
from relax_mlir.shape import Expr, const


def _binary(relax_name, int_fold=None):
    def conv(im: Importer, op, ins):
        a, b = ins
        dims, dt = _res(op)
        dims = _merge_dims(dims, a.dims, b.dims)
        if int_fold is not None and dt.startswith("i") and dt != "i1" and _known_ok(ins) \
                and len(a.known) == len(b.known):
            facts = im.int_facts()
            folded = [int_fold(x, y, facts) for x, y in zip(a.known, b.known)]
            if all(f is not None for f in folded):
                return Val(None, dt, dims, [_wrap(f, dt) for f in folded])
        return im.emit(relax_name, [a, b], len(dims), dt, dims=dims)
    return conv


def _bool_factor(im: Importer, v):
    """The i1 Val `p` when the StableHLO value `v` is convert(p) of a boolean p, else None."""
    owner = getattr(v, "owner", None)
    if owner is None or not hasattr(owner, "name") or owner.name != "stablehlo.convert":
        return None
    p = im.env.get(owner.operands[0])
    return p if p is not None and p.dtype == "i1" else None


def _multiply(im: Importer, op, ins):
    """x * convert(p), p boolean, x a float: where(p, x, 0), as XLA rewrites it (jax.jit's
    result): 0 where p is false even for an infinite or NaN x. jax's gradient of max is
    g / count * convert(x == max): a NaN in the row made count 0 and, with IEEE's inf * 0, the
    whole row's gradient NaN where jax's is 0. Not bf16: XLA computes bf16 products in f32 before
    it simplifies (its bf16 product of inf and convert(false) is NaN)."""
    dims, dt = _res(op)
    if dt in _FLOATS and dt != "bf16":
        for i in (0, 1):
            p = _bool_factor(im, op.operands[i])
            x = ins[1 - i]
            if p is not None and x.dtype == dt:
                zero = im.emit("relax.constant", [], 0, dt, {"value": _splat([], dt, 0.0)}, dims=[])
                return im.emit("relax.where", [p, x, zero], len(dims), dt,
                               dims=_merge_dims(dims, ins[0].dims, ins[1].dims))
    return _binary("relax.multiply", _INT_FOLD["stablehlo.multiply"])(im, op, ins)


def _unary(relax_name):
    def conv(im: Importer, op, ins):
        (a,) = ins
        dims, dt = _res(op)
        if relax_name == "relax.negative" and a.known is not None:
            return Val(None, dt, _merge_dims(dims, a.dims), [_wrap(-x, dt) for x in a.known])
        if relax_name == "relax.sign" and a.known is not None and dt not in _FLOATS:
            facts = im.int_facts()
            signs = [_known_sign(x, facts) for x in a.known]
            if all(v is not None for v in signs):
                return Val(None, dt, _merge_dims(dims, a.dims), [const(v) for v in signs])
            known = [const(v) if v is not None else _positive_indicator(x, facts) - _positive_indicator(-x, facts)
                     for v, x in zip(signs, a.known)]
            return im.emit(relax_name, [a], len(dims), dt, dims=_merge_dims(dims, a.dims), known=known)
        return im.emit(relax_name, [a], len(dims), dt, dims=_merge_dims(dims, a.dims))
    return conv


def _logic(relax_name):
    def conv(im, op, ins):
        dims, dt = _res(op)
        if dt != "i1":
            raise UnsupportedOpError(op.operation.name, str(op.location), "bitwise ops on integers")
        known = None
        if _known_ok(ins) and len({len(v.known) for v in ins}) == 1:
            fn = {"relax.logical_and": _and_expr, "relax.logical_or": _or_expr,
                  "relax.logical_not": lambda xs: const(1) - xs[0]}[relax_name]
            facts = im.int_facts()
            known = [_bool_decided(fn([v.known[i] for v in ins]), facts) for i in range(len(ins[0].known))]
            if all(e.is_const for e in known):
                return Val(None, dt, dims, known)
        return im.emit(relax_name, ins, len(dims), dt, dims=_merge_dims(dims, *[v.dims for v in ins]),
                       known=known)
    return conv


def _convert(im, op, ins):
    (x,) = ins
    dims, dt = _res(op)
    dims = _merge_dims(dims, x.dims)
    if x.known is not None and dt.startswith("i") and dt != "i1":
        return Val(None, dt, dims, [_wrap(e, dt) for e in x.known])
    if dt == x.dtype:
        return x
    return im.emit("relax.astype", [x], len(dims), dt, {"dtype": _dtype_attr(dt)}, dims=dims)


def _select(im, op, ins):
    c, a, b = ins
    rdims, dt = _res(op)
    if _known_ok(ins) and all(e.is_const for e in c.known):
        n = max(len(a.known), len(b.known))
        pick = [c.known[0 if len(c.known) == 1 else i].value for i in range(n)]
        if len(a.known) == len(b.known) == n and len(c.known) in (1, n):
            return Val(None, dt, _merge_dims(rdims, a.dims), [a.known[i] if pick[i] else b.known[i] for i in range(n)])
    known = None
    if _known_ok(ins) and dt not in _FLOATS and dt != "i1" and len(a.known) == len(b.known) \
            and len(c.known) in (1, len(a.known)):
        # c in {0, 1}: b + c * (a - b)
        known = [b.known[i] + c.known[0 if len(c.known) == 1 else i] * (a.known[i] - b.known[i])
                 for i in range(len(a.known))]
        return im.emit("relax.where", [c, a, b], len(rdims), dt, dims=_merge_dims(rdims, a.dims, b.dims, c.dims),
                       known=known)
    return im.emit("relax.where", [c, a, b], len(rdims), dt, dims=_merge_dims(rdims, a.dims, b.dims, c.dims))


_CMP = {"EQ": "relax.equal", "NE": "relax.not_equal", "LT": "relax.less", "LE": "relax.less_equal",
        "GT": "relax.greater", "GE": "relax.greater_equal"}


def _fold_compare(im, direction: str, a: Val, b: Val, op) -> list[Expr] | None:
    """Known integer (or boolean) operands whose relation the facts decide -> known booleans."""
    if not (_known_ok([a, b]) and len(a.known) == len(b.known)) or a.dtype in _FLOATS:
        return None
    if "compare_type" in op.attributes and "FLOAT" in str(op.attributes["compare_type"]):
        return None
    facts = im.int_facts()
    out = []
    for x, y in zip(a.known, b.known):
        d = x - y
        if d.is_const:
            v = {"EQ": d.value == 0, "NE": d.value != 0, "LT": d.value < 0, "LE": d.value <= 0,
                 "GT": d.value > 0, "GE": d.value >= 0}[direction]
        else:
            pos, neg = _decide(facts.prove_positive, d, facts), _decide(facts.prove_positive, -d, facts)
            zero = _decide(facts.prove_eq, d, facts, const(0))
            ge, le = pos or _decide(facts.prove_ge, d, facts, const(0)), neg or _decide(facts.prove_le, d, facts, const(0))
            v = {"EQ": True if zero else (False if pos or neg else None),
                 "NE": False if zero else (True if pos or neg else None),
                 "LT": True if neg else (False if ge else None), "LE": True if le else (False if pos else None),
                 "GT": True if pos else (False if le else None), "GE": True if ge else (False if neg else None)}[direction]
            if v is None:
                out.append(_bool_decided(_bool_expr(direction, d, facts), facts))
                continue
        out.append(const(int(v)))
    return out


def _compare(im, op, ins):
    a, b = ins
    rdims, _ = _res(op)
    from jaxlib.mlir.dialects import stablehlo as hlo

    direction = hlo.ComparisonDirectionAttr(op.attributes["comparison_direction"]).value
    if direction == "EQ" and _known_ok(ins) and len(a.known) == 1 == len(b.known) \
            and a.known[0].is_symbol and b.known[0].is_symbol:
        (sa,), (sb,) = a.known[0].symbols(), b.known[0].symbols()
        im.unions.append((sa, sb))
    if a.dtype in _TOTAL_ORDER_INT and "compare_type" in op.attributes \
            and hlo.ComparisonTypeAttr(op.attributes["compare_type"]).value == "TOTALORDER":
        # (jnp.searchsorted's: NaN sorts after +inf, -0.0 before +0.0)
        a, b = _total_order_key(im, a), _total_order_key(im, b)
    folded = _fold_compare(im, direction, a, b, op)
    if folded is not None and all(e.is_const for e in folded):
        return Val(None, "i1", _merge_dims(rdims, a.dims, b.dims), folded)
    # a symbolic boolean keeps its relax op (used as data) and its known value (used in shapes)
    return im.emit(_CMP[direction], [a, b], len(rdims), "i1", dims=_merge_dims(rdims, a.dims, b.dims),
                   known=folded)


def _clamp(im, op, ins):
    lo, x, hi = ins
    rdims, dt = _res(op)
    r = im.emit("relax.maximum", [x, lo], len(rdims), dt, dims=_merge_dims(rdims, x.dims))
    return im.emit("relax.minimum", [r, hi], len(rdims), dt, dims=r.dims)


def _expm1(im, op, ins):
    """e**x - 1 accurate near 0 (Kahan): u = e**x; u == 1 -> x (keeps -0); u - 1 == -1 -> -1;
    u == inf -> inf; else (u - 1) * (x / log(u)). On f16 / bf16 computed in f32 and rounded once,
    as XLA does (each step rounded to f16 was 1 ulp off for a tenth of the inputs)."""
    (x,) = ins
    rdims, out_dt = _res(op)
    dims = _merge_dims(rdims, x.dims)
    rank = len(rdims)
    dt = "f32" if out_dt in ("f16", "bf16") else out_dt
    if dt != out_dt:
        x = im.emit("relax.astype", [x], rank, dt, {"dtype": _dtype_attr(dt), "internal": True}, dims=dims)

    def c(v):
        return im.emit("relax.constant", [], 0, dt, {"value": _splat([], dt, v)}, dims=[])

    def e(name, *args, rdt=None):
        return im.emit(name, list(args), rank, rdt or dt, dims=dims)

    one, m1, inf = c(1.0), c(-1.0), c(float("inf"))
    u = e("relax.exp", x)
    um1 = e("relax.subtract", u, one)
    k = e("relax.multiply", um1, e("relax.divide", x, e("relax.log", u)))
    r = e("relax.where", e("relax.equal", um1, m1, rdt="i1"), um1, k)
    r = e("relax.where", e("relax.equal", u, inf, rdt="i1"), u, r)
    r = e("relax.where", e("relax.equal", u, one, rdt="i1"), x, r)
    if dt != out_dt:
        r = im.emit("relax.astype", [r], rank, out_dt, {"dtype": _dtype_attr(out_dt)}, dims=dims)
    return r


CONVERTERS = register_converters({
    "stablehlo.add": _binary("relax.add", _INT_FOLD["stablehlo.add"]),
    "stablehlo.subtract": _binary("relax.subtract", _INT_FOLD["stablehlo.subtract"]),
    "stablehlo.multiply": _multiply,
    "stablehlo.divide": _binary("relax.divide", _INT_FOLD["stablehlo.divide"]),
    "stablehlo.maximum": _binary("relax.maximum", _INT_FOLD["stablehlo.maximum"]),
    "stablehlo.minimum": _binary("relax.minimum", _INT_FOLD["stablehlo.minimum"]),
    "stablehlo.power": _binary("relax.power"),
    "stablehlo.remainder": _binary("relax.remainder", _INT_FOLD["stablehlo.remainder"]),
    "stablehlo.negate": _unary("relax.negative"),
    "stablehlo.abs": _unary("relax.abs"),
    "stablehlo.exponential": _unary("relax.exp"),
    "stablehlo.exponential_minus_one": _expm1,
    "stablehlo.log": _unary("relax.log"),
    "stablehlo.log_plus_one": _unary("relax.log1p"),
    "stablehlo.tanh": _unary("relax.tanh"),
    "stablehlo.logistic": _unary("relax.sigmoid"),
    "stablehlo.sqrt": _unary("relax.sqrt"),
    "stablehlo.rsqrt": _unary("relax.rsqrt"),
    "stablehlo.sine": _unary("relax.sin"),
    "stablehlo.cosine": _unary("relax.cos"),
    "stablehlo.floor": _unary("relax.floor"),
    "stablehlo.ceil": _unary("relax.ceil"),
    "stablehlo.sign": _unary("relax.sign"),
    "chlo.erf": _unary("relax.erf"),
    "stablehlo.compare": _compare,
    "stablehlo.select": _select,
    "stablehlo.clamp": _clamp,
    "stablehlo.convert": _convert,
})
