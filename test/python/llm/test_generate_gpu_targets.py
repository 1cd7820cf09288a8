"""The LLM decode step on the GPU targets, as the GPU check ships it: bench/export_gpu_artifacts.py
compiles a tiny transformers Flax Llama's prefill and decode ONCE each and exports them with
jax.jit's greedy tokens; bench/gpu_check.sh generates with the artifacts and compares.

- cuda (no GPU here): the two artifacts hold PTX for every kernel (ptxas accepts them where it is
  installed), their signatures keep the symbolic batch, prompt and cache lengths, and a fresh
  process WITHOUT MLIR loads them and runs the whole generation loop through the host programs
  with a recording driver (every launch is an `.entry` of its PTX with the packed parameters'
  sizes; no kernel runs, so the tokens mean nothing there).
- vulkan (lavapipe): the same export and the unchanged gpu_check.sh run end to end here: the
  tokens equal jax's and the logits are within 1e-3 (relative)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import relax_mlir  # noqa: F401
import toolchecks

pytest.importorskip("jax")
pytest.importorskip("transformers")

ROOT = pathlib.Path(__file__).parents[3]
sys.path.insert(0, str(ROOT / "bench"))

import export_gpu_artifacts as eg  # noqa: E402


def test_cuda_llm_artifacts_load_and_run_without_mlir(tmp_path):
    import jax

    jax.config.update("jax_platforms", "cpu")
    row = eg.export_llm("llama_tiny", str(tmp_path), "cuda")
    path = tmp_path / "llama_tiny"
    meta = json.loads((path / "llm.json").read_text())
    assert meta["layers"] == 2 and meta["kv_heads"] == 2 and meta["jax_export"] is True
    ptx = {}
    for fn, syms in (("prefill", ("b", "s")), ("decode", ("b", "m"))):
        manifest = json.loads((path / fn / "manifest.json").read_text())
        assert manifest["format"] == "relax-mlir-cuda-1"
        entry = next(e for e in manifest["entries"] if e["name"] == manifest["main"])
        ids = entry["params"][meta["weights"]]  # the first argument after the weights: [b, s] / [b, 1]
        assert ids["dims"][0] == syms[0], ids
        if fn == "decode":  # the caches: [b, m, H, D], m <= max_context
            assert entry["params"][-1]["dims"][:2] == list(syms), entry["params"][-1]
            assert entry["upper"]["m"] == meta["max_context"]
        else:
            assert ids["dims"][1] == syms[1]
        kernels = {m: (path / fn / rel).read_text() for m, rel in manifest["kernels"].items()}
        assert len(kernels) == row[f"{fn}_kernels"] and all(".entry" in k for k in kernels.values())
        ptx.update({f"{fn}/{m}": k for m, k in kernels.items()})
    if not toolchecks.ptxas({k.replace("/", "_"): v for k, v in ptx.items()}, tmp_path, "llama_tiny"):
        print("ptxas is not installed: the PTX was not assembled")
    script = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        sys.path.insert(0, {str(ROOT / "test" / "python")!r})
        from recording_driver import RecordingDriver, check_launches
        from relax_mlir.llm import CausalLM, Generator
        from relax_mlir.runtime import load
        path = {str(path)!r}
        meta = json.load(open(path + "/llm.json"))
        ref = np.load(path + "/ref.npz")
        weights = [ref[f"w{{i}}"] for i in range(meta["weights"])]
        lm = CausalLM(meta["name"], None, None, weights, meta["layers"], meta["kv_heads"], meta["head_dim"],
                      meta["vocab"], meta["max_positions"], np.dtype(meta["cache_dtype"]))
        drivers, ptx = [], []
        for fn in ("prefill", "decode"):
            drivers.append(RecordingDriver())
            manifest = json.load(open(f"{{path}}/{{fn}}/manifest.json"))
            ptx.append({{m: open(f"{{path}}/{{fn}}/{{rel}}").read() for m, rel in manifest["kernels"].items()}})
        exes = tuple(load(f"{{path}}/{{fn}}", driver=d) for fn, d in zip(("prefill", "decode"), drivers))
        gen = Generator(lm, meta["max_context"], "cuda", cache_chunk=meta["cache_chunk"], executables=exes)
        out = gen.generate(meta["prompts"], 4)
        assert [len(t) for t in out] == [4] * len(meta["prompts"]), out
        for d, p in zip(drivers, ptx):
            check_launches(d, p)
        per_step = len(drivers[1].launches) // 3
        assert per_step and len(drivers[1].launches) == 3 * per_step, len(drivers[1].launches)
        assert not any(m == "mlir" or m.startswith("mlir.") for m in sys.modules), "mlir was imported"
        print("ok", len(drivers[0].launches), per_step)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.strip().splitlines()[-1].startswith("ok")


@pytest.mark.skipif(not toolchecks.vulkan_adapter(), reason="wgpu or a Vulkan adapter (lavapipe) is not available")
def test_gpu_check_generates_with_vulkan_llm_artifacts(tmp_path):
    report = toolchecks.gpu_check_on_vulkan(tmp_path, ["--models", "none", "--llms", "llama_tiny"], timeout=900,
                                            env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    assert report["ok"] and not report["mlir_imported"]
    (row,) = report["rows"]
    assert row["llm"] == "llama_tiny" and row["tokens_equal"] and row["max_rel_logit_err"] <= 1e-3
    assert row["prompt_lengths"] == [1, 7, 50] and row["new_tokens"] == 16
    assert row["jax_tokens_equal"]  # jax's own generation from the serialized exports, here on the CPU
