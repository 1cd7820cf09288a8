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
