"""Symbolic shape algebra: canonical integer expressions over dim symbols, and a prover.

    from relax_mlir.shape import parse, sym, Facts
    e = sym("n") * 2 + 1                  # str(e) == "2*n + 1" == str(parse("1 + n*2"))
    Facts(lower={"n": 1}).prove_positive(e)
"""
from __future__ import annotations

from relax_mlir.shape.expr import (
    Expr, ShapeParseError, ceildiv, const, floordiv, max_, min_, mod, parse, sym,
)
from relax_mlir.shape.prover import Facts

__all__ = [
    "Expr", "Facts", "ShapeParseError", "ceildiv", "const", "floordiv", "max_", "min_", "mod",
    "parse", "sym",
]
