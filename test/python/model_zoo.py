"""The test models, one catalog for every target: JAX functions with symbolic dims (jax.export),
their argument specs, and inputs at a size n. The CPU tests (frontend/test_jax_models.py) and the
GPU tests (backend/test_gpu_models.py) compile each ONCE and run it at several sizes.

The last three are examples/demo.py's and bench/'s models (examples/models.py): the MLP, the
transformer block and the KV-cache decoder layer.
"""
from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import models as demo  # noqa: E402

F32 = jnp.float32
SIZES = (1, 7, 33)


def spec(shape, dtype=F32):
    return jax.ShapeDtypeStruct(shape, dtype)


def sym(names):
    return export.symbolic_shape(names)


def rnd(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@dataclass(frozen=True)
class Model:
    name: str
    fn: Callable
    specs: Callable[[], list]  # built on use: jax symbolic shapes
    args: Callable[[int], list]  # the arguments at size n (deterministic in n)
    sizes: tuple[int, ...] = SIZES
    rtol: float = 1e-3
    atol: float = 1e-4


def _weights(seed, *shapes, scale=1.0):
    rng = np.random.default_rng(seed)
    return [rnd(rng, *s) * np.float32(scale) for s in shapes]


def _inputs(f):
    """args(n) from f(rng, n), with the generator seeded by n."""
    return lambda n: f(np.random.default_rng(1000 + n), n)


# -- small models ---------------------------------------------------------------------------

_W1, _B1, _W2 = _weights(1, (32, 64), (64,), (64, 16))


def mlp(x, w1, b1, w2):
    return jnp.tanh(jax.nn.relu(x @ w1 + b1) @ w2)


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


_G, _BE = _weights(2, (32,), (32,))


def layer_norm(x, g, be):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + be


_D_ATT = 16


def attention_causal(q, k, v):
    sc = jnp.einsum("hqd,hkd->hqk", q, k) / np.float32(np.sqrt(_D_ATT))
    n = q.shape[1]
    mask = jnp.arange(n)[:, None] >= jnp.arange(n)[None, :]
    sc = jnp.where(mask[None], sc, jnp.float32(-1e9))
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(sc, axis=-1), v)


(_EMB,) = _weights(3, (100, 16))


def embedding(e, idx):
    return e[idx], jnp.take(e, idx, axis=0)


(_WR,) = _weights(4, (8, 4))


def reshape_bs(x, w):
    y = x.reshape(-1, 8) @ w
    return y.reshape(x.shape[0], x.shape[1], 4)


def concat(x, y):
    return jnp.concatenate([x, y * 2], axis=0)


def broadcasting(x, y):
    return x + y


def elementwise_zoo(x, y):
    a = jnp.exp(x) + jnp.log1p(jnp.abs(y)) - jnp.sqrt(jnp.abs(x)) * jnp.sin(y) / (1 + jnp.cos(x) ** 2)
    c = jnp.maximum(x, y) - jnp.minimum(x, y) + jnp.sign(x) + jnp.floor(y) + jnp.ceil(x)
    d = jnp.clip(x, -0.5, 0.5) + jax.nn.sigmoid(y) + jnp.where((x > 0) & ~(y < 0), x, -y)
    return a + c + d, jnp.max(x, axis=0), jnp.min(y, axis=1), x.T


_W24, _B40 = _weights(9, (24, 40), (40,))


def matmul_epilogues(x, w, b):
    """The product is returned and also feeds an epilogue (a GPU matmul kernel writes both)."""
    y = x @ w
    return y, jnp.tanh(y + b) * 2


def reductions(x):
    """Every reduction layout: to a scalar, over the leading dim (a column reduction), over a
    middle dim, and over two dims that are not adjacent."""
    return jnp.sum(x), jnp.mean(x, axis=0), jnp.max(x, axis=1), jnp.sum(x * x, axis=(0, 2))


_WH, _WX = _weights(10, (8, 8), (4, 8), scale=0.3)


def control_flow(x, wh, wx):
    """The graph's loops and branches: an RNN cell over the symbolic sequence (lax.scan), a
    rescaling whose trip count depends on the data (while_loop), a branch on a reduction (cond),
    a three-way switch and a fixed fori_loop; on GPU targets the host program reads each condition
    back from the device."""
    def cell(h, xt):
        h = jnp.tanh(h @ wh + xt @ wx)
        return h, h.sum()
    h, sums = jax.lax.scan(cell, jnp.zeros(8, x.dtype), x)
    h, steps = jax.lax.while_loop(lambda c: jnp.abs(c[0]).sum() > 0.5,
                                  lambda c: (c[0] * 0.5, c[1] + 1), (h * 4.0, 0))
    y = jax.lax.cond(sums.sum() > 0, lambda v: v * 2.0, lambda v: -v, sums)
    z = jax.lax.switch(jnp.clip(steps, 0, 2), [jnp.sin, jnp.cos, lambda v: v * v], h)
    return y, z, jax.lax.fori_loop(0, 3, lambda i, a: a * 0.5 + i, h), steps


# -- the demo's models (examples/models.py) ---------------------------------------------------

_DD, _DH = 64, 128
_MLP_W = _weights(5, (_DD, _DH), (_DH, _DD), scale=0.1)
_BLOCK_W = [np.ones(_DD, np.float32)] + _weights(6, (_DD, _DD), (_DD, _DD), (_DD, _DD), (_DD, _DH), (_DH, _DD),
                                                 scale=0.1)
