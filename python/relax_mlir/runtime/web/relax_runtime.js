// relax-mlir WebGPU runtime: runs an artifact exported by compile(..., target="webgpu") in a
// browser. An ES module, no build step:
//
//   import { loadArtifact } from "./relax_runtime.js";
//   const exe = await loadArtifact("model/");           // manifest.json, host.json, kernels/*.wgsl
//   const out = await exe.call("main", [{data: Float32Array, shape: [n, 64]}, ...]);
//   // out: [{data, shape, dtype}, ...]
//
// Device-resident tensors: `await exe.toDevice({data, shape})` uploads once and returns a
// `Buffer` that `call` takes in place of {data, shape} (no upload: weights bound once; a donated
// one is written in place on the device and not read back: a KV cache stays on the GPU), and
// `call(name, inputs, {keep: [result indices]})` leaves those results on the device (`Buffer`s).
// A donated parameter's result (the signature's `donate`) is the caller's own input, updated.
//
// It does what the Python runtime does (runtime/executable.py, runtime/hostprog.py,
// runtime/webgpu.py): checks every argument's dtype and shape against the symbolic signature
// and binds the symbols (a `ValueError` naming the argument and dim otherwise), evaluates the
// derived symbols, result shapes and workspace sizes, runs the host program (index arithmetic,
// allocations, views, copies, loops, launches) and reads the results back. A launch binds its
// buffers to bindings 0..B-1 and packs its scalars and the logical grid into one uniform buffer
// at binding B; grids over 65535 workgroups a dimension are folded (the kernel recomputes its
// logical workgroup id). The device is requested with the limits the kernels need (the
// manifest's `webgpu.limits`); an adapter that cannot give them is a clear error.

export class ValueError extends Error {
  constructor(message) { super(message); this.name = "ValueError"; }
}

export class WebGPUError extends Error {
  constructor(message) { super(message); this.name = "WebGPUError"; }
}

// ---------------------------------------------------------------------------------------------
// symbolic dims: the text of relax_mlir.shape.Expr (`2*n + 1`, `floordiv(n, 2)`, `min(a, b)`)
// ---------------------------------------------------------------------------------------------

function floordiv(a, b) { return Math.floor(a / b); }
function pymod(a, b) { return a - b * Math.floor(a / b); }
const CALLS = {
  floordiv, mod: pymod, ceildiv: (a, b) => -Math.floor(-a / b),
  min: (...xs) => Math.min(...xs), max: (...xs) => Math.max(...xs),
};

export function parseExpr(text) {
  const toks = String(text).match(/\s*([A-Za-z_][A-Za-z0-9_]*|\d+|[-+*(),])/g).map((t) => t.trim());
  let i = 0;
  const peek = () => toks[i];
  const next = () => toks[i++];
  function atom() {
    const t = next();
    if (t === "(") { const e = sum(); next(); return e; }
    if (t === "-") { const e = atom(); return (env) => -e(env); }
    if (/^\d+$/.test(t)) { const v = Number(t); return () => v; }
    if (peek() === "(") {
      next();
      const args = [sum()];
      while (peek() === ",") { next(); args.push(sum()); }
      next();
      const f = CALLS[t];
      if (!f) throw new Error(`unknown function ${t} in shape expression ${text}`);
      return (env) => f(...args.map((a) => a(env)));
    }
    return (env) => {
      if (!(t in env)) throw new Error(`symbol ${t} is not bound`);
      return env[t];
    };
  }
  function product() {
    let e = atom();
    while (peek() === "*") { next(); const l = e, r = atom(); e = (env) => l(env) * r(env); }
    return e;
  }
  function sum() {
    let e = product();
    while (peek() === "+" || peek() === "-") {
      const op = next(), l = e, r = product();
      e = op === "+" ? (env) => l(env) + r(env) : (env) => l(env) - r(env);
    }
    return e;
  }
  const e = sum();
  if (i !== toks.length) throw new Error(`cannot parse shape expression ${text}`);
  return e;
}

function dimFn(d) {
  if (d === null) return null;
  if (typeof d === "number") return () => d;
  return parseExpr(d);
}

// ---------------------------------------------------------------------------------------------
// dtypes
// ---------------------------------------------------------------------------------------------

