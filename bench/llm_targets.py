"""The LLM decode step on every target, side by side: a tiny transformers Flax Llama (the tests'
model: d 64, 2 layers, 4 heads / 2 KV heads, vocab 128, f32), prefill and decode compiled once
per target, then greedy generations measured interleaved (one generation on each target, round
after round; medians):

* jax:      `jax.jit` of the same two functions (Generator(target="jax")), on this CPU;
* cpu:      relax-mlir's CPU target;
* vulkan:   SPIR-V kernels on lavapipe (Mesa's CPU Vulkan) through wgpu-py;
* webgpu:   the WGSL kernels on the same lavapipe through wgpu-py (naga);
* browser:  headless Chromium (SwiftShader's WebGPU, CPU too), the loop in the page
            (runtime/web/relax_llm.js: weights uploaded once, KV cache on the GPU).

No GPU here: the three GPU runtimes are software renderings on the same 2 cores, a proxy of
launch and host overheads, not of GPU speed.

    python bench/llm_targets.py [ROUNDS] [--targets jax,cpu,vulkan,webgpu,browser]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "web"))
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROMPTS = [[5, 9, 17, 3, 44, 2, 7], [3], [100, 1, 2]]
NEW = 16

_JS = """
async ([base, prompts, n]) => {
  if (!window._llm) {
    const { LLM } = await import(base + "relax_llm.js");
    window._llm = await LLM.load(base + "llm/");
  }
  const r = await window._llm.generate(prompts, n);
  return { steps: r.steps, stats: r.stats };
}
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", nargs="?", type=int, default=5)
    ap.add_argument("--targets", default="jax,cpu,vulkan,webgpu,browser")
    a = ap.parse_args()
    targets = a.targets.split(",")
    from build_site import tiny_llama

    from relax_mlir.llm import Generator
    from relax_mlir.runtime import web

    model = tiny_llama()
    gens, compile_s = {}, {}
    for t in targets:
        g = Generator.from_hf_flax(model, max_context=64, cache_chunk=16, target="webgpu" if t == "browser" else t)
        gens[t], compile_s[t] = g, g.compile_seconds
    want = gens["jax"].generate(PROMPTS, NEW) if "jax" in gens else None
    rate = {t: [] for t in targets}
    prefill = {t: [] for t in targets}
    same = {t: True for t in targets}
    with contextlib.ExitStack() as stack:
        page = url = None
        if "browser" in targets:
            from playwright.sync_api import sync_playwright

            site = stack.enter_context(tempfile.TemporaryDirectory(prefix="llm-targets-"))
            web.export_llm(gens["browser"], os.path.join(site, "llm"))
            web.copy_runtime(site)
            with open(os.path.join(site, "index.html"), "w") as f:
                f.write("<!doctype html><title>llm</title>")
            url = stack.enter_context(web.serve(site))
            pw = stack.enter_context(sync_playwright())
            browser = pw.chromium.launch(executable_path=web.find_browser(), args=web.BROWSER_ARGS)
            stack.callback(browser.close)
            page = browser.new_page()
            page.goto(url + "index.html")
        for r in range(a.rounds + 1):  # round 0 warms up (pipelines, first calls)
            for t in targets:
                if t == "browser":
                    out = page.evaluate(_JS, [url, PROMPTS, NEW])
                    st = out["stats"]
                    toks = [[s[i] for s in out["steps"]] for i in range(len(PROMPTS))]
                    tps, pf = st["decode_tokens_per_s"], st["prefill_ms"]
                else:
                    toks = gens[t].generate(PROMPTS, NEW)
                    st = gens[t].last_stats
                    tps, pf = st["batch"] * st["decode_steps"] / st["decode_s"], st["prefill_s"] * 1e3
                same[t] &= want is None or toks == want
                if r:
                    rate[t].append(tps)
                    prefill[t].append(pf)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"tiny Llama, batch {len(PROMPTS)} (prompts {[len(p) for p in PROMPTS]}), {NEW} tokens, "
          f"medians of {a.rounds} interleaved rounds; {load}")
    print("| target | compile s (prefill + decode) | prefill ms | decode tokens/s | tokens equal jax's |")
    print("|---|---|---|---|---|")
    for t in targets:
        print(f"| {t} | {compile_s[t]:.1f} | {statistics.median(prefill[t]):.1f} | "
              f"{statistics.median(rate[t]):.0f} | {same[t]} |")


if __name__ == "__main__":
    main()
