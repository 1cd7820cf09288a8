"""The external validators of GPU binaries, shared by the tests: `spirv_val` (Debian
spirv-tools) and `ptxas` (the CUDA assembler). Each returns False when its tool is not installed,
so that the caller skips with its own reason; otherwise it asserts that every binary passes."""
from __future__ import annotations

import shutil
import subprocess


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
