"""target="webgpu" in a real browser: Debian's chromium-headless-shell (WebGPU on its bundled
SwiftShader; Dawn validates every WGSL module) driven by Playwright. Every test model is
compiled ONCE, exported, served on localhost and run at its three sizes by the browser runtime
(runtime/web/relax_runtime.js) against jax.jit; every kernel must be accepted by Dawn (shader
compilation and pipeline creation), no console error may occur, and shape errors come back as
the runtime's ValueError. Skipped only where the browser or Playwright is not installed
(`make setup` installs both where apt is usable)."""
from __future__ import annotations

import base64
import json
import os

import ml_dtypes
import numpy as np
import pytest

import model_zoo as zoo
import relax_mlir
from relax_mlir.runtime import web

BROWSER = web.find_browser()
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover (the web extra is not installed)
    sync_playwright = None

pytestmark = [
    pytest.mark.skipif(BROWSER is None, reason="chromium-headless-shell is not installed (apt; make setup)"),
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed (pip extra 'web'; make setup)"),
]

# Runs in the page: load the artifact, compile every kernel (Dawn's errors collected), run it at
# each size on the inputs fetched from the server; results as base64 bytes.
_RUN_JS = """
async ([base, name, sizes]) => {
  const rt = await import(base + "relax_runtime.js");
  const exe = await rt.loadArtifact(base + name + "/");
  const errors = await exe.validate();
  const sig = exe.manifest.entries.find((e) => e.name === exe.manifest.main);
  const runs = [];
  for (const n of sizes) {
    const spec = await (await fetch(`${base}${name}/inputs_${n}.json`)).json();
    const inputs = [];
    for (let i = 0; i < spec.length; i++) {
      const buf = await (await fetch(`${base}${name}/in_${n}_${i}.bin`)).arrayBuffer();
      inputs.push({ data: rt.fromBytes(spec[i].dtype, buf), shape: spec[i].shape });
    }
    const t0 = performance.now();
    const out = await exe.call(sig.name, inputs);
    const ms = performance.now() - t0;
    runs.push({ n, ms, out: out.map((o) => ({ shape: o.shape, dtype: o.dtype, b64: rt.toBase64(o.data) })) });
  }
  let shapeError = null;
  try {
    await exe.call(sig.name, []);
  } catch (e) {
    shapeError = e.name + ": " + e.message;
  }
  return { errors, runs, launches: exe.launches, shapeError };
}
"""

_DTYPES = {"f32": np.float32, "i32": np.int32, "i1": np.bool_, "i8": np.int8, "i16": np.int16,
           "bf16": ml_dtypes.bfloat16}


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=BROWSER, args=web.BROWSER_ARGS)
        yield b
        b.close()


def open_page(browser, url: str, **kw):
    """A new page at `url`, and the list its console errors and uncaught exceptions go to."""
    page = browser.new_page(**kw)
    console = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: console.append(str(e)))
    page.goto(url)
    return page, console


@pytest.fixture(scope="module")
def site(browser, tmp_path_factory):
    root = tmp_path_factory.mktemp("web")
    web.copy_runtime(str(root))
    (root / "index.html").write_text("<!doctype html><title>relax-mlir tests</title>")
    with web.serve(str(root)) as url:
        page, console = open_page(browser, url + "index.html")
        yield root, url, page, console
        page.close()


def export_with_inputs(name: str, directory) -> None:
    """Compile model `name` once for webgpu, export it to `directory`, and write its inputs at
    each size (raw bytes + a JSON of shapes and dtypes)."""
    exe = relax_mlir.compile(zoo.relax_text(name), target="webgpu")
    exe.export(str(directory))
    for n, (args, _) in zip(zoo.MODELS[name].sizes, zoo.references(name)):
        spec = []
        for i, a in enumerate(args):
            a = np.ascontiguousarray(a)
            (directory / f"in_{n}_{i}.bin").write_bytes(a.tobytes())
            spec.append({"shape": list(a.shape), "dtype": {v: k for k, v in _DTYPES.items()}[a.dtype.type]})
        (directory / f"inputs_{n}.json").write_text(json.dumps(spec))


# Where WGSL's precision rules allow a browser's result to differ by more than the model's own
# tolerance (model_zoo.py), per op. WGSL (section "Floating Point Accuracy") bounds sin and cos
# by an ABSOLUTE error of 2^-11 on [-pi, pi] (SwiftShader uses that freedom; measured 1.5e-4 on
# elementwise_zoo's sqrt(|x|) * sin(y) / (1 + cos(x)^2), where sqrt(|x|) <= 2 for its normal
# inputs): atol 2 * 2 * 2^-11 ~ 2e-3. exp (3 + 2|x| ulp) and log (3 ulp) stay within rtol 1e-3.
BROWSER_ATOL = {"elementwise_zoo": 2e-3}


