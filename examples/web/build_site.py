"""Build the WebGPU demo site: the transformer block of examples/models.py compiled ONCE for
target="webgpu" with a symbolic sequence length, exported beside its weights, the page and the
browser runtime.

    python examples/web/build_site.py [OUT]          # default build/web-demo
    python -m relax_mlir.runtime.web build/web-demo  # then open http://localhost:8000/

The page (index.html, demo.js) lets you pick the sequence length, runs the block on WebGPU and
shows the output summary and timings. With `llm=True` (the command line's default) its second
section generates text token ids with a tiny transformers Flax Llama (`tiny_llama`, random
weights) whose prefill and decode are compiled once each for target="webgpu": the loop runs in the
page (relax_llm.js), weights uploaded once, the KV cache on the GPU."""
from __future__ import annotations

import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # examples/: models.py

D, H = 64, 128  # model width, MLP hidden width


def weights() -> list[np.ndarray]:
    """g, wq, wk, wv, w1, w2 of the block (deterministic)."""
    rng = np.random.default_rng(6)
    ws = [rng.standard_normal(s).astype(np.float32) * np.float32(0.1)
          for s in ((D, D), (D, D), (D, D), (D, H), (H, D))]
    return [np.ones(D, np.float32)] + ws


def demo_input(n: int) -> np.ndarray:
    """The page's input x [n, D]: exact small multiples of 1/8, so that JavaScript (demo.js
    `makeInput`) and numpy build the same f32 values."""
    i, j = np.meshgrid(np.arange(n), np.arange(D), indexing="ij")
    return (((i * 31 + j * 17) % 23 - 11) / 8).astype(np.float32)


LLM_CONTEXT, LLM_CHUNK = 64, 16


def tiny_llama():
    """A transformers Flax Llama (RMSNorm, RoPE, GQA, SwiGLU) with random weights, seed 0."""
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import FlaxLlamaForCausalLM, LlamaConfig

    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return FlaxLlamaForCausalLM(cfg, seed=0)


def build(out: str, llm: bool = False) -> str:
    import jax
    from jax import export

    import models
    import relax_mlir
    from relax_mlir.frontend.jax import from_jax
    from relax_mlir.runtime import web

    os.makedirs(out, exist_ok=True)
    ws = weights()
    (s,) = export.symbolic_shape("s")
    specs = [jax.ShapeDtypeStruct((s, D), np.float32)] + [jax.ShapeDtypeStruct(w.shape, w.dtype) for w in ws]
    exe = relax_mlir.compile(from_jax(models.transformer_block, *specs), target="webgpu")
    model = os.path.join(out, "model")
    if os.path.isdir(model):
        shutil.rmtree(model)
    exe.export(model)
    names = ["g", "wq", "wk", "wv", "w1", "w2"]
    for name, w in zip(names, ws):
        with open(os.path.join(model, f"{name}.bin"), "wb") as f:
            f.write(w.tobytes())
    with open(os.path.join(model, "weights.json"), "w") as f:
        json.dump({"d": D, "weights": [{"name": n, "shape": list(w.shape), "file": f"{n}.bin"}
                                       for n, w in zip(names, ws)]}, f, indent=1)
    for name in ("index.html", "demo.js"):
        shutil.copyfile(os.path.join(HERE, name), os.path.join(out, name))
    web.copy_runtime(out)
    if llm:
        from relax_mlir.llm import Generator

        gen = Generator.from_hf_flax(tiny_llama(), max_context=LLM_CONTEXT, cache_chunk=LLM_CHUNK, target="webgpu")
        if os.path.isdir(os.path.join(out, "llm")):
            shutil.rmtree(os.path.join(out, "llm"))
        web.export_llm(gen, os.path.join(out, "llm"))
    with open(os.path.join(out, "features.json"), "w") as f:  # what the page may load
        json.dump({"llm": llm}, f)
    return out


if __name__ == "__main__":
    root = os.path.dirname(os.path.dirname(HERE))
    print(build(sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build", "web-demo"), llm=True))
