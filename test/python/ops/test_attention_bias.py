"""relax.attention with an additive bias operand (transformers' Flax Llama / GPT-2 attention: the
scores plus a [b, 1, s, m] bias of 0 / finfo.min made from the padding and causal masks): the
chain jax exports is fused with its bias (checked on the IR, GQA included), versioned on the key
length and the query rows, and equal to jax.jit from ONE compile at lengths on both sides of
SHORT_KEYS and SHORT_QUERIES, for biases broadcast over batch, heads and rows; fully masked rows
(finfo.min: uniform weights), -inf rows (NaN), NaN and +inf in the bias as jax gives them; zero keys
where legal (a hand-written op); bad bias operands refused with an error naming the dims."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mlir import ir

import relax_mlir
from relax_mlir.frontend.jax import from_jax
from relax_mlir.ops.attention import SHORT_KEYS, SHORT_QUERIES

from test_attention_fused import T, _ran, op_names  # noqa: E402  (the same directory)

FUSE = ["relax-infer-shapes", "relax-canonicalize", "relax-fuse-attention{min_keys=0 min_queries=0}"]
VERSIONED = ["relax-infer-shapes", "relax-canonicalize", "relax-fuse-attention{fuse_bias=1}"]  # the default
NEG = np.finfo(np.float32).min


def attention_ops(module) -> list:
    """(operand count, query_heads) of every relax.attention in `module`."""
    found = []

    def visit(o):
        if o.name == "relax.attention":
            heads = ir.IntegerAttr(o.attributes["query_heads"]).value if "query_heads" in o.attributes else 1
            found.append((len(o.operands), heads))
        return ir.WalkResult.ADVANCE

    with module.context:
        module.op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def hf_attention(q, k, v, bias):
    """transformers' Flax attention: q already scaled, scores + bias, softmax, weighted sum.
    q [b, h, s, d], k and v [b, h, m, d], bias broadcastable to [b, h, s, m]."""
    w = jnp.einsum("bhqd,bhkd->bhqk", q, k) + bias
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(w, axis=-1), v)


def hf_bias(rng, shape) -> np.ndarray:
    """0 / finfo.min like HF's padding-and-causal bias, plus some ordinary values."""
    b = np.where(rng.random(shape) < 0.3, NEG, 0.0).astype(np.float32)
    return b + np.where(rng.random(shape) < 0.2, rng.standard_normal(shape), 0.0).astype(np.float32)


# bias layouts: which of [b, h, s, m] it keeps (1 elsewhere)
LAYOUTS = {"full": "bhsm", "heads_broadcast": "bsm", "rows_broadcast": "bm", "batch_broadcast": "sm"}


