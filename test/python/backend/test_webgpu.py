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


@pytest.mark.parametrize("dtype", ["f16", "f64", "i64"])
def test_unsupported_types_are_located_compile_errors(dtype):
    src = ELEMENTWISE.replace("f32", dtype).replace("relax.maximum", "relax.add")
    with pytest.raises(CompileError, match=rf"{dtype}.* not supported on WebGPU.*at loc\("):
        relax_mlir.compile(src, target="webgpu")


@needs_adapter
def test_bf16_computes_in_f32_and_stores_bits():
    """bf16 kernels (WGSL, like Vulkan's shaders, has no bf16): each op computes in f32 and rounds
    to bf16 (round to nearest even, NaN kept), buffers hold the bits as numpy's 2-byte elements:
    as jax's op-by-op bf16 (NaN, infinities, -0.0 included); was refused."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import ml_dtypes

    from relax_mlir.frontend.jax import from_jax

    (n,) = jax.export.symbolic_shape("n")
    fn = lambda a, b: (a * b + a, jax.nn.softmax(a, axis=-1), jnp.where(a > b, a, -b), jnp.sum(b, axis=1))  # noqa: E731
    spec = jax.ShapeDtypeStruct((n, 8), jnp.bfloat16)
    exe = relax_mlir.compile(from_jax(fn, spec, spec), target="webgpu")
    rng = np.random.default_rng(0)
    for m in (1, 7, 33):
        a, b = ((rng.standard_normal((m, 8)) * 3).astype(ml_dtypes.bfloat16) for _ in range(2))
        a.reshape(-1)[:3] = [np.nan, np.inf, -0.0][: a.size]
        for got, want in zip(exe(a, b), fn(a, b)):  # (op by op: every op rounds to bf16)
            want = np.asarray(want)
            assert got.dtype == want.dtype and got.shape == want.shape
            g, w = got.astype(np.float32), want.astype(np.float32)
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
            np.testing.assert_allclose(g[~np.isnan(w)], w[~np.isnan(w)], rtol=8e-3, atol=1e-3)


def test_required_limits_raise_only_what_a_kernel_needs():
    k = wgsl.KernelInfo("m", "k", "", (16, 16, 2), 9, ["u32"] * 3, 20000)
    need = wgsl.required_limits({"m": k})
    assert need["maxStorageBuffersPerShaderStage"] == 9
    assert need["maxComputeWorkgroupStorageSize"] == 20000
    assert need["maxComputeInvocationsPerWorkgroup"] == 512
    assert need["maxComputeWorkgroupSizeZ"] == wgsl.DEFAULT_LIMITS["maxComputeWorkgroupSizeZ"]


# Hand-written kernels for the emitter's paths the test models do not reach: scf.while with
# carried values, integer division and shifts in every signedness, i8 wrap-around.
_KERNELS = '''
module attributes {gpu.container_module} {
  gpu.module @collatz {
    gpu.func @collatz(%n: index, %x: memref<?xi32>, %y: memref<?xi32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %c64 = arith.constant 64 : index
      %i0 = arith.muli %b, %c64 : index
      %i = arith.addi %i0, %t : index
      %ok = arith.cmpi ult, %i, %n : index
      scf.if %ok {
        %v = memref.load %x[%i] : memref<?xi32>
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %c3 = arith.constant 3 : i32
        %r:2 = scf.while (%a = %v, %s = %c0) : (i32, i32) -> (i32, i32) {
          %more = arith.cmpi sgt, %a, %c1 : i32
          scf.condition(%more) %a, %s : i32, i32
        } do {
        ^bb0(%a2: i32, %s2: i32):
          %odd = arith.andi %a2, %c1 : i32
          %isodd = arith.cmpi ne, %odd, %c0 : i32
          %m = arith.muli %a2, %c3 : i32
          %m1 = arith.addi %m, %c1 : i32
          %h = arith.shrsi %a2, %c1 : i32
          %n2 = arith.select %isodd, %m1, %h : i32
          %s3 = arith.addi %s2, %c1 : i32
          scf.yield %n2, %s3 : i32, i32
        }
        memref.store %r#1, %y[%i] : memref<?xi32>
      }
      gpu.return
    }
  }
  gpu.module @ints {
    gpu.func @ints(%n: index, %x: memref<?xi32>, %z: memref<?xi32>, %y: memref<?xi32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %c64 = arith.constant 64 : index
      %c8 = arith.constant 8 : index
      %i0 = arith.muli %b, %c64 : index
      %i = arith.addi %i0, %t : index
      %ok = arith.cmpi ult, %i, %n : index
      scf.if %ok {
        %a = memref.load %x[%i] : memref<?xi32>
        %d = memref.load %z[%i] : memref<?xi32>
        %f = arith.floordivsi %a, %d : i32
        %c = arith.ceildivsi %a, %d : i32
        %r = arith.remsi %a, %d : i32
        %u = arith.divui %a, %d : i32
        %sh = arith.constant 3 : i32
        %s = arith.shrui %a, %sh : i32
        %mn = arith.minui %a, %d : i32
        %a8 = arith.trunci %a : i32 to i8
        %d8 = arith.trunci %d : i32 to i8
        %p8 = arith.addi %a8, %d8 : i8
        %p = arith.extsi %p8 : i8 to i32
        %q = arith.extui %p8 : i8 to i32
        %o = arith.muli %i, %c8 : index
        %o1 = arith.addi %o, %c8 : index
        %vals = arith.constant 0 : index
        memref.store %f, %y[%o] : memref<?xi32>
        %k1 = arith.constant 1 : index
        %k2 = arith.constant 2 : index
        %k3 = arith.constant 3 : index
        %k4 = arith.constant 4 : index
        %k5 = arith.constant 5 : index
        %k6 = arith.constant 6 : index
        %k7 = arith.constant 7 : index
        %j1 = arith.addi %o, %k1 : index
        %j2 = arith.addi %o, %k2 : index
        %j3 = arith.addi %o, %k3 : index
        %j4 = arith.addi %o, %k4 : index
        %j5 = arith.addi %o, %k5 : index
        %j6 = arith.addi %o, %k6 : index
        %j7 = arith.addi %o, %k7 : index
        memref.store %c, %y[%j1] : memref<?xi32>
        memref.store %r, %y[%j2] : memref<?xi32>
        memref.store %u, %y[%j3] : memref<?xi32>
        memref.store %s, %y[%j4] : memref<?xi32>
        memref.store %mn, %y[%j5] : memref<?xi32>
        memref.store %p, %y[%j6] : memref<?xi32>
        memref.store %q, %y[%j7] : memref<?xi32>
      }
      gpu.return
    }
  }
}
'''


@needs_adapter
def test_while_loops_and_integer_ops_run():
    from mlir import ir

    from relax_mlir.runtime.hostprog import Buffer
    from relax_mlir.runtime.webgpu import WebGPUDriver

    with relax_mlir.parse("module {}").context as ctx:
        infos = wgsl.emit_module(ir.Module.parse(_KERNELS, ctx).operation)
    drv = WebGPUDriver({m: k.wgsl for m, k in infos.items()},
                       {"limits": wgsl.required_limits(infos), "kernels": {m: k.as_json() for m, k in infos.items()}})
    idx = {"kind": "scalar", "type": "index", "pack": "<i"}
    buf = {"kind": "buffer", "dtype": "i32"}

    def dev(a):
        b = Buffer(drv.alloc(a.nbytes), a.shape, a.dtype, False)
        drv.upload(b.handle, a.view(np.uint8))
        return b

    def read(b, shape):
        return np.frombuffer(drv.download(b.handle, b.nbytes), np.int32).reshape(shape)

    n = 200
    x = np.arange(1, n + 1, dtype=np.int32)
    bx, by = dev(x), dev(np.zeros(n, np.int32))
    drv.launch("collatz", "collatz", (-(-n // 64), 1, 1), (64, 1, 1), 0, [(idx, n), (buf, bx), (buf, by)])

    def steps(v):
        s = 0
        while v > 1:
            v = 3 * v + 1 if v & 1 else v >> 1
            s += 1
        return s

    np.testing.assert_array_equal(read(by, n), [steps(int(v)) for v in x])

    rng = np.random.default_rng(5)
    a = rng.integers(-1000, 1000, n).astype(np.int32)
    d = rng.integers(1, 50, n).astype(np.int32) * rng.choice([-1, 1], n).astype(np.int32)
    ba, bd, bo = dev(a), dev(d), dev(np.zeros(8 * n, np.int32))
    drv.launch("ints", "ints", (-(-n // 64), 1, 1), (64, 1, 1), 0, [(idx, n), (buf, ba), (buf, bd), (buf, bo)])
    got = read(bo, (n, 8))
    ua, ud = a.view(np.uint32), d.view(np.uint32)
    p8 = (a.astype(np.int8) + d.astype(np.int8)).astype(np.int8)
    want = np.stack([a // d, -(-a // d), np.fmod(a, d), (ua // ud).view(np.int32), (ua >> 3).view(np.int32),
                     np.minimum(ua, ud).view(np.int32), p8.astype(np.int32), p8.view(np.uint8).astype(np.int32)], 1)
    np.testing.assert_array_equal(got, want)


def test_barrier_in_loop_with_nonuniform_bounds_is_refused():
    from mlir import ir

    src = _NONUNIFORM.replace('''      scf.if %c {
        gpu.barrier
      }''', '''      %c1 = arith.constant 1 : index
      scf.for %i = %t to %n step %c1 {
        gpu.barrier
      }''')
    with relax_mlir.parse("module {}").context as ctx:
        with pytest.raises(LoweringError, match="gpu.barrier under control flow"):
            wgsl.emit_module(ir.Module.parse(src, ctx).operation)


BOOL_ORDER = '''
func.func @main(%x: !relax.tensor<["n"], i1>, %y: !relax.tensor<["n"], i1>) -> (!relax.tensor<["n"], i1>, !relax.tensor<["n"], i1>, !relax.tensor<["n"], i1>, !relax.tensor<["n"], i1>) {
  %gt = "relax.greater"(%x, %y) : (!relax.tensor<["n"], i1>, !relax.tensor<["n"], i1>) -> !relax.tensor<["n"], i1>
  %ge = "relax.greater_equal"(%x, %y) : (!relax.tensor<["n"], i1>, !relax.tensor<["n"], i1>) -> !relax.tensor<["n"], i1>
  %lt = "relax.less"(%x, %y) : (!relax.tensor<["n"], i1>, !relax.tensor<["n"], i1>) -> !relax.tensor<["n"], i1>
  %le = "relax.less_equal"(%x, %y) : (!relax.tensor<["n"], i1>, !relax.tensor<["n"], i1>) -> !relax.tensor<["n"], i1>
  return %gt, %ge, %lt, %le : !relax.tensor<["n"], i1>, !relax.tensor<["n"], i1>, !relax.tensor<["n"], i1>, !relax.tensor<["n"], i1>
}
'''


@needs_adapter
def test_ordered_comparisons_of_bools():
    """Ordered comparisons of i1 values (transformers' Llama compares its boolean mask `> 0`):
    every pair of bools at n = 1, 4 (all four pairs), 37, against numpy's bool order (the
    relax ops' semantics, false < true)."""
    exe = relax_mlir.compile(BOOL_ORDER, target="webgpu")
    rng = np.random.default_rng(3)
    for n in (1, 4, 37):
        if n == 4:
            x, y = np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)
        else:
            x, y = rng.random(n) < 0.5, rng.random(n) < 0.5
        got = exe(x, y)
        for g, w in zip(got, (x > y, x >= y, x < y, x <= y)):
            np.testing.assert_array_equal(g, w)


def test_f32_literals_stay_within_range():
    """A WGSL f32 literal must not exceed FLT_MAX as written: Tint (Chrome) refuses
    3.4028235e38, the shortest digits of FLT_MAX, which naga accepts (transformers' Llama masks
    with finfo(f32).min). Every literal reads back as the same f32."""
    tiny = np.finfo(np.float32).smallest_subnormal
    big = np.finfo(np.float32).max
    for v in (big, -big, np.nextafter(big, np.float32(0)), tiny, -tiny, np.float32(1.5), np.float32(0.1)):
        text = wgsl._f32_literal(v, None)
        assert text.endswith("f") and abs(float(text[:-1])) <= float(big), text
        assert np.float32(float(text[:-1])) == np.float32(v), text
