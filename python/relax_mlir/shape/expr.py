"""Symbolic integer expressions for tensor dims, kept in one canonical form.

An `Expr` is a polynomial: a sum of integer-coefficient monomials over atoms. An atom is a
symbol (`n`) or a non-polynomial node (`floordiv(x, y)`, `mod(x, y)`, `min(...)`, `max(...)`)
whose arguments are themselves canonical. MLIR compares types by their text, so the text is
canonical: `n*2`, `2*n` and `n + n` all print `2*n`; `(n+1)*4` prints `4*n + 4`.

Representation. A monomial is a sorted tuple of atom keys (a symbol's key is its name; a
node's key is its printed text, registered in `_CALLS`), and an expression is the tuple of
its `(monomial, coefficient)` pairs in print order: higher degree first, then by atom text,
the constant last. Keys are plain strings, so hashing, comparing and sorting stay in C.

Folding is exact over all integers, except two rules that use "every symbol is a dim, so
>= 0": dropping a min/max argument that another provably bounds (`min(n, 2*n) -> n`), and
`ceildiv(a, b) -> floordiv(a + b - 1, b)` for a symbolic divisor that is then > 0.
"""
from __future__ import annotations

import functools
import math
import operator
import re
from typing import Mapping

__all__ = [
    "Expr", "ShapeParseError", "parse", "const", "sym",
    "floordiv", "ceildiv", "mod", "min_", "max_", "PyCode", "make_function",
]

_INF = float("inf")
_NINF = float("-inf")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

Mono = tuple  # tuple[str, ...], sorted atom keys
Terms = tuple  # tuple[tuple[Mono, int], ...], in print order


class ShapeParseError(ValueError):
    """Malformed shape-expression text; `pos` indexes the offending character."""

    def __init__(self, message: str, text: str, pos: int):
        self.text = text
        self.pos = pos
        super().__init__(f"{message} at position {pos} in shape expression {text!r}\n"
                         f"  {text}\n  {' ' * pos}^")


class _Call:
    """A registered non-polynomial atom: its kind, canonical args and intrinsic interval."""

    __slots__ = ("kind", "args", "symbols", "lo", "hi", "nonneg")

    def __init__(self, kind: str, args: tuple, symbols: frozenset, lo, hi):
        self.kind = kind
        self.args = args
        self.symbols = symbols
        self.lo = lo
        self.hi = hi
        self.nonneg = lo >= 0


_CALLS: dict[str, _Call] = {}  # atom text -> node; grows with the distinct nodes ever built

_new_object = object.__new__


def _term_key(t):
    m = t[0]
    return (-len(m), m)


