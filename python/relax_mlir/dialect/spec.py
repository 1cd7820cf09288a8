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
    """Register an op class: gathers its operand/result/attribute declarations."""
    assert cls.name.startswith(("relax.", "relax_v.")), cls.name
    cls.operands_ = _collect(cls, Operand)
    cls.results_ = _collect(cls, Result)
    cls.attributes_ = _collect(cls, Attr)
    cls.regions_ = _collect(cls, Region)
    assert cls.name not in OPS, f"duplicate op {cls.name}"
    OPS[cls.name] = cls
    return cls


# Ops with operands (or results) of differing types in one variadic group: IRDL in MLIR 22 binds
# one constraint variable per group, forcing all its types equal, so these live in the
# unregistered sibling namespace `relax_v` and are verified by the Python verifier only.
VARIADIC_NAMESPACE = "relax_v."


def short_name(opname: str) -> str:
    return opname.split(".", 1)[1]


DeduceFn = Callable[[OpInfo], list[RelaxType]]
