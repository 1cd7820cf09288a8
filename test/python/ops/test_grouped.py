"""Grouped-query attention (ops/grouped.py): the KV heads repeated to the query heads
(`jnp.repeat`, as transformers' Flax Llama) are not materialized; the products run on the
unrepeated keys and values. Exported with symbolic dims, compiled once, compared with jax.jit at
several cache lengths."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import export  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402

from jaxcheck import compare, spec as S  # noqa: E402

rng = np.random.default_rng(0)
b, m, s = export.symbolic_shape("b, m, s")
H, G, D = 6, 2, 8  # 6 query heads over 2 KV heads


def attention(q, k, v):
    """q [b, s, H, D]; k, v [b, m, G, D] -> [b, s, H, D] (no mask)."""
    k = jnp.repeat(k, H // G, axis=2)
    v = jnp.repeat(v, H // G, axis=2)
    w = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(D).astype(np.float32)
    w = jax.nn.softmax(w, axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", w, v)


def canonical(mod) -> str:
    return str(relax_mlir.run_passes(relax_mlir.parse(str(mod)), ["relax-infer-shapes", "relax-canonicalize"]))


@pytest.mark.parametrize("queries", [1, "s"])
def test_grouped_attention_reads_unrepeated_kv(queries):
    mod = from_jax(attention, S((b, 1 if queries == 1 else s, H, D)), S((b, m, G, D)), S((b, m, G, D)))
    exe = relax_mlir.compile(mod)
    ref = jax.jit(attention)
    for bb, mm, ss in ((1, 1, 1), (2, 7, 3), (1, 131, 5), (3, 64, 1)):
        sq = 1 if queries == 1 else ss
        args = [rng.standard_normal(sh).astype(np.float32) for sh in ((bb, sq, H, D), (bb, mm, G, D), (bb, mm, G, D))]
        compare(ref(*args), exe(*args), 1e-5, 1e-5, err_msg=f"b={bb} m={mm} s={sq}")
    text = canonical(mod)
    # no tensor of the repeated keys or values ([b, m, H, D] or a permutation of it) is computed:
    # both products run per KV head
    assert f'!relax.tensor<["b", "m", {H}, {D}], f32>' not in text
    assert f'!relax.tensor<["b", "m", {G}, {H // G}, {D}], f32>' not in text
    assert f'!relax.tensor<["b", {H}, {D}, "m"], f32>' not in text
    products = [line for line in text.splitlines() if '"relax.matmul"' in line]
    assert len(products) == 2 and all(f'["b", {H}' not in p for p in products), products


def test_last_position_of_a_product_is_sliced_before_it():
    # the LM head of a prefill: logits of the last position only; the rows are sliced before the
    # product, which then runs on b rows, not b*s
    def head(x, w):
        return (x @ w)[:, -1]

    mod = from_jax(head, S((b, s, 16)), S((16, 40)))
    exe = relax_mlir.compile(mod)
    for bb, ss in ((1, 1), (2, 7), (3, 131)):
        args = (rng.standard_normal((bb, ss, 16)).astype(np.float32), rng.standard_normal((16, 40)).astype(np.float32))
        compare(jax.jit(head)(*args), exe(*args), 1e-5, 1e-5, err_msg=f"b={bb} s={ss}")
    products = [line for line in canonical(mod).splitlines() if '"relax.matmul"' in line]
    assert len(products) == 1 and '(!relax.tensor<["b", 16], f32>' in products[0], products


def test_slice_of_a_product_with_other_uses_or_a_sliced_last_axis_stays():
    def f(x, w):
        y = x @ w
        return y[:, -1, 2:5], y.sum()

    mod = from_jax(f, S((b, s, 16)), S((16, 40)))
    exe = relax_mlir.compile(mod)
    args = (rng.standard_normal((2, 5, 16)).astype(np.float32), rng.standard_normal((16, 40)).astype(np.float32))
    compare(jax.jit(f)(*args), exe(*args), 1e-4, 1e-4)
    products = [line for line in canonical(mod).splitlines() if '"relax.matmul"' in line]
    assert len(products) == 1 and '"b*s", 16]' in products[0].replace("s*b", "b*s"), products