class Expr:
    """A symbolic integer expression in canonical polynomial form (immutable, hashable)."""

    __slots__ = ("_t", "_h", "_s", "_syms")

    def __new__(cls, value: "int | str | Expr" = 0) -> "Expr":
        return Expr.from_value(value)

    # -- construction ------------------------------------------------------------------------

    @staticmethod
    def from_value(x: "int | str | Expr") -> "Expr":
        """An Expr from an int, expression text, or an Expr (returned as is)."""
        if x.__class__ is Expr:
            return x
        if x.__class__ is int:
            return const(x)
        if isinstance(x, str):
            return parse(x)
        if isinstance(x, Expr):
            return x
        try:
            return const(operator.index(x))
        except TypeError:
            raise TypeError(f"cannot make a shape expression from {type(x).__name__} {x!r}") from None

    # -- inspection ---------------------------------------------------------------------------

    @property
    def is_const(self) -> bool:
        t = self._t
        return not t or (len(t) == 1 and not t[0][0])

    @property
    def value(self) -> int:
        """The integer value of a constant; ValueError for a symbolic expression."""
        t = self._t
        if not t:
            return 0
        if len(t) == 1 and not t[0][0]:
            return t[0][1]
        raise ValueError(f"shape expression {self} is not a constant")

    @property
    def is_symbol(self) -> bool:
        """True for a bare symbol such as `n`."""
        t = self._t
        return len(t) == 1 and t[0][1] == 1 and len(t[0][0]) == 1 and t[0][0][0] not in _CALLS

    @property
    def terms(self) -> Terms:
        """The `(monomial, coefficient)` pairs in print order; a monomial is a tuple of atom texts."""
        return self._t

    def symbols(self) -> frozenset[str]:
        s = self._syms
        if s is None:
            acc = set()
            for mono, _ in self._t:
                for a in mono:
                    info = _CALLS.get(a)
                    if info is None:
                        acc.add(a)
                    else:
                        acc |= info.symbols
            s = self._syms = frozenset(acc)
        return s

    # -- printing, equality, hashing ----------------------------------------------------------

    def __str__(self) -> str:
        s = self._s
        if s is None:
            s = self._s = _print(self._t)
        return s

    def __repr__(self) -> str:
        return f"Expr({str(self)!r})"

    def __hash__(self) -> int:
        h = self._h
        if h is None:
            t = self._t
            if not t:
                h = 0
            elif len(t) == 1 and not t[0][0]:
                h = hash(t[0][1])  # equal to the int it equals
            else:
                h = hash(t)
            self._h = h
        return h

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if other.__class__ is Expr:
            return self._t == other._t
        if other.__class__ is int or isinstance(other, int):
            t = self._t
            if not t:
                return other == 0
            return len(t) == 1 and not t[0][0] and t[0][1] == other
        return NotImplemented

    def __ne__(self, other) -> bool:
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __reduce__(self):
        return (parse, (str(self),))

    def __copy__(self) -> "Expr":
        return self

    def __deepcopy__(self, memo) -> "Expr":
        return self

    # -- arithmetic ----------------------------------------------------------------------------

    def __add__(self, other) -> "Expr":
        if other.__class__ is int:
            return _add_const(self, other) if other else self
        if other.__class__ is not Expr:
            other = _coerce(other)
            if other is None:
                return NotImplemented
        return _add(self._t, other._t)

    __radd__ = __add__

    def __sub__(self, other) -> "Expr":
        if other.__class__ is int:
            return _add_const(self, -other) if other else self
        if other.__class__ is not Expr:
            other = _coerce(other)
            if other is None:
                return NotImplemented
        return _add(self._t, _neg_terms(other._t))

    def __rsub__(self, other) -> "Expr":
        other = _coerce(other)
        if other is None:
            return NotImplemented
        return _add(other._t, _neg_terms(self._t))

    def __neg__(self) -> "Expr":
        return _new(_neg_terms(self._t))

    def __pos__(self) -> "Expr":
        return self

    def __mul__(self, other) -> "Expr":
        if other.__class__ is int:
            return _scale(self, other)
        if other.__class__ is not Expr:
            other = _coerce(other)
            if other is None:
                return NotImplemented
        if other.is_const:
            return _scale(self, other.value)
        if self.is_const:
            return _scale(other, self.value)
        return _from_dict(_pmul(self._t, other._t))

    __rmul__ = __mul__

    def __floordiv__(self, other) -> "Expr":
        return floordiv(self, other)

    def __rfloordiv__(self, other) -> "Expr":
        return floordiv(other, self)

    def __mod__(self, other) -> "Expr":
        return mod(self, other)

    def __rmod__(self, other) -> "Expr":
        return mod(other, self)

    # -- substitution and evaluation -------------------------------------------------------------

    def subs(self, mapping: Mapping[str, "Expr | int | str"]) -> "Expr":
        """Replace symbols by expressions; the result is canonical."""
        if not mapping or self.symbols().isdisjoint(mapping):
            return self
        m = {k: Expr.from_value(v) for k, v in mapping.items()}
        return _substitute(self, m, {})

    def evaluate(self, binding: Mapping[str, int]) -> int:
        """The value under `binding`; KeyError(name) for an unbound symbol. Python floor semantics."""
        return _eval(self._t, binding, {})


def _new(t: Terms) -> Expr:
    e = _new_object(Expr)
    e._t = t
    e._h = None
    e._s = None
    e._syms = None
    return e


def _coerce(x) -> Expr | None:
    if x.__class__ is Expr:
        return x
    if isinstance(x, Expr):
        return x
    try:
        return const(operator.index(x))
    except TypeError:
        return None


def _as_expr(x) -> Expr:
    if x.__class__ is Expr:
        return x
    if x.__class__ is int:
        return const(x)
    return Expr.from_value(x)


ZERO = _new(())
ONE = _new((((), 1),))
_SMALL = {v: _new((((), v),)) for v in range(-64, 1025) if v}
_SMALL[0] = ZERO


def const(v: int) -> Expr:
    """The constant expression `v`."""
    e = _SMALL.get(v)
    if e is not None:
        return e
    v = operator.index(v)
    return _SMALL.get(v) or _new((((), v),))


@functools.lru_cache(maxsize=4096)
def sym(name: str) -> Expr:
    """The symbol `name` (an identifier), a non-negative integer."""
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ValueError(f"invalid symbol name {name!r}: expected an identifier [A-Za-z_][A-Za-z0-9_]*")
    return _new((((name,), 1),))


