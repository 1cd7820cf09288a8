"""SPIR-V backend: every binary passes spirv-val; wgpu (lavapipe) results match numpy."""
from __future__ import annotations


import numpy as np
import pytest

import relax_mlir
import toolchecks
from relax_mlir.backend import spirv
from relax_mlir.targets.vulkan import compile_vulkan

UPSTREAM = ["relax-infer-shapes", "relax-legalize", "relax-lower-shapes", "relax-to-upstream"]

PROGRAMS = {
    "elementwise_broadcast": '''
func.func @main(%x: !relax.tensor<["n", 8], f32>, %b: !relax.tensor<[8], f32>) -> !relax.tensor<["n", 8], f32> {
  %a = "relax.add"(%x, %b) : (!relax.tensor<["n", 8], f32>, !relax.tensor<[8], f32>) -> !relax.tensor<["n", 8], f32>
  %e = "relax.exp"(%a) : (!relax.tensor<["n", 8], f32>) -> !relax.tensor<["n", 8], f32>
  return %e : !relax.tensor<["n", 8], f32>
}
''',
    "reduction": '''
func.func @main(%x: !relax.tensor<["n", "k"], f32>) -> !relax.tensor<["n"], f32> {
  %s = "relax.sum"(%x) {axes = [1], keepdims = false} : (!relax.tensor<["n", "k"], f32>) -> !relax.tensor<["n"], f32>
  return %s : !relax.tensor<["n"], f32>
}
''',
    "matmul": '''
func.func @main(%x: !relax.tensor<["n", 4], f32>, %w: !relax.tensor<[4, "m"], f32>) -> !relax.tensor<["n", "m"], f32> {
  %m = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[4, "m"], f32>) -> !relax.tensor<["n", "m"], f32>
  return %m : !relax.tensor<["n", "m"], f32>
}
''',
    "softmax": '''
func.func @main(%x: !relax.tensor<["n", 16], f32>) -> !relax.tensor<["n", 16], f32> {
  %s = "relax.softmax"(%x) {axis = 1} : (!relax.tensor<["n", 16], f32>) -> !relax.tensor<["n", 16], f32>
  return %s : !relax.tensor<["n", 16], f32>
}
''',
}


def _inputs(name, n, rng):
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    if name == "elementwise_broadcast":
        x, b = f(n, 8), f(8)
        return (x, b), np.exp(x + b)
    if name == "reduction":
        x = f(n, n + 2)
        return (x,), x.sum(axis=1)
    if name == "matmul":
        x, w = f(n, 4), f(4, n)
        return (x, w), x @ w
    x = f(n, 16)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (x,), e / e.sum(axis=1, keepdims=True)


def upstream(name):
    return relax_mlir.run_passes(relax_mlir.parse(PROGRAMS[name]), UPSTREAM)


def test_stages_and_options():
    assert list(spirv.STAGES) == ["inline", "bufferize", "loops", "map", "flatten", "to-spirv", "serialize"]
    assert set(spirv.pipeline_strings()) == set(spirv.STAGES)
    with pytest.raises(ValueError):
        spirv.SPIRVOptions(tile_sizes=(64, 64))
    with pytest.raises(ValueError):
        spirv.lower(None, until="nope")
    from relax_mlir.targets import all_passes
    PASSES = all_passes()
    assert "relax-to-spirv" in PASSES and "relax-spirv-map" in PASSES


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_spirv_val(name, tmp_path):
    m = upstream(name)
    with m.context:
        spirv.lower(m.op)
        bins = spirv.spirv_binaries(m.op)
    assert bins
    if not toolchecks.spirv_val(bins, tmp_path, name):
        pytest.skip("spirv-val (Debian spirv-tools) is not installed")


def _vulkan():
    try:
        from relax_mlir.runtime import vulkan
    except Exception as e:  # pragma: no cover
        pytest.skip(f"runtime.vulkan not importable: {e}")
    if not vulkan.available():
        pytest.skip("wgpu or a Vulkan adapter (lavapipe) is not available")
    return vulkan


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_wgpu_matches_numpy(name):
    _vulkan()
    exe = compile_vulkan(upstream(name))
    rng = np.random.default_rng(0)
    for n in (1, 13, 257):
        args, want = _inputs(name, n, rng)
        got = exe(*args)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{name} n={n}")


