"""The decode step on the vulkan target (lavapipe on this CPU-only machine, wgpu): a 4-token greedy
generation of a transformers Flax Llama, and of a GPT-2, each from one compile of prefill and
decode, equal to a plain jax.jit loop's tokens, with logits within 1e-3 (relative) (the Llama's
also to the CPU target's)."""
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


def _vulkan_or_skip():
    # probed in a child process: a lavapipe device created in this one makes a later CPU JIT
    # (the CPU generator's compile) abort the process
    if not toolchecks.vulkan_adapter():
        pytest.skip("wgpu or a Vulkan adapter (lavapipe or a GPU) is not available")


def test_vulkan_generation_matches_cpu_and_jax():
    _vulkan_or_skip()
    from transformers import FlaxLlamaForCausalLM, LlamaConfig

    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = FlaxLlamaForCausalLM(cfg, seed=0)
    prompts = [[5, 9, 17, 3, 44, 2, 7], [3]]
    cpu = Generator.from_hf_flax(model, max_context=64, cache_chunk=16)  # JIT-compiled before any device exists
    gpu = Generator.from_hf_flax(model, max_context=64, cache_chunk=16, target="vulkan")
    ref = Generator.from_hf_flax(model, max_context=64, cache_chunk=16, target="jax")
    got = list(gpu.stream(prompts, 4, logits=True))
    want = list(ref.stream(prompts, 4, logits=True))
    assert [t.tolist() for t, _ in got] == [t.tolist() for t, _ in want]
    for (_, a), (_, b) in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3 * np.abs(b).max())
    assert gpu.generate(prompts, 4) == cpu.generate(prompts, 4)


def test_vulkan_gpt2_generation_matches_jax():
    _vulkan_or_skip()
    from transformers import FlaxGPT2LMHeadModel, GPT2Config

    cfg = GPT2Config(vocab_size=128, n_positions=128, n_embd=64, n_layer=2, n_head=4, tie_word_embeddings=False)
    model = FlaxGPT2LMHeadModel(cfg, seed=0)
    prompts = [[5, 9, 17, 3, 44, 2, 7], [3], [100, 1, 2]]
    gpu = Generator.from_hf_flax(model, max_context=64, cache_chunk=16, target="vulkan")
    ref = Generator.from_hf_flax(model, max_context=64, cache_chunk=16, target="jax")
    got = list(gpu.stream(prompts, 5, logits=True))  # the prefill's token, then 4 decode steps
    want = list(ref.stream(prompts, 5, logits=True))
    assert [t.tolist() for t, _ in got] == [t.tolist() for t, _ in want]
    for (_, a), (_, b) in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3 * np.abs(b).max())
    assert gpu.last_stats["decode_steps"] == 4
