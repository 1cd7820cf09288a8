"""StableHLO -> relax importer.

The StableHLO text (as `jax.export` prints it) is parsed with jax's bundled MLIR (the MLIR 22
bindings have no stablehlo dialect): that parse is the one place text crosses between the two
libraries.  The ops are walked with their real operands, attributes and types, and the relax
function is built through our MLIR bindings, in a `Session`'s context, each op located at the
Python line (or input position) of the StableHLO op it comes from.  jax is imported lazily, inside
the functions.

Symbolic shapes: the dynamic dims of @main's arguments become symbols (named from jax's
`jax.global_constant` argument attributes of the private functions, or from names passed in).
Integer scalar / 1-D shape computations (get_dimension_size, arithmetic, convert, reshape,
concatenate of scalars) are evaluated symbolically, so dynamic_broadcast_in_dim, dynamic_reshape,
dynamic_iota, ... get symbolic shapes.  func.call of private functions is inlined.
`stablehlo.custom_call @shape_assertion` is dropped (the relax signature's symbols are checked at
run time by the executable instead).  The symbols of jax dimension variables are >= 1
(`relax.symbol_lower`), as jax.export assumes.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

import numpy as np
from mlir import ir

from relax_mlir.core.diagnostics import CompileError
from relax_mlir.core.module import Module
from relax_mlir.core.pipeline import run_pipeline
from relax_mlir.core.session import Session
from relax_mlir.dialect.types import TensorType
from relax_mlir.shape import Expr, Facts, const, floordiv, max_, min_, mod, sym

__all__ = ["import_stablehlo", "import_module", "render_error", "UnsupportedOpError", "UnsupportedTypesError",
           "UnsupportedOpsError", "check_supported_ops", "CUSTOM_CALL_TARGETS",
           "StableHLOParseError", "CONVERTERS"]


class UnsupportedOpError(ValueError):
    """A StableHLO op (or a form of one) the importer does not handle."""

    def __init__(self, op_name: str, loc: str = "", why: str = ""):
        self.op_name = op_name
        self.loc = loc
        self.why = why
        msg = self.headline()
        if loc:
            msg += f" at {loc}"
        super().__init__(msg)

    def headline(self) -> str:
        return f"unsupported StableHLO op '{self.op_name}'" + (f": {self.why}" if self.why else "")


class UnsupportedTypesError(UnsupportedOpError):
    """Every op of a module whose element types relax does not support, found before importing."""

    def __init__(self, items: list[UnsupportedOpError]):
        self.items = items
        ValueError.__init__(self, "\n".join(str(x) for x in items))
        self.op_name, self.loc, self.why = items[0].op_name, items[0].loc, items[0].why


class StableHLOParseError(ValueError):
    """The text does not parse as MLIR (with jax's StableHLO dialects); `diagnostics` holds
    (location text, message) pairs."""

    def __init__(self, diagnostics: list[tuple[str, str]]):
        self.diagnostics = diagnostics
        super().__init__("; ".join(f"{loc}: {msg}" for loc, msg in diagnostics) or "the input does not parse")


_DTYPES = {"f16", "bf16", "f32", "f64", "i1", "i8", "i16", "i32", "i64"}
_FLOATS = ("f16", "bf16", "f32", "f64")
_NP_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
              "i32": np.int32, "i64": np.int64}


def _file_position(loc: str) -> tuple[str, int, int] | None:
    """(file, line, col) of the first `"file":line:col` in a jax location's text (a jax location
    names the Python source inside name and callsite locations). jax's bindings have no location
    accessors, so the position is read from the location's printed form (never from op text)."""
    i, n = 0, len(loc or "")
    while i < n:
        start = loc.find('"', i)
        if start < 0:
            return None
        j = start + 1
        while j < n and loc[j] != '"':
            j += 2 if loc[j] == "\\" else 1
        if j >= n:
            return None
        nums: list[int] = []
        k = j + 1
        while len(nums) < 2 and k < n and loc[k] == ":":
            e = k + 1
            while e < n and loc[e].isdigit():
                e += 1
            if e == k + 1:
                break
            nums.append(int(loc[k + 1:e]))
            k = e
        if len(nums) == 2:
            return loc[start + 1:j], nums[0], nums[1]
        i = j + 1
    return None


def _position(loc: str, source_name: str) -> str | None:
    """'file:line:col' of the first file position in a location's text; "-" (no file name) is
    `source_name`."""
    p = _file_position(loc)
    if p is None:
        return None
    return f"{source_name if p[0] in ('-', '') else p[0]}:{p[1]}:{p[2]}"


def render_error(e: Exception, source_name: str) -> str:
    """An import error as compiler diagnostics: `file:line:col: error: ...` per problem (or
    `file: error: ...` for one about the whole input)."""
    if isinstance(e, UnsupportedOpsError):
        return e.render(source_name)
    if isinstance(e, UnsupportedTypesError):
        return "\n".join(render_error(x, source_name) for x in e.items)
    if isinstance(e, StableHLOParseError):
        return "\n".join(f"{_position(loc, source_name) or source_name}: error: {msg}" for loc, msg in e.diagnostics)
    if isinstance(e, UnsupportedOpError):
        pos = _position(e.loc, source_name)
        if pos is not None:
            return f"{pos}: error: {e.headline()}"
        return f"{source_name}: error: {e}"
    if isinstance(e, CompileError):  # already rendered diagnostics of the built module
        return str(e)
    return f"{source_name}: error: {e}"


def _is_name(s: str) -> bool:
    """A symbol name: an ASCII identifier."""
    return s.isascii() and s.isidentifier()


# --- jax-side values ---------------------------------------------------------------------------

def _jax_dtype(t) -> str:
    """The relax dtype name of a jax-MLIR element type, or the type's text when relax has none."""
    from jax._src.lib.mlir import ir as jir

    if isinstance(t, jir.IntegerType):
        if t.is_signless and t.width in (1, 8, 16, 32, 64):
            return f"i{t.width}"
    else:
        for cls, name in ((jir.F16Type, "f16"), (jir.BF16Type, "bf16"), (jir.F32Type, "f32"), (jir.F64Type, "f64")):
            if isinstance(t, cls):
                return name
    return str(t)  # unsupported: named in the error message only


def _ints(attr) -> list[int]:
    """The integers of a jax-MLIR `array<i64: ...>`, `dense<...>` or integer attribute."""
    from jax._src.lib.mlir import ir as jir

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
    from jax._src.lib.mlir import ir as jir

    if isinstance(attr, (jir.StringAttr, jir.FlatSymbolRefAttr)):
        return attr.value
    raise ValueError(f"expected a string, got the attribute {attr}")


# --- our side: types and attributes ---------------------------------------------------------------

def _elt(dt: str) -> ir.Type:
    if dt == "f16":
        return ir.F16Type.get()
    if dt == "bf16":
        return ir.BF16Type.get()
    if dt == "f32":
        return ir.F32Type.get()
    if dt == "f64":
        return ir.F64Type.get()
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
    from jax._src.lib.mlir import ir as jir

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

    __slots__ = ("value", "dtype", "dims", "known")

    def __init__(self, value, dtype, dims, known=None):
        self.value = value
        self.dtype = dtype
        self.dims = list(dims)
        self.known = known


