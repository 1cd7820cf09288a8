"""Mixed precision generation: a transformers Flax Llama with bf16 / f16 weights and activations
(`dtype=`), prefill and decode compiled once each; 8 greedy tokens for prompts of lengths 7 and 1
equal a jax.jit loop's, every step's logits within two units of the last place of their type at
the logits' scale (both compilers round every op to the low precision type; they may differ in
the order of a reduction)."""
import os

import numpy as np
import pytest

import relax_mlir  # noqa: F401

os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

jax = pytest.importorskip("jax")
pytest.importorskip("transformers")
import jax.numpy as jnp  # noqa: E402

from relax_mlir.llm import Generator  # noqa: E402


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=["bf16", "f16"])
def test_low_precision_llama_generation(dtype):
    from transformers import FlaxLlamaForCausalLM, LlamaConfig

    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = FlaxLlamaForCausalLM(cfg, seed=0, dtype=dtype)
    params = jax.tree.map(lambda a: np.asarray(a, dtype), model.params)
    prompts = [[5, 9, 17, 3, 44, 2, 7], [3]]
    gen = Generator.from_hf_flax(model, params, max_context=64, cache_chunk=16)
    ref = Generator.from_hf_flax(model, params, max_context=64, cache_chunk=16, target="jax")
    got, want = list(gen.stream(prompts, 8, logits=True)), list(ref.stream(prompts, 8, logits=True))
    assert [t.tolist() for t, _ in got] == [t.tolist() for t, _ in want]
    eps = float(jnp.finfo(dtype).eps)
    for step, ((_, a), (_, b)) in enumerate(zip(got, want)):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype == np.dtype(dtype), (a.dtype, b.dtype)
        a, b = a.astype(np.float64), b.astype(np.float64)
        assert np.abs(a - b).max() <= 2 * eps * np.abs(b).max(), f"step {step}"