def assert_matches(name: str, got: list, want: list, n: int) -> None:
    m = zoo.MODELS[name]
    assert len(got) == len(want), f"{name} n={n}: {len(got)} results, want {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=m.rtol, atol=max(m.atol, BROWSER_ATOL.get(name, 0.0)),
                                   err_msg=f"{name} n={n} result #{i} (in the browser)")


def export_program(src: str, directory, inputs: dict[int, list[np.ndarray]]) -> None:
    """Compile relax text `src` once for webgpu, export it, write `inputs` ({key: arrays})."""
    relax_mlir.compile(src, target="webgpu").export(str(directory))
    for n, args in inputs.items():
        spec = []
        for i, a in enumerate(args):
            (directory / f"in_{n}_{i}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
            spec.append({"shape": list(a.shape), "dtype": {v: k for k, v in _DTYPES.items()}[a.dtype.type]})
        (directory / f"inputs_{n}.json").write_text(json.dumps(spec))


def decode(o: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(o["b64"]), _DTYPES[o["dtype"]]).reshape(o["shape"])


@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_model_zoo_in_browser(site, name):
    root, url, page, console = site
    export_with_inputs(name, root / name)
    sizes = list(zoo.MODELS[name].sizes)
    res = page.evaluate(_RUN_JS, [url, name, sizes])
    assert res["errors"] == [], res["errors"]  # Dawn accepted every kernel
    assert res["launches"] > 0
    assert res["shapeError"] is not None and res["shapeError"].startswith("ValueError: @")
    for run, n, (_, want) in zip(res["runs"], sizes, zoo.references(name)):
        assert run["n"] == n
        assert_matches(name, [decode(o) for o in run["out"]], want, n)
    assert console == [], console


def test_bf16_argument_read_for_its_dim_in_browser(site):
    """A symbolic bf16 argument that binds n and is returned as it is and reshaped: the browser
    runtime moves its bits (no kernel computes in bf16), bit-exact against jax.jit at n = 1, 13, 64."""
    import jax
    import jax.numpy as jnp

    from relax_mlir.frontend.jax import from_jax

    root, url, page, console = site
    n = jax.export.symbolic_shape("n")[0]

    def f(a, b):
        return b[: a.shape[0]] * 2, a, a.reshape(-1)

    src = str(from_jax(f, jax.ShapeDtypeStruct((n, 3), jnp.bfloat16), jax.ShapeDtypeStruct((n,), jnp.float32)))
    sizes = (1, 13, 64)
    inputs = {m: [(np.arange(m * 3).reshape(m, 3) - 7.5).astype(ml_dtypes.bfloat16),
                  np.linspace(-1, 1, m, dtype=np.float32)] for m in sizes}
    export_program(src, root / "bf16_dim", inputs)
    res = page.evaluate(_RUN_JS, [url, "bf16_dim", list(sizes)])
    assert res["errors"] == [], res["errors"]
    for run, m in zip(res["runs"], sizes):
        want = [np.asarray(w) for w in jax.jit(f)(*inputs[m])]
        got = [decode(o) for o in run["out"]]
        assert [g.dtype for g in got] == [w.dtype for w in want], (m, run["out"])
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.tobytes() == w.tobytes(), (m, g, w)
    assert console == [], console


def test_shape_errors_in_browser(site):
    """A dim that contradicts the signature is the runtime's ValueError, naming the argument and
    the dim, before anything runs."""
    root, url, page, console = site
    export_with_inputs("mlp", root / "mlp_errors")
    msg = page.evaluate("""async ([base]) => {
      const rt = await import(base + "relax_runtime.js");
      const exe = await rt.loadArtifact(base + "mlp_errors/");
      const spec = await (await fetch(base + "mlp_errors/inputs_7.json")).json();
      const inputs = spec.map((s) => ({ data: new Float32Array(s.shape.reduce((a, b) => a * b, 1)), shape: s.shape }));
      inputs[0] = { data: new Float32Array(7 * 33), shape: [7, 33] };
      try { await exe.call("main", inputs); return "no error"; } catch (e) { return e.name + ": " + e.message; }
    }""", [url])
    assert msg.startswith("ValueError: @main:") and "dim 1 must be 32" in msg, msg
    assert console == [], console


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_demo_page(browser, tmp_path):
    """examples/web: the page loads the exported transformer block, runs it at two sequence
    lengths picked in its input box, and shows numbers that match jax.jit; its second section
    loads the tiny Llama export, generates for the prompt typed in its box and shows jax's tokens,
    a bad token id is the runtime's ValueError on the page; no console error; a screenshot is
    saved under build/. (One build of the site, as `make demo`'s.)"""
    import importlib.util

    import jax
    pytest.importorskip("transformers")
    from relax_mlir.llm import Generator

    spec = importlib.util.spec_from_file_location("build_site", os.path.join(ROOT, "examples", "web", "build_site.py"))
    site_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(site_mod)
    import models

    out = site_mod.build(str(tmp_path / "site"), llm=True)
    ref = jax.jit(models.transformer_block)
    ws = site_mod.weights()
    with web.serve(out) as url:
        page, console = open_page(browser, url + "index.html", viewport={"width": 900, "height": 800})
        page.wait_for_selector("body[data-ready='1']", timeout=120_000)
        for k, n in enumerate((5, 37), start=1):
            page.fill("#seq", str(n))
            page.click("#run")
            page.wait_for_selector(f"body[data-runs='{k}']", timeout=120_000)
            assert page.text_content("#status") == f"ran s = {n}"
            want = np.asarray(ref(site_mod.demo_input(n), *ws), np.float64)
            got = {c: page.get_attribute(f"#{c}", "data-value") for c in ("shape", "mean", "std", "min", "max", "first")}
            assert json.loads(got["shape"]) == [n, site_mod.D]
            np.testing.assert_allclose(json.loads(got["first"]), want.reshape(-1)[:4], rtol=1e-3, atol=1e-4)
            for key, w in (("mean", want.mean()), ("std", want.std()), ("min", want.min()), ("max", want.max())):
                np.testing.assert_allclose(float(got[key]), w, rtol=1e-3, atol=1e-4, err_msg=f"{key} at s = {n}")
        prompt, n_new = [5, 9, 17, 3, 44, 2, 7, 120], 20
        page.wait_for_selector("body[data-llm-ready='1']", timeout=300_000)
        page.fill("#prompt", ", ".join(map(str, prompt)))
        page.fill("#new-tokens", str(n_new))
        page.click("#generate")
        page.wait_for_selector("body[data-llm-runs='1']", timeout=300_000)
        tokens = json.loads(page.get_attribute("#llm-tokens", "data-value"))
        status = page.text_content("#llm-status")
        page.fill("#prompt", "1, 128")
        page.click("#generate")
        page.wait_for_function("document.getElementById('llm-status').textContent.startsWith('ValueError')",
                               timeout=60_000)
        bad = page.text_content("#llm-status")
        os.makedirs(os.path.join(ROOT, "build"), exist_ok=True)
        shot = os.path.join(ROOT, "build", "webgpu-demo.png")
        page.screenshot(path=shot, full_page=True)
        page.close()
    assert os.path.getsize(shot) > 0
    llm_ref = Generator.from_hf_flax(site_mod.tiny_llama(), max_context=site_mod.LLM_CONTEXT,
                                     cache_chunk=site_mod.LLM_CHUNK, target="jax")
    assert tokens == llm_ref.generate([prompt], n_new)[0] and status == f"generated {n_new} tokens"
    assert "outside [0, 128)" in bad, bad
    assert console == [], console


def test_nan_bytes_and_empty_in_browser(site):
    """In the browser too: maximum propagates NaN and orders -inf / inf (the NaN test is on the
    bits), comparisons are false on NaN, bool and int8 results keep their bytes when
    neighbouring invocations write one word, and a zero-size call launches nothing."""
    from test_webgpu import BOOLS, ELEMENTWISE

    root, url, page, console = site
    nan, inf = np.float32(np.nan), np.float32(np.inf)
    x = np.array([1.0, nan, -inf, 3.0, -0.0, nan, 2.5, -7.0], np.float32)
    y = np.array([nan, 2.0, 5.0, inf, 1.0, nan, -2.5, -7.5], np.float32)
    rng = np.random.default_rng(3)
    bx, by = (rng.uniform(-100, 100, 1001).astype(np.float32) for _ in range(2))
    e = np.zeros(0, np.float32)
    export_program(ELEMENTWISE, root / "maximum", {8: [x, y], 0: [e, e]})
    export_program(BOOLS, root / "bools", {1001: [bx, by], 0: [e, e]})
    got = page.evaluate(_RUN_JS, [url, "maximum", [8, 0]])
    assert got["errors"] == []
    np.testing.assert_array_equal(decode(got["runs"][0]["out"][0]), np.maximum(x, y))
    assert decode(got["runs"][1]["out"][0]).shape == (0,)
    got = page.evaluate(_RUN_JS, [url, "bools", [1001, 0]])
    assert got["errors"] == []
    m, c = (decode(o) for o in got["runs"][0]["out"])
    np.testing.assert_array_equal(m, bx < by)
    np.testing.assert_array_equal(c, bx.astype(np.int8))
    assert [decode(o).shape for o in got["runs"][1]["out"]] == [(0,), (0,)]
    assert console == [], console
