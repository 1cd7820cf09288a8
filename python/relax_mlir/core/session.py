"""`Session`: an MLIR context with the relax dialect loaded, collecting diagnostics; `parse_module`."""
from __future__ import annotations

import re

from mlir import ir

from relax_mlir.core.diagnostics import Diag, to_diag
from relax_mlir.dialect import load


class Session:
    """A Context with the relax dialect, collecting diagnostics."""

    def __init__(self, source_name: str = "<stdin>"):
        self.ctx = ir.Context()
        load(self.ctx)
        self.source_name = source_name
        self.diags: list[Diag] = []
        # The handler must not reference `self`: a Session <-> handler cycle lets the garbage
        # collector free the Context before the operations that live in it (a segfault).
        diags, name = self.diags, source_name

        def on_diag(d) -> bool:
            diags.append(to_diag(d, name))
            return True

        self._handler = self.ctx.attach_diagnostic_handler(on_diag)

    def add_error_diagnostics(self, e: Exception) -> None:
        seen = {(d.line, d.col, d.message) for d in self.diags}
        for d in getattr(e, "error_diagnostics", []) or []:
            nd = to_diag(d, self.source_name)
            if (nd.line, nd.col, nd.message) not in seen:
                self.diags.append(nd)

    def error(self, message: str) -> None:
        """Record an error that has no location in the input."""
        self.diags.append(Diag("", 0, 0, "error", message))

    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diags)


_TOP_LEVEL_COUNT = "source must contain a single top-level operation"
_CUSTOM_FORM_RE = re.compile(r'(?:^|=)\s*(relax(?:_v)?\.[A-Za-z_][\w.]*)\b', re.M)


def parse_module(session: Session, text: str):
    """Parse `text` into a `builtin.module` (an implicit one around zero, one or several top-level
    ops, as mlir-opt does). None, with located diagnostics recorded, when the text does not parse."""
    with session.ctx, ir.Location.unknown():
        try:
            op = ir.Operation.parse(text, source_name=session.source_name)
        except ir.MLIRError as e:
            if any(_TOP_LEVEL_COUNT in d.message for d in e.error_diagnostics):
                return _parse_implicit_module(session, text)
            session.add_error_diagnostics(e)
            if not session.has_errors():
                session.diags.append(_silent_parse_failure(session.source_name, text))
            return None
        if op.operation.name != "builtin.module":
            # A single top-level op is returned as is: wrap it in a module, as mlir-opt does.
            m = ir.Module.create()
            m.body.append(op.operation)
            return m.operation
        return op.operation


def _parse_implicit_module(session: Session, text: str):
    # ir.Module.parse wraps any number of top-level ops in a module; it takes no source name, so
    # its locations say "-", which to_diag maps back to the session's file.
    try:
        return ir.Module.parse(text).operation
    except ir.MLIRError as e:
        session.add_error_diagnostics(e)
        if not session.has_errors():
            session.diags.append(_silent_parse_failure(session.source_name, text))
        return None


def _silent_parse_failure(file: str, text: str) -> Diag:
    """MLIR's parser fails without a diagnostic on an IRDL op written in custom form
    (`relax.exp(%x)`, not `"relax.exp"(%x)`): point at the first such op if there is one.
    (A scan of the source text for the error message only: the text is not edited or re-parsed.)"""
    for m in _CUSTOM_FORM_RE.finditer(text):
        start = m.start(1)
        if start > 0 and text[start - 1] == '"':
            continue
        line = text.count("\n", 0, start) + 1
        col = start - (text.rfind("\n", 0, start) + 1) + 1
        name = m.group(1)
        return Diag(file, line, col, "error", f"custom assembly form of '{name}' is not supported: relax ops are "
                                              f"written in the generic form, \"{name}\"(...)")
    return Diag(file, 0, 0, "error", "the input does not parse (the MLIR parser gave no diagnostic)")
