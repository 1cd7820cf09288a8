"""A call interrupted or re-entered in its own thread: the storage blocks a running call's
descriptors point to stay alive when a re-entrant call (a signal handler, a finalizer, a trace
hook calling the model) grows them; a KeyboardInterrupt anywhere in the first call's storage
setup leaves a state the next call works from; a storage block too large to allocate is a
ValueError naming the entry. The re-entry and the interrupts are placed with sys.settrace."""
from __future__ import annotations

import inspect
import linecache
import sys
import threading
import weakref

import numpy as np
import pytest

import relax_mlir
from relax_mlir.runtime import executable

# Two matmuls and an exp: storage blocks whose sizes grow with m.
SRC = """
func.func @main(%x: !relax.tensor<["m", 32], f32>) -> !relax.tensor<[32], f32> {
  %t = "relax.permute_dims"(%x) {axes = [1, 0]} : (!relax.tensor<["m", 32], f32>) -> !relax.tensor<[32, "m"], f32>
  %a = "relax.matmul"(%x, %t) : (!relax.tensor<["m", 32], f32>, !relax.tensor<[32, "m"], f32>) -> !relax.tensor<["m", "m"], f32>
  %h = "relax.tanh"(%a) : (!relax.tensor<["m", "m"], f32>) -> !relax.tensor<["m", "m"], f32>
  %b = "relax.matmul"(%h, %x) : (!relax.tensor<["m", "m"], f32>, !relax.tensor<["m", 32], f32>) -> !relax.tensor<["m", 32], f32>
  %e = "relax.exp"(%b) : (!relax.tensor<["m", 32], f32>) -> !relax.tensor<["m", 32], f32>
  %s = "relax.sum"(%e) {axes = [0]} : (!relax.tensor<["m", 32], f32>) -> !relax.tensor<[32], f32>
  return %s : !relax.tensor<[32], f32>
}
"""


def reference(x):
    x = x.astype(np.float64)
    return np.exp(np.tanh(x @ x.T) @ x).sum(0)


@pytest.fixture(scope="module")
def exe():
    e = relax_mlir.compile(SRC)
    assert e["main"].sig.workspace, "the test needs an entry with storage blocks"
    return e


def _in_thread(fn):
    """Run `fn` in a fresh thread (whose first call allocates its own storage blocks)."""
    t = threading.Thread(target=fn)
    t.start()
    t.join()


def test_reentrant_call_keeps_the_outer_calls_blocks_alive(exe):
    rng = np.random.default_rng(0)
    small = (rng.standard_normal((3, 32)) / 8).astype(np.float32)
    big = (rng.standard_normal((1800, 32)) / 8).astype(np.float32)
    fn = exe["main"]
    seen = {}

    def reenter():  # the outer call has written its descriptors; the inner one grows the blocks
        old = [weakref.ref(b.base if b.base is not None else b) for b in fn._ws.blocks]  # the memory's owners
        seen["inner"] = exe(big)
        seen["alive"] = [r() is not None for r in old]

    def hook(frame, event, arg):
        if frame.f_code.co_name != "_call":
            return None

        def local(frame, event, arg):
            if event == "line" and "st.err[0] = 0" in linecache.getline(frame.f_code.co_filename, frame.f_lineno):
                sys.settrace(None)
                reenter()
            return local
        return local

    def run():
        sys.settrace(hook)
        try:
            seen["outer"] = exe(small)
        finally:
            sys.settrace(None)

    _in_thread(run)
    assert seen["alive"] and all(seen["alive"]), "a block the outer call points to was freed by the inner call"
    np.testing.assert_allclose(seen["outer"], reference(small), rtol=2e-4)
    np.testing.assert_allclose(seen["inner"], reference(big), rtol=2e-4)


def test_interrupt_anywhere_in_the_first_calls_storage_setup(exe):
    """KeyboardInterrupt at each line of Function.workspace in a thread's first call: the next
    calls in that thread are right (an interrupt between publishing the blocks and their counters
    made every later call an AttributeError)."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((40, 32)) / 8).astype(np.float32)
    want = reference(x)
    code = executable.Function.workspace.__code__
    src, first = inspect.getsourcelines(executable.Function.workspace)
    lines = [first + i for i, text in enumerate(src) if i > 0 and text.strip()
             and not text.strip().startswith(("#", '"'))]
    failures = []
    for line in lines:
        def interrupt(frame, event, arg, line=line):
            if event == "line" and frame.f_lineno == line:
                sys.settrace(None)
                raise KeyboardInterrupt
            return interrupt

        def hook(frame, event, arg):
            return interrupt if frame.f_code is code else None

        def run(line=line):
            sys.settrace(hook)
            try:
                exe(x)
            except KeyboardInterrupt:
                pass
            finally:
                sys.settrace(None)
            try:
                for _ in range(2):
                    np.testing.assert_allclose(exe(x), want, rtol=2e-4)
            except Exception as e:  # noqa: BLE001 - reported with the line
                failures.append(f"line {line}: {type(e).__name__}: {e}")

        _in_thread(run)
    assert len(lines) > 10 and not failures, failures


def test_storage_block_too_large_names_the_entry():
    """Zero-width arguments carry symbol values of 2^32 and 2^40 without memory; the [a, b]
    intermediate's block is 2^66 or 2^62 bytes: a ValueError naming the entry and the size (was
    numpy's bare 'Maximum allowed dimension exceeded' / an unnamed MemoryError); the next call works."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    a, b = jax.export.symbolic_shape("a, b")

    def f(x, y):
        return (jnp.arange(x.shape[0], dtype=jnp.float32)[:, None]
                + jnp.arange(y.shape[0], dtype=jnp.float32)[None, :]).max()

    e = relax_mlir.compile(jax.export.export(jax.jit(f))(jax.ShapeDtypeStruct((a, 0), jnp.float32),
                                                         jax.ShapeDtypeStruct((b, 0), jnp.float32)))
    for n, m in ((2**32, 2**32), (2**40, 2**20)):
        with pytest.raises(ValueError, match=r"@main: a storage block of \d+ bytes .* cannot be allocated"):
            e(np.empty((n, 0), np.float32), np.empty((m, 0), np.float32))
    assert float(e(np.empty((3, 0), np.float32), np.empty((4, 0), np.float32))) == 5.0
