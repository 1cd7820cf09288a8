"""RELAX_MLIR_PROFILE=1: every kernel call of the CPU host program is timed and counted, the
results are unchanged, and without the knob no timing code is added."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import relax_mlir
from relax_mlir.backend import cpu_profile
from relax_mlir.backend.cpu import CPUOptions, lower
from relax_mlir.frontend.jax import from_jax


def _mlp(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2 + 1.0


def _compile():
    (b,) = jax.export.symbolic_shape("b")
    specs = [jax.ShapeDtypeStruct((b, 64), jnp.float32), jax.ShapeDtypeStruct((64, 96), jnp.float32),
             jax.ShapeDtypeStruct((96, 32), jnp.float32)]
    return relax_mlir.compile(from_jax(_mlp, *specs), options=CPUOptions(num_threads=1))


def test_profile_counts_every_kernel_call(monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_PROFILE", "1")
    exe = _compile()
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((64, 96), np.float32), rng.standard_normal((96, 32), np.float32)
    ref = jax.jit(_mlp)
    calls = 0
    for n in (1, 7, 40):
        x = rng.standard_normal((n, 64), np.float32)
        np.testing.assert_allclose(exe(x, w1, w2), np.asarray(ref(x, w1, w2)), rtol=1e-4, atol=1e-4)
        calls += 1
    data = cpu_profile.samples(exe)
    total = data.pop("(entry total)")
    assert total[1] == calls and total[0] > 0
    # every kernel the entry calls ran once per call, and the kernels fit in the entry's time
    assert len(data) >= 2 and all(k.startswith("__relax_kernel_") for k in data)
    assert {k for _, k in data.values()} == {calls}
    assert sum(s for s, _ in data.values()) <= total[0]
    text = cpu_profile.table(exe)
    assert "(entry calls, total)" in text and "(host program between kernels)" in text
    cpu_profile.reset(exe)
    assert all(v == (0.0, 0) for v in cpu_profile.samples(exe).values())


def test_no_timing_without_the_knob(monkeypatch):
    monkeypatch.delenv("RELAX_MLIR_PROFILE", raising=False)
    exe = _compile()
    up = exe.artifacts["upstream"]
    with up.context:
        op = up.clone(ip=False)
        lower(op, CPUOptions(num_threads=1), until="bufferize")
        text = str(op)
    assert "rtclock" not in text and "__relax_profile" not in text
    assert cpu_profile.samples(exe) == {}
    assert cpu_profile.table(exe).startswith("(no profile")


def test_profiled_module_exports_and_loads(monkeypatch, tmp_path):
    """An artifact exported with the knob set carries the timing calls: its library defines the
    clock they read (MLIR's C runner utils are not shipped), loads and gives the same results (it
    failed to load: undefined symbol rtclock)."""
    monkeypatch.setenv("RELAX_MLIR_PROFILE", "1")
    exe = _compile()
    exe.export(str(tmp_path / "art"))
    monkeypatch.delenv("RELAX_MLIR_PROFILE")
    from relax_mlir.runtime import load

    art = load(str(tmp_path / "art"))
    rng = np.random.default_rng(1)
    w1, w2 = rng.standard_normal((64, 96), np.float32), rng.standard_normal((96, 32), np.float32)
    for n in (1, 13):
        x = rng.standard_normal((n, 64), np.float32)
        np.testing.assert_allclose(art(x, w1, w2), np.asarray(jax.jit(_mlp)(x, w1, w2)), rtol=1e-4, atol=1e-4)


def test_the_exit_report_does_not_crash(tmp_path):
    """With the knob, a process that compiled and called executables prints their tables at exit
    and exits cleanly: the report ran after jax's and MLIR's exit handlers had torn down LLVM's
    state and aborted the process ("invalid mangling mode", SIGABRT or SIGSEGV) in the engine
    lookup of the counters."""
    import os
    import subprocess
    import sys

    script = tmp_path / "profiled.py"
    script.write_text(
        "import numpy as np, jax, relax_mlir\n"
        "from relax_mlir.frontend.jax import from_jax\n"
        "x, exes = np.ones((4, 8), np.float32), []\n"
        "for scale in (2.0, 3.0):\n"
        "    exes.append(relax_mlir.compile(from_jax(lambda x: x * scale + 1.0, jax.ShapeDtypeStruct((4, 8), np.float32))))\n"
        "    assert float(exes[-1](x)[0, 0]) == scale + 1.0\n")
    env = dict(os.environ, RELAX_MLIR_PROFILE="1")
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.count("RELAX_MLIR_PROFILE: executable") == 2, r.stderr[-2000:]
