"""The model zoo (test/python/models/zoo.py) against jax.jit: per model, the compile time and, at
three sizes, the time per call of the relax-mlir executable and of jax.jit, interleaved (one call
of each in turn, median of the repeats), printed as a table with ratios.

    python bench/models.py [--repeats 20] [--pending] [name ...]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "python", "models"))
import zoo  # noqa: E402

zoo.preload_tensorflow()  # gemma's tensorflow: loaded before the first compile (see zoo.py)


def bench(name: str, build, repeats: int) -> list[str]:
    import jax
    case = build()
    t0 = time.perf_counter()
    exe = zoo.compile_case(case)
    compile_s = time.perf_counter() - t0
    ref = jax.jit(case.fn)
    rows = []
    for n in case.sizes:
        args = case.make_args(n)
        flat = zoo.leaves(args)
        exe(*flat)
        jax.block_until_ready(ref(*args))  # warm: jax.jit traces and compiles per shape
        ours, theirs = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            exe(*flat)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            jax.block_until_ready(ref(*args))
            theirs.append(time.perf_counter() - t)
        a, b = statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3
        rows.append(f"{name:18s} {compile_s:9.2f} {n:5d} {a:10.3f} {b:10.3f} {a / b:7.2f}")
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("names", nargs="*")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--pending", action="store_true", help="also try the PENDING models")
    a = p.parse_args(argv)
    table = dict(zoo.MODELS)
    if a.pending:
        table.update({k: v[0] for k, v in zoo.PENDING.items()})
    names = a.names or sorted(table)
    print(f"{'model':18s} {'compile s':>9s} {'n':>5s} {'relax ms':>10s} {'jax ms':>10s} {'ratio':>7s}")
    for name in names:
        try:
            for row in bench(name, table[name] if name in table else zoo.ALL[name], a.repeats):
                print(row, flush=True)
        except Exception as e:  # a PENDING model: say why and go on
            print(f"{name:18s} failed: {type(e).__name__}: {str(e).splitlines()[0][:150]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