class Importer:
    """Walks a parsed jax-MLIR module's @main (inlining calls) and builds the relax function."""

    def __init__(self, module, dim_names=None, unused_args=None, dim_vars: Iterable[str] = (),
                 source_name: str = "<string>"):
        self.module = module
        self.dim_names = dim_names or []
        # position -> (dims, dtype) of an argument the exported function does not use (jax.export
        # drops it from @main); the relax function still takes it, so callers pass every argument.
        self.unused_args = dict(unused_args or {})
        self.source_name = source_name
        self.funcs = {}
        self.renames: dict[str, str] = {}  # placeholder symbol -> real name
        self.unions: list[tuple[str, str]] = []
        self.dim_vars: set[str] = set(dim_vars)  # symbols of jax dimension variables (>= 1)
        self.symbolic_attrs: list[tuple[ir.Operation, str, Any]] = []  # renamed at the end
        self.loc: ir.Location | None = None  # the jax op being converted
        self.extra_lower: dict[str, int] = {}  # lower bounds of argument symbols beyond jax's >= 1
        self.upper: dict[str, int] = {}  # upper bounds of argument symbols (jax constraints s <= 32)
        self._locs: dict[str, ir.Location] = {}
        for op in module.body.operations:
            if op.operation.name == "func.func":
                self.funcs[_string(op.attributes["sym_name"])] = op

    # --- emission ---------------------------------------------------------------------------

    def location(self, jax_op) -> ir.Location:
        """Our location for a jax op: its first file position (the user's Python line), else unknown."""
        text = str(jax_op.location)
        loc = self._locs.get(text)
        if loc is None:
            p = _file_position(text)
            if p is None:
                loc = ir.Location.unknown()
            else:
                loc = ir.Location.file(self.source_name if p[0] in ("-", "") else p[0], p[1], p[2])
            self._locs[text] = loc
        return loc

    def emit(self, opname, operands, result_rank, dtype, attrs=None, dims=None, known=None) -> Val:
        """Build relax op `opname` at the current op's location; its result dims are deduced later."""
        values = [self.use(o) for o in operands]
        attributes = {k: _attr(v) for k, v in (attrs or {}).items()}
        op = ir.Operation.create(opname, results=[_qtype(result_rank, dtype)], operands=values,
                                 attributes=attributes, loc=self.loc)
        for k, v in (attrs or {}).items():
            if _is_symbolic(v):
                self.symbolic_attrs.append((op, k, v))
        if dims is None:
            dims = [None] * result_rank
        return Val(op.results[0], dtype, dims, known)

    def use(self, v: Val) -> ir.Value:
        if v.value is None:
            self.materialize(v)
        return v.value

    def materialize(self, v: Val):
        """Emit a relax value for a symbolically known integer tensor."""
        k = v.known
        rank = len(v.dims)
        if all(e.is_const for e in k):
            vals = [e.value for e in k]
            if v.dtype == "i1":
                vals = [int(bool(x)) for x in vals]
            if rank == 0:
                value = _splat([], v.dtype, vals[0])
            else:
                value = ir.DenseElementsAttr.get([_scalar_attr(v.dtype, x) for x in vals],
                                                 type=ir.RankedTensorType.get([len(vals)], _elt(v.dtype)))
            r = self.emit("relax.constant", [], rank, v.dtype, {"value": value})
        else:
            parts = []
            for e in k:
                parts.append(self.emit("relax.arange", [], 1, v.dtype,
                                       {"start": e, "end": e + 1, "dtype": _dtype_attr(v.dtype)}))
            if len(parts) == 1:
                r = parts[0]
            else:
                r = self.emit("relax_v.concat", parts, 1, v.dtype, {"axis": 0})
            if rank == 0:
                r = self.emit("relax.reshape", [r], 0, v.dtype, {"shape": []})
        v.value = r.value

    # --- helpers ----------------------------------------------------------------------------

    @staticmethod
    def ttype(t):
        from jax._src.lib.mlir import ir as jir
        rt = jir.RankedTensorType(t)
        dt = _jax_dtype(rt.element_type)
        dims = [None if rt.is_dynamic_dim(i) else const(rt.shape[i]) for i in range(rt.rank)]
        return dims, dt

    def reshape(self, x: Val, dims) -> Val:
        if len(dims) == len(x.dims) and all(a is not None and b is not None and a == b
                                            for a, b in zip(dims, x.dims)):
            return x
        return self.emit("relax.reshape", [x], len(dims), x.dtype, {"shape": list(dims)}, dims=dims)

    def broadcast(self, x: Val, dims) -> Val:
        if len(dims) == len(x.dims) and all(a is not None and b is not None and a == b
                                            for a, b in zip(dims, x.dims)):
            return x
        return self.emit("relax.broadcast_to", [x], len(dims), x.dtype, {"shape": list(dims)}, dims=dims)

    def permute(self, x: Val, axes) -> Val:
        if list(axes) == list(range(len(axes))):
            return x
        return self.emit("relax.permute_dims", [x], len(axes), x.dtype, {"axes": list(axes)},
                         dims=[x.dims[a] for a in axes])

    # --- walking ----------------------------------------------------------------------------

    def run(self) -> ir.Operation:
        """Build the relax module (a `builtin.module` holding @main) in the current context."""
        main = self.funcs.get("main")
        if main is None:
            raise ValueError("no @main function")
        block = main.regions[0].blocks[0]
        params = []
        kept = iter(block.arguments)
        for i in range(len(block.arguments) + len(self.unused_args)):
            if i in self.unused_args:
                dims, dt = self.unused_args[i]
            else:
                dims, dt = self.ttype(next(kept).type)
            if dt not in _DTYPES:
                raise UnsupportedOpError("func.func", str(main.location), f"argument element type {dt}")
            names = self.dim_names[i] if i < len(self.dim_names) else None
            sdims = []
            for j, d in enumerate(dims):
                if d is None:
                    nm = names[j] if names and j < len(names) and names[j] else None
                    d = sym(nm) if nm is not None and _is_name(nm) else sym(f"zzA{i}x{j}")
                sdims.append(d)
            params.append((i, sdims, dt))
        params = name_dim_exprs(self, params)
        floc = self.location(main)
        module = ir.Module.create(loc=floc)
        types = [_ttype(sdims, dt) for _, sdims, dt in params]
        func = ir.Operation.create("func.func", regions=1, loc=floc, attributes={
            "sym_name": ir.StringAttr.get("main"),
            "function_type": ir.TypeAttr.get(ir.FunctionType.get(types, []))},
            ip=ir.InsertionPoint(module.body))
        body = func.regions[0].blocks.append(*types, arg_locs=[floc] * len(types))
        args = []
        for (i, sdims, dt), a in zip(params, body.arguments):
            if i not in self.unused_args:
                args.append(Val(a, dt, sdims))
        with ir.InsertionPoint(body):
            args = bind_dim_exprs(self, params, args)
            results, ret_loc = self.run_func(main, args)
            self.loc = ret_loc
            rets = [self.use(r) for r in results]
            ir.Operation.create("func.return", operands=rets, loc=ret_loc)
        mapping = self.resolve_names(params)
        for (i, sdims, dt), a in zip(params, body.arguments):
            a.set_type(_ttype([d.subs(mapping) for d in sdims], dt))
        for op, name, v in self.symbolic_attrs:
            op.attributes[name] = _attr(_subs(v, mapping))
        _erase_dead_ops(body)
        func.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([a.type for a in body.arguments], [v.type for v in rets]))
        sig = set()
        for _, sdims, _ in params:
            for d in sdims:
                sig |= d.subs(mapping).symbols()
        lower = {n: 1 for n in sorted({self.renames.get(n, n) for n in self.dim_vars} & sig)}
        lower.update({n: v for n, v in self.extra_lower.items() if n in sig})
        if lower:
            i64 = ir.IntegerType.get_signless(64)
            func.attributes["relax.symbol_lower"] = ir.DictAttr.get({n: ir.IntegerAttr.get(i64, v)
                                                                     for n, v in sorted(lower.items())})
        upper = {n: v for n, v in self.upper.items() if n in sig}
        if upper:
            i64 = ir.IntegerType.get_signless(64)
            func.attributes["relax.symbol_bounds"] = ir.DictAttr.get({n: ir.IntegerAttr.get(i64, v)
                                                                      for n, v in sorted(upper.items())})
        return module.operation

    def resolve_names(self, params) -> dict[str, Expr]:
        """The final name of every renamed symbol: unions (a == b) keep one name, placeholders take
        jax's global-constant names, the rest d0, d1, ..."""
        for a, b in self.unions:
            ra, rb = self.renames.get(a, a), self.renames.get(b, b)
            if ra != rb:
                keep, drop = sorted([ra, rb], key=lambda s: (s.startswith("zzA"), s))
                for k, v in list(self.renames.items()):
                    if v == drop:
                        self.renames[k] = keep
                self.renames[drop] = keep
        counter = 0
        for _, sdims, _ in params:
            for d in sdims:
                for s in sorted(d.symbols()):
                    if s.startswith("zzA") and s not in self.renames:
                        while f"d{counter}" in self.renames.values():
                            counter += 1
                        self.renames[s] = f"d{counter}"
                        counter += 1
        return {k: sym(v) for k, v in self.renames.items()}

    def run_func(self, func, args: list[Val]) -> tuple[list[Val], ir.Location]:
        block = func.regions[0].blocks[0]
        env = {}
        for a, v in zip(block.arguments, args):
            env[a] = v
        for op in block.operations:
            name = op.operation.name
            if name in ("func.return", "stablehlo.return"):
                return [env[o] for o in op.operands], self.location(op)
            if name == "func.call":
                callee = _string(op.attributes["callee"])
                f = self.funcs.get(callee)
                if f is None:
                    raise UnsupportedOpError(name, str(op.location), f"unknown callee @{callee}")
                cargs = [env[o] for o in op.operands]
                self.note_global_constants(f, cargs)
                outs, _ = self.run_func(f, cargs)
                for r, v in zip(op.results, outs):
                    env[r] = v
                continue
            conv = CONVERTERS.get(name)
            if conv is None:
                raise UnsupportedOpError(name, str(op.location))
            ins = [env[o] for o in op.operands]
            self.loc = self.location(op)
            try:
                outs = fold_known(self, op, ins) or conv(self, op, ins)
            except UnsupportedOpError:
                raise
            except (ValueError, KeyError, IndexError, TypeError) as e:
                raise UnsupportedOpError(name, str(op.location), str(e)) from e
            if outs is None:
                outs = []
            if isinstance(outs, Val):
                outs = [outs]
            for r, v in zip(op.results, outs):
                env[r] = v
        raise ValueError("function without a return")

    def note_global_constants(self, f, cargs):
        """Name placeholder symbols after the `jax.global_constant` (a jax dimension variable) that
        a callee's argument carries."""
        from jax._src.lib.mlir import ir as jir

        arg_attrs = f.attributes["arg_attrs"] if "arg_attrs" in f.attributes else None
        if not isinstance(arg_attrs, jir.ArrayAttr):
            return
        for i, a in enumerate(arg_attrs):
            if not isinstance(a, jir.DictAttr) or "jax.global_constant" not in a or i >= len(cargs) \
                    or not isinstance(a["jax.global_constant"], jir.StringAttr):
                continue
            name = a["jax.global_constant"].value
            k = cargs[i].known
            if k and len(k) == 1 and k[0].is_symbol and _is_name(name):
                (s,) = k[0].symbols()
                self.dim_vars.add(s)
                if s.startswith("zzA"):
                    self.renames.setdefault(s, name)


