"""The pipeline runner: relax (Python) passes and upstream passes in one `PassManager`.

A pipeline is a list of items: a relax pass name with options (`relax-legalize{ops=relax.add}`), a
named pipeline (`relax-compile-cpu`), or upstream pipeline text (`canonicalize`, `func.func(cse)`).
The registry of relax passes and named pipelines is passed in (`PassRegistry`): the core does not
know which passes exist (`relax_mlir.targets.registry()` assembles them)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field

from mlir import ir
from mlir.passmanager import PassDisplayMode, PassManager

from relax_mlir.core.diagnostics import Diag, suggest
from relax_mlir.core.session import Session, stock_mlir_opt
from relax_mlir.passes import PipelineError, adapter, parse_options, run_pass, split_top


@dataclass
class PassRegistry:
    """Relax passes by CLI name, and named pipelines (name -> (items, one-line description))."""

    passes: dict
    pipelines: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)

    def names(self) -> list[str]:
        return sorted(set(self.passes) | set(self.pipelines))

    def expand(self, items) -> list[str]:
        """Replace each named pipeline by its items (recursively)."""
        out: list[str] = []

        def add(item: str, seen: tuple[str, ...]):
            name = item.split("{", 1)[0].strip()
            if name in self.pipelines:
                if name in seen:
                    raise PipelineError(f"named pipeline '{name}' includes itself")
                if name != item.strip():
                    raise PipelineError(f"named pipeline '{name}' takes no options")
                for sub in self.pipelines[name][0]:
                    add(sub, seen + (name,))
            else:
                out.append(item)

        for item in items:
            add(item, ())
        return out


@dataclass(frozen=True)
class Instrumentation:
    """What to show while a pipeline runs (mlir-opt's --mlir-print-* and --mlir-timing)."""

    print_before_all: bool = False
    print_after_all: bool = False
    print_after_change: bool = False
    print_after_failure: bool = False
    print_module_scope: bool = True
    timing: bool = False          # MLIR's pass timing report (stderr)
    verbose: bool = False         # one line per pass with its wall time (stderr)
    dump_dir: str | None = None   # IR after each pass, one file per pass, under this folder
    disable_threading: bool = False
    dump_pipeline: bool = False   # the pass manager's pipeline before the run (stderr)
    statistics: str | None = None  # MLIR's pass statistics after the run: "list" or "pipeline"

    @property
    def prints_ir(self) -> bool:
        return (self.print_before_all or self.print_after_all or self.print_after_change
                or self.print_after_failure or self.dump_dir is not None)


_UPSTREAM_NAMES: list[str] | None = None


def upstream_pass_names() -> list[str]:
    """The upstream pass names (from `mlir-opt --help`, once), for did-you-mean; [] if unavailable."""
    global _UPSTREAM_NAMES
    if _UPSTREAM_NAMES is None:
        names: list[str] = []
        try:
            out = subprocess.run([stock_mlir_opt(), "--help-list-hidden"], capture_output=True, text=True, timeout=20).stdout
            names = re.findall(r"^ {6}--([a-z][\w-]*)\b", out, re.M)
        except (OSError, subprocess.SubprocessError):
            pass
        _UPSTREAM_NAMES = names
    return _UPSTREAM_NAMES


def _upstream_error(text: str, message: str, registry: PassRegistry) -> str:
    """A one-line diagnostic for a rejected upstream pipeline, with a did-you-mean when one name is
    unknown."""
    import re

    m = re.search(r"'([^']+)' does not refer to a registered pass or pass pipeline", message)
    if m:
        bad = m.group(1)
        if bad in registry.passes or bad in registry.pipelines:
            kind = "module pass" if bad in registry.passes else "named pipeline of module passes"
            return (f"'{bad}' is a relax {kind} and cannot be nested under '{_anchor(text, bad)}': "
                    f"name it at the top level (builtin.module({bad}) or --{bad})")
        hint = suggest(bad, registry.names() + upstream_pass_names())
        return f"unknown pass or pipeline '{bad}'{hint} (relax-opt --list-passes lists the relax passes)"
    m = re.search(r"no such option (\S+)", message)
    if m:
        return f"invalid pass options in '{text}': no such option '{m.group(1)}'"
    first = next((l.strip() for l in message.splitlines() if l.strip()), "")
    return f"invalid upstream pipeline '{text}': {first}"


def _anchor(text: str, name: str) -> str:
    """The op name of the innermost `anchor(...)` around the first `name` in pipeline `text`."""
    m = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)
    depth, i = 0, m.start() if m else 0
    while i > 0:
        i -= 1
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            if depth == 0:
                a = re.search(r"([\w.]+)\s*$", text[:i])
                return a.group(1) if a else "an op"
            depth -= 1
    return "an op"


