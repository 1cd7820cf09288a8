"""Micro-benchmark of the shape algebra: microseconds per operation.

    .venv/bin/python bench/shape_algebra.py [--quick]

Each line times one operation on a mix of typical dims (symbols, affine forms, products,
floordiv/min nodes). "(cached)" is the cost after the first sight of the same text or
arguments (parse and the node constructors are memoized); "(fresh)" bypasses the cache. The last line simulates shape deduction over a
10,000-op module: per op, parse two operand dims, build a result dim, compare, print.
"""
from __future__ import annotations

import sys
import time

from relax_mlir.shape import Facts, ceildiv, floordiv, min_, parse, sym
from relax_mlir.shape.expr import _floordiv, _minmax, parse as _parse_cached

TEXTS = ["n", "2*n + 1", "b*s", "4*n + 4", "floordiv(n + 3, 4)", "min(m, n)", "b*h*s*64", "n - 1",
         "mod(n, 8)", "max(k, n) + 2"]


def bench(name: str, fn, reps: int) -> float:
    fn()  # warm caches the way a long-running compile would
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    us = (time.perf_counter() - t0) / (reps * len(TEXTS)) * 1e6
    print(f"{name:<28} {us:8.2f} us/op")
    return us


def main(argv: list[str]) -> None:
    reps = 200 if "--quick" in argv else 2000
    exprs = [parse(t) for t in TEXTS]
    other = [parse(t) for t in reversed(TEXTS)]
    pairs = list(zip(exprs, other))
    n = sym("n")
    facts = Facts(lower={"n": 1, "b": 1, "m": 1}, upper={"n": 4096, "s": 2048},
                  equalities=[(parse("k"), parse("2*m"))])
    fresh = _parse_cached.__wrapped__

    bench("parse (cached)", lambda: [parse(t) for t in TEXTS], reps)
    bench("parse (fresh)", lambda: [fresh(t) for t in TEXTS], reps // 4)
    bench("str (cached)", lambda: [str(e) for e in exprs], reps)
    bench("add", lambda: [a + b for a, b in pairs], reps)
    bench("add int", lambda: [a + 1 for a in exprs], reps)
    bench("mul", lambda: [a * b for a, b in pairs], reps)
    bench("mul int", lambda: [a * 4 for a in exprs], reps)
    four = parse("4")
    bench("floordiv by const (cached)", lambda: [floordiv(a, 4) for a in exprs], reps)
    bench("floordiv by const (fresh)", lambda: [_floordiv.__wrapped__(a, four) for a in exprs], reps)
    bench("ceildiv by const (cached)", lambda: [ceildiv(a, 2) for a in exprs], reps)
    bench("min_ (cached)", lambda: [min_(a, b) for a, b in pairs], reps)
    bench("min_ (fresh)", lambda: [_minmax.__wrapped__("min", (a, b)) for a, b in pairs], reps // 4)
    bench("== (same text)", lambda: [a == parse(str(a)) for a in exprs], reps)
    bench("== (different)", lambda: [a == b for a, b in pairs], reps)
    bench("hash (fresh expr)", lambda: [hash(a + n) for a in exprs], reps)
    bench("subs", lambda: [a.subs({"n": "2*m"}) for a in exprs], reps)
    bench("evaluate", lambda: [a.evaluate({"n": 7, "m": 3, "b": 2, "s": 5, "h": 4, "k": 1}) for a in exprs],
          reps)
    bench("prove_le (memoized)", lambda: [facts.prove_le(a, b) for a, b in pairs], reps)
    bench("prove_le (cold)", lambda: [Facts().prove_le(a, a + b) for a, b in pairs], reps // 4)
    bench("prove_eq (cold)", lambda: [Facts().prove_eq(a, b) for a, b in pairs], reps // 4)
    bench("upper_bound (cold)", lambda: [Facts(upper={"n": 64, "m": 8}).upper_bound(a) for a in exprs],
          reps // 4)

    # a 10,000-op module: parse two operand dims, build a result dim, check equality, print it
    dims = [f"{c}*n + {i % 97}" for i, c in enumerate(range(1, 10_001))]
    f = Facts(lower={"n": 1})
    t0 = time.perf_counter()
    for i in range(10_000):
        a = parse(dims[i])
        b = parse(dims[(i * 7) % 10_000])
        r = floordiv(a + b, 2) * 2 + a
        f.prove_eq(a, b)
        f.prove_le(a, r)
        str(r)
    print(f"{'10k-op deduction':<28} {(time.perf_counter() - t0) * 1e3:8.1f} ms total")


if __name__ == "__main__":
    main(sys.argv[1:])
