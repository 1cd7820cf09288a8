"""relax-mlir: a compiler for dynamic-shape ML programs with first-class symbolic shapes, on MLIR.

    import relax_mlir
    mod = relax_mlir.parse(text)                 # verifies and runs relax-infer-shapes
    exe = relax_mlir.compile(mod, target="cpu")  # one compile serves every value of the symbols
    y = exe(x, w)                                # numpy in, numpy out; shapes checked first
"""
from __future__ import annotations

from typing import Sequence

__version__ = "0.1.0"

from relax_mlir import _native

_native.install()  # before anything imports MLIR's libraries (see there)

from relax_mlir.core import forksafe
from relax_mlir.core.diagnostics import CompileError
from relax_mlir.core.module import Module
from relax_mlir.core.pipeline_text import parse_pipeline

# The relax passes of compile(..., target="cpu") with and without optimization (the named
# pipelines relax-compile-cpu and relax-lower; relax_mlir.targets holds every target's).
DEFAULT_PIPELINE = ("relax-infer-shapes", "relax-expand-attention", "relax-legalize", "relax-lower-shapes",
                    "relax-to-upstream")
OPTIMIZE_PIPELINE = ("relax-infer-shapes", "relax-conv-to-matmul", "relax-canonicalize", "relax-fuse-attention",
                     "relax-dispatch-library", "relax-multiversion", "relax-legalize", "relax-fuse-kernels", "relax-dce",
                     "relax-plan-memory", "relax-lower-shapes", "relax-to-upstream")

__all__ = ["CompileError", "Module", "compile", "from_jax", "parse", "run_passes"]


def _session(name: str):
    from relax_mlir.core.session import Session

    return Session(name)


def _fail(session, what: str, start: int = 0):
    """Raise the session's diagnostics from index `start` on (those of this call) as a CompileError."""
    text = "\n".join(d.render() for d in session.diags[start:]) or what
    raise CompileError(text)


def _copy(module: Module) -> Module:
    """A copy of `module` in the same context (cloned through the bindings, not printed)."""
    with module.context:
        return Module(module.session, module.op.clone(ip=False))


def _run(module: Module, passes: Sequence[str], instrument=None) -> bool:
    from relax_mlir.core.pipeline import run_pipeline
    from relax_mlir.targets import registry

    return run_pipeline(module.session, module.op, list(passes), registry(), instrument=instrument)


def parse(text: str, *, source_name: str = "<string>") -> Module:
    """Parse and verify a relax module, and deduce its shapes (so "?" result dims may be left)."""
    from relax_mlir.core.session import parse_module

    s = _session(source_name)
    op = parse_module(s, text)
    m = Module(s, op)
    if op is None or not _run(m, ["relax-infer-shapes"]):
        _fail(s, "parse failed")
    return m


def _pipeline_items(passes, caller: str) -> list[str]:
    """`passes` as a list of pipeline items. A str is one textual pipeline, as MLIR's
    `PassManager.parse` and `mlir-opt --pass-pipeline` take it ('relax-infer-shapes,relax-legalize'
    or 'builtin.module(...)'); a list or tuple holds pipeline items (each may be such text)."""
    if isinstance(passes, str):
        return parse_pipeline(passes)
    if isinstance(passes, (list, tuple)) and all(isinstance(p, str) for p in passes):
        return list(passes)
    raise CompileError(f"{caller}: passes must be a pipeline string or a list of pass names "
                       f"(['relax-infer-shapes', 'relax-legalize']), got {passes!r}")


def run_passes(module: Module | str, passes: Sequence[str] | str) -> Module:
    """Run a pipeline (relax pass names, named pipelines, upstream pass names: a list, or one
    pipeline string) on a module; returns the same module."""
    passes = _pipeline_items(passes, "run_passes()")
    if isinstance(module, str):
        module = parse(module)
    if not _run(module, passes):
        _fail(module.session, "pipeline failed")
    return module


def compile(module: Module | str, target: str = "cpu", *, optimize: bool = True,
            passes: Sequence[str] | None = None, options=None, verbose: bool = False):
    """Compile a relax module (a `Module`, its text, or a `jax.export.Exported`, imported first) for
    `target` ("cpu", "cuda", "vulkan", "webgpu"); returns an `Executable`.

    `options`: the target's options (`CPUOptions`, `GPUOptions`, `SPIRVOptions`, or a dict of their
    fields), checked with the target before any pass runs. `passes` (a list of pass names, or one
    pipeline string as `mlir-opt --pass-pipeline` takes it) replaces the target's named pipeline
    (`relax-compile-<target>`, or `relax-lower` without `optimize`). `verbose=True` (or
    RELAX_MLIR_VERBOSE=1) prints each pass with its time; RELAX_MLIR_DUMP_IR=DIR writes the IR
    after each pass under DIR."""
    with forksafe.compiling():  # os.fork() in another thread waits for it (core/forksafe.py)
        return _compile(module, target, optimize, passes, options, verbose)


