"""The decode step on target="webgpu" in-process (wgpu-py: naga + lavapipe on this CPU-only
machine): a transformers Flax Llama (f32) compiled once for prefill and once for decode; the
prefill and 4 greedy decode tokens equal a plain jax.jit loop's, with every step's logits within
1e-3 (relative). The browser run of the same model is in test_generate_webgpu_browser.py."""
import os

import numpy as np
import pytest

import relax_mlir  # noqa: F401

os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

jax = pytest.importorskip("jax")
pytest.importorskip("transformers")

import toolchecks  # noqa: E402
from relax_mlir.llm import Generator  # noqa: E402

pytestmark = pytest.mark.skipif(not toolchecks.vulkan_adapter(), reason="no wgpu adapter (lavapipe or a GPU)")


def tiny_llama():
    from transformers import FlaxLlamaForCausalLM, LlamaConfig

    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return FlaxLlamaForCausalLM(cfg, seed=0)


def test_webgpu_generation_matches_jax():
    model = tiny_llama()
    gen = Generator.from_hf_flax(model, max_context=64, cache_chunk=16, target="webgpu")
    ref = Generator.from_hf_flax(model, max_context=64, cache_chunk=16, target="jax")
    # the kernels are WGSL (what a browser gets), within WebGPU's default limits
    table = gen.decode_exe.artifacts["webgpu"]
    assert table["kernels"] and all(k["storage_buffers"] <= 8 for k in table["kernels"].values())
    prompts = [[5, 9, 17, 3, 44, 2, 7], [3], [100, 1, 2]]
    got = list(gen.stream(prompts, 5, logits=True))  # the prefill's token, then 4 decode steps
    want = list(ref.stream(prompts, 5, logits=True))
    assert [t.tolist() for t, _ in got] == [t.tolist() for t, _ in want]
    for (_, a), (_, b) in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3 * np.abs(b).max())
    assert gen.last_stats["decode_steps"] == 4
