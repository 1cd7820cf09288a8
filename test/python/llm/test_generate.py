"""Generation from real model definitions (transformers Flax Llama and GPT-2, Google's gemma
Transformer; random init): the prefill and the decode step are each compiled ONCE, and a batch of
prompts of lengths 1, 7 and 50 generates the same tokens as a plain JAX loop over `jax.jit` of the
same two functions (and as HF's own Flax `generate`, or gemma's full forward pass), with every
step's logits within 1e-3 (relative)."""
import os

import numpy as np
import pytest

import relax_mlir  # noqa: F401

os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

jax = pytest.importorskip("jax")
transformers = pytest.importorskip("transformers")
import jax.numpy as jnp  # noqa: E402

from relax_mlir.llm import Generator, KVCache, Sampler  # noqa: E402

# gemma's modules import tensorflow (any import order works: test/python/runtime/test_foreign_llvm.py);
# the gemma cases run in a fresh interpreter of their own (test_gemma_in_a_separate_process sets
# GEMMA_PROCESS), which loads tensorflow here, so that the other cases run without it. gemma itself
# is imported in gemma(), which undoes what its import does to flax.
GEMMA_PROCESS = "RELAX_MLIR_GEMMA_PROCESS"
if os.environ.get(GEMMA_PROCESS):
    import tensorflow  # noqa: E402,F401

MAX_CONTEXT = 96  # 50 + 32 - 1 = 81 positions used; the cache grows 64 -> 80 -> 96 in chunks of 16
LENGTHS = (1, 7, 50)
NEW = 32
VOCAB = 128


def llama():
    from transformers import FlaxLlamaForCausalLM, LlamaConfig

    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return FlaxLlamaForCausalLM(cfg, seed=0)


def gpt2():
    from transformers import FlaxGPT2LMHeadModel, GPT2Config

    # an untied LM head: with random weights, GPT-2's head tied to the token embeddings makes
    # greedy decoding repeat one token
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4, tie_word_embeddings=False)
    return FlaxGPT2LMHeadModel(cfg, seed=0)


def gemma():
    import flax.linen as nn

    own = nn.Module.param
    try:
        from gemma import gm

        cfg = gm.nn.config.TransformerConfig(
            num_embed=VOCAB, embed_dim=64, hidden_dim=128, num_heads=4, head_dim=16, num_kv_heads=2,
            final_logit_softcap=None, use_post_attn_norm=True, use_post_ffw_norm=True, query_pre_attn_norm=None,
            attention_types=(gm.nn.AttentionType.GLOBAL, gm.nn.AttentionType.LOCAL_SLIDING), sliding_window_size=8)
        model = gm.nn.Transformer(config=cfg, dtype=jnp.float32)
        params = jax.tree.map(np.asarray, model.init(jax.random.PRNGKey(0), jnp.ones((1, 4), jnp.int32))["params"])
    finally:
        # Importing gemma replaces flax's `Module.param` by a wrapper that passes initializers an
        # extra `dtype` argument; that breaks every later initialization of an HF Flax model in
        # this process (FlaxLlamaRMSNorm's `lambda _, shape: ...`, also run by `init_cache`), here
        # and in later test files. Applying an initialized model does not use it.
        nn.Module.param = own
    return model, params


MODELS = {"llama": llama, "gpt2": gpt2, "gemma": gemma}


@pytest.fixture(scope="module", params=["gemma"] if os.environ.get(GEMMA_PROCESS) else ["llama", "gpt2"])
def case(request):
    if request.param == "gemma":
        model, params = gemma()
        gen = Generator.from_gemma(model, params, max_context=MAX_CONTEXT, cache_chunk=16)
        return request.param, (model, params), gen
    model = MODELS[request.param]()
    gen = Generator.from_hf_flax(model, max_context=MAX_CONTEXT, cache_chunk=16)
    return request.param, model, gen


def prompts(seed=1):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, VOCAB, n).tolist() for n in LENGTHS]


