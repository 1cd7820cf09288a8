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
