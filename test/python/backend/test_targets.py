"""relax_mlir.compile targets: the same relax program on cpu, vulkan (wgpu/lavapipe) and cuda (PTX)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import relax_mlir
import toolchecks

SRC = """
func.func @main(%x: !relax.tensor<["n", 64], f32>, %w: !relax.tensor<[64, 32], f32>, %b: !relax.tensor<[32], f32>) -> !relax.tensor<["?", "?"], f32> {
  %0 = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 64], f32>, !relax.tensor<[64, 32], f32>) -> !relax.tensor<["?", "?"], f32>
  %1 = "relax.add"(%0, %b) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<[32], f32>) -> !relax.tensor<["?", "?"], f32>
  %2 = "relax.relu"(%1) : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  return %2 : !relax.tensor<["?", "?"], f32>
}
"""


def test_vulkan_matches_numpy():
    from relax_mlir.runtime import vulkan

    if not vulkan.available():
        pytest.skip("no wgpu adapter")
    exe = relax_mlir.compile(SRC, target="vulkan")
    rng = np.random.default_rng(0)
    w, b = rng.random((64, 32), dtype=np.float32), rng.random(32, dtype=np.float32)
    for n in (1, 13, 257):
        x = rng.random((n, 64), dtype=np.float32)
        np.testing.assert_allclose(exe(x, w, b), np.maximum(x @ w + b, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_cuda_ptx_assembles(tmp_path):
    mod = relax_mlir.compile(SRC, target="cuda")
    assert mod.ptx
    assert all(".entry" in ptx for ptx in mod.ptx.values())
    assert toolchecks.ptxas(mod.ptx, tmp_path, "linear")
    with pytest.raises(ValueError, match="takes 3 arguments"):  # shape checks run first
        mod(np.zeros((1, 64), np.float32))
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="needs a CUDA device"):
            mod(np.zeros((1, 64), np.float32), np.zeros((64, 32), np.float32), np.zeros(32, np.float32))
