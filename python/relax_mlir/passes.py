"""Pass and pattern bases, and the adapters to upstream MLIR's PassManager and RewritePatternSet."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mlir import ir

from relax_mlir import knobs
from relax_mlir.core.diagnostics import suggest
from relax_mlir.core.pipeline_text import parse_pipeline, split_top


class PassError(Exception):
    """A pass failure located at an operation; the driver reports it as an MLIR diagnostic."""

    def __init__(self, op, message: str):
        super().__init__(message)
        self.op = op
        self.message = message


@dataclass(frozen=True)
class ModulePass:
    """A pass over a whole `builtin.module`. Dataclass fields are its options (`name{opt=v}`)."""

    name: ClassVar[str] = ""

    def run(self, module: ir.Operation) -> None:
        raise NotImplementedError

    def validate(self) -> None:
        """Check the options before any pass runs; raise PipelineError for a bad one."""


# --- running passes ----------------------------------------------------------------------------

def emit_error(op, message: str) -> None:
    """Report `message` as an MLIR error diagnostic at `op`'s location."""
    loc = op.location if op is not None else ir.Location.unknown()
    loc.emit_error(message)


def where(op) -> str:
    """`file:line:col` of an op's location (its printed location if it has no file)."""
    loc = op.location
    try:
        if loc.is_a_file():
            return f"{loc.filename}:{loc.start_line}:{loc.start_col}"
    except (AttributeError, RuntimeError, ValueError):
        pass
    return str(loc)


def run_pass(p: ModulePass, module: ir.Operation, pass_=None) -> bool:
    """Run one relax pass; report a PassError as a diagnostic. Returns False on failure."""
    try:
        p.run(module.operation if hasattr(module, "operation") else module)
        return True
    except PassError as e:
        emit_error(e.op, e.message)
    except RecursionError:
        emit_error(module, f"{p.name}: input too deeply nested")
    except Exception as e:  # an internal error still becomes a located diagnostic, not a traceback
        import traceback

        if knobs.debug():
            traceback.print_exc()
        emit_error(module, f"internal error in {p.name}: {type(e).__name__}: {e}")
    if pass_ is not None:
        pass_.signal_pass_failure()
    return False


def adapter(p: ModulePass):
    """The callable that upstream `PassManager.add` runs."""

    def run(op, pass_):
        run_pass(p, op, pass_)

    return run


# --- pipeline strings (split_top, parse_pipeline: core/pipeline_text.py) -----------------------

class PipelineError(ValueError):
    """A pipeline string names an unknown pass or option, or gives an option a bad value."""


def option_docs(cls) -> dict[str, str]:
    """{option: the comment after its field} for a pass class (read from its source, for
    `relax-opt --list-passes`)."""
    import dataclasses
    import inspect
    import re

    names = {f.name for f in dataclasses.fields(cls)}
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        try:
            lines, _ = inspect.getsourcelines(klass)
        except (OSError, TypeError):
            continue
        for line in lines:
            m = re.match(r"\s+(\w+)\s*:[^#]*#\s*(.*)$", line)
            if m and m.group(1) in names:
                docs[m.group(1)] = m.group(2).strip()
    return docs


def _type_name(f) -> str:
    return f.type if isinstance(f.type, str) else f.type.__name__


def parse_options(cls, text: str) -> ModulePass:
    """`name{a=1 b=true}` options -> an instance of the pass class (validated by its `validate`)."""
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for item in split_top(text, " "):
        if "=" not in item:
            raise PipelineError(f"option '{item}' of {cls.name} must be key=value")
        k, v = item.split("=", 1)
        if k not in fields:
            raise PipelineError(f"{cls.name} has no option '{k}'{suggest(k, fields)} "
                                f"(options: {', '.join(fields) or 'none'})")
        ty = _type_name(fields[k])
        if ty == "bool":
            if v not in ("true", "false", "1", "0"):
                raise PipelineError(f"option {k} of {cls.name} takes true or false, got '{v}'")
            kwargs[k] = v in ("true", "1")
        elif ty == "int":
            try:
                kwargs[k] = int(v)
            except ValueError:
                raise PipelineError(f"option {k} of {cls.name} takes an integer, got '{v}'") from None
        elif ty == "float":
            try:
                kwargs[k] = float(v)
            except ValueError:
                raise PipelineError(f"option {k} of {cls.name} takes a number, got '{v}'") from None
        else:
            kwargs[k] = v.strip('"')
    try:
        p = cls(**kwargs)
        p.validate()
    except PipelineError:
        raise
    except (TypeError, ValueError) as e:  # a check that is not (yet) a PipelineError: still an option error
        raise PipelineError(f"invalid option of {cls.name}: {e}") from None
    return p
