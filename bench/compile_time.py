"""Compile time against program size: a stack of L transformer blocks (examples/models.py, each
layer with its own weights) imported from JAX and compiled for the CPU, for several L; also counts
the IR print/parse calls one compile makes (the text round-trips issue 15 removed).

    .venv/bin/python bench/compile_time.py [--layers 1 3 6 12 24] [--target cpu]
    .venv/bin/python bench/compile_time.py --llm [--layers 1 3 6 12 24] [--kind decode prefill]

Prints one row per L: import time, relax pipeline time, backend time, ops in the imported
module, and the number of parse / print calls on MLIR objects during import + compile.

`--llm`: the realistic Llama of bench/llm.py (transformers' Flax Llama, d=1024, 16 heads / 4 KV
heads, SwiGLU 2816, vocab 32000, max context 2048, f32) exported as its KV-cache decode step and its
prefill; per L: the export, the import, `compile()` (wall and this process's CPU time; the relax
passes and the CPU backend apart), the number of kernels the CPU backend compiles (the same at
every depth once each layer calls the same kernels) and which builds `compile()` made
(one-thread, multi-threaded).
`--llm --phases`: CPU seconds per phase instead: the relax passes, then for each build (made apart,
whichever `compile()` would choose) every CPU backend stage, then "LLVM O3": creating the build's
engines (backend/cpu_engine.py: every piece translated, optimized and compiled on the worker
threads; with RELAX_MLIR_JIT_THREADS=1 one engine's O3 only) and "LLVM codegen": the first lookup
of the entries (one engine's code generation; nothing left with the pieces).
The weights' values do not enter the compile (zeros, not random: allocating them lazily keeps a
24-layer model cheap).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

D = 64  # model width: compile time does not depend on it


def stacked(layers: int):
    """f(x, w_0..w_{6L-1}): `layers` transformer blocks in sequence."""
    from models import transformer_block

    def f(x, *ws):
        for i in range(layers):
            x = transformer_block(x, *ws[6 * i:6 * i + 6])
        return x

    return f


def specs(layers: int):
    import jax
    import jax.numpy as jnp

    s = jax.export.symbolic_shape("s")[0]
    w = [(D,), (D, D), (D, D), (D, D), (D, 4 * D), (4 * D, D)]
    return [jax.ShapeDtypeStruct((s, D), jnp.float32)] + \
        [jax.ShapeDtypeStruct(shape, jnp.float32) for _ in range(layers) for shape in w]


class TextCalls:
    """Counts, while active, the whole-IR text crossings: `Module.parse` / `Operation.parse`
    (text -> IR) and `get_asm` / `str()` of a module or operation (IR -> text), wherever in the
    library they happen. Types and attributes printed or parsed one at a time are not counted."""

    def __init__(self):
        self.counts = {"parse": 0, "print": 0}
        self.saved = []

    def _wrap(self, owner, name: str, kind: str, static: bool = False):
        orig = getattr(owner, name)
        counts = self.counts

        def wrapper(*args, **kwargs):
            counts[kind] += 1
            return orig(*args, **kwargs)

        self.saved.append((owner, name, orig))
        setattr(owner, name, staticmethod(wrapper) if static else wrapper)

    def __enter__(self):
        from mlir import ir

        self._wrap(ir.Module, "parse", "parse", static=True)
        self._wrap(ir.Operation, "parse", "parse", static=True)
        for owner in (ir.Operation, ir.OpView):
            self._wrap(owner, "get_asm", "print")
            self._wrap(owner, "__str__", "print")
        self._wrap(ir.Module, "__str__", "print")
        return self

    def __exit__(self, *exc):
        for owner, name, orig in reversed(self.saved):
            setattr(owner, name, orig)


def op_count(module) -> int:
    if isinstance(module, str):  # older from_jax returned text
        import relax_mlir
        module = relax_mlir.parse(module)
    n = [0]

    def visit(o):
        n[0] += 1
        from mlir import ir
        return ir.WalkResult.ADVANCE

    with module.context:
        module.op.walk(visit)
    return n[0]


def measure(layers: int, target: str, count_calls: bool) -> dict:
    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    t0 = time.perf_counter()
    mod = from_jax(stacked(layers), *specs(layers))
    t1 = time.perf_counter()
    exe = relax_mlir.compile(mod, target=target)
    t2 = time.perf_counter()
    row = {"layers": layers, "import_s": t1 - t0, "compile_s": t2 - t1, "ops": op_count(mod)}
    del exe
    if count_calls:
        with TextCalls() as tc:
            mod = from_jax(stacked(layers), *specs(layers))
            relax_mlir.compile(mod, target=target)
        row.update(tc.counts)
    return row


def llm_exports(layers: int):
    """(prefill, decode) `jax.export.Exported` of bench/llm.py's Llama at `layers` layers."""
    import jax
    import numpy as np
    from transformers import FlaxLlamaForCausalLM, LlamaConfig

    from relax_mlir.llm.model import export, from_hf_flax

    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=layers,
                      num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048)
    model = FlaxLlamaForCausalLM(cfg, _do_init=False)
    shapes = jax.eval_shape(lambda: model.init_weights(jax.random.PRNGKey(0), (1, 1)))
    params = jax.tree.map(lambda a: np.zeros(a.shape, np.float32), shapes)
    return export(from_hf_flax(model, params), 2048)


