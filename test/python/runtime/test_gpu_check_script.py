"""bench/gpu_check.sh, the check prepared for a GPU machine, run end to end here on Vulkan
artifacts (lavapipe): bench/export_gpu_artifacts.py writes them with their references, the check
loads them without mlir, compares every shape and writes its JSON report. (Timings are not
looked at: they are the benchmark's business.)"""
from __future__ import annotations

import pytest
import toolchecks


@pytest.mark.skipif(not toolchecks.vulkan_adapter(), reason="wgpu or a Vulkan adapter (lavapipe) is not available")
def test_gpu_check_runs_on_vulkan_artifacts(tmp_path):
    pytest.importorskip("jax")
    report = toolchecks.gpu_check_on_vulkan(tmp_path, ["--models", "matmul_epilogues,concat"])
    assert report["ok"] and not report["mlir_imported"]
    assert sorted({row["model"] for row in report["rows"]}) == ["concat", "matmul_epilogues"]
    assert len(report["rows"]) == 6 and all(row["ok"] for row in report["rows"])


@pytest.mark.skipif(not toolchecks.vulkan_adapter(), reason="wgpu or a Vulkan adapter (lavapipe) is not available")
def test_gpu_fuzz_check_runs_on_vulkan_artifacts(tmp_path):
    """bench/export_gpu_fuzz.py (fuzz programs checked on the CPU, exported with inputs and both
    references) and bench/gpu_fuzz_check.py (run without mlir), end to end on Vulkan; a program the
    target refuses (seed 2,371,800: f64 on Vulkan) is counted, not exported."""
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("jax")
    art, report = tmp_path / "fuzz", tmp_path / "fuzz.json"
    r = subprocess.run([sys.executable, str(toolchecks.BENCH / "export_gpu_fuzz.py"), str(art), "--target", "vulkan",
                        "--seeds", "2371800,2371804-2371805"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    statuses = {row["seed"]: row["status"] for row in json.loads((art / "index.json").read_text())["rows"]}
    assert statuses == {2371800: "refused", 2371804: "exported", 2371805: "exported"}
    r = subprocess.run([sys.executable, str(toolchecks.BENCH / "gpu_fuzz_check.py"), str(art), "--json", str(report)],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    out = json.loads(report.read_text())
    assert out["ok"] and sorted(row["seed"] for row in out["rows"]) == [2371804, 2371805]
    assert "mlir imported: False" in r.stdout
