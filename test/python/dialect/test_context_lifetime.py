"""An MLIR context dies with the last object that uses it: compile() and the importer leave no
context behind (each held its types, attributes and a thread pool of one thread per core: 2.8 MiB
and two threads per compile on a 2-core machine, for the life of the process), and the type caches
of dialect/types.py are per context, dropped with it."""
import gc
import os

import numpy as np
import pytest
from mlir import ir

import relax_mlir
from relax_mlir.dialect import new_context, types


def _live() -> int:
    gc.collect()
    return ir.Context._get_live_count()


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def test_compile_and_import_leave_no_context():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from relax_mlir.frontend.jax import from_jax

    (b,) = jax.export.symbolic_shape("b")
    x = np.ones((3, 16), np.float32)
    exe = relax_mlir.compile(from_jax(lambda x: jnp.tanh(x) @ x.T, jax.ShapeDtypeStruct((b, 16), jnp.float32)))
    exe(x)
    del exe
    before, threads = _live(), _threads()
    for i in range(4):
        mod = from_jax(lambda x, i=i: jnp.tanh(x * (i + 2)) @ x.T, jax.ShapeDtypeStruct((b, 16), jnp.float32))
        exe = relax_mlir.compile(mod)
        np.testing.assert_allclose(exe(x), np.tanh(x * (i + 2)) @ x.T, rtol=1e-5)
        del exe, mod
    assert _live() == before
    assert _threads() <= threads


def test_type_caches_are_per_context():
    text = '!relax.tensor<["n", 4], f32>'
    a, b = new_context(), new_context()
    with a:
        ta = types._to_mlir(text)
        assert types._to_mlir(text) == ta
        view = types.view(ta)
    with b:
        tb = types._to_mlir(text)
    assert ta.context == a and tb.context == b
    assert isinstance(view, types.TensorType) and view.dtype == "f32"
    assert types.view(tb) == view
    ka = id(a)
    assert ka in types._PER_CONTEXT
    del a, ta
    gc.collect()
    assert ka not in types._PER_CONTEXT
    with b:
        assert types._to_mlir(text) == tb  # the other context's entries stay
