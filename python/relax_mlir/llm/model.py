"""A causal language model as two pure JAX functions over a flat list of weights.

`CausalLM` is what `Generator` compiles: `prefill(weights, ids, mask, pos)` runs a left-padded
batch of prompts and returns the last position's logits and every layer's keys and values;
`decode(weights, ids, mask, pos, index, keys, values)` runs one token per sequence against a KV
cache of `m` positions (the cache's capacity, symbolic in the export), writes the new key and value
at `index` and returns the logits and the updated caches. Both are plain functions of arrays, so
`jax.jit` of them is the reference the tests and benchmarks compare against.

Shapes (H: key/value heads, D: head dim, L: layers, V: vocabulary):

    prefill: ids, mask, pos [b, s] i32 -> logits [b, V], keys L x [b, s, H, D], values L x [b, s, H, D]
    decode:  ids, pos [b, 1] i32, mask [b, m] i32, index () i32, keys, values L x [b, m, H, D]
             -> logits [b, V], keys, values (the caches, updated at `index`)

`mask` is 1 for a real token and 0 for left padding (and 1 for every cache position at or after
the prompt: positions past `index` are masked by the model itself); `pos` is each token's position
in its own sequence (HF Flax's `attention_mask.cumsum(-1) - 1`, clipped at 0 for padding).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class CausalLM:
    """A causal LM: prefill and decode functions, their weights and the KV cache layout."""

    name: str
    prefill: Callable
    decode: Callable
    weights: list  # flat list of weight arrays (the params pytree's leaves, in order)
    layers: int
    kv_heads: int
    head_dim: int
    vocab: int
    max_positions: int  # the longest context the definition supports (its position tables)
    cache_dtype: np.dtype = np.dtype(np.float32)  # the keys'
    value_dtype: np.dtype | None = None  # the values' cache dtype where it differs (GPT-J in f16 / bf16)

    @property
    def values_dtype(self) -> np.dtype:
        return self.cache_dtype if self.value_dtype is None else np.dtype(self.value_dtype)


def _leaves(tree, name: str) -> list:
    """The leaves of `tree` whose last path key is `name`, in pytree order."""
    import jax

    out = []
    for path, x in jax.tree_util.tree_leaves_with_path(tree):
        key = path[-1]
        if getattr(key, "key", getattr(key, "name", None)) == name:
            out.append(x)
    return out


NO_POSITION_TABLE = 1 << 20  # max_positions of a model without a position table


def from_hf_flax(model, params=None) -> CausalLM:
    """A Hugging Face `transformers` Flax causal LM (`FlaxLlamaForCausalLM`, `FlaxGPT2LMHeadModel`,
    `FlaxBloomForCausalLM` (ALiBi: no position_ids, no position table), and the others whose attention keeps `cached_key` / `cached_value` / `cache_index` in a
    "cache" collection, as `model.init_cache` returns) as a `CausalLM`. `params` defaults to
    `model.params`.

    The prefill starts from an empty cache of exactly `s` positions (so the prompt attends only to
    itself); the decode passes the caller's caches in the model's own `past_key_values` layout,
    with every layer's `cache_index` set to `index`, exactly as HF's Flax `generate` does."""
    import jax
    import jax.numpy as jnp

    params = model.params if params is None else params
    leaves, treedef = jax.tree.flatten(params)
    weights = [np.ascontiguousarray(np.asarray(w)) for w in leaves]
    template = jax.eval_shape(lambda: model.init_cache(1, 2))
    keys = _leaves(template, "cached_key")
    if not keys or len(keys) != len(_leaves(template, "cached_value")):
        raise ValueError(f"{type(model).__name__}: init_cache() has no cached_key/cached_value leaves; "
                         "not a Flax causal LM with a KV cache")
    _, _, kv_heads, head_dim = keys[0].shape
    cfg = model.config
    # Models without a position table (Bloom's ALiBi) take no position_ids: their context is
    # bounded by the caller's max_context only.
    takes_positions = "position_ids" in inspect.signature(model.__call__).parameters
    max_positions = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
    if max_positions is None:
        if takes_positions:
            raise ValueError(f"{type(model).__name__}: its config has neither max_position_embeddings nor "
                             "n_positions, and the model takes position_ids")
        max_positions = NO_POSITION_TABLE

    def cache_tree(ks, vs, index):
        it_k, it_v = iter(ks), iter(vs)

        def leaf(path, _):
            name = path[-1].key
            return next(it_k) if name == "cached_key" else next(it_v) if name == "cached_value" else index
        return jax.tree_util.tree_map_with_path(leaf, template)

    def run(weights, ids, mask, pos, ks, vs, index):
        p = jax.tree.unflatten(treedef, weights)
        where = {"position_ids": pos} if takes_positions else {}  # (ALiBi: from the mask)
        out = model(ids, attention_mask=mask, params=p, past_key_values=cache_tree(ks, vs, index), **where)
        kv = out.past_key_values
        return out.logits[:, -1], _leaves(kv, "cached_key"), _leaves(kv, "cached_value")

    # (GPT-J's half-precision cache holds f32 keys, its rotary embedding's, and f16 / bf16 values)
    kdt, vdt = keys[0].dtype, _leaves(template, "cached_value")[0].dtype

    def prefill(weights, ids, mask, pos):
        b, s = ids.shape
        empty_k = [jnp.zeros((b, s, kv_heads, head_dim), kdt)] * len(keys)
        empty_v = [jnp.zeros((b, s, kv_heads, head_dim), vdt)] * len(keys)
        return run(weights, ids, mask, pos, empty_k, empty_v, jnp.zeros((), jnp.int32))

    def decode(weights, ids, mask, pos, index, ks, vs):
        return run(weights, ids, mask, pos, ks, vs, index)

    return CausalLM(type(model).__name__, prefill, decode, weights, len(keys), int(kv_heads), int(head_dim),
                    int(cfg.vocab_size), int(max_positions), np.dtype(kdt), None if vdt == kdt else np.dtype(vdt))


def export(lm: CausalLM, max_context: int, platforms=None):
    """`jax.export` the prefill (symbolic batch `b`, prompt length `s <= max_context`) and the
    decode step (symbolic batch `b`, cache length `m <= max_context`, the caches donated: the
    export marks them `tf.aliasing_output`) -> (prefill, decode) `jax.export.Exported`, lowered
    for `platforms` (jax's default: this machine's)."""
    import jax
    from jax import export as jexport

    i32 = np.int32
    w = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in lm.weights]
    b, s = jexport.symbolic_shape("b, s", constraints=(f"s <= {max_context}",))
    tok = jax.ShapeDtypeStruct((b, s), i32)
    prefill = jexport.export(jax.jit(lm.prefill), platforms=platforms)(w, tok, tok, tok)
    b, m = jexport.symbolic_shape("b, m", constraints=(f"m <= {max_context}",))
    one = jax.ShapeDtypeStruct((b, 1), i32)
    cache_k = [jax.ShapeDtypeStruct((b, m, lm.kv_heads, lm.head_dim), lm.cache_dtype)] * lm.layers
    cache_v = [jax.ShapeDtypeStruct((b, m, lm.kv_heads, lm.head_dim), lm.values_dtype)] * lm.layers
    decode = jexport.export(jax.jit(lm.decode, donate_argnums=(5, 6)), platforms=platforms)(
        w, one, jax.ShapeDtypeStruct((b, m), i32), one, jax.ShapeDtypeStruct((), i32), cache_k, cache_v)
    return prefill, decode


def from_gemma(model, params, max_positions: int = 8192) -> CausalLM:
    """Google's `gemma` package Transformer (`gm.nn.Transformer`, text only) with its `params`
    (the "params" collection) as a `CausalLM`; the KV cache is in the model's `dtype` (float32 by
    default), as gemma's own sampler keeps it.

    Gemma's own cache (per layer `k`, `v`, `end_index` and the slots' `positions`) is rebuilt in
    each call from the arrays this interface carries: `end_index` is `index`, a slot's position
    is its count of real tokens before it (`cumsum(mask) - 1`, what the slot holds), and the
    attention mask [b, T, m] is the padding mask and causality (slot <= index + query), which is
    what gemma's sampler passes. `max_positions` bounds the context (gemma's RoPE has no table)."""
    import jax
    import jax.numpy as jnp

    leaves, treedef = jax.tree.flatten(params)
    weights = [np.ascontiguousarray(np.asarray(w)) for w in leaves]
    # the cache in the dtype the model computes its keys and values in (gemma's sampler: the params')
    cdt = jnp.dtype(getattr(model, "dtype", None) or jnp.float32)
    template = jax.eval_shape(lambda: model.init_cache(batch_size=1, dtype=cdt, cache_length=2))
    names = sorted(template, key=lambda n: int(n.rsplit("_", 1)[1]))
    _, _, kv_heads, head_dim = template[names[0]]["k"].shape

    def run(weights, ids, mask, pos, ks, vs, index):
        b, t = ids.shape
        m = ks[0].shape[1]
        slot_pos = jnp.maximum(jnp.cumsum(mask, axis=1, dtype=jnp.int32) - 1, 0)
        query = index + jnp.arange(t, dtype=jnp.int32)
        attn = (mask[:, None, :] > 0) & (jnp.arange(m, dtype=jnp.int32)[None, None, :] <= query[None, :, None])
        end = jnp.full((b,), index, jnp.int32)
        cache = {n: {"k": k, "v": v, "end_index": end, "positions": slot_pos} for n, k, v in zip(names, ks, vs)}
        out = model.apply({"params": jax.tree.unflatten(treedef, weights)}, ids, positions=pos, cache=cache,
                          attention_mask=attn, return_last_only=False)
        return out.logits[:, -1], [out.cache[n]["k"] for n in names], [out.cache[n]["v"] for n in names]

    def prefill(weights, ids, mask, pos):
        b, s = ids.shape
        empty = [jnp.zeros((b, s, kv_heads, head_dim), cdt)] * len(names)
        return run(weights, ids, mask, pos, empty, empty, jnp.zeros((), jnp.int32))

    def decode(weights, ids, mask, pos, index, ks, vs):
        return run(weights, ids, mask, pos, ks, vs, index)

    return CausalLM(type(model).__name__, prefill, decode, weights, len(names), int(kv_heads), int(head_dim),
                    int(model.config.num_embed), int(max_positions), np.dtype(cdt))
