"""Memory planning: planned peak near the live-set lower bound; numerics unchanged; bounds enforced."""
from __future__ import annotations

import numpy as np
import pytest

import relax_mlir

BASE = ["relax-infer-shapes", "relax-legalize", "relax-lower-shapes", "relax-to-upstream"]
PLANNED = ["relax-infer-shapes", "relax-legalize", "relax-plan-memory", "relax-lower-shapes", "relax-to-upstream"]


def chain(depth: int) -> str:
    t = '!relax.tensor<["n", 64], f32>'
    body = []
    prev = "%x"
    for i in range(depth):
        op = ("relax.exp", "relax.tanh", "relax.negative")[i % 3]
        body.append(f'  %v{i} = "{op}"({prev}) : ({t}) -> {t}')
        if i % 2:
            body.append(f'  %s{i} = "relax.add"(%v{i}, %v{i - 1}) : ({t}, {t}) -> {t}')
            prev = f"%s{i}"
        else:
            prev = f"%v{i}"
    return (f"func.func @main(%x: {t}) -> {t} attributes {{relax.symbol_bounds = {{n = 4096}}}} {{\n" + "\n".join(body)
            + f"\n  return {prev} : {t}\n}}")


def test_planned_peak_within_10_percent_of_live_peak():
    m = relax_mlir.run_passes(relax_mlir.parse(chain(9)), ["relax-legalize", "relax-plan-memory"])
    with m.context:
        f = m.op.regions[0].blocks[0].operations[0]
        plan = f.attributes["relax.memory_plan"]
        planned = plan["planned_peak_bytes"].value
        live = plan["live_peak_bytes"].value
        unplanned = plan["unplanned_bytes"].value
    assert live <= planned <= 1.1 * live
    assert planned < unplanned


def ref(x, depth=9):
    prev = x
    vals = []
    for i in range(depth):
        f = (np.exp, np.tanh, np.negative)[i % 3]
        v = f(prev)
        vals.append(v)
        prev = v + vals[i - 1] if i % 2 else v
    return prev


def test_numerics_with_and_without_plan():
    a = relax_mlir.compile(chain(9), passes=PLANNED)
    b = relax_mlir.compile(chain(9), passes=BASE)
    for n in (1, 13, 4096):
        x = np.random.default_rng(n).uniform(-1, 1, (n, 64)).astype(np.float32)
        np.testing.assert_allclose(a(x), ref(x), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(b(x), a(x), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="symbol n = 4097 .* exceeds its upper bound 4096"):
        a(np.zeros((4097, 64), np.float32))
