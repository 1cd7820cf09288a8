"""The LLM's attention fused with its bias: prefill and decode of bench/llm.py's Llama, three relax-mlir
builds and jax.jit interleaved in one process.

"unfused" compiles without relax-fuse-attention: what main did with this model (its matcher took no
bias, so no relax.attention in prefill or decode). "versioned" is the default pipeline: the fused
kernel where the key length >= SHORT_KEYS and the rows >= SHORT_QUERIES, the unfused chain below,
chosen at run time. "fused" is relax-fuse-attention{min_keys=0 min_queries=0}: the fused kernel at
every length. Each is checked against jax.jit's logits before timing; medians of interleaved rounds.

    python bench/llm_attention.py [--layers 4] [--prompts 128,512] [--contexts 512,2048] [--reps 5]
    python bench/llm_attention.py --alone 64,128,256,512,2048   (the attention alone, one thread)

`--alone`: only the model's attention (16 query heads over 4 KV heads, d = 64, the [1, 1, s, s]
causal bias of 0 / finfo.min), unfused and fused builds (RELAX_MLIR_NUM_THREADS=1: set before
relax_mlir starts its pool), CPU ms per call, best of the interleaved rounds.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from llm import model_of, rounds  # noqa: E402  (bench/llm.py: the model and the interleaved timing)

import numpy as np  # noqa: E402

import relax_mlir  # noqa: E402

BUILDS = {"unfused": None, "versioned": "relax-fuse-attention{fuse_bias=1}",
          "fused": "relax-fuse-attention{min_keys=0 min_queries=0}"}


def _passes(fuse):
    from relax_mlir.targets import registry
    passes = registry().expand(["relax-compile-cpu"])
    return [fuse if p == "relax-fuse-attention" else p for p in passes if fuse is not None or p != "relax-fuse-attention"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--prompts", default="128,512")
    ap.add_argument("--contexts", default="512,2048")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--alone", default="", help="key lengths: time the attention alone (one thread)")
    args = ap.parse_args()
    if args.alone:
        return attention_alone([int(x) for x in args.alone.split(",")], args.reps)
    # bench/llm.py's model at its default width (d = 1024, 16 heads / 4 KV heads, vocab 32000)
    args.__dict__.update(d=1024, ffn=2816, heads=16, kv_heads=4, vocab=32000, max_context=2048)

    import jax

    from relax_mlir.frontend.jax import import_exported
    from relax_mlir.llm.model import export, from_hf_flax

    model, params = model_of(args)
    lm = from_hf_flax(model, params)
    del params
    print(f"Llama: d={args.d}, {args.layers} layers, {args.heads} heads / {args.kv_heads} KV heads, "
          f"max context {args.max_context}, batch 1", flush=True)
    ex_pre, ex_dec = export(lm, args.max_context)
    steps = {}
    for name, fuse in BUILDS.items():
        t0 = time.perf_counter()
        pre, dec = (relax_mlir.compile(import_exported(e), passes=_passes(fuse)) for e in (ex_pre, ex_dec))
        steps[name] = tuple(exe[exe.main].partial(dict(enumerate(lm.weights))) for exe in (pre, dec))
        print(f"{name}: compiled in {time.perf_counter() - t0:.1f} s", flush=True)
    jprefill = jax.jit(lm.prefill)
    jdecode = jax.jit(lm.decode, donate_argnums=(5, 6))
    jw = [jax.device_put(w) for w in lm.weights]
    L, H, D = lm.layers, lm.kv_heads, lm.head_dim
    rng = np.random.default_rng(1)
    names = list(BUILDS)

    def check(out, ref):
        err = np.max(np.abs(out[0] - np.asarray(ref[0]))) / np.max(np.abs(np.asarray(ref[0])))
        assert err < 1e-3, err

    print("\nprefill tokens/s: " + ", ".join(names) + ", jax.jit; ratios to jax", flush=True)
    for p in (int(x) for x in args.prompts.split(",")):
        ids = rng.integers(1, args.vocab, (1, p)).astype(np.int32)
        mask = np.ones((1, p), np.int32)
        pos = np.arange(p, dtype=np.int32)[None]
        ref = jax.block_until_ready(jprefill(jw, ids, mask, pos))
        fns = {}
        for n in names:
            check(steps[n][0](ids, mask, pos), ref)
            fns[n] = (lambda f: lambda: f(ids, mask, pos))(steps[n][0])
        fns["jax"] = lambda: jax.block_until_ready(jprefill(jw, ids, mask, pos))
        t = rounds(fns, args.reps)
        print(f"  {p:5d}: " + "  ".join(f"{k} {p / t[k]:.1f}" for k in fns) + "  |  "
              + "  ".join(f"{n} {t['jax'] / t[n]:.2f}" for n in names), flush=True)

    print("\ndecode tokens/s (cache of exactly the context): " + ", ".join(names) + ", jax.jit exact", flush=True)
    for c in (int(x) for x in args.contexts.split(",")):
        cache = [rng.standard_normal((1, c, H, D), np.float32) for _ in range(2 * L)]
        one, pos, idx = np.array([[7]], np.int32), np.array([[c - 1]], np.int32), np.int32(c - 1)
        mask = np.ones((1, c), np.int32)
        state = [jax.device_put(b) for b in cache]

        def run_jax():
            out = jax.block_until_ready(jdecode(jw, one, mask, pos, idx, state[:L], state[L:]))
            state[:] = [*out[1], *out[2]]  # the donated caches come back written in place
            return out
        ref = run_jax()
        fns = {}
        for n in names:
            check(steps[n][1](one, mask, pos, idx, *cache), ref)
            fns[n] = (lambda f: lambda: f(one, mask, pos, idx, *cache))(steps[n][1])
        fns["jax"] = run_jax
        t = rounds(fns, args.reps)
        print(f"  {c:5d}: " + "  ".join(f"{k} {1 / t[k]:.2f}" for k in fns) + "  |  "
              + "  ".join(f"{n} {t['jax'] / t[n]:.2f}" for n in names), flush=True)


def llama_attention(q, k, v, bias):
    """transformers' Flax Llama attention: KV heads repeated, scores + bias, softmax, product."""
    import jax
    import jax.numpy as jnp

    r = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, r, axis=2), jnp.repeat(v, r, axis=2)
    w = jnp.einsum("bqhd,bkhd->bhqk", q, k) + bias
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(w, axis=-1), v)