def build_pipeline(pm: PassManager, items: list[str], registry: PassRegistry, timer=None) -> None:
    """Add pipeline items to `pm`: relax passes through their adapter, runs of upstream text as one
    `pm.add(text)` each. Raises PipelineError (with a did-you-mean) for an unknown name or option."""
    upstream: list[str] = []

    def flush():
        if upstream:
            text = ",".join(upstream)
            try:
                pm.add(text)
            except (ValueError, RuntimeError, ir.MLIRError) as e:
                raise PipelineError(_upstream_error(text, str(e), registry)) from None
            upstream.clear()

    for item in registry.expand(items):
        name = item.split("{", 1)[0].strip()
        if name in registry.passes:
            flush()
            opts = item[len(name):].strip()
            if opts:
                if not (opts.startswith("{") and opts.endswith("}")):
                    raise PipelineError(f"malformed options for {name}: '{opts}'")
                p = parse_options(registry.passes[name], opts[1:-1])
            else:
                p = registry.passes[name]()
            run = adapter(p) if timer is None else timer.wrap(p)
            pm.add(run, name=type(p).__name__, argument=name, description=(type(p).__doc__ or "").strip())
        else:
            upstream.append(item)
    flush()


class PassTimer:
    """Times relax passes one by one (stderr), for `compile(..., verbose=True)`."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.total = 0.0

    def wrap(self, p):
        inner = adapter(p)

        def run(op, pass_):
            t0 = time.perf_counter()
            inner(op, pass_)
            dt = time.perf_counter() - t0
            self.total += dt
            print(f"[relax-mlir] {p.name:32s} {dt * 1000:9.1f} ms", file=self.stream, flush=True)

        return run


def expand_items(items: list[str]) -> list[str]:
    """Split pipeline text items ('a,b{x=1}') into single items."""
    out: list[str] = []
    for item in items:
        out.extend(split_top(item))
    return out


def run_pipeline(session: Session, module: ir.Operation, items: list[str], registry: PassRegistry, *,
                 instrument: Instrumentation | None = None, verify_each: bool = True) -> bool:
    """Verify the module, run the pipeline on it, verify. False (with diagnostics recorded in the
    session) on failure: a bad pipeline, a failing pass or invalid IR."""
    inst = instrument or Instrumentation()
    with session.ctx, ir.Location.unknown():
        verify = registry.passes.get("relax-verify")
        if verify is not None and not run_pass(verify(), module):
            return False
        if not items:
            return True
        pm = PassManager("builtin.module")
        timer = PassTimer() if inst.verbose else None
        try:
            build_pipeline(pm, items, registry, timer)
        except PipelineError as e:
            session.diags.append(Diag("", 0, 0, "error", str(e)))
            return False
        # MLIR's IR printing requires a single-threaded context; when only the printing asked for
        # it, threading is on again after the run (the CPU backend's engines translate their
        # pieces concurrently in this context, backend/cpu_engine.py)
        restore_threading = inst.prints_ir and not inst.disable_threading
        if inst.disable_threading or inst.prints_ir:
            session.ctx.enable_multithreading(False)
        if inst.prints_ir:
            if inst.dump_dir is not None:
                try:
                    os.makedirs(inst.dump_dir, exist_ok=True)
                except OSError as e:
                    session.diags.append(Diag("", 0, 0, "error",
                                              f"cannot create the IR dump folder '{inst.dump_dir}': {e.strerror}"))
                    return False
            pm.enable_ir_printing(print_before_all=inst.print_before_all,
                                  print_after_all=(inst.print_after_all or inst.print_after_change or inst.print_after_failure
                                                   or inst.dump_dir is not None),
                                  print_module_scope=inst.print_module_scope,
                                  print_after_change=inst.print_after_change,
                                  print_after_failure=inst.print_after_failure,
                                  tree_printing_dir_path=inst.dump_dir)
        if inst.dump_pipeline:
            text = str(pm)
            inner = text[text.index("(") + 1:text.rindex(")")] if "(" in text else ""
            print(f"Pass Manager with {len(split_top(inner))} passes:\n{text}\n", file=sys.stderr, flush=True)
        if inst.statistics is not None:
            pm.enable_statistics(PassDisplayMode.LIST if inst.statistics == "list" else PassDisplayMode.PIPELINE)
        if inst.timing:
            pm.enable_timing()
        pm.enable_verifier(verify_each)
        try:
            pm.run(module)
        except ir.MLIRError as e:
            session.add_error_diagnostics(e)
            if not session.has_errors():
                session.diags.append(Diag(session.source_name, 0, 0, "error", "pass pipeline failed"))
            return False
        finally:
            if restore_threading:
                session.ctx.enable_multithreading(True)
        return True
