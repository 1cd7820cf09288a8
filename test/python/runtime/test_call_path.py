"""The fast call path's pieces: data pointers read for a whole argument list (one gather at the
objects' addresses) equal numpy's own for every kind of array, and calls from several threads,
with bindings changing from call to call, keep their descriptors apart."""
from __future__ import annotations

import threading

import ml_dtypes
import numpy as np
import pytest

import relax_mlir
from relax_mlir.runtime import executable as ex


def test_pointers_match_numpy():
    base = np.arange(64, dtype=np.float32)
    ro = np.ones(5)
    ro.flags.writeable = False
    arrays = [base, base[7:], base.reshape(8, 8)[3], base.reshape(8, 8)[:, 2], np.zeros((0, 3)), ro,
              np.full((), 2.0, np.float32), np.ones(3, ml_dtypes.bfloat16), np.ones((2, 2), np.uint16).T,
              np.empty(1 << 20, np.int8)[5:]]
    want = [a.ctypes.data for a in arrays]
    assert ex._pointers(arrays) == want
    assert ex._pointer_array(arrays[:4], arrays[4:]).tolist() == want
    assert ex._pointer_array((), ()).tolist() == []


def test_threads_with_changing_bindings():
    """Each thread has its own call buffer; sizes are rewritten when the symbols change."""
    src = """func.func @main(%x: !relax.tensor<["n", "k"], f32>, %y: !relax.tensor<["k"], f32>) -> !relax.tensor<["n", "k"], f32> {
  %a = "relax.multiply"(%x, %y) : (!relax.tensor<["n", "k"], f32>, !relax.tensor<["k"], f32>) -> !relax.tensor<["n", "k"], f32>
  return %a : !relax.tensor<["n", "k"], f32>
}"""
    exe = relax_mlir.compile(src)
    g = exe["main"].partial({1: np.arange(3, dtype=np.float32)})
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(40):
            n, k = int(rng.integers(0, 9)), int(rng.integers(1, 6))
            x, y = rng.standard_normal((n, k)).astype(np.float32), rng.standard_normal(k).astype(np.float32)
            if not np.array_equal(exe(x, y), x * y):
                errors.append(("exe", n, k))
            x3 = rng.standard_normal((n, 3)).astype(np.float32)
            if not np.array_equal(g(x3), x3 * np.arange(3, dtype=np.float32)):
                errors.append(("partial", n))

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:5]


_CHAIN = """func.func @main(%x: !relax.tensor<["n", "k"], f32>, %y: !relax.tensor<["k"], f32>) -> !relax.tensor<["n", "k"], f32>
    attributes {relax.symbol_bounds = {n = 64}} {
  %a = "relax.multiply"(%x, %y) : (!relax.tensor<["n", "k"], f32>, !relax.tensor<["k"], f32>) -> !relax.tensor<["n", "k"], f32>
  return %a : !relax.tensor<["n", "k"], f32>
}"""


def test_new_binding_runs_generated_code_not_the_expression_interpreter(monkeypatch):
    """What a new binding implies (expected shapes, bounds, result shapes, descriptor sizes,
    workspace sizes) comes from Python code generated once per signature: calls at new shapes
    evaluate no expression tree, and the generated source holds no symbol names."""
    from relax_mlir.shape import Expr

    exe = relax_mlir.compile(_CHAIN)
    f = exe["main"]
    src = f._plan.facts_fn.source
    assert "def facts(_a0, _a1)" in src and " n" not in src and " k" not in src
    rng = np.random.default_rng(0)
    cases = []
    for n, k in ((1, 1), (7, 3), (64, 13), (0, 5), (5, 0), (33, 2)):
        x, y = rng.standard_normal((n, k)).astype(np.float32), rng.standard_normal(k).astype(np.float32)
        cases.append((x, y, f.partial({1: y})))  # partial checks its arrays once, here
    monkeypatch.setattr(Expr, "evaluate", lambda self, env: pytest.fail(f"interpreted {self} at {env}"))
    for x, y, g in cases:
        np.testing.assert_array_equal(exe(x, y), x * y)
        np.testing.assert_array_equal(g(x), x * y)


def test_bad_calls_at_new_bindings_name_argument_and_symbol():
    """Each error is raised at a binding never seen before (so from the generated facts), naming
    the argument, the dim and the symbol, or the bound and where its symbol came from."""
    exe = relax_mlir.compile(_CHAIN)
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"argument #1 has shape \(5,\), but dim 0 must be k \(k = 4 from "
                                         r"argument #0 dim 1\)"):
        exe(x, np.ones(5, np.float32))
    with pytest.raises(ValueError, match=r"symbol n = 65 \(from argument #0 dim 0\) exceeds its upper bound 64"):
        exe(np.ones((65, 2), np.float32), np.ones(2, np.float32))
    g = exe["main"].partial({1: np.ones(6, np.float32)})
    with pytest.raises(ValueError, match=r"argument #0 has shape \(2, 7\), but dim 1 must be k \(k = 6 from "
                                         r"argument #1 dim 0, bound by partial\)"):
        g(np.ones((2, 7), np.float32))
    with pytest.raises(ValueError, match=r"symbol n = 99 \(from argument #0 dim 0\) exceeds its upper bound 64"):
        g(np.ones((99, 6), np.float32))
    np.testing.assert_array_equal(g(np.full((64, 6), 2, np.float32)), np.full((64, 6), 2, np.float32))


def test_workspace_grows_geometrically():
    """Calls at ever larger shapes reallocate the storage blocks O(log) times, not at each shape."""
    src = """func.func @main(%x: !relax.tensor<["n", 64], f32>) -> !relax.tensor<["n", 64], f32> {
  %a = "relax.exp"(%x) : (!relax.tensor<["n", 64], f32>) -> !relax.tensor<["n", 64], f32>
  %b = "relax.exp"(%a) : (!relax.tensor<["n", 64], f32>) -> !relax.tensor<["n", 64], f32>
  %c = "relax.add"(%a, %b) : (!relax.tensor<["n", 64], f32>, !relax.tensor<["n", 64], f32>) -> !relax.tensor<["n", 64], f32>
  return %c : !relax.tensor<["n", 64], f32>
}"""
    exe = relax_mlir.compile(src, passes=["relax-infer-shapes", "relax-legalize", "relax-plan-memory",
                                          "relax-lower-shapes", "relax-to-upstream"])  # unfused: blocks planned
    f = exe["main"]
    assert f.sig.workspace
    grown = []
    for n in range(1, 65):
        x = np.full((n, 64), 0.01 * n, np.float32)
        np.testing.assert_allclose(exe(x), np.exp(x) + np.exp(np.exp(x)), rtol=1e-5)
        grown.append(f._ws.gen)
    assert grown[-1] <= 8 * len(f.sig.workspace), grown
