"""Masks that are bounds checks, turned back into bounds checks (CPU backend, the first step of
`relax-cpu-parallelize`).

A register tile over a dynamic dimension reads and writes its partial tiles masked: the schedule
takes a slice of `rows` rows (`memref.subview ... [%rows, 64]`) and transfers a `vector<4x64xf32>`
to or from it under `vector.create_mask %rows, %c64`. Unrolled by `convert-vector-to-scf`, each
row becomes a masked load or store of 64 lanes (`llvm.masked.store.v64f32`) whose mask is all-true
or all-false (`select(i < rows, splat true, splat false)`): eight `vmaskmov`s per row on AVX2, and
most of LLVM's instruction selection time in a Llama's matmul kernels (X86 DAG->DAG selection took
2.05 of llc's 4.47 s on a 12-layer prefill, most of it in these kernels).

Such a mask says no more than the slice's bounds do: a dimension masked by exactly the slice's own
size, starting at index 0, is the out-of-bounds check `in_bounds = false` (a read fills the rows
past the end with the padding value, as the mask does; a write skips them). Rewritten so,
`convert-vector-to-scf` guards each row with an `scf.if` around a plain vector load or store, as it
already does for the unmasked writes of the same tiles. Besides compile time, the masked-off rows
of such an access lie past the end of the buffer, where a masked access costs microcode assists
when that memory is on another page: a 12-layer LLM's prefill of 13 tokens ran at 74 tokens/s with
the masks, 251 without.

Only that exact form is rewritten: every other mask stays as it is. (The A panel's reads, masked
by `min(rows - i, 4)` from row i, were rewritten likewise for a while: 5-12% slower prefills at 8
and 16 tokens, where the tiles are full and the masked loads cost nothing, and no gain elsewhere.)
"""
from __future__ import annotations

from mlir import ir

from relax_mlir.backend.common import const_int

__all__ = ["row_masks_as_bounds"]

_TRANSFERS = ("vector.transfer_read", "vector.transfer_write")


def row_masks_as_bounds(module_op: ir.Operation) -> int:
    """Rewrite every masked transfer of the form above in `module_op`; returns how many."""
    found: list[ir.Operation] = []

    def visit(o):
        if o.name in _TRANSFERS:
            found.append(o)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit, ir.WalkOrder.POST_ORDER)
    n = 0
    for o in found:
        in_bounds = _bounds_instead_of_mask(o)
        if in_bounds is not None:
            _rebuild_without_mask(o, in_bounds)
            n += 1
    return n


def _base_indices_mask(op: ir.Operation) -> tuple[ir.Value, list[ir.Value], ir.Value | None]:
    """(base, indices, mask) of a transfer op, from its operand segments (read: base, indices,
    padding, mask; write: value, base, indices, mask)."""
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    ops = list(op.operands)
    groups, k = [], 0
    for n in sizes:
        groups.append(ops[k:k + n])
        k += n
    base, indices = (groups[0], groups[1]) if op.name == "vector.transfer_read" else (groups[1], groups[2])
    return base[0], indices, (groups[3][0] if groups[3] else None)


def _defining(v: ir.Value, name: str) -> ir.Operation | None:
    owner = v.owner
    if isinstance(owner, ir.OpView):
        owner = owner.operation
    return owner if isinstance(owner, ir.Operation) and owner.name == name else None


def _subview_sizes(base: ir.Value) -> list[ir.Value | int] | None:
    """The sizes of `base` when it is a `memref.subview`: an SSA value per dynamic size, an int per
    static one; None for any other base."""
    sub = _defining(base, "memref.subview")
    if sub is None:
        return None
    static = list(ir.DenseI64ArrayAttr(sub.attributes["static_sizes"]))
    seg = list(ir.DenseI32ArrayAttr(sub.attributes["operandSegmentSizes"]))  # source, offsets, sizes, strides
    dynamic = list(sub.operands)[seg[0] + seg[1]:seg[0] + seg[1] + seg[2]]
    out, k = [], 0
    dyn = ir.ShapedType.get_dynamic_size()
    for s in static:
        if s == dyn:
            out.append(dynamic[k])
            k += 1
        else:
            out.append(s)
    return out


def _bounds_instead_of_mask(op: ir.Operation) -> list[bool] | None:
    """The transfer's new in_bounds flags when its mask is only a bounds check, else None."""
    base, indices, mask = _base_indices_mask(op)
    if mask is None:
        return None
    create = _defining(mask, "vector.create_mask")
    if create is None or not isinstance(base.type, ir.MemRefType):
        return None
    vtype = ir.VectorType(mask.type)
    rank = vtype.rank
    if vtype.scalable or len(indices) != rank:
        return None
    sizes = _subview_sizes(base)
    if sizes is None or len(sizes) != rank:  # the slice must keep every dimension
        return None
    pmap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    if pmap != ir.AffineMap.get_minor_identity(rank, rank):
        return None
    flags = [ir.BoolAttr(a).value for a in ir.ArrayAttr(op.attributes["in_bounds"])]
    bounds = list(create.operands)
    if rank == 0 or len(bounds) != rank or len(flags) != rank:
        return None
    new = []
    for d in range(rank):
        lanes = vtype.shape[d]
        c = const_int(bounds[d])
        if c is not None and c >= lanes:
            new.append(flags[d])  # every lane of this dim is on: the mask adds nothing here
        elif isinstance(sizes[d], ir.Value) and bounds[d] == sizes[d] and const_int(indices[d]) == 0:
            new.append(False)  # masked by the slice's own size from its start: a bounds check
        else:
            return None
    return new


def _rebuild_without_mask(op: ir.Operation, in_bounds: list[bool]) -> None:
    ctx = op.context
    attrs = {name: op.attributes[name] for name in list(op.attributes)}
    attrs["in_bounds"] = ir.ArrayAttr.get([ir.BoolAttr.get(f, ctx) for f in in_bounds], ctx)
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    seg[-1] = 0
    attrs["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get(seg, ctx)
    operands = list(op.operands)[:-1]  # the mask is the last operand
    new = ir.Operation.create(op.name, results=[r.type for r in op.results], operands=operands,
                              attributes=attrs, loc=op.location, ip=ir.InsertionPoint(op))
    for old, repl in zip(op.results, new.results):
        old.replace_all_uses_with(repl)
    op.erase()