def _bias_dims(keep, b, h, s, m):
    return tuple(x if c in keep else 1 for x, c in zip((b, h, s, m), "bhsm"))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_bias_chain_fused_versioned_matches_jax(layout, monkeypatch):
    """One relax.attention with the bias as its 4th operand (the broadcast over the scores gone);
    by default a relax_v.if on m < SHORT_KEYS or s < SHORT_QUERIES; from one compile equal to
    jax.jit on both sides of both limits, and each side ran its own kernels."""
    monkeypatch.setenv("RELAX_MLIR_PROFILE", "1")
    keep = LAYOUTS[layout]
    b, s, m = jax.export.symbolic_shape("b, s, m")
    h = 2
    specs = [jax.ShapeDtypeStruct((b, h, s, 32), jnp.float32)] + \
        [jax.ShapeDtypeStruct((b, h, m, 32), jnp.float32)] * 2 + \
        [jax.ShapeDtypeStruct(_bias_dims(keep, b, h, s, m), jnp.float32)]
    fused = relax_mlir.run_passes(from_jax(hf_attention, *specs), FUSE)
    names = op_names(fused)
    assert attention_ops(fused) == [(4, 1)]
    for gone in ("relax.exp", "relax.matmul", "relax.add", "relax.broadcast_to"):
        assert gone not in names, gone
    versioned = op_names(relax_mlir.run_passes(from_jax(hf_attention, *specs), VERSIONED))
    assert versioned.count("relax_v.if") == 1 and versioned.count("relax.attention") == 1
    assert versioned.count("relax.logical_or") == 1 and versioned.count("relax.add") == 1  # the short branch's
    default = op_names(relax_mlir.run_passes(from_jax(hf_attention, *specs), VERSIONED[:2] + ["relax-fuse-attention"]))
    assert default == versioned  # the default versions bias chains
    off = op_names(relax_mlir.run_passes(from_jax(hf_attention, *specs),
                                         VERSIONED[:2] + ["relax-fuse-attention{fuse_bias=0}"]))
    assert "relax_v.if" not in off and "relax.attention" not in off  # fuse_bias=0 leaves it unfused
    from relax_mlir.targets import registry
    passes = [p if p != "relax-fuse-attention" else "relax-fuse-attention{fuse_bias=1}"
              for p in registry().expand(["relax-compile-cpu"])]
    exe = relax_mlir.compile(from_jax(hf_attention, *specs), passes=passes)
    rng = np.random.default_rng(len(keep))
    jf = jax.jit(hf_attention)
    for bb, ss, mm in ((1, 1, 1), (2, 7, 13), (1, 31, 300), (1, SHORT_QUERIES, SHORT_KEYS - 1),
                       (2, SHORT_QUERIES, SHORT_KEYS), (1, 40, 520)):
        args = [rng.standard_normal(sh, dtype=np.float32) for sh in ((bb, h, ss, 32), (bb, h, mm, 32), (bb, h, mm, 32))]
        args.append(hf_bias(rng, _bias_dims(keep, bb, h, ss, mm)))
        want = np.asarray(jf(*args))
        np.testing.assert_allclose(exe(*args), want, rtol=2e-5, atol=2e-5, err_msg=f"b={bb} s={ss} m={mm}")
        ran = _ran(exe, args)
        short = any("exp" in name for name in ran)
        fused_ran = any(name.endswith("_attention") for name in ran)
        want_fused = ss >= SHORT_QUERIES and mm >= SHORT_KEYS
        assert (short, fused_ran) == (not want_fused, want_fused), (bb, ss, mm, sorted(ran))


def llama_gqa(q, k, v, bias):
    """transformers' Flax Llama: 8 query heads over 2 KV heads (jnp.repeat), q scaled, bias
    [b, 1, s, m] broadcast over the heads. q [b, s, 8, 32], k, v [b, m, 2, 32]."""
    k, v = jnp.repeat(k, 4, axis=2), jnp.repeat(v, 4, axis=2)
    w = jnp.einsum("bqhd,bkhd->bhqk", q / np.float32(np.sqrt(32)), k) + bias
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(w, axis=-1), v)


@pytest.mark.parametrize("bias_heads", [1, 8])
def test_grouped_query_bias_matches_jax(bias_heads):
    """GQA as ops/grouped.py leaves it: the op on the products' [b, 2, 4*s, 32] rows with
    query_heads = 4, the bias in the heads' layout [b, 1 | 8, s, m] read by head and row; equal to
    jax.jit from one compile at 4*s = 4 / 28 / 32 / 36 rows and m = 255 / 256 / 300."""
    b, s, m = jax.export.symbolic_shape("b, s, m")
    specs = [jax.ShapeDtypeStruct((b, s, 8, 32), jnp.float32)] + [jax.ShapeDtypeStruct((b, m, 2, 32), jnp.float32)] * 2 \
        + [jax.ShapeDtypeStruct((b, bias_heads, s, m), jnp.float32)]
    fused = relax_mlir.run_passes(from_jax(llama_gqa, *specs), FUSE)
    ops = attention_ops(fused)
    assert ops == [(4, 4)], ops
    text = str(fused)
    assert '!relax.tensor<["b", 2, "m", 32], f32>' in text and '"relax.exp"' not in text
    exe = relax_mlir.compile(from_jax(llama_gqa, *specs))
    rng = np.random.default_rng(bias_heads)
    jf = jax.jit(llama_gqa)
    for bb, ss, mm in ((1, 1, 1), (2, 7, SHORT_KEYS - 1), (1, 8, SHORT_KEYS), (2, 9, 300), (1, 1, 300), (2, 40, 270)):
        args = [rng.standard_normal(sh, dtype=np.float32) for sh in ((bb, ss, 8, 32), (bb, mm, 2, 32), (bb, mm, 2, 32))]
        args.append(hf_bias(rng, (bb, bias_heads, ss, mm)))
        np.testing.assert_allclose(exe(*args), np.asarray(jf(*args)), rtol=2e-5, atol=2e-5,
                                   err_msg=f"b={bb} s={ss} m={mm}")