def attention_alone(lengths, reps: int) -> None:
    import jax
    import jax.numpy as jnp

    from relax_mlir.frontend.jax import from_jax

    b, s, m = jax.export.symbolic_shape("b, s, m")
    specs = [jax.ShapeDtypeStruct((b, s, 16, 64), jnp.float32)] + [jax.ShapeDtypeStruct((b, m, 4, 64), jnp.float32)] * 2 \
        + [jax.ShapeDtypeStruct((b, 1, s, m), jnp.float32)]
    exes = {n: relax_mlir.compile(from_jax(llama_attention, *specs), passes=_passes(BUILDS[n])) for n in ("unfused", "fused")}
    rng = np.random.default_rng(0)
    print("attention alone, CPU ms per call (one thread: RELAX_MLIR_NUM_THREADS="
          f"{os.environ.get('RELAX_MLIR_NUM_THREADS', 'unset')}): unfused, fused, fused / unfused", flush=True)
    for n in lengths:
        q = rng.standard_normal((1, n, 16, 64), np.float32)
        k, v = (rng.standard_normal((1, n, 4, 64), np.float32) for _ in range(2))
        bias = np.where(np.tri(n, dtype=bool), 0, np.finfo(np.float32).min).astype(np.float32)[None, None]
        ts = {name: [] for name in exes}
        for _ in range(reps):
            for name, e in exes.items():
                t0 = time.process_time()
                e(q, k, v, bias)
                ts[name].append(time.process_time() - t0)
        u, f = min(ts["unfused"]) * 1e3, min(ts["fused"]) * 1e3
        print(f"  {n:5d}: {u:.2f} {f:.2f} {f / u:.2f}", flush=True)


if __name__ == "__main__":
    main()
