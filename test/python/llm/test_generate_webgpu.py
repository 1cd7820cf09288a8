"""The decode step on target="webgpu": a transformers Flax Llama (f32) compiled once for prefill
and once for decode, then
- in-process on wgpu-py (naga + lavapipe on this CPU-only machine): the prefill and 4 greedy
  decode tokens equal a plain jax.jit loop's, with every step's logits within 1e-3 (relative);
- in headless Chromium (Dawn on SwiftShader) through relax_runtime.js and relax_llm.js, the
  generation loop in the page with the weights uploaded once and the KV cache kept on the GPU:
  the same tokens and logits, a longer generation whose cache grows twice on the device, and a
  decode step that moves only its small inputs and the logits (no cache traffic). The same loop
  in examples/web's demo page (its second section): backend/test_webgpu_browser.py::test_demo_page."""
import base64
import contextlib
import os

import numpy as np
import pytest

import relax_mlir  # noqa: F401

os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

jax = pytest.importorskip("jax")
pytest.importorskip("transformers")

import toolchecks  # noqa: E402
from relax_mlir.llm import Generator  # noqa: E402
from relax_mlir.runtime import web  # noqa: E402

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover (the web extra is not installed)
    sync_playwright = None

PROMPTS = [[5, 9, 17, 3, 44, 2, 7], [3], [100, 1, 2]]


def tiny_llama():
    from transformers import FlaxLlamaForCausalLM, LlamaConfig

    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return FlaxLlamaForCausalLM(cfg, seed=0)


@pytest.fixture(scope="module")
def gens():
    """The webgpu generator (ONE compile of each function) and the jax.jit reference."""
    model = tiny_llama()
    return (Generator.from_hf_flax(model, max_context=64, cache_chunk=16, target="webgpu"),
            Generator.from_hf_flax(model, max_context=64, cache_chunk=16, target="jax"))


def assert_same_generation(got_tokens, got_logits, ref, prompts, n):
    want = list(ref.stream(prompts, n, logits=True))
    assert [list(t) for t in got_tokens] == [t.tolist() for t, _ in want]
    for a, (_, b) in zip(got_logits, want):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3 * np.abs(b).max())


@pytest.mark.skipif(not toolchecks.vulkan_adapter(), reason="no wgpu adapter (lavapipe or a GPU)")
def test_webgpu_generation_matches_jax(gens):
    gen, ref = gens
    # the kernels are WGSL (what a browser gets), within WebGPU's default limits
    table = gen.decode_exe.artifacts["webgpu"]
    assert table["kernels"] and all(k["storage_buffers"] <= 8 for k in table["kernels"].values())
    got = list(gen.stream(PROMPTS, 5, logits=True))  # the prefill's token, then 4 decode steps
    assert_same_generation([t for t, _ in got], [x for _, x in got], ref, PROMPTS, 5)
    assert gen.last_stats["decode_steps"] == 4


@contextlib.contextmanager
def browser_page(directory: str):
    """`directory` served on localhost, a headless Chromium page at its index.html: yields (base
    url, page, the list its console errors and uncaught exceptions go to)."""
    with web.serve(directory) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=web.find_browser(), args=web.BROWSER_ARGS)
        page = browser.new_page()
        console = []
        page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: console.append(str(e)))
        page.goto(url + "index.html")
        try:
            yield url, page, console
        finally:
            browser.close()


# In the page: load the LLM export, generate with logits, then a longer generation (the cache,
# 16 positions a chunk, grows from 16 to 32 and 48 on the device).
_GENERATE_JS = """
async ([base, prompts, n, nLong]) => {
  const rt = await import(base + "relax_runtime.js");
  const { LLM } = await import(base + "relax_llm.js");
  const llm = await LLM.load(base + "llm/");
  const errors = [...await llm.prefill.validate(), ...await llm.decode.validate()];
  const r = await llm.generate(prompts, n, { logits: true });
  const first = { ...r.stats };
  const long = await llm.generate(prompts, nLong);
  let overflow = null;
  try { await llm.generate(prompts, 64); } catch (e) { overflow = `${e.name}: ${e.message}`; }
  return { errors, steps: r.steps, logits: r.logits.map((x) => rt.toBase64(x)), stats: first,
           long: long.steps, longStats: long.stats, overflow };
}
"""


@pytest.mark.skipif(web.find_browser() is None, reason="chromium-headless-shell is not installed (apt; make setup)")
@pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed (pip extra 'web'; make setup)")
def test_browser_generation_matches_jax(gens, tmp_path):
    gen, ref = gens
    web.export_llm(gen, str(tmp_path / "llm"))
    web.copy_runtime(str(tmp_path))
    (tmp_path / "index.html").write_text("<!doctype html><title>relax-mlir llm</title>")
    n, n_long = 5, 30
    with browser_page(str(tmp_path)) as (url, page, console):
        r = page.evaluate(_GENERATE_JS, [url, PROMPTS, n, n_long])
    assert r["errors"] == [] and console == [], (r["errors"], console)
    vocab = gen.lm.vocab
    logits = [np.frombuffer(base64.b64decode(x), np.float32).reshape(len(PROMPTS), vocab) for x in r["logits"]]
    assert_same_generation(r["steps"], logits, ref, PROMPTS, n)
    assert r["long"] == [t.tolist() for t in ref.stream(PROMPTS, n_long)]
    st = r["stats"]
    assert st["decode_steps"] == n - 1 and r["longStats"]["decode_steps"] == n_long - 1
    # a decode step's host<->device traffic: ids, mask, positions, index and the error slot up,
    # the logits and the error slot back (and a few words of shapes the host program reads back);
    # the cache (2 x layers x [b, 16, 2, 16] f32) never moves
    b, cap = len(PROMPTS), 16
    small = 4 * (b + b * cap + b + 1 + 1) + 4 * (b * vocab + 1)
    assert small <= st["last_step_transfer_bytes"] <= small + 64, st
    assert st["cache_bytes"] == 2 * gen.lm.layers * b * cap * gen.lm.kv_heads * gen.lm.head_dim * 4, st
    assert r["overflow"].startswith("ValueError: KV cache overflow"), r["overflow"]
