"""Whole-module checks before the import: every unsupported op (and element type) at once,
each with its count and locations; sharding annotations are accepted and dropped with a note
(the compile is for one device).
"""
from __future__ import annotations

import logging

from relax_mlir.frontend.stablehlo.common import _DTYPES, _jax_dtype, _string
from relax_mlir.frontend.stablehlo.complex import COMPLEX_CONVERTERS
from relax_mlir.frontend.stablehlo.errors import UnsupportedOpError, UnsupportedOpsError, UnsupportedTypesError
from relax_mlir.frontend.stablehlo.registry import CONVERTERS, CUSTOM_CALL_TARGETS


_log = logging.getLogger("relax_mlir.frontend")


# Ops the walk handles itself (not through CONVERTERS).
_STRUCTURAL = frozenset({"func.func", "func.return", "func.call", "stablehlo.return"})


# Ops refused with a reason (the import is for one device).
_REFUSED_OPS = {
    "sdy.manual_computation": "shard_map (sdy.manual_computation, per-device code) is not supported: relax compiles "
                              "for one device; call the function without shard_map",
}


# (`sdy.sharding_rule`, which jax puts on its LAPACK custom calls, is not one: it says how the op
# could be sharded, not how anything is; a one-device import has nothing to drop and says nothing)
_SHARDING_ATTRS = ("sdy.sharding", "mhlo.sharding")
# Collectives: converted only in an SPMD import (sharding.py), refused for one device.
_COLLECTIVES = frozenset({"stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter",
                          "stablehlo.all_to_all", "stablehlo.collective_permute", "stablehlo.collective_broadcast"})


def _custom_call_target(op) -> str:
    return _string(op.attributes["call_target_name"])


def _attr_names(attrs) -> list[str]:
    """The names in a jax-MLIR DictAttr (empty for anything else)."""
    from jaxlib.mlir import ir as jir
    if not isinstance(attrs, jir.DictAttr):
        return []
    return [attrs[i].name for i in range(len(attrs))]


def check_supported_ops(module, spmd: bool = False) -> None:
    """Walk everything @main reaches (calls and composite decompositions, nested regions) and raise
    UnsupportedOpsError naming every op the importer cannot convert, with its count and locations,
    all at once. Sharding annotations (sdy.sharding / mhlo.sharding attributes, sdy.mesh,
    sdy.sharding_constraint, @Sharding custom calls) are accepted: they are dropped with one
    logged warning, since relax compiles for one device. With `spmd` (the per-device import of
    relax_mlir.spmd) manual computations are imported and shardings are kept, not dropped."""
    from jaxlib.mlir import ir as jir

    funcs, notes = {}, {}
    for op in module.body.operations:
        name = op.operation.name
        if name == "func.func":
            funcs[_string(op.attributes["sym_name"])] = op
        elif name.startswith("sdy."):
            notes[name] = notes.get(name, 0) + 1
    groups: dict[tuple[str, str], list[str]] = {}  # (op name, reason: a custom_call's target) -> locations

    def bad(name, why, loc):
        groups.setdefault((name, why), []).append(str(loc))

    def note_attrs(op):
        for key in ("arg_attrs", "res_attrs"):
            if key in op.attributes and isinstance(op.attributes[key], jir.ArrayAttr):
                for a in op.attributes[key]:
                    for n in _attr_names(a):
                        if n in _SHARDING_ATTRS:
                            notes[n] = notes.get(n, 0) + 1
        for n in _SHARDING_ATTRS:
            if n in op.attributes:
                notes[n] = notes.get(n, 0) + 1

    seen, todo = set(), ["main"]

    def visit(op):
        name = op.operation.name
        note_attrs(op)
        if name == "func.call" or name == "stablehlo.composite":
            callee = _string(op.attributes["callee" if name == "func.call" else "decomposition"])
            if callee not in funcs:
                bad(name, f"unknown {'callee' if name == 'func.call' else 'decomposition'} @{callee}", op.location)
            elif callee not in seen:
                todo.append(callee)
        if name in _REFUSED_OPS and not spmd:
            bad(name, _REFUSED_OPS[name], op.location)
            return  # its body is not imported: nothing in it to report
        if name in _COLLECTIVES and not spmd:
            bad(name, "a collective: relax compiles this module for one device (import sharded programs "
                      "with relax_mlir.spmd)", op.location)
        if name == "stablehlo.custom_call":
            target = _custom_call_target(op)
            handler = CUSTOM_CALL_TARGETS.get(target)
            if target in _SHARDING_CUSTOM_CALLS:
                notes[f"custom_call @{target}"] = notes.get(f"custom_call @{target}", 0) + 1
            if handler is None:
                bad(name, f"call target @{target}", op.location)
            elif isinstance(handler, str):
                bad(name, f"call target @{target}: {handler}", op.location)
        elif name.startswith("sdy.") and name in CONVERTERS:
            notes[name] = notes.get(name, 0) + 1
        elif name not in CONVERTERS and name not in _STRUCTURAL and not (spmd and name == "sdy.return"):
            bad(name, "", op.location)
        for r in op.regions:
            for b in r.blocks:
                for inner in b.operations:
                    visit(inner)

    while todo:
        fname = todo.pop()
        if fname in seen or fname not in funcs:
            continue
        seen.add(fname)
        visit(funcs[fname])
    if groups:
        raise UnsupportedOpsError([(name, why, locs) for (name, why), locs in groups.items()])
    if notes and not spmd:
        what = ", ".join(f"{n} x{c}" for n, c in sorted(notes.items()))
        _log.warning("relax-mlir: sharding annotations dropped (%s): the module is compiled for one device", what)


