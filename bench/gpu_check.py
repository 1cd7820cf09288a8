"""On a GPU machine with numpy, CuPy, JAX and a CUDA driver but NO MLIR: load each artifact written
by bench/export_gpu_artifacts.py with `relax_mlir.runtime.load` (CuPy driver), check it against
the stored references at every shape, and time it against jax.jit on the GPU.

Run: bench/gpu_check.sh ARTIFACT_DIR [JSON_OUT]   (or python3 bench/gpu_check.py DIR --json OUT)

LLMs (index.json "llms"): a greedy generation with the prefill and decode artifacts, tokens and
per-step logits against jax.jit's (stored by the export), then decode tokens/s beside jax's own
generation on this machine's default device (from the exported `jax.export` functions).

Times are medians of warm calls, numpy in and numpy out for relax-mlir (host program interpreted
in Python, inputs uploaded and outputs read back every call). jax.jit is timed twice: numpy in
(the same transfers) and device-resident inputs; both at highest matmul precision (fp32 like our
kernels). Exit status 1 when a result is off or mlir got imported.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))


def median_ms(f, reps: int) -> float:
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e3


def check_one(exe, jitted, a, name, n, rtol, atol, t_load) -> dict:
    """Run one model at one shape against its stored reference and time it; returns the row."""
    import jax

    import model_zoo as zoo

    ref = np.load(os.path.join(a.dir, name, f"ref_{n}.npz"))
    args = [ref[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in ref.files))]
    want = [ref[f"out{i}"] for i in range(sum(k.startswith("out") for k in ref.files))]
    t0 = time.perf_counter()
    got = zoo.as_list(exe(*args))
    t_first = time.perf_counter() - t0
    good = len(got) == len(want) and all(
        g.shape == w.shape and np.allclose(g, w, rtol=rtol, atol=atol) for g, w in zip(got, want))
    err = max((float(np.max(np.abs(g - w))) if w.size else 0.0 for g, w in zip(got, want)
               if g.shape == w.shape), default=float("inf"))
    jax_err = max(float(np.max(np.abs(np.asarray(j) - w))) if w.size else 0.0
                  for j, w in zip(zoo.as_list(jitted(*args)), want))
    dev = [jax.device_put(x) for x in args]
    t_ours = median_ms(lambda: exe(*args), a.reps)
    t_jax_np = median_ms(lambda: jax.block_until_ready(jitted(*args)), a.reps)
    t_jax_dev = median_ms(lambda: jax.block_until_ready(jitted(*dev)), a.reps)
    row = {"model": name, "n": n, "ok": good, "max_abs_err": err, "jax_max_abs_err": jax_err,
           "ours_ms": t_ours, "jax_numpy_in_ms": t_jax_np, "jax_device_in_ms": t_jax_dev,
           "ours_first_call_s": t_first, "load_s": t_load}
    print(f"{name:18s} {n:5d} {t_ours:9.3f} {t_jax_np:11.3f} {t_jax_dev:12.3f} {t_ours / t_jax_np:9.2f} "
          f"{err:9.1e} {'yes' if good else 'NO':>3s}", flush=True)
    return row


def _tokens_per_s(stats: dict) -> float:
    return stats["batch"] * stats["decode_steps"] / max(stats["decode_s"], 1e-9)


def check_llm(a, name: str, target: str, rtol: float) -> dict:
    """Generate with the LLM's prefill and decode artifacts (relax_mlir.llm.Generator over the
    loaded executables: no compiler) and compare the tokens and per-step logits with jax.jit's,
    stored by the export (computed on its CPU). Then time a second (warm) generation, and jax's
    own generation on this machine's default device from the serialized `jax.export`s, beside it."""
    from relax_mlir.llm import CausalLM, Generator
    from relax_mlir.runtime import load

    path = os.path.join(a.dir, name)
    with open(os.path.join(path, "llm.json")) as f:
        meta = json.load(f)
    ref = np.load(os.path.join(path, "ref.npz"))
    weights = [ref[f"w{i}"] for i in range(meta["weights"])]
    prompts, n_new, ctx, chunk = meta["prompts"], meta["new_tokens"], meta["max_context"], meta["cache_chunk"]

    def lm(prefill=None, decode=None):
        return CausalLM(meta["name"], prefill, decode, weights, meta["layers"], meta["kv_heads"], meta["head_dim"],
                        meta["vocab"], meta["max_positions"], np.dtype(meta["cache_dtype"]))

    t0 = time.perf_counter()
    exes = (load(os.path.join(path, "prefill")), load(os.path.join(path, "decode")))
    t_load = time.perf_counter() - t0
    gen = Generator(lm(), ctx, target, cache_chunk=chunk, executables=exes)
    t0 = time.perf_counter()
    steps = list(gen.stream(prompts, n_new, logits=True))
    t_first = time.perf_counter() - t0
    tokens = np.stack([t for t, _ in steps])
    logits = np.stack([np.asarray(x) for _, x in steps])
    want_t, want_l = ref["tokens"], ref["logits"]
    same = tokens.shape == want_t.shape and bool(np.array_equal(tokens, want_t))
    rel = float(max(np.max(np.abs(g - w)) / max(float(np.max(np.abs(w))), 1e-30) for g, w in zip(logits, want_l))) \
        if logits.shape == want_l.shape else float("inf")
    gen.generate(prompts, n_new)  # warm
    ours = dict(gen.last_stats)
    row = {"llm": name, "ok": same and rel <= rtol, "tokens_equal": same, "max_rel_logit_err": rel,
           "batch": len(prompts), "prompt_lengths": [len(p) for p in prompts], "new_tokens": n_new,
           "ours_prefill_s": ours["prefill_s"], "ours_decode_tokens_per_s": _tokens_per_s(ours),
           "ours_first_generation_s": t_first, "load_s": t_load}
    if meta.get("jax_export") is True:
        from jax import export as jexport

        fns = []
        for fn in ("prefill", "decode"):
            with open(os.path.join(path, f"jax_{fn}.bin"), "rb") as f:
                fns.append(jexport.deserialize(bytearray(f.read())).call)
        jgen = Generator(lm(*fns), ctx, "jax", cache_chunk=chunk)
        jtokens = np.stack(list(jgen.stream(prompts, n_new)))
        jgen.generate(prompts, n_new)  # warm
        js = dict(jgen.last_stats)
        row.update(jax_tokens_equal=bool(np.array_equal(jtokens, want_t)), jax_prefill_s=js["prefill_s"],
                   jax_decode_tokens_per_s=_tokens_per_s(js))
    else:
        row["jax"] = f"not exported: {meta.get('jax_export')}"
    print(f"{name:18s} batch {row['batch']} prompts {row['prompt_lengths']} {n_new} tokens: tokens equal "
          f"{same}, max rel logit err {rel:.1e}; decode {row['ours_decode_tokens_per_s']:.1f} tokens/s"
          + (f" (jax here: {row['jax_decode_tokens_per_s']:.1f} tokens/s, its tokens equal "
             f"{row['jax_tokens_equal']})" if "jax_decode_tokens_per_s" in row else "")
          + f"; prefill {row['ours_prefill_s'] * 1e3:.1f} ms  {'yes' if row['ok'] else 'NO'}", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--json", default=None)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    with open(os.path.join(a.dir, "index.json")) as f:
        index = json.load(f)

    from relax_mlir.runtime import load
    from relax_mlir.runtime.cuda import CudaUnavailable

    import jax

    import model_zoo as zoo

    jax.config.update("jax_default_matmul_precision", "highest")
    fns = {name: m.fn for name, m in zoo.MODELS.items()}
    rtol, atol = index["rtol"], index["atol"]
    rows, ok = [], True
    print(f"jax devices: {jax.devices()}")
    print(f"{'model':18s} {'n':>5s} {'ours ms':>9s} {'jax(np) ms':>11s} {'jax(dev) ms':>12s} {'ours/jax':>9s} "
          f"{'max|err|':>9s} {'ok':>3s}")
    for m in index["models"]:
        name = m["name"]
        t0 = time.perf_counter()
        exe = load(os.path.join(a.dir, name))
        t_load = time.perf_counter() - t0
        jitted = jax.jit(fns[name])
        for n in m["shapes"]:
            try:
                row = check_one(exe, jitted, a, name, n, rtol, atol, t_load)
            except CudaUnavailable:
                raise
            except Exception as e:  # a failing model must not hide the others
                row = {"model": name, "n": n, "ok": False, "error": f"{type(e).__name__}: {e}"}
                print(f"{name:18s} {n:5d} FAILED {row['error'][:300]}", flush=True)
            ok &= row["ok"]
            rows.append(row)
    for m in index.get("llms", []):
        try:
            row = check_llm(a, m["name"], index.get("target", "cuda"), rtol)
        except CudaUnavailable:
            raise
        except Exception as e:  # reported like a failing model
            row = {"llm": m["name"], "ok": False, "error": f"{type(e).__name__}: {e}"}
            print(f"{m['name']:18s} FAILED {row['error'][:300]}", flush=True)
        ok &= row["ok"]
        rows.append(row)
    mlir_loaded = any(k == "mlir" or k.startswith("mlir.") for k in sys.modules)
    ok &= not mlir_loaded
    print(f"mlir imported: {mlir_loaded}; all results within rtol={rtol} atol={atol}: {ok}")
    out = {"ok": ok, "mlir_imported": mlir_loaded, "rows": rows, "rtol": rtol, "atol": atol,
           "host": {"python": platform.python_version(), "machine": platform.machine(), "jax": jax.__version__,
                    "devices": [str(d) for d in jax.devices()]}}
    try:
        import cupy

        out["host"]["cupy"] = cupy.__version__
        out["host"]["gpu"] = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(errors="replace")
    except Exception as e:  # the check above already ran on CuPy; this is only a label
        out["host"]["cupy"] = f"unknown ({e})"
    path = a.json or os.path.join(a.dir, "gpu_check.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", path)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
