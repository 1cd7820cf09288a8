"""`classify_kernel`: a kernel's fusion pattern kind (TVM's OpPatternKind), read from its linalg ops.

Each op of the kernel gets a kind from its iterator types and indexing maps (`linalg.generic`) or
its name (named linalg and tensor ops); the kernel gets the strongest of them, in the order of
`KINDS` (an unknown op makes the kernel "opaque").
"""
from __future__ import annotations

from mlir import ir

KINDS = ("elementwise", "broadcast", "injective", "reduction", "output_fusable", "opaque")
RANK = {k: i for i, k in enumerate(KINDS)}

# Ops that say nothing about the data movement of a kernel.
NEUTRAL_PREFIXES = ("arith.", "index.", "affine.apply", "math.")
NEUTRAL = frozenset({"func.return", "tensor.empty", "tensor.dim", "tensor.cast", "tensor.from_elements",
                     "bufferization.alloc_tensor"})
NAMED = {
    "linalg.fill": "elementwise", "linalg.copy": "elementwise", "linalg.map": "elementwise",
    "linalg.broadcast": "broadcast",
    "linalg.transpose": "injective",
    "linalg.reduce": "reduction",
    "tensor.extract": "injective", "tensor.extract_slice": "injective", "tensor.insert_slice": "injective",
    "tensor.collapse_shape": "injective", "tensor.expand_shape": "injective", "tensor.pad": "injective",
    "tensor.concat": "injective", "tensor.reshape": "injective", "tensor.generate": "injective",
    "tensor.insert": "injective",
}
MATMUL_LIKE = ("linalg.matmul", "linalg.batch_matmul", "linalg.matvec", "linalg.vecmat", "linalg.dot",
               "linalg.batch_matvec", "linalg.batch_vecmat", "linalg.batch_reduce_matmul",
               "linalg.contract", "linalg.conv_", "linalg.depthwise_conv_")
POOLING = ("linalg.pooling_",)


def strongest(kinds) -> str:
    return max(kinds, key=RANK.__getitem__, default="elementwise")


def _maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _results(m: ir.AffineMap) -> list[int | None]:
    """Each result as a dim position, -1 for the constant 0, None for anything else."""
    out = []
    for e in m.results:
        out.append(_as(e, ir.AffineDimExpr, "position"))
        if out[-1] is None and _as(e, ir.AffineConstantExpr, "value") == 0:
            out[-1] = -1
    return out


def _as(e: ir.AffineExpr, cls, field: str):
    try:
        return getattr(cls(e), field)
    except (ValueError, TypeError):
        return None


def is_identity(m: ir.AffineMap) -> bool:
    return m.n_symbols == 0 and _results(m) == list(range(m.n_dims))


def is_broadcast(m: ir.AffineMap) -> bool:
    """Dims in increasing order, some dropped or replaced by the constant 0 (numpy broadcasting)."""
    res = _results(m)
    if m.n_symbols or None in res:
        return False
    dims = [d for d in res if d >= 0]
    return dims == sorted(set(dims))


def _body_ops(op: ir.Operation) -> list[str]:
    names = []
    for r in op.regions:
        for b in r.blocks:
            for inner in b.operations:
                names.append(inner.operation.name)
                names.extend(_body_ops(inner.operation))
    return names


def _is_mul_add(body: list[str]) -> bool:
    ops = [n for n in body if n != "linalg.yield" and not n.startswith(("arith.ext", "arith.trunc", "arith.sitofp",
                                                                         "arith.uitofp", "arith.fpto"))]
    return sorted(ops) in (["arith.addf", "arith.mulf"], ["arith.addi", "arith.muli"])


def classify_generic(op: ir.Operation) -> str:
    its = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    maps = _maps(op)
    n_out = len(op.results) or 1
    ins, outs = maps[:-n_out], maps[-n_out:]
    body = _body_ops(op)
    data_dependent = any(n in ("tensor.extract", "linalg.index") for n in body)
    if any("reduction" in i for i in its):
        if _is_mul_add(body) and len(ins) == 2:
            return "output_fusable"
        return "reduction"
    if not all("parallel" in i for i in its):
        return "opaque"
    if data_dependent:
        return "injective"
    if all(is_identity(m) for m in maps):
        return "elementwise"
    if all(is_identity(m) for m in outs) and all(is_identity(m) or is_broadcast(m) for m in ins):
        return "broadcast"
    return "injective"


def classify_op(op: ir.Operation) -> str:
    name = op.name
    if name == "linalg.generic":
        return classify_generic(op)
    if name in NAMED:
        return NAMED[name]
    if name.startswith(MATMUL_LIKE):
        return "output_fusable"
    if name.startswith(POOLING):
        return "reduction"
    if name in NEUTRAL or name.startswith(NEUTRAL_PREFIXES):
        return "elementwise"
    if name.startswith("linalg."):
        # Other named elementwise ops (linalg.add, linalg.exp, ...) have identity maps.
        return "elementwise" if name.split(".", 1)[1] in ELEMENTWISE_NAMED else "opaque"
    return "opaque"


