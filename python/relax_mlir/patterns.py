"""Rewrite-pattern base shared by op classes (their `canonicalization_patterns`) and passes.

Patterns are xDSL-shaped: `match_and_rewrite` returns True iff it rewrote. `add_patterns` adapts
them to upstream's `RewritePatternSet.add`, whose callback returns a falsy value on success.
"""
from __future__ import annotations

from typing import ClassVar


class RewritePattern:
    """A rewrite rooted at ops named `root`; `match_and_rewrite` returns True iff it rewrote.

    An op class lists the patterns rooted at it in `canonicalization_patterns`; there the root is
    the class's op name (a pattern shared by several op classes leaves `root` empty)."""

    root: ClassVar[str] = ""
    benefit: ClassVar[int] = 1

    def match_and_rewrite(self, op, rewriter) -> bool:
        raise NotImplementedError


def add_patterns(patterns, pats) -> None:
    """Register patterns, or (root op name, pattern) pairs, with an upstream RewritePatternSet."""
    for item in pats:
        root, p = item if isinstance(item, tuple) else (item.root, item)
        patterns.add(root, lambda op, rw, p=p: not p.match_and_rewrite(op, rw), p.benefit)