def test_masked_rows_nan_inf_as_jax():
    """Rows whose biases are all finfo.min get uniform weights (the mean of v) as in jax; a row of
    -inf biases is NaN, a NaN or a +inf in a row's bias makes that row NaN, -inf in part of a row
    only masks those keys: the fused kernel (m = 300, and the fused-only compile at m = 20) and the
    short branch (m = 20) as jax.jit."""
    sq, m = jax.export.symbolic_shape("s, m")
    specs = [jax.ShapeDtypeStruct((1, 2, sq, 32), jnp.float32)] + [jax.ShapeDtypeStruct((1, 2, m, 32), jnp.float32)] * 2 \
        + [jax.ShapeDtypeStruct((1, 1, sq, m), jnp.float32)]
    exe = relax_mlir.compile(from_jax(hf_attention, *specs))
    fused_only = relax_mlir.compile(from_jax(hf_attention, *specs), passes=_cpu_passes_fused_only())
    rng = np.random.default_rng(3)
    jf = jax.jit(hf_attention)
    for mm in (20, 300):
        n = 40
        q, k, v = (rng.standard_normal(sh, dtype=np.float32) for sh in ((1, 2, n, 32), (1, 2, mm, 32), (1, 2, mm, 32)))
        bias = hf_bias(rng, (1, 1, n, mm))
        bias[..., 0, :] = NEG                      # fully masked: uniform
        bias[..., 1, :] = -np.inf                  # NaN
        bias[..., 2, 3] = np.nan                   # NaN
        bias[..., 3, mm - 1] = np.inf              # NaN (inf - inf)
        bias[..., 4, : mm // 2] = -np.inf          # half masked: ordinary
        bias[..., 35, :] = NEG                     # a second fully masked row, in the second row block
        want = np.asarray(jf(q, k, v, bias))
        assert np.isnan(want[:, :, 1:4]).all() and not np.isnan(want[:, :, [0, 4, 35]]).any()
        np.testing.assert_allclose(want[0, :, 0], v[0].mean(axis=1), rtol=1e-5, atol=1e-5)
        for name, e in (("versioned", exe), ("fused only", fused_only)):
            got = e(q, k, v, bias)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{name} m={mm}")
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=f"{name} m={mm}")


def _cpu_passes_fused_only() -> list[str]:
    from relax_mlir.targets import registry
    passes = registry().expand(["relax-compile-cpu"])
    return ["relax-fuse-attention{min_keys=0 min_queries=0}" if p == "relax-fuse-attention" else p for p in passes]


def direct(qd, kd, vd, bd, rd, attrs="", bdt="f32", extra=0):
    ins = [("q", qd, "f32"), ("k", kd, "f32"), ("v", vd, "f32"), ("b", bd, bdt)] + [("b", bd, bdt)] * extra
    params = ", ".join(f"%{n}{i}: {T(d, t)}" for i, (n, d, t) in enumerate(ins[:4]))
    args = ", ".join(f"%{n}{min(i, 3)}" for i, (n, _, _) in enumerate(ins))
    types = ", ".join(T(d, t) for _, d, t in ins)
    return (f"func.func @main({params}) -> {T(rd)} {{\n"
            f'  %r = "relax.attention"({args}) {attrs} : ({types}) -> {T(rd)}\n'
            f"  return %r : {T(rd)}\n}}\n")