def _erase_dead_ops(block: ir.Block) -> None:
    """Erase the ops whose results are never used (every relax op built here is pure), last first;
    a match_cast stays (it binds symbols and checks them)."""
    for op in reversed(list(block.operations)):
        if op.name not in ("func.return", "relax.match_cast") and all(not list(r.uses) for r in op.results):
            op.erase()


# --- converters ----------------------------------------------------------------------------

def _res(op, i=0):
    return Importer.ttype(op.results[i].type)


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


def _wrap(e: Expr, dt: str) -> Expr:
    """A constant wrapped to the signed range of `dt` (XLA's two's-complement integers)."""
    if not e.is_const:
        return e
    w = int(dt[1:])
    v = e.value & ((1 << w) - 1)
    return const(v - (1 << w) if v >> (w - 1) else v)


def _fold_divide(a: Expr, b: Expr) -> Expr | None:
    """StableHLO integer divide: truncating, x / 0 = -1 (INT_MIN / -1 wraps, see _wrap). A symbolic
    quotient is kept only where truncation is floor division: a >= 0 and b > 0; None otherwise."""
    if a.is_const and b.is_const:
        x, y = a.value, b.value
        if y == 0:
            return const(-1)
        q = abs(x) // abs(y)
        return const(-q if (x < 0) != (y < 0) else q)
    facts = Facts()
    if facts.prove_ge(a, 0) and facts.prove_positive(b):
        return floordiv(a, b)
    return None


def _fold_remainder(a: Expr, b: Expr) -> Expr | None:
    """StableHLO integer remainder: the sign of a, x % 0 = x; constants only."""
    if not (a.is_const and b.is_const):
        return None
    x, y = a.value, b.value
    if y == 0:
        return a
    r = abs(x) % abs(y)
    return const(-r if x < 0 else r)


# Folds of known integer values (None: not foldable, emit the op); results wrap to the dtype.
_INT_FOLD: dict[str, Callable] = {
    "stablehlo.add": lambda a, b: a + b,
    "stablehlo.subtract": lambda a, b: a - b,
    "stablehlo.multiply": lambda a, b: a * b,
    "stablehlo.divide": _fold_divide,
    "stablehlo.remainder": _fold_remainder,
    "stablehlo.maximum": lambda a, b: max_(a, b),
    "stablehlo.minimum": lambda a, b: min_(a, b),
}


def _binary(relax_name, int_fold=None):
    def conv(im: Importer, op, ins):
        a, b = ins
        dims, dt = _res(op)
        dims = _merge_dims(dims, a.dims, b.dims)
        if int_fold is not None and dt not in ("f16", "bf16", "f32", "f64", "i1") and _known_ok(ins) \
                and len(a.known) == len(b.known):
            folded = [int_fold(x, y) for x, y in zip(a.known, b.known)]
            if all(f is not None for f in folded):
                return Val(None, dt, dims, [_wrap(f, dt) for f in folded])
        return im.emit(relax_name, [a, b], len(dims), dt, dims=dims)
    return conv


def _unary(relax_name):
    def conv(im: Importer, op, ins):
        (a,) = ins
        dims, dt = _res(op)
        if relax_name == "relax.negative" and a.known is not None:
            return Val(None, dt, _merge_dims(dims, a.dims), [_wrap(-x, dt) for x in a.known])
        return im.emit(relax_name, [a], len(dims), dt, dims=_merge_dims(dims, a.dims))
    return conv


def _logic(relax_name):
    def conv(im, op, ins):
        dims, dt = _res(op)
        if dt != "i1":
            raise UnsupportedOpError(op.operation.name, str(op.location), "bitwise ops on integers")
        return im.emit(relax_name, ins, len(dims), dt, dims=_merge_dims(dims, *[v.dims for v in ins]))
    return conv


def _constant(im: Importer, op, ins):
    from jax._src.lib.mlir import ir as jir

    attr = op.attributes["value"]
    dims, dt = _res(op)
    if dt not in _DTYPES:
        raise UnsupportedOpError(op.operation.name, str(op.location), f"element type {dt}")
    if dt.startswith("i") and dt != "i1" and len(dims) <= 1 and isinstance(attr, jir.DenseIntElementsAttr):
        n = dims[0].value if dims else 1
        if n <= 64:
            vals = [int(attr.get_splat_value().value)] * n if attr.is_splat else \
                [int(attr[i]) for i in range(len(attr))]
            if len(vals) == n:
                return Val(None, dt, dims, [const(x) for x in vals])
    value = _dense_from_jax(attr, [d.value for d in dims], dt)
    return im.emit("relax.constant", [], len(dims), dt, {"value": value}, dims=dims)


def _get_dimension_size(im, op, ins):
    (x,) = ins
    d = _ints(op.attributes["dimension"])[0]
    _, dt = _res(op)
    e = x.dims[d]
    if e is None:
        raise ValueError(f"dim {d} of the operand is unknown")
    return Val(None, dt, [], [e])


def _convert(im, op, ins):
    (x,) = ins
    dims, dt = _res(op)
    dims = _merge_dims(dims, x.dims)
    if x.known is not None and dt.startswith("i") and dt != "i1":
        return Val(None, dt, dims, [_wrap(e, dt) for e in x.known])
    if dt == x.dtype:
        return x
    return im.emit("relax.astype", [x], len(dims), dt, {"dtype": _dtype_attr(dt)}, dims=dims)