ELEMENTWISE_NAMED = frozenset({
    "add", "sub", "mul", "div", "div_unsigned", "max", "min", "exp", "log", "abs", "ceil", "floor", "negf",
    "reciprocal", "round", "sqrt", "rsqrt", "square", "tanh", "erf", "powf", "select", "elementwise",
})


def classify_kernel(func_op) -> str:
    """The pattern kind of a kernel `func.func`: one of `KINDS`."""
    func_op = func_op.operation if hasattr(func_op, "operation") else func_op
    kinds = []
    for r in func_op.regions:
        for b in r.blocks:
            for op in b.operations:
                kinds.append(classify_op(op.operation))
    return strongest(kinds)


# --- Kernel structure for fusion -----------------------------------------------------------------
# The kernel shapes that relax-fuse-kernels combines, read from the same classification: an
# elementwise kernel is one generic of a parallel kind returned as is; a reduction kernel is a fill
# and one generic of kind "reduction" (through the collapse/expand of a keepdims reduction).

PARALLEL_KINDS = frozenset({"elementwise", "broadcast", "injective"})
ELEMENTWISE_TOP = frozenset({"arith.constant", "tensor.dim", "tensor.empty", "linalg.generic", "func.return"})


def top_ops(func: ir.Operation) -> list[ir.Operation]:
    """The operations of a kernel's body block (not nested ones)."""
    if not func.regions[0].blocks:
        return []
    return [o.operation for o in func.regions[0].blocks[0].operations]


def func_type(f: ir.Operation) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)


def is_elementwise_kernel(func: ir.Operation) -> bool:
    """One all-parallel, single-result linalg.generic whose result the kernel returns."""
    ops = top_ops(func)
    if not ops or any(o.name not in ELEMENTWISE_TOP for o in ops):
        return False
    gens = [o for o in ops if o.name == "linalg.generic"]
    if len(gens) != 1:
        return False
    g = gens[0]
    if len(g.results) != 1 or "iterator_types" not in g.attributes:
        return False
    if not ir.ArrayAttr(g.attributes["iterator_types"]) or classify_generic(g) not in PARALLEL_KINDS:
        return False
    ret = ops[-1]
    if ret.name != "func.return" or len(ret.operands) != 1 or ret.operands[0] != g.results[0]:
        return False
    # Results must be ranked tensors (the fusion builds a tensor.empty of that type).
    return all(isinstance(t, ir.RankedTensorType) for t in func_type(func).results)


def reduction_parts(func: ir.Operation):
    """(fill, generic) of a reduction kernel: one `linalg.fill` of the out argument and one
    single-result `linalg.generic` with reduction iterators accumulating into it, returned."""
    ops = top_ops(func)
    if not ops or any(o.name not in ELEMENTWISE_TOP | REDUCTION_EXTRA for o in ops):
        return None
    gens = [o for o in ops if o.name == "linalg.generic"]
    fills = [o for o in ops if o.name == "linalg.fill"]
    if len(gens) != 1 or len(fills) != 1 or len(gens[0].results) != 1:
        return None
    g, fill = gens[0], fills[0]
    if classify_generic(g) not in ("reduction", "output_fusable"):  # some iterator is a reduction
        return None
    ret = ops[-1]
    if ret.name != "func.return" or len(ret.operands) != 1 or through(ret.operands[0], "tensor.expand_shape") != g.results[0]:
        return None
    if g.operands[len(g.operands) - 1] != fill.results[0]:
        return None
    return fill, g


# keepdims reductions reduce into the collapsed destination and expand the result (ops/reduce.py)
REDUCTION_EXTRA = frozenset({"linalg.fill", "tensor.collapse_shape", "tensor.expand_shape"})


def through(v: ir.Value, reshape: str) -> ir.Value:
    """`v`, or the source of the `reshape` op that defines it."""
    if isinstance(v, ir.OpResult):
        o = v.owner.operation if hasattr(v.owner, "operation") else v.owner
        if o.name == reshape:
            return o.operands[0]
    return v


def is_reduction_kernel(func: ir.Operation) -> bool:
    """fill + one reduction `linalg.generic` (a row reduction, possibly with a fused prologue)."""
    return reduction_parts(func) is not None and \
        all(isinstance(t, ir.RankedTensorType) for t in func_type(func).results)


def reads_whole(func: ir.Operation, j: int) -> bool:
    """The reduction kernel's generic reads its input argument `j` over the whole iteration
    space (identity indexing map): a fused elementwise producer is then computed once per element,
    never broadcast."""
    parts = reduction_parts(func)
    if parts is None:
        return False
    _, g = parts
    arg = func.regions[0].blocks[0].arguments[j]
    maps = list(ir.ArrayAttr(g.attributes["indexing_maps"]))
    for k, v in enumerate(list(g.operands)[:-1]):
        if v == arg:
            m = ir.AffineMapAttr(maps[k]).value
            if not m.is_permutation or any(str(e) != f"d{i}" for i, e in enumerate(m.results)):
                return False
    return True
