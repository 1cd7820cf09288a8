"""Build relax functions from Python, with symbolic dims (as TVM's BlockBuilder / `relax.frontend.nn`).

    from relax_mlir import builder as rb

    with rb.function("main", x=rb.tensor(["n", 64], "f32"), w=rb.tensor([64, 32], "f32")) as f:
        f.ret(rb.relu(rb.matmul(f.x, f.w)))
    exe = relax_mlir.compile(f.module)

There is one snake_case function per relax op (`rb.add`, `rb.reshape`, `rb.sum`, `rb.concat`, ...),
generated from the op classes in `ops/<family>.py`: operands first (a variadic group is a list), then
the op's attributes (required ones first), then keyword-only `loc`. Each builds the op through the
MLIR bindings at the current insertion point and returns its result `ir.Value` (a list for `split`),
typed by the op's own deduction rule; a deduction failure raises `CompileError` at the caller's line,
naming the op and the dims. A Python number given as an operand becomes a 0-d constant of the other
operands' element type. Several functions go into one module with `with rb.module() as m:`.
"""
from __future__ import annotations

import inspect
import sys
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

import numpy as np
from mlir import ir

import relax_mlir.ops  # noqa: F401  (registers every op class in OPS)
from relax_mlir.dialect.spec import OPS, DeduceError, OpInfo, OpSpec, short_name
from relax_mlir.dialect.types import DTYPES, INT_DTYPES, TensorType, TypeTextError, view
from relax_mlir.shape import Facts

__all__ = ["tensor", "module", "function", "constant", "match_cast", "FunctionBuilder", "ModuleBuilder"]


def tensor(dims: Sequence[int | str] | None, dtype: str = "f32") -> TensorType:
    """A `!relax.tensor` type: dims are integers, symbolic expression strings ("n", "2*n") or "?";
    None gives an unranked tensor."""
    if dtype not in DTYPES:
        raise _error(f"builder.tensor: unknown dtype {dtype!r}; the dtypes are {', '.join(DTYPES)}")
    return TensorType.of(dims, dtype)


def _error(message: str):
    from relax_mlir import CompileError

    return CompileError(message)


def _where(loc: ir.Location) -> str:
    text = str(loc)  # loc("file.py":12:0)
    if text.startswith('loc("'):
        file, _, rest = text[5:].partition('"')
        line = rest.strip(":)").split(":")[0]
        return f"{file}:{line}: "
    return ""


def _caller_location(depth: int, context: ir.Context | None = None) -> ir.Location:
    """The Python source line that called the builder function, as an MLIR location."""
    frame = sys._getframe(depth + 1)
    return ir.Location.file(frame.f_code.co_filename, frame.f_lineno, 0, context=context)


# --- modules and functions -----------------------------------------------------------------------

class ModuleBuilder:
    """A `builtin.module` under construction, in its own context; `module` is the finished
    `relax_mlir.Module` (checked by relax-verify)."""

    def __init__(self, name: str = "<builder>"):
        import relax_mlir

        self.session = relax_mlir._session(name)
        with self.session.ctx, ir.Location.unknown():
            self._module = ir.Module.create()
        self.functions: list[FunctionBuilder] = []

    @property
    def module(self):
        import relax_mlir
        from relax_mlir.passes import PassError
        from relax_mlir.transforms.infer_shapes import check_module

        for f in self.functions:
            if not f.done:
                raise _error(f"function @{f.name} has no f.ret(...)")
        op = self._module.operation
        with self.session.ctx:
            try:
                check_module(op, infer=False)
            except PassError as e:
                raise _error(f"{_where(e.op.location)}error: {e.message}") from None
            if not op.verify():
                raise _error("\n".join(d.render() for d in self.session.diags) or "the module does not verify")
        return relax_mlir.Module(self.session, op)

    def __str__(self) -> str:
        with self.session.ctx:
            return str(self._module)


_MODULES: list[ModuleBuilder] = []
_FUNCTIONS: list["FunctionBuilder"] = []


@contextmanager
def module(name: str = "<builder>") -> Iterator[ModuleBuilder]:
    """Functions built inside `with module() as m:` go into one module, `m.module`."""
    m = ModuleBuilder(name)
    _MODULES.append(m)
    try:
        yield m
    finally:
        _MODULES.pop()


