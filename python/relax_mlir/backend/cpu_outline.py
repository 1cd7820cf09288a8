"""Loops left in a CPU build's host program, outlined into shared kernels.

Some kernels are inlined into the entries on purpose: view kernels, and the in-place update
kernels (`relax.dynamic_update_slice` writing a KV cache in place: the in-place flag is a
constant only at the call site). After bufferization their loops (the tiled copies of an update
into the cache) sit in the host program, one loop nest per call site: an LLM layer writes its
keys and values, so a 24-layer prefill carried 96 copies of the same loop nest, each lowered,
parallelized (an outlined body and an async wrapper per copy) and compiled by LLVM apart -- about
a third of the build's LLVM time at 24 layers, growing with depth.

Here every outermost loop nest of an entry (scf.parallel / scf.forall / scf.for without results,
or a linalg op) that calls nothing is moved into a private function whose parameters are the
values it uses from outside (constants are rematerialized inside, so static bounds stay static),
and a structurally equal nest elsewhere calls the same function: equal op names, attributes,
types and operand wiring, compared through MLIR's uniqued types and attributes (no printing).
The functions are kernels like the others: compiled once, called from every layer.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import func

_LOOPS = frozenset(("scf.parallel", "scf.forall", "scf.for"))
_NO_OUTLINE_INSIDE = frozenset(("func.call", "func.return", "scf.while"))
PREFIX = "__relax_kernel_host_loop"


def _candidate(op: ir.Operation) -> bool:
    name = op.name
    if name in _LOOPS:
        return len(op.results) == 0 and "relax.control_flow" not in op.attributes
    return name.startswith("linalg.") and len(op.results) == 0


def _outermost(block: ir.Block, out: list) -> None:
    """The candidate ops of `block` and of the regions of its other ops (branches), outermost."""
    for o in block.operations:
        op = o.operation
        if _candidate(op):
            out.append(op)
            continue
        for region in op.regions:
            for b in region.blocks:
                _outermost(b, out)


class _Nest:
    """One loop nest: its structural key and the values it uses from outside."""

    def __init__(self, root: ir.Operation):
        self.root = root
        self.free: list[ir.Value] = []  # first-use order
        self.consts: dict = {}  # outside constant value -> its arith.constant op
        inside: dict = {}  # value defined inside -> id
        free_ids: dict = {}
        key: list = []
        ok = [True]

        def define(v):
            inside[v] = len(inside)

        def visit(op: ir.Operation):
            if op.name in _NO_OUTLINE_INSIDE or op.name.startswith("async."):
                ok[0] = False
            operands = []
            for v in op.operands:
                if v in inside:
                    operands.append(inside[v])
                    continue
                owner = v.owner if isinstance(v, ir.OpResult) else None
                if owner is not None and owner.name == "arith.constant" and len(owner.regions) == 0:
                    self.consts.setdefault(v, owner)
                    operands.append(("c", owner.attributes["value"], v.type))
                    continue
                if v not in free_ids:
                    free_ids[v] = len(self.free)
                    self.free.append(v)
                operands.append(("f", free_ids[v], v.type))
            attrs = tuple((n, op.attributes[n]) for n in op.attributes)
            regions = []
            for region in op.regions:
                blocks = []
                for b in region.blocks:
                    for a in b.arguments:
                        define(a)
                    blocks.append(tuple(a.type for a in b.arguments))
                regions.append(tuple(blocks))
            key.append((op.name, tuple(operands), attrs, tuple(r.type for r in op.results), tuple(regions)))
            for r in op.results:
                define(r)
            for region in op.regions:
                for b in region.blocks:
                    for o in b.operations:
                        visit(o.operation)

        visit(root)
        self.ok = ok[0]
        self.key = tuple(key)


def _inside(op: ir.Operation, root: ir.Operation) -> bool:
    while op is not None:
        if op == root:
            return True
        parent = op.parent
        op = parent.operation if parent is not None else None
    return False


def _outline(nest: _Nest, name: str, module_block: ir.Block, before: ir.Operation) -> None:
    """Move nest.root into a new private function `name`; uses of outside values become its
    parameters, outside constants are cloned at its entry."""
    ctx = nest.root.context
    types = [v.type for v in nest.free]
    with ctx, nest.root.location:
        with ir.InsertionPoint(before):
            fn = func.FuncOp(name, (types, []))
        fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
        fn.attributes["passthrough"] = ir.ArrayAttr.get([ir.StringAttr.get("noinline")])
        entry = fn.add_entry_block()
        with ir.InsertionPoint(entry):
            ret = func.ReturnOp([])
        nest.root.move_before(ret)
        mapping = dict(zip(nest.free, entry.arguments))
        with ir.InsertionPoint(nest.root):
            for v, const in nest.consts.items():
                mapping[v] = const.clone().results[0]
        for v, new in mapping.items():
            for use in list(v.uses):
                owner = use.owner
                if _inside(owner, nest.root):
                    owner.operands[use.operand_number] = new


def outline_host_loops(module_op: ir.Operation, is_entry) -> int:
    """Outline the entries' loop nests (module docstring); `is_entry(f)` picks the host
    functions. Returns how many nests now call a shared function."""
    body = module_op.regions[0].blocks[0]
    entries = [f.operation for f in body.operations if f.operation.name == "func.func" and is_entry(f.operation)]
    if not entries:
        return 0
    shared: dict = {}  # key -> function name
    count = 0
    first_entry = entries[0]
    for f in entries:
        nests: list = []
        for region in f.regions:
            for b in region.blocks:
                _outermost(b, nests)
        for root in nests:
            nest = _Nest(root)
            if not nest.ok:
                continue
            name = shared.get(nest.key)
            if name is None:
                name = f"{PREFIX}_{len(shared)}"
                shared[nest.key] = name
                args = list(nest.free)
                loc = root.location
                with root.context, loc, ir.InsertionPoint(root):
                    func.CallOp([], ir.FlatSymbolRefAttr.get(name), args)
                _outline(nest, name, body, first_entry)
            else:
                with root.context, root.location, ir.InsertionPoint(root):
                    func.CallOp([], ir.FlatSymbolRefAttr.get(name), list(nest.free))
                root.erase()
            count += 1
    return count
