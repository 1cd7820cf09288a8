// relax-mlir LLM generation in the browser: a causal LM's prefill and decode step, each an
// artifact of compile(..., target="webgpu"), exported with its weights by
// relax_mlir.runtime.web.export_llm (llm.json, weights.bin, prefill/, decode/). The loop is
// relax_mlir.llm.Generator's, greedy:
//
//   import { LLM } from "./relax_llm.js";
//   const llm = await LLM.load("model/");
//   const { tokens, stats } = await llm.generate([[5, 9, 17], [3]], 16);   // a list per prompt
//
// Prompts are left-padded into one batch with an attention mask and per-sequence positions. The
// weights are uploaded once. The KV cache stays on the GPU: the prefill's keys and values are
// left on the device and copied (on the device) into cache buffers of a capacity rounded up to
// `cache_chunk` positions, which the decode step, whose caches are donated, updates in place;
// when full they grow by `cache_chunk` positions (a device-side copy). Per decode step only the
// token ids, positions, the mask and the index go up, and only the logits come back.
import { Buffer, ValueError, loadArtifact, requestDevice } from "./relax_runtime.js";

function mergeLimits(a, b) {
  const out = { ...a };
  for (const [k, v] of Object.entries(b || {})) {
    out[k] = k in out ? (k.startsWith("min") ? Math.min(out[k], v) : Math.max(out[k], v)) : v;
  }
  return out;
}

async function fetchJSON(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}

export class LLM {
  constructor(meta, prefill, decode, weights) {
    this.meta = meta;
    this.prefill = prefill;
    this.decode = decode;
    this.weights = weights;  // device Buffers, uploaded once
    this.lastStats = null;
  }

  static async load(base, device = null) {
    const meta = await fetchJSON(base + "llm.json");
    if (meta.format !== "relax-mlir-llm-1") throw new Error(`not an LLM export: ${meta.format}`);
    const [pm, dm] = await Promise.all([fetchJSON(base + "prefill/manifest.json"), fetchJSON(base + "decode/manifest.json")]);
    if (!device) device = (await requestDevice(mergeLimits(pm.webgpu.limits, dm.webgpu.limits))).device;
    const prefill = await loadArtifact(base + "prefill/", device);
    const decode = await loadArtifact(base + "decode/", device);
    const r = await fetch(base + meta.weights_file);
    if (!r.ok) throw new Error(`${base + meta.weights_file}: HTTP ${r.status}`);
    const bytes = await r.arrayBuffer();
    const ARR = { f32: Float32Array, i32: Int32Array };
    const weights = meta.weights.map((w) => {
      const T = ARR[w.dtype];
      if (!T) throw new Error(`weights of dtype ${w.dtype} are not supported in the browser`);
      const n = w.shape.reduce((a, b) => a * b, 1);
      return prefill.toDevice({ data: new T(bytes, w.offset, n), shape: w.shape }, w.dtype);
    });
    return new LLM(meta, prefill, decode, weights);
  }