CALLEE_UPDATES_ITS_ARGUMENT = '''
func.func @main(%x: !relax.tensor<["n", 4], f32>, %u: !relax.tensor<[1, 4], f32>, %i: !relax.tensor<[], i32>,
                %w: !relax.tensor<[4, 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %a = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %b = func.call @update(%a, %u, %i) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[1, 4], f32>, !relax.tensor<[], i32>) -> !relax.tensor<["n", 4], f32>
  %c = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[4, 4], f32>) -> !relax.tensor<["n", 4], f32>
  %d = "relax.matmul"(%c, %w) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[4, 4], f32>) -> !relax.tensor<["n", 4], f32>
  %e = "relax.subtract"(%b, %d) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %e : !relax.tensor<["n", 4], f32>
}
func.func private @update(%v: !relax.tensor<["n", 4], f32>, %u: !relax.tensor<[1, 4], f32>, %i: !relax.tensor<[], i32>) -> !relax.tensor<["n", 4], f32> {
  %s = "relax.dynamic_update_slice"(%v, %u, %i, %i) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[1, 4], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<["n", 4], f32>
  return %s : !relax.tensor<["n", 4], f32>
}
'''


def test_wgpu_callee_result_keeps_its_argument_storage():
    """`b = @update(a)` may be `a`'s buffer: the memory plan must not give `a`'s block to the
    products while `b` lives (measured before the func.call rule of relax-plan-memory: 5.5 off)."""
    _vulkan()
    exe = relax_mlir.compile(CALLEE_UPDATES_ITS_ARGUMENT, target="vulkan")
    rng = np.random.default_rng(3)
    for n in (1, 7, 64):
        x, u, w = (rng.standard_normal(s).astype(np.float32) for s in ((n, 4), (1, 4), (4, 4)))
        want = np.exp(x)
        want[min(2, n - 1)] = u[0]
        got = exe(x, u, np.array(2, np.int32), w)
        np.testing.assert_allclose(got, want - (x @ w) @ w, rtol=1e-4, atol=1e-4, err_msg=f"n={n}")


def test_wgpu_shape_error_is_value_error():
    _vulkan()
    exe = compile_vulkan(upstream("elementwise_broadcast"))
    with pytest.raises(ValueError):
        exe(np.zeros((3, 7), np.float32), np.zeros(8, np.float32))


# --- cooperative kernels: row reductions and matmul with workgroup memory and barriers ---------

def _t(dims):
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + "], f32>"


def _unary(op, attrs, shape, out):
    return (f'func.func @main(%x: {_t(shape)}) -> {_t(out)} {{\n'
            f'  %r = "relax.{op}"(%x) {attrs} : ({_t(shape)}) -> {_t(out)}\n'
            f'  return %r : {_t(out)}\n}}')


def _matmul(a, b, c):
    return (f'func.func @main(%a: {_t(a)}, %b: {_t(b)}) -> {_t(c)} {{\n'
            f'  %r = "relax.matmul"(%a, %b) : ({_t(a)}, {_t(b)}) -> {_t(c)}\n'
            f'  return %r : {_t(c)}\n}}')


_LN = '''func.func @main(%x: !relax.tensor<["n", "k"], f32>, %g: !relax.tensor<["k"], f32>, %b: !relax.tensor<["k"], f32>) -> !relax.tensor<["n", "k"], f32> {
  %l = "relax.layer_norm"(%x, %g, %b) {axes = [-1], epsilon = 1.0e-05 : f32} : (!relax.tensor<["n", "k"], f32>, !relax.tensor<["k"], f32>, !relax.tensor<["k"], f32>) -> !relax.tensor<["n", "k"], f32>
  return %l : !relax.tensor<["n", "k"], f32>
}'''

