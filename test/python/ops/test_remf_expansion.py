"""The exact f32 fmod that GPU targets use for `arith.remf` (ops/kernel.py `_remf_template`, integer
arithmetic only; NVVM has no frem, SPIR-V's OpFRem loses the result): checked bit for bit against numpy's fmod on the CPU, where the same expansion is
compiled in place of libm's fmodf, over random magnitudes from 1e-40 to 1e38 (denormal divisors,
quotients far past 2^24) and every pair of special values."""
from __future__ import annotations

import numpy as np

import relax_mlir
from relax_mlir.backend import cpu
from relax_mlir.ops import kernel

SRC = '''func.func @main(%x: !relax.tensor<["n"], f32>, %y: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> {
  %0 = "relax.remainder"(%x, %y) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %0 : !relax.tensor<["n"], f32>
}'''


def test_expanded_remf_is_exact(monkeypatch):
    calls = []
    orig = cpu._expand_math
    monkeypatch.setattr(cpu, "_expand_math", lambda op: (calls.append(kernel.expand_math(op, kinds=("remf",))),
                                                          orig(op)))
    exe = relax_mlir.compile(SRC)
    assert calls and calls[0] >= 1  # the expansion replaced the remf
    rng = np.random.default_rng(0)
    n = 20000
    with np.errstate(over="ignore"):
        x = (rng.standard_normal(n) * 10.0 ** rng.integers(-40, 39, n)).astype(np.float32)
        y = (rng.standard_normal(n) * 10.0 ** rng.integers(-40, 39, n)).astype(np.float32)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1.0, -3.0, 1e-45, 3.4e38, -1.17e-38], np.float32)
    xs, ys = np.meshgrid(sp, sp)
    x, y = np.concatenate([x, xs.ravel(), [94.7081, 1.2573022e22]]), np.concatenate([y, ys.ravel(), [-0.0029011562, 1.431677e7]])
    x, y = x.astype(np.float32), y.astype(np.float32)
    with np.errstate(all="ignore"):
        want = np.fmod(x, y)
    got = exe(x, y)
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    bad = np.argwhere(~same).ravel()
    assert not len(bad), [(x[i], y[i], got[i], want[i]) for i in bad[:5]]


def test_vulkan_remainder_is_exact():
    """On Vulkan (lavapipe here) f32 and f16 `remainder`, and on WebGPU (wgpu-py) f32, use the integer fmod: bit for bit equal to
    numpy's fmod where OpFRem lost the result past quotients of 2^24 (fuzzer finding)."""
    import os
    import subprocess
    import sys

    import pytest
    from toolchecks import vulkan_adapter

    if not vulkan_adapter():
        pytest.skip("no Vulkan adapter (wgpu with lavapipe or a GPU driver)")
    code = f"""
import numpy as np, relax_mlir
SRC = {SRC!r}
for target, dt, npdt, lo, hi in (("vulkan", "f32", np.float32, -40, 39), ("vulkan", "f16", np.float16, -7, 5),
                                 ("webgpu", "f32", np.float32, -40, 39)):
    exe = relax_mlir.compile(SRC.replace("f32", dt), target=target)
    rng = np.random.default_rng(1)
    with np.errstate(over="ignore"):
        x = (rng.standard_normal(5000) * 10.0 ** rng.integers(lo, hi, 5000)).astype(npdt)
        y = (rng.standard_normal(5000) * 10.0 ** rng.integers(lo, hi, 5000)).astype(npdt)
        sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, 1.0, -3.0, 1e-45, -1.17e-38], np.float32).astype(npdt)
    xs, ys = np.meshgrid(sp, sp)
    x, y = np.concatenate([x, xs.ravel()]).astype(npdt), np.concatenate([y, ys.ravel()]).astype(npdt)
    with np.errstate(all="ignore"):
        want = np.fmod(x, y)
    got = np.asarray(exe(x, y))
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    print(target + "-" + dt, "mismatches", int((~same).sum()), "quotients past 2^24", int((np.abs(x.astype(np.float64) / y) > 2.0 ** 24).sum()))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")})
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln.split() for ln in r.stdout.splitlines() if "mismatches" in ln]
    assert [ln[0] for ln in lines] == ["vulkan-f32", "vulkan-f16", "webgpu-f32"], r.stdout
    for ln in lines:
        assert ln[2] == "0", r.stdout
        assert int(ln[-1]) > 100  # the inputs do reach the quotients OpFRem gets wrong
