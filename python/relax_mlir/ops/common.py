"""Shape helpers shared by the deduction rules of every op family."""
from __future__ import annotations

from typing import Sequence

from relax_mlir.dialect.spec import DeduceError, OpInfo
from relax_mlir.dialect.types import Dim, FLOAT_DTYPES, TensorType
from relax_mlir.shape import Expr, Facts, const

ONE = const(1)
ZERO = const(0)


def fmt(d: Dim) -> str:
    return "?" if d is None else str(d)


def fmt_dims(dims: Sequence[Dim] | None) -> str:
    if dims is None:
        return "[*]"
    return "[" + ", ".join(fmt(d) for d in dims) + "]"


def dims_equal(a: Dim, b: Dim, facts: Facts) -> bool:
    """True when a and b are provably the same value (unknown dims are never provably equal)."""
    if a is None or b is None:
        return False
    return a == b or facts.prove_eq(a, b)


def dims_differ(a: Dim, b: Dim, facts: Facts) -> bool:
    """True when a and b provably differ (unknown dims never provably differ)."""
    if a is None or b is None:
        return False
    if a.is_const and b.is_const:
        return a.value != b.value
    return facts.prove_lt(a, b) or facts.prove_gt(a, b)


def require_rank(t: TensorType, what: str) -> tuple[Dim, ...]:
    if t.dims is None:
        raise DeduceError(f"{what} has unknown rank; refine it with relax.match_cast first")
    return t.dims


def require_float(t: TensorType, what: str) -> None:
    if t.dtype not in FLOAT_DTYPES:
        raise DeduceError(f"{what} must have a floating-point element type, got {t.dtype}")


def require_same_dtype(ts: Sequence[TensorType], names: Sequence[str]) -> str:
    dt = ts[0].dtype
    for t, n in zip(ts[1:], names[1:]):
        if t.dtype != dt:
            raise DeduceError(f"element types differ: {names[0]} is {dt}, {n} is {t.dtype}")
    return dt


def int_array(op: OpInfo, name: str, rank: int | None = None, default: int = 1,
              minimum: int | None = None) -> list[int]:
    """Attribute `name` of `op` as a list of integers (bools are not), or DeduceError naming it.
    Absent: `rank` copies of `default` (an empty list without a rank). `rank`: the length it must
    have; `minimum`: the least value an element may take."""
    v = op.attr(name)
    if v is None:
        return [] if rank is None else [default] * rank
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
        raise DeduceError(f"attribute '{name}' must be an array of integers, got {v!r}")
    if rank is not None and len(v) != rank:
        raise DeduceError(f"attribute '{name}' has {len(v)} elements, expected {rank}")
    if minimum is not None and any(x < minimum for x in v):
        raise DeduceError(f"attribute '{name}' must hold integers >= {minimum}, got {v}")
    return list(v)


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1) or (rank == 0 and axis not in (0, -1)):
        raise DeduceError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def normalize_axes(axes: Sequence[int], rank: int, what: str = "axes") -> list[int]:
    out = [normalize_axis(a, rank, what) for a in axes]
    if len(set(out)) != len(out):
        raise DeduceError(f"{what} {list(axes)} repeat an axis")
    return out


def broadcast_shapes(shapes: Sequence[tuple[Dim, ...]], names: Sequence[str], facts: Facts) -> tuple[Dim, ...]:
    """Numpy broadcasting with symbols: n vs 1 -> n; n vs m is an error unless provably equal."""
    rank = max(len(s) for s in shapes)
    out: list[Dim] = []
    for i in range(rank):
        cur: Dim = ONE
        cur_name = None
        cur_is_set = False
        for s, nm in zip(shapes, names):
            j = i - (rank - len(s))
            if j < 0:
                continue
            d = s[j]
            if not cur_is_set:
                cur, cur_name, cur_is_set = d, nm, True
                continue
            if d is not None and d.is_const and d.value == 1:
                continue
            if cur is not None and cur.is_const and cur.value == 1:
                cur, cur_name = d, nm
                continue
            if d is None or cur is None:
                cur = cur if d is None else d
                # one unknown: the result is the known one, unless it may be 1
                continue
            if dims_equal(cur, d, facts):
                continue
            raise DeduceError(
                f"broadcast dimensions differ: {cur} vs {d} (dim {i} of the result, from {cur_name} and {nm})"
                + _symbols_note(cur, d))
        out.append(cur)
    return tuple(out)


