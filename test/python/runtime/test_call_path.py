"""The fast call path's pieces: data pointers read for a whole argument list (one gather at the
objects' addresses) equal numpy's own for every kind of array, and calls from several threads,
with bindings changing from call to call, keep their descriptors apart."""
from __future__ import annotations

import threading

import ml_dtypes
import numpy as np

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
