"""What is known about shape symbols, and a sound (incomplete) prover over that knowledge.

`Facts` holds per-symbol bounds and equalities. Every symbol is a dim, so >= 0; a lower bound
only tightens that. Equalities are oriented into a substitution that eliminates one symbol
each (`n == 2*m` becomes `n -> 2*m`); one that eliminates none (`2*n == 3*m`) is kept as a
residual that only `prove_eq` uses.

To prove `d >= 0` the prover substitutes the equalities, shifts every symbol by its lower
bound (`x = lb + x'`, `x' in [0, ub - lb]`) so that terms can cancel, and bounds the result by
interval arithmetic over atoms. When that is not enough it removes one node and tries again:
`mod(x, y)` becomes `x - y*floordiv(x, y)` (exact), a lone `floordiv(x, c)` is replaced by the
bound that helps (`x/c` or `(x - c + 1)/c`, after scaling by c), and `min`/`max` split into
cases. It never proves a false statement; it may fail to prove a true one.
"""
from __future__ import annotations

import math
import operator
from typing import Iterable, Mapping

from relax_mlir.shape.expr import (
    _CALLS, _INF, Expr, _as_expr, _atom_expr, _call_interval, _pmul, _substitute, _terms_interval,
    ZERO, floordiv, max_, min_, sym,
)

__all__ = ["Facts"]

_BUDGET = 3  # node eliminations per proof attempt
_MEMO_MAX = 1 << 16
_RESIDUE_MAX = 12  # cases of a proof by residue classes
_RANGE_CUTS = 4  # cuts of a symbol's range in a proof by cases
EXHAUSTIVE = 1 << 12  # a relation over one symbol bounded to fewer values is checked at each of them

Operand = "Expr | int | str"


class ContradictoryFacts(ValueError):
    """Equalities no assignment of the symbols satisfies (2*s == 2*q + 1)."""


