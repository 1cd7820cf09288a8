// The demo page: load the exported transformer block (model/), run it at the chosen sequence
// length, show the output summary and timings. Each summary cell also carries its full value in
// data-value (the Playwright test compares them with jax.jit).
import { loadArtifact, requestDevice, fromBytes } from "./relax_runtime.js";
import { LLM } from "./relax_llm.js";

const $ = (id) => document.getElementById(id);
let exe = null, weights = [], d = 0;

// x [n, d]: exact small multiples of 1/8 (build_site.py `demo_input` builds the same values)
function makeInput(n) {
  const x = new Float32Array(n * d);
  for (let i = 0; i < n; i++) for (let j = 0; j < d; j++) x[i * d + j] = (((i * 31 + j * 17) % 23) - 11) / 8;
  return { data: x, shape: [n, d] };
}

function show(id, v) {
  $(id).textContent = typeof v === "number" && !Number.isInteger(v) ? v.toPrecision(6) : String(v);
  $(id).dataset.value = Array.isArray(v) ? JSON.stringify(v) : String(v);
}

function fail(e, status = "status") {
  $(status).textContent = `${e.name}: ${e.message}`;
  $(status).className = "error";
}

// Run `body` with the button disabled: its message (or its error) goes to the status line, and
// each run that succeeds counts in the body's data-<counter> (what the Playwright test waits for).
async function guarded(button, status, counter, body) {
  $(button).disabled = true;
  try {
    $(status).textContent = await body();
    $(status).className = "";
    document.body.dataset[counter] = String(Number(document.body.dataset[counter] || 0) + 1);
  } catch (e) {
    fail(e, status);
  } finally {
    $(button).disabled = false;
  }
}

async function init() {
  const t0 = performance.now();
  const info = await (await fetch("model/weights.json")).json();
  d = info.d;
  weights = await Promise.all(info.weights.map(async (w) => ({
    data: fromBytes("f32", await (await fetch("model/" + w.file)).arrayBuffer()), shape: w.shape })));
  const manifest = await (await fetch("model/manifest.json")).json();
  const { adapter, device } = await requestDevice(manifest.webgpu.limits);
  exe = await loadArtifact("model/", device);
  const errors = await exe.validate();
  if (errors.length) throw new Error("kernels rejected: " + errors.join("; "));
  show("adapter", adapter.info ? `${adapter.info.vendor} ${adapter.info.architecture}`.trim() : "?");
  show("kernels", Object.keys(exe.kernels).length);
  show("t-load", performance.now() - t0);
  $("status").textContent = "ready";
  $("run").disabled = false;
  document.body.dataset.ready = "1";
}

function run() {
  return guarded("run", "status", "runs", async () => {
    const n = Number($("seq").value);
    const x = makeInput(n);
    const t0 = performance.now();
    const [y] = await exe.call("main", [x, ...weights]);
    const ms = performance.now() - t0;
    let sum = 0, sq = 0, lo = Infinity, hi = -Infinity;
    for (const v of y.data) { sum += v; sq += v * v; lo = Math.min(lo, v); hi = Math.max(hi, v); }
    const mean = sum / y.data.length;
    show("shape", `[${y.shape.join(", ")}]`);
    $("shape").dataset.value = JSON.stringify(y.shape);
    show("mean", mean);
    show("std", Math.sqrt(Math.max(sq / y.data.length - mean * mean, 0)));
    show("min", lo);
    show("max", hi);
    const first = Array.from(y.data.slice(0, 4));
    $("first").textContent = first.map((v) => v.toPrecision(6)).join(", ");
    $("first").dataset.value = JSON.stringify(first);
    show("t-run", ms);
    return `ran s = ${n}`;
  });
}

$("run").addEventListener("click", run);
init().catch(fail);

// --- the second section: greedy generation with the tiny Llama (llm/, when built) ---
let llm = null;

const llmFail = (e) => fail(e, "llm-status");

async function initLLM() {
  const features = await (await fetch("features.json")).json();
  if (!features.llm) { $("llm-status").textContent = "not built (build_site.py with llm=True)"; return; }
  $("llm-status").textContent = "loading…";
  llm = await LLM.load("llm/");
  const errors = [...await llm.prefill.validate(), ...await llm.decode.validate()];
  if (errors.length) throw new Error("kernels rejected: " + errors.join("; "));
  $("llm-status").textContent = "ready";
  $("generate").disabled = false;
  document.body.dataset.llmReady = "1";
}

function generate() {
  return guarded("generate", "llm-status", "llmRuns", async () => {
    const prompt = $("prompt").value.split(",").map((t) => t.trim()).filter((t) => t).map(Number);
    const n = Number($("new-tokens").value);
    $("llm-tokens").textContent = "";
    const { tokens, stats } = await llm.generate([prompt], n, {
      onToken: (ts) => { $("llm-tokens").textContent += ($("llm-tokens").textContent ? ", " : "") + ts[0]; },
    });
    $("llm-tokens").dataset.value = JSON.stringify(tokens[0]);
    show("llm-prefill", stats.prefill_ms);
    show("llm-rate", stats.decode_tokens_per_s);
    show("llm-bytes", stats.last_step_transfer_bytes);
    show("llm-cache", stats.cache_bytes);
    return `generated ${tokens[0].length} tokens`;
  });
}

$("generate").addEventListener("click", generate);
initLLM().catch(llmFail);
