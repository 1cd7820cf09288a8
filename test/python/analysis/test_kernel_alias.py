"""analysis/kernel_alias against upstream canonicalization itself: a kernel whose elementwise body
folds to one of its inputs becomes a view of that input once canonicalized (the generic is
erased); the memory plan must then keep the input's storage alive as long as the result. For each
body below, the input upstream `canonicalize` returns is among the inputs `result_aliases` names
(never fewer: a missed fold is a wrong result, fuzz seed 2412170), the folds are found exactly, and
bodies that do not fold alias nothing (every false alias costs the plan a reuse)."""
from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir.analysis.kernel_alias import result_aliases

# (element type of x, y and the result, body lines computing %v from %x, %y (inputs 0, 1) and
# %p (input 2, i1); the input position upstream folds it to, or None)
INT_BODIES = [
    ("%s = arith.select %p, %x, %c0 : i32\n%v = arith.select %p, %s, %x : i32", 0),
    ("%s = arith.select %p, %y, %x : i32\n%v = arith.select %p, %x, %s : i32", 0),
    ("%v = arith.select %p, %y, %y : i32", 1),
    ("%v = arith.select %true, %x, %y : i32", 0),
    ("%v = arith.select %false, %x, %y : i32", 1),
    ("%v = arith.addi %x, %c0 : i32", 0),
    ("%v = arith.addi %c0, %y : i32", 1),
    ("%v = arith.subi %x, %c0 : i32", 0),
    ("%v = arith.muli %c1, %x : i32", 0),
    ("%v = arith.divsi %y, %c1 : i32", 1),
    ("%v = arith.divui %x, %c1 : i32", 0),
    ("%v = arith.ori %x, %c0 : i32", 0),
    ("%v = arith.xori %c0, %x : i32", 0),
    ("%v = arith.andi %x, %cm1 : i32", 0),
    ("%v = arith.shli %x, %c0 : i32", 0),
    ("%v = arith.shrsi %y, %c0 : i32", 1),
    ("%v = arith.andi %x, %x : i32", 0),
    ("%v = arith.ori %y, %y : i32", 1),
    ("%v = arith.maxsi %x, %x : i32", 0),
    ("%v = arith.minui %y, %y : i32", 1),
    ("%v = arith.minsi %x, %cmax : i32", 0),
    ("%v = arith.maxsi %cmin, %x : i32", 0),
    ("%v = arith.maxui %x, %c0 : i32", 0),
    ("%v = arith.minui %x, %cm1 : i32", 0),
    ("%s = arith.subi %x, %y : i32\n%v = arith.addi %s, %y : i32", 0),
    ("%s = arith.subi %x, %y : i32\n%v = arith.addi %y, %s : i32", 0),
    ("%s = arith.addi %x, %y : i32\n%v = arith.subi %s, %y : i32", 0),
    ("%s = arith.addi %x, %y : i32\n%v = arith.subi %s, %x : i32", 1),
    ("%s = arith.xori %x, %y : i32\n%v = arith.xori %s, %y : i32", 0),
    ("%s = arith.extsi %x : i32 to i64\n%v = arith.trunci %s : i64 to i32", 0),
    ("%s = arith.extui %y : i32 to i64\n%v = arith.trunci %s : i64 to i32", 1),
    ("%s = arith.bitcast %x : i32 to f32\n%v = arith.bitcast %s : f32 to i32", 0),
    ("%s = arith.index_cast %x : i32 to index\n%v = arith.index_cast %s : index to i32", 0),
    # no fold: the kernel writes its destination
    ("%v = arith.addi %x, %y : i32", None),
    ("%v = arith.select %p, %x, %y : i32", None),
    ("%v = arith.addi %x, %c1 : i32", None),
    ("%v = arith.muli %x, %x : i32", None),
    ("%v = arith.maxsi %x, %y : i32", None),
    ("%v = arith.subi %c0, %x : i32", None),
    ("%s = arith.select %p, %x, %c0 : i32\n%v = arith.select %p, %c1, %s : i32", None),
]
FLOAT_BODIES = [
    ("%v = arith.addf %x, %fm0 : f32", 0),
    ("%v = arith.mulf %f1, %y : f32", 1),
    ("%v = arith.subf %x, %f0 : f32", 0),
    ("%v = arith.divf %x, %f1 : f32", 0),
    ("%s = arith.negf %x : f32\n%v = arith.negf %s : f32", 0),
    ("%s = arith.extf %y : f32 to f64\n%v = arith.truncf %s : f64 to f32", 1),
    ("%v = arith.maximumf %x, %x : f32", 0),
    ("%v = arith.minnumf %y, %y : f32", 1),
    ("%v = arith.select %p, %x, %x : f32", 0),
    ("%v = arith.addf %x, %f0 : f32", None),  # x + 0.0 is +0.0 at x = -0.0: not x
    ("%v = arith.mulf %x, %y : f32", None),
    ("%v = arith.subf %f0, %x : f32", None),
]
BOOL_BODIES = [
    ("%v = arith.select %p, %true, %false : i1", 2),
    ("%v = arith.andi %p, %true : i1", 2),
    ("%v = arith.ori %p, %false : i1", 2),
    ("%v = arith.select %p, %false, %true : i1", None),
    ("%v = arith.xori %p, %true : i1", None),
]