ROWS = 37  # rows of the reduction inputs; their row length varies per call
ROW_REDUCTIONS = {
    "sum": (_unary("sum", "{axes = [1], keepdims = false}", ["n", "k"], ["n"]), lambda x: x.sum(1)),
    "max": (_unary("max", "{axes = [1], keepdims = false}", ["n", "k"], ["n"]), lambda x: x.max(1)),
    "min": (_unary("min", "{axes = [1], keepdims = false}", ["n", "k"], ["n"]), lambda x: x.min(1)),
    "mean": (_unary("mean", "{axes = [1], keepdims = false}", ["n", "k"], ["n"]), lambda x: x.mean(1)),
    "sum_last_two": (_unary("sum", "{axes = [1, 2], keepdims = false}", ["n", 2, "k"], ["n"]),
                     lambda x: x.sum((1, 2))),
    "sum_all": (_unary("sum", "{axes = [0, 1], keepdims = false}", ["n", "k"], []), lambda x: np.float32(x.sum())),
    "softmax": (_unary("softmax", "{axis = 1}", ["n", "k"], ["n", "k"]),
                lambda x: np.exp(x - x.max(1, keepdims=True)) / np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)),
}
# Column reductions (leading reduced dims): [n, k] with n varying per call and k columns.
COL_REDUCTIONS = {
    "sum": (_unary("sum", "{axes = [0], keepdims = false}", ["n", "k"], ["k"]), lambda x: x.sum(0)),
    "max": (_unary("max", "{axes = [0], keepdims = false}", ["n", "k"], ["k"]), lambda x: x.max(0)),
    "mean": (_unary("mean", "{axes = [0], keepdims = false}", ["n", "k"], ["k"]), lambda x: x.mean(0)),
    "sum_first_two": (_unary("sum", "{axes = [0, 1], keepdims = false}", ["n", 3, "k"], ["k"]),
                      lambda x: x.sum((0, 1))),
    "min_3d_columns": (_unary("min", "{axes = [0], keepdims = false}", ["n", 3, "k"], [3, "k"]), lambda x: x.min(0)),
}
COL_SHAPES = ((1, 1), (1, 70), (4099, 5), (131, 67))
MATMULS = {
    "matmul": (_matmul(["m", "k"], ["k", "n"], ["m", "n"]), lambda m, n, k, f: (f(m, k), f(k, n))),
    "batch_matmul": (_matmul([2, "m", "k"], [2, "k", "n"], [2, "m", "n"]), lambda m, n, k, f: (f(2, m, k), f(2, k, n))),
    "broadcast_matmul": (_matmul([3, "m", "k"], ["k", "n"], [3, "m", "n"]), lambda m, n, k, f: (f(3, m, k), f(k, n))),
}
ROW_LENGTHS = (1, 257, 4099)
# M, N, K: ones, primes, and more than a 64 x 64 tile
MATMUL_SIZES = ((1, 1, 1), (1, 67, 13), (67, 1, 131), (131, 67, 1), (13, 131, 67))


def _cooperative_sources():
    out = {f"reduce_{k}": v[0] for k, v in ROW_REDUCTIONS.items()}
    out.update({f"col_reduce_{k}": v[0] for k, v in COL_REDUCTIONS.items()})
    out.update({k: v[0] for k, v in MATMULS.items()})
    out["layer_norm"] = _LN
    return out


def _lower(src, options=None):
    m = relax_mlir.run_passes(relax_mlir.parse(src), UPSTREAM)
    with m.context:
        spirv.lower(m.op, options or spirv.SPIRVOptions(), until="flatten")
        return str(m.op)


@pytest.mark.parametrize("name", sorted(_cooperative_sources()))
def test_cooperative_kernels_use_workgroup_memory(name):
    text = _lower(_cooperative_sources()[name])
    assert "#spirv.storage_class<Workgroup>>" in text and "gpu.barrier" in text, text


def test_cooperative_kernels_can_be_turned_off():
    for src in _cooperative_sources().values():
        text = _lower(src, spirv.SPIRVOptions(reduce_threads=0, matmul_tile=0))
        assert "Workgroup>" not in text and "gpu.barrier" not in text


def test_column_reduction_is_cooperative():
    text = _lower(_unary("sum", "{axes = [0], keepdims = false}", ["n", "k"], ["k"]))
    assert "Workgroup" in text and text.count("gpu.barrier") == 5


@pytest.mark.parametrize("kw", [dict(reduce_threads=3), dict(reduce_threads=2048), dict(matmul_tile=24),
                                dict(matmul_tile=256), dict(matmul_tile=-1)])
def test_bad_cooperative_options_rejected(kw):
    with pytest.raises(ValueError):
        spirv.SPIRVOptions(**kw)


@pytest.mark.parametrize("name", sorted(_cooperative_sources()))
def test_cooperative_spirv_val(name, tmp_path):
    m = relax_mlir.run_passes(relax_mlir.parse(_cooperative_sources()[name]), UPSTREAM)
    with m.context:
        spirv.lower(m.op)
        bins = spirv.spirv_binaries(m.op)
    assert bins
    if not toolchecks.spirv_val(bins, tmp_path, name):
        pytest.skip("spirv-val (Debian spirv-tools) is not installed")


