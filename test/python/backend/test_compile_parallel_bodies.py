"""The threaded build compiles each parallel loop's outlined body once: `async-parallel-for`'s
`parallel_compute_fn`s are `noinline` (LLVM copied them into both their callers, the kernel and the
coroutine that launches the other blocks, and coroutine splitting cloned the copy again)."""
from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

from relax_mlir.backend import cpu

from test_cpu import ADD_RELU, CHAIN3, err_slot


def lowered_funcs(text: str, threads: int) -> dict[str, list[str]]:
    """name -> passthrough flags of every defined llvm.func after the CPU lowering."""
    with ir.Context():
        module = ir.Module.parse(text)
        cpu.lower(module, cpu.CPUOptions(num_threads=threads))
        out = {}
        for f in module.body.operations:
            if f.operation.name == "llvm.func" and len(f.regions[0].blocks):
                flags = [ir.StringAttr(a).value for a in f.attributes["passthrough"]] \
                    if "passthrough" in f.attributes else []
                out[ir.StringAttr(f.attributes["sym_name"]).value] = flags
        return out


@pytest.mark.parametrize("text", [ADD_RELU, CHAIN3], ids=["add_relu", "chain3"])
def test_parallel_bodies_are_noinline(text):
    funcs = lowered_funcs(text, 2)
    bodies = {n: f for n, f in funcs.items() if n.startswith(cpu._PARALLEL_BODY)}
    assert bodies, "the threaded build has no parallel loop"
    assert all("noinline" in f and "alwaysinline" not in f for f in bodies.values()), bodies
    # Nothing else changed: kernels stay noinline, the entry is inlined into its wrapper.
    assert all("noinline" in f for n, f in funcs.items() if n.startswith(cpu._KERNEL_PREFIX))
    assert "alwaysinline" in funcs["main"]


def test_one_thread_build_has_no_parallel_bodies():
    assert not [n for n in lowered_funcs(ADD_RELU, 1) if n.startswith(cpu._PARALLEL_BODY)]


def test_threaded_numerics_with_outlined_bodies():
    with ir.Context():
        module = ir.Module.parse(ADD_RELU)
        cpu.lower(module, cpu.CPUOptions(num_threads=2))
        jit = cpu.JitModule(module)
    rng = np.random.default_rng(3)
    for n in (1, 13, 1031):  # 1031 rows: several blocks of iterations, some on the other thread
        x = rng.standard_normal((n, 64)).astype(np.float32)
        b = rng.standard_normal(64).astype(np.float32)
        out, err = np.empty((n, 64), np.float32), err_slot()
        jit.invoke("main", x, b, out, err)
        assert err[0] == 0
        np.testing.assert_array_equal(out, np.maximum(x + b, np.float32(0)))