// bf16: its bits (no kernel computes in bf16; the host program moves and describes its buffers)
const ARRAYS = {
  f32: Float32Array, i32: Int32Array, i8: Int8Array, i16: Int16Array, i1: Uint8Array, ui8: Uint8Array,
  ui16: Uint16Array, ui32: Uint32Array, f64: Float64Array, i64: BigInt64Array, bf16: Uint16Array,
};
const ITEMSIZE = { f32: 4, f16: 2, f64: 8, i1: 1, i8: 1, i16: 2, i32: 4, i64: 8, ui8: 1, ui16: 2, ui32: 4, ui64: 8, bf16: 2 };

function prod(shape) { return shape.reduce((a, b) => a * b, 1); }
function round4(n) { return Math.max(4, Math.ceil(n / 4) * 4); }

// ---------------------------------------------------------------------------------------------
// the device
// ---------------------------------------------------------------------------------------------

export async function requestDevice(limits) {
  if (!("gpu" in navigator)) throw new WebGPUError("this browser has no WebGPU (navigator.gpu)");
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new WebGPUError("no WebGPU adapter");
  const requiredLimits = {};
  for (const [k, v] of Object.entries(limits || {})) {
    if (!(k in adapter.limits)) continue;
    if (adapter.limits[k] < v) {
      throw new WebGPUError(`the kernels need ${k} = ${v}, the adapter gives ${adapter.limits[k]}`);
    }
    requiredLimits[k] = v;
  }
  const device = await adapter.requestDevice({ requiredLimits });
  return { adapter, device };
}

export class Buffer {
  constructor(handle, shape, dtype, host) {
    this.handle = handle; this.shape = shape.map(Number); this.dtype = dtype; this.host = host;
  }
  get size() { return prod(this.shape); }
  get nbytes() { return this.size * this.itemsize; }
  get itemsize() { return this.dtype === "index" ? (this.host ? 8 : 4) : ITEMSIZE[this.dtype]; }
  view(shape) {
    if (prod(shape) !== this.size) throw new Error(`a view of shape ${shape} over a buffer of shape ${this.shape}`);
    return new Buffer(this.handle, shape, this.dtype, this.host);
  }
}

function hostArray(dtype, n) {
  return dtype === "index" ? new Float64Array(n) : new (ARRAYS[dtype] || Float64Array)(n);
}

function truncBits(v, bits) {
  if (bits === 1) return (v & 1) !== 0 ? 1 : 0;
  const m = 2 ** bits;
  let r = ((v % m) + m) % m;
  return r >= m / 2 ? r - m : r;
}
function divsi(a, b) { const q = Math.floor(Math.abs(a) / Math.abs(b)); return (a >= 0) === (b >= 0) ? q : -q; }
const FN = {
  addi: (a, b) => a + b, subi: (a, b) => a - b, muli: (a, b) => a * b, divsi, divui: floordiv,
  remsi: (a, b) => a - b * divsi(a, b), remui: pymod, ceildivsi: (a, b) => -Math.floor(-a / b),
  ceildivui: (a, b) => -Math.floor(-a / b), floordivsi: floordiv, maxsi: Math.max, minsi: Math.min,
  maxui: Math.max, minui: Math.min, andi: (a, b) => Number(a) & Number(b), ori: (a, b) => Number(a) | Number(b),
  xori: (a, b) => Number(a) ^ Number(b), shli: (a, b) => a * 2 ** b, shrsi: (a, b) => Math.floor(a / 2 ** b),
  shrui: (a, b) => Math.floor(a / 2 ** b), addf: (a, b) => a + b, subf: (a, b) => a - b, mulf: (a, b) => a * b,
  divf: (a, b) => a / b, maximumf: Math.max, minimumf: Math.min, maxnumf: Math.max, minnumf: Math.min,
  negf: (a) => -a, index_cast: Number, index_castui: Number, extsi: Number, extui: Number, sitofp: Number,
  uitofp: Number, fptosi: Math.trunc, fptoui: Math.trunc, extf: Number, truncf: Math.fround,
  select: (c, a, b) => (c ? a : b),
};
const PRED = {
  eq: (a, b) => a === b, ne: (a, b) => a !== b, slt: (a, b) => a < b, sle: (a, b) => a <= b,
  sgt: (a, b) => a > b, sge: (a, b) => a >= b, ult: (a, b) => a < b, ule: (a, b) => a <= b,
  ugt: (a, b) => a > b, uge: (a, b) => a >= b,
};
function affine(e, vals, nDims) {
  const k = e[0];
  if (k === "c") return e[1];
  if (k === "d") return vals[e[1]];
  if (k === "s") return vals[nDims + e[1]];
  const a = affine(e[1], vals, nDims), b = affine(e[2], vals, nDims);
  if (k === "add") return a + b;
  if (k === "mul") return a * b;
  if (k === "mod") return pymod(a, b);
  if (k === "floordiv") return floordiv(a, b);
  if (k === "ceildiv") return -Math.floor(-a / b);
  throw new Error(`unknown affine expression kind ${k}`);
}