def _compile(src):
    _vulkan()
    return compile_vulkan(relax_mlir.run_passes(relax_mlir.parse(src), UPSTREAM))


@pytest.mark.parametrize("name", sorted(ROW_REDUCTIONS))
def test_wgpu_row_reduction_matches_numpy(name):
    src, ref = ROW_REDUCTIONS[name]
    exe = _compile(src)
    rng = np.random.default_rng(1)
    for k in ROW_LENGTHS:
        shape = (ROWS, 2, k) if name == "sum_last_two" else (ROWS, k)
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(exe(x), ref(x), rtol=1e-4, atol=2e-3, err_msg=f"{name} k={k}")


@pytest.mark.parametrize("name", sorted(COL_REDUCTIONS))
def test_wgpu_column_reduction_matches_numpy(name):
    src, ref = COL_REDUCTIONS[name]
    exe = _compile(src)
    rng = np.random.default_rng(2)
    for n, k in COL_SHAPES:
        shape = (n, 3, k) if name in ("sum_first_two", "min_3d_columns") else (n, k)
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(exe(x), ref(x), rtol=1e-4, atol=2e-3, err_msg=f"{name} {shape}")


def test_wgpu_layer_norm_matches_numpy():
    exe = _compile(_LN)
    rng = np.random.default_rng(2)
    for k in ROW_LENGTHS:
        x, g, b = (rng.standard_normal(s).astype(np.float32) for s in ((ROWS, k), (k,), (k,)))
        mu = x.mean(1, keepdims=True)
        want = (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + 1e-5) * g + b
        np.testing.assert_allclose(exe(x, g, b), want, rtol=1e-3, atol=1e-3, err_msg=f"k={k}")


@pytest.mark.parametrize("name", sorted(MATMULS))
def test_wgpu_matmul_matches_numpy(name):
    src, make = MATMULS[name]
    exe = _compile(src)
    rng = np.random.default_rng(3)

    def f(*s):
        return rng.standard_normal(s).astype(np.float32)

    for m, n, k in MATMUL_SIZES:
        a, b = make(m, n, k, f)
        np.testing.assert_allclose(exe(a, b), a @ b, rtol=1e-4, atol=1e-3, err_msg=f"{name} m={m} n={n} k={k}")


def test_wgpu_grid_stride_loops(monkeypatch):
    """With the grid capped below the rows (batches), each workgroup loops over several of them."""
    from relax_mlir.backend import gpu_kernels

    monkeypatch.setattr(gpu_kernels, "_MAX_GRID", 2)
    rng = np.random.default_rng(4)
    exe = _compile(ROW_REDUCTIONS["sum"][0])
    x = rng.standard_normal((ROWS, 300)).astype(np.float32)
    np.testing.assert_allclose(exe(x), x.sum(1), rtol=1e-4, atol=2e-3)
    exe = _compile(MATMULS["broadcast_matmul"][0])
    a, b = rng.standard_normal((3, 5, 7)).astype(np.float32), rng.standard_normal((7, 9)).astype(np.float32)
    np.testing.assert_allclose(exe(a, b), a @ b, rtol=1e-4, atol=1e-3)


def test_float_arithmetic_is_not_contracted():
    """Every float multiply/add/subtract carries NoContraction (a driver may not fuse a * b - a
    into one fma: StableHLO rounds each op). Checked in the binary: OpDecorate <id> NoContraction
    (opcode 71, decoration 42) for as many ids as the kernel has OpFMul/OpFAdd/OpFSub."""
    import struct

    m = upstream("softmax")
    with m.context:
        spirv.lower(m.op)
        bins = spirv.spirv_binaries(m.op)
    total = 0
    for name, blob in bins.items():
        words = struct.unpack(f"<{len(blob) // 4}I", blob)[5:]
        decorated, arith, i = set(), set(), 0
        while i < len(words):
            count, opcode = words[i] >> 16, words[i] & 0xFFFF
            if opcode == 71 and words[i + 2] == 42:
                decorated.add(words[i + 1])
            elif opcode in (129, 131, 133):  # OpFAdd, OpFSub, OpFMul: result id is word 2
                arith.add(words[i + 2])
            i += count
        assert arith <= decorated, (name, sorted(arith - decorated))
        total += len(arith)
    assert total > 0
