"""target="webgpu": WGSL kernels (backend/wgsl.py) run in-process on wgpu-py (naga + lavapipe):
every test model at its three sizes from ONE compile against jax.jit; the emitter's refusals
(barrier in non-uniform control flow, unsupported types) are located errors; grids over 65535
workgroups are folded; 32-bit index overflow is refused at launch; an exported artifact loads
and runs. The browser (Dawn) checks are in test_webgpu_browser.py."""
from __future__ import annotations

import numpy as np
import pytest

import model_zoo as zoo
import relax_mlir
from relax_mlir.backend import wgsl
from relax_mlir.backend.common import LoweringError
from relax_mlir.core.diagnostics import CompileError
from relax_mlir.runtime import load
from relax_mlir.runtime.webgpu import fold_grid, pack_params


def _available() -> bool:
    from relax_mlir.runtime import vulkan

    return vulkan.available()


needs_adapter = pytest.mark.skipif(not _available(), reason="no wgpu adapter (lavapipe) on this machine")


@needs_adapter
@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_model_zoo_on_wgpu(name):
    exe = relax_mlir.compile(zoo.relax_text(name), target="webgpu")
    table = exe.artifacts["webgpu"]
    # every kernel fits WebGPU's default limits, so that a browser device needs no raised limit
    assert table["limits"] == wgsl.DEFAULT_LIMITS, table["limits"]
    for k in table["kernels"].values():
        assert k["storage_buffers"] <= 8 and k["uniform_fields"][-3:] == ["u32", "u32", "u32"]
    for n, (args, want) in zip(zoo.MODELS[name].sizes, zoo.references(name)):
        zoo.assert_matches(name, zoo.as_list(exe(*args)), want, n)


ELEMENTWISE = '''
func.func @main(%x: !relax.tensor<["n"], f32>, %y: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> {
  %a = "relax.maximum"(%x, %y) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %a : !relax.tensor<["n"], f32>
}
'''


@needs_adapter
def test_maximum_nan_and_folded_grid(tmp_path):
    """maximumf propagates NaN (WGSL has no isNan: x != x); a 1-D launch of more than 65535
    workgroups (tile 32: n > 2^21) is folded over y and every element is computed."""
    exe = relax_mlir.compile(ELEMENTWISE, target="webgpu")
    x = np.array([1.0, np.nan, -np.inf, 3.0, -0.0], np.float32)
    y = np.array([np.nan, 2.0, 5.0, np.inf, 1.0], np.float32)
    np.testing.assert_array_equal(exe(x, y), np.maximum(x, y))
    n = 32 * 70000 + 5
    assert fold_grid((70001, 1, 1)) == (65535, 2, 1)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    np.testing.assert_array_equal(exe(x, y), np.maximum(x, y))
    exe.export(str(tmp_path / "art"))
    again = load(str(tmp_path / "art"))
    np.testing.assert_array_equal(again(x[:100], y[:100]), np.maximum(x[:100], y[:100]))


BOOLS = '''
func.func @main(%x: !relax.tensor<["n"], f32>, %y: !relax.tensor<["n"], f32>) -> (!relax.tensor<["n"], i1>, !relax.tensor<["n"], i8>) {
  %m = "relax.less"(%x, %y) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], i1>
  %c = "relax.astype"(%x) {dtype = i8} : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], i8>
  return %m, %c : !relax.tensor<["n"], i1>, !relax.tensor<["n"], i8>
}
'''


@needs_adapter
def test_byte_buffers():
    """i1 and i8 buffers keep numpy's one byte an element: neighbouring invocations write bytes
    of one 32-bit word (atomicAnd / atomicOr) without losing each other's bytes."""
    exe = relax_mlir.compile(BOOLS, target="webgpu")
    for n in (1, 7, 33, 1000):
        rng = np.random.default_rng(n)
        x = rng.uniform(-100, 100, n).astype(np.float32)
        y = rng.uniform(-100, 100, n).astype(np.float32)
        m, c = exe(x, y)
        np.testing.assert_array_equal(m, x < y)
        np.testing.assert_array_equal(c, x.astype(np.int8))


def test_index_overflow_and_grid_limits_refused():
    with pytest.raises(ValueError, match="32 bits"):
        pack_params(["i32", "u32", "u32", "u32"], [1 << 31], (1, 1, 1))
    assert len(pack_params(["i32", "f32", "u32", "u32", "u32"], [-5, 1.5], (1, 2, 3))) == 32
    with pytest.raises(ValueError, match="too large"):
        fold_grid((1 << 16, 1 << 16, 1))
    assert fold_grid((65535, 65535, 1)) == (65535, 65535, 1)


_NONUNIFORM = '''
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @k(%n: index, %b: memref<?xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %c4 = arith.constant 4 : index
      %t = gpu.thread_id x
      %c = arith.cmpi ult, %t, %c4 : index
      scf.if %c {
        gpu.barrier
      }
      gpu.return
    }
  }
}
'''


def test_barrier_in_nonuniform_control_flow_is_refused():
    from mlir import ir

    with relax_mlir.parse("module {}").context as ctx:
        m = ir.Module.parse(_NONUNIFORM, ctx)
        with pytest.raises(LoweringError, match="gpu.barrier under control flow"):
            wgsl.emit_module(m.operation)
        uniform = _NONUNIFORM.replace("arith.cmpi ult, %t, %c4", "arith.cmpi ult, %n, %c4")
        k = wgsl.emit_module(ir.Module.parse(uniform, ctx).operation)["k"]
        assert "workgroupBarrier();" in k.wgsl and "(u32(_p.a0) < u32(4i))" in k.wgsl


@pytest.mark.parametrize("dtype", ["f16", "f64", "bf16", "i64"])
def test_unsupported_types_are_located_compile_errors(dtype):
    src = ELEMENTWISE.replace("f32", dtype).replace("relax.maximum", "relax.add")
    with pytest.raises(CompileError, match=rf"{dtype}.* not supported on WebGPU.*at loc\("):
        relax_mlir.compile(src, target="webgpu")


def test_required_limits_raise_only_what_a_kernel_needs():
    k = wgsl.KernelInfo("m", "k", "", (16, 16, 2), 9, ["u32"] * 3, 20000)
    need = wgsl.required_limits({"m": k})
    assert need["maxStorageBuffersPerShaderStage"] == 9
    assert need["maxComputeWorkgroupStorageSize"] == 20000
    assert need["maxComputeInvocationsPerWorkgroup"] == 512
    assert need["maxComputeWorkgroupSizeZ"] == wgsl.DEFAULT_LIMITS["maxComputeWorkgroupSizeZ"]
