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


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=["bf16", "f16"])
def test_gptj_caches_keys_and_values_in_their_own_dtypes(dtype, tmp_path):
    """GPT-J's half-precision cache holds f32 keys (its rotary embedding computes them in f32)
    and bf16 / f16 values: the runtime's cache keeps each in its own dtype (was an internal
    TypeError from dynamic_update_slice at export). Tokens equal the jax reference, and HF's own
    greedy `generate` (f16) or a saved package's (bf16): each path once, for CI's time."""
    from transformers import FlaxGPTJForCausalLM, GPTJConfig

    cfg = GPTJConfig(vocab_size=96, n_positions=80, n_embd=32, n_layer=2, n_head=4, rotary_dim=4)
    model = FlaxGPTJForCausalLM(cfg, seed=1, dtype=dtype)
    params = jax.tree.map(lambda a: np.asarray(a, dtype), model.params)
    gen = Generator.from_hf_flax(model, params, max_context=32, cache_chunk=8)
    assert gen.lm.cache_dtype == np.float32 and gen.lm.values_dtype == np.dtype(dtype)
    prompts = [[5, 6, 7, 11, 2], [9]]
    ref = Generator.from_hf_flax(model, params, max_context=32, cache_chunk=8, target="jax")
    tokens = gen.generate(prompts, 6)
    assert tokens == ref.generate(prompts, 6)
    if dtype == jnp.float16:
        hf = model.generate(np.array([prompts[0]], np.int32), params=params, max_length=11, do_sample=False,
                            pad_token_id=0).sequences
        assert tokens[0] == np.asarray(hf)[0, 5:].tolist()
    else:
        gen.save(str(tmp_path / "pkg"))
        from relax_mlir.llm import load

        assert load(str(tmp_path / "pkg")).generate(prompts, 6) == tokens


_GEMMA_BF16 = """
import tensorflow  # noqa: F401  (gemma imports it; loaded first, in this child process only)
import jax, jax.numpy as jnp, numpy as np
import flax.linen as nn
from relax_mlir.llm import Generator
own = nn.Module.param
from gemma import gm
nn.Module.param = own  # (gemma's import wraps flax's Module.param)
cfg = gm.nn.config.TransformerConfig(num_embed=64, embed_dim=32, hidden_dim=48, num_heads=4, head_dim=8,
                                     num_kv_heads=2, final_logit_softcap=None, use_post_attn_norm=True,
                                     use_post_ffw_norm=True, attention_types=(gm.nn.AttentionType.GLOBAL,))
model = gm.nn.Transformer(config=cfg, dtype=jnp.bfloat16)
params = jax.tree.map(lambda a: np.asarray(a, jnp.bfloat16),
                      model.init(jax.random.PRNGKey(1), jnp.ones((1, 4), jnp.int32))["params"])
gen = Generator.from_gemma(model, params, max_context=32)
assert gen.lm.cache_dtype == np.dtype(jnp.bfloat16)
fwd = jax.jit(lambda p, ids: model.apply({"params": p}, ids).logits)
for prompt in ([5, 6, 7, 30], [9]):
    got = gen.generate([prompt], 5)[0]
    seq = list(prompt)
    for _ in range(5):
        logits = np.asarray(fwd(params, np.array([seq], np.int32)), np.float32)[0, -1]
        seq.append(int(np.argmax(logits)))
    assert got == seq[len(prompt):], (got, seq)
print("ok")
"""


def test_gemma_package_transformer_in_bf16():
    """The `gemma` package's Transformer with dtype=bfloat16 keeps its KV cache in bf16, as
    gemma's own sampler (was an internal TypeError: the adapter's cache was always f32); greedy
    tokens equal a loop over gemma's own full forward. In a child process (gemma loads
    tensorflow, which later tests in this process must not see)."""
    import subprocess
    import sys

    pytest.importorskip("gemma")
    r = subprocess.run([sys.executable, "-c", _GEMMA_BF16], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-2000:] + r.stderr[-3000:]