def jax_loop(lm, batch, steps, max_context):
    """Greedy generation by a plain loop over jax.jit(prefill) and jax.jit(decode), with a cache
    of max_context positions from the start (as HF's generate): tokens and logits per step."""
    prefill, decode = jax.jit(lm.prefill), jax.jit(lm.decode)
    b, s = len(batch), max(len(p) for p in batch)
    ids, mask = np.zeros((b, s), np.int32), np.zeros((b, s), np.int32)
    for i, p in enumerate(batch):
        ids[i, s - len(p):], mask[i, s - len(p):] = p, 1
    pos = np.maximum(mask.cumsum(1) - 1, 0).astype(np.int32)
    logits, ks, vs = prefill(lm.weights, ids, mask, pos)
    pad = ((0, 0), (0, max_context - s), (0, 0), (0, 0))
    ks, vs = [jnp.pad(k, pad) for k in ks], [jnp.pad(v, pad) for v in vs]
    full = np.ones((b, max_context), np.int32)
    full[:, :s] = mask
    lengths = np.array([len(p) for p in batch], np.int32)
    out_tokens, out_logits = [], []
    for t in range(steps):
        logits = np.asarray(logits)
        tok = np.argmax(logits, -1).astype(np.int32)
        out_tokens.append(tok)
        out_logits.append(logits)
        if t + 1 < steps:
            logits, ks, vs = decode(lm.weights, tok[:, None], full, (lengths + t)[:, None], np.int32(s + t), ks, vs)
    return np.stack(out_tokens, 1), out_logits


def test_greedy_matches_jax_loop(case):
    """Tokens equal, logits within 1e-3 relative at every one of 32 steps, prompts 1, 7, 50."""
    name, _, gen = case
    batch = prompts()
    steps = list(gen.stream(batch, NEW, logits=True))
    assert len(steps) == NEW
    tokens = np.stack([t for t, _ in steps], 1)
    want_tokens, want_logits = jax_loop(gen.lm, batch, NEW, MAX_CONTEXT)
    for t, ((_, got), want) in enumerate(zip(steps, want_logits)):
        err = np.max(np.abs(got - want)) / np.max(np.abs(want))
        assert err < 1e-3, (name, t, err)
    np.testing.assert_array_equal(tokens, want_tokens)
    assert len(set(tokens.ravel().tolist())) > 3  # the test model does not just repeat one token
    # the decode step ran at several cache capacities: one compile served them all
    assert gen.last_stats["decode_steps"] == NEW - 1
    assert gen.generate(batch, NEW) == tokens.tolist()


def test_greedy_matches_the_library(case):
    """The left padding, attention mask and positions are the library's own: HF's Flax generate
    gives the same tokens; for gemma, its full forward pass over each (unpadded) prompt and the
    tokens generated after it predicts those tokens."""
    name, model, gen = case
    batch = prompts(seed=2)
    if name == "gemma":
        model, params = model
        for p, new in zip(batch, gen.generate(batch, NEW)):
            logits = model.apply({"params": params}, np.array([p + new], np.int32), return_last_only=False).logits
            assert np.argmax(np.asarray(logits)[0, len(p) - 1:-1], -1).tolist() == new
        return
    s = max(LENGTHS)
    ids = np.array([[0] * (s - len(p)) + p for p in batch], np.int32)
    mask = np.array([[0] * (s - len(p)) + [1] * len(p) for p in batch], np.int32)
    out = model.generate(ids, attention_mask=mask, max_length=s + NEW, pad_token_id=0, do_sample=False)
    want = np.asarray(out.sequences)[:, s:]
    assert gen.generate(batch, NEW) == want.tolist()


def test_top_k_sampling_is_reproducible(case):
    name, _, gen = case
    batch = prompts(seed=3)
    kw = dict(sampling="sample", top_k=8, temperature=0.9, seed=7)
    first = list(gen.stream(batch, 16, logits=True, **kw))
    again = gen.generate(batch, 16, **kw)
    assert np.stack([t for t, _ in first], 1).tolist() == again
    assert gen.generate(batch, 16, **{**kw, "seed": 8}) != again
    for tokens, logits in first:  # every draw is among the 8 most likely tokens of its step
        rank = (logits > logits[np.arange(len(tokens)), tokens][:, None]).sum(-1)
        assert (rank < 8).all()
    nucleus = gen.generate(batch, 16, sampling="sample", top_p=0.5, seed=7)
    assert nucleus == gen.generate(batch, 16, sampling="sample", top_p=0.5, seed=7)


def test_eos_stops_a_sequence(case):
    """A sequence ends at its first `eos_token_id` (included); the others go on unchanged."""
    name, _, gen = case
    batch = prompts()
    greedy = gen.generate(batch, 12)
    eos = greedy[1][4]
    want = [row[:row.index(eos) + 1] if eos in row else row for row in greedy]
    assert gen.generate(batch, 12, eos_token_id=eos) == want
    assert len(want[1]) <= 5