class FunctionBuilder:
    """A `func.func` under construction: parameters as attributes (`f.x`) or `f.params`, `f.ret()`."""

    def __init__(self, mod: ModuleBuilder, name: str, params: dict[str, TensorType],
                 facts: Facts, loc: ir.Location):
        self.name = name
        self.module_builder = mod
        self.facts = facts
        self.done = False
        for p, t in params.items():
            if not isinstance(t, TensorType):
                raise TypeError(f"parameter '{p}' of @{name}: expected a type from builder.tensor(...), got {t!r}")
        with mod.session.ctx, loc:
            types = [t.to_mlir() for t in params.values()]
            self.op = ir.Operation.create(
                "func.func", regions=1, attributes={
                    "sym_name": ir.StringAttr.get(name),
                    "function_type": ir.TypeAttr.get(ir.FunctionType.get(types, []))},
                ip=ir.InsertionPoint(mod._module.body))
            self.block = self.op.regions[0].blocks.append(*types, arg_locs=[loc] * len(types))
        self.params = dict(zip(params, self.block.arguments))

    def __getattr__(self, name: str) -> ir.Value:
        params = self.__dict__.get("params", {})
        if name in params:
            return params[name]
        raise AttributeError(f"function @{self.__dict__.get('name')} has no parameter '{name}'")

    def ret(self, *values: ir.Value, loc: ir.Location | None = None) -> None:
        """Return `values` from the function; its result types are theirs."""
        if self.done:
            raise _error(f"function @{self.name} already returned")
        loc = loc or _caller_location(1)
        values = [_as_value(v, i, []) for i, v in enumerate(values)]
        with ir.InsertionPoint(self.block), loc:
            ir.Operation.create("func.return", operands=values)
        ft = ir.FunctionType(ir.TypeAttr(self.op.attributes["function_type"]).value)
        self.op.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(ft.inputs), [v.type for v in values]))
        self.done = True

    @property
    def module(self):
        """The finished module holding this function (`relax_mlir.Module`)."""
        return self.module_builder.module


def _int_dict(d: dict[str, int]) -> ir.DictAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.DictAttr.get({k: ir.IntegerAttr.get(i64, int(v)) for k, v in d.items()})


@contextmanager
def function(name: str, *, symbol_bounds: dict[str, int] | None = None,
             symbol_lower: dict[str, int] | None = None, loc: ir.Location | None = None,
             **params: TensorType) -> Iterator[FunctionBuilder]:
    """Build `func.func @name(params...)`; ops built inside the `with` go into its body.
    `symbol_bounds` / `symbol_lower` are the symbols' upper / lower bounds (relax.symbol_bounds)."""
    for what, bounds in (("symbol_bounds", symbol_bounds), ("symbol_lower", symbol_lower)):
        for sym, v in (bounds or {}).items():
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise _error(f"builder.function: {what}[{sym!r}] must be an integer >= 0, got {v!r}")
    mod = _MODULES[-1] if _MODULES else ModuleBuilder(name)
    loc = loc or _caller_location(2, mod.session.ctx)
    f = FunctionBuilder(mod, name, params, Facts(lower=symbol_lower, upper=symbol_bounds), loc)
    with mod.session.ctx:
        if symbol_bounds:
            f.op.attributes["relax.symbol_bounds"] = _int_dict(symbol_bounds)
        if symbol_lower:
            f.op.attributes["relax.symbol_lower"] = _int_dict(symbol_lower)
    mod.functions.append(f)
    _FUNCTIONS.append(f)
    try:
        with mod.session.ctx, ir.InsertionPoint(f.block):
            yield f
    finally:
        _FUNCTIONS.pop()
    if not f.done and sys.exc_info()[0] is None:
        raise _error(f"function @{name} has no f.ret(...)")


def _current() -> FunctionBuilder:
    if not _FUNCTIONS:
        raise RuntimeError("relax_mlir.builder: build ops inside `with builder.function(...) as f:`")
    return _FUNCTIONS[-1]


# --- attributes ----------------------------------------------------------------------------------

def _i64(v: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)


def _attr(kind: str, v: Any) -> ir.Attribute:
    """A Python value as the MLIR attribute an op declares (see dialect/spec.py ATTR_KINDS)."""
    if isinstance(v, ir.Attribute):
        return v
    if kind == "type":
        return ir.TypeAttr.get(v if isinstance(v, ir.Type) else ir.Type.parse(str(v)))
    if kind == "symbol":
        return ir.FlatSymbolRefAttr.get(v.name if isinstance(v, FunctionBuilder) else str(v))
    if kind == "dict":
        return ir.DictAttr.get({k: _attr("any", x) for k, x in v.items()})
    if isinstance(v, (bool, np.bool_)):
        return ir.BoolAttr.get(bool(v))
    if isinstance(v, (int, np.integer)):
        return _i64(int(v))
    if isinstance(v, (float, np.floating)):
        return ir.FloatAttr.get_f64(float(v))
    if isinstance(v, str):
        return ir.StringAttr.get(v)
    if isinstance(v, (list, tuple)):
        return ir.ArrayAttr.get([_attr("any", x) for x in v])
    if isinstance(v, ir.Type):
        return ir.TypeAttr.get(v)
    return ir.StringAttr.get(str(v))  # a symbolic Expr