def measure_llm(layers: int, kind: str) -> dict:
    import relax_mlir
    from relax_mlir.backend import cpu_runtime
    from relax_mlir.frontend.jax import import_exported

    t0 = time.perf_counter()
    prefill, decode = llm_exports(layers)
    t1 = time.perf_counter()
    mod = import_exported(decode if kind == "decode" else prefill)
    t2 = time.perf_counter()
    backend = {"wall": 0.0, "cpu": 0.0}
    build = cpu_runtime.build_cpu_executable

    def timed_build(module, options=None):
        w, c = time.perf_counter(), time.process_time()
        try:
            return build(module, options)
        finally:
            backend["wall"] += time.perf_counter() - w
            backend["cpu"] += time.process_time() - c

    import relax_mlir.targets.cpu as target_cpu
    target_cpu.build_cpu_executable = timed_build
    try:
        c0 = time.process_time()
        t3 = time.perf_counter()
        exe = relax_mlir.compile(mod)
        t4 = time.perf_counter()
        c1 = time.process_time()
    finally:
        target_cpu.build_cpu_executable = build
    run = exe._keepalive[1]
    built = run.built if hasattr(run, "built") else (run.jit1 is not None, run.jitn is not None)  # older runtimes
    builds = "+".join(n for n, b in zip(("1-thread", "threaded"), built) if b)
    from relax_mlir.backend import cpu

    upstream = exe.artifacts["upstream"]
    with upstream.context:
        kernels = len(cpu._kernels(upstream))
    return {"kernels": kernels, "layers": layers, "kind": kind, "export_s": t1 - t0, "import_s": t2 - t1, "compile_s": t4 - t3,
            "compile_cpu_s": c1 - c0, "backend_s": backend["wall"], "backend_cpu_s": backend["cpu"],
            "builds": builds}


class _Stop(Exception):
    """Raised in place of the CPU build: the relax passes alone are timed."""


