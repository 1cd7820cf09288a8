"""The main job: export JAX models with symbolic dims, import, compile ONCE, run several shapes.

Prints a table: shape, relax-mlir time, jax.jit time, jax.jit compile count vs ours (one).
"""
from __future__ import annotations

import time

import numpy as np


def median_time(f, reps=20):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2]


def main() -> None:
    import jax
    import jax.numpy as jnp

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    rng = np.random.default_rng(0)
    d, h = 64, 128
    w1 = rng.standard_normal((d, h), dtype=np.float32) * 0.1
    w2 = rng.standard_normal((h, d), dtype=np.float32) * 0.1
    g = np.ones(d, np.float32)
    wq, wk, wv = (rng.standard_normal((d, d), dtype=np.float32) * 0.1 for _ in range(3))

    from models import mlp

    from models import transformer_block as block

    (b,) = jax.export.symbolic_shape("b")
    (s,) = jax.export.symbolic_shape("s")
    models = [
        ("mlp", mlp, [jax.ShapeDtypeStruct((b, d), jnp.float32), w1, w2], lambda n: [rng.standard_normal((n, d), dtype=np.float32), w1, w2],
         (1, 7, 64, 256)),
        ("transformer block", block, [jax.ShapeDtypeStruct((s, d), jnp.float32), g, wq, wk, wv, w1, w2],
         lambda n: [rng.standard_normal((n, d), dtype=np.float32), g, wq, wk, wv, w1, w2], (16, 31, 64, 128)),
    ]
    print(f"{'model':18s} {'shape':>6s} {'relax-mlir ms':>14s} {'jax.jit ms':>11s} {'max |err|':>10s}")
    for name, fn, specs, make, shapes in models:
        specs = [sp if isinstance(sp, jax.ShapeDtypeStruct) else jax.ShapeDtypeStruct(sp.shape, sp.dtype) for sp in specs]
        t0 = time.perf_counter()
        mod = from_jax(fn, *specs)
        exe = relax_mlir.compile(mod)
        ct = time.perf_counter() - t0
        jitted = jax.jit(fn)
        for n in shapes:
            args = make(n)
            ours = exe(*args)
            ref = np.asarray(jitted(*args))
            err = float(np.max(np.abs(ours - ref)))
            assert np.allclose(ours, ref, rtol=1e-3, atol=1e-3), (name, n, err)
            t_ours = median_time(lambda: exe(*args))
            t_jax = median_time(lambda: jitted(*args).block_until_ready())
            print(f"{name:18s} {n:6d} {t_ours * 1e3:14.3f} {t_jax * 1e3:11.3f} {err:10.2e}")
        jit_compiles = jitted._cache_size() if hasattr(jitted, "_cache_size") else len(shapes)
        print(f"{name:18s} compiles: relax-mlir 1 ({ct:.2f} s, one artifact for every shape), jax.jit {jit_compiles}")
    generation()


def generation() -> None:
    """Text generation with a Llama-architecture model (transformers' FlaxLlamaForCausalLM: RMSNorm,
    RoPE, grouped-query attention, SwiGLU; random weights): its prefill and its KV-cache decode step
    are exported with symbolic batch, prompt and cache lengths and compiled once each; a batch of
    prompts of different lengths generates 32 tokens, the same as a loop over jax.jit of the same
    two functions."""
    import os

    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import FlaxLlamaForCausalLM, LlamaConfig

    from relax_mlir.llm import Generator

    cfg = LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=352, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    model = FlaxLlamaForCausalLM(cfg, seed=0)
    gen = Generator.from_hf_flax(model, max_context=128)
    ref = Generator.from_hf_flax(model, max_context=128, target="jax")
    print(f"\ngeneration: Llama-architecture model, 2 layers, d=128, 4 heads / 2 KV heads, vocab 512; "
          f"prefill + decode compiled once each in {gen.compile_seconds:.2f} s")
    rng = np.random.default_rng(0)
    prompts = [rng.integers(1, 512, n).tolist() for n in (3, 11, 40)]
    rows = {}
    for name, g in (("jax.jit", ref), ("relax-mlir", gen)):
        # the first run warms up: jax.jit compiles; relax-mlir builds its multi-threaded variant
        # (the calls of this batch touch more than RELAX_MLIR_PARALLEL_MIN_ELEMENTS elements)
        first = g.generate(prompts, 32)
        rows[name] = g.generate(prompts, 32)
        assert rows[name] == first
        st = g.last_stats
        rows[name + " tok/s"] = (st["prompt_tokens"] / st["prefill_s"], st["decode_steps"] * st["batch"] / st["decode_s"])
    for p, ours, theirs in zip(prompts, rows["relax-mlir"], rows["jax.jit"]):
        print(f"prompt of {len(p):2d} tokens -> relax-mlir {ours[:12]}...")
        print(f"{'':22s}jax.jit    {theirs[:12]}...")
    assert rows["relax-mlir"] == rows["jax.jit"], "generated tokens differ from jax.jit's"
    for name in ("relax-mlir", "jax.jit"):
        pre, dec = rows[name + " tok/s"]
        print(f"{name:10s} prefill {pre:9.1f} tokens/s, decode {dec:8.1f} tokens/s (batch of 3)")
    print("all 32 x 3 tokens equal to jax.jit's")


if __name__ == "__main__":
    main()
