"""What every converter shares: dtype tables, readers of jax-MLIR attributes and types, our
types and attributes, and `Val` (an imported value: relax SSA value, dtype, symbolic dims, and the
known integer values of a shape computation).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from mlir import ir

from relax_mlir.dialect.types import TensorType
from relax_mlir.shape import Expr, const


_DTYPES = {"f16", "bf16", "f32", "f64", "i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"}
_FLOATS = ("f16", "bf16", "f32", "f64")
_NP_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
              "i32": np.int32, "i64": np.int64, "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32,
              "ui64": np.uint64}


def _is_name(s: str) -> bool:
    """A symbol name: an ASCII identifier."""
    return s.isascii() and s.isidentifier()


# Set while a converter runs on the real and imaginary parts of complex values (complex.py): a
# complex element type then reads as its part's type.
_REAL_PARTS = [False]


def _jax_dtype(t) -> str:
    """The relax dtype name of a jax-MLIR element type, or the type's text when relax has none."""
    from jaxlib.mlir import ir as jir

    if _REAL_PARTS[0] and isinstance(t, jir.ComplexType):
        t = jir.ComplexType(t).element_type
    if isinstance(t, jir.IntegerType):
        if t.is_signless and t.width in (1, 8, 16, 32, 64):
            return f"i{t.width}"
        if t.is_unsigned and t.width in (8, 16, 32, 64):
            return f"ui{t.width}"
    else:
        for cls, name in ((jir.F16Type, "f16"), (jir.BF16Type, "bf16"), (jir.F32Type, "f32"), (jir.F64Type, "f64")):
            if isinstance(t, cls):
                return name
    return str(t)  # unsupported: named in the error message only


def _ints(attr) -> list[int]:
    """The integers of a jax-MLIR `array<i64: ...>`, `dense<...>` or integer attribute."""
    from jaxlib.mlir import ir as jir

    if isinstance(attr, jir.DenseI64ArrayAttr):
        return [int(x) for x in attr]
    if isinstance(attr, jir.DenseIntElementsAttr):
        if attr.is_splat:
            v = int(attr.get_splat_value().value)
            return [v] * max(1, int(np.prod(jir.ShapedType(attr.type).shape)))
        return [int(attr[i]) for i in range(len(attr))]
    if isinstance(attr, jir.IntegerAttr):
        return [int(attr.value)]
    raise ValueError(f"expected integers, got the attribute {attr}")


def _string(attr) -> str:
    """The value of a jax-MLIR string or flat symbol reference attribute."""
    from jaxlib.mlir import ir as jir

    if isinstance(attr, (jir.StringAttr, jir.FlatSymbolRefAttr)):
        return attr.value
    raise ValueError(f"expected a string, got the attribute {attr}")


def _elt(dt: str) -> ir.Type:
    if dt == "f16":
        return ir.F16Type.get()
    if dt == "bf16":
        return ir.BF16Type.get()
    if dt == "f32":
        return ir.F32Type.get()
    if dt == "f64":
        return ir.F64Type.get()
    if dt.startswith("ui"):
        return ir.IntegerType.get_unsigned(int(dt[2:]))
    return ir.IntegerType.get_signless(int(dt[1:]))


def _ttype(dims, dtype: str) -> ir.Type:
    """The `!relax.tensor` of `dims` (Exprs, None: unknown), from the dialect layer's type cache."""
    return TensorType(tuple(dims), dtype).to_mlir()


def _qtype(rank: int, dtype: str) -> ir.Type:
    return _ttype([None] * rank, dtype)


def _attr(v: Any) -> ir.Attribute:
    """A converter's attribute value (int, bool, Expr, list of them, or an MLIR attribute) as an
    attribute of the relax op; a symbolic Expr is its expression string."""
    if isinstance(v, ir.Attribute):
        return v
    if isinstance(v, bool):
        return ir.BoolAttr.get(v)
    if isinstance(v, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)
    if isinstance(v, Expr):
        return _attr(v.value) if v.is_const else ir.StringAttr.get(str(v))
    if isinstance(v, (list, tuple)):
        return ir.ArrayAttr.get([_attr(x) for x in v])
    if v is None:
        raise ValueError("shape has an unknown dim")
    raise TypeError(f"no relax attribute for {v!r}")


def _dtype_attr(dt: str) -> ir.Attribute:
    return ir.TypeAttr.get(_elt(dt))


def _is_symbolic(v: Any) -> bool:
    if isinstance(v, Expr):
        return not v.is_const
    if isinstance(v, (list, tuple)):
        return any(_is_symbolic(x) for x in v)
    return False


def _subs(v: Any, mapping: dict[str, Expr]) -> Any:
    if isinstance(v, Expr):
        return v.subs(mapping)
    if isinstance(v, (list, tuple)):
        return [_subs(x, mapping) for x in v]
    return v


def _scalar_attr(dt: str, v) -> ir.Attribute:
    """A Python number as an element attribute of dtype `dt`."""
    if dt in _FLOATS:
        return ir.FloatAttr.get(_elt(dt), float(v))
    return ir.IntegerAttr.get(_elt(dt), int(v))


def _splat(dims: list[int], dt: str, v) -> ir.DenseElementsAttr:
    return ir.DenseElementsAttr.get_splat(ir.RankedTensorType.get(dims, _elt(dt)), _scalar_attr(dt, v))


