"""LLM prefill and decode throughput: relax-mlir vs jax.jit on a Llama-architecture model.

transformers' FlaxLlamaForCausalLM with random weights (default d=1024, 12 layers, 16 heads / 4 KV
heads, SwiGLU 2816, vocab 32000: about 200M parameters, f32), batch 1. relax-mlir compiles the
prefill (symbolic prompt length) and the decode step (symbolic cache length m <= max context)
once each. jax.jit runs the same two functions two ways: recompiling for each prompt length and
cache length ("jax exact"), and with the cache padded to the maximum context behind a mask, as
HF's Flax generate does ("jax padded"). Calls are interleaved (one of each implementation per
round) and the median of the rounds is reported.

    python bench/llm.py [--layers 12] [--d 1024] [--contexts 16,128,512,2048] [--prompts 13,16,50,128]
                        [--package DIR]   (also the saved package, loaded here: threaded and one-thread)
    python bench/llm.py --rss-only [--out-of-process | --package DIR]   (peak RSS, relax-mlir alone; with
                        --package also a serving process: load the package, prefill, decode at max context)
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time

os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("KMP_BLOCKTIME", "0")

import numpy as np  # noqa: E402

import relax_mlir  # noqa: E402,F401


def model_of(args):
    import mlir.ir  # noqa: F401  (before transformers pulls tensorflow in)

    import jax
    from transformers import FlaxLlamaForCausalLM, LlamaConfig

    cfg = LlamaConfig(vocab_size=args.vocab, hidden_size=args.d, intermediate_size=args.ffn,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads, max_position_embeddings=args.max_context)
    model = FlaxLlamaForCausalLM(cfg, _do_init=False)
    shapes = jax.eval_shape(lambda: model.init_weights(jax.random.PRNGKey(0), (1, 1)))
    rng = np.random.default_rng(0)
    # random normal weights (std 0.02, norms 1), drawn with numpy: initialising 200M parameters
    # through flax would take longer than the benchmark
    params = jax.tree.map(lambda s: (np.ones(s.shape, np.float32) if len(s.shape) == 1 else
                                     (rng.standard_normal(s.shape, np.float32) * 0.02)), shapes)
    return model, params


def median(xs):
    return sorted(xs)[len(xs) // 2]


def _rel(x, ref) -> float:
    return float(np.max(np.abs(np.asarray(x) - ref)) / np.max(np.abs(ref)))


def rounds(fns: dict, reps: int) -> dict:
    """Interleaved timing: each round calls every function once; the median per function."""
    times = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--ffn", type=int, default=2816)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--max-context", type=int, default=2048)
    ap.add_argument("--contexts", default="16,128,512,2048")
    # 13 and 50: between tile multiples, where partial register tiles run (16 and 128 are not)
    ap.add_argument("--prompts", default="13,16,50,128")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--before", action="store_true",
                    help="also relax-mlir without the run-time library's pool, interleaved (this session's baseline)")
    ap.add_argument("--rss-only", action="store_true",
                    help="relax-mlir alone (the child process main() starts): compile, prefill, one decode "
                         "step at the maximum context; print the peak RSS")
    ap.add_argument("--out-of-process", action="store_true",
                    help="with --rss-only: compile in a child process and load the artifacts "
                         "(Generator(out_of_process=True))")
    ap.add_argument("--package", metavar="DIR",
                    help="save the compiled generator to DIR (a new directory) and time the loaded package "
                         "too; with --rss-only, measure a serving process that loads it")
    ap.add_argument("--serve", metavar="DIR", help=argparse.SUPPRESS)  # the serving child of --rss-only --package
    args = ap.parse_args()
    if args.serve:
        return rss_serving(args)
    if args.rss_only:
        return rss_alone(args)
    contexts = [int(c) for c in args.contexts.split(",")]
    prompts = [int(p) for p in args.prompts.split(",")]

    import jax

    from relax_mlir.llm import Generator, from_hf_flax

    t0 = time.perf_counter()
    model, params = model_of(args)
    lm = from_hf_flax(model, params)
    del params
    nparams = sum(w.size for w in lm.weights)
    print(f"Llama-architecture: d={args.d}, {args.layers} layers, {args.heads} heads / {args.kv_heads} KV heads, "
          f"ffn {args.ffn}, vocab {args.vocab}: {nparams / 1e6:.0f}M parameters (f32, "
          f"{nparams * 4 / 2**20:.0f} MiB); max context {args.max_context}; batch 1; "
          f"built in {time.perf_counter() - t0:.1f} s", flush=True)
    gen = Generator(lm, args.max_context)
    print(f"relax-mlir: prefill + decode exported and compiled once each in {gen.compile_seconds:.1f} s", flush=True)
    packages = load_package(gen, args.package) if args.package else {}
    before = None
    if args.before:
        # relax-mlir without the run-time library's pool: one-thread OpenBLAS called directly (the
        # generated gemv at one row), MLIR's async runtime; read at compile time, so both live here
        from relax_mlir import knobs

        with knobs.overridden(RELAX_MLIR_BLAS_THREADS="1", RELAX_MLIR_ASYNC_RUNTIME="mlir"):
            before = Generator(lm, args.max_context)
        print(f"relax-mlir before (--before): compiled in {before.compile_seconds:.1f} s", flush=True)
    jprefill = jax.jit(lm.prefill)
    jdecode = jax.jit(lm.decode, donate_argnums=(5, 6))
    jw = [jax.device_put(w) for w in lm.weights]
    L, H, D = lm.layers, lm.kv_heads, lm.head_dim
    rng = np.random.default_rng(1)

    print(f"\n{'prefill':>10s} {'relax-mlir tok/s':>17s} {'jax.jit tok/s':>14s} {'ratio':>6s}  "
          f"(first calls: relax-mlir s, jax.jit compile s)", flush=True)
    for p in prompts:
        ids = rng.integers(1, args.vocab, (1, p)).astype(np.int32)
        mask = np.ones((1, p), np.int32)
        pos = np.arange(p, dtype=np.int32)[None]
        t0 = time.perf_counter()
        ours = gen.prefill_step(ids, mask, pos)
        t1 = time.perf_counter()
        theirs = jprefill(jw, ids, mask, pos)
        jax.block_until_ready(theirs)
        t2 = time.perf_counter()
        err = np.max(np.abs(ours[0] - np.asarray(theirs[0]))) / np.max(np.abs(np.asarray(theirs[0])))
        assert err < 1e-3, err
        fns = {"relax": lambda: gen.prefill_step(ids, mask, pos),
               "jax": lambda: jax.block_until_ready(jprefill(jw, ids, mask, pos))}
        if before is not None:
            before.prefill_step(ids, mask, pos)
            fns["before"] = lambda: before.prefill_step(ids, mask, pos)
        for k, g in packages.items():
            assert _rel(g.prefill_step(ids, mask, pos)[0], ours[0]) < 1e-5, k
            fns[k] = (lambda g: lambda: g.prefill_step(ids, mask, pos))(g)
        t = rounds(fns, args.reps)
        extra = f"  before: {p / t['before']:.1f} tok/s, {t['jax'] / t['before']:.2f}" if before is not None else ""
        extra += "".join(f"  {k}: {p / t[k]:.1f} tok/s, {t['relax'] / t[k]:.2f} of in-process" for k in packages)
        print(f"{p:10d} {p / t['relax']:17.1f} {p / t['jax']:14.1f} {t['jax'] / t['relax']:6.2f}  "
              f"({t1 - t0:.1f}, {t2 - t1:.1f}){extra}", flush=True)

    print(f"\n{'decode':>10s} {'relax-mlir tok/s':>17s} {'jax exact':>10s} {'jax padded':>11s} "
          f"{'vs exact':>9s} {'vs padded':>10s}", flush=True)
    M = args.max_context
    for c in contexts:
        cache = [rng.standard_normal((1, c, H, D), np.float32) for _ in range(2 * L)]
        one = np.array([[7]], np.int32)
        pos = np.array([[c - 1]], np.int32)
        idx = np.int32(c - 1)
        mask_c, mask_m = np.ones((1, c), np.int32), np.ones((1, M), np.int32)
        padded = [jax.device_put(np.pad(b, ((0, 0), (0, M - c), (0, 0), (0, 0)))) for b in cache]
        exact = [jax.device_put(b) for b in cache]
        ours = gen.decode_step(one, mask_c, pos, idx, *cache)
        state = {"exact": exact, "padded": padded}

        def run_jax(kind, m):
            out = jdecode(jw, one, m, pos, idx, state[kind][:L], state[kind][L:])
            jax.block_until_ready(out)
            state[kind] = [*out[1], *out[2]]
            return out
        ref = run_jax("exact", mask_c)
        run_jax("padded", mask_m)
        err = np.max(np.abs(ours[0] - np.asarray(ref[0]))) / np.max(np.abs(np.asarray(ref[0])))
        assert err < 1e-3, err
        fns = {"relax": lambda: gen.decode_step(one, mask_c, pos, idx, *cache),
               "exact": lambda: run_jax("exact", mask_c),
               "padded": lambda: run_jax("padded", mask_m)}
        if before is not None:
            before.decode_step(one, mask_c, pos, idx, *cache)
            fns["before"] = lambda: before.decode_step(one, mask_c, pos, idx, *cache)
        for k, g in packages.items():
            assert _rel(g.decode_step(one, mask_c, pos, idx, *cache)[0], ours[0]) < 1e-5, k
            fns[k] = (lambda g: lambda: g.decode_step(one, mask_c, pos, idx, *cache))(g)
        t = rounds(fns, args.reps)
        extra = (f"  before: {1 / t['before']:.2f} tok/s, {t['exact'] / t['before']:.2f} vs exact"
                 if before is not None else "")
        extra += "".join(f"  {k}: {1 / t[k]:.2f} tok/s, {t['relax'] / t[k]:.2f} of in-process" for k in packages)
        print(f"{c:10d} {1 / t['relax']:17.2f} {1 / t['exact']:10.2f} {1 / t['padded']:11.2f} "
              f"{t['exact'] / t['relax']:9.2f} {t['padded'] / t['relax']:10.2f}{extra}", flush=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cache_mb = 2 * L * M * H * D * 4 / 2**20
    print(f"\npeak RSS of the process (both implementations, jax's weights copied): {rss:.0f} MiB; "
          f"weights {nparams * 4 / 2**20:.0f} MiB, KV cache at max context {cache_mb:.0f} MiB", file=sys.stdout)
    import subprocess
    argv = list(sys.argv[1:])
    if args.package:  # saved above: the serving child loads it
        k = next(i for i, a in enumerate(argv) if a.startswith("--package"))
        del argv[k:k + (1 if "=" in argv[k] else 2)]
    for more in ([], ["--out-of-process"], ["--serve", args.package] if args.package else None):
        if more is None:
            continue
        child = subprocess.run([sys.executable, __file__, "--rss-only", *argv, *more], capture_output=True, text=True)
        print(child.stdout.strip() if child.returncode == 0 else f"child failed: {child.stderr[-2000:]}", flush=True)


def load_package(gen, path: str) -> dict:
    """Save `gen` to `path` and load it twice: as saved (the multi-threaded build for calls past
    the threshold) and with RELAX_MLIR_NUM_THREADS=1 (the one-thread build only)."""
    from relax_mlir import knobs
    from relax_mlir.llm import load

    t0 = time.perf_counter()
    gen.save(path)
    t1 = time.perf_counter()
    out = {"package": load(path)}
    t2 = time.perf_counter()
    with knobs.overridden(RELAX_MLIR_NUM_THREADS="1"):
        out["package 1 thread"] = load(path, verify=False)
    decode = out["package"].decode_exe
    print(f"package: saved to {path} in {t1 - t0:.1f} s (two builds of each function), loaded in {t2 - t1:.1f} s "
          f"(SHA-256 of every file); decode has a multi-threaded build: {decode[decode.main]._native.threaded}",
          flush=True)
    return out


def _mib(key: str) -> float:
    """VmRSS (resident now), VmHWM (the peak so far), RssAnon (private memory) or RssFile (mapped
    files: the pages of shared libraries' code in use, MLIR's and LLVM's among them) of this
    process, MiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":")) / 1024


