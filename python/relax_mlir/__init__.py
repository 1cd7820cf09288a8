"""relax-mlir: a compiler for dynamic-shape ML programs with first-class symbolic shapes, on MLIR.

    import relax_mlir
    mod = relax_mlir.parse(text)                 # verifies and runs relax-infer-shapes
    exe = relax_mlir.compile(mod, target="cpu")  # one compile serves every value of the symbols
    y = exe(x, w)                                # numpy in, numpy out; shapes checked first
"""
from __future__ import annotations

from typing import Sequence

__version__ = "0.1.0"

DEFAULT_PIPELINE = ("relax-infer-shapes", "relax-legalize", "relax-lower-shapes", "relax-to-upstream")
OPTIMIZE_PIPELINE = ("relax-infer-shapes", "relax-canonicalize", "relax-dispatch-library",
                     "relax-legalize", "relax-fuse-kernels", "relax-dce", "relax-plan-memory", "relax-lower-shapes",
                     "relax-to-upstream")


class CompileError(ValueError):
    """Parsing, verification or compilation failed; the message holds the MLIR diagnostics."""


class Module:
    """A relax module in its own MLIR context (text in, text out)."""

    def __init__(self, session, op):
        self.session = session
        self.op = op

    def __str__(self) -> str:
        with self.session.ctx:
            return self.op.get_asm()

    @property
    def context(self):
        return self.session.ctx


def _session(name: str):
    from relax_mlir.tools.relax_opt import Session

    return Session(name)


def _fail(session, what: str):
    text = "\n".join(d.render() for d in session.diags) or what
    raise CompileError(text)


def parse(text: str, *, source_name: str = "<string>") -> Module:
    """Parse and verify a relax module, and deduce its shapes (so "?" result dims may be left)."""
    from relax_mlir.tools.relax_opt import parse_module, run_pipeline

    s = _session(source_name)
    op = parse_module(s, text)
    if op is None or not run_pipeline(s, op, ["relax-infer-shapes"]):
        _fail(s, "parse failed")
    return Module(s, op)


def run_passes(module: Module | str, passes: Sequence[str]) -> Module:
    """Run a pipeline (relax and upstream pass names) on a module; returns the same module."""
    from relax_mlir.tools.relax_opt import run_pipeline

    if isinstance(module, str):
        module = parse(module)
    if not run_pipeline(module.session, module.op, list(passes)):
        _fail(module.session, "pipeline failed")
    return module


def compile(module: Module | str, target: str = "cpu", *, optimize: bool = True,
            passes: Sequence[str] | None = None, options=None):
    """Compile a relax module; returns an `Executable`."""
    from relax_mlir.transforms import PASSES

    if isinstance(module, str):
        module = parse(module)
    else:
        module = parse(str(module))  # compile never mutates the caller's module
    if passes is None:
        pipeline = OPTIMIZE_PIPELINE if optimize else DEFAULT_PIPELINE
        passes = [p for p in pipeline if p in PASSES]
        if target != "cpu":  # BLAS is a CPU library
            passes = [p for p in passes if p != "relax-dispatch-library"]
    if target not in ("cpu", "vulkan", "cuda"):
        raise CompileError(f"unknown target '{target}' (available: cpu, vulkan, cuda)")
    _check_entries(module)
    run_passes(module, passes)
    try:
        if target == "cpu":
            from relax_mlir.backend.cpu_runtime import build_cpu_executable

            return build_cpu_executable(module, options)
        if target == "vulkan":
            from relax_mlir.runtime.vulkan import compile_vulkan

            return compile_vulkan(module)
        from relax_mlir.runtime.cuda import compile_cuda

        return compile_cuda(module, options)
    except CompileError:
        raise
    except (RuntimeError, ValueError) as e:
        # a backend failure the backend did not diagnose: still a CompileError, never bare
        if target == "cuda" and "needs a CUDA device" in str(e):
            raise
        raise CompileError(f"the {target} backend cannot compile this module: {e}") from e


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


from_jax = None  # replaced by relax_mlir.frontend.jax when jax is importable


def __getattr__(name):
    if name == "CudaModule":  # target="cuda" returns this Executable (kernels as PTX in .ptx)
        from relax_mlir.runtime.cuda import CudaExecutable
        return CudaExecutable
    if name == "from_jax":
        from relax_mlir.frontend.jax import from_jax as f
        return f
    raise AttributeError(name)