def _atom_expr(a: str) -> Expr:
    return _new((((a,), 1),))


# -- polynomial kernels on term tuples / dicts ---------------------------------------------------


def _from_dict(d: dict) -> Expr:
    if not d:
        return ZERO
    if len(d) == 1:
        return _new(tuple(d.items()))
    return _new(tuple(sorted(d.items(), key=_term_key)))


def _neg_terms(t: Terms) -> Terms:
    return tuple([(m, -k) for m, k in t])


def _add_const(e: Expr, c: int) -> Expr:
    t = e._t
    if t and not t[-1][0]:
        v = t[-1][1] + c
        return _new(t[:-1] + (((), v),) if v else t[:-1])
    return _new(t + (((), c),))


def _add(t1: Terms, t2: Terms) -> Expr:
    if not t2:
        return _new(t1) if t1 else ZERO
    if not t1:
        return _new(t2)
    d = dict(t1)
    get = d.get
    for m, k in t2:
        v = get(m, 0) + k
        if v:
            d[m] = v
        else:
            del d[m]
    return _from_dict(d)


def _scale(e: Expr, c: int) -> Expr:
    if c == 1:
        return e
    if not c:
        return ZERO
    return _new(tuple([(m, k * c) for m, k in e._t]))


def _pmul(t1, t2) -> dict:
    d: dict = {}
    get = d.get
    for m1, k1 in t1:
        for m2, k2 in t2:
            if not m1:
                m = m2
            elif not m2:
                m = m1
            else:
                m = tuple(sorted(m1 + m2))
            d[m] = get(m, 0) + k1 * k2
    return {m: k for m, k in d.items() if k}


def _content(t: Terms) -> int:
    g = 0
    for _, k in t:
        g = math.gcd(g, k)
        if g == 1:
            break
    return g


