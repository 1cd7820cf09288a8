"""The relax dialect: op/type declarations (spec), IRDL emission, loading into a Context."""
from __future__ import annotations

from mlir import ir
from mlir.dialects import irdl

_SEARCH_PREFIX_ADDED = False


def load(context: ir.Context | None = None) -> None:
    """Load the relax dialect (from its IRDL definition) into `context` (default: the current one)."""
    global _SEARCH_PREFIX_ADDED
    ctx = context or ir.Context.current
    # relax_v.* ops (heterogeneous variadic groups, see dialect/spec.py) are unregistered; the
    # Python verifier rejects any other unregistered op.
    ctx.allow_unregistered_dialects = True
    if ctx.is_registered_operation("relax.add"):
        return
    if not _SEARCH_PREFIX_ADDED:
        from mlir._mlir_libs import _mlir

        _mlir.globals.append_dialect_search_prefix("relax_mlir.dialect.opview")
        _SEARCH_PREFIX_ADDED = True
    with ctx:
        irdl.load_dialects(ir.Module.parse(_cached_text()))


_TEXT: str | None = None


def _cached_text() -> str:
    global _TEXT
    if _TEXT is None:
        from relax_mlir.dialect.irdl_emit import irdl_text

        _TEXT = irdl_text()
    return _TEXT


def new_context() -> ir.Context:
    """A Context with the relax dialect loaded and upstream dialects available."""
    ctx = ir.Context()
    load(ctx)
    return ctx