const RETURN = Symbol("return");
const MAX_DIM = 65535;

export function foldGrid(grid) {
  const [gx, gy, gz] = grid;
  const total = gx * gy * gz;
  if (total >= 2 ** 32 || Math.max(gx, gy, gz) >= 2 ** 31) throw new ValueError(`a grid of ${gx}x${gy}x${gz} workgroups is too large for WebGPU`);
  if (Math.max(gx, gy, gz) <= MAX_DIM) return [gx, gy, gz];
  const dx = Math.min(total, MAX_DIM);
  const dy = Math.min(Math.ceil(total / dx), MAX_DIM);
  const dz = Math.ceil(total / (dx * dy));
  if (dz > MAX_DIM) throw new ValueError(`a grid of ${total} workgroups does not fold into 65535^3`);
  return [dx, dy, dz];
}

// ---------------------------------------------------------------------------------------------
// the executable
// ---------------------------------------------------------------------------------------------

export class Executable {
  constructor(manifest, program, wgsl, device) {
    if (manifest.format !== "relax-mlir-webgpu-1") throw new Error(`not a webgpu artifact: ${manifest.format}`);
    this.manifest = manifest;
    this.program = program;
    this.wgsl = wgsl;
    this.device = device;
    this.kernels = manifest.webgpu.kernels;
    this.entries = Object.fromEntries(manifest.entries.map((e) => [e.name, e]));
    this.pipelines = new Map();
    this.globals = new Map();
    this.encoder = null;
    this.launches = 0;
    this.uploadedBytes = 0;  // host -> device traffic, and back (what a caller keeps on the device saves)
    this.downloadedBytes = 0;
    this.usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  }