def test_decode_writes_the_cache_in_place(case, monkeypatch):
    """The decode step donates its caches: each call returns the very arrays it was given, written
    in place (no copy of the cache per token)."""
    _, _, gen = case
    seen = []
    store = KVCache.store

    def spy(self, outs):
        seen.append(all(o is a for o, a in zip(outs, self.arrays)) and len(outs) == len(self.arrays))
        store(self, outs)

    monkeypatch.setattr(KVCache, "store", spy)
    gen.generate(prompts()[:2], 5)
    assert len(seen) == 4 and all(seen), seen


def test_cache_overflow_raises(case):
    """Past max_context: a clear ValueError before anything runs; the compiled decode step itself
    refuses a cache longer than its bound before native code runs."""
    name, _, gen = case
    batch = prompts()
    with pytest.raises(ValueError, match=r"KV cache overflow: .* 50 tokens plus 48 new tokens needs 97 cache "
                                         r"positions; max_context is 96"):
        gen.generate(batch, 48)
    assert len(gen.generate(batch, 47)) == 3  # 50 + 47 - 1 = 96 positions: fits exactly
    lm = gen.lm
    cache = [np.zeros((1, MAX_CONTEXT + 1, lm.kv_heads, lm.head_dim), np.float32)] * (2 * lm.layers)
    one = np.zeros((1, 1), np.int32)
    decode = gen.decode_exe[gen.decode_exe.main]
    with pytest.raises(ValueError, match=r"symbol m = 97 .* exceeds its upper bound 96"):
        decode(*lm.weights, one, np.ones((1, MAX_CONTEXT + 1), np.int32), one, np.int32(0), *cache)


def test_stream_and_progress(case, capsys):
    name, _, gen = case
    it = gen.stream([[5, 6, 7]], 4, progress=True)
    first = next(it)
    assert first.shape == (1,) and first.dtype == np.int32
    rest = list(it)
    assert len(rest) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tokens/s" in err[0] and "decode 3 x 1 tokens" in err[0]


def test_bad_arguments():
    from relax_mlir.llm.generator import Generator as G

    gen = G.__new__(G)  # the checks run before any compiled code
    gen.max_context, gen.pad_token_id = 8, 0
    gen.lm = type("LM", (), {"vocab": 10})()
    for bad, msg in [([], "non-empty list"), ([[1], []], "prompt 1 is empty"), ([[1, 10]], r"outside \[0, 10\)"),
                     ([[1.5]], "integer token ids"), ([list(range(1, 10))], "does not fit max_context 8")]:
        with pytest.raises(ValueError, match=msg):
            gen.stream(bad, 1)
    with pytest.raises(ValueError, match="max_new_tokens"):
        gen.stream([[1]], 0)
    with pytest.raises(ValueError, match="sampling='sample'"):
        gen.stream([[1]], 2, top_k=3)
    with pytest.raises(ValueError, match="temperature"):
        Sampler.make("sample", temperature=0)
    with pytest.raises(ValueError, match="top_p"):
        Sampler.make("sample", top_p=1.5)
    # not integers (None, NaN, inf, 1.5, negative): a ValueError naming the argument
    for v in (None, float("nan"), float("inf"), 1.5, "3", True):
        with pytest.raises(ValueError, match="max_new_tokens must be an integer >= 1"):
            gen.stream([[1]], v)
    for v in (-1, None, 1.5):
        with pytest.raises(ValueError, match="seed must be an integer >= 0"):
            Sampler.make("sample", seed=v)
    lm = type("LM", (), {"max_positions": 64, "name": "lm", "vocab": 10})()
    for v in (10, -1, 2.5):
        with pytest.raises(ValueError, match="pad_token_id must be"):
            Generator(lm, 8, executables=(object(), object()), pad_token_id=v)


def test_executables_conflicts_are_refused():
    """executables= with out_of_process=True or target='jax' (which would ignore them), or not a
    (prefill, decode) pair: a ValueError before anything is exported or compiled."""
    lm = type("LM", (), {"max_positions": 64, "name": "lm"})()  # no weights: nothing may be touched
    exes = (object(), object())
    for kw, msg in [({"out_of_process": True}, "compile out of process"), ({"target": "jax"}, "target='jax'"),
                    ({"executables": exes[:1]}, r"\(prefill, decode\), got 1")]:
        with pytest.raises(ValueError, match=msg):
            Generator(lm, 8, **{"executables": exes, **kw})


