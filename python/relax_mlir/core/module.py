"""`Module`: a relax module with the session (MLIR context, diagnostics) it lives in."""
from __future__ import annotations


class Module:
    """A relax module in its own MLIR context: `op` is its `builtin.module` operation, `session`
    the `core.session.Session` that owns the context; `str(m)` prints it."""

    def __init__(self, session, op):
        self.session = session
        self.op = op

    def __str__(self) -> str:
        with self.session.ctx:
            return self.op.get_asm()

    @property
    def context(self):
        return self.session.ctx