  // Compile every WGSL module and pipeline; the list of errors (empty when all are accepted).
  async validate() {
    const errors = [];
    for (const [name, info] of Object.entries(this.kernels)) {
      this.device.pushErrorScope("validation");
      const module = this.device.createShaderModule({ code: this.wgsl[name] });
      const ci = await module.getCompilationInfo();
      for (const m of ci.messages) {
        if (m.type === "error") errors.push(`${name}:${m.lineNum}:${m.linePos}: ${m.message}`);
      }
      const pipe = this.device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: info.kernel } });
      const err = await this.device.popErrorScope();
      if (err) errors.push(`${name}: ${err.message}`);
      else this.pipelines.set(name, pipe);
    }
    return errors;
  }

  pipeline(module) {
    let p = this.pipelines.get(module);
    if (!p) {
      const code = this.wgsl[module];
      if (code === undefined) throw new Error(`no WGSL for gpu.module @${module}`);
      const sm = this.device.createShaderModule({ code });
      p = this.device.createComputePipeline({ layout: "auto", compute: { module: sm, entryPoint: this.kernels[module].kernel } });
      this.pipelines.set(module, p);
    }
    return p;
  }

  flush() {
    if (this.encoder) {
      this.device.queue.submit([this.encoder.finish()]);
      this.encoder = null;
    }
  }

  enc() {
    if (!this.encoder) this.encoder = this.device.createCommandEncoder();
    return this.encoder;
  }

  alloc(nbytes) {
    const max = this.device.limits.maxStorageBufferBindingSize;
    if (nbytes > max) throw new ValueError(`a device buffer of ${nbytes} bytes is over the storage binding limit (${max})`);
    return this.device.createBuffer({ size: round4(nbytes), usage: this.usage });
  }

  upload(handle, bytes) {
    this.flush();
    let b = bytes;
    if (b.byteLength % 4) { const p = new Uint8Array(round4(b.byteLength)); p.set(b); b = p; }
    this.uploadedBytes += b.byteLength;
    this.device.queue.writeBuffer(handle, 0, b.buffer, b.byteOffset, b.byteLength);
  }

  async download(handle, nbytes) {
    const staging = this.device.createBuffer({ size: round4(nbytes), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.downloadedBytes += nbytes;
    this.enc().copyBufferToBuffer(handle, 0, staging, 0, round4(nbytes));
    this.flush();
    await staging.mapAsync(GPUMapMode.READ);
    const out = new Uint8Array(staging.getMappedRange().slice(0, nbytes));
    staging.unmap();
    staging.destroy();
    return out;
  }

  launch(ins, env) {
    const grid = ins.grid.map((i) => Number(env[i]));
    const block = ins.block.map((i) => Number(env[i]));
    if (Math.min(...grid) <= 0 || Math.min(...block) <= 0) return;
    const info = this.kernels[ins.module];
    if (block.join() !== info.workgroup_size.join()) {
      throw new Error(`@${ins.module} launched with workgroup ${block}, compiled for ${info.workgroup_size}`);
    }
    const entries = [], scalars = [];
    ins.abi.forEach((abi, k) => {
      const v = env[ins.args[k]];
      if (abi.kind === "buffer") {
        if (!(v instanceof Buffer) || v.host) throw new Error(`@${ins.module} got a host value for a buffer`);
        if (v.size >= 2 ** 31) throw new ValueError(`a buffer of ${v.size} elements is too large for WebGPU kernels`);
        entries.push({ binding: entries.length, resource: { buffer: v.handle, offset: 0, size: round4(v.nbytes) } });
      } else scalars.push(v);
    });
    const fields = info.uniform_fields;
    const vals = [...scalars, ...grid];
    if (vals.length !== fields.length) throw new Error(`@${ins.module}: ${vals.length} uniform values for ${fields.length} fields`);
    const size = Math.ceil((4 * fields.length) / 16) * 16;
    const ubuf = this.device.createBuffer({ size, usage: GPUBufferUsage.UNIFORM, mappedAtCreation: true });
    const dv = new DataView(ubuf.getMappedRange());
    fields.forEach((t, k) => {
      const v = vals[k];
      if (t === "f32") { dv.setFloat32(4 * k, Number(v), true); return; }
      const n = typeof v === "boolean" ? Number(v) : Number(v);
      const [lo, hi] = t === "u32" ? [0, 2 ** 32] : [-(2 ** 31), 2 ** 31];
      if (!(n >= lo && n < hi)) throw new ValueError(`a kernel index argument ${n} does not fit in 32 bits (sizes must stay below 2^31)`);
      if (t === "u32") dv.setUint32(4 * k, n, true); else dv.setInt32(4 * k, n, true);
    });
    ubuf.unmap();
    const pipe = this.pipeline(ins.module);
    entries.push({ binding: entries.length, resource: { buffer: ubuf } });
    const bg = this.device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries });
    const pass = this.enc().beginComputePass();
    pass.setPipeline(pipe);
    pass.setBindGroup(0, bg);
    const [dx, dy, dz] = foldGrid(grid);
    pass.dispatchWorkgroups(dx, dy, dz);
    pass.end();
    this.launches += 1;
  }

  async read(b) {
    if (b.host) return b.handle;
    const bytes = await this.download(b.handle, b.nbytes);
    return typedOf(b.dtype, bytes.buffer, b.size, false);
  }

  global(name, host) {
    const g = this.program.globals[name];
    const raw = Uint8Array.from(atob(g.data), (c) => c.charCodeAt(0));
    if (host) {
      const data = g.dtype === "index"
        ? Float64Array.from(new BigInt64Array(raw.buffer), Number) : typedOf(g.dtype, raw.buffer, prod(g.shape), true).slice();
      return new Buffer(data, g.shape, g.dtype, true);
    }
    let hit = this.globals.get(name);
    if (!hit) {
      let bytes = raw;
      if (g.dtype === "index") bytes = new Uint8Array(Int32Array.from(new BigInt64Array(raw.buffer), Number).buffer);
      hit = new Buffer(this.alloc(bytes.byteLength), g.shape, g.dtype, false);
      if (bytes.byteLength) this.upload(hit.handle, bytes);
      this.globals.set(name, hit);
    }
    return hit;
  }

  shape(stat, dyn, env) {
    let k = 0;
    return stat.map((s) => (s === null ? Number(env[dyn[k++]]) : s));
  }

  async block(body, env, err) {
    for (const ins of body) {
      const r = await this.step(ins, env, err);
      if (r === RETURN) return RETURN;
      if (ins.op === "yield" || ins.op === "condition") return r;
    }
    return null;
  }

  async step(ins, env, err) {  // one host instruction (runtime/hostprog.py's format)
    const out = ins.out;
    switch (ins.op) {
      case "launch": this.launch(ins, env); return null;
      case "const": env[out] = ins.value; return null;
      case "arith": {
        const a = ins.in.map((i) => env[i]);
        if (ins.fn === "cmpi") env[out] = PRED[ins.pred](Number(a[0]), Number(a[1]));
        else if (ins.fn === "trunci") env[out] = truncBits(Number(a[0]), ins.bits);
        else if (!(ins.fn in FN)) throw new Error(`unknown host arith ${ins.fn}`);
        else env[out] = FN[ins.fn](...a);
        return null;
      }
      case "affine": {
        const vals = ins.in.map((i) => env[i]);
        const rs = ins.exprs.map((x) => affine(x, vals, ins.n_dims));
        env[out] = ins.fn === "apply" ? rs[0] : ins.fn === "min" ? Math.min(...rs) : Math.max(...rs);
        return null;
      }
      case "dim": env[out] = env[ins.src].shape[env[ins.index]]; return null;
      case "alloc": {
        const shape = this.shape(ins.shape, ins.dyn, env);
        if (ins.host) env[out] = new Buffer(hostArray(ins.dtype, prod(shape)), shape, ins.dtype, true);
        else {
          const b = new Buffer(null, shape, ins.dtype, false);
          b.handle = this.alloc(b.nbytes);
          env[out] = b;
        }
        return null;
      }
      case "global": env[out] = this.global(ins.name, ins.host); return null;
      case "view": env[out] = env[ins.src].view(this.shape(ins.shape, ins.dyn, env)); return null;
      case "byteview": {
        const block = env[ins.src];
        const shape = this.shape(ins.shape, ins.dyn, env);
        const v = new Buffer(null, shape, ins.dtype, block.host);
        const shift = Number(env[ins.shift]);
        if (shift !== 0 || v.nbytes > block.nbytes) throw new Error(`a view of ${v.nbytes} bytes at ${shift} over ${block.nbytes}`);
        if (block.host) throw new Error("a byte view of a host block");
        v.handle = block.handle;
        env[out] = v;
        return null;
      }
      case "collapse": {
        const b = env[ins.src];
        env[out] = b.view(ins.groups.map((g) => g.reduce((n, d) => n * b.shape[d], 1)));
        return null;
      }
      case "reshape": {
        const shape = Array.from(await this.read(env[ins.shape_buf]), Number);
        env[out] = env[ins.src].view(shape);
        return null;
      }
      case "alias": env[out] = env[ins.src]; return null;
      case "copy": await this.copy(env[ins.src], env[ins.dst]); return null;
      case "load": {
        const b = env[ins.src];
        const data = await this.read(b);
        env[out] = Number(data[flatIndex(b.shape, ins.idx.map((i) => env[i]))]);
        return null;
      }
      case "store": {
        const b = env[ins.dst];
        const at = flatIndex(b.shape, ins.idx.map((i) => env[i]));
        if (b.host) b.handle[at] = env[ins.value];
        else {
          const data = (await this.read(b)).slice();
          data[at] = env[ins.value];
          this.upload(b.handle, new Uint8Array(data.buffer));
        }
        return null;
      }
      case "error": err[0] = env[ins.value]; return null;
      case "free": return null;
      case "if": {
        const r = await this.block(env[ins.cond] ? ins.then : ins.else, env, err);
        if (r === RETURN) return RETURN;
        (r || []).forEach((v, k) => { env[ins.out[k]] = v; });
        return null;
      }
      case "for": {
        let vals = ins.init.map((i) => env[i]);
        for (let i = env[ins.lb]; i < env[ins.ub]; i += env[ins.step]) {
          env[ins.iv] = i;
          ins.iter.forEach((k, j) => { env[k] = vals[j]; });
          const r = await this.block(ins.body, env, err);
          if (r === RETURN) return RETURN;
          vals = r || [];
        }
        ins.out.forEach((o, j) => { env[o] = vals[j]; });
        return null;
      }
      case "while": {
        let vals = ins.init.map((i) => env[i]);
        for (;;) {
          ins.before_args.forEach((k, j) => { env[k] = vals[j]; });
          const r = await this.block(ins.before, env, err);
          if (r === RETURN) return RETURN;
          if (!r.go) { vals = r.vals; break; }
          ins.after_args.forEach((k, j) => { env[k] = r.vals[j]; });
          const y = await this.block(ins.after, env, err);
          if (y === RETURN) return RETURN;
          vals = y || [];
        }
        ins.out.forEach((o, j) => { env[o] = vals[j]; });
        return null;
      }
      case "condition": return { go: Boolean(env[ins.cond]), vals: ins.in.map((i) => env[i]) };
      case "switch": {
        const k = ins.cases.indexOf(Number(env[ins.arg]));
        const r = await this.block(k >= 0 ? ins.regions[k] : ins.default, env, err);
        if (r === RETURN) return RETURN;
        (r || []).forEach((v, j) => { env[ins.out[j]] = v; });
        return null;
      }
      case "yield": return ins.in.map((i) => env[i]);
      case "return": return RETURN;
      default: throw new Error(`unknown host instruction ${ins.op}`);
    }
  }

  async copy(src, dst) {
    if (src.nbytes !== dst.nbytes) throw new Error(`memref.copy between ${src.nbytes} and ${dst.nbytes} bytes`);
    if (!src.nbytes) return;
    if (!src.host && !dst.host && src.handle === dst.handle) return;  // onto itself (views start at byte 0)
    if (src.host && dst.host) dst.handle.set(src.handle);
    else if (dst.host) dst.handle.set(await this.read(src));
    else if (src.host) this.upload(dst.handle, new Uint8Array(deviceBytes(src)));
    else this.enc().copyBufferToBuffer(src.handle, 0, dst.handle, 0, round4(src.nbytes));
  }

  // A device-resident copy of {data: TypedArray, shape} (dtype from the array, or `dtype`).
  toDevice(a, dtype = null) {
    const dt = dtype || Object.keys(ARRAYS).find((k) => a.data instanceof ARRAYS[k] && k !== "i1" && k !== "ui8");
    if (!dt || !(a.data instanceof ARRAYS[dt])) throw new ValueError(`toDevice: unsupported array ${a.data.constructor.name}`);
    if (prod(a.shape) !== a.data.length) throw new ValueError(`toDevice: ${a.data.length} elements for shape [${a.shape}]`);
    const b = new Buffer(null, a.shape, dt, false);
    b.handle = this.alloc(b.nbytes);
    if (b.nbytes) this.upload(b.handle, new Uint8Array(a.data.buffer, a.data.byteOffset, b.nbytes));
    return b;
  }

  // Call entry `name` with inputs [{data: TypedArray, shape} | device Buffer]: [{data, shape,
  // dtype} | Buffer] results (`opts.keep`: result indices left on the device).
  async call(name, inputs, opts = {}) {
    const sig = this.entries[name];
    if (!sig) throw new ValueError(`no entry @${name}`);
    const prog = this.program.entries[name];
    if (inputs.length !== sig.params.length) {
      throw new ValueError(`@${name} takes ${sig.params.length} arguments, got ${inputs.length}`);
    }
    // dtypes, ranks, symbols, every dim, bounds
    const env = {}, where = {};
    sig.params.forEach((p, i) => {
      const a = inputs[i];
      const want = ARRAYS[p.dtype];
      if (a instanceof Buffer) {
        if (a.host || a.dtype !== p.dtype) {
          throw new ValueError(`@${name}: ${sig.arg_names[i]} must hold ${p.dtype}, got a ${a.host ? "host" : a.dtype} buffer`);
        }
      } else if (want && !(a.data instanceof want)) {
        throw new ValueError(`@${name}: ${sig.arg_names[i]} must hold ${p.dtype} (a ${want.name}), got ${a.data.constructor.name}`);
      }
      if (a.shape.length !== p.dims.length) {
        throw new ValueError(`@${name}: ${sig.arg_names[i]} has rank ${a.shape.length}, the signature's is ${p.dims.length}`);
      }
      if (!(a instanceof Buffer) && prod(a.shape) !== a.data.length) {
        throw new ValueError(`@${name}: ${sig.arg_names[i]} has ${a.data.length} elements for shape [${a.shape}]`);
      }
      p.dims.forEach((d, j) => {
        if (typeof d === "string" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(d) && !(d in env)) {
          env[d] = a.shape[j];
          where[d] = `${sig.arg_names[i]} dim ${j}`;
        }
      });
    });
    sig.params.forEach((p, i) => {
      p.dims.forEach((d, j) => {
        if (d === null) return;
        const want = dimFn(d)(env);
        if (inputs[i].shape[j] !== want) {
          throw new ValueError(`@${name}: ${sig.arg_names[i]} has shape [${inputs[i].shape}], but dim ${j} must be ${d} (= ${want})`);
        }
      });
    });
    // derived symbols (k of an argument dim 4*k) first: their bounds are checked too
    for (const [s, e] of Object.entries(sig.derived || {})) {
      env[s] = parseExpr(e)(env);
      where[s] = e;
    }
    for (const [s, lb] of Object.entries(sig.lower || {})) {
      if (s in env && env[s] < lb) throw new ValueError(`@${name}: symbol ${s} = ${env[s]} (from ${where[s]}) is below its lower bound ${lb}`);
    }
    for (const [s, ub] of Object.entries(sig.upper || {})) {
      if (s in env && env[s] > ub) throw new ValueError(`@${name}: symbol ${s} = ${env[s]} (from ${where[s]}) exceeds its upper bound ${ub}`);
    }
    const outShapes = sig.results.map((r) => r.dims.map((d) => {
      if (d === null) throw new ValueError(`@${name}: a result has unknown ('?') dims`);
      return dimFn(d)(env);
    }));
    const wsSizes = (sig.workspace || []).map((w) => Math.max(parseExpr(w)(env), 1));
    // the host program's arguments: inputs, outputs, workspace blocks, the error slot
    const err = new Int32Array(1);
    const donor = {};  // result -> the donated parameter that holds it
    for (const [p, r] of Object.entries(sig.donate || {})) donor[r] = Number(p);
    const keep = new Set(opts.keep || []);
    const arrays = [
      ...inputs.map((a, i) => (a instanceof Buffer ? { dev: a, shape: a.shape, dtype: a.dtype }
        : { data: a.data, shape: a.shape, dtype: sig.params[i].dtype })),
      ...outShapes.map((s, r) => ({ data: null, shape: s, dtype: sig.results[r].dtype })),
      ...wsSizes.map((n) => ({ data: null, shape: [n], dtype: "i8" })),
      { data: err, shape: [1], dtype: "i32" },
    ];
    if (arrays.length !== prog.args.length) throw new Error(`@${name} takes ${prog.args.length} buffers, got ${arrays.length}`);
    const penv = {}, down = [];
    const nIn = prog.n_in, nOut = prog.n_out;
    const outBufs = [];
    arrays.forEach((a, i) => {
      const spec = prog.args[i];
      if (a.dev) {  // a device-resident input: used in place, never uploaded nor read back
        if (spec.host) throw new ValueError(`@${name}: ${sig.arg_names[i]} is read on the host: pass its data, not a device buffer`);
        penv[spec.id] = a.dev;
        return;
      }
      if (spec.host) {
        const data = a.data || hostArray(a.dtype, prod(a.shape));
        a.data = data;
        penv[spec.id] = new Buffer(data, a.shape, a.dtype, true);
        return;
      }
      const b = new Buffer(null, a.shape, a.dtype, false);
      b.handle = this.alloc(b.nbytes);
      if ((i < nIn || i === arrays.length - 1) && b.nbytes) this.upload(b.handle, new Uint8Array(a.data.buffer, a.data.byteOffset, b.nbytes));
      const r = i - nIn;
      if (r >= 0 && r < nOut) outBufs[r] = b;
      const wanted = r >= 0 && r < nOut && !(r in donor) && !keep.has(r);  // a donated result lives in its input
      if (wanted || i === arrays.length - 1 || (prog.donated || []).includes(i)) down.push([b, a, i]);
      penv[spec.id] = b;
    });
    await this.block(prog.body, penv, err);
    const results = arrays.slice(nIn, nIn + nOut);
    for (const [b, a] of down) {
      if (!b.nbytes) { a.data = a.data || hostArray(a.dtype, 0); continue; }
      const bytes = await this.download(b.handle, b.nbytes);
      if (a.data) new Uint8Array(a.data.buffer, a.data.byteOffset, b.nbytes).set(bytes);
      else a.data = typedOf(a.dtype, bytes.buffer, prod(a.shape), true);
    }
    this.flush();
    arrays.forEach((a, i) => {
      const r = i - nIn;
      const skipped = a.dev || (r >= 0 && r < nOut && (r in donor || (keep.has(r) && outBufs[r])));
      if (!a.data && !skipped) a.data = hostArray(a.dtype, prod(a.shape));
    });
    const code = err[0];
    if (code) {
      const msg = code > 0 && code <= sig.messages.length ? sig.messages[code - 1] : `check ${code}`;
      throw new ValueError(`@${name}: shape check failed: ${msg}`);
    }
    return results.map((a, r) => {
      if (r in donor) {
        const src = inputs[donor[r]];
        return src instanceof Buffer ? src : { data: src.data, shape: a.shape, dtype: a.dtype };
      }
      if (keep.has(r) && outBufs[r]) return outBufs[r];
      return { data: a.data, shape: a.shape, dtype: a.dtype };
    });
  }
}