def _dense(value, dtype: str | None) -> ir.DenseElementsAttr:
    """A dense elements attribute: a splat for one repeated value, else numpy's data."""
    arr = np.asarray(value)
    if dtype is None:
        dtype = {"float32": "f32", "float64": "f32", "float16": "f16", "int64": "i32", "int32": "i32",
                 "int8": "i8", "int16": "i16", "bool": "i1"}.get(str(arr.dtype))
        if dtype is None:
            raise TypeError(f"constant: give a dtype for numpy dtype {arr.dtype}")
    elt = ir.Type.parse(dtype)
    ty = ir.RankedTensorType.get(list(arr.shape), elt)
    flat = arr.reshape(-1)
    if isinstance(elt, ir.IntegerType) and flat.size:
        _check_integer_values(flat, elt, dtype)
    if flat.size and (flat == flat[0]).all():
        x = flat[0]
        if dtype in ("f16", "bf16", "f32", "f64"):
            scalar = ir.FloatAttr.get(elt, float(x))
        else:
            scalar = ir.IntegerAttr.get(elt, int(x))
        return ir.DenseElementsAttr.get_splat(ty, scalar)
    np_dtype = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8, "i16": np.int16,
                "i32": np.int32, "i64": np.int64}.get(dtype)
    if np_dtype is None:
        raise TypeError(f"constant: a non-splat {dtype} constant cannot be built from numpy")
    return ir.DenseElementsAttr.get(np.ascontiguousarray(arr.astype(np_dtype)), type=ty)


def _check_integer_values(flat: np.ndarray, elt: ir.IntegerType, dtype: str, strict: bool = False) -> None:
    """Integer constants must hold their values exactly (jax refuses int8 + 300, OverflowError): a
    value outside the type's range, or a float with a fraction, is a ValueError, never wrapped.
    `strict`: a signless type takes its signed range only (a Python number next to an i8 operand)."""
    if flat.dtype.kind == "b":
        return
    if flat.dtype.kind == "f" and not np.all(np.isfinite(flat) & (flat == np.round(flat))):
        raise ValueError(f"constant: {dtype} cannot hold the non-integer value(s) {flat[flat != np.round(flat)][:3]}")
    w = elt.width
    # signless: either reading of the bits (constant(255, "i8") then relax.bitcast to ui8)
    lo, hi = (0, 2**w - 1) if elt.is_unsigned else (-(2**(w - 1)), 2**w - 1 if strict is False else 2**(w - 1) - 1)
    if w == 1:
        lo, hi = 0, 1
    vmin, vmax = int(flat.min()), int(flat.max())
    if vmin < lo or vmax > hi:
        bad = vmin if vmin < lo else vmax
        raise ValueError(f"constant: {bad} does not fit in {dtype} ({lo}..{hi})")


# --- building one op -----------------------------------------------------------------------------

def _as_value(v, i: int, siblings: list) -> ir.Value:
    if isinstance(v, ir.Value):
        return v
    if isinstance(v, ir.OpView):
        v = v.operation
    if isinstance(v, ir.Operation) and len(v.results) == 1:
        return v.results[0]
    if isinstance(v, (int, float, bool, np.number, np.bool_)):
        dtypes = [view(s.type).dtype for s in siblings if isinstance(s, ir.Value)
                  and isinstance(view(s.type), TensorType)]
        if not dtypes:
            raise TypeError(f"operand #{i} is the Python number {v!r} and no other operand gives its dtype; "
                            f"use builder.constant({v!r}, dtype)")
        dt = dtypes[0]
        if dt in INT_DTYPES and dt != "i1":  # the number takes the operand's (signed) type, as in jax
            _check_integer_values(np.asarray([v]), ir.IntegerType(ir.Type.parse(dt)), dt, strict=True)
        return constant(v, dt, loc=ir.Location.current)
    raise TypeError(f"operand #{i} must be an ir.Value (a builder result or parameter), got {type(v).__name__}")


