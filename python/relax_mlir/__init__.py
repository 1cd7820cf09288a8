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
    run_passes(module, passes)
    if target == "cpu":
        from relax_mlir.backend.cpu_runtime import build_cpu_executable

        return build_cpu_executable(module, options)
    if target == "vulkan":
        from relax_mlir.runtime.vulkan import compile_vulkan

        return compile_vulkan(module)
    if target == "cuda":
        from relax_mlir.runtime.cuda import compile_cuda

        return compile_cuda(module, options)
    raise CompileError(f"unknown target '{target}' (available: cpu, vulkan, cuda)")


from_jax = None  # replaced by relax_mlir.frontend.jax when jax is importable


def __getattr__(name):
    if name == "CudaModule":  # target="cuda" returns this Executable (kernels as PTX in .ptx)
        from relax_mlir.runtime.cuda import CudaExecutable
        return CudaExecutable
    if name == "from_jax":
        from relax_mlir.frontend.jax import from_jax as f
        return f
    raise AttributeError(name)