def _reshape(im, op, ins):
    x = ins[0]
    dims, dt = _res(op)
    if x.known is not None and len(dims) <= 1:
        return Val(None, dt, dims, list(x.known))
    return im.reshape(x, dims)


def _dynamic_reshape(im, op, ins):
    x, shp = ins
    dims, dt = _res(op)
    if shp.known is None:
        raise ValueError("output shape is not a known shape computation")
    dims = _merge_dims(dims, shp.known)
    if x.known is not None and len(dims) <= 1:
        return Val(None, dt, dims, list(x.known))
    return im.reshape(x, dims)


def _broadcast_in_dim_impl(im, op, x: Val, bdims, rdims, dt):
    if x.known is not None and len(rdims) <= 1 and all(d is not None and d.is_const for d in rdims):
        n = rdims[0].value if rdims else 1
        if len(x.known) in (1, n):
            return Val(None, dt, rdims, list(x.known) * (n if len(x.known) == 1 and n != 1 else 1))
    order = sorted(range(len(bdims)), key=lambda i: bdims[i])
    x = im.permute(x, order)
    bsorted = [bdims[i] for i in order]
    inter = [const(1)] * len(rdims)
    for i, ax in enumerate(bsorted):
        inter[ax] = x.dims[i]
    x = im.reshape(x, inter)
    return im.broadcast(x, rdims)


def _broadcast_in_dim(im, op, ins):
    (x,) = ins
    rdims, dt = _res(op)
    bdims = _ints(op.attributes["broadcast_dimensions"])
    return _broadcast_in_dim_impl(im, op, x, bdims, rdims, dt)


def _dynamic_broadcast_in_dim(im, op, ins):
    x, shp = ins[0], ins[1]
    rdims, dt = _res(op)
    if shp.known is None:
        raise ValueError("output_dimensions is not a known shape computation")
    rdims = _merge_dims(rdims, shp.known)
    bdims = _ints(op.attributes["broadcast_dimensions"])
    return _broadcast_in_dim_impl(im, op, x, bdims, rdims, dt)


def _iota_impl(im, rdims, dt, axis):
    n = rdims[axis]
    if n is None:
        raise ValueError("iota dim is unknown")
    if dt in _FLOATS:
        r = im.emit("relax.arange", [], 1, "i64", {"end": n, "dtype": _dtype_attr("i64")}, dims=[n])
        r = im.emit("relax.astype", [r], 1, dt, {"dtype": _dtype_attr(dt)}, dims=[n])
    else:
        r = im.emit("relax.arange", [], 1, dt, {"end": n, "dtype": _dtype_attr(dt)}, dims=[n])
    inter = [const(1)] * len(rdims)
    inter[axis] = n
    r = im.reshape(r, inter)
    return im.broadcast(r, rdims)


def _iota(im, op, ins):
    rdims, dt = _res(op)
    axis = _ints(op.attributes["iota_dimension"])[0]
    if len(rdims) == 1 and rdims[0] is not None and rdims[0].is_const and dt.startswith("i") and dt != "i1" \
            and rdims[0].value <= 64:
        return Val(None, dt, rdims, [const(i) for i in range(rdims[0].value)])
    return _iota_impl(im, rdims, dt, axis)


def _dynamic_iota(im, op, ins):
    (shp,) = ins
    rdims, dt = _res(op)
    if shp.known is None:
        raise ValueError("output_shape is not a known shape computation")
    rdims = _merge_dims(rdims, shp.known)
    axis = _ints(op.attributes["iota_dimension"])[0]
    return _iota_impl(im, rdims, dt, axis)


def _transpose(im, op, ins):
    (x,) = ins
    perm = _ints(op.attributes["permutation"])
    return im.permute(x, perm)


def _concatenate(im, op, ins):
    rdims, dt = _res(op)
    axis = _ints(op.attributes["dimension"])[0]
    if _known_ok(ins) and len(rdims) == 1:
        k = []
        for v in ins:
            k.extend(v.known)
        return Val(None, dt, rdims, k)
    dims = list(ins[0].dims)
    tot = const(0)
    for v in ins:
        tot = None if (tot is None or v.dims[axis] is None) else tot + v.dims[axis]
    dims[axis] = tot
    dims = _merge_dims(rdims, dims, *[v.dims for v in ins])
    if len(ins) == 1:
        return ins[0]
    return im.emit("relax_v.concat", ins, len(rdims), dt, {"axis": axis}, dims=dims)


def _slice(im, op, ins):
    (x,) = ins
    rdims, dt = _res(op)
    start = _ints(op.attributes["start_indices"])
    limit = _ints(op.attributes["limit_indices"])
    strides = _ints(op.attributes["strides"])
    if x.known is not None and len(x.dims) == 1:
        return Val(None, dt, rdims, x.known[start[0]:limit[0]:strides[0]])
    axes = list(range(len(x.dims)))
    return im.emit("relax.strided_slice", [x], len(rdims), dt,
                   {"axes": axes, "begin": start, "end": limit, "strides": strides},
                   dims=_merge_dims(rdims))


def _select(im, op, ins):
    c, a, b = ins
    rdims, dt = _res(op)
    return im.emit("relax.where", [c, a, b], len(rdims), dt, dims=_merge_dims(rdims, a.dims, b.dims, c.dims))


_CMP = {"EQ": "relax.equal", "NE": "relax.not_equal", "LT": "relax.less", "LE": "relax.less_equal",
        "GT": "relax.greater", "GE": "relax.greater_equal"}


def _compare(im, op, ins):
    a, b = ins
    rdims, _ = _res(op)
    from jax._src.lib.mlir.dialects import hlo

    direction = hlo.ComparisonDirectionAttr(op.attributes["comparison_direction"]).value
    if direction == "EQ" and _known_ok(ins) and len(a.known) == 1 == len(b.known) \
            and a.known[0].is_symbol and b.known[0].is_symbol:
        (sa,), (sb,) = a.known[0].symbols(), b.known[0].symbols()
        im.unions.append((sa, sb))
    return im.emit(_CMP[direction], [a, b], len(rdims), "i1", dims=_merge_dims(rdims, a.dims, b.dims))


def _clamp(im, op, ins):
    lo, x, hi = ins
    rdims, dt = _res(op)
    r = im.emit("relax.maximum", [x, lo], len(rdims), dt, dims=_merge_dims(rdims, x.dims))
    return im.emit("relax.minimum", [r, hi], len(rdims), dt, dims=r.dims)


def _expm1(im, op, ins):
    """e**x - 1 accurate near 0 (Kahan): u = e**x; u == 1 -> x (keeps -0); u - 1 == -1 -> -1;
    u == inf -> inf; else (u - 1) * (x / log(u))."""
    (x,) = ins
    rdims, dt = _res(op)
    dims = _merge_dims(rdims, x.dims)
    rank = len(rdims)

    def c(v):
        return im.emit("relax.constant", [], 0, dt, {"value": _splat([], dt, v)}, dims=[])

    def e(name, *args, rdt=None):
        return im.emit(name, list(args), rank, rdt or dt, dims=dims)

    one, m1, inf = c(1.0), c(-1.0), c(float("inf"))
    u = e("relax.exp", x)
    um1 = e("relax.subtract", u, one)
    k = e("relax.multiply", um1, e("relax.divide", x, e("relax.log", u)))
    r = e("relax.where", e("relax.equal", um1, m1, rdt="i1"), um1, k)
    r = e("relax.where", e("relax.equal", u, inf, rdt="i1"), u, r)
    return e("relax.where", e("relax.equal", u, one, rdt="i1"), x, r)


_REDUCE_KIND = {"stablehlo.add": "relax.sum", "stablehlo.maximum": "relax.max", "stablehlo.minimum": "relax.min",
                "stablehlo.multiply": "relax.prod", "stablehlo.or": "relax.max", "stablehlo.and": "relax.min"}
