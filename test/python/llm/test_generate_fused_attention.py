"""The LLM's attention fuses: transformers' Flax Llama (grouped-query) and GPT-2 at head dim 32 (the
fused kernel's register tile; test_generate.py's models have head dim 16 and stay unfused). Their
prefill and decode step contain relax.attention with the padding-and-causal bias as its operand
(structure), and generation compiled with the fused kernel at every length (prefill and decode)
gives the same tokens as the jax loop over jax.jit, logits within 1e-3 at each of 16 steps; the
versioned prefill's fused branch (the default) at 300 tokens equals jax's logits."""
import os

import numpy as np
import pytest

import relax_mlir  # noqa: F401

os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

jax = pytest.importorskip("jax")
transformers = pytest.importorskip("transformers")

from mlir import ir  # noqa: E402

from relax_mlir.frontend.jax import import_exported  # noqa: E402
from relax_mlir.llm import Generator  # noqa: E402
from relax_mlir.llm.model import export, from_hf_flax  # noqa: E402
from relax_mlir.ops.attention import SHORT_KEYS  # noqa: E402

from test_generate import jax_loop, prompts  # noqa: E402

VOCAB, MAX_CONTEXT, NEW = 128, 96, 16
EVERY_LENGTH = "relax-fuse-attention{min_keys=0 min_queries=0}"


def model(kind: str):
    """A tiny transformers Flax Llama (4 heads over 2 KV heads) or GPT-2, head dim 32, 512 positions."""
    import transformers as tf

    if kind == "llama":
        return tf.FlaxLlamaForCausalLM(tf.LlamaConfig(
            vocab_size=VOCAB, hidden_size=128, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=512), seed=0)
    return tf.FlaxGPT2LMHeadModel(tf.GPT2Config(vocab_size=VOCAB, n_positions=512, n_embd=128, n_layer=2, n_head=4,
                                                tie_word_embeddings=False), seed=0)


def attention_operands(module) -> list[int]:
    """The operand count of every relax.attention in `module`."""
    found = []

    def visit(o):
        if o.name == "relax.attention":
            found.append(len(o.operands))
        return ir.WalkResult.ADVANCE

    with module.context:
        module.op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _passes(fuse: str) -> list[str]:
    from relax_mlir.targets import registry
    return [fuse if p == "relax-fuse-attention" else p for p in registry().expand(["relax-compile-cpu"])]


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def lm(request):
    return from_hf_flax(model(request.param))


def test_prefill_and_decode_contain_fused_attention(lm):
    """By default each layer's prefill attention is a relax_v.if whose fused branch is
    relax.attention(q, k, v, bias) (fuse_bias=0 leaves versioned bias chains unfused); the decode
    step (few query rows) stays unfused by default and is one relax.attention with its bias per
    layer when fused at every length."""
    pre, dec = export(lm, MAX_CONTEXT)
    canon = ["relax-infer-shapes", "relax-canonicalize"]
    p = relax_mlir.run_passes(import_exported(pre), canon + ["relax-fuse-attention{fuse_bias=0}"])
    assert attention_operands(p) == [] and '"relax_v.if"' not in str(p)
    p = relax_mlir.run_passes(import_exported(pre), canon + ["relax-fuse-attention"])
    assert attention_operands(p) == [4]  # in the fused branch function, which the layers share
    assert str(p).count('"relax_v.if"') == lm.layers
    d = relax_mlir.run_passes(import_exported(dec), canon + ["relax-fuse-attention"])
    assert attention_operands(d) == []
    d = relax_mlir.run_passes(import_exported(dec), canon + [EVERY_LENGTH])
    assert attention_operands(d) == [4] * lm.layers
    assert '"relax.max"' not in str(d)  # the softmax's max went into the fused op


def test_versioned_prefill_host_code_calls_its_kernels(lm):
    """The unfused branch's softmax reductions keep their reduced dim (they write their output
    through a reshape): the CPU backend calls them as kernels instead of inlining their loops into
    every layer's branch of the entry (which doubled the prefill's compile time)."""
    from relax_mlir.backend import cpu

    pre, _ = export(lm, MAX_CONTEXT)
    upstream = relax_mlir.run_passes(import_exported(pre), _passes("relax-fuse-attention"))  # no JIT
    op = upstream.op
    with op.context:
        cpu.lower(op, cpu.CPUOptions(num_threads=1), until="bufferize")
        main = next(f for f in cpu.top_funcs(op) if ir.StringAttr(f.attributes["sym_name"]).value == "main")
        found = {"scf.if": 0, "vector.reduction": 0}

        def visit(o):
            if o.name in found:
                found[o.name] += 1
            return ir.WalkResult.ADVANCE

        main.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    assert found["scf.if"] >= lm.layers  # the versioned attention of each layer
    assert found["vector.reduction"] == 0  # no kernel's loops inlined into the entry


def test_tokens_equal_jax_with_fused_attention(lm):
    """Prefill and decode compiled with the fused kernel at every length (the bias read per key
    tile): greedy tokens equal the jax loop's, logits within 1e-3 relative at every step."""
    pre, dec = export(lm, MAX_CONTEXT)
    exes = [relax_mlir.compile(import_exported(e), passes=_passes(EVERY_LENGTH)) for e in (pre, dec)]
    gen = Generator(lm, MAX_CONTEXT, executables=exes, cache_chunk=16)
    batch = prompts()
    steps = list(gen.stream(batch, NEW, logits=True))
    want_tokens, want_logits = jax_loop(lm, batch, NEW, MAX_CONTEXT)
    for t, ((_, got), want) in enumerate(zip(steps, want_logits)):
        err = np.max(np.abs(got - want)) / np.max(np.abs(want))
        assert err < 1e-3, (lm.name, t, err)
    np.testing.assert_array_equal(np.stack([t for t, _ in steps], 1), want_tokens)


def test_versioned_prefill_fused_branch_at_300_tokens(lm):
    """The versioned prefill (the default) at 300 tokens (>= SHORT_KEYS: the fused branch), a
    left-padded batch (one row of 40 padding tokens): logits and caches equal jax.jit's."""
    pre, _ = export(lm, 320)
    exe = relax_mlir.compile(import_exported(pre))
    n = 300
    assert n >= SHORT_KEYS
    rng = np.random.default_rng(5)
    ids = rng.integers(1, VOCAB, (2, n)).astype(np.int32)
    mask = np.ones((2, n), np.int32)
    mask[1, :40] = 0
    ids[1, :40] = 0
    pos = np.maximum(mask.cumsum(1) - 1, 0).astype(np.int32)
    got = exe(*lm.weights, ids, mask, pos)  # logits, then each layer's keys, then values
    want_logits, want_k, _ = jax.jit(lm.prefill)(lm.weights, ids, mask, pos)
    want = np.asarray(want_logits)
    assert np.max(np.abs(got[0] - want)) / np.max(np.abs(want)) < 1e-3
    np.testing.assert_allclose(got[1], np.asarray(want_k[0]), rtol=1e-4, atol=1e-4)
