"""Export every test model (test/python/model_zoo.py: the JAX test models and examples/demo.py's
MLP, transformer block and KV-cache decoder, all with symbolic dims) as target="cuda" artifacts,
ONE compile each, plus numpy reference inputs and outputs at several shapes (jax.jit on this
machine's CPU, highest matmul precision), for bench/gpu_check.py on a GPU machine without MLIR.

Run: .venv/bin/python bench/export_gpu_artifacts.py [OUT_DIR] [--target cuda|vulkan]
(default: /tmp/relax-mlir-gpu-artifacts, cuda; for a device run pick a folder inside the repo that
git ignores, so that it travels). With --target vulkan the same check runs here on lavapipe,
which tries the whole check but CuPy before a GPU is lent.

Layout: OUT_DIR/index.json; OUT_DIR/<model>/{manifest.json,host.json,kernels/*.ptx};
OUT_DIR/<model>/ref_<n>.npz holding arg0..argK and out0..outM. LLMs (`LLMS`, a tiny transformers
Flax Llama): OUT_DIR/<llm>/{prefill,decode}/ (two artifacts), llm.json, ref.npz (weights w0..wK,
jax.jit's greedy tokens [steps, batch] and logits [steps, batch, vocab]) and, where jax lowers
them for cuda here, jax_{prefill,decode}.bin (`jax.export` serializations).
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))

RTOL, ATOL = 1e-3, 1e-3
# The demo's models are also timed at larger shapes than the tests use.
BENCH_SIZES = {"demo_mlp": (1, 7, 64, 256, 1024), "demo_transformer": (16, 31, 64, 128, 512),
               "demo_decoder": (1, 16, 127, 512, 2048)}


def sizes(name: str, zoo) -> tuple[int, ...]:
    return BENCH_SIZES.get(name, zoo.MODELS[name].sizes)


# LLMs: a prefill and a decode artifact each, and a greedy generation of jax.jit's on this CPU.
LLM_PROMPT_LENGTHS = (1, 7, 50)
LLM_NEW_TOKENS = 16
LLM_MAX_CONTEXT = 96
LLM_CACHE_CHUNK = 32


def tiny_llama():
    """A transformers Flax Llama (RMSNorm, RoPE, GQA, SwiGLU), random init with seed 0."""
    from transformers import FlaxLlamaForCausalLM, LlamaConfig

    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return FlaxLlamaForCausalLM(cfg, seed=0)


LLMS = {"llama_tiny": tiny_llama}


def export_llm(name: str, out_dir: str, target: str) -> dict:
    """Compile `name`'s prefill and decode ONCE each for `target` and export them to
    OUT_DIR/<name>/{prefill,decode}/, with llm.json (the model's cache layout, prompts, the
    generation's settings) and ref.npz (the weights, and jax.jit's tokens and per-step logits of a
    greedy generation on this CPU). Also, where jax can lower it, the two functions as
    `jax.export` artifacts for cpu and cuda (jax_{prefill,decode}.bin), so that the GPU check can
    time jax's own generation on the GPU without the model's Python definition."""
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from relax_mlir.llm import Generator, from_hf_flax

    lm = from_hf_flax(LLMS[name]())
    rng = np.random.default_rng(0)
    prompts = [rng.integers(1, lm.vocab, n).tolist() for n in LLM_PROMPT_LENGTHS]
    path = os.path.join(out_dir, name)
    t0 = time.perf_counter()
    gen = Generator(lm, LLM_MAX_CONTEXT, target, cache_chunk=LLM_CACHE_CHUNK)
    gen.prefill_exe.export(os.path.join(path, "prefill"))
    gen.decode_exe.export(os.path.join(path, "decode"))
    t_compile = time.perf_counter() - t0
    ref = Generator(lm, LLM_MAX_CONTEXT, "jax", cache_chunk=LLM_CACHE_CHUNK)
    steps = list(ref.stream(prompts, LLM_NEW_TOKENS, logits=True))
    np.savez(os.path.join(path, "ref.npz"), tokens=np.stack([t for t, _ in steps]),
             logits=np.stack([np.asarray(x) for _, x in steps]), **{f"w{i}": w for i, w in enumerate(lm.weights)})
    meta = {"name": lm.name, "layers": lm.layers, "kv_heads": lm.kv_heads, "head_dim": lm.head_dim,
            "vocab": lm.vocab, "max_positions": lm.max_positions, "cache_dtype": str(lm.cache_dtype),
            "weights": len(lm.weights), "prompts": prompts, "new_tokens": LLM_NEW_TOKENS,
            "max_context": LLM_MAX_CONTEXT, "cache_chunk": LLM_CACHE_CHUNK}
    try:  # jax's own functions for the GPU, serialized (symbolic batch and lengths, as ours)
        from relax_mlir.llm.model import export as export_jax

        for fn, ex in zip(("prefill", "decode"), export_jax(lm, LLM_MAX_CONTEXT, platforms=("cpu", "cuda"))):
            with open(os.path.join(path, f"jax_{fn}.bin"), "wb") as f:
                f.write(ex.serialize())
        meta["jax_export"] = True
    except Exception as e:  # the comparison on the GPU is then ours against the stored tokens only
        meta["jax_export"] = f"{type(e).__name__}: {e}"
    with open(os.path.join(path, "llm.json"), "w") as f:
        json.dump(meta, f, indent=1)
    kernels = {"cuda": lambda e: len(e.ptx), "vulkan": lambda e: len(e.artifacts["spirv"])}[target]
    row = {"name": name, "prefill_kernels": kernels(gen.prefill_exe), "decode_kernels": kernels(gen.decode_exe),
           "compile_s": t_compile}
    print(f"{name:18s} prefill {row['prefill_kernels']} + decode {row['decode_kernels']} {target} kernels, "
          f"compiled once each in {t_compile:.2f} s; jax's {LLM_NEW_TOKENS} tokens for prompts of "
          f"{', '.join(map(str, LLM_PROMPT_LENGTHS))} -> {path}", flush=True)
    return row


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir", nargs="?", default="/tmp/relax-mlir-gpu-artifacts")
    ap.add_argument("--target", choices=("cuda", "vulkan"), default="cuda")
    ap.add_argument("--models", default=None, help="comma-separated names (default: all; 'none': none)")
    ap.add_argument("--llms", default=None, help=f"comma-separated LLMs of {sorted(LLMS)} (default: all, none when --models is given)")
    a = ap.parse_args()
    out_dir = os.path.abspath(a.out_dir)
    import jax

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_default_matmul_precision", "highest")
    import model_zoo as zoo

    import relax_mlir

    os.makedirs(out_dir, exist_ok=True)
    index = {"models": [], "rtol": RTOL, "atol": ATOL, "target": a.target,
             "reference": f"jax {jax.__version__} cpu, highest precision"}
    names = [] if a.models == "none" else a.models.split(",") if a.models else list(zoo.MODELS)
    llms = [] if a.llms == "none" else a.llms.split(",") if a.llms else [] if a.models else list(LLMS)
    for name in names:
        m = zoo.MODELS[name]
        t0 = time.perf_counter()
        exe = relax_mlir.compile(zoo.relax_text(name), target=a.target)
        kernels = len(exe.ptx if a.target == "cuda" else exe.artifacts["spirv"])
        path = os.path.join(out_dir, name)
        exe.export(path)
        t_compile = time.perf_counter() - t0
        jitted = jax.jit(m.fn)
        for n in sizes(name, zoo):
            args = m.args(n)
            outs = zoo.as_list(jitted(*args))
            np.savez(os.path.join(path, f"ref_{n}.npz"), **{f"arg{i}": a for i, a in enumerate(args)},
                     **{f"out{i}": np.asarray(o) for i, o in enumerate(outs)})
        index["models"].append({"name": name, "shapes": list(sizes(name, zoo)), "kernels": kernels,
                                "compile_s": t_compile})
        print(f"{name:18s} {kernels:3d} {a.target} kernels, compiled once in {t_compile:.2f} s, "
              f"references at n = {', '.join(map(str, sizes(name, zoo)))} -> {path}", flush=True)
    index["llms"] = [export_llm(name, out_dir, a.target) for name in llms]
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    print("wrote", os.path.join(out_dir, "index.json"))


if __name__ == "__main__":
    main()