def _div_terms(t: Terms, g: int) -> Expr:
    return _new(tuple([(m, k // g) for m, k in t]))


def _mono_div(m: Mono, by: Mono) -> Mono | None:
    """m / by as a monomial, or None when `by` does not divide `m`."""
    if not by:
        return m
    rest = list(m)
    for a in by:
        try:
            rest.remove(a)
        except ValueError:
            return None
    return tuple(rest)


def _exact_div(a: Expr, b: Expr) -> Expr | None:
    """q with a == q*b exactly (polynomial division in the print order), or None."""
    bt = b._t
    lead_m, lead_k = bt[0]
    rest = bt[1:]
    r = dict(a._t)
    q: dict = {}
    for _ in range(64):
        if not r:
            return _from_dict(q)
        m, k = min(r.items(), key=_term_key)
        qm = _mono_div(m, lead_m)
        if qm is None or k % lead_k:
            return None
        qk = k // lead_k
        q[qm] = q.get(qm, 0) + qk
        del r[m]
        for bm, bk in rest:
            pm = tuple(sorted(qm + bm)) if qm and bm else (qm or bm)
            v = r.get(pm, 0) - qk * bk
            if v:
                r[pm] = v
            else:
                r.pop(pm, None)
    return None


# -- printing ------------------------------------------------------------------------------------


def _print(t: Terms) -> str:
    if not t:
        return "0"
    out = []
    for i, (m, k) in enumerate(t):
        a = -k if k < 0 else k
        if not m:
            body = str(a)
        elif a == 1:
            body = "*".join(m)
        else:
            body = f"{a}*" + "*".join(m)
        if i == 0:
            out.append("-" + body if k < 0 else body)
        else:
            out.append((" - " if k < 0 else " + ") + body)
    return "".join(out)


# -- intervals (bounds over [lo, hi]; -inf/inf as floats, never mixed into int arithmetic) -------


def _xmul(x, y):
    if not x or not y:
        return 0
    if x.__class__ is float or y.__class__ is float:
        return _INF if (x > 0) == (y > 0) else _NINF
    return x * y


def _xadd(x, y):
    if x.__class__ is float:
        return x
    if y.__class__ is float:
        return y
    return x + y


def _xfloordiv(x, c: int):
    return x if x.__class__ is float else x // c


def _imul(l1, h1, l2, h2):
    if l1 >= 0 and l2 >= 0:
        return _xmul(l1, l2), _xmul(h1, h2)
    ps = (_xmul(l1, l2), _xmul(l1, h2), _xmul(h1, l2), _xmul(h1, h2))
    return min(ps), max(ps)


def _terms_interval(t, atom_iv) -> tuple:
    """Interval of a polynomial given `atom_iv(key) -> (lo, hi)`."""
    lo = hi = 0
    for m, k in t:
        if not m:
            lo = _xadd(lo, k)
            hi = _xadd(hi, k)
            continue
        l, h = atom_iv(m[0])
        for a in m[1:]:
            l2, h2 = atom_iv(a)
            l, h = _imul(l, h, l2, h2)
        if k > 0:
            l, h = _xmul(k, l), _xmul(k, h)
        else:
            l, h = _xmul(k, h), _xmul(k, l)
        lo = _xadd(lo, l)
        hi = _xadd(hi, h)
    return lo, hi


def _call_interval(kind: str, args: tuple, iv) -> tuple:
    """Interval of a node from its args' intervals `iv(expr)`; division by zero is excluded."""
    if kind == "min" or kind == "max":
        ivs = [iv(a) for a in args]
        f = min if kind == "min" else max
        return f(l for l, _ in ivs), f(h for _, h in ivs)
    x, y = args
    xl, xh = iv(x)
    if y.is_const:
        c = y.value
        if c <= 0:
            return _NINF, _INF
        if kind == "floordiv":
            return _xfloordiv(xl, c), _xfloordiv(xh, c)
        if xl.__class__ is not float and xh.__class__ is not float and xl // c == xh // c:
            s = c * (xl // c)
            return xl - s, xh - s
        return 0, c - 1
    yl, yh = iv(y)
    if yl < 0:
        return _NINF, _INF
    yl = max(yl, 1)  # y == 0 leaves the node undefined
    if yh < yl:
        return _NINF, _INF
    if kind == "floordiv":
        if xl < 0:
            return _NINF, _INF
        lo = 0 if yh.__class__ is float else xl // yh
        hi = xh if xh.__class__ is float else xh // yl
        return lo, hi
    hi = yh if yh.__class__ is float else yh - 1
    if xl >= 0 and xh < hi:
        hi = xh
    return 0, hi


def _intrinsic_atom_iv(a: str) -> tuple:
    info = _CALLS.get(a)
    if info is None:
        return 0, _INF
    return info.lo, info.hi


def _intrinsic_iv(e: Expr) -> tuple:
    return _terms_interval(e._t, _intrinsic_atom_iv)


def _intrinsic_nonneg(e: Expr) -> bool:
    """e >= 0 for every non-negative binding, by coefficient signs or intervals."""
    easy = True
    for m, k in e._t:
        if k > 0:
            if easy:
                for a in m:
                    info = _CALLS.get(a)
                    if info is not None and not info.nonneg:
                        easy = False
                        break
            continue
        easy = False
        if not m:
            continue
        # -k * (a symbol, unbounded above) * (factors with positive range) is unbounded below
        has_sym = False
        for a in m:
            info = _CALLS.get(a)
            if info is None:
                has_sym = True
            elif info.lo < 0 or info.hi <= 0:
                break
        else:
            if has_sym:
                return False
    return easy or _intrinsic_iv(e)[0] >= 0


# -- nodes ---------------------------------------------------------------------------------------


def _node(kind: str, args: tuple) -> Expr:
    if kind == "min" or kind == "max":
        args = tuple(sorted(args, key=str))
    text = f"{kind}({', '.join([str(a) for a in args])})"
    if text not in _CALLS:
        syms = frozenset().union(*[a.symbols() for a in args])
        lo, hi = _call_interval(kind, args, _intrinsic_iv)
        _CALLS[text] = _Call(kind, args, syms, lo, hi)
    return _atom_expr(text)


def _only_atom(e: Expr, kind: str) -> _Call | None:
    """The node when e is exactly one atom of `kind` with coefficient 1."""
    t = e._t
    if len(t) == 1 and t[0][1] == 1 and len(t[0][0]) == 1:
        info = _CALLS.get(t[0][0][0])
        if info is not None and info.kind == kind:
            return info
    return None


def floordiv(a: "Expr | int", b: "Expr | int") -> Expr:
    """floor(a / b), canonical; ZeroDivisionError for b == 0."""
    return _floordiv(_as_expr(a), _as_expr(b))


@functools.lru_cache(maxsize=1 << 14)
def _floordiv(a: Expr, b: Expr) -> Expr:
    if b.is_const:
        return _floordiv_const(a, b.value)
    if b._t[0][1] < 0:
        a, b = -a, -b
    if not a._t:
        return ZERO
    if a == b:
        return ONE
    g = math.gcd(_content(a._t), _content(b._t))
    if g > 1:
        a, b = _div_terms(a._t, g), _div_terms(b._t, g)
    q = _exact_div(a, b)
    if q is not None:
        return q
    inner = _only_atom(a, "mod")
    if inner is not None and inner.args[1] == b:
        return ZERO
    if len(b._t) == 1:  # floordiv(b*q + r, b) == q + floordiv(r, b)
        bm, bk = b._t[0]
        q_d, r_d = {}, {}
        for m, k in a._t:
            qm = _mono_div(m, bm)
            if qm is None:
                r_d[m] = k
                continue
            qk, rk = divmod(k, bk)
            if qk:
                q_d[qm] = qk
            if rk:
                r_d[m] = rk
        if q_d:
            return _from_dict(q_d) + floordiv(_from_dict(r_d), b)
    return _node("floordiv", (a, b))


def _floordiv_const(a: Expr, c: int) -> Expr:
    if c == 0:
        raise ZeroDivisionError(f"floordiv({a}, 0)")
    if c < 0:
        a, c = -a, -c
    if c == 1:
        return a
    if a.is_const:
        return const(a.value // c)
    q_d, r_t = {}, []
    for m, k in a._t:
        qk, rk = divmod(k, c)
        if qk:
            q_d[m] = qk
        if rk:
            r_t.append((m, rk))
    quotient = _from_dict(q_d)
    if not r_t or not r_t[0][0]:  # the remainder is a constant in [0, c)
        return quotient
    split = _split_own_mod(r_t, c)
    if split is not None:
        return quotient + split
    g = c
    for m, k in r_t:
        if m:
            g = math.gcd(g, k)
    if g > 1:  # floor((g*x + r) / c) == floor((x + r // g) / (c / g))
        r_t = [(m, k // g) for m, k in r_t if k // g]
        c //= g
    r = _new(tuple(r_t))
    lo, hi = _intrinsic_iv(r)
    if lo.__class__ is not float and hi.__class__ is not float and lo // c == hi // c:
        return quotient + lo // c
    t = r._t
    if len(t) <= 2 and t[0][1] == 1 and len(t[0][0]) == 1 and (len(t) == 1 or not t[1][0]):
        info = _CALLS.get(t[0][0][0])
        if info is not None and info.kind == "floordiv" and info.args[1].is_const:
            # floordiv(floordiv(x, c2) + k, c) == floordiv(x + c2*k, c2*c)
            c2 = info.args[1].value
            k = t[1][1] if len(t) == 2 else 0
            return quotient + _floordiv_const(info.args[0] + c2 * k, c2 * c)
    return quotient + _node("floordiv", (r, const(c)))


def _split_own_mod(r_t: list, c: int) -> Expr | None:
    """floordiv(x + k*mod(x, c) + rest, c) == floordiv(x, c) + floordiv((k + 1)*mod(x, c) + rest, c)
    (x = c*floordiv(x, c) + mod(x, c)): where the terms `r_t` hold a mod(x, c) and all of x's
    terms (jnp.packbits pads a length x to floordiv(x + 7*mod(x, 8), 8) bytes ...); else None."""
    terms = dict(r_t)
    for m, k in r_t:
        info = _CALLS.get(m[0]) if len(m) == 1 else None
        if info is None or info.kind != "mod" or not info.args[1].is_const or info.args[1].value != c:
            continue
        x = info.args[0]
        if x.is_const or any(terms.get(mx) != kx for mx, kx in x._t):
            continue
        rest = _from_dict({mm: kk for mm, kk in terms.items() if mm != m and mm not in dict(x._t)})
        return _floordiv_const(x, c) + _floordiv_const(_new(((m, 1),)) * (k + 1) + rest, c)
    return None


def mod(a: "Expr | int", b: "Expr | int") -> Expr:
    """a mod b with Python semantics (the sign follows b), canonical; ZeroDivisionError for b == 0."""
    return _mod(_as_expr(a), _as_expr(b))


@functools.lru_cache(maxsize=1 << 14)
def _mod(a: Expr, b: Expr) -> Expr:
    if b.is_const:
        c = b.value
        if c == 0:
            raise ZeroDivisionError(f"mod({a}, 0)")
        if c < 0:
            return -_mod_const(-a, -c)
        return _mod_const(a, c)
    if b._t[0][1] < 0:
        return -mod(-a, -b)
    if not a._t or a == b:
        return ZERO
    g = math.gcd(_content(a._t), _content(b._t))
    if g > 1:
        return mod(_div_terms(a._t, g), _div_terms(b._t, g)) * g
    if _exact_div(a, b) is not None:
        return ZERO
    inner = _only_atom(a, "mod")
    if inner is not None and inner.args[1] == b:
        return a
    if len(b._t) == 1:  # mod(b*q + r, b) == mod(r, b)
        bm, bk = b._t[0]
        r_d, changed = {}, False
        for m, k in a._t:
            if _mono_div(m, bm) is not None:
                rk = k % bk
                changed |= rk != k
                if rk:
                    r_d[m] = rk
            else:
                r_d[m] = k
        if changed:
            return mod(_from_dict(r_d), b)
    return _node("mod", (a, b))


def _mod_const(a: Expr, c: int) -> Expr:
    if c == 1:
        return ZERO
    r_t = [(m, k % c) for m, k in a._t if k % c]
    if not r_t or not r_t[0][0]:
        return const(r_t[0][1]) if r_t else ZERO
    # mod(mod(x, c1), c) == mod(x, c) when c divides c1
    changed = False
    acc = ZERO
    rest = []
    for m, k in r_t:
        if len(m) == 1:
            info = _CALLS.get(m[0])
            if info is not None and info.kind == "mod" and info.args[1].is_const \
                    and info.args[1].value % c == 0:
                acc = acc + info.args[0] * k
                changed = True
                continue
        rest.append((m, k))
    if changed:
        return _mod_const(acc + _new(tuple(rest)) if rest else acc, c)
    r = _new(tuple(r_t))
    g = c
    for m, k in r_t:
        if m:
            g = math.gcd(g, k)
    if g > 1:  # mod(g*x + r, c) == g*mod(x + r // g, c / g) + r % g
        k0 = r_t[-1][1] if not r_t[-1][0] else 0
        inner = _new(tuple([(m, k // g) for m, k in r_t if m]))
        return _mod_const(inner + k0 // g, c // g) * g + k0 % g
    lo, hi = _intrinsic_iv(r)
    if lo.__class__ is not float and hi.__class__ is not float and lo // c == hi // c:
        return r - c * (lo // c)
    return _node("mod", (r, const(c)))


def ceildiv(a: "Expr | int", b: "Expr | int") -> Expr:
    """ceil(a / b): floordiv(a + b - 1, b) for a positive divisor, else -floordiv(-a, b)."""
    a = _as_expr(a)
    b = _as_expr(b)
    if b.is_const:
        c = b.value
        if c == 0:
            raise ZeroDivisionError(f"ceildiv({a}, 0)")
        return floordiv(a + (c - 1), c) if c > 0 else -floordiv(-a, c)
    if _intrinsic_nonneg(b):  # a dim divisor: >= 0, and != 0 where defined
        return floordiv(a + b - 1, b)
    return -floordiv(-a, b)


def min_(*args: "Expr | int") -> Expr:
    """The minimum of one or more expressions, canonical."""
    return _minmax("min", tuple([_as_expr(a) for a in args]))


def max_(*args: "Expr | int") -> Expr:
    """The maximum of one or more expressions, canonical."""
    return _minmax("max", tuple([_as_expr(a) for a in args]))


@functools.lru_cache(maxsize=1 << 14)
def _minmax(kind: str, args: tuple) -> Expr:
    is_min = kind == "min"
    flat: list[Expr] = []
    for a in args:
        info = _only_atom(a, kind)
        if info is not None:
            flat.extend(info.args)
        else:
            flat.append(a)
    if not flat:
        raise TypeError(f"{kind}_ needs at least one argument")
    # arguments that differ by a constant: keep the smallest (min) / largest (max)
    groups: dict = {}
    for a in flat:
        t = a._t
        c = t[-1][1] if t and not t[-1][0] else 0
        key = t[:-1] if c else t
        old = groups.get(key)
        if old is None or (c < old[0] if is_min else c > old[0]):
            groups[key] = (c, a)
    items = sorted((a for _, a in groups.values()), key=str)
    if len(items) == 1:
        return items[0]
    # drop an argument another provably bounds (symbols are >= 0)
    kept: list[Expr] = []
    for x in items:
        if any(_intrinsic_nonneg(x - y if is_min else y - x) for y in kept):
            continue
        kept = [y for y in kept if not _intrinsic_nonneg(y - x if is_min else x - y)]
        kept.append(x)
    if len(kept) == 1:
        return kept[0]
    # pull out terms every argument shares, then a positive common factor
    common = set(kept[0]._t)
    for x in kept[1:]:
        common &= set(x._t)
    if common:
        shared = _from_dict(dict(common))
        return shared + _minmax(kind, tuple([x - shared for x in kept]))
    g = 0
    for x in kept:
        g = math.gcd(g, _content(x._t))
    if g > 1:
        return _minmax(kind, tuple([_div_terms(x._t, g) for x in kept])) * g
    return _node(kind, tuple(kept))


_BUILDERS = {"floordiv": floordiv, "mod": mod, "min": min_, "max": max_}


# -- substitution and evaluation ------------------------------------------------------------------


def _substitute(e: Expr, m: Mapping[str, Expr], cache: dict) -> Expr:
    """Replace atoms by key (symbol names, or node texts at the top level) and re-canonicalize."""
    acc: dict = {}
    get = acc.get
    for mono, k in e._t:
        part = {(): k}
        for a in mono:
            r = cache.get(a)
            if r is None:
                r = m.get(a)
                if r is None:
                    info = _CALLS.get(a)
                    if info is None or info.symbols.isdisjoint(m):
                        r = _atom_expr(a)
                    else:
                        r = _BUILDERS[info.kind](*[_substitute(x, m, cache) for x in info.args])
                cache[a] = r
            rt = r._t
            if len(rt) == 1 and rt[0][0] == (a,) and rt[0][1] == 1:
                part = {(tuple(sorted(pm + (a,))) if pm else (a,)): pk for pm, pk in part.items()}
            else:
                part = _pmul(part.items(), rt)
        for pm, pk in part.items():
            v = get(pm, 0) + pk
            if v:
                acc[pm] = v
            else:
                del acc[pm]
    return _from_dict(acc)


def _eval(t: Terms, binding: Mapping[str, int], cache: dict) -> int:
    total = 0
    for mono, k in t:
        v = k
        for a in mono:
            x = cache.get(a)
            if x is None:
                info = _CALLS.get(a)
                if info is None:
                    try:
                        x = binding[a]
                    except KeyError:
                        raise KeyError(a) from None
                else:
                    vals = [_eval(arg._t, binding, cache) for arg in info.args]
                    kind = info.kind
                    if kind == "floordiv":
                        x = vals[0] // vals[1]
                    elif kind == "mod":
                        x = vals[0] % vals[1]
                    elif kind == "min":
                        x = min(vals)
                    else:
                        x = max(vals)
                cache[a] = x
            v *= x
        total += v
    return total


# -- compiling to Python -------------------------------------------------------------------------


class PyCode:
    """Straight-line Python source that evaluates expressions (the runtime's per-binding facts):
    `value(e)` returns a Python expression for `e` over the local names `names` gives each symbol
    (or an int literal for a symbol whose value is fixed), emitting one assignment per distinct
    floordiv/mod/min/max node into `lines` first, so a node shared by several expressions is
    computed once. Only generated names (`_c<k>` here) and int literals enter the source, never
    symbol or user text. KeyError(symbol) for a symbol `names` lacks. Python floor semantics, as
    `Expr.evaluate`: a node dividing by zero raises ZeroDivisionError when the code runs."""

    def __init__(self, names: Mapping[str, "str | int"]):
        self.names = {k: (repr(int(v)) if v.__class__ is not str else v) for k, v in names.items()}
        self.lines: list[str] = []
        self._atoms: dict[str, str] = {}

    def bind(self, symbol: str, python_name: str) -> None:
        """From now on, `symbol` reads the local `python_name`."""
        self.names[symbol] = python_name

    def assign(self, python_name: str, e: "Expr") -> None:
        """Emit `python_name = <e>`."""
        self.lines.append(f"{python_name} = {self.value(e)}")

    def value(self, e: "Expr") -> str:
        parts = []
        for mono, k in e._t:
            factors = [self._atom(a) for a in mono]
            if k != 1 or not factors:
                factors.insert(0, repr(k))
            parts.append("*".join(factors))
        if not parts:
            return "0"
        return parts[0] if len(parts) == 1 else "(" + " + ".join(parts) + ")"

    def _atom(self, a: str) -> str:
        got = self._atoms.get(a)
        if got is not None:
            return got
        info = _CALLS.get(a)
        if info is None:
            try:
                return self.names[a]
            except KeyError:
                raise KeyError(a) from None
        args = [self.value(x) for x in info.args]
        if info.kind == "floordiv":
            text = f"({args[0]}) // ({args[1]})"
        elif info.kind == "mod":
            text = f"({args[0]}) % ({args[1]})"
        else:
            text = f"{info.kind}({', '.join(args)})"
        name = f"_c{len(self._atoms)}"
        self.lines.append(f"{name} = {text}")
        self._atoms[a] = name
        return name


def make_function(name: str, params: "list[str]", lines: "list[str]", filename: str = "<relax-mlir>"):
    """The Python function `def name(*params): lines` built with `compile()` from generated source
    (identifiers and int literals only: `PyCode`'s output); its globals hold only `min` and `max`."""
    src = f"def {name}({', '.join(params)}):\n" + "".join(f"    {ln}\n" for ln in lines or ["pass"])
    ns: dict = {"__builtins__": {"min": min, "max": max}}
    exec(compile(src, filename, "exec"), ns)
    fn = ns[name]
    fn.source = src
    return fn


# -- parsing ---------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(//|[-+*%(),]))")
_CALL_ARITY = {"floordiv": 2, "ceildiv": 2, "mod": 2, "min": -1, "max": -1}
_CALL_FN = {"floordiv": floordiv, "ceildiv": ceildiv, "mod": mod, "min": min_, "max": max_}


class _Parser:
    __slots__ = ("text", "toks", "i")

    def __init__(self, text: str):
        self.text = text
        toks = []
        pos, n = 0, len(text)
        match = _TOKEN.match
        while True:
            mt = match(text, pos)
            if mt is None:
                while pos < n and text[pos].isspace():
                    pos += 1
                if pos < n:
                    raise ShapeParseError(f"unexpected character {text[pos]!r}", text, pos)
                break
            kind = mt.lastindex
            toks.append((kind, mt.group(kind), mt.start(kind)))
            pos = mt.end()
        toks.append((0, "", len(text)))
        self.toks = toks
        self.i = 0

    def fail(self, what: str):
        kind, tok, pos = self.toks[self.i]
        got = "end of input" if kind == 0 else repr(tok)
        raise ShapeParseError(f"expected {what}, got {got}", self.text, pos)

    def peek(self) -> str:
        kind, tok, _ = self.toks[self.i]
        return tok if kind == 3 else ""

    def expr(self) -> Expr:
        e = self.term()
        while True:
            op = self.peek()
            if op == "+":
                self.i += 1
                e = e + self.term()
            elif op == "-":
                self.i += 1
                e = e - self.term()
            else:
                return e

    def term(self) -> Expr:
        e = self.unary()
        while True:
            op = self.peek()
            if op == "*":
                self.i += 1
                e = e * self.unary()
            elif op == "//" or op == "%":
                pos = self.toks[self.i][2]
                self.i += 1
                rhs = self.unary()
                try:
                    e = floordiv(e, rhs) if op == "//" else mod(e, rhs)
                except ZeroDivisionError:
                    raise ShapeParseError("division by zero", self.text, pos) from None
            else:
                return e

    def unary(self) -> Expr:
        op = self.peek()
        if op == "-":
            self.i += 1
            return -self.unary()
        if op == "+":
            self.i += 1
            return self.unary()
        return self.primary()

    def primary(self) -> Expr:
        kind, tok, pos = self.toks[self.i]
        if kind == 1:
            self.i += 1
            return const(int(tok))
        if kind == 2:
            self.i += 1
            if self.peek() != "(":
                return sym(tok)
            arity = _CALL_ARITY.get(tok)
            if arity is None:
                raise ShapeParseError(f"unknown function {tok!r}", self.text, pos)
            self.i += 1
            args = [self.expr()]
            while self.peek() == ",":
                self.i += 1
                args.append(self.expr())
            if self.peek() != ")":
                self.fail("',' or ')'")
            self.i += 1
            if arity > 0 and len(args) != arity:
                raise ShapeParseError(f"{tok} takes {arity} arguments, got {len(args)}", self.text, pos)
            try:
                return _CALL_FN[tok](*args)
            except ZeroDivisionError:
                raise ShapeParseError("division by zero", self.text, pos) from None
        if tok == "(" and kind == 3:
            self.i += 1
            e = self.expr()
            if self.peek() != ")":
                self.fail("')'")
            self.i += 1
            return e
        self.fail("an integer, a symbol or '('")


@functools.lru_cache(maxsize=1 << 16)
def parse(text: str) -> Expr:
    """Parse expression text into its canonical Expr; ShapeParseError points at a bad character."""
    if not isinstance(text, str):
        raise TypeError(f"parse() takes a string, got {type(text).__name__}")
    p = _Parser(text)
    if p.toks[0][0] == 0:
        raise ShapeParseError("empty shape expression", text, 0)
    e = p.expr()
    if p.toks[p.i][0] != 0:
        p.fail("an operator or end of input")
    return e