def _stage(name: str) -> tuple:
    return name, _mib("VmRSS"), _mib("VmHWM"), _mib("RssAnon"), _mib("RssFile")


def _decode_at_max_context(gen) -> tuple[float, float]:
    """One decode step of `gen` with the whole KV cache (max_context positions) written; MiB of
    the weights and of that cache."""
    lm, M = gen.lm, gen.max_context
    cache = [np.ones((1, M, lm.kv_heads, lm.head_dim), lm.cache_dtype) for _ in range(2 * lm.layers)]
    gen.decode_step(np.array([[7]], np.int32), np.ones((1, M), np.int32), np.array([[M - 1]], np.int32),
                    np.int32(M - 1), *cache)
    return sum(w.nbytes for w in lm.weights) / 2**20, sum(c.nbytes for c in cache) / 2**20


def _print_stage(name, now, peak, anon, files) -> None:
    print(f"  after {name:28s} resident {now:6.0f} MiB (peak {peak:6.0f}): private {anon:6.0f}, mapped files "
          f"{files:5.0f}", flush=True)


def rss_alone(args) -> None:
    """Peak RSS of relax-mlir alone: the model (numpy weights), both compiles, a prefill of the
    longest prompt and a decode step at the maximum context (its cache allocated in full); the
    resident and peak MiB after each stage."""
    from relax_mlir.llm import Generator, from_hf_flax

    stages = [_stage("imports")]
    model, params = model_of(args)
    lm = from_hf_flax(model, params)
    del params, model
    stages.append(_stage("model + weights"))
    gen = Generator(lm, args.max_context, out_of_process=args.out_of_process)
    stages.append(_stage(f"compile both ({gen.compile_seconds:.1f} s)"))
    p = max(int(x) for x in args.prompts.split(","))
    ids = np.ones((1, p), np.int32)
    gen.prefill_step(ids, np.ones((1, p), np.int32), np.arange(p, dtype=np.int32)[None])
    stages.append(_stage(f"prefill {p}"))
    M = args.max_context
    weights, kv = _decode_at_max_context(gen)
    stages.append(_stage(f"decode at {M}"))
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent across exec
    rss = _mib("VmHWM")
    for name, now, peak, anon, files in stages:
        _print_stage(name, now, peak, anon, files)
    if args.package:
        t0 = time.perf_counter()
        gen.save(args.package)
        print(f"  saved the package to {args.package} in {time.perf_counter() - t0:.1f} s", flush=True)
    how = "compiled in a grandchild, artifacts loaded" if args.out_of_process else "compile"
    print(f"peak RSS of relax-mlir alone (child process: {how}, prefill {p}, decode at {M}): {rss:.0f} MiB "
          f"= {rss / (weights + kv):.2f}x weights {weights:.0f} MiB + KV cache {kv:.0f} MiB; resident at the end "
          f"{_mib('VmRSS'):.0f} MiB", flush=True)

    if args.package:
        import subprocess

        child = subprocess.run([sys.executable, __file__, "--serve", args.package, "--prompts", args.prompts],
                               capture_output=True, text=True)
        print(child.stdout.strip() if child.returncode == 0 else f"serving child failed: {child.stderr[-2000:]}",
              flush=True)