def _symbols_note(*dims: Dim) -> str:
    syms = sorted(set().union(*[d.symbols() for d in dims if d is not None]))
    return f"; symbols: {', '.join(syms)}" if syms else ""


def product(dims: Sequence[Dim]) -> Dim:
    p: Expr = ONE
    for d in dims:
        if d is None:
            return None
        p = p * d
    return p


def symbols_note(*dims: Dim) -> str:
    return _symbols_note(*dims)


# --- unknown ("?") operand dims --------------------------------------------------------------
# An op's deduction may meet a "?" operand dim and still produce a known result (a broadcast
# against a known dim, a reshape, a matmul's inner dim). `relax-infer-shapes` then asks the op
# what each "?" operand dim must be, and refines the operand with a `relax.match_cast` (checked
# at run time by relax-lower-shapes) before the op: no kernel ever reads an operand at a size
# nobody checked. Per operand, per dim, a rule returns one of:
#   an Expr  the dim must equal it (the match_cast pattern);
#   FREE     the op's kernel reads the dim at run time and is correct for every value;
#   None     unresolved: the op cannot say (the program is refused if its results are known).

class _Free:
    def __repr__(self):
        return "FREE"


FREE = _Free()


def aligned_requirements(dims: Sequence[Dim] | None, result: Sequence[Dim] | None) -> tuple:
    """Numpy broadcasting: a "?" operand dim must equal the result dim it is aligned with (a "?"
    that is 1 at run time is refused rather than broadcast)."""
    if dims is None:
        return ()
    if result is None or len(result) < len(dims):
        return (None,) * len(dims)
    off = len(result) - len(dims)
    return tuple(result[off + j] for j in range(len(dims)))


def has_division(e: Expr) -> bool:
    """True when evaluating e divides by a symbolic value (floordiv/mod/ceildiv of a symbol)."""
    from relax_mlir.shape.expr import _CALLS

    for mono, _ in e.terms:
        for a in mono:
            node = _CALLS.get(a)
            if node is None:
                continue
            if node.kind in ("floordiv", "mod") and not (node.args[1].is_const):
                return True
            if any(has_division(x) for x in node.args):
                return True
    return False


# --- splat constants (canonicalization) --------------------------------------------------------
# The JAX importer writes a scalar constant used at a shape as relax.constant (0-d) ->
# relax.reshape -> relax.broadcast_to. The canonicalization patterns of the elementwise ops and of
# reshape/broadcast_to fold such chains; these helpers are what they share.

VIEW_OPS = ("relax.reshape", "relax.broadcast_to")


def splat_source(v):
    """The `relax.constant` op with a splat value behind `v`, through reshape/broadcast_to views
    (which never change a splat's element), or None."""
    from mlir import ir

    while isinstance(v, ir.OpResult):
        o = v.owner
        if o.name in VIEW_OPS:
            v = o.operands[0]
            continue
        if o.name != "relax.constant" or "value" not in o.attributes:
            return None
        a = o.attributes["value"]
        return o if isinstance(a, ir.DenseElementsAttr) and a.is_splat else None
    return None


def splat_constant(source, dims, loc):
    """A new `relax.constant` (at the current insertion point) of static `dims` holding the splat
    element of the constant op `source`."""
    from mlir import ir

    a = ir.DenseElementsAttr(source.attributes["value"])
    dtype = ir.RankedTensorType(a.type).element_type
    value = ir.DenseElementsAttr.get_splat(ir.RankedTensorType.get(list(dims), dtype), a.get_splat_value())
    t = TensorType.of(list(dims), str(dtype))
    return ir.Operation.create("relax.constant", results=[t.to_mlir()], attributes={"value": value}, loc=loc)
