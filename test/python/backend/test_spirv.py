"""SPIR-V backend: every binary passes spirv-val; wgpu (lavapipe) results match numpy."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import relax_mlir
from relax_mlir.backend import spirv

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
    from relax_mlir.transforms import PASSES
    assert "relax-to-spirv" in PASSES and "relax-spirv-map" in PASSES


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_spirv_val(name, tmp_path):
    m = upstream(name)
    with m.context:
        spirv.lower(m.op)
        bins = spirv.spirv_binaries(m.op)
    assert bins
    val = shutil.which("spirv-val")
    if val is None:
        pytest.skip("spirv-val (Debian spirv-tools) is not installed")
    for k, data in bins.items():
        assert data[:4] == b"\x03\x02\x23\x07"
        p = tmp_path / f"{k}.spv"
        p.write_bytes(data)
        r = subprocess.run([val, "--target-env", "vulkan1.0", str(p)], capture_output=True, text=True)
        assert r.returncode == 0, f"{name}/{k}: {r.stdout}{r.stderr}"


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
    vulkan = _vulkan()
    exe = vulkan.compile_vulkan(upstream(name))
    rng = np.random.default_rng(0)
    for n in (1, 13, 257):
        args, want = _inputs(name, n, rng)
        got = exe(*args)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{name} n={n}")


def test_wgpu_shape_error_is_value_error():
    vulkan = _vulkan()
    exe = vulkan.compile_vulkan(upstream("elementwise_broadcast"))
    with pytest.raises(ValueError):
        exe(np.zeros((3, 7), np.float32), np.zeros(8, np.float32))
