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
