"""`relax-dce` and `relax-cse`: remove unused pure relax ops and kernels; merge identical pure ops.

IRDL ops carry no memory-effect interface, so upstream `canonicalize`/`cse` neither remove nor merge
them; these passes read purity from the op classes (`OpSpec.pure`, ops/<family>.py) instead.
`relax.match_cast` is never removed: it is a run-time check and binds the symbols of its pattern.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mlir import ir

from relax_mlir.dialect.spec import OPS, attr_dict
from relax_mlir.passes import ModulePass
from relax_mlir.transforms.infer_shapes import graph_functions

# Ops that DCE keeps even when unused (pure, but they check and bind at run time).
KEEP = frozenset({"relax.match_cast"})
# Terminators that may sit inside a removable relax region (the dataflow block's `gpu.yield`).
REGION_TERMINATORS = frozenset({"gpu.yield"})


def is_pure(op: ir.Operation) -> bool:
    """A relax op whose class is `pure`, with only pure relax ops (and terminators) nested in it."""
    spec = OPS.get(op.name)
    if spec is None or not spec.pure:
        return False
    for r in op.regions:
        for b in r.blocks:
            for inner in b.operations:
                inner = inner.operation
                if inner.name not in REGION_TERMINATORS and not is_pure(inner):
                    return False
    return True


def is_dead(op: ir.Operation) -> bool:
    if not len(op.results) or op.name in KEEP:
        return False
    if any(True for r in op.results for _ in r.uses):
        return False
    return is_pure(op)


def dce_block(block: ir.Block) -> int:
    """Erase dead pure relax ops in `block` (and nested blocks), last to first; returns the count."""
    removed = 0
    for op in reversed(list(block.operations)):
        op = op.operation
        if is_dead(op):
            op.erase()
            removed += 1
            continue
        for r in op.regions:
            for b in r.blocks:
                removed += dce_block(b)
    return removed


def _symbol_refs(attr: ir.Attribute, out: set[str]) -> None:
    if isinstance(attr, ir.FlatSymbolRefAttr):
        out.add(ir.FlatSymbolRefAttr(attr).value)
    elif isinstance(attr, ir.SymbolRefAttr):
        out.add(ir.SymbolRefAttr(attr).value[0])
    elif isinstance(attr, ir.ArrayAttr):
        for a in ir.ArrayAttr(attr):
            _symbol_refs(a, out)
    elif isinstance(attr, ir.DictAttr):
        d = ir.DictAttr(attr)
        for i in range(len(d)):
            _symbol_refs(d[i].attr, out)


def referenced_symbols(op: ir.Operation, out: set[str]) -> None:
    """Symbols named by any attribute of `op` or of an op nested in it."""
    for a in attr_dict(op).values():
        _symbol_refs(a, out)
    for r in op.regions:
        for b in r.blocks:
            for inner in b.operations:
                referenced_symbols(inner.operation, out)


def is_kernel(op: ir.Operation) -> bool:
    attrs = op.attributes
    return (op.name == "func.func" and "relax.kernel" in attrs and "sym_visibility" in attrs
            and ir.StringAttr(attrs["sym_visibility"]).value == "private")


def remove_unused_kernels(module: ir.Operation) -> int:
    """Erase private `relax.kernel` funcs that nothing references (to a fixpoint)."""
    removed = 0
    while True:
        body = module.regions[0].blocks[0]
        refs: dict[str, set[str]] = {}   # function -> symbols it references
        for op in body.operations:
            op = op.operation
            s: set[str] = set()
            for r in op.regions:
                for b in r.blocks:
                    for inner in b.operations:
                        referenced_symbols(inner.operation, s)
            name = ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else None
            s.discard(name)   # a kernel's reference to itself does not keep it
            refs[name or f"<op{len(refs)}>"] = s
        used = set().union(*refs.values()) if refs else set()
        dead = [op.operation for op in body.operations
                if is_kernel(op.operation) and ir.StringAttr(op.attributes["sym_name"]).value not in used]
        if not dead:
            return removed
        for op in dead:
            op.erase()
            removed += 1


@dataclass(frozen=True)
class DcePass(ModulePass):
    """Remove pure relax ops whose results are unused, and kernels that no call references."""

    name: ClassVar[str] = "relax-dce"

    def run(self, module: ir.Operation) -> None:
        import relax_mlir.ops  # noqa: F401  (fills OPS)

        for f in graph_functions(module):
            while any(dce_block(b) for b in f.regions[0].blocks):
                pass
        remove_unused_kernels(module)


def cse_key(op: ir.Operation):
    """What makes two pure relax ops interchangeable (None: never merged)."""
    if len(op.regions) or not len(op.results) or not is_pure(op):
        return None
    attrs = attr_dict(op)
    return (op.name, tuple(op.operands), tuple(sorted(attrs.items(), key=lambda kv: kv[0])),
            tuple(r.type for r in op.results))


def cse_block(block: ir.Block, seen: dict) -> int:
    """Merge ops of `block` into identical earlier ones (of this block or an enclosing one)."""
    merged = 0
    seen = dict(seen)
    for op in list(block.operations):
        op = op.operation
        key = cse_key(op)
        if key is not None:
            first = seen.get(key)
            if first is None:
                seen[key] = op
            else:
                for old, new in zip(op.results, first.results):
                    old.replace_all_uses_with(new)
                op.erase()
                merged += 1
                continue
        for r in op.regions:
            for b in r.blocks:
                merged += cse_block(b, seen)
    return merged


@dataclass(frozen=True)
class CsePass(ModulePass):
    """Merge identical pure relax ops (same name, operands, attributes and result types)."""

    name: ClassVar[str] = "relax-cse"

    def run(self, module: ir.Operation) -> None:
        import relax_mlir.ops  # noqa: F401

        for f in graph_functions(module):
            # Merging makes operands of later ops equal, so repeat until nothing merges.
            while any(cse_block(b, {}) for b in f.regions[0].blocks):
                pass


PASSES = (DcePass, CsePass)
