"""The small declarative layer: op classes declare their IRDL signature; `dialect/irdl.py` emits IRDL.

An op is one class in `ops/<family>.py`:

    @relax_op
    class MatmulOp(OpSpec):
        '''Batched matmul, numpy semantics.'''
        name = "relax.matmul"
        lhs = operand(TENSOR); rhs = operand(TENSOR); result = result_(TENSOR)
        @classmethod
        def deduce(cls, op: OpInfo) -> list[RelaxType]: ...

IRDL holds what it can express (operand/result kinds and counts, required attribute kinds, dtypes);
`deduce()` and the Python verifier hold the rest and report at the op's location.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from mlir import ir

from relax_mlir.dialect.types import RelaxType, TensorType, view
from relax_mlir.shape import Facts


class DeduceError(Exception):
    """A shape/type deduction failure; reported as `'<op>' op <message>` at the op."""


# --- IRDL constraints --------------------------------------------------------------------------

@dataclass(frozen=True)
class Constraint:
    """An IRDL constraint, emitted as one SSA value per use (so uses are not forced equal)."""

    irdl: str  # e.g. 'irdl.base @relax::@tensor'
    doc: str


TENSOR = Constraint("irdl.base @relax::@tensor", "!relax.tensor")
ANY = Constraint("irdl.any", "any type")
SHAPE = Constraint("irdl.base @relax::@shape", "!relax.shape")
PRIM = Constraint("irdl.base @relax::@prim", "!relax.prim")
STORAGE = Constraint("irdl.base @relax::@storage", "!relax.storage")
INDEX = Constraint("irdl.is index", "index")
I1 = Constraint("irdl.is i1", "i1")

ATTR_KINDS = {
    "int": ('irdl.base "#builtin.integer"', "integer"),
    "float": ('irdl.base "#builtin.float"', "float"),
    "str": ('irdl.base "#builtin.string"', "string"),
    "array": ('irdl.base "#builtin.array"', "array"),
    "type": ('irdl.base "#builtin.type"', "type"),
    "symbol": ('irdl.base "#builtin.symbol_ref"', "symbol reference"),
    "dict": ('irdl.base "#builtin.dictionary"', "dictionary"),
    "any": ("irdl.any", "attribute"),
}


@dataclass(frozen=True)
class Operand:
    constraint: Constraint
    variadic: bool = False
    name: str = ""


@dataclass(frozen=True)
class Result:
    constraint: Constraint
    variadic: bool = False
    name: str = ""


@dataclass(frozen=True)
class Attr:
    kind: str
    optional: bool = True
    default: Any = None
    doc: str = ""
    name: str = ""


@dataclass(frozen=True)
class Region:
    name: str = ""


def operand(c: Constraint = TENSOR, *, variadic: bool = False) -> Operand:
    return Operand(c, variadic)


def result_(c: Constraint = TENSOR, *, variadic: bool = False) -> Result:
    return Result(c, variadic)


def attr(kind: str, *, optional: bool = True, default: Any = None, doc: str = "") -> Attr:
    assert kind in ATTR_KINDS, kind
    return Attr(kind, optional, default, doc)


def region() -> Region:
    return Region()


# --- attribute conversion ----------------------------------------------------------------------

def py_attr(a: ir.Attribute) -> Any:
    """An MLIR attribute as a plain Python value (int, float, str, bool, list, Type, ...)."""
    if isinstance(a, ir.BoolAttr):
        return a.value
    if isinstance(a, ir.IntegerAttr):
        return ir.IntegerAttr(a).value
    if isinstance(a, ir.StringAttr):
        return ir.StringAttr(a).value
    if isinstance(a, ir.ArrayAttr):
        return [py_attr(x) for x in ir.ArrayAttr(a)]
    if isinstance(a, ir.FloatAttr):
        return ir.FloatAttr(a).value
    if isinstance(a, ir.TypeAttr):
        return ir.TypeAttr(a).value
    if isinstance(a, ir.FlatSymbolRefAttr):
        return ir.FlatSymbolRefAttr(a).value
    if isinstance(a, ir.DictAttr):
        return {a[i].name: py_attr(a[i].attr) for i in range(len(a))}
    return a


def attr_dict(op) -> dict[str, ir.Attribute]:
    """An op's attributes by name (iterating OpAttributeMap yields names in MLIR 22)."""
    attrs = op.attributes
    return {attrs[i].name: attrs[i].attr for i in range(len(attrs))}


# --- the op view handed to deduction rules -----------------------------------------------------