def test_sampler_semantics():
    logits = np.log(np.array([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]]))
    assert Sampler.make()(logits, None).tolist() == [1, 0]
    rng = np.random.default_rng(0)
    top1 = Sampler.make("sample", top_k=1)
    assert all(top1(logits, rng).tolist() == [1, 0] for _ in range(20))
    nucleus = Sampler.make("sample", top_p=0.55)  # keeps {1} in row 0, {0, 2} in row 1
    draws = np.stack([nucleus(logits, rng) for _ in range(400)])
    assert set(draws[:, 0]) == {1} and set(draws[:, 1]) == {0, 2}
    assert 0.5 < np.mean(draws[:, 1] == 0) < 0.75  # 0.5 / 0.8 = 0.625
    full = np.stack([Sampler.make("sample", seed=1)(logits, rng) for _ in range(2000)])
    np.testing.assert_allclose(np.bincount(full[:, 0], minlength=3) / 2000, [0.1, 0.6, 0.3], atol=0.04)
    # logits / temperature overflowing to +inf (a tiny temperature, an infinite logit of a
    # half-precision model): the limit, the largest logits; was inf - inf = NaN and the least
    # likely token. NaN logits, or all -inf: a ValueError naming the sequence
    lg = np.array([[3.0, 1.0, 0.5, -2.0], [1.0, np.inf, 0.0, np.inf]], np.float32)
    for t in (1e-3, 1e-308):
        draws = np.stack([Sampler.make("sample", temperature=t)(lg, rng) for _ in range(50)])
        assert set(draws[:, 0]) == {0} and set(draws[:, 1]) == {1, 3}
    for row, msg in [([np.nan, 1.0], "sequence 1 hold NaN"), ([-np.inf, -np.inf], "sequence 1 are all -inf")]:
        with pytest.raises(ValueError, match=msg):
            Sampler.make("sample")(np.array([[0.0, 1.0], row]), rng)


def test_kv_cache_grows_in_place():
    cache = KVCache(layers=1, batch=3, kv_heads=2, head_dim=2, max_context=10, chunk=4)
    rng = np.random.default_rng(0)
    k, v = rng.standard_normal((3, 3, 2, 2)).astype(np.float32), rng.standard_normal((3, 3, 2, 2)).astype(np.float32)
    cache.load([k], [v])
    assert cache.capacity == 4
    base = cache.arrays[0].base
    cache.arrays[0][:, 3] = 7.0
    assert cache.reserve(5) and cache.capacity == 8 and not cache.reserve(8)
    np.testing.assert_array_equal(cache.arrays[0][:, :3], k)
    np.testing.assert_array_equal(cache.arrays[1][:, :3], v)
    assert (cache.arrays[0][:, 3] == 7.0).all() and (cache.arrays[0][:, 4:] == 0).all()
    assert cache.arrays[0].base is base and cache.arrays[0].flags.c_contiguous  # the same preallocated buffer
    assert cache.reserve(9) and cache.capacity == 10  # capped at max_context
    np.testing.assert_array_equal(cache.arrays[0][:, :3], k)
    with pytest.raises(ValueError, match="KV cache overflow: 11 positions"):
        cache.reserve(11)


@pytest.mark.skipif(bool(os.environ.get(GEMMA_PROCESS)), reason="the separate process itself")
def test_gemma_in_a_separate_process():
    """Every test above with google's gemma Transformer, in a fresh interpreter (tensorflow)."""
    import subprocess
    import sys

    env = {**os.environ, GEMMA_PROCESS: "1"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", __file__,
                        "-k", "gemma"], env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert " passed" in r.stdout and " failed" not in r.stdout, r.stdout[-3000:]


def test_bloom_alibi_without_position_ids():
    """A transformers Flax Bloom (ALiBi: no position table, its __call__ takes no position_ids):
    from_hf_flax raised an AttributeError (no n_positions) and then passed position_ids the model
    does not take. Now its positions come from the mask, as HF's generate does; greedy tokens and
    per-step logits equal the jax.jit Generator's for prompts of 1, 7 and 20 tokens, and the
    context is bounded by max_context alone (an overflow is a ValueError)."""
    from transformers import BloomConfig, FlaxBloomForCausalLM

    model = FlaxBloomForCausalLM(BloomConfig(vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=4,
                                             tie_word_embeddings=False), seed=0)
    rng = np.random.default_rng(3)
    batch = [rng.integers(1, VOCAB, n).tolist() for n in (1, 7, 20)]
    ours = Generator.from_hf_flax(model, max_context=48, cache_chunk=16)
    ref = Generator.from_hf_flax(model, max_context=48, cache_chunk=16, target="jax")
    got = list(ours.stream(batch, 16, logits=True))
    want = list(ref.stream(batch, 16, logits=True))
    assert [list(t) for t, _ in got] == [list(t) for t, _ in want]
    for (_, g), (_, w) in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-3, atol=1e-4)
    with pytest.raises(ValueError, match="max_context is 48"):
        ours.generate([[1] * 40], 16)
