"""Typed Python views of the relax dialect's dynamic (IRDL) types.

MLIR 22's Python bindings expose no parameter accessors for IRDL types, so a view is parsed once
from the type's text and cached per context by the type's uniqued pointer.

Text forms (the dialect's contract with other tools and tests):
  !relax.tensor<["n", 64], f32>     known rank; a dim is an integer, a symbolic expression in a
                                    string ("2*n + 1"), or "?" (unknown)
  !relax.unranked_tensor<f32>       unknown rank (refined by relax.match_cast)
  !relax.shape<["n", 4]>            a shape value (relax.shape_of)
  !relax.prim<"n">                  a symbolic integer value (Relax's PrimValue); "?" if unknown
  !relax.storage                    a storage block of the memory planner
"""
from __future__ import annotations

import ctypes
import re
import weakref
from dataclasses import dataclass
from typing import Iterable, Sequence

from mlir import ir

from relax_mlir.shape import Expr, parse as parse_expr

DTYPES = ("f32", "f16", "bf16", "f64", "i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64")
FLOAT_DTYPES = frozenset({"f32", "f16", "bf16", "f64"})
INT_DTYPES = frozenset({"i1", "i8", "i16", "i32", "i64"})



def is_unsigned(dtype: str) -> bool:
    """True for the unsigned integer dtypes (ui8 .. ui64)."""
    return dtype.startswith("ui")


def signless(dtype: str) -> str:
    """The signless type kernels compute an element type in (ui32 -> i32; others unchanged)."""
    return dtype[1:] if dtype.startswith("ui") else dtype


Dim = Expr | None  # None is an unknown dim ("?")

# Size limits, checked by the verifier where a type is read (and on every deduced result type):
# a static dim lies in [0, MAX_DIM], and the static part of a tensor's size (the product of its
# static dims times the element size) stays within MAX_BYTES, so that every size and offset
# computed from it, in Python or in native code, fits in int64 with room for a symbolic factor.
MAX_DIM = 2 ** 40 - 1
MAX_BYTES = 2 ** 48
ITEM_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
              "ui8": 1, "ui16": 2, "ui32": 4, "ui64": 8}


def _dim_text(d: Dim) -> str:
    if d is None:
        return '"?"'
    if d.is_const:
        return str(d.value)
    return f'"{d}"'


def dims_text(dims: Sequence[Dim]) -> str:
    return "[" + ", ".join(_dim_text(d) for d in dims) + "]"


def as_dim(x: int | str | Expr | None) -> Dim:
    if x is None:
        return None
    if isinstance(x, str) and x.strip() == "?":
        return None
    return Expr.from_value(x)


@dataclass(frozen=True, slots=True)
class TensorType:
    """A `!relax.tensor` (dims is a tuple) or `!relax.unranked_tensor` (dims is None)."""

    dims: tuple[Dim, ...] | None
    dtype: str

    @staticmethod
    def of(dims: Iterable[int | str | Expr | None] | None, dtype: str) -> "TensorType":
        return TensorType(None if dims is None else tuple(as_dim(d) for d in dims), dtype)

    @property
    def rank(self) -> int | None:
        return None if self.dims is None else len(self.dims)

    @property
    def known(self) -> bool:
        """True when the rank and every dim are known (possibly symbolic)."""
        return self.dims is not None and all(d is not None for d in self.dims)

    def symbols(self) -> frozenset[str]:
        out: set[str] = set()
        for d in self.dims or ():
            if d is not None:
                out |= d.symbols()
        return frozenset(out)

    def with_dims(self, dims) -> "TensorType":
        return TensorType.of(dims, self.dtype)

    def with_dtype(self, dtype: str) -> "TensorType":
        return TensorType(self.dims, dtype)

    def subs(self, mapping) -> "TensorType":
        if self.dims is None:
            return self
        return TensorType(tuple(None if d is None else d.subs(mapping) for d in self.dims), self.dtype)

    def __str__(self) -> str:
        if self.dims is None:
            return f"!relax.unranked_tensor<{self.dtype}>"
        return f"!relax.tensor<{dims_text(self.dims)}, {self.dtype}>"

    def to_mlir(self) -> ir.Type:
        return _to_mlir(str(self))


@dataclass(frozen=True, slots=True)
class ShapeType:
    """A `!relax.shape<[dims]>` value."""

    dims: tuple[Dim, ...]

    def __str__(self) -> str:
        return f"!relax.shape<{dims_text(self.dims)}>"

    def to_mlir(self) -> ir.Type:
        return _to_mlir(str(self))


@dataclass(frozen=True, slots=True)
class PrimType:
    """A `!relax.prim<"expr">` symbolic integer value."""

    value: Dim

    def __str__(self) -> str:
        return f'!relax.prim<"{"?" if self.value is None else self.value}">'

    def to_mlir(self) -> ir.Type:
        return _to_mlir(str(self))


@dataclass(frozen=True, slots=True)
class StorageType:
    def __str__(self) -> str:
        return "!relax.storage"

    def to_mlir(self) -> ir.Type:
        return _to_mlir(str(self))


@dataclass(frozen=True, slots=True)
class OtherType:
    """Any non-relax type (index, builtin tensors, tuples ...), kept as its MLIR text."""

    text: str

    def __str__(self) -> str:
        return self.text

    def to_mlir(self) -> ir.Type:
        return _to_mlir(self.text)


RelaxType = TensorType | ShapeType | PrimType | StorageType | OtherType