def _dense_from_jax(attr, dims: list[int], dt: str) -> ir.Attribute:
    """A jax-MLIR dense elements attribute as ours, through its values (numpy's buffer)."""
    from jaxlib.mlir import ir as jir

    if not isinstance(attr, jir.DenseElementsAttr):
        raise ValueError(f"a constant value of kind {type(attr).__name__} is not supported")
    if attr.is_splat:
        s = attr.get_splat_value()
        return _splat(dims, dt, bool(s.value) if isinstance(s, jir.BoolAttr) else s.value)
    ty = ir.RankedTensorType.get(dims, _elt(dt))
    if dt == "i1":
        bits = np.packbits(np.asarray(attr, dtype=np.bool_).reshape(-1), bitorder="little")
        return ir.DenseElementsAttr.get(bits, type=_elt(dt), shape=dims)
    if dt == "bf16":
        # jax's bindings give no bf16 elements (no buffer, no indexing): the attribute's printed
        # form, parsed once in our context, is the only way across.
        return ir.Attribute.parse(str(attr))
    arr = np.ascontiguousarray(np.asarray(attr, dtype=_NP_DTYPES[dt]))
    return ir.DenseElementsAttr.get(arr, type=ty)


class Val:
    """An imported value: relax SSA value (or None when only known symbolically), dtype, symbolic
    dims, and `known` integer values for small int tensors of rank <= 1."""

    __slots__ = ("value", "dtype", "dims", "known", "signs", "diag")

    def __init__(self, value, dtype, dims, known=None):
        self.value = value
        self.dtype = dtype
        self.dims = list(dims)
        self.known = known
        self.signs = None  # eigenvectors' signs it carries (signs.py)
        self.diag = None  # (p, q): zero wherever its indices along axes p and q differ (signs.py)


class CVal:
    """An imported complex value: its real and imaginary parts, two real `Val`s of one shape."""

    __slots__ = ("re", "im")
    value = None  # never a single relax value
    known = None

    def __init__(self, re: Val, im: Val):
        self.re = re
        self.im = im

    @property
    def dims(self) -> list:
        return self.re.dims

    @property
    def dtype(self) -> str:
        return f"complex<{self.re.dtype}>"


def complex_part_type(t) -> str | None:
    """The part type ("f32", "f64") of a jax-MLIR complex tensor or element type, else None."""
    from jaxlib.mlir import ir as jir

    if isinstance(t, jir.ShapedType):
        t = t.element_type
    if not isinstance(t, jir.ComplexType):
        return None
    return _jax_dtype(jir.ComplexType(t).element_type)


def _jax_ttype(t):
    """(dims, dtype) of a jax-MLIR ranked tensor type: Expr dims, None where dynamic."""
    from jaxlib.mlir import ir as jir
    rt = jir.RankedTensorType(t)
    dt = _jax_dtype(rt.element_type)
    dims = [None if rt.is_dynamic_dim(i) else const(rt.shape[i]) for i in range(rt.rank)]
    return dims, dt


def _res(op, i=0):
    return _jax_ttype(op.results[i].type)


def _merge_dims(static, *cands):
    out = []
    for i, d in enumerate(static):
        if d is None:
            for c in cands:
                if c is not None and i < len(c) and c[i] is not None:
                    d = c[i]
                    break
        out.append(d)
    return out


def _known_ok(vals):
    return all(v.known is not None for v in vals)


def _splat_value(v):
    """The Python value of a splat stablehlo.constant defining `v`, or None."""
    from jaxlib.mlir import ir
    owner = v.owner
    if getattr(owner, "name", None) != "stablehlo.constant" or complex_part_type(v.type) is not None:
        return None  # (jax's bindings cannot read a complex elements attribute)
    attr = owner.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
        return None
    s = attr.get_splat_value()  # attributes come back downcast
    if isinstance(s, ir.BoolAttr):
        return bool(s.value)
    if isinstance(s, (ir.FloatAttr, ir.IntegerAttr)):
        return s.value
    return None


def _emit_multi(im, opname, operands, results, attrs) -> list[Val]:
    """Build a relax op with several results ((dims, dtype) each) at the current op's location."""
    values = [im.use(o) for o in operands]
    op = ir.Operation.create(opname, results=[_qtype(len(d), dt) for d, dt in results], operands=values,
                             attributes={k: _attr(v) for k, v in attrs.items()}, loc=im.loc)
    for k, v in attrs.items():
        if _is_symbolic(v):
            im.symbolic_attrs.append((op, k, v))
    return [Val(r, dt, d) for r, (d, dt) in zip(op.results, results)]


def _body_ops(op, i=0):
    return [o for o in op.regions[i].blocks[0].operations]


def _cmp_info(o):
    """(direction, compare type) of a stablehlo.compare."""
    from jaxlib.mlir.dialects import stablehlo as hlo

    ct = o.attributes["compare_type"] if "compare_type" in o.attributes else None
    return (hlo.ComparisonDirectionAttr(o.attributes["comparison_direction"]).value,
            hlo.ComparisonTypeAttr(ct).value if ct is not None else None)


def _owner(v):
    o = v.owner
    return o if getattr(o, "name", None) is not None and not hasattr(o, "arguments") else None


def _bools(attr) -> list[bool]:
    from jaxlib.mlir import ir as jir

    if isinstance(attr, jir.DenseBoolArrayAttr):
        return [bool(v) for v in attr]
    return [bool(v) for v in _ints(attr)]
