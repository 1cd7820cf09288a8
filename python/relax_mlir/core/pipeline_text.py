"""Pipeline text (`builtin.module(a,b{x=1},func.func(c))`) split into its items: plain Python,
no MLIR, so `relax_mlir.compile(passes="a,b")` reads it without loading MLIR on the runtime's
import path (relax_mlir.passes re-exports both)."""
from __future__ import annotations

__all__ = ["parse_pipeline", "split_top"]


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


def parse_pipeline(text: str) -> list[str]:
    """'builtin.module(a,b{x=1},func.func(c))' -> ['a', 'b{x=1}', 'func.func(c)']."""
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module("):-1]
    elif text.startswith("any(") and text.endswith(")"):
        text = text[len("any("):-1]
    return split_top(text)