def _compile(module, target: str, optimize: bool, passes, options, verbose: bool):
    import sys
    import time

    from relax_mlir import knobs
    from relax_mlir.core.pipeline import Instrumentation
    from relax_mlir.targets import get_target, refuse_cpu_only

    tgt = get_target(target, options)  # unknown target or option: CompileError, before any work
    for name, value in (("optimize", optimize), ("verbose", verbose)):
        if not isinstance(value, bool):
            raise CompileError(f"compile(): {name} must be True or False, got {value!r}")
    if passes is not None:
        passes = _pipeline_items(passes, "compile()")
    verbose = verbose or knobs.verbose()
    try:  # environment settings the pipeline reads: a bad value is named before any pass runs
        knobs.use_library()
    except ValueError as e:
        raise CompileError(str(e)) from None
    t0 = time.perf_counter()
    trees = None
    if isinstance(module, str):
        module = parse(module)
    elif type(module).__name__ == "Exported" and hasattr(module, "mlir_module_serialized"):
        from relax_mlir.frontend.jax import import_exported  # a jax.export.Exported: imported first

        trees = (module.in_tree, module.out_tree)
        try:
            module = import_exported(module)
        except CompileError:  # the importer's refusals (UnsupportedOpError, ...) are CompileErrors
            raise
        except ValueError as e:
            raise CompileError(f"cannot import the jax export: {e}") from e
    elif isinstance(module, Module):
        module = _copy(module)  # compile never mutates the caller's module
    else:
        raise CompileError(f"compile() takes a relax module (relax_mlir.Module, from_jax, import_exported), its "
                           f"text, or a jax.export.Exported; got {type(module).__name__}")
    start = len(module.session.diags)
    if passes is None:
        passes = tgt.pipeline(optimize)
    elif target != "cpu":
        refuse_cpu_only(passes, target)
    _check_entries(module)
    inst = Instrumentation(verbose=verbose, dump_dir=knobs.dump_ir())
    if not _run(module, passes, inst):
        _fail(module.session, "pipeline failed", start)
    t1 = time.perf_counter()
    try:
        exe = tgt.build(module)
    except CompileError:
        raise
    except (RuntimeError, ValueError) as e:
        # a backend failure the backend did not diagnose: still a CompileError, never bare
        if target == "cuda" and "needs a CUDA device" in str(e):
            raise
        raise CompileError(f"the {target} backend cannot compile this module: {e}") from e
    if trees is not None and len(exe.functions) == 1:
        exe.pytree = trees  # exe(params, x) takes and returns the exported function's pytrees
    if verbose:
        t2 = time.perf_counter()
        print(f"[relax-mlir] parse + relax pipeline {t1 - t0:8.3f} s, {target} backend {t2 - t1:8.3f} s, "
              f"total {t2 - t0:8.3f} s", file=sys.stderr, flush=True)
    return exe


def _check_entries(module: Module) -> None:
    """A public function that is not a kernel (no `relax_v.call_tir` names it) is an entry point:
    it must take and return relax types. A builtin `tensor<4xf32>` there has no runtime ABI (the
    CPU ExecutionEngine used to fail with a bare RuntimeError)."""
    from mlir import ir

    with module.context:
        top = [o.operation for o in module.op.regions[0].blocks[0].operations]
        callees: set[str] = set()

        def visit(o):
            if "callee" in o.attributes and isinstance(o.attributes["callee"], ir.FlatSymbolRefAttr):
                callees.add(o.attributes["callee"].value)
            return ir.WalkResult.ADVANCE

        module.op.walk(visit)
        for f in top:
            if f.name != "func.func" or "sym_name" not in f.attributes:
                continue
            name = ir.StringAttr(f.attributes["sym_name"]).value
            vis = f.attributes["sym_visibility"] if "sym_visibility" in f.attributes else None
            if (vis is not None and ir.StringAttr(vis).value != "public") or name in callees \
                    or "relax.kernel" in f.attributes:
                continue
            ft = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
            for what, types in (("argument", ft.inputs), ("result", ft.results)):
                for i, t in enumerate(types):
                    if not str(t).startswith("!relax."):
                        f.location.emit_error(
                            f"'func.func' op @{name}: a public function is an entry point and takes and returns "
                            f"relax types, but its {what} #{i} has type {t} (write !relax.tensor<[...], dtype>, "
                            f"or make a kernel-level function private)")
                        _fail(module.session, f"@{name}: {what} #{i} has type {t}")


def __getattr__(name):
    # Lazy: `relax_mlir.from_jax` and `relax_mlir.frontend` import JAX only when asked for.
    if name == "CudaModule":  # target="cuda" returns this Executable (kernels as PTX in .ptx)
        from relax_mlir.runtime.cuda import CudaExecutable
        return CudaExecutable
    if name == "from_jax":
        from relax_mlir.frontend.jax import from_jax as f
        return f
    if name in ("builder", "frontend", "targets", "runtime", "core", "transforms", "backend", "knobs"):
        import importlib

        mod = importlib.import_module(f"relax_mlir.{name}")
        if name == "frontend":
            importlib.import_module("relax_mlir.frontend.jax")
        return mod
    raise AttributeError(f"module 'relax_mlir' has no attribute '{name}'")