def phases_llm(layers: int, kind: str) -> dict:
    """CPU seconds per phase: the relax passes of `compile()`, then for the one-thread and the
    multi-threaded build, each made apart, every backend stage, LLVM's translation + O3
    (ExecutionEngine creation) and its code generation (the first lookup)."""
    import collections

    import relax_mlir
    import relax_mlir.targets.cpu as target_cpu
    from relax_mlir.backend import cpu, cpu_runtime
    from relax_mlir.frontend.jax import import_exported

    prefill, decode = llm_exports(layers)
    mod = import_exported(decode if kind == "decode" else prefill)
    kept = {}

    def keep(module, options=None):
        kept["module"], kept["options"] = module, options or cpu.CPUOptions()
        raise _Stop

    c0 = time.process_time()
    target_cpu.build_cpu_executable = keep
    try:
        relax_mlir.compile(mod)
    except _Stop:
        pass
    finally:
        target_cpu.build_cpu_executable = cpu_runtime.build_cpu_executable
    row = {"relax passes": time.process_time() - c0}
    times: dict = collections.defaultdict(float)

    def timed(name, fn):
        def run(*a, **k):
            c = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                times[name] += time.process_time() - c
        return run

    stages, init, lookup = dict(cpu.STAGES), cpu.JitModule.__init__, cpu.JitModule._lookup
    for name, fn in stages.items():
        cpu.STAGES[name] = timed(name, fn)
    cpu.JitModule.__init__ = timed("LLVM O3", init)
    cpu.JitModule._lookup = timed("LLVM codegen", lookup)
    module, options = kept["module"], kept["options"]
    with module.context:
        names = [s.name for s in cpu_runtime.entry_signatures(module.op)]
    try:
        for build, threads in (("1-thread", 1), ("threaded", max(2, options.num_threads))):
            times.clear()
            with module.context:
                upstream = module.op.clone(ip=False)
            cpu_runtime._jit(upstream, cpu.CPUOptions(num_threads=threads), names)
            row[build] = dict(times)
    finally:
        cpu.STAGES.update(stages)
        cpu.JitModule.__init__, cpu.JitModule._lookup = init, lookup
    return row


def main_phases(args) -> None:
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import mlir.ir  # noqa: F401  (before transformers pulls tensorflow in)

    from relax_mlir.backend import cpu

    phases = list(cpu.STAGES) + ["LLVM O3", "LLVM codegen"]
    print(f"# CPU seconds per phase, each build made apart; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    print(f"{'kind':>8} {'layers':>6} {'build':>9} {'relax':>6} " + " ".join(f"{p:>12}" for p in phases)
          + f" {'backend':>8}")
    for kind in args.kind:
        for L in args.layers:
            r = phases_llm(L, kind)
            for build in ("1-thread", "threaded"):
                t = r[build]
                print(f"{kind:>8} {L:>6} {build:>9} {r['relax passes']:>6.2f} "
                      + " ".join(f"{t.get(p, 0.0):>12.2f}" for p in phases)
                      + f" {sum(t.values()):>8.2f}   (load {os.getloadavg()[0]:.2f})", flush=True)


def main_llm(args) -> None:
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import mlir.ir  # noqa: F401  (before transformers pulls tensorflow in)

    print(f"# Llama d=1024, 16/4 heads, SwiGLU 2816, vocab 32000, f32; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    print(f"{'kind':>8} {'layers':>6} {'export s':>9} {'import s':>9} {'compile s':>10} {'cpu s':>7} "
          f"{'backend s':>10} {'backend cpu s':>14} {'kernels':>8}  builds")
    for kind in args.kind:
        for L in args.layers:
            r = measure_llm(L, kind)
            print(f"{kind:>8} {L:>6} {r['export_s']:>9.2f} {r['import_s']:>9.2f} {r['compile_s']:>10.2f} "
                  f"{r['compile_cpu_s']:>7.2f} {r['backend_s']:>10.2f} {r['backend_cpu_s']:>14.2f} {r['kernels']:>8}  {r['builds']}"
                  f"   (load {os.getloadavg()[0]:.2f})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 3, 6, 12, 24])
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--no-count", action="store_true", help="skip the (slower) counting run")
    ap.add_argument("--llm", action="store_true", help="the realistic Llama of bench/llm.py (decode and prefill)")
    ap.add_argument("--phases", action="store_true",
                    help="with --llm: CPU seconds per phase, the one-thread and the threaded build each made apart")
    ap.add_argument("--kind", nargs="+", default=["decode", "prefill"], choices=["decode", "prefill"])
    args = ap.parse_args()
    if args.llm and args.phases:
        main_phases(args)
        return
    if args.llm:
        main_llm(args)
        return
    print(f"# load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores, target {args.target}")
    print(f"{'layers':>6} {'ops':>6} {'import s':>9} {'compile s':>10} {'parse':>6} {'print':>6}")
    for L in args.layers:
        r = measure(L, args.target, not args.no_count)
        print(f"{r['layers']:>6} {r['ops']:>6} {r['import_s']:>9.2f} {r['compile_s']:>10.2f} "
              f"{r.get('parse', '-'):>6} {r.get('print', '-'):>6}", flush=True)


if __name__ == "__main__":
    main()
