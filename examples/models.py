"""The demo's JAX models, shared by examples/demo.py, bench/ and the tests (jax is imported here)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def mlp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def transformer_block(x, g, wq, wk, wv, w1, w2):
    """Layer norm, causal single-head attention, residual, gelu (erf) MLP, residual; x is [s, d]."""
    mu = x.mean(-1, keepdims=True)
    xn = (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g
    q, k, v = xn @ wq, xn @ wk, xn @ wv
    s = (q @ k.T) / np.sqrt(x.shape[-1])
    n = x.shape[0]
    mask = jnp.arange(n)[:, None] >= jnp.arange(n)[None, :]
    a = jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1) @ v
    y = x + a
    return y + jax.nn.gelu(y @ w1, approximate=False) @ w2


DECODER_HEADS = 4


def _layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b


def decoder_layer(x, k_cache, v_cache, g1, b1, wq, wk, wv, wo, g2, b2, w1, w2):
    """One GPT-style decoder layer generating one token against a KV cache of length L:
    x [1, d], caches [h, L, dh] (h = DECODER_HEADS); returns (out [1, d], K, V [h, L + 1, dh])."""
    d = x.shape[-1]
    h = DECODER_HEADS
    dh = d // h

    def heads(z):  # [1, d] -> [h, 1, dh]
        return z.reshape(1, h, dh).transpose(1, 0, 2)

    xn = _layer_norm(x, g1, b1)
    q, k, v = heads(xn @ wq), heads(xn @ wk), heads(xn @ wv)
    k_all = jnp.concatenate([k_cache, k], axis=1)
    v_all = jnp.concatenate([v_cache, v], axis=1)
    s = jnp.einsum("hqd,hkd->hqk", q, k_all) / np.sqrt(dh)
    p = jax.nn.softmax(s, axis=-1)
    att = jnp.einsum("hqk,hkd->hqd", p, v_all).transpose(1, 0, 2).reshape(1, d)
    y = x + att @ wo
    return y + jax.nn.gelu(_layer_norm(y, g2, b2) @ w1, approximate=False) @ w2, k_all, v_all