# On i1 (StableHLO): add is or, multiply is and; relax.max / relax.min on i1 are or / and.
_REDUCE_KIND_I1 = {"stablehlo.add": "relax.max", "stablehlo.maximum": "relax.max", "stablehlo.or": "relax.max",
                   "stablehlo.multiply": "relax.min", "stablehlo.minimum": "relax.min", "stablehlo.and": "relax.min"}
# The elementwise op that combines the init value with the reduced value.
_REDUCE_COMBINE = {"relax.sum": "relax.add", "relax.prod": "relax.multiply", "relax.max": "relax.maximum",
                   "relax.min": "relax.minimum"}


def _splat_value(v):
    """The Python value of a splat stablehlo.constant defining `v`, or None."""
    from jax._src.lib.mlir import ir
    owner = v.owner
    if getattr(owner, "name", None) != "stablehlo.constant":
        return None
    attr = owner.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
        return None
    s = attr.get_splat_value()  # attributes come back downcast
    if isinstance(s, ir.BoolAttr):
        return bool(s.value)
    if isinstance(s, (ir.FloatAttr, ir.IntegerAttr)):
        return s.value
    return None


def _is_identity(kind: str, dt: str, v) -> bool:
    """Whether `v` is the identity of the relax reduction `kind` on `dt` (so the init can go)."""
    import math
    if v is None:
        return False
    if dt == "i1":
        return bool(v) == (kind == "relax.min")
    if kind == "relax.sum":
        return v == 0
    if kind == "relax.prod":
        return v == 1
    lo = kind == "relax.max"
    if dt in ("f16", "bf16", "f32", "f64"):
        return math.isinf(v) and (v < 0) == lo
    w = int(dt[1:])
    return v == (-(1 << (w - 1)) if lo else (1 << (w - 1)) - 1)


def _reduce(im, op, ins):
    if len(op.results) != 1:
        raise ValueError("variadic reduce (e.g. argmax) is not supported")
    x, init = ins[0], ins[1]
    body = [o for o in op.regions[0].blocks[0].operations]
    kinds = [o.operation.name for o in body if o.operation.name != "stablehlo.return"]
    table = _REDUCE_KIND_I1 if x.dtype == "i1" else _REDUCE_KIND
    if len(kinds) != 1 or kinds[0] not in table:
        raise ValueError(f"reduce body {kinds} is not a single add/max/min/mul/and/or")
    if kinds[0] in ("stablehlo.and", "stablehlo.or") and x.dtype != "i1":
        raise ValueError(f"reduce with {kinds[0]} on {x.dtype} (bitwise) is not supported")
    axes = _ints(op.attributes["dimensions"])
    rdims, dt = _res(op)
    dims = [d for i, d in enumerate(x.dims) if i not in axes]
    dims = _merge_dims(rdims, dims)
    kind = table[kinds[0]]
    r = im.emit(kind, [x], len(rdims), dt, {"axes": axes, "keepdims": False}, dims=dims)
    if _is_identity(kind, dt, _splat_value(op.operands[1])):
        return r
    # reduce(x, init) = init (+) reduce(x): the init counts once, also over zero elements
    return im.emit(_REDUCE_COMBINE[kind], [r, init], len(rdims), dt, dims=dims)


def _dot_general(im, op, ins):
    a, b = ins
    rdims, dt = _res(op)
    from jax._src.lib.mlir.dialects import hlo

    dn = hlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
    lb, rb = list(dn.lhs_batching_dimensions), list(dn.rhs_batching_dimensions)
    lc, rc = list(dn.lhs_contracting_dimensions), list(dn.rhs_contracting_dimensions)
    if a.dtype != dt or b.dtype != dt:
        raise ValueError("mixed-precision dot_general")
    ra, rb_ = len(a.dims), len(b.dims)
    lf = [i for i in range(ra) if i not in lb and i not in lc]
    rf = [i for i in range(rb_) if i not in rb and i not in rc]
    from relax_mlir.ops.common import product
    ap = im.permute(a, lb + lf + lc)
    bp = im.permute(b, rb + rc + rf)
    batch = [a.dims[i] for i in lb]
    m = product([a.dims[i] for i in lf])
    k = product([a.dims[i] for i in lc])
    n = product([b.dims[i] for i in rf])
    a3 = im.reshape(ap, batch + [m, k])
    b3 = im.reshape(bp, batch + [k, n])
    out = im.emit("relax.matmul", [a3, b3], len(batch) + 2, dt, dims=batch + [m, n])
    final = batch + [a.dims[i] for i in lf] + [b.dims[i] for i in rf]
    final = _merge_dims(final, rdims)
    return im.reshape(out, final)


def _gather(im, op, ins):
    x, idx = ins[0], ins[1]
    rdims, dt = _res(op)
    from jax._src.lib.mlir.dialects import hlo

    dn = hlo.GatherDimensionNumbers(op.attributes["dimension_numbers"])
    offset = list(dn.offset_dims)
    collapsed = list(dn.collapsed_slice_dims)
    smap = list(dn.start_index_map)
    obatch = list(dn.operand_batching_dims)
    ivd = int(dn.index_vector_dim)
    if obatch:
        raise ValueError("batched gather")
    if op.operation.name == "stablehlo.dynamic_gather":
        if ins[2].known is None:
            raise ValueError("slice_sizes is not a known shape computation")
        sizes = list(ins[2].known)
    else:
        sizes = [const(v) for v in _ints(op.attributes["slice_sizes"])]
    r = len(x.dims)
    # Form 1: constant start (a slice).
    if idx.known is not None and len(idx.dims) <= 1 and ivd == len(idx.dims) - (0 if len(idx.dims) == 0 else 1) \
            or (idx.known is not None and len(idx.dims) == 1):
        starts = [const(0)] * r
        for j, ax in enumerate(smap):
            starts[ax] = idx.known[j]
        axes = list(range(r))
        ends = [s + z for s, z in zip(starts, sizes)]
        sl = im.emit("relax.strided_slice", [x], r, dt,
                     {"axes": axes, "begin": starts, "end": ends},
                     dims=sizes)
        keep = [sizes[i] for i in range(r) if i not in collapsed]
        return im.reshape(sl, keep) if collapsed else sl
    # Form 2: take along one axis (embedding lookup).
    if len(smap) == 1 and collapsed == smap:
        ax = smap[0]
        if all(sizes[i] is not None and x.dims[i] is not None and (i == ax and sizes[i] == const(1)
                                                                   or i != ax and sizes[i] == x.dims[i])
               for i in range(r)) or all(
                (i == ax and sizes[i] == const(1)) or i != ax for i in range(r)):
            nb = len(idx.dims) - (1 if ivd < len(idx.dims) else 0)
            if offset == [i for i in range(len(rdims)) if not (ax <= i < ax + nb)] or \
                    offset == list(range(nb, nb + r - 1)) and ax == 0:
                ind = idx
                if ivd < len(idx.dims):
                    if ivd != len(idx.dims) - 1:
                        raise ValueError("index_vector_dim not last")
                    ind = im.reshape(idx, idx.dims[:-1])
                return im.emit("relax.take", [x, ind], len(rdims), dt, {"axis": ax},
                               dims=_merge_dims(rdims, x.dims[:ax] + ind.dims + x.dims[ax + 1:]))
    raise ValueError("only slice-like and take-like (embedding) gathers are supported")


def _custom_call(im, op, ins):
    target = _string(op.attributes["call_target_name"])
    handler = CUSTOM_CALL_TARGETS.get(target)
    if handler is None or isinstance(handler, str):
        why = f"call target @{target}" + (f": {handler}" if handler else "")
        raise UnsupportedOpError("stablehlo.custom_call", str(op.location), why)
    return handler(im, op, ins)


def _optimization_barrier(im, op, ins):
    return list(ins)


# --- importer infrastructure (issue 16) ---
# Whole-module checks before the import (every unsupported op at once), sharding annotations
# (dropped with a note: the compile is for one device), stablehlo.composite (inlined), the
# custom_call targets models emit, and argument dims given as expressions (jax's "5*k + 15").