function typedOf(dtype, buf, n, host) {
  if (dtype === "index") return host ? new Float64Array(buf, 0, n) : Float64Array.from(new Int32Array(buf, 0, n));
  const T = ARRAYS[dtype];
  if (!T) throw new Error(`unsupported dtype ${dtype} in the browser runtime`);
  return new T(buf, 0, n);
}

function deviceBytes(b) {
  if (b.dtype === "index") return Int32Array.from(b.handle, Number).buffer;
  return b.handle.buffer.slice(b.handle.byteOffset, b.handle.byteOffset + b.nbytes);
}

function flatIndex(shape, idx) {
  let k = 0;
  shape.forEach((s, j) => { k = k * s + Number(idx[j]); });
  return k;
}

// JSON as Python's json module writes it: the bare tokens Infinity, -Infinity and NaN (the
// host program's non-finite constants) are numbers here too.
const NONFINITE = { Infinity: Infinity, "-Infinity": -Infinity, NaN: NaN };
export function parsePythonJSON(text) {
  let out = "", i = 0, found = false;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {  // a string: copied as is
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
      continue;
    }
    const m = /^(-Infinity|Infinity|NaN)/.exec(text.slice(i, i + 9));
    if (m) { out += `"\\u0000${m[1]}"`; i += m[1].length; found = true; continue; }
    out += c;
    i += 1;
  }
  if (!found) return JSON.parse(text);
  return JSON.parse(out, (k, v) => (typeof v === "string" && v[0] === "\u0000" ? NONFINITE[v.slice(1)] : v));
}

async function fetchOk(url, kind) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return kind === "json" ? parsePythonJSON(await r.text()) : r.text();
}

// Load an exported artifact from `base` (a URL ending in "/"); `device` optional.
export async function loadArtifact(base, device = null) {
  const manifest = await fetchOk(base + "manifest.json", "json");
  const program = await fetchOk(base + (manifest.host_program || "host.json"), "json");
  const wgsl = {};
  await Promise.all(Object.entries(manifest.kernels).map(async ([m, rel]) => { wgsl[m] = await fetchOk(base + rel, "text"); }));
  if (!device) device = (await requestDevice(manifest.webgpu.limits)).device;
  return new Executable(manifest, program, wgsl, device);
}

// A typed array of `dtype` over the bytes of `buffer` (an ArrayBuffer), e.g. from fetch().
export function fromBytes(dtype, buffer) {
  const T = ARRAYS[dtype];
  if (!T) throw new Error(`unsupported dtype ${dtype}`);
  return new T(buffer);
}

// The bytes of a typed array as base64 (to hand results to a test driver exactly).
export function toBase64(data) {
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}
