"""The CPU build's machine code generated on several threads (backend/cpu_engine.py): the module
split into a host piece and kernel pieces, one ExecutionEngine each, gives the same results as one
engine; what cannot be split (mutable state a kernel touches) stays one engine; two compiles at
once on two Python threads both work."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from mlir import ir

import relax_mlir
from relax_mlir import knobs
from relax_mlir.backend import cpu, cpu_engine

# A host program (the C-interface wrapper and its always-inlined entry) calling two kernels that
# share a helper and a constant global: out[i] = k1(x[i]) + k2(x[i]) = (2x + 7) + (3x + 7).
# With `STATE` the helper also counts its calls in a mutable global and returns the count.
HOST_AND_KERNELS = """
module {
  llvm.mlir.global internal constant @seven(7.0 : f32) : f32
  STATE
  llvm.func internal @helper(%x: f32) -> f32 {
    %p = llvm.mlir.addressof @seven : !llvm.ptr
    %c = llvm.load %p : !llvm.ptr -> f32
    %r = llvm.fadd %x, %c : f32
    COUNT
    llvm.return %r : f32
  }
  llvm.func internal @k1(%x: f32) -> f32 {
    %two = llvm.mlir.constant(2.0 : f32) : f32
    %m = llvm.fmul %x, %two : f32
    %r = llvm.call @helper(%m) : (f32) -> f32
    llvm.return %r : f32
  }
  llvm.func internal @k2(%x: f32) -> f32 {
    %three = llvm.mlir.constant(3.0 : f32) : f32
    %m = llvm.fmul %x, %three : f32
    %r = llvm.call @helper(%m) : (f32) -> f32
    llvm.return %r : f32
  }
  llvm.func internal @main(%d: !llvm.ptr) attributes {passthrough = ["alwaysinline"]} {
    %one = llvm.mlir.constant(1 : i64) : i64
    %zero = llvm.mlir.constant(0 : i64) : i64
    %pa = llvm.getelementptr %d[8] : (!llvm.ptr) -> !llvm.ptr, i8
    %data = llvm.load %pa : !llvm.ptr -> !llvm.ptr
    %ps = llvm.getelementptr %d[24] : (!llvm.ptr) -> !llvm.ptr, i8
    %n = llvm.load %ps : !llvm.ptr -> i64
    llvm.br ^loop(%zero : i64)
  ^loop(%i: i64):
    %more = llvm.icmp "slt" %i, %n : i64
    llvm.cond_br %more, ^body, ^done
  ^body:
    %pe = llvm.getelementptr %data[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %x = llvm.load %pe : !llvm.ptr -> f32
    %a = llvm.call @k1(%x) : (f32) -> f32
    %b = llvm.call @k2(%x) : (f32) -> f32
    %s = llvm.fadd %a, %b : f32
    llvm.store %s, %pe : f32, !llvm.ptr
    %next = llvm.add %i, %one : i64
    llvm.br ^loop(%next : i64)
  ^done:
    llvm.return
  }
  llvm.func @_mlir_ciface_main(%d: !llvm.ptr) {
    llvm.call @main(%d) : (!llvm.ptr) -> ()
    llvm.return
  }
}
"""

COUNTER = "llvm.mlir.global internal @calls(0.0 : f32) : f32"
BUMP = """%q = llvm.mlir.addressof @calls : !llvm.ptr
    %k = llvm.load %q : !llvm.ptr -> f32
    %one_f = llvm.mlir.constant(1.0 : f32) : f32
    %k1 = llvm.fadd %k, %one_f : f32
    llvm.store %k1, %q : f32, !llvm.ptr"""


def _jit(text: str, threads: int) -> cpu.JitModule:
    with knobs.overridden(RELAX_MLIR_JIT_THREADS=str(threads)):
        ctx = ir.Context()
        return cpu.JitModule(ir.Module.parse(text, ctx))


def _run(jit: cpu.JitModule, x: np.ndarray) -> np.ndarray:
    y = x.copy()
    jit.invoke("main", y)
    return y


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_split_host_and_kernels_computes_as_one_engine(threads):
    jit = _jit(HOST_AND_KERNELS.replace("STATE", "").replace("COUNT", ""), threads)
    # one engine, or the host piece and a piece per worker (at most one per kernel: 2)
    assert len(jit.engine.engines) == (1 if threads == 1 else 1 + min(threads, 2))
    for n in (0, 1, 7, 1000):
        x = np.arange(n, dtype=np.float32) - 3
        np.testing.assert_array_equal(_run(jit, x), (2 * x + 7) + (3 * x + 7))


def test_plan_copies_shared_helpers_and_exports_kernels():
    ctx = ir.Context()
    m = ir.Module.parse(HOST_AND_KERNELS.replace("STATE", "").replace("COUNT", ""), ctx)
    plan = cpu_engine._Plan(m.operation, {"main", "_mlir_ciface_main"}, 2)
    assert plan.ok
    assert sorted(plan.roots) == ["k1", "k2"]
    assert plan.pieces[0] == {"main", "_mlir_ciface_main"}
    # each kernel piece has its own copy of the helper and of the constant it reads
    assert plan.pieces[1] & plan.pieces[2] == {"helper", "seven"}
    host = cpu_engine._piece_module(m.operation, plan, 0, {"_mlir_ciface_main"})
    funcs = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in host.body.operations}
    # in the host piece a kernel calls through its slot (an external global the kernel's address
    # is written to), so the host imports nothing from the kernel pieces; its wrapper is compiled
    # unoptimised
    k1_ops = [o.operation.name for o in funcs["k1"].regions[0].blocks[0].operations]
    assert k1_ops == ["llvm.mlir.addressof", "llvm.load", "llvm.inttoptr", "llvm.call", "llvm.return"]
    assert "__relax_slot_k1" in funcs and "__relax_slot_k2" in funcs
    assert "helper" not in funcs
    assert '"optnone"' in str(funcs["_mlir_ciface_main"].attributes["passthrough"])
    kernel = cpu_engine._piece_module(m.operation, plan, plan.owner["k1"], set())
    k1 = next(f for f in kernel.body.operations if ir.StringAttr(f.attributes["sym_name"]).value == "k1")
    assert str(k1.attributes["linkage"]) == "#llvm.linkage<external>"


def test_mutable_state_in_a_kernel_keeps_one_engine():
    """A kernel piece would copy the counter: the module is compiled as one engine, and the count
    is the program's (two helper calls per element, across calls)."""
    text = HOST_AND_KERNELS.replace("STATE", COUNTER).replace("COUNT", BUMP)
    jit = _jit(text, 2)
    assert len(jit.engine.engines) == 1
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(_run(jit, x), (2 * x + 7) + (3 * x + 7))


def test_compiles_on_two_threads_at_once():
    """Two Python threads compile (each build split over the cores) and run at the same time."""
    import jax
    import jax.numpy as jnp

    n, = jax.export.symbolic_shape("n")
    specs = [jax.ShapeDtypeStruct((n, 24), jnp.float32), jax.ShapeDtypeStruct((24, 24), jnp.float32)]

    def f(x, w):
        return jnp.tanh(x @ w).sum(axis=1) + jnp.exp(-x).max(axis=1)

    results: dict[int, object] = {}

    def work(k: int):
        try:
            mod = relax_mlir.from_jax(f, *specs)
            exe = relax_mlir.compile(mod)
            x = np.random.default_rng(k).standard_normal((7 + k, 24)).astype(np.float32)
            w = np.random.default_rng(10 + k).standard_normal((24, 24)).astype(np.float32) * 0.2
            results[k] = (exe(x, w), np.tanh(x @ w).sum(axis=1) + np.exp(-x).max(axis=1))
        except Exception as e:  # reported below, not lost in the thread
            results[k] = e

    with knobs.overridden(RELAX_MLIR_JIT_THREADS="2"):
        threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for k in range(2):
        assert not isinstance(results[k], Exception), results[k]
        got, want = results[k]
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_jit_threads_setting_is_checked(value):
    with knobs.overridden(RELAX_MLIR_JIT_THREADS=value):
        with pytest.raises(ValueError, match="RELAX_MLIR_JIT_THREADS"):
            knobs.jit_threads()