  // The new tokens of each prompt, greedy; {tokens: [[...] per prompt], steps: [[token per
  // sequence] per step], logits: [Float32Array b*V per step] (with opts.logits), stats}.
  async generate(prompts, maxNew, opts = {}) {
    const m = this.meta, pad = m.pad_token_id;
    if (!Array.isArray(prompts) || !prompts.length || !prompts.every((p) => Array.isArray(p) && p.length)) {
      throw new ValueError("prompts must be a non-empty list of non-empty token lists");
    }
    if (!(Number.isInteger(maxNew) && maxNew >= 1)) throw new ValueError(`maxNew must be a positive integer, got ${maxNew}`);
    for (const [i, p] of prompts.entries()) {
      if (!p.every((t) => Number.isInteger(t) && t >= 0 && t < m.vocab)) throw new ValueError(`prompt ${i} has a token id outside [0, ${m.vocab})`);
    }
    const b = prompts.length, s = Math.max(...prompts.map((p) => p.length));
    const need = s + maxNew - 1;
    if (need > m.max_context) {
      throw new ValueError(`KV cache overflow: a batch whose longest prompt has ${s} tokens plus ${maxNew} new tokens needs ${need} cache positions; max_context is ${m.max_context}`);
    }
    const ids = new Int32Array(b * s).fill(pad), mask = new Int32Array(b * s), pos = new Int32Array(b * s);
    const lengths = prompts.map((p) => p.length);
    prompts.forEach((p, i) => {
      p.forEach((t, j) => { ids[i * s + s - p.length + j] = t; mask[i * s + s - p.length + j] = 1; });
      let c = 0;
      for (let j = 0; j < s; j++) { c += mask[i * s + j]; pos[i * s + j] = Math.max(c - 1, 0); }
    });
    const L = m.layers, row = m.kv_heads * m.head_dim, V = m.vocab;
    const t0 = performance.now();
    const keep = Array.from({ length: 2 * L }, (_, k) => k + 1);
    let cache = [];  // device buffers of this generation: destroyed however it ends
    try {
      const out = await this.prefill.call(m.prefill_entry, [...this.weights, { data: ids, shape: [b, s] },
        { data: mask, shape: [b, s] }, { data: pos, shape: [b, s] }], { keep });
      let logits = out[0].data;
      let cap = 0;
      const grow = (src, srcCap, positions) => {  // cache buffers of capacity >= positions holding src's srcCap positions
        const capNew = Math.min(m.max_context, Math.ceil(positions / m.cache_chunk) * m.cache_chunk);
        const enc = this.prefill.device.createCommandEncoder();
        const next = src.map((old) => {
          const nb = new Buffer(null, [b, capNew, m.kv_heads, m.head_dim], old.dtype, false);
          nb.handle = this.prefill.alloc(nb.nbytes);  // zeros: unwritten positions are masked, and finite
          const rowBytes = row * old.itemsize;
          if (srcCap) for (let i = 0; i < b; i++) enc.copyBufferToBuffer(old.handle, i * srcCap * rowBytes, nb.handle, i * capNew * rowBytes, srcCap * rowBytes);
          return nb;
        });
        this.prefill.device.queue.submit([enc.finish()]);
        for (const old of src) old.handle.destroy();
        cap = capNew;
        return next;
      };
      cache = out.slice(1);  // the prefill's keys and values, kept on the device
      cache = grow(cache, s, s);
      const tPrefill = performance.now() - t0;
      const fullMask = new Int32Array(b * m.max_context).fill(1);
      for (let i = 0; i < b; i++) fullMask.set(mask.subarray(i * s, (i + 1) * s), i * m.max_context);
      const steps = [], allLogits = [];
      const traffic = () => this.decode.uploadedBytes + this.decode.downloadedBytes;
      let tDecode = 0, decodeSteps = 0, stepBytes = 0;
      for (let t = 0; t < maxNew; t++) {
        const tokens = new Int32Array(b);
        for (let i = 0; i < b; i++) {
          let best = logits[i * V], k = 0;
          for (let j = 1; j < V && !Number.isNaN(best); j++) {
            const v = logits[i * V + j];
            if (v > best || Number.isNaN(v)) { best = v; k = j; }
          }
          tokens[i] = k;
        }
        steps.push(Array.from(tokens));
        if (opts.logits) allLogits.push(logits);
        if (opts.onToken) opts.onToken(Array.from(tokens), t);
        if (t + 1 === maxNew) break;
        const t1 = performance.now(), bytes0 = traffic();
        const index = s + t;
        if (index + 1 > cap) cache = grow(cache, cap, index + 1);
        const stepMask = new Int32Array(b * cap);
        for (let i = 0; i < b; i++) stepMask.set(fullMask.subarray(i * m.max_context, i * m.max_context + cap), i * cap);
        const stepPos = Int32Array.from(lengths, (n) => n + t);
        const res = await this.decode.call(m.decode_entry, [...this.weights, { data: tokens, shape: [b, 1] },
          { data: stepMask, shape: [b, cap] }, { data: stepPos, shape: [b, 1] }, { data: Int32Array.of(index), shape: [] },
          ...cache]);
        if (res.slice(1).some((r, k) => r !== cache[k])) throw new Error("the decode step did not update its caches in place");
        logits = res[0].data;
        tDecode += performance.now() - t1;
        decodeSteps += 1;
        stepBytes = traffic() - bytes0;
      }
      const tokens = prompts.map((_, i) => steps.map((st) => st[i]));
      this.lastStats = { batch: b, padded_prompt: s, prefill_ms: tPrefill, decode_steps: decodeSteps, decode_ms: tDecode,
        decode_tokens_per_s: decodeSteps ? (b * decodeSteps) / (tDecode / 1e3) : 0, last_step_transfer_bytes: stepBytes,
        cache_bytes: cache.reduce((a, c) => a + c.nbytes, 0) };
      return { tokens, steps, logits: allLogits, stats: this.lastStats };
    } finally {
      for (const c of cache) c.handle.destroy();
    }
  }
}
