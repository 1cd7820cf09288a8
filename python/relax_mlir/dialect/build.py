"""Building relax graph ops through the bindings, for rewrite patterns and passes: the result
types come from the operands' known relax types (no deduction runs here; `relax-infer-shapes`
checks them afterwards), attributes from Python values."""
from __future__ import annotations

from collections.abc import Sequence

from mlir import ir

from relax_mlir.dialect.types import TensorType, view
from relax_mlir.shape import Expr

__all__ = ["array_attr", "make", "matmul", "permute", "reshape"]


def array_attr(values: Sequence[int | Expr]) -> ir.ArrayAttr:
    """Integers and dims as an array attribute: i64 integers, expression strings where symbolic."""
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.IntegerAttr.get(i64, v) if isinstance(v, int) else
                             ir.IntegerAttr.get(i64, v.value) if v.is_const else ir.StringAttr.get(str(v))
                             for v in values])


def make(name: str, operands: Sequence[ir.Value], dims, dtype: str, attrs: dict | None = None,
         loc: ir.Location | None = None) -> ir.Value:
    """The single result of a new relax op `name` of type tensor<dims, dtype>, at the current
    insertion point (and location, unless `loc`)."""
    return ir.Operation.create(name, results=[TensorType(tuple(dims), dtype).to_mlir()], operands=list(operands),
                               attributes=attrs or {}, loc=loc).results[0]


def reshape(x: ir.Value, dims, loc: ir.Location | None = None) -> ir.Value:
    """x reshaped to `dims` (x itself where its type has them already)."""
    t = view(x.type)
    if tuple(t.dims) == tuple(dims):
        return x
    return make("relax.reshape", [x], dims, t.dtype, {"shape": array_attr(dims)}, loc)


def permute(x: ir.Value, axes: Sequence[int], loc: ir.Location | None = None) -> ir.Value:
    t = view(x.type)
    return make("relax.permute_dims", [x], [t.dims[a] for a in axes], t.dtype, {"axes": array_attr(axes)}, loc)


def matmul(a: ir.Value, b: ir.Value, loc: ir.Location | None = None) -> ir.Value:
    """a @ b of matrices (or batches of them with a's batch dims)."""
    ta, tb = view(a.type), view(b.type)
    return make("relax.matmul", [a, b], (*ta.dims[:-1], tb.dims[-1]), ta.dtype, None, loc)