def rss_serving(args) -> None:
    """Peak RSS of a serving process: load the package (weights memory-mapped), generate from a
    prompt of the longest --prompts length, then a decode step at the maximum context with the
    whole KV cache written; neither jax, transformers nor MLIR is imported here."""
    stages = [_stage("imports (numpy, relax_mlir)")]
    from relax_mlir.llm import load

    gen = load(args.serve)
    stages.append(_stage("load the package"))
    p = max(int(x) for x in args.prompts.split(","))
    M, lm = gen.max_context, gen.lm
    prompt = [int(t) for t in np.random.default_rng(0).integers(1, lm.vocab, p)]
    gen.generate([prompt], 8)
    st = gen.last_stats
    stages.append(_stage(f"prefill {p} (first call) + 7 decode steps"))
    weights, kv = _decode_at_max_context(gen)
    stages.append(_stage(f"decode at {M}"))
    rss = _mib("VmHWM")
    for stage in stages:
        _print_stage(*stage)
    foreign = sorted({m.split(".")[0] for m in sys.modules} & {"jax", "jaxlib", "mlir", "transformers", "flax"})
    print(f"peak RSS serving the package (child process: load, prefill {p} (first call: {p / st['prefill_s']:.1f} "
          f"tok/s), "
          f"decode at {M}): {rss:.0f} MiB = {rss / (weights + kv):.2f}x weights {weights:.0f} MiB + KV cache "
          f"{kv:.0f} MiB; imported of jax/mlir/transformers: {foreign or 'none'}", flush=True)


if __name__ == "__main__":
    main()