_COMPLEX = frozenset({"complex<f32>", "complex<f64>"})


_SHARDING_CUSTOM_CALLS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})


def _element_type(t) -> str | None:
    from jaxlib.mlir import ir as jir
    try:
        return _jax_dtype(jir.ShapedType(t).element_type)
    except (ValueError, TypeError):
        return None


def check_element_types(module) -> None:
    """Raise UnsupportedTypesError naming every op (with its location) whose operands or results
    have an element type relax does not support (ui64, i4, complex, f8 ...), all at once."""
    items: list[UnsupportedOpError] = []
    supported = ", ".join(sorted(_DTYPES))

    def complex_ok(t) -> bool:  # complex values inside the function are pairs of real parts
        return _element_type(t) in _COMPLEX

    def visit(op):
        name = op.operation.name
        if name == "func.func":
            for r in op.regions:
                for b in r.blocks:
                    for i, a in enumerate(b.arguments):
                        dt = _element_type(a.type)
                        if dt is not None and dt not in _DTYPES and not complex_ok(a.type):
                            items.append(UnsupportedOpError(name, str(op.location), f"argument #{i} has element type "
                                                                                     f"{dt} (supported: {supported})"))
        else:
            cplx = False
            for i, r in enumerate(op.results):
                dt = _element_type(r.type)
                if complex_ok(r.type):
                    cplx = True
                elif dt is not None and dt not in _DTYPES:
                    items.append(UnsupportedOpError(name, str(op.location), f"result #{i} has element type {dt} "
                                                                             f"(supported: {supported})"))
            cplx = cplx or any(complex_ok(o.type) for o in op.operands)
            if cplx and name not in COMPLEX_CONVERTERS and name not in _STRUCTURAL:
                items.append(UnsupportedOpError(name, str(op.location), "on complex numbers (supported: "
                                                + ", ".join(sorted(n.split(".")[-1] for n in COMPLEX_CONVERTERS)) + ")"))
        for r in op.regions:
            for b in r.blocks:
                for inner in b.operations:
                    visit(inner)

    for op in module.body.operations:
        visit(op)
    if items:
        raise UnsupportedTypesError(items)
