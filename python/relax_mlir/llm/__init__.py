"""LLM generation from real model definitions: a prefill and a KV-cache decode step exported
with `jax.export` (symbolic batch, prompt length and cache length), each compiled once.

    from relax_mlir.llm import Generator
    gen = Generator.from_hf_flax(model, max_context=256)       # transformers Flax Llama, GPT-2, ...
    gen.generate([[1, 2, 3], [4, 5, 6, 7]], max_new_tokens=32)  # token lists, one per prompt
    gen.save("llm-pkg")                                          # artifacts + weights + config
    gen = relax_mlir.llm.load("llm-pkg")                         # no jax, transformers or MLIR
"""
from relax_mlir.llm.cache import KVCache
from relax_mlir.llm.generator import Generator
from relax_mlir.llm.model import CausalLM, export, from_gemma, from_hf_flax
from relax_mlir.llm.sampling import Sampler

load = Generator.load  # relax_mlir.llm.load(path): a saved package's generator (llm/package.py)

__all__ = ["CausalLM", "Generator", "KVCache", "Sampler", "export", "from_gemma", "from_hf_flax", "load"]