class OpInfo:
    """What a deduction rule sees: operand type views, attributes, the facts in force."""

    __slots__ = ("op", "name", "operand_types", "result_types", "facts", "_attrs")

    def __init__(self, op: ir.Operation, facts: Facts, operand_types=None):
        self.op = op
        self.name = op.name
        self.operand_types: list[RelaxType] = (
            operand_types if operand_types is not None else [view(v.type) for v in op.operands]
        )
        self.result_types: list[RelaxType] = [view(r.type) for r in op.results]
        self.facts = facts
        self._attrs: dict[str, Any] | None = None

    def attr(self, name: str, default: Any = None) -> Any:
        if self._attrs is None:
            self._attrs = attr_dict(self.op)
        a = self._attrs.get(name)
        return default if a is None else py_attr(a)

    def tensor(self, i: int) -> TensorType:
        t = self.operand_types[i]
        if not isinstance(t, TensorType):
            raise DeduceError(f"operand #{i} must be a relax tensor, got {t}")
        return t


# --- the op class and registry -----------------------------------------------------------------

OPS: dict[str, type["OpSpec"]] = {}


class OpSpec:
    """Base of every relax op declaration."""

    name: ClassVar[str] = ""
    operands_: ClassVar[tuple[Operand, ...]] = ()
    results_: ClassVar[tuple[Result, ...]] = ()
    attributes_: ClassVar[tuple[Attr, ...]] = ()
    regions_: ClassVar[tuple[Region, ...]] = ()
    # Results may be written freely (not deduced): call_tir, match_cast, storage ops ...
    results_are_declared: ClassVar[bool] = False
    pure: ClassVar[bool] = True
    # Pattern classes (passes.RewritePattern) that relax-canonicalize roots at this op.
    canonicalization_patterns: ClassVar[tuple[type, ...]] = ()

    @classmethod
    def deduce(cls, op: OpInfo) -> list[RelaxType]:
        """Result types from operand types, or DeduceError."""
        return list(op.result_types)

    @classmethod
    def doc(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""


def _collect(cls: type, kind: type) -> tuple:
    """Declarations of `kind` in definition order, bases first; a subclass may override one."""
    found: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        for k, v in vars(klass).items():
            if isinstance(v, kind):
                found[k] = v
    return tuple(type(v)(**{**v.__dict__, "name": k}) for k, v in found.items())


def relax_op(cls: type[OpSpec]) -> type[OpSpec]:
    """Register an op class: gathers its operand/result/attribute declarations, and makes its
    `deduce` check the attributes first (see `check_attributes`)."""
    assert cls.name.startswith(("relax.", "relax_v.")), cls.name
    cls.operands_ = _collect(cls, Operand)
    cls.results_ = _collect(cls, Result)
    cls.attributes_ = _collect(cls, Attr)
    cls.regions_ = _collect(cls, Region)
    assert cls.name not in OPS, f"duplicate op {cls.name}"
    inner = getattr(cls.deduce.__func__, "__wrapped__", cls.deduce.__func__)

    def deduce(klass, op: OpInfo, _inner=inner):
        return _checked_deduce(klass, op, _inner)

    deduce.__wrapped__ = inner
    deduce.__doc__ = inner.__doc__
    cls.deduce = classmethod(deduce)
    OPS[cls.name] = cls
    return cls


# --- attribute checking ------------------------------------------------------------------------
#
# IRDL checks an attribute's kind (integer, array, ...) but not what an array holds; a deduction
# rule that meets `axes = ["x"]` or `shape = [1.5]` would fail inside Python. The verifier checks
# every attribute an op declares before its deduction rule runs, so each of those is a located
# `'relax.<op>' op ...` diagnostic. What an array attribute holds follows from its name:

INT_ARRAYS = frozenset({"axes", "indices", "strides", "lowered", "base_dilation", "window_dilation",
                        "lhs_dilation", "rhs_dilation"})
"""Array attributes of integers."""
DIM_ARRAYS = frozenset({"shape", "begin", "end", "sym_args", "window", "pad_lo", "pad_hi"})
"""Array attributes of dims: integers or symbolic expression strings ("?" where the op allows it)."""
DIM_SCALARS = frozenset({"start", "end", "value"})
"""`any` attributes that are one dim (an integer or an expression string), where an op declares them so."""
BOOL_SCALARS = frozenset({"keepdims"})


def _kind_of(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return type(v).__name__ if not isinstance(v, ir.Attribute) else str(v)


def _check_dim_value(name: str, v: Any, where: str) -> None:
    from relax_mlir.dialect.types import MAX_DIM
    from relax_mlir.shape import parse as parse_expr

    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise DeduceError(f"attribute '{name}' {where}must be an integer or a symbolic expression string, "
                          f"got {_kind_of(v)} {v!r}")
    if isinstance(v, int):
        if abs(v) > MAX_DIM:
            raise DeduceError(f"attribute '{name}' {where}is {v}, beyond the largest dim {MAX_DIM}")
        return
    if v.strip() == "?":
        return
    try:
        parse_expr(v)
    except (ValueError, TypeError, RecursionError) as e:
        raise DeduceError(f"attribute '{name}' {where}'{v}' is not a symbolic expression: {e}") from None


def check_attributes(cls: type[OpSpec], op: OpInfo) -> None:
    """Raise DeduceError unless every declared attribute present has the form its name promises."""
    from relax_mlir.dialect.types import MAX_DIM

    for a in cls.attributes_:
        v = op.attr(a.name)
        if v is None:
            if not a.optional:
                raise DeduceError(f"requires attribute '{a.name}'")
            continue
        if a.kind == "int" and (isinstance(v, bool) or not isinstance(v, int)):
            raise DeduceError(f"attribute '{a.name}' must be an integer, got {_kind_of(v)}")
        if a.kind == "int" and abs(v) > 2 ** 62:
            raise DeduceError(f"attribute '{a.name}' = {v} is out of range")
        if a.kind == "float" and not isinstance(v, (int, float)):
            raise DeduceError(f"attribute '{a.name}' must be a float, got {_kind_of(v)}")
        if a.kind in ("str", "symbol") and not isinstance(v, str):
            what = "a string" if a.kind == "str" else "a symbol reference (@name)"
            raise DeduceError(f"attribute '{a.name}' must be {what}, got {_kind_of(v)}")
        if a.kind == "type" and not isinstance(v, ir.Type):
            raise DeduceError(f"attribute '{a.name}' must be a type, got {_kind_of(v)}")
        if a.kind == "dict" and not isinstance(v, dict):
            raise DeduceError(f"attribute '{a.name}' must be a dictionary, got {_kind_of(v)}")
        if a.kind == "array":
            if not isinstance(v, list):
                raise DeduceError(f"attribute '{a.name}' must be an array, got {_kind_of(v)}")
            if a.name in INT_ARRAYS:
                for i, x in enumerate(v):
                    if isinstance(x, bool) or not isinstance(x, int):
                        raise DeduceError(f"attribute '{a.name}' must hold integers, element {i} is "
                                          f"{_kind_of(x)} {x!r}")
                    if abs(x) > MAX_DIM:
                        raise DeduceError(f"attribute '{a.name}' element {i} is {x}, out of range")
            elif a.name in DIM_ARRAYS:
                for i, x in enumerate(v):
                    _check_dim_value(a.name, x, f"element {i} ")
        if a.kind == "any" and a.name in DIM_SCALARS and not isinstance(v, (ir.Attribute, list, dict)):
            if isinstance(v, (int, str)) and not isinstance(v, bool):
                _check_dim_value(a.name, v, "")
            elif not (cls.name == "relax.constant"):
                raise DeduceError(f"attribute '{a.name}' must be an integer or a symbolic expression string, "
                                  f"got {_kind_of(v)} {v!r}")
        if a.kind == "any" and a.name in BOOL_SCALARS and not isinstance(v, bool):
            raise DeduceError(f"attribute '{a.name}' must be a bool (true or false), got {_kind_of(v)} {v!r}")


# Python errors a deduction rule can meet on operands or attributes that passed the checks above
# but are still ill-formed; each becomes a diagnostic at the op rather than a traceback.
_INPUT_ERRORS = (TypeError, IndexError, KeyError, ValueError, AttributeError, ZeroDivisionError, OverflowError)


def _checked_deduce(cls: type[OpSpec], op: OpInfo, inner) -> list[RelaxType]:
    from relax_mlir.dialect.types import TypeTextError, check_tensor_size

    check_attributes(cls, op)
    try:
        out = inner(cls, op)
    except (DeduceError, TypeTextError):
        raise
    except RecursionError:
        raise DeduceError("operands or attributes nest too deeply") from None
    except _INPUT_ERRORS as e:
        raise DeduceError(f"has ill-formed operands or attributes ({type(e).__name__}: {e})") from None
    for i, t in enumerate(out):
        if isinstance(t, TensorType):
            why = check_tensor_size(t)
            if why:
                raise DeduceError(f"result #{i} {why}")
    return out


# Ops with operands (or results) of differing types in one variadic group: IRDL in MLIR 22 binds
# one constraint variable per group, forcing all its types equal, so these live in the
# unregistered sibling namespace `relax_v` and are verified by the Python verifier only.
VARIADIC_NAMESPACE = "relax_v."


def short_name(opname: str) -> str:
    return opname.split(".", 1)[1]


DeduceFn = Callable[[OpInfo], list[RelaxType]]