_log = logging.getLogger("relax_mlir.frontend")

# Ops the walk handles itself (not through CONVERTERS).
_STRUCTURAL = frozenset({"func.func", "func.return", "func.call", "stablehlo.return"})

# Ops refused with a reason (the import is for one device).
_REFUSED_OPS = {
    "sdy.manual_computation": "shard_map (sdy.manual_computation, per-device code) is not supported: relax compiles "
                              "for one device; call the function without shard_map",
}

_SHARDING_ATTRS = ("sdy.sharding", "mhlo.sharding", "sdy.sharding_rule")


class UnsupportedOpsError(UnsupportedOpError):
    """Every unsupported op of a module at once: `groups` holds, per op name (a custom_call per
    target), the reason (or "") and the location texts of its occurrences, in order of first
    appearance."""

    def __init__(self, groups: list[tuple[str, str, list[str]]]):
        self.groups = groups
        self.op_name, self.why, locs = groups[0]
        self.loc = locs[0]
        ValueError.__init__(self, "\n".join(self.line(g) for g in groups))

    @staticmethod
    def line(group, source_name: str = "<string>", shown: int = 3) -> str:
        name, why, locs = group
        head = UnsupportedOpError(name, "", why).headline()
        if len(locs) > 1:
            head += f" ({len(locs)} occurrences)"
        where = [_position(loc, source_name) or loc for loc in locs[:shown]]
        more = f", and {len(locs) - shown} more" if len(locs) > shown else ""
        return f"{head} at {'; '.join(where)}{more}"

    def render(self, source_name: str) -> str:
        """One `file:line:col: error:` diagnostic per unsupported op (kind), its other
        occurrences named after it."""
        out = []
        for name, why, locs in self.groups:
            pos = _position(locs[0], source_name)
            if pos is None:
                out.append(f"{source_name}: error: {self.line((name, why, locs), source_name)}")
                continue
            head = UnsupportedOpError(name, "", why).headline()
            if len(locs) > 1:
                others = [_position(loc, source_name) or loc for loc in locs[1:4]]
                more = f", and {len(locs) - 4} more" if len(locs) > 4 else ""
                head += f" ({len(locs)} occurrences; also at {', '.join(others)}{more})"
            out.append(f"{pos}: error: {head}")
        return "\n".join(out)


def _custom_call_target(op) -> str:
    return _string(op.attributes["call_target_name"])


def _attr_names(attrs) -> list[str]:
    """The names in a jax-MLIR DictAttr (empty for anything else)."""
    from jax._src.lib.mlir import ir as jir
    if not isinstance(attrs, jir.DictAttr):
        return []
    return [attrs[i].name for i in range(len(attrs))]


def check_supported_ops(module) -> None:
    """Walk everything @main reaches (calls and composite decompositions, nested regions) and raise
    UnsupportedOpsError naming every op the importer cannot convert, with its count and locations,
    all at once. Sharding annotations (sdy.sharding / mhlo.sharding attributes, sdy.mesh,
    sdy.sharding_constraint, @Sharding custom calls) are accepted: they are dropped with one
    logged warning, since relax compiles for one device."""
    from jax._src.lib.mlir import ir as jir

    funcs, notes = {}, {}
    for op in module.body.operations:
        name = op.operation.name
        if name == "func.func":
            funcs[_string(op.attributes["sym_name"])] = op
        elif name.startswith("sdy."):
            notes[name] = notes.get(name, 0) + 1
    groups: dict[str, tuple[str, list[str]]] = {}

    def bad(key, why, loc):
        groups.setdefault(key, (why, []))[1].append(str(loc))

    def note_attrs(op):
        for key in ("arg_attrs", "res_attrs"):
            if key in op.attributes and isinstance(op.attributes[key], jir.ArrayAttr):
                for a in op.attributes[key]:
                    for n in _attr_names(a):
                        if n in _SHARDING_ATTRS:
                            notes[n] = notes.get(n, 0) + 1
        for n in _SHARDING_ATTRS:
            if n in op.attributes:
                notes[n] = notes.get(n, 0) + 1

    seen, todo = set(), ["main"]

    def visit(op):
        name = op.operation.name
        note_attrs(op)
        if name == "func.call" or name == "stablehlo.composite":
            callee = _string(op.attributes["callee" if name == "func.call" else "decomposition"])
            if callee not in funcs:
                bad(name, f"unknown {'callee' if name == 'func.call' else 'decomposition'} @{callee}", op.location)
            elif callee not in seen:
                todo.append(callee)
        if name in _REFUSED_OPS:
            bad(name, _REFUSED_OPS[name], op.location)
            return  # its body is not imported: nothing in it to report
        if name == "stablehlo.custom_call":
            target = _custom_call_target(op)
            handler = CUSTOM_CALL_TARGETS.get(target)
            if target in _SHARDING_CUSTOM_CALLS:
                notes[f"custom_call @{target}"] = notes.get(f"custom_call @{target}", 0) + 1
            if handler is None:
                bad(name, f"call target @{target}", op.location)
            elif isinstance(handler, str):
                bad(name, f"call target @{target}: {handler}", op.location)
        elif name.startswith("sdy.") and name in CONVERTERS:
            notes[name] = notes.get(name, 0) + 1
        elif name not in CONVERTERS and name not in _STRUCTURAL:
            bad(name, "", op.location)
        for r in op.regions:
            for b in r.blocks:
                for inner in b.operations:
                    visit(inner)

    while todo:
        fname = todo.pop()
        if fname in seen or fname not in funcs:
            continue
        seen.add(fname)
        visit(funcs[fname])
    if groups:
        raise UnsupportedOpsError([(k, why, locs) for k, (why, locs) in groups.items()])
    if notes:
        what = ", ".join(f"{n} x{c}" for n, c in sorted(notes.items()))
        _log.warning("relax-mlir: sharding annotations dropped (%s): the module is compiled for one device", what)


def _identity(im, op, ins):
    """An annotation that passes its operands through (sharding constraints, placement)."""
    return list(ins)


def _composite(im, op, ins):
    """stablehlo.composite: its decomposition function, inlined (the composite's name and
    attributes only matter to a backend that has a fused kernel for it)."""
    callee = _string(op.attributes["decomposition"])
    f = im.funcs.get(callee)
    if f is None:
        raise UnsupportedOpError(op.operation.name, str(op.location), f"unknown decomposition @{callee}")
    outs, _ = im.run_func(f, list(ins))
    return outs


def _refuse_manual(im, op, ins):
    raise UnsupportedOpError(op.operation.name, str(op.location), _REFUSED_OPS[op.operation.name])


_SHARDING_CUSTOM_CALLS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})
_SHARD_MAP_WHY = ("shard_map's manual sharding (per-device shapes) is not supported: relax compiles for one "
                  "device; call the function without shard_map")

# custom_call target -> converter, or a string: why the target is refused.
CUSTOM_CALL_TARGETS: dict[str, Callable | str] = {
    "shape_assertion": lambda im, op, ins: [],  # the executable checks the signature's symbols itself
    "Sharding": _identity,  # with_sharding_constraint (GSPMD): mhlo.sharding on an identity
    "annotate_device_placement": _identity,  # memory kind / device placement of a value
    "SPMDFullToShardShape": _SHARD_MAP_WHY,
    "SPMDShardToFullShape": _SHARD_MAP_WHY,
    "cu_threefry2x32": "GPU random bits (jax.random on a GPU export); export for the CPU platform",
}


# Argument dims given as expressions: jax.export's "5*k + 15" gives @main an argument of
# unknown dim D; the module recovers k = (D - 15) floordiv 5 through its own arithmetic
# (`divmod` functions of divide, remainder, sign, compare, select) and asserts D mod 5 == 0 and
# k >= 1 with shape_assertion custom calls, which the import drops. `Importer.bind_dim_exprs`
# names the symbol instead: a `relax.arange` of (D - 15) floordiv 5 elements match_cast to [k]
# binds k, and a match_cast of the argument to [5*k + 15, ...] checks D = 5*k + 15 at run time
# (its message names the argument, the expression and k); D >= 20 (k >= 1) becomes D's
# `relax.symbol_lower`. The body then sees 5*k + 15, and the known-value folds below turn jax's
# floor_divide / remainder arithmetic back into k.

