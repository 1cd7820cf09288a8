"""`result_aliases`: which inputs a destination-passing kernel's results may share storage with.

A kernel writes its results into its destination arguments, but once kernels are inlined into
their callers upstream canonicalization may drop a write whose value equals an input: a
`linalg.copy` (or an identity `linalg.generic`) of a slice becomes the slice itself, a view of the
input's storage. Bufferization then reads that storage where the graph-level memory plan believed
the kernel had made a copy, so a planner must keep such inputs alive as long as the result.

The analysis walks back from each returned value (a use-def chain, no IR is changed) and answers
conservatively: a value produced by an op it does not know may alias every tensor input.
"""
from __future__ import annotations

from mlir import ir

# Ops whose result is a view of their first operand (no new storage once bufferized).
VIEW_OPS = frozenset({"tensor.extract_slice", "tensor.expand_shape", "tensor.collapse_shape", "tensor.cast",
                      "tensor.reshape", "tensor.bitcast", "bufferization.materialize_in_destination"})


def _is_identity_copy(op: ir.Operation) -> bool:
    """A linalg op that canonicalization may erase, replacing its result with its input."""
    if op.name == "linalg.copy":
        return True
    if op.name == "linalg.transpose":
        perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        return perm == list(range(len(perm)))
    if op.name != "linalg.generic":
        return False
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if any(not m.is_permutation or m != ir.AffineMap.get_identity(m.n_dims) for m in maps):
        return False
    body = op.regions[0].blocks[0]
    ops = list(body.operations)
    yld = ops[len(ops) - 1]
    if yld.operation.name != "linalg.yield" or len(yld.operands) != 1:
        return False
    v = _folded(yld.operands[0])
    return isinstance(v, ir.BlockArgument) and v.owner == body


def _folded(v: ir.Value) -> ir.Value:
    """The value `v` folds to through no-op arithmetic that canonicalization removes: a select of
    one value on both sides or on a constant condition, a bitcast to its own type (a same-width
    bitcast between unsigned and signed legalizes to `select true, x, x` on signless integers:
    its kernel became a view of its input, and two returned scalars shared one storage block)."""
    while not isinstance(v, ir.BlockArgument):
        o = v.owner
        name = o.name
        if name == "arith.select":
            c, a, b = o.operands
            if a == b:
                v = a
                continue
            co = c.owner if not isinstance(c, ir.BlockArgument) else None
            attr = co.attributes["value"] if co is not None and co.name == "arith.constant" else None
            if attr is not None and ir.IntegerAttr.isinstance(attr):
                v = a if ir.IntegerAttr(attr).value else b
                continue
            return v
        if name in ("arith.bitcast", "arith.index_cast") and o.operands[0].type == v.type:
            v = o.operands[0]
            continue
        return v
    return v


def _dps_inits(op: ir.Operation) -> tuple[list[ir.Value], list[ir.Value]]:
    """(inputs, inits) of a linalg op (operandSegmentSizes = [ins, outs])."""
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    vals = list(op.operands)
    return vals[:sizes[0]], vals[sizes[0]:sizes[0] + sizes[1]]


def _sources(value: ir.Value, inputs: dict, all_inputs: frozenset, seen: set) -> frozenset:
    """Kernel input positions `value` may share storage with."""
    if isinstance(value, ir.BlockArgument):
        return frozenset({inputs[value]}) if value in inputs else frozenset()
    if value in seen:
        return frozenset()
    seen.add(value)
    op = value.owner
    name = op.name
    if name in VIEW_OPS:
        return _sources(op.operands[0], inputs, all_inputs, seen)
    if name.startswith("linalg.") and "operandSegmentSizes" in op.attributes:
        ins, inits = _dps_inits(op)
        k = list(op.results).index(value)
        out = _sources(inits[k], inputs, all_inputs, seen) if k < len(inits) else all_inputs
        if _is_identity_copy(op) and ins:
            out |= _sources(ins[0], inputs, all_inputs, seen)
        return out
    if name in ("tensor.insert_slice", "tensor.parallel_insert_slice"):
        out = _sources(op.operands[1], inputs, all_inputs, seen)
        if op.operands[0].type == op.results[0].type:  # a full-size insert folds to its source
            out |= _sources(op.operands[0], inputs, all_inputs, seen)
        return out
    if name == "tensor.insert":
        return _sources(op.operands[1], inputs, all_inputs, seen)
    if name in ("tensor.empty", "arith.constant", "tensor.splat", "tensor.generate", "tensor.from_elements",
                "bufferization.alloc_tensor"):
        return frozenset()
    return all_inputs  # unknown: may alias anything


def result_aliases(kernel: ir.Operation, n_inputs: int) -> list[frozenset[int]]:
    """For each result of `kernel` (a func.func in destination-passing style whose first `n_inputs`
    arguments are its tensor inputs), the input positions whose storage the result may share."""
    body = kernel.regions[0].blocks[0]
    tensor_inputs = {a: i for i, a in enumerate(list(body.arguments)[:n_inputs])
                     if isinstance(a.type, ir.RankedTensorType)}
    all_inputs = frozenset(tensor_inputs.values())
    ret = list(body.operations)[-1]
    return [_sources(v, tensor_inputs, all_inputs, set()) for v in ret.operands]
