"""bench/gpu_check.sh, the check prepared for a GPU machine, run end to end here on Vulkan
artifacts (lavapipe): bench/export_gpu_artifacts.py writes them with their references, the check
loads them without mlir, compares every shape and writes its JSON report. (Timings are not
looked at: they are the benchmark's business.)"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import toolchecks

ROOT = pathlib.Path(__file__).parents[3]


@pytest.mark.skipif(not toolchecks.vulkan_adapter(), reason="wgpu or a Vulkan adapter (lavapipe) is not available")
def test_gpu_check_runs_on_vulkan_artifacts(tmp_path):
    pytest.importorskip("jax")
    art = tmp_path / "artifacts"
    env = dict(os.environ, PYTHON=sys.executable)
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "export_gpu_artifacts.py"), str(art), "--target", "vulkan",
                        "--models", "matmul_epilogues,concat"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), str(art), str(tmp_path / "report.json")],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ok"] and not report["mlir_imported"]
    assert sorted({row["model"] for row in report["rows"]}) == ["concat", "matmul_epilogues"]
    assert len(report["rows"]) == 6 and all(row["ok"] for row in report["rows"])