CONSTANTS = """\
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %cm1 = arith.constant -1 : i32
    %cmax = arith.constant 2147483647 : i32
    %cmin = arith.constant -2147483648 : i32
    %f0 = arith.constant 0.0 : f32
    %fm0 = arith.constant -0.0 : f32
    %f1 = arith.constant 1.0 : f32
    %true = arith.constant true
    %false = arith.constant false
"""


def kernel(elem: str, out: str, body: str) -> str:
    lines = "\n".join("    " + ln for ln in body.splitlines())
    return f"""
#map = affine_map<(d0) -> (d0)>
func.func @k(%a: tensor<8x{elem}>, %b: tensor<8x{elem}>, %c: tensor<8xi1>, %out: tensor<8x{out}>) -> tensor<8x{out}> {{
  %r = linalg.generic {{indexing_maps = [#map, #map, #map, #map], iterator_types = ["parallel"]}}
      ins(%a, %b, %c : tensor<8x{elem}>, tensor<8x{elem}>, tensor<8xi1>) outs(%out : tensor<8x{out}>) {{
  ^bb0(%x: {elem}, %y: {elem}, %p: i1, %o: {out}):
{CONSTANTS}{lines}
    linalg.yield %v : {out}
  }} -> tensor<8x{out}>
  return %r : tensor<8x{out}>
}}
"""


def _ours(text: str) -> frozenset:
    m = relax_mlir.parse(text)
    with m.context:
        return result_aliases(m.op.regions[0].blocks[0].operations[0].operation, 3)[0]


def _upstream(text: str) -> frozenset:
    """The inputs the canonicalized kernel returns as they are."""
    m = relax_mlir.run_passes(relax_mlir.parse(text), ["canonicalize"])
    with m.context:
        f = m.op.regions[0].blocks[0].operations[0]
        ret = list(f.regions[0].blocks[0].operations)[-1]
        v = ret.operands[0]
        if hasattr(v, "arg_number") and v.owner == f.regions[0].blocks[0]:
            return frozenset({v.arg_number}) if v.arg_number < 3 else frozenset()
        return frozenset()


CASES = [("i32", "i32", b, k) for b, k in INT_BODIES] + [("f32", "f32", b, k) for b, k in FLOAT_BODIES] \
    + [("i1", "i1", b, k) for b, k in BOOL_BODIES]


@pytest.mark.parametrize("elem,out,body,folds_to", CASES, ids=[c[2].splitlines()[-1].split("= ")[1][:40] for c in CASES])
def test_result_aliases_cover_upstream_folds(elem, out, body, folds_to):
    text = kernel(elem, out, body)
    upstream = _upstream(text)
    assert upstream == (frozenset() if folds_to is None else frozenset({folds_to})), \
        f"upstream canonicalization changed: {sorted(upstream)} (update the expected fold)"
    ours = _ours(text)
    assert upstream <= ours, f"canonicalize returns input {sorted(upstream)}, the analysis says {sorted(ours)}"
    assert ours == upstream, f"a false alias: {sorted(ours)} (upstream: {sorted(upstream)})"


