"""Evaluate a kernel launch's loop-cost formula (backend/loop_budget.py) for one call: an upper bound
of the loop iterations one invocation runs, from the launch's scalar arguments, grid and block.

Interval arithmetic: every value is a range [lo, hi] over the invocations of the launch (a thread id
of dim d ranges over the block, a loop's induction variable over its bounds); a loop runs at most
ceil((ub.hi - lb.lo) / step.lo) times. An unknown value (loaded from memory) makes the bound
infinite: the caller cannot prove the launch stays within its driver's limit and refuses it."""
from __future__ import annotations

import math
import operator

__all__ = ["iterations"]

_INF = math.inf


def _div(a, b, rnd) -> tuple:
    (alo, ahi), (blo, bhi) = a, b
    if blo <= 0 <= bhi or _INF in (abs(alo), abs(ahi), abs(blo), abs(bhi)):
        return (-_INF, _INF)
    qs = [rnd(x, y) for x in (alo, ahi) for y in (blo, bhi)]
    return (min(qs), max(qs))


def _trunc(x, y):
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y > 0) else -q


def _rem(a, b, signed: bool) -> tuple:
    (alo, ahi), (blo, bhi) = a, b
    m = max(abs(blo), abs(bhi))
    if m == _INF or m == 0:
        return (-_INF, _INF)
    if alo >= 0 and ahi < min(abs(blo), abs(bhi)):
        return (alo, ahi)  # the remainder of a smaller non-negative value is the value
    lo = 0 if (alo >= 0 or not signed) else -(m - 1)
    hi = 0 if (ahi <= 0 and signed) else m - 1
    return (lo, hi)


def _mul(a, b) -> tuple:
    ps = []
    for x in a:
        for y in b:
            ps.append(0 if 0 in (x, y) else x * y)
    return (min(ps), max(ps))


class _Eval:
    def __init__(self, args, grid, block):
        self.args, self.grid, self.block = args, grid, block
        self.ivs: dict[int, tuple] = {}

    def value(self, t) -> tuple:
        op = t[0]
        if op == "c":
            return (t[1], t[1])
        if op == "p":
            v = self.args[t[1]] if t[1] < len(self.args) else None
            try:
                v = operator.index(v)  # an int or a numpy integer (a value loaded from a host buffer)
            except TypeError:
                return (-_INF, _INF)  # a buffer, a float: no bound
            return (v, v)
        if op == "iv":
            return self.ivs.get(t[1], (-_INF, _INF))
        if op == "tid":
            return (0, self.block[t[1]] - 1)
        if op == "bid":
            return (0, self.grid[t[1]] - 1)
        if op == "bdim":
            return (self.block[t[1]],) * 2
        if op == "gdim":
            return (self.grid[t[1]],) * 2
        xs = [self.value(x) for x in t[1:]]
        if op == "add":
            return (xs[0][0] + xs[1][0], xs[0][1] + xs[1][1])
        if op == "sub":
            return (xs[0][0] - xs[1][1], xs[0][1] - xs[1][0])
        if op == "mul":
            return _mul(xs[0], xs[1])
        if op in ("divs", "divu"):
            return _div(xs[0], xs[1], _trunc)
        if op == "floordiv":
            return _div(xs[0], xs[1], lambda x, y: x // y)
        if op == "ceildiv":
            return _div(xs[0], xs[1], lambda x, y: -(-x // y))
        if op in ("rems", "remu"):
            return _rem(xs[0], xs[1], op == "rems")
        if op == "min":
            return (min(xs[0][0], xs[1][0]), min(xs[0][1], xs[1][1]))
        if op == "max":
            return (max(xs[0][0], xs[1][0]), max(xs[0][1], xs[1][1]))
        if op == "sel":
            return (min(xs[1][0], xs[2][0]), max(xs[1][1], xs[2][1]))
        if op == "cast":
            return xs[0]
        return (-_INF, _INF)

    def cost(self, t):
        op = t[0]
        if op == "sum":
            return sum((self.cost(x) for x in t[1:]), 0)
        if op == "max":
            return max((self.cost(x) for x in t[1:]), default=0)
        if op == "loop":
            lb, ub, step = self.value(t[1]), self.value(t[2]), self.value(t[3])
            if step[0] <= 0 or _INF in (abs(lb[0]), abs(ub[1])):
                return _INF
            trips = max(0, -(-(ub[1] - lb[0]) // step[0]))
            if trips == 0:
                return 0
            self.ivs[t[4]] = (lb[0], ub[1] - 1)
            return trips * (1 + self.cost(t[5]))
        return _INF


def iterations(cost: list, args: list, grid, block) -> int | float:
    """The most loop iterations one invocation of the launch runs (math.inf when unbounded)."""
    return _Eval(args, tuple(int(g) for g in grid), tuple(int(b) for b in block)).cost(cost)