# Per-context caches of types (text -> type, type -> view). They hold no Python object of the
# context or of its types: a cached `ir.Type` keeps its context alive, and with it every type,
# attribute and the context's thread pool, for the life of the process (2.8 MiB and one thread
# per core leaked per compile() before). A type is held as its C pointer (capsule / integer):
# MLIR types are uniqued and live as long as their context, whose death drops its entries.
_PER_CONTEXT: dict[int, tuple[weakref.ref, dict[str, object], dict[int, "RelaxType"]]] = {}
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_TYPE_CAPSULE = b"mlir.ir.Type._CAPIPtr"


def _caches(ctx: ir.Context) -> tuple[weakref.ref, dict, dict]:
    key = id(ctx)
    entry = _PER_CONTEXT.get(key)
    if entry is None or entry[0]() is not ctx:
        entry = (weakref.ref(ctx, lambda _ref, key=key, pop=_PER_CONTEXT.pop: pop(key, None)), {}, {})
        _PER_CONTEXT[key] = entry
    return entry


def _to_mlir(text: str) -> ir.Type:
    texts = _caches(ir.Context.current)[1]
    capsule = texts.get(text)
    if capsule is not None:
        return ir.Type._CAPICreate(capsule).maybe_downcast()
    t = ir.Type.parse(text)
    texts[text] = t._CAPIPtr
    return t


_DIM_RE = re.compile(r'\s*(?:"([^"]*)"|(-?\d+))\s*(?:,|$)')


def _parse_dims(body: str) -> tuple[Dim, ...]:
    body = body.strip()
    assert body.startswith("[") and body.endswith("]"), body
    inner = body[1:-1].strip()
    if not inner:
        return ()
    dims: list[Dim] = []
    pos = 0
    while pos < len(inner):
        m = _DIM_RE.match(inner, pos)
        if m is None:
            raise ValueError(f"malformed dims {body!r}")
        s, n = m.group(1), m.group(2)
        if n is not None:
            dims.append(Expr.from_value(int(n)))
        else:
            dims.append(None if s.strip() == "?" else parse_expr(s))
        pos = m.end()
    return tuple(dims)


def _split_last_comma(body: str) -> tuple[str, str]:
    i = body.rfind(",")
    return body[:i], body[i + 1 :].strip()


def check_tensor_size(t: "TensorType") -> str | None:
    """Why `t`'s static dims break the size limits (MAX_DIM, MAX_BYTES), or None."""
    size = ITEM_BYTES.get(t.dtype, 8)
    for j, d in enumerate(t.dims or ()):
        if d is None or not d.is_const:
            continue
        v = d.value
        if v < 0:
            return f"has a negative dim {v} (dim {j})"
        if v > MAX_DIM:
            return f"has dim {j} = {v}, above the largest supported dim {MAX_DIM} (2^40 - 1)"
        size *= v
    if size > MAX_BYTES:
        return f"has {size} bytes of static size, above the supported {MAX_BYTES} (2^48)"
    return None


def parse_type_text(text: str) -> RelaxType:
    if text.startswith("!relax.tensor<"):
        dims, dtype = _split_last_comma(text[len("!relax.tensor<") : -1])
        t = TensorType(_parse_dims(dims), dtype)
        why = check_tensor_size(t)
        if why:
            raise ValueError(why)
        return t
    if text.startswith("!relax.unranked_tensor<"):
        return TensorType(None, text[len("!relax.unranked_tensor<") : -1].strip())
    if text.startswith("!relax.shape<"):
        st = ShapeType(_parse_dims(text[len("!relax.shape<") : -1]))
        why = check_tensor_size(TensorType(st.dims, "i8"))
        if why:
            raise ValueError(why.replace("bytes of static size", "static elements"))
        return st
    if text.startswith("!relax.prim<"):
        s = text[len("!relax.prim<") : -1].strip().strip('"')
        return PrimType(None if s == "?" else parse_expr(s))
    if text == "!relax.storage":
        return StorageType()
    return OtherType(text)


class TypeTextError(ValueError):
    """A relax type whose parameters do not follow the dialect's text form."""


def view(t: ir.Type) -> RelaxType:
    """The cached Python view of an MLIR type."""
    views = _caches(t.context)[2]
    key = _capsule_pointer(t._CAPIPtr, _TYPE_CAPSULE)
    v = views.get(key)
    if v is None:
        text = str(t)
        try:
            v = parse_type_text(text)
        except ValueError as e:
            raise TypeTextError(f"invalid type {text}: {e}") from None
        views[key] = v
    return v


def is_tensor(t: ir.Type) -> bool:
    return isinstance(view(t), TensorType)


def dtype_to_mlir(dtype: str) -> ir.Type:
    return _to_mlir(dtype)


def builtin_tensor_text(tt: TensorType) -> str:
    """The builtin tensor type a relax tensor lowers to (`tensor<?x64xf32>`; unsigned integers
    become the signless type of their width, as arith and the kernels compute on)."""
    if tt.dims is None:
        return f"tensor<*x{signless(tt.dtype)}>"
    parts = [str(d.value) if (d is not None and d.is_const) else "?" for d in tt.dims]
    return "tensor<" + "".join(p + "x" for p in parts) + signless(tt.dtype) + ">"


def builtin_memref_text(tt: TensorType) -> str:
    return "mem" + builtin_tensor_text(tt).replace("tensor<", "ref<", 1)