def test_a_folded_kernel_keeps_its_input_storage_alive():
    """Fuzz seed 2412170: where(c, where(c, x, 0), x) is x once canonicalized; its input (a planned
    reduction result) was returned as it is while a later kernel reused the reduction's storage:
    element 0 came back as -255 (the later kernel's byte 1 over -9's other bytes)."""
    t1, tb = "!relax.tensor<[1, 5], i32>", "!relax.tensor<[1, 5], i1>"
    text = f"""
func.func @main(%x: !relax.tensor<[4, 5], i32>, %c: {tb}) -> ({t1}, {tb}) {{
  %0 = "relax.min"(%x) {{axes = [0], keepdims = false}} : (!relax.tensor<[4, 5], i32>) -> !relax.tensor<[5], i32>
  %1 = "relax.reshape"(%0) {{shape = [1, 5]}} : (!relax.tensor<[5], i32>) -> {t1}
  %2 = "relax.constant"() {{value = dense<0> : tensor<1x5xi32>}} : () -> {t1}
  %3 = "relax.where"(%c, %1, %2) : ({tb}, {t1}, {t1}) -> {t1}
  %4 = "relax.where"(%c, %3, %1) : ({tb}, {t1}, {t1}) -> {t1}
  %5 = "relax.constant"() {{value = dense<0> : tensor<1x1xi64>}} : () -> !relax.tensor<[1, 1], i64>
  %6 = "relax.greater_equal"(%5, %5) : (!relax.tensor<[1, 1], i64>, !relax.tensor<[1, 1], i64>) -> !relax.tensor<[1, 1], i1>
  %7 = "relax.broadcast_to"(%6) {{shape = [1, 5]}} : (!relax.tensor<[1, 1], i1>) -> {tb}
  %8 = "relax.where"(%7, %7, %c) : ({tb}, {tb}, {tb}) -> {tb}
  return %4, %8 : {t1}, {tb}
}}
"""
    exe = relax_mlir.compile(text)
    x = np.array([[-8, -3, -4, 5, 7], [-9, -4, -4, 3, 2], [7, 8, 2, -6, 2], [-1, 7, 5, 7, -8]], np.int32)
    c = np.array([[False, True, True, False, False]])
    got, mask = exe(x, c)
    np.testing.assert_array_equal(got, x.min(0, keepdims=True))
    np.testing.assert_array_equal(mask, np.ones((1, 5), bool))


_INT_OPS = ["addi", "subi", "muli", "divsi", "divui", "remsi", "andi", "ori", "xori", "shli", "shrsi", "shrui",
            "maxsi", "minsi", "maxui", "minui", "floordivsi", "ceildivsi", "ceildivui"]
_FLOAT_OPS = ["addf", "subf", "mulf", "divf", "maximumf", "minimumf", "maxnumf", "minnumf", "remf"]


def _random_body(r, kind: str) -> str:
    """Body lines computing %v: a random expression of depth <= 3 over %x, %y, %p and the
    CONSTANTS, with selects and round-trip casts."""
    lines: list[str] = []
    count = [0]

    def fresh():
        count[0] += 1
        return f"%t{count[0]}"

    def expr(depth):
        leaves = ["%x", "%y", "%c0", "%c1", "%cm1", "%cmax", "%cmin"] if kind == "i32" else ["%x", "%y", "%f0", "%fm0", "%f1"]
        if depth == 0 or r.random() < 0.3:
            return r.choice(leaves)
        name, c = fresh(), r.random()
        if c < 0.2:
            a, b = expr(depth - 1), expr(depth - 1)
            lines.append(f"{name} = arith.select {r.choice(['%p', '%true', '%false'])}, {a}, {b} : {kind}")
        elif c < 0.3:
            a, w = expr(depth - 1), fresh()
            if kind == "i32":
                lines.extend([f"{w} = arith.{r.choice(['extsi', 'extui'])} {a} : i32 to i64",
                              f"{name} = arith.trunci {w} : i64 to i32"])
            elif r.random() < 0.5:
                lines.extend([f"{w} = arith.negf {a} : f32", f"{name} = arith.negf {w} : f32"])
            else:
                lines.extend([f"{w} = arith.extf {a} : f32 to f64", f"{name} = arith.truncf {w} : f64 to f32"])
        else:
            op = r.choice(_INT_OPS if kind == "i32" else _FLOAT_OPS)
            a, b = expr(depth - 1), expr(depth - 1)
            lines.append(f"{name} = arith.{op} {a}, {b} : {kind}")
        return name

    top = expr(3)
    lines.append(f"%v = arith.select %p, {top}, {top} : {kind}")
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(4))
def test_random_bodies_never_alias_less_than_upstream(seed):
    """Random bodies (constants computed from constants, absorbing and identity operands, selects
    on known conditions): whatever input upstream canonicalization returns, the analysis names."""
    import random

    r = random.Random(seed)
    folds = 0
    for _ in range(60):
        kind = r.choice(["i32", "f32"])
        body = _random_body(r, kind)
        text = kernel(kind, kind, body)
        upstream = _upstream(text)
        folds += bool(upstream)
        assert upstream <= _ours(text), f"missed a fold to input {sorted(upstream)}:\n{body}"
    assert folds, "no body folded to an input: the generator no longer tests anything"
