"""Compile work grows linearly in depth: a stack of pre-norm residual blocks (each layer with its own
weights, as an LLM) calls the same kernels at every depth (LLVM compiles each once), the entry grows
by the same ops per layer and is inlined into its C-interface wrapper (no call with one scalar
argument per memref field for LLVM to select)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mlir import ir

import relax_mlir
from relax_mlir.backend import cpu
from relax_mlir.frontend.jax import from_jax
from relax_mlir.targets import get_target

D, F = 16, 24


def stack(layers: int):
    """x -> `layers` blocks x += W2 silu(W1 rms(x)), x += Wo rms(x); the residual stream has three
    readers per layer (the next norm's sum, its scaling and the next residual add)."""

    def rms(x, g):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g

    def f(x, *ws):
        for i in range(layers):
            g1, w1, w2, g2, wo = ws[5 * i:5 * i + 5]
            x = x + jax.nn.silu(rms(x, g1) @ w1) @ w2
            x = x + rms(x, g2) @ wo
        return x

    return f


def specs(layers: int):
    s = jax.export.symbolic_shape("s")[0]
    w = [(D,), (D, F), (F, D), (D,), (D, D)]
    return [jax.ShapeDtypeStruct((s, D), jnp.float32)] + \
        [jax.ShapeDtypeStruct(shape, jnp.float32) for _ in range(layers) for shape in w]


def upstream(layers: int) -> relax_mlir.Module:
    """The module after the CPU target's relax pipeline (upstream dialects: kernels + entry)."""
    return relax_mlir.run_passes(from_jax(stack(layers), *specs(layers)), get_target("cpu").pipeline(True))


def kernels(module_op: ir.Operation) -> list[str]:
    return sorted(ir.StringAttr(f.attributes["sym_name"]).value for f in cpu._kernels(module_op))


def entry_ops(module_op: ir.Operation) -> int:
    n = [0]

    def count(_o):
        n[0] += 1

    for f in module_op.regions[0].blocks[0].operations:
        if f.operation.name == "func.func" and not cpu._is_private(f):
            cpu.walk(f.operation, count)
    return n[0]


def test_kernels_do_not_grow_with_depth():
    """Every layer calls the same kernels: the residual stream is materialized once per layer, not
    recomputed by the next layers' norms (which made each layer's kernels different)."""
    m2, m4, m8 = upstream(2), upstream(4), upstream(8)
    with m2.context:
        k2, k4, k8 = kernels(m2.op), kernels(m4.op), kernels(m8.op)
    assert k2 == k4 == k8


def test_residual_stream_is_not_recomputed_in_later_layers():
    """No fused kernel re-adds earlier layers' outputs: every fused elementwise kernel reads at
    most the residual plus one layer output (a growing chain of adds was one new kernel per layer)."""
    m = upstream(4)
    with m.context:
        for f in cpu._kernels(m.op):
            adds = []
            cpu.walk(f.operation, lambda o: adds.append(o) if o.name == "arith.addf" else None)
            assert len(adds) <= 3, ir.StringAttr(f.attributes["sym_name"]).value


def test_entry_grows_linearly_with_depth():
    """The entry (host code) grows by the same number of ops per layer."""
    m2, m3, m4 = upstream(2), upstream(3), upstream(4)
    with m2.context:
        e2, e3, e4 = entry_ops(m2.op), entry_ops(m3.op), entry_ops(m4.op)
    assert e4 - e3 == e3 - e2 > 0


def test_entry_is_inlined_into_its_c_interface_wrapper():
    m = upstream(3)
    with m.context:
        op = m.op.clone(ip=False)
        cpu.lower(op, cpu.CPUOptions(num_threads=1))
        pairs = cpu.entry_wrapper_pairs(op)
        assert [ir.StringAttr(e.attributes["sym_name"]).value for e, _ in pairs] == ["main"]
        entry, wrapper = pairs[0]
        assert str(entry.attributes["linkage"]) == "#llvm.linkage<internal>"
        assert '"alwaysinline"' in str(entry.attributes["passthrough"])
        # the only defined functions left external (each gets an ExecutionEngine packed wrapper)
        # are the C-interface wrappers, which take one pointer per memref
        external = [ir.StringAttr(f.attributes["sym_name"]).value
                    for f in op.regions[0].blocks[0].operations
                    if f.operation.name == "llvm.func" and len(f.regions[0].blocks) > 0
                    and ("linkage" not in f.attributes or "internal" not in str(f.attributes["linkage"]))]
        assert external == ["_mlir_ciface_main"]


@pytest.mark.parametrize("layers", [1, 4])
def test_stack_matches_jax(layers):
    exe = relax_mlir.compile(from_jax(stack(layers), *specs(layers)))
    rng = np.random.default_rng(layers)
    ws = [(rng.standard_normal(s.shape) * 0.3).astype(np.float32) for s in specs(layers)[1:]]
    ref = jax.jit(stack(layers))
    for s in (1, 7, 33):
        x = rng.standard_normal((s, D)).astype(np.float32)
        np.testing.assert_allclose(exe(x, *ws), np.asarray(ref(x, *ws)), rtol=2e-5, atol=2e-5)
