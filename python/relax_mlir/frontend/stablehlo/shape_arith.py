"""Shape arithmetic traced at import time: integer scalar / 1-D computations of dims (jax's
floor_divide, remainder, sign, compare, select, and/or/not) folded to known symbolic values, decided
by the shape algebra (by cases over floordiv/mod remainders where a direct proof fails).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from relax_mlir.frontend.stablehlo.common import Val, _merge_dims, _res
from relax_mlir.shape import Expr, Facts, const, floordiv, max_, min_, mod, sym


def _wrap(e: Expr, dt: str) -> Expr:
    """A constant wrapped to the signed range of `dt` (XLA's two's-complement integers)."""
    if not e.is_const:
        return e
    w = int(dt[1:])
    v = e.value & ((1 << w) - 1)
    return const(v - (1 << w) if v >> (w - 1) else v)


def _fold_divide(a: Expr, b: Expr, facts: Facts | None = None) -> Expr | None:
    """StableHLO integer divide: truncating, x / 0 = -1 (INT_MIN / -1 wraps, see _wrap). A symbolic
    quotient is kept only where the signs are proven (jax's floor_divide of a negated dim, as
    SAME padding computes it, divides -n); None otherwise."""
    if a.is_const and b.is_const:
        x, y = a.value, b.value
        if y == 0:
            return const(-1)
        q = abs(x) // abs(y)
        return const(-q if (x < 0) != (y < 0) else q)
    facts = facts or Facts()
    if facts.prove_positive(-b):
        q = _fold_divide(a, -b, facts)
        return None if q is None else -q
    if not facts.prove_positive(b):
        return None
    if _decide(facts.prove_ge, a, facts, const(0)):
        return floordiv(a, b)
    if _decide(facts.prove_le, a, facts, const(0)):
        return -floordiv(-a, b)
    # a of either sign (jax's floor_divide of n - 3 by a VALID window's stride, n >= 1): the floor
    # plus one where a < 0 leaves a remainder, [a < 0] * [a mod b > 0] as min / max indicators
    return floordiv(a, b) + min_(max_(-a, const(0)), const(1)) * min_(mod(a, b), const(1))


def _fold_remainder(a: Expr, b: Expr, facts: Facts | None = None) -> Expr | None:
    """StableHLO integer remainder: the sign of a, x % 0 = x; symbolic where the signs are proven."""
    if not (a.is_const and b.is_const):
        facts = facts or Facts()
        if facts.prove_positive(-b):
            b = -b
        if not facts.prove_positive(b):
            return None
        if _decide(facts.prove_ge, a, facts, const(0)):
            return mod(a, b)
        if _decide(facts.prove_le, a, facts, const(0)):
            return -mod(-a, b)
        return a - b * _fold_divide(a, b, facts)  # truncating: a - b * trunc(a / b)
    x, y = a.value, b.value
    if y == 0:
        return a
    r = abs(x) % abs(y)
    return const(-r if x < 0 else r)


# Folds of known integer values (None: not foldable, emit the op); results wrap to the dtype.
_INT_FOLD: dict[str, Callable] = {
    "stablehlo.add": lambda a, b, facts=None: a + b,
    "stablehlo.subtract": lambda a, b, facts=None: a - b,
    "stablehlo.multiply": lambda a, b, facts=None: a * b,
    "stablehlo.divide": _fold_divide,
    "stablehlo.remainder": _fold_remainder,
    "stablehlo.maximum": lambda a, b, facts=None: max_(a, b),
    "stablehlo.minimum": lambda a, b, facts=None: min_(a, b),
}


def _known_sign(e: Expr, facts: Facts) -> int | None:
    if _decide(facts.prove_positive, e, facts):
        return 1
    if _decide(facts.prove_positive, -e, facts):
        return -1
    if _decide(facts.prove_eq, e, facts, const(0)):
        return 0
    return None


def _bool_decided(e: Expr, facts: Facts) -> Expr:
    """A boolean Expr in {0, 1} as a constant where the facts (by cases) decide it."""
    if e.is_const:
        return e
    if _decide(facts.prove_eq, e, facts, const(0)):
        return const(0)
    if _decide(facts.prove_eq, e, facts, const(1)):
        return const(1)
    return e


def _and_expr(xs: list[Expr]) -> Expr:
    """The conjunction of booleans known as Exprs in {0, 1}."""
    out = const(1)
    for x in xs:
        if x.is_const and x.value == 0:
            return const(0)
        out = x if out.is_const else (out if x.is_const else out * x)
    return out


def _or_expr(xs: list[Expr]) -> Expr:
    out = const(0)
    for x in xs:
        if x.is_const and x.value != 0:
            return const(1)
        out = x if out.is_const else (out if x.is_const else max_(out, x))
    return out


def _positive_indicator(e: Expr, facts: Facts) -> Expr:
    """[e > 0] for an integer e, as an Expr in {0, 1}."""
    if facts.prove_ge(e, 0) and facts.prove_le(e, 1):
        return e
    return min_(max_(e, const(0)), const(1))


def _bool_expr(direction: str, d: Expr, facts: Facts) -> Expr:
    """[d <direction> 0] as an Expr in {0, 1} (jax's floor_divide selects on the remainder's sign)."""
    gt, lt = _positive_indicator(d, facts), _positive_indicator(-d, facts)
    return {"GT": gt, "LT": lt, "LE": const(1) - gt, "GE": const(1) - lt, "NE": gt + lt,
            "EQ": const(1) - gt - lt}[direction]


_CMP_FOLD = {"EQ": lambda f, a, b: (f.prove_eq(a, b), f.prove_lt(a, b) or f.prove_gt(a, b)),
             "NE": lambda f, a, b: (f.prove_lt(a, b) or f.prove_gt(a, b), f.prove_eq(a, b)),
             "LT": lambda f, a, b: (f.prove_lt(a, b), f.prove_ge(a, b)),
             "LE": lambda f, a, b: (f.prove_le(a, b), f.prove_gt(a, b)),
             "GT": lambda f, a, b: (f.prove_gt(a, b), f.prove_le(a, b)),
             "GE": lambda f, a, b: (f.prove_ge(a, b), f.prove_lt(a, b))}


def _scalar_known(v: Val) -> Expr | None:
    return v.known[0] if v.known is not None and len(v.known) == 1 and len(v.dims) == 0 else None


def _fold_shape_scalar(im, op, ins) -> Val | None:
    """The known value of a scalar sign / compare / select / and / or / not of known dim values,
    decided by the facts (jax computes `d // k` of a symbolic dim d through sign, compare,
    remainder, and, select: with d >= 0 and k > 0 the correction branch is provably not taken).
    None when the value is not decided: the op is converted as usual."""
    name = op.operation.name
    if name not in ("stablehlo.sign", "stablehlo.compare", "stablehlo.select", "stablehlo.and", "stablehlo.or",
                    "stablehlo.not") or len(op.results) != 1:
        return None
    rdims, dt = _res(op)
    if rdims or not (dt == "i1" or dt in ("i8", "i16", "i32", "i64")):
        return None
    vals = [_scalar_known(v) for v in ins]
    if any(len(v.dims) != 0 for v in ins):
        return None
    facts = im.int_facts()

    def out(e):
        return Val(None, dt, [], [e])

    if name == "stablehlo.sign":
        a = vals[0]
        if a is None:
            return None
        for c, ok in ((1, facts.prove_gt(a, 0)), (0, facts.prove_eq(a, 0)), (-1, facts.prove_lt(a, 0))):
            if ok:
                return out(const(c))
        return None
    if name == "stablehlo.compare":
        from jaxlib.mlir.dialects import stablehlo as hlo
        a, b = vals
        direction = hlo.ComparisonDirectionAttr(op.attributes["comparison_direction"]).value
        if a is None or b is None or direction not in _CMP_FOLD:
            return None
        if ins[0].dtype == "i1" or "compare_type" in op.attributes and \
                hlo.ComparisonTypeAttr(op.attributes["compare_type"]).value == "UNSIGNED":
            if not (a.is_const and b.is_const):
                return None
            w = 1 if ins[0].dtype == "i1" else int(ins[0].dtype[1:])
            a, b = const(a.value % (1 << w)), const(b.value % (1 << w))
        yes, no = _CMP_FOLD[direction](facts, a, b)
        return out(const(1)) if yes else out(const(0)) if no else None
    if name == "stablehlo.select":
        p = vals[0]
        if p is None or not p.is_const:
            return None
        chosen = ins[1] if p.value else ins[2]
        return chosen if chosen.known is not None else None
    if dt != "i1":
        return None
    if name == "stablehlo.not":
        return out(const(1 - vals[0].value)) if vals[0] is not None and vals[0].is_const else None
    consts = [v.value for v in vals if v is not None and v.is_const]
    if name == "stablehlo.and" and 0 in consts or name == "stablehlo.or" and 1 in consts:
        return out(const(0 if name == "stablehlo.and" else 1))  # decided by one operand
    if len(consts) == 2:
        return out(const(int(all(consts)) if name == "stablehlo.and" else int(any(consts))))
    return None


def _divisors(e: Expr, out: set) -> set:
    """The constant divisors of the floordiv/mod atoms of e, and the symbols under them."""
    from relax_mlir.shape.expr import _CALLS

    for mono, _ in e.terms:
        for a in mono:
            node = _CALLS.get(a)
            if node is None:
                continue
            if node.kind in ("floordiv", "mod") and node.args[1].is_const:
                out.add(("c", abs(node.args[1].value)))
                out |= {("s", x) for x in node.args[0].symbols()}
            for x in node.args:
                _divisors(x, out)
    return out


def _decide(prove, e: Expr, facts: Facts, *rest) -> bool:
    """prove(e, *rest), else by cases: every symbol s under a floordiv/mod by constants (lcm L,
    at most 64 cases) written L*q + r for each remainder r, where floordiv and mod simplify
    (jax's floor_divide of -n by 2 leaves 2*floordiv(n, 2) + 2*mod(n, 2) - n + 1, which is
    mod(n, 2) + 1 >= 1 in both cases)."""
    if prove(e, *rest):
        return True
    found = _divisors(e, set())
    divs = [c for k, c in found if k == "c"]
    names = sorted(x for k, x in found if k == "s")
    if not divs or not names:
        return False
    step = 1
    for c in divs:
        step = step * c // np.gcd(step, c)
    if step ** len(names) > 64:
        return False
    import itertools

    for rs in itertools.product(range(step), repeat=len(names)):
        mapping = {}
        lower = {k: v for k, v in facts.lower.items() if k not in names}
        for nm, r in zip(names, rs):
            q = f"zzQ{nm}"
            mapping[nm] = sym(q) * step + r
            lower[q] = max(0, -((r - facts.lower.get(nm, 0)) // step))  # L*q + r >= lower(s)
        case = Facts(lower=lower)
        args = [x.subs(mapping) if isinstance(x, Expr) else x for x in rest]
        if not getattr(case, prove.__name__)(e.subs(mapping), *args):
            return False
    return True


# Known-value folds of the scalar integer / i1 arithmetic jax emits for shapes (its floor_divide
# and remainder functions: sign, compare, select, and/or/not, remainder), where the shape
# algebra proves the outcome; None leaves the op to its converter.
def _sign_of(e: Expr, facts) -> int | None:
    if e.is_const:
        return (e.value > 0) - (e.value < 0)
    if facts.prove_gt(e, 0):
        return 1
    if facts.prove_lt(e, 0):
        return -1
    return None


def _compare_known(direction: str, a: Expr, b: Expr, facts) -> int | None:
    d = a - b
    s = _sign_of(d, facts)
    if direction in ("EQ", "NE"):
        if s is None:
            return None
        return int((s == 0) == (direction == "EQ"))
    if s is None:  # weak facts: a >= b or a <= b without the sign of a - b
        if direction in ("GE", "LT") and facts.prove_ge(d, 0):
            return int(direction == "GE")
        if direction in ("LE", "GT") and facts.prove_le(d, 0):
            return int(direction == "LE")
        return None
    return int({"LT": s < 0, "LE": s <= 0, "GT": s > 0, "GE": s >= 0}[direction])


def fold_known(im, op, ins):
    """The known values of a scalar/1-D integer or i1 op whose operands are known, or None."""
    name = op.operation.name
    if name not in _KNOWN_FOLDS or not ins or any(v.known is None for v in ins):
        return None
    rdims, dt = _res(op)
    if dt not in ("i1", "i8", "i16", "i32", "i64") or len(rdims) > 1:
        return None
    n = max(len(v.known) for v in ins)
    if any(len(v.known) not in (1, n) for v in ins):
        return None
    cols = [[v.known[t if len(v.known) > 1 else 0] for v in ins] for t in range(n)]
    facts = shape_facts(im)
    out = []
    for c in cols:
        r = _KNOWN_FOLDS[name](op, c, facts)
        if r is None:
            return None
        out.append(r if isinstance(r, Expr) else const(int(r)))
    return Val(None, dt, _merge_dims(rdims, [const(n)] if rdims else []), out)


def _fold_compare_known(op, c, facts):
    from jaxlib.mlir.dialects import stablehlo as hlo
    return _compare_known(hlo.ComparisonDirectionAttr(op.attributes["comparison_direction"]).value,
                          c[0], c[1], facts)


def _fold_logic(fn):
    def fold(op, c, facts):
        if any(not x.is_const for x in c) or _res(op)[1] != "i1":
            return None
        return fn(*[bool(x.value) for x in c])
    return fold


def _fold_remainder_sym(op, c, facts):
    a, b = c
    if a.is_const and b.is_const:
        return _fold_remainder(a, b)
    if facts.prove_ge(a, 0) and b.is_const and b.value > 0:
        return mod(a, b)
    return None


_KNOWN_FOLDS = {
    "stablehlo.sign": lambda op, c, facts: _sign_of(c[0], facts),
    "stablehlo.compare": _fold_compare_known,
    "stablehlo.select": lambda op, c, facts: (c[1] if c[0].value else c[2]) if c[0].is_const else None,
    "stablehlo.and": _fold_logic(lambda a, b: a and b),
    "stablehlo.or": _fold_logic(lambda a, b: a or b),
    "stablehlo.not": _fold_logic(lambda a: not a),
    "stablehlo.remainder": _fold_remainder_sym,
}


def shape_facts(im) -> Facts:
    """What the import knows of its symbols: jax dimension variables >= 1, expression dims'
    lower bounds."""
    lower = {n: 1 for n in im.dim_vars}
    for n, v in getattr(im, "extra_lower", {}).items():
        lower[n] = max(lower.get(n, 0), v)
    return Facts(lower=lower, upper=dict(getattr(im, "upper", {})))
