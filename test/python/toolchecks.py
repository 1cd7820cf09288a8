"""The external tools of the GPU tests: `spirv_val` (Debian spirv-tools) and `ptxas` (the CUDA
assembler) validate binaries -- each returns False when its tool is not installed, so that the
caller skips with its own reason, and otherwise asserts that every binary passes --, and
`vulkan_adapter` says whether wgpu finds a Vulkan adapter (lavapipe). `gpu_check_on_vulkan` runs
the GPU machine's check (bench/export_gpu_artifacts.py, then bench/gpu_check.sh) here on lavapipe."""
from __future__ import annotations

import functools
import json
import os
import pathlib
import shutil
import subprocess
import sys


@functools.cache
def vulkan_adapter() -> bool:
    """Asked once, in a child process: a lavapipe device created in the test process breaks the
    CPU JIT (LLVM) of tests that run after it."""
    code = "from relax_mlir.runtime import vulkan; print(vulkan.available())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return out.stdout.strip().endswith("True")


def spirv_val(bins: dict[str, bytes], tmp_path, what: str) -> bool:
    val = shutil.which("spirv-val")
    if val is None:
        return False
    assert bins, f"{what}: no SPIR-V binaries"
    for name, blob in bins.items():
        assert blob[:4] == b"\x03\x02\x23\x07", f"{what}/{name}: not SPIR-V"
        p = tmp_path / f"{name}.spv"
        p.write_bytes(blob)
        r = subprocess.run([val, "--target-env", "vulkan1.0", str(p)], capture_output=True, text=True)
        assert r.returncode == 0, f"{what}/{name}: {r.stdout}{r.stderr}"
    return True


def ptxas(ptx: dict[str, str], tmp_path, what: str, arch: str = "sm_90") -> bool:
    tool = shutil.which("ptxas")
    if tool is None:
        return False
    assert ptx, f"{what}: no PTX"
    for name, text in ptx.items():
        p = tmp_path / f"{name}.ptx"
        p.write_text(text)
        r = subprocess.run([tool, f"-arch={arch}", str(p), "-o", str(tmp_path / f"{name}.cubin")],
                           capture_output=True, text=True)
        assert r.returncode == 0, f"{what}/{name}: {r.stderr}"
    return True


BENCH = pathlib.Path(__file__).parents[2] / "bench"


def gpu_check_on_vulkan(tmp_path, export_args: list[str], timeout: int = 600, env: dict | None = None) -> dict:
    """Export Vulkan artifacts with `bench/export_gpu_artifacts.py DIR --target vulkan *export_args`,
    run the unchanged `bench/gpu_check.sh` on them, and return its JSON report (both steps must
    exit 0; their output is the assertion's message otherwise)."""
    env = dict(os.environ if env is None else env, PYTHON=sys.executable)
    art = tmp_path / "artifacts"
    r = subprocess.run([sys.executable, str(BENCH / "export_gpu_artifacts.py"), str(art), "--target", "vulkan",
                        *export_args], capture_output=True, text=True, timeout=timeout, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run(["bash", str(BENCH / "gpu_check.sh"), str(art), str(tmp_path / "report.json")],
                       capture_output=True, text=True, timeout=timeout, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return json.loads((tmp_path / "report.json").read_text())