def test_direct_op_zero_keys_row_broadcast_and_grouped():
    """A hand-written op: m = 0 keys give zeros (with a [1, 0] bias), n = 0 an empty result; a row-
    broadcast bias [1, m] and a grouped-query op (query_heads = 2, bias [2, 4, n, m]) equal their
    relax-expand-attention chain (the GPU targets' form) at several lengths."""
    text = direct(["n", 32], ["m", 32], ["m", 32], [1, "m"], ["n", 32], "{scale = 0.5 : f32}")
    exe = relax_mlir.compile(text)
    out = exe(np.ones((5, 32), np.float32), *(np.zeros((0, 32), np.float32),) * 2, np.zeros((1, 0), np.float32))
    np.testing.assert_array_equal(out, np.zeros((5, 32), np.float32))
    assert exe(*(np.ones((0, 32), np.float32),), *(np.ones((3, 32), np.float32),) * 2,
               np.ones((1, 3), np.float32)).shape == (0, 32)
    grouped = direct([2, 2, "2*n", 32], [2, 2, "m", 32], [2, 2, "m", 64], [2, 4, "n", "m"], [2, 2, "2*n", 64],
                     "{query_heads = 2 : i64, divisor = 3.0 : f32}")
    rng = np.random.default_rng(8)
    for t, shapes in ((text, lambda n, m: ((n, 32), (m, 32), (m, 32), (1, m))),
                      (grouped, lambda n, m: ((2, 2, 2 * n, 32), (2, 2, m, 32), (2, 2, m, 64), (2, 4, n, m)))):
        fused = relax_mlir.compile(t)
        expanded = relax_mlir.run_passes(t, ["relax-infer-shapes", "relax-expand-attention", "relax-infer-shapes"])
        assert "relax.attention" not in op_names(expanded)
        unfused = relax_mlir.compile(expanded)
        for n, m in ((1, 1), (5, 13), (37, 70), (70, 129)):
            args = [rng.standard_normal(sh, dtype=np.float32) for sh in shapes(n, m)]
            args[3] = hf_bias(rng, args[3].shape)
            np.testing.assert_allclose(fused(*args), unfused(*args), rtol=2e-5, atol=2e-5, err_msg=f"n={n} m={m}")
    for target in ("vulkan", "cuda"):
        assert relax_mlir.compile(grouped, target=target) is not None


@pytest.mark.parametrize("text, msg", [
    (direct(["n", 32], ["m", 32], ["m", 32], ["m"], ["n", 32]), r"bias must have rank 2"),
    (direct(["n", 32], ["m", 32], ["m", 32], ["n", 1], ["n", 32]), r"bias dim 1 \(1\).*key length"),
    (direct([2, "n", 32], [2, "m", 32], [2, "m", 32], [3, "n", "m"], [2, "n", 32]), r"bias dim 0 \(3\).*1 or the scores"),
    (direct(["n", 32], ["m", 32], ["m", 32], ["n", "k"], ["n", 32]), r"bias dim 1 \(k\).*key length"),
    (direct(["n", 32], ["m", 32], ["m", 32], ["n", "m"], ["n", 32], bdt="f16"), "dtype of q, k and v"),
    (direct([2, 6, 32], [2, "m", 32], [2, "m", 32], [8, 1, "m"], [2, 6, 32], "{query_heads = 4 : i64}"),
     r"query rows \(6\) are not provably a multiple of query_heads = 4"),
    (direct([2, 2, "n", 32], [2, 2, "m", 32], [2, 2, "m", 32], [2, 4, "n", "m"], [2, 2, "n", 32],
            "{query_heads = 2 : i64}"), r"query rows \(n\) are not provably a multiple of query_heads = 2"),
    (direct(["n", 32], ["m", 32], ["m", 32], ["?", "m"], ["n", 32]), r"bias dim 0 is unknown"),
    (direct([2, "n", 32], [2, "n", 32], [2, "n", 32], [1, "n", "n"], [2, "n", 32],
            '{query_heads = 2 : i64, mask = "causal"}'), "causal mask with query_heads"),
    (direct(["n", 32], ["m", 32], ["m", 32], ["n", "m"], ["n", 32], extra=1), "at most one bias"),
])
def test_direct_op_bias_refused(text, msg):
    with pytest.raises(relax_mlir.CompileError, match=msg):
        relax_mlir.compile(text)
