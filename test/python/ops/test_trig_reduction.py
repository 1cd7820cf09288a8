"""f32 sin and cos with the integer Payne-Hanek range reduction that the Vulkan target compiles
(ops/kernel.py `_trig_template`): lavapipe's built-ins return garbage from |x| ~ 1e8 and NaN near
3e38. Checked on the CPU, where the same expansion is compiled in place of libm's sinf/cosf,
against numpy's double-precision sin/cos of the same f32 inputs (glibc reduces doubles exactly),
and on Vulkan and WebGPU (wgpu-py) at every magnitude up to 1e38."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import relax_mlir
from relax_mlir.backend import cpu
from relax_mlir.ops import kernel

SRC = '''func.func @main(%x: !relax.tensor<["n"], f32>) -> (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) {
  %0 = "relax.sin"(%x) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  %1 = "relax.cos"(%x) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %0, %1 : !relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>
}'''
SPECIAL = [np.inf, -np.inf, np.nan, 0.0, -0.0, 131072.0, -131071.99, 3.4028235e38, -3.4028235e38, 1e-40,
           # near multiples of pi/2, where the reduced argument is tiny
           1.0e22, 8.0e30, 16367173.0, 105414350.0]


def inputs(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):
        x = (rng.standard_normal(n) * 10.0 ** rng.integers(0, 39, n)).astype(np.float32)
    return np.concatenate([x, np.array(SPECIAL, np.float32)])


def check(x, s, c, tol=1.2e-7) -> list:
    with np.errstate(invalid="ignore"):
        ws, wc = np.sin(x.astype(np.float64)), np.cos(x.astype(np.float64))
    bad = []
    for name, got, want in (("sin", s, ws), ("cos", c, wc)):
        nan = np.isnan(want)
        bad += [(name, x[i], got[i], want[i]) for i in np.argwhere(nan != np.isnan(got)).ravel()[:3]]
        err = np.abs(got[~nan].astype(np.float64) - want[~nan])
        bad += [(name, x[~nan][i], got[~nan][i], want[~nan][i]) for i in np.argwhere(err > tol).ravel()[:3]]
    return bad


def test_expansion_matches_double_precision(monkeypatch):
    calls = []
    orig = cpu._expand_math
    monkeypatch.setattr(cpu, "_expand_math", lambda op: (calls.append(kernel.expand_math(op, kinds=("sin", "cos"))),
                                                          orig(op)))
    exe = relax_mlir.compile(SRC)
    assert calls and all(c == 2 for c in calls)  # both expanded (in each build compile() makes)
    x = inputs()
    s, c = (np.asarray(a) for a in exe(x))
    assert not check(x, s, c)
    # the reduction path is taken (the built-in alone would be right only below ~1e8 on lavapipe;
    # here libm is right everywhere, so also check the table of 2/pi digits directly)
    words = kernel._two_over_pi_words()
    digits = int("".join(f"{w:032b}" for w in words), 2)
    assert abs(digits / 2 ** (32 * len(words) - 8) - 2 / np.pi) < 1e-15


def test_vulkan_sin_cos_of_huge_arguments():
    from toolchecks import vulkan_adapter

    if not vulkan_adapter():
        pytest.skip("no Vulkan adapter (wgpu with lavapipe or a GPU driver)")
    code = f"""
import numpy as np, relax_mlir, sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
from test_trig_reduction import SRC, inputs, check
x = inputs(seed=1)
for target in ("vulkan", "webgpu"):
    exe = relax_mlir.compile(SRC, target=target)
    s, c = (np.asarray(a) for a in exe(x))
    print("BAD", check(x, s, c), "HUGE", int((np.abs(x) > 1e8).sum()))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")})
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("BAD")]
    assert len(lines) == 2, r.stdout
    for line in lines:  # Vulkan, then WebGPU on wgpu-py
        assert line.startswith("BAD [] HUGE"), line
        assert int(line.split()[-1]) > 1000