def _solve_affine(e: Expr, s: str) -> tuple[int, Expr] | None:
    """(a, b) with e == a*s + b, a > 0 and b free of s; None when e is not of that form."""
    a, rest = 0, []
    for mono, c in e.terms:
        if s in mono:
            if mono != (s,):
                return None
            a = c
        else:
            rest.append((mono, c))
    if a <= 0:
        return None
    b = e - a * sym(s)
    if s in b.symbols():
        return None
    return a, b


def _arg_dim_symbol(i: int, j: int, taken: set[str]) -> str:
    name = f"arg{i}_dim{j}"
    while name in taken:
        name += "_"
    return name


def name_dim_exprs(im, params):
    """Give each argument dim that jax names by an expression (not a bare symbol) its own
    symbol `arg<i>_dim<j>`; record (symbol, expression) in `im.dim_exprs`."""
    from relax_mlir.shape import ShapeParseError, parse
    im.dim_exprs = {}
    taken = {n for ns in im.dim_names for n in (ns or []) if n and _is_name(n)}
    out = []
    for i, sdims, dt in params:
        names = im.dim_names[i] if i < len(im.dim_names) else None
        new = list(sdims)
        for j, d in enumerate(sdims):
            nm = names[j] if names and j < len(names) else None
            if not nm or _is_name(nm) or not str(d).startswith("zzA"):
                continue
            try:
                e = parse(nm)
            except ShapeParseError:
                raise UnsupportedOpError("func.func", "", f"argument #{i} dim {j} is given as '{nm}', which is not "
                                                          f"a shape expression relax reads") from None
            s = _arg_dim_symbol(i, j, taken)
            taken.add(s)
            new[j] = sym(s)
            im.dim_exprs[(i, j)] = (s, e)
        out.append((i, new, dt))
    return out


def bind_dim_exprs(im, params, args: list) -> list:
    """Bind the symbols of expression dims (k of 5*k + 15) and check each such argument against
    its expression at run time; the argument values the body sees have the expression dims."""
    exprs = getattr(im, "dim_exprs", {})
    if not exprs:
        return args
    bare = {str(d) for _, sdims, _ in params for d in sdims if d.is_symbol}
    defs: dict[str, Expr] = {}
    for (i, j), (s, e) in sorted(exprs.items()):
        for k in sorted(e.symbols()):
            if k in bare or k in defs:
                continue
            ab = _solve_affine(e, k) if len(e.symbols()) == 1 else None
            if ab is None or not ab[1].is_const:
                continue
            a, b = ab
            defs[k] = floordiv(sym(s) - b, a)
            # k >= 1 (a jax dimension variable): the argument dim is at least a + b
            im.extra_lower[s] = max(im.extra_lower.get(s, 0), a + b.value)
    for (i, j), (s, e) in sorted(exprs.items()):
        missing = sorted(e.symbols() - bare - set(defs))
        if missing:
            raise UnsupportedOpError("func.func", "", f"argument #{i} dim {j} is given as '{e}': its symbol "
                                                      f"{missing[0]} is neither a whole dim of an argument nor "
                                                      f"recoverable as (dim - b) floordiv a from one a*{missing[0]} + b")
    for k, value in defs.items():
        t = im.emit("relax.arange", [], 1, "i64", {"end": value, "dtype": _dtype_attr("i64")}, dims=[value])
        ir.Operation.create("relax.match_cast", results=[_ttype([sym(k)], "i64")], operands=[t.value],
                            loc=ir.Location.name(f"symbol {k} of the argument shapes"))
        im.dim_vars.add(k)
    by_arg = {}
    for (i, j), (s, e) in exprs.items():
        by_arg.setdefault(i, {})[j] = (s, e)
    out = []
    positions = [i for i, _, _ in params if i not in im.unused_args]
    for i, v in zip(positions, args):
        if i not in by_arg:
            out.append(v)
            continue
        dims = list(v.dims)
        for j, (s, e) in by_arg[i].items():
            dims[j] = e
        what = ", ".join(f"dim {j} = {e}" for j, (_, e) in sorted(by_arg[i].items()))
        cast = ir.Operation.create("relax.match_cast", results=[_ttype(dims, v.dtype)], operands=[v.value],
                                   loc=ir.Location.name(f"argument #{i} ({what})"))
        out.append(Val(cast.results[0], v.dtype, dims))
    return out


# Known-value folds of the scalar integer / i1 arithmetic jax emits for shapes (its floor_divide
# and remainder functions: sign, compare, select, and/or/not, remainder), where the shape
# algebra proves the outcome; None leaves the op to its converter.

def _sign_of(e: Expr, facts) -> int | None:
    if e.is_const:
        return (e.value > 0) - (e.value < 0)
    if facts.prove_gt(e, 0):
        return 1
    if facts.prove_lt(e, 0):
        return -1
    return None


def _compare_known(direction: str, a: Expr, b: Expr, facts) -> int | None:
    d = a - b
    s = _sign_of(d, facts)
    if direction in ("EQ", "NE"):
        if s is None:
            return None
        return int((s == 0) == (direction == "EQ"))
    if s is None:  # weak facts: a >= b or a <= b without the sign of a - b
        if direction in ("GE", "LT") and facts.prove_ge(d, 0):
            return int(direction == "GE")
        if direction in ("LE", "GT") and facts.prove_le(d, 0):
            return int(direction == "LE")
        return None
    return int({"LT": s < 0, "LE": s <= 0, "GT": s > 0, "GE": s >= 0}[direction])


def fold_known(im, op, ins):
    """The known values of a scalar/1-D integer or i1 op whose operands are known, or None."""
    name = op.operation.name
    if name not in _KNOWN_FOLDS or not ins or any(v.known is None for v in ins):
        return None
    rdims, dt = _res(op)
    if dt not in ("i1", "i8", "i16", "i32", "i64") or len(rdims) > 1:
        return None
    n = max(len(v.known) for v in ins)
    if any(len(v.known) not in (1, n) for v in ins):
        return None
    cols = [[v.known[t if len(v.known) > 1 else 0] for v in ins] for t in range(n)]
    facts = shape_facts(im)
    out = []
    for c in cols:
        r = _KNOWN_FOLDS[name](op, c, facts)
        if r is None:
            return None
        out.append(r if isinstance(r, Expr) else const(int(r)))
    return Val(None, dt, _merge_dims(rdims, [const(n)] if rdims else []), out)


def _fold_compare(op, c, facts):
    from jax._src.lib.mlir.dialects import hlo
    return _compare_known(hlo.ComparisonDirectionAttr(op.attributes["comparison_direction"]).value,
                          c[0], c[1], facts)


def _fold_logic(fn):
    def fold(op, c, facts):
        if any(not x.is_const for x in c) or _res(op)[1] != "i1":
            return None
        return fn(*[bool(x.value) for x in c])
    return fold


def _fold_remainder_sym(op, c, facts):
    a, b = c
    if a.is_const and b.is_const:
        return _fold_remainder(a, b)
    if facts.prove_ge(a, 0) and b.is_const and b.value > 0:
        return mod(a, b)
    return None


_KNOWN_FOLDS = {
    "stablehlo.sign": lambda op, c, facts: _sign_of(c[0], facts),
    "stablehlo.compare": _fold_compare,
    "stablehlo.select": lambda op, c, facts: (c[1] if c[0].value else c[2]) if c[0].is_const else None,
    "stablehlo.and": _fold_logic(lambda a, b: a and b),
    "stablehlo.or": _fold_logic(lambda a, b: a or b),
    "stablehlo.not": _fold_logic(lambda a: not a),
    "stablehlo.remainder": _fold_remainder_sym,
}


