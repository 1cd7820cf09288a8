"""Pass and pattern bases, and the adapters to upstream MLIR's PassManager and RewritePatternSet."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mlir import ir


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


# --- running passes ----------------------------------------------------------------------------

def emit_error(op, message: str) -> None:
    """Report `message` as an MLIR error diagnostic at `op`'s location."""
    loc = op.location if op is not None else ir.Location.unknown()
    loc.emit_error(message)


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
        import os
        import traceback

        if os.environ.get("RELAX_MLIR_DEBUG"):
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


# --- pipeline strings --------------------------------------------------------------------------

def split_top(text: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside (), {} and quotes."""
    out, depth, cur, quote = [], 0, [], False
    for ch in text:
        if ch == '"':
            quote = not quote
        if not quote:
            if ch in "({[":
                depth += 1
            elif ch in ")}]":
                depth -= 1
        if ch == sep and depth == 0 and not quote:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


class PipelineError(ValueError):
    pass


def parse_options(cls, text: str) -> ModulePass:
    """`name{a=1 b=true}` options -> an instance of the pass class."""
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for item in text.split():
        if "=" not in item:
            raise PipelineError(f"option '{item}' of {cls.name} must be key=value")
        k, v = item.split("=", 1)
        if k not in fields:
            raise PipelineError(f"{cls.name} has no option '{k}' (options: {', '.join(fields) or 'none'})")
        ty = fields[k].type if isinstance(fields[k].type, str) else fields[k].type.__name__
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
            kwargs[k] = float(v)
        else:
            kwargs[k] = v.strip('"')
    return cls(**kwargs)


def build_pipeline(pm, items: list[str], registry: dict) -> None:
    """Add pipeline elements (relax pass names with options, or upstream pipeline text) to `pm`."""
    upstream: list[str] = []

    def flush():
        if upstream:
            text = ",".join(upstream)
            try:
                pm.add(text)
            except Exception as e:
                raise PipelineError(f"invalid upstream pipeline '{text}': {e}") from None
            upstream.clear()

    for item in items:
        name = item.split("{", 1)[0].strip()
        if name in registry:
            flush()
            opts = item[len(name):].strip()
            if opts:
                if not (opts.startswith("{") and opts.endswith("}")):
                    raise PipelineError(f"malformed options for {name}: '{opts}'")
                p = parse_options(registry[name], opts[1:-1])
            else:
                p = registry[name]()
            pm.add(adapter(p), name=type(p).__name__, argument=name, description=type(p).__doc__ or "")
        else:
            upstream.append(item)
    flush()


def parse_pipeline(text: str) -> list[str]:
    """'builtin.module(a,b{x=1},func.func(c))' -> ['a', 'b{x=1}', 'func.func(c)']."""
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module("):-1]
    elif text.startswith("any(") and text.endswith(")"):
        text = text[len("any("):-1]
    return split_top(text)