class Facts:
    """Bounds and equalities over shape symbols (immutable); proves relations between Exprs."""

    __slots__ = ("_lower_in", "_upper_in", "_equalities", "_lo", "_hi", "_subst", "_residuals",
                 "_atom_ivs", "_memo")

    def __init__(self, lower: Mapping[str, int] | None = None, upper: Mapping[str, int] | None = None,
                 equalities: Iterable[tuple[Operand, Operand]] | None = None):
        self._lower_in = {k: operator.index(v) for k, v in (lower or {}).items()}
        self._upper_in = {k: operator.index(v) for k, v in (upper or {}).items()}
        self._equalities = tuple((Expr.from_value(a), Expr.from_value(b)) for a, b in (equalities or ()))
        lo = {k: v for k, v in self._lower_in.items() if v > 0}
        hi = dict(self._upper_in)
        self._subst, self._residuals = _orient(self._equalities)
        for x, rhs in self._subst.items():
            _derive_bounds(x, rhs, lo, hi)
        self._lo = lo  # symbol -> lower bound, only where > 0
        self._hi = hi  # symbol -> upper bound
        self._atom_ivs: dict = {}
        self._memo: dict = {}

    # -- views and derived facts ------------------------------------------------------------------

    @property
    def lower(self) -> dict[str, int]:
        return dict(self._lower_in)

    @property
    def upper(self) -> dict[str, int]:
        return dict(self._upper_in)

    @property
    def equalities(self) -> tuple[tuple[Expr, Expr], ...]:
        return self._equalities

    def __repr__(self) -> str:
        eqs = ", ".join(f"({a}, {b})" for a, b in self._equalities)
        return f"Facts(lower={self._lower_in}, upper={self._upper_in}, equalities=[{eqs}])"

    def with_equality(self, a: Operand, b: Operand) -> "Facts":
        """These facts plus a == b."""
        return Facts(self._lower_in, self._upper_in, self._equalities + ((a, b),))

    def with_lower(self, name: str, v: int) -> "Facts":
        """These facts plus name >= v."""
        lower = dict(self._lower_in)
        lower[name] = max(lower.get(name, 0), v)
        return Facts(lower, self._upper_in, self._equalities)

    def with_upper(self, name: str, v: int) -> "Facts":
        """These facts plus name <= v."""
        upper = dict(self._upper_in)
        upper[name] = min(upper[name], v) if name in upper else v
        return Facts(self._lower_in, upper, self._equalities)

    # -- relations ---------------------------------------------------------------------------------

    def prove_le(self, a: Operand, b: Operand) -> bool:
        """True only if a <= b holds under these facts."""
        return self._nonneg(_as_expr(b) - _as_expr(a))

    def prove_ge(self, a: Operand, b: Operand) -> bool:
        """True only if a >= b holds under these facts."""
        return self._nonneg(_as_expr(a) - _as_expr(b))

    def prove_lt(self, a: Operand, b: Operand) -> bool:
        """True only if a < b holds under these facts."""
        return self._nonneg(_as_expr(b) - _as_expr(a) - 1)

    def prove_gt(self, a: Operand, b: Operand) -> bool:
        """True only if a > b holds under these facts."""
        return self._nonneg(_as_expr(a) - _as_expr(b) - 1)

    def prove_positive(self, a: Operand) -> bool:
        """True only if a >= 1 holds under these facts."""
        return self._nonneg(_as_expr(a) - 1)

    def prove_eq(self, a: Operand, b: Operand) -> bool:
        """True only if a == b holds under these facts."""
        a = _as_expr(a)
        b = _as_expr(b)
        return a == b or self._prove_eq(a, b) or self._eq_by_small_values(a, b)

    def _eq_by_small_values(self, a: Expr, b: Expr, count: int = 4) -> bool:
        """a == b over one symbol x >= lo: by evaluation at x = lo .. lo + count - 1, and for
        x >= lo + count under the facts raised to that bound, which decide more min / max nodes;
        over a symbol bounded to fewer than EXHAUSTIVE values, by evaluation at each of them.
        jax's clamped slice sizes are piecewise in the length with breaks at small constants:
        x[:, 1:-3] and x[:, 2:-2] of a length k are both max(0, k - 4), written with
        min(1, max(0, k - 1)) and min(1, max(0, k - 2)): equal, decided only from k >= 3
        (BigBird's block-sparse attention concatenates them)."""
        d = a - b
        syms = d.symbols()
        if len(syms) != 1:
            return False
        (x,) = syms
        lo, hi = self._lo.get(x, 0), self._hi.get(x)
        if hi is not None and hi - lo < EXHAUSTIVE:
            # a bounded symbol: every value of its range (a causal mask table[:s + 2, :s + 2] of
            # 64 rows given s <= 62 is min(64, s + 2) = s + 2, but only below the bound); sound
            # whatever else the facts say of other symbols
            count = hi - lo + 1
        # (Equalities among the facts only narrow the values x takes: evaluating at every x >= lo
        # is a superset, and the raised facts below drop them, a weaker assumption. A jax
        # constraint n >= m, or an argument dim 2*n, kept this proof from a pool's gradient.)
        try:
            for v in range(lo, lo + count):
                if hi is not None and v > hi:
                    return True
                if d.evaluate({x: v}) != 0:
                    return False
        except (ZeroDivisionError, ValueError):
            return False
        if hi is not None and lo + count > hi:
            return True
        raised = Facts(lower={**self._lower_in, x: lo + count}, upper=self._upper_in)
        return raised._prove_eq(a, b)

    def _prove_eq(self, a: Expr, b: Expr) -> bool:
        d = self._reduce(a - b)
        if not d._t:
            return True
        if d.is_const:
            return False
        mods = {}
        for m, _ in d._t:
            for at in m:
                info = _CALLS.get(at)
                if info is not None and info.kind == "mod":
                    x, y = info.args
                    mods[at] = x - y * floordiv(x, y)
        if mods and not _substitute(d, mods, {})._t:
            return True
        if any(_proportional(d, r) for r in self._residuals):
            return True
        if self._nonneg(d) and self._nonneg(-d):
            return True
        # min / max nodes whose order the facts decide, resolved bottom-up (jax's clamped slice
        # sizes: max(-min(a, max(-a*min(0, a - min(1, a)), 0)) + min(a, min(1, a)), 0) for a >= 0
        # is min(1, a); seed 2351420); each replacement is proved, so the result is equal
        sa, sb = self._resolve_minmax(a, 0), self._resolve_minmax(b, 0)
        if sa is a and sb is b:
            return False
        sd = self._reduce(sa - sb)
        return not sd._t or (not sd.is_const and self._nonneg(sd) and self._nonneg(-sd))

    def _resolve_minmax(self, e: Expr, depth: int) -> Expr:
        """e with every min / max node whose arguments the facts order replaced by the argument
        it takes (arguments resolved first); e itself when nothing changes."""
        if depth > 8:
            return e
        repl: dict = {}
        changed = False
        for m, _ in e._t:
            for at in m:
                info = _CALLS.get(at)
                if info is None or at in repl:
                    continue
                args = [self._resolve_minmax(x, depth + 1) for x in info.args]
                if info.kind not in ("min", "max"):  # floordiv / mod: their operands resolved
                    if any(x is not y for x, y in zip(args, info.args)):
                        changed = True
                        repl[at] = floordiv(*args) if info.kind == "floordiv" else args[0] % args[1]
                    continue
                def better(y, x, is_min=info.kind == "min"):  # y provably wins over x
                    diff = self._reduce(x - y if is_min else y - x)
                    return self._search(diff, _BUDGET, True)
                keep = []
                for i, x in enumerate(args):  # drop x when another argument provably wins over it
                    if not any(j != i and better(y, x) and (j < i or not better(x, y))
                               for j, y in enumerate(args)):
                        keep.append(x)
                if not keep:
                    keep = args[:1]
                node = keep[0] if len(keep) == 1 else (min_(*keep) if info.kind == "min" else max_(*keep))
                if len(keep) < len(info.args) or any(x is not y for x, y in zip(args, info.args)):
                    changed = True
                repl[at] = node
        return _substitute(e, repl, {}) if changed else e

    # -- bounds ------------------------------------------------------------------------------------

    def upper_bound(self, e: Operand) -> int | None:
        """An integer >= e at every binding these facts allow; None when e is unbounded above."""
        hi = self._bounds(_as_expr(e))[1]
        return None if hi.__class__ is float else hi

    def lower_bound(self, e: Operand) -> int | None:
        """An integer <= e at every binding these facts allow; None when e is unbounded below."""
        lo = self._bounds(_as_expr(e))[0]
        return None if lo.__class__ is float else lo

    def _bounds(self, e: Expr) -> tuple:
        r = self._reduce(e)
        lo, hi = self._iv(r)
        if r is not e:
            lo2, hi2 = self._iv(e)
            lo, hi = max(lo, lo2), min(hi, hi2)
        return lo, hi

    # -- machinery ---------------------------------------------------------------------------------

    def _reduce(self, e: Expr) -> Expr:
        s = self._subst
        if s and not e.symbols().isdisjoint(s):
            return _substitute(e, s, {})
        return e

    def _sym_iv(self, a: str) -> tuple:
        return self._lo.get(a, 0), self._hi.get(a, _INF)

    def _shifted_sym_iv(self, a: str) -> tuple:
        h = self._hi.get(a, _INF)
        return 0, (h if h.__class__ is float else h - self._lo.get(a, 0))

    def _atom_iv(self, a: str) -> tuple:
        info = _CALLS.get(a)
        if info is None:
            return self._lo.get(a, 0), self._hi.get(a, _INF)
        return self._call_iv(a, info)

    def _shifted_atom_iv(self, a: str) -> tuple:
        info = _CALLS.get(a)
        if info is None:
            return self._shifted_sym_iv(a)
        return self._call_iv(a, info)

    def _call_iv(self, a: str, info) -> tuple:
        r = self._atom_ivs.get(a)
        if r is None:
            lo, hi = _call_interval(info.kind, info.args, self._iv)
            r = self._atom_ivs[a] = (max(lo, info.lo), min(hi, info.hi))
        return r

    def _iv(self, e: Expr) -> tuple:
        """Interval of e, with symbols shifted by their lower bounds so that terms can cancel."""
        t = e._t
        lo = self._lo
        if lo and any(a in lo for m, _ in t for a in m):
            acc: dict = {}
            for m, k in t:
                part = {(): k}
                for a in m:
                    l = lo.get(a)
                    if l:
                        part = _pmul(part.items(), (((a,), 1), ((), l)))
                    else:
                        part = {(tuple(sorted(pm + (a,))) if pm else (a,)): pk for pm, pk in part.items()}
                for pm, pk in part.items():
                    v = acc.get(pm, 0) + pk
                    if v:
                        acc[pm] = v
                    else:
                        del acc[pm]
            return _terms_interval(acc.items(), self._shifted_atom_iv)
        return _terms_interval(t, self._atom_iv)

    def _nonneg(self, d: Expr, split: bool = True) -> bool:
        t = d._t
        if not t:
            return True
        if len(t) == 1 and not t[0][0]:
            return t[0][1] >= 0
        memo = self._memo
        r = memo.get(d)
        if r is None:
            if len(memo) >= _MEMO_MAX:
                memo.clear()
            red = self._reduce(d)
            r = (self._search(red, _BUDGET) or (red is not d and self._iv(d)[0] >= 0)
                 or (split and (self._by_residue(red) or self._by_ranges(red))))
            memo[d] = r
        return r

    def _by_residue(self, d: Expr) -> bool:
        """Proof by cases on the residue of a symbol that d divides by constants: with c the lcm
        of the divisors (at most _RESIDUE_MAX), every s = c*q + r for r in 0..c-1 makes each
        floordiv(s + k, c') and mod(s + k, c') a polynomial in q, and each case is proved alone
        (jax's SAME padding of an avg_pool gradient whose stride exceeds its window:
        -3*floordiv(h + max(0, 3*floordiv(h, 3) - h + 3*min(1, mod(h, 3)) - 1) + 1, 3) + h + 2
        is mod(h + 2, 3) in each residue class of h, never negative)."""
        divisors: dict = {}
        for info in _nodes(d):
            if info.kind in ("floordiv", "mod") and info.args[1].is_const and info.args[1].value > 1:
                for x in info.args[0].symbols():
                    divisors.setdefault(x, set()).add(info.args[1].value)
        if not divisors:
            return False
        s = min(divisors)
        c = math.lcm(*divisors[s])
        if c > _RESIDUE_MAX:
            return False
        names = d.symbols() | set(self._lower_in) | set(self._upper_in)
        q = f"{s}_res{c}"
        while q in names:
            q += "_"
        lo, hi = self._lo.get(s, 0), self._hi.get(s, _INF)
        for r in range(c):
            if r > hi:
                continue
            lower = {k: v for k, v in self._lower_in.items() if k != s}
            upper = {k: v for k, v in self._upper_in.items() if k != s}
            lower[q] = max(0, -((r - lo) // c))  # c*q + r >= lo
            if hi.__class__ is not float:
                upper[q] = (hi - r) // c
            m = {s: sym(q) * c + r}
            eqs = [(_substitute(a, m, {}), _substitute(b, m, {})) for a, b in self._equalities]
            try:
                case = Facts(lower, upper, eqs)
            except ContradictoryFacts:  # no value in this residue class meets the equalities
                continue  # (a dim 2*s taken mod 2: the odd class): nothing to prove there
            if not case._nonneg(_substitute(d, m, {}), split=False):
                return False
        return True

    def _by_ranges(self, d: Expr) -> bool:
        """Proof by cases on a symbol's range, split where a min / max node's arguments cross:
        min(a, b) with a - b = c*s + k is a below s = -k/c and b above, so each piece resolves the
        node (h - min(2, h) - max(0, h - 2) == 0: jax's size of a VALID max_pool's gradient
        window, which no bound on the nodes alone shows).  Up to _RANGE_CUTS cuts of one symbol."""
        cuts: dict = {}
        for info in _nodes(d):
            if info.kind not in ("min", "max"):
                continue
            args = info.args
            for i in range(len(args)):
                for j in range(i + 1, len(args)):
                    diff = args[i] - args[j]
                    lin = _linear_in_one(diff)
                    if lin is not None:
                        x, c, k = lin  # c*x + k == 0 at x = -k/c: x <= floor, x >= ceil
                        cuts.setdefault(x, set()).add((-k) // c)
        if not cuts:
            return False
        s = min(cuts)
        lo, hi = self._lo.get(s, 0), self._hi.get(s, _INF)
        points = sorted(t for t in cuts[s] if lo <= t < hi)[:_RANGE_CUTS]
        if not points:
            return False
        bounds = [lo] + [t + 1 for t in points]
        for i, start in enumerate(bounds):
            end = points[i] if i < len(points) else hi
            lower = dict(self._lower_in)
            upper = dict(self._upper_in)
            lower[s] = start
            if end.__class__ is not float:
                upper[s] = end
            if not Facts(lower, upper, self._equalities)._nonneg(d, split=False):
                return False
        return True

    def _search(self, d: Expr, budget: int, minmax_first: bool = False, scale: int = 1) -> bool:
        """True only if d > -scale at every binding the facts allow.  The caller's claim is
        d0 >= 0 for an integer-valued d0 with d <= scale*d0 (d0 itself, scale 1, at the start);
        then d > -scale gives d0 > -1, so d0 >= 0.  Replacing c*floordiv(x, c) by its lower end
        x - c + 1 multiplies the scale by c: floordiv(h + 1, 2) + floordiv(h, 2) - h >= 0 is
        2*... >= -1 after both floordivs, which only the integrality of d0 closes."""
        t = d._t
        floor = 1 - scale  # d >= floor is what to show (d is integer-valued)
        if not t:
            return True
        if len(t) == 1 and not t[0][0]:
            return t[0][1] >= floor
        if self._iv(d)[0] >= floor:
            return True
        if budget <= 0:
            return False
        budget -= 1
        where: dict = {}  # node text -> monomials it occurs in
        for m, k in t:
            for a in m:
                if a in _CALLS:
                    where.setdefault(a, []).append((m, k))
        items = list(where.items())
        # mod nodes first: their exact form x - y*floordiv(x, y) links them to the floordiv nodes
        # of the same operands before floordiv's inexact bounds would lose the link
        # (2*floordiv(h, 2) + 2*mod(h, 2) >= 1 for h >= 1: the rounded-up half of h)
        if minmax_first:  # and min / max nodes before both
            items.sort(key=lambda kv: _ORDER_MINMAX_FIRST.get(_CALLS[kv[0]].kind, 2))
        else:
            items.sort(key=lambda kv: _CALLS[kv[0]].kind != "mod")
        for a, occ in items:
            info = _CALLS[a]
            kind = info.kind
            lone = occ[0][1] if len(occ) == 1 and occ[0][0] == (a,) else None
            if kind == "mod":
                x, y = info.args
                exact = _substitute(d, {a: x - y * floordiv(x, y)}, {})
                if lone is None or self._iv(y)[0] < 0:
                    return self._search(exact, budget, minmax_first, scale)
                rest = d - _atom_expr(a) * lone
                if lone > 0:  # mod(x, y) >= 0 for y > 0
                    return self._search(rest, budget, minmax_first, scale) or self._search(exact, budget, minmax_first, scale)
                # mod(x, y) <= y - 1, and mod(x, y) <= x when x >= 0
                return (self._search(rest + (y - 1) * lone, budget, minmax_first, scale)
                        or (self._iv(x)[0] >= 0 and self._search(rest + x * lone, budget, minmax_first, scale))
                        or self._search(exact, budget, minmax_first, scale))
            if kind == "floordiv":
                x, y = info.args
                if lone is None:
                    continue
                if not y.is_const:
                    if lone < 0 and self._iv(x)[0] >= 0 and self._iv(y)[0] >= 0:
                        # floordiv(x, y) <= x for x >= 0, y >= 1
                        return self._search(d - _atom_expr(a) * lone + x * lone, budget, minmax_first, scale)
                    if self._iv(y)[0] >= 1:
                        # for y >= 1, floordiv(x, y) lies in [min(x, 0), max(x, 0)]: x's sign and at
                        # most |x| (floordiv(-1, m) >= -1: a stride-m slice's count n + floordiv(-1, m) + 1)
                        rest = d - _atom_expr(a) * lone
                        end = min_(x, ZERO) if lone > 0 else max_(x, ZERO)
                        if self._search(rest + end * lone, budget, minmax_first, scale):
                            return True
                    continue
                c = y.value
                rest = (d - _atom_expr(a) * lone) * c
                # c*floordiv(x, c) lies in [x - c + 1, x]; use the end that bounds d from below
                return self._search(rest + (x * lone if lone < 0 else (x - (c - 1)) * lone), budget,
                                    minmax_first, scale * c)
            args = info.args
            if lone is not None:
                rest = d - _atom_expr(a) * lone
                branches = (rest + arg * lone for arg in args)
                if (kind == "min") == (lone < 0):  # d >= rest + lone*arg for every arg
                    ok = any(self._search(b, budget, minmax_first, scale) for b in branches)
                else:
                    ok = all(self._search(b, budget, minmax_first, scale) for b in branches)
            else:
                ok = all(self._search(_substitute(d, {a: arg}, {}), budget, minmax_first, scale) for arg in args)
            if ok or not minmax_first:
                return ok
            # minmax_first: another min / max node may still decide it (each attempt is sound)
        return False


def _nodes(e: Expr):
    """The min / max / floordiv / mod nodes of e, nested ones included, each once."""
    seen: set = set()
    stack = [e]
    while stack:
        x = stack.pop()
        for m, _ in x._t:
            for a in m:
                info = _CALLS.get(a)
                if info is not None and a not in seen:
                    seen.add(a)
                    yield info
                    stack.extend(info.args)


def _linear_in_one(e: Expr):
    """(symbol, c, k) when e == c*symbol + k for a bare symbol and c != 0, else None."""
    t = e._t
    sym_term = None
    k = 0
    for m, v in t:
        if not m:
            k = v
        elif len(m) == 1 and m[0] not in _CALLS and sym_term is None:
            sym_term = (m[0], v)
        else:
            return None
    if sym_term is None:
        return None
    return sym_term[0], sym_term[1], k


_ORDER_MINMAX_FIRST = {"min": 0, "max": 0, "mod": 1}


def _proportional(d: Expr, r: Expr) -> bool:
    """d == q*r for a rational q (so r == 0 implies d == 0)."""
    dt, rt = d._t, r._t
    if len(dt) != len(rt):
        return False
    k0, j0 = dt[0][1], rt[0][1]
    return all(m == rm and k * j0 == j * k0 for (m, k), (rm, j) in zip(dt, rt))


def _orient(eqs: tuple) -> tuple[dict, list]:
    """Turn equalities into a fully reduced substitution, plus residual differences."""
    subst: dict[str, Expr] = {}
    residuals: list[Expr] = []
    for a0, b0 in eqs:
        a = _substitute(a0, subst, {}) if subst else a0
        b = _substitute(b0, subst, {}) if subst else b0
        d = a - b
        if not d._t:
            continue
        if d.is_const:
            raise ContradictoryFacts(f"contradictory shape facts: {a0} == {b0}")
        x = _pick(a, b, d)
        if x is None:
            residuals.append(-d if d._t[0][1] < 0 else d)
            continue
        c = next(k for m, k in d._t if m == (x,))
        rhs = -(d - sym(x) * c) * c  # d == c*x + rest with c = +-1, so x == -rest*c
        one = {x: rhs}
        subst = {y: (_substitute(r, one, {}) if x in r.symbols() else r) for y, r in subst.items()}
        subst[x] = rhs
        kept = []
        for r in residuals:
            r = _substitute(r, one, {}) if x in r.symbols() else r
            if r.is_const:
                if r._t:
                    raise ContradictoryFacts(f"contradictory shape facts: {a0} == {b0}")
                continue
            kept.append(r)
        residuals = kept
    return subst, residuals


def _pick(a: Expr, b: Expr, d: Expr) -> str | None:
    """A symbol that d has only as a lone +-1 term, so the equality d == 0 solves for it."""
    inside: set = set()
    count: dict = {}
    lone: set = set()
    for m, k in d._t:
        for at in set(m):
            info = _CALLS.get(at)
            if info is not None:
                inside |= info.symbols
            else:
                count[at] = count.get(at, 0) + 1
        if len(m) == 1 and (k == 1 or k == -1) and m[0] not in _CALLS:
            lone.add(m[0])
    ok = {x for x in lone if count[x] == 1 and x not in inside}
    if not ok:
        return None
    for side in (a, b):
        if side.is_symbol and side._t[0][0][0] in ok:
            return side._t[0][0][0]
    return max(ok)


def _derive_bounds(x: str, rhs: Expr, lo: dict, hi: dict) -> None:
    """Given x == c*m + k, carry the bounds of x over to m."""
    t = rhs._t
    if not t or len(t[0][0]) != 1 or t[0][0][0] in _CALLS or len(t) > 2 or (len(t) == 2 and t[1][0]):
        return
    (m,), c = t[0]
    k = t[1][1] if len(t) == 2 else 0
    xl, xh = lo.get(x, 0), hi.get(x)
    if c > 0:
        new_l = -((k - xl) // c)
        new_h = None if xh is None else (xh - k) // c
    else:
        new_h = (xl - k) // c
        new_l = None if xh is None else -((k - xh) // c)
    if new_l is not None and new_l > lo.get(m, 0):
        lo[m] = new_l
    if new_h is not None and (m not in hi or new_h < hi[m]):
        hi[m] = new_h