def shape_facts(im) -> Facts:
    """What the import knows of its symbols: jax dimension variables >= 1, expression dims'
    lower bounds."""
    lower = {n: 1 for n in im.dim_vars}
    for n, v in getattr(im, "extra_lower", {}).items():
        lower[n] = max(lower.get(n, 0), v)
    return Facts(lower=lower, upper=dict(getattr(im, "upper", {})))


CONVERTERS: dict[str, Callable] = {
    "stablehlo.add": _binary("relax.add", _INT_FOLD["stablehlo.add"]),
    "stablehlo.subtract": _binary("relax.subtract", _INT_FOLD["stablehlo.subtract"]),
    "stablehlo.multiply": _binary("relax.multiply", _INT_FOLD["stablehlo.multiply"]),
    "stablehlo.divide": _binary("relax.divide", _INT_FOLD["stablehlo.divide"]),
    "stablehlo.maximum": _binary("relax.maximum", _INT_FOLD["stablehlo.maximum"]),
    "stablehlo.minimum": _binary("relax.minimum", _INT_FOLD["stablehlo.minimum"]),
    "stablehlo.power": _binary("relax.power"),
    "stablehlo.remainder": _binary("relax.remainder", _INT_FOLD["stablehlo.remainder"]),
    "stablehlo.negate": _unary("relax.negative"),
    "stablehlo.abs": _unary("relax.abs"),
    "stablehlo.exponential": _unary("relax.exp"),
    "stablehlo.exponential_minus_one": _expm1,
    "stablehlo.log": _unary("relax.log"),
    "stablehlo.log_plus_one": _unary("relax.log1p"),
    "stablehlo.tanh": _unary("relax.tanh"),
    "stablehlo.logistic": _unary("relax.sigmoid"),
    "stablehlo.sqrt": _unary("relax.sqrt"),
    "stablehlo.rsqrt": _unary("relax.rsqrt"),
    "stablehlo.sine": _unary("relax.sin"),
    "stablehlo.cosine": _unary("relax.cos"),
    "stablehlo.floor": _unary("relax.floor"),
    "stablehlo.ceil": _unary("relax.ceil"),
    "stablehlo.sign": _unary("relax.sign"),
    "chlo.erf": _unary("relax.erf"),
    "stablehlo.not": _logic("relax.logical_not"),
    "stablehlo.and": _logic("relax.logical_and"),
    "stablehlo.or": _logic("relax.logical_or"),
    "stablehlo.compare": _compare,
    "stablehlo.select": _select,
    "stablehlo.clamp": _clamp,
    "stablehlo.convert": _convert,
    "stablehlo.constant": _constant,
    "stablehlo.get_dimension_size": _get_dimension_size,
    "stablehlo.broadcast_in_dim": _broadcast_in_dim,
    "stablehlo.dynamic_broadcast_in_dim": _dynamic_broadcast_in_dim,
    "stablehlo.reshape": _reshape,
    "stablehlo.dynamic_reshape": _dynamic_reshape,
    "stablehlo.transpose": _transpose,
    "stablehlo.dot_general": _dot_general,
    "stablehlo.reduce": _reduce,
    "stablehlo.concatenate": _concatenate,
    "stablehlo.slice": _slice,
    "stablehlo.iota": _iota,
    "stablehlo.dynamic_iota": _dynamic_iota,
    "stablehlo.gather": _gather,
    "stablehlo.dynamic_gather": _gather,
    "stablehlo.custom_call": _custom_call,
    "stablehlo.optimization_barrier": _optimization_barrier,
    # importer infrastructure (issue 16)
    "stablehlo.composite": _composite,
    "sdy.sharding_constraint": _identity,
    "sdy.reshard": _identity,
    "sdy.manual_computation": _refuse_manual,
}


def _element_type(t) -> str | None:
    from jax._src.lib.mlir import ir as jir
    try:
        return _jax_dtype(jir.ShapedType(t).element_type)
    except (ValueError, TypeError):
        return None


def check_element_types(module) -> None:
    """Raise UnsupportedTypesError naming every op (with its location) whose operands or results
    have an element type relax does not support (ui64, i4, complex, f8 ...), all at once."""
    items: list[UnsupportedOpError] = []
    supported = ", ".join(sorted(_DTYPES))

    def visit(op):
        name = op.operation.name
        if name == "func.func":
            for r in op.regions:
                for b in r.blocks:
                    for i, a in enumerate(b.arguments):
                        dt = _element_type(a.type)
                        if dt is not None and dt not in _DTYPES:
                            items.append(UnsupportedOpError(name, str(op.location), f"argument #{i} has element type "
                                                                                     f"{dt} (supported: {supported})"))
        else:
            for i, r in enumerate(op.results):
                dt = _element_type(r.type)
                if dt is not None and dt not in _DTYPES:
                    items.append(UnsupportedOpError(name, str(op.location), f"result #{i} has element type {dt} "
                                                                             f"(supported: {supported})"))
        for r in op.regions:
            for b in r.blocks:
                for inner in b.operations:
                    visit(inner)

    for op in module.body.operations:
        visit(op)
    if items:
        raise UnsupportedTypesError(items)


def import_module(module, dim_names=None, unused_args=None, *, dim_vars: Iterable[str] = (),
                  source_name: str = "<string>", symbol_bounds: dict[str, int] | None = None) -> Module:
    """Import a parsed jax-MLIR module (`jax._src.lib.mlir.ir.Module`) -> a verified, shape-deduced
    `relax_mlir.Module`.
    `dim_names[i][j]`: the symbol name of dim j of argument i (None: derive one); `unused_args`:
    position -> (dims, dtype) of arguments @main does not take (jax.export drops unused ones),
    which the relax function takes and ignores; `dim_vars`: names that are jax dimension
    variables (>= 1, like those the module's `jax.global_constant` arguments name);
    `symbol_bounds`: symbol -> upper bound (jax's `s <= 32` constraints), `relax.symbol_bounds`."""
    from relax_mlir.targets import registry

    check_element_types(module)
    check_supported_ops(module)
    session = Session(source_name)
    with session.ctx, ir.Location.unknown():
        im = Importer(module, dim_names, unused_args, dim_vars, source_name)
        im.upper = dict(symbol_bounds or {})
        op = im.run()
    result = Module(session, op)
    if not run_pipeline(session, op, ["relax-infer-shapes"], registry()):
        raise CompileError("\n".join(d.render() for d in session.diags) or "the imported module does not verify")
    return result


def import_stablehlo(text: str, dim_names=None, source_name: str = "<string>", unused_args=None, *,
                     dim_vars: Iterable[str] = (), symbol_bounds: dict[str, int] | None = None) -> Module:
    """StableHLO text (as `jax.export` prints it) -> a `relax_mlir.Module`. Errors:
    StableHLOParseError, UnsupportedOpError (UnsupportedTypesError), CompileError, ValueError;
    `render_error` formats any of them."""
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir as jir

    ctx = jmlir.make_ir_context()
    with ctx, jir.Location.unknown():
        try:
            op = jir.Operation.parse(text, source_name=source_name)
        except jir.MLIRError as e:
            diags = [(str(d.location), d.message) for d in e.error_diagnostics]
            if not any("single top-level operation" in m for _, m in diags):
                raise StableHLOParseError(diags) from None
            try:  # zero or several top-level ops: an implicit module (its locations say "-")
                module = jir.Module.parse(text)
            except jir.MLIRError as e2:
                raise StableHLOParseError([(str(d.location), d.message) for d in e2.error_diagnostics]) from None
        else:
            if op.operation.name == "builtin.module":
                module = _ModuleView(op)
            else:
                module = jir.Module.create()
                module.body.append(op.operation)
        return import_module(module, dim_names, unused_args, dim_vars=dim_vars, source_name=source_name,
                             symbol_bounds=symbol_bounds)


class _ModuleView:
    """A parsed `builtin.module` operation seen through the `Module` attributes the importer uses."""

    def __init__(self, op):
        self.operation = op.operation
        self.body = op.regions[0].blocks[0]
