"""The converter tables the importer dispatches through, filled by the family modules.

Each family module (`elementwise`, `slicing`, ...) ends with `register_converters({...})` (and
`register_custom_calls({...})` for the `stablehlo.custom_call` targets it handles); the package's
`__init__` imports every family, so the tables are complete whenever the importer runs. An op
registered twice is an error at import time, naming the op.
"""
from __future__ import annotations

from typing import Callable

# StableHLO op name -> converter `(importer, jax op, operand Vals) -> Val | list[Val] | None`.
CONVERTERS: dict[str, Callable] = {}

# custom_call target -> converter, or a string: why the target is refused.
CUSTOM_CALL_TARGETS: dict[str, Callable | str] = {}


def _register(table: dict, entries: dict, what: str) -> dict:
    for name, conv in entries.items():
        if name in table:
            raise RuntimeError(f"the StableHLO importer registers {what} {name!r} twice")
        table[name] = conv
    return entries


def register_converters(entries: dict[str, Callable]) -> dict[str, Callable]:
    """Add a family's converters to CONVERTERS; returns `entries` (the family's own table)."""
    return _register(CONVERTERS, entries, "the op")


def register_custom_calls(entries: dict[str, Callable | str]) -> dict[str, Callable | str]:
    """Add a family's custom_call targets to CUSTOM_CALL_TARGETS; returns `entries`."""
    return _register(CUSTOM_CALL_TARGETS, entries, "the custom_call target")