_DEC_D, _DEC_F = 128, 512
_DEC_DH = _DEC_D // demo.DECODER_HEADS
_DEC_W = ([np.ones(_DEC_D, np.float32), np.zeros(_DEC_D, np.float32)]
          + _weights(7, (_DEC_D, _DEC_D), (_DEC_D, _DEC_D), (_DEC_D, _DEC_D), (_DEC_D, _DEC_D), scale=0.1)
          + [np.ones(_DEC_D, np.float32), np.zeros(_DEC_D, np.float32)]
          + _weights(8, (_DEC_D, _DEC_F), (_DEC_F, _DEC_D), scale=0.1))


def _specs_of(arrays):
    return [spec(a.shape, a.dtype) for a in arrays]


def _catalog() -> list[Model]:
    (b,), (s,) = sym("b"), sym("s")
    bs = sym("b, s")
    length = sym("L")[0]
    cache = (demo.DECODER_HEADS, length, _DEC_DH)
    return [
        Model("mlp", mlp, lambda: [spec((b, 32)), spec((32, 64)), spec((64,)), spec((64, 16))],
              _inputs(lambda r, n: [rnd(r, n, 32), _W1, _B1, _W2])),
        Model("softmax", softmax, lambda: [spec(bs)], _inputs(lambda r, n: [rnd(r, n, n + 2)])),
        Model("layer_norm", layer_norm, lambda: [spec((b, 5, 32)), spec((32,)), spec((32,))],
              _inputs(lambda r, n: [rnd(r, n, 5, 32), _G, _BE])),
        Model("attention_causal", attention_causal, lambda: [spec((2, s, _D_ATT))] * 3,
              _inputs(lambda r, n: [rnd(r, 2, n, _D_ATT), rnd(r, 2, n, _D_ATT), rnd(r, 2, n, _D_ATT)])),
        Model("embedding", embedding, lambda: [spec((100, 16)), spec(bs, jnp.int32)],
              _inputs(lambda r, n: [_EMB, r.integers(0, 100, size=(n, 3)).astype(np.int32)])),
        Model("reshape_bs", reshape_bs, lambda: [spec((*bs, 8)), spec((8, 4))],
              _inputs(lambda r, n: [rnd(r, n, n + 1, 8), _WR])),
        Model("concat", concat, lambda: [spec((bs[0], 8)), spec((bs[1], 8))],
              _inputs(lambda r, n: [rnd(r, n, 8), rnd(r, n + 3, 8)])),
        Model("broadcasting", broadcasting, lambda: [spec((bs[0], 1, 16)), spec((1, bs[1], 16))],
              _inputs(lambda r, n: [rnd(r, n, 1, 16), rnd(r, 1, 2 * n, 16)])),
        Model("elementwise_zoo", elementwise_zoo, lambda: [spec((b, 8)), spec((b, 8))],
              _inputs(lambda r, n: [rnd(r, n, 8), rnd(r, n, 8)])),
        Model("matmul_epilogues", matmul_epilogues, lambda: [spec((b, 24)), spec((24, 40)), spec((40,))],
              _inputs(lambda r, n: [rnd(r, n, 24), _W24, _B40])),
        Model("reductions", reductions, lambda: [spec((*bs, 4))], _inputs(lambda r, n: [rnd(r, n, n + 2, 4)]),
              rtol=1e-4, atol=1e-3),
        Model("control_flow", control_flow, lambda: [spec((s, 4)), spec((8, 8)), spec((4, 8))],
              _inputs(lambda r, n: [rnd(r, n, 4), _WH, _WX])),
        Model("demo_mlp", demo.mlp, lambda: [spec((b, _DD))] + _specs_of(_MLP_W),
              _inputs(lambda r, n: [rnd(r, n, _DD)] + _MLP_W), sizes=(1, 13, 257)),
        Model("demo_transformer", demo.transformer_block, lambda: [spec((s, _DD))] + _specs_of(_BLOCK_W),
              _inputs(lambda r, n: [rnd(r, n, _DD)] + _BLOCK_W), sizes=(1, 13, 130)),
        Model("demo_decoder", demo.decoder_layer, lambda: [spec((1, _DEC_D)), spec(cache), spec(cache)]
              + _specs_of(_DEC_W),
              _inputs(lambda r, n: [rnd(r, 1, _DEC_D), rnd(r, *cache[:1], n, _DEC_DH),
                                    rnd(r, *cache[:1], n, _DEC_DH)] + _DEC_W), sizes=(1, 16, 127)),
    ]


MODELS: dict[str, Model] = {m.name: m for m in _catalog()}


@functools.cache
def relax_text(name: str) -> str:
    """The model imported to relax (jax.export -> StableHLO -> relax), once per process."""
    from relax_mlir.frontend.jax import from_jax

    m = MODELS[name]
    return str(from_jax(m.fn, *m.specs()))


@functools.cache
def references(name: str) -> tuple[tuple[list, list], ...]:
    """(args, jax.jit results as a list) at each of the model's sizes."""
    m = MODELS[name]
    jitted = jax.jit(m.fn)
    out = []
    for n in m.sizes:
        args = m.args(n)
        want = jitted(*args)
        want = [np.asarray(w) for w in (want if isinstance(want, (tuple, list)) else [want])]
        out.append((args, want))
    return tuple(out)


def as_list(got) -> list:
    return list(got) if isinstance(got, (tuple, list)) else [got]


def assert_matches(name: str, got: list, want: list, n: int) -> None:
    m = MODELS[name]
    assert len(got) == len(want), f"{name} n={n}: {len(got)} results, want {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g), w, rtol=m.rtol, atol=m.atol,
                                   err_msg=f"{name} n={n} result #{i}")