def _build(spec: type[OpSpec], operands: list, attrs: dict[str, Any], loc: ir.Location,
           result_types: list | None = None) -> list[ir.Value]:
    """Create `spec`'s op; its result types come from `spec.deduce` unless given."""
    f = _current()
    if f.done:
        raise _error(f"{_where(loc)}error: '{spec.name}' built after @{f.name} returned (f.ret ends the function)")
    flat: list[ir.Value] = []
    sizes: list[int] = []
    with loc:
        siblings = [v for group in operands for v in (group if isinstance(group, list) else [group])]
        for i, group in enumerate(operands):
            vals = group if isinstance(group, list) else [group]
            flat += [_as_value(v, i, siblings) for v in vals]
            sizes.append(len(vals))
        kinds = {a.name: a.kind for a in spec.attributes_}
        attributes = {k: (_dense(v, attrs.get("__dtype")) if spec.name == "relax.constant" and k == "value"
                          else _attr(kinds[k], v))
                      for k, v in attrs.items() if v is not None and not k.startswith("__")}
        if result_types is None:
            trial = ir.Operation.create(spec.name, results=[], operands=flat, attributes=attributes)
            try:
                types = [view(v.type) for v in flat]
                result_types = [t.to_mlir() for t in spec.deduce(OpInfo(trial, f.facts, types))]
            except (DeduceError, TypeTextError) as e:
                raise _error(f"{_where(loc)}error: '{spec.name}' op {e}") from None
            finally:
                trial.erase()
        op = ir.Operation.create(spec.name, results=result_types, operands=flat, attributes=attributes)
    return list(op.results)


def constant(value, dtype: str | None = None, *, loc: ir.Location | None = None) -> ir.Value:
    """`relax.constant` holding `value` (a Python number, a nested list or a numpy array); `dtype`
    defaults to numpy's (float64 and int64 become f32 and i32)."""
    loc = loc or _caller_location(1)
    return _build(OPS["relax.constant"], [], {"value": value, "__dtype": dtype}, loc)[0]


def match_cast(x: ir.Value, type: TensorType, *, loc: ir.Location | None = None) -> ir.Value:
    """`relax.match_cast`: `x` refined to `type` (checked at run time; binds the new symbols in it)."""
    loc = loc or _caller_location(1)
    return _build(OPS["relax.match_cast"], [x], {}, loc, [type.to_mlir()])[0]


# --- one function per op, generated from the op classes -----------------------------------------

# Operand groups filled in by later passes, not by a user (reshape's dynamic dims).
_HIDDEN_OPERANDS = {("relax.reshape", "dims")}
# Ops a graph is not built from: kernel calls, storage, checks (added by passes), regions.
_SKIP = {"relax_v.call_tir", "relax_v.call_library", "relax.alloc_storage", "relax.alloc_tensor",
         "relax.kill", "relax.dim", "relax.assert", "relax_v.dataflow"}


def _make(spec: type[OpSpec]):
    operands = [o for o in spec.operands_ if (spec.name, o.name) not in _HIDDEN_OPERANDS]
    required = [a for a in spec.attributes_ if not a.optional]
    optional = [a for a in spec.attributes_ if a.optional]
    P = inspect.Parameter
    params = ([P(o.name, P.POSITIONAL_OR_KEYWORD) for o in operands]
              + [P(a.name, P.POSITIONAL_OR_KEYWORD) for a in required]
              + [P(a.name, P.POSITIONAL_OR_KEYWORD, default=None) for a in optional]
              + [P("loc", P.KEYWORD_ONLY, default=None)])
    sig = inspect.Signature(params, return_annotation="list[ir.Value]" if spec.results_[0].variadic
                            else "ir.Value")
    variadic_result = spec.results_[0].variadic

    def build(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{fn.__name__}{sig}: {e}") from None
        a = bound.arguments
        loc = a.get("loc") or _caller_location(1)
        ops = [list(a[o.name]) if o.variadic else a[o.name] for o in operands]
        results = _build(spec, ops, {x.name: a.get(x.name) for x in spec.attributes_}, loc)
        return results if variadic_result else results[0]

    fn = build
    fn.__name__ = fn.__qualname__ = short_name(spec.name)
    fn.__signature__ = sig
    fn.__doc__ = f"`{spec.name}`: {spec.doc()}"
    fn.__module__ = __name__
    return fn


def _generate() -> list[str]:
    names = []
    for name, spec in OPS.items():
        if name in _SKIP or spec.results_are_declared or not spec.results_ or spec.regions_:
            continue
        if name == "relax.constant":
            continue  # written by hand above (numpy values, dtype)
        fn = _make(spec)
        globals()[fn.__name__] = fn
        names.append(fn.__name__)
    return names


__all__ += _generate()
