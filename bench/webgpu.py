"""WebGPU beside Vulkan: kernel counts, bindings per kernel, and call times of the demo's models
(one compile each) on three runtimes, measured interleaved (one call of each, round after round):

* vulkan:     SPIR-V kernels on lavapipe through wgpu-py (runtime/vulkan.py);
* webgpu-py:  the WGSL kernels on the same lavapipe through wgpu-py (naga translates them);
* browser:    the exported artifact in headless Chromium (SwiftShader), timed inside the page.

    python bench/webgpu.py [ROUNDS]
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "python"))
sys.path.insert(0, os.path.join(ROOT, "python"))

import model_zoo as zoo  # noqa: E402
import relax_mlir  # noqa: E402
from relax_mlir.runtime import web  # noqa: E402

MODELS = [("demo_mlp", 257), ("demo_transformer", 130), ("demo_decoder", 127)]

_CALL_JS = """
async ([base, name, n, first]) => {
  const rt = await import(base + "relax_runtime.js");
  window._exes = window._exes || {};
  let exe = window._exes[name];
  if (!exe) {
    exe = window._exes[name] = await rt.loadArtifact(base + name + "/");
    const errors = await exe.validate();
    if (errors.length) throw new Error(errors.join("; "));
  }
  const spec = await (await fetch(`${base}${name}/inputs_${n}.json`)).json();
  const inputs = [];
  for (let i = 0; i < spec.length; i++) {
    const buf = await (await fetch(`${base}${name}/in_${n}_${i}.bin`)).arrayBuffer();
    inputs.push({ data: rt.fromBytes(spec[i].dtype, buf), shape: spec[i].shape });
  }
  const t0 = performance.now();
  await exe.call(exe.manifest.main, inputs);
  return performance.now() - t0;
}
"""


def bindings(program: dict) -> dict[str, int]:
    """Bindings of each kernel module as its launches bind them (vulkan: one a kernel argument)."""
    out = {}

    def walk(body):
        for ins in body:
            for k in ("then", "else", "body"):
                if isinstance(ins.get(k), list):
                    walk(ins[k])
            if ins.get("op") == "launch":
                out[ins["module"]] = len(ins["abi"])
    for e in program["entries"].values():
        walk(e["body"])
    return out


def main(rounds: int = 7) -> None:
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, os.path.join(ROOT, "test", "python", "backend"))
    from test_webgpu_browser import export_with_inputs

    print(f"load average at start: {os.getloadavg()}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp, web.serve(tmp) as url, sync_playwright() as p:
        web.copy_runtime(tmp)
        with open(os.path.join(tmp, "index.html"), "w") as f:
            f.write("<!doctype html><title>bench</title>")
        browser = p.chromium.launch(executable_path=web.find_browser(), args=web.BROWSER_ARGS)
        page = browser.new_page()
        page.goto(url + "index.html")
        for name, n in MODELS:
            vk = relax_mlir.compile(zoo.relax_text(name), target="vulkan")
            wg = relax_mlir.compile(zoo.relax_text(name), target="webgpu")
            export_with_inputs(name, __import__("pathlib").Path(tmp) / name)
            args = zoo.MODELS[name].args(n)
            vb = bindings(vk.artifacts["hostprog"])
            wk = wg.artifacts["webgpu"]["kernels"]
            wbind = [k["storage_buffers"] + 1 for k in wk.values()]
            t0 = time.perf_counter()
            page.evaluate(_CALL_JS, [url, name, n, True])  # loads, compiles every pipeline, first call
            first_browser = time.perf_counter() - t0
            vk(*args), wg(*args)  # warm
            times = {"vulkan": [], "webgpu-py": [], "browser": []}
            for _ in range(rounds):
                t = time.perf_counter()
                vk(*args)
                times["vulkan"].append(1e3 * (time.perf_counter() - t))
                t = time.perf_counter()
                wg(*args)
                times["webgpu-py"].append(1e3 * (time.perf_counter() - t))
                times["browser"].append(page.evaluate(_CALL_JS, [url, name, n, False]))
            row = {"model": name, "n": n, "kernels": len(wk), "vulkan_bindings_max": max(vb.values()),
                   "vulkan_bindings_mean": round(statistics.mean(vb.values()), 1),
                   "webgpu_bindings_max": max(wbind), "webgpu_bindings_mean": round(statistics.mean(wbind), 1),
                   "browser_first_s": round(first_browser, 1),
                   **{f"{k}_ms": round(statistics.median(v), 2) for k, v in times.items()}}
            rows.append(row)
            print(json.dumps(row), flush=True)
        browser.close()
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
