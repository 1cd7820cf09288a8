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
from relax_mlir.shape import Expr, Facts, ceildiv, const, floordiv, max_, min_, mod, sym

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


_DTYPES = {"f16", "bf16", "f32", "f64", "i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"}
_FLOATS = ("f16", "bf16", "f32", "f64")
_NP_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
              "i32": np.int32, "i64": np.int64, "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32,
              "ui64": np.uint64}


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
        if t.is_unsigned and t.width in (8, 16, 32, 64):
            return f"ui{t.width}"
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
        self.scope: dict = {}  # the values in scope of the op being converted (see run_func)
        self.loc: ir.Location | None = None  # the jax op being converted
        self.env: dict = {}  # jax value -> Val, of the function being walked
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
            r = self.emit("relax.constant", [], min(rank, 1), v.dtype, {"value": value})
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
        if rank >= 2:  # a small static table (e.g. reduce_window padding), known row-major
            r = self.emit("relax.reshape", [r], rank, v.dtype, {"shape": list(v.dims)}, dims=v.dims)
        v.value = r.value

    # --- helpers ----------------------------------------------------------------------------

    def int_facts(self) -> Facts:
        """What the integer folds may assume: jax's dimension variables are >= 1."""
        return Facts(lower={s: 1 for s in self.dim_vars})

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
        self.relax_module = module
        self.region_funcs: list[ir.Operation] = []
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
        _finish_region_functions(self, mapping)
        func.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([a.type for a in body.arguments], [v.type for v in rets]))
        _import_donations(main, [i for i, _, _ in params if i not in self.unused_args], func)
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

    def run_func(self, func, args: list[Val], outer: dict | None = None) -> tuple[list[Val], ir.Location]:
        """Import the first block of `func` (a function, or a region whose ops may use the values of
        the enclosing `outer` scope) on `args`; its returned values and the return's location."""
        block = func.regions[0].blocks[0]
        env = dict(outer) if outer else {}
        for a, v in zip(block.arguments, args):
            env[a] = v
        return self.run_block(block, env)

    def run_block(self, block, env: dict) -> tuple[list[Val], ir.Location]:
        """Convert the ops of `block` (its arguments, and any outer value it uses, already in
        `env`) up to its return; `self.env` is the environment of the block being converted."""
        saved, self.env = getattr(self, "env", None), env
        try:
            return self._run_block(block, env)
        finally:
            self.env = saved

    def _run_block(self, block, env: dict) -> tuple[list[Val], ir.Location]:
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
            self.env = env  # the converter may look through its operands' defining ops
            self.scope = env  # what a converter of an op with regions (stablehlo.while) sees
            try:
                outs = _fold_shape_scalar(self, op, ins)  # a known dim computation (jax's d // k)
                if outs is None:
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


def _import_donations(main, kept: list[int], func: ir.Operation) -> None:
    """`tf.aliasing_output = r` on @main's argument k (jax.jit's donate_argnums): relax parameter
    kept[k] gets `relax.donate = r` (result r is written into its buffer; relax-infer-shapes checks
    the types). `jax.buffer_donor` (donated, no result to alias) is dropped: the argument is only read."""
    from jax._src.lib.mlir import ir as jir

    attrs = main.attributes["arg_attrs"] if "arg_attrs" in main.attributes else None
    donate = {}
    for k, a in enumerate(attrs if isinstance(attrs, jir.ArrayAttr) else ()):
        if k < len(kept) and isinstance(a, jir.DictAttr) and "tf.aliasing_output" in a \
                and isinstance(a["tf.aliasing_output"], jir.IntegerAttr):
            donate[kept[k]] = a["tf.aliasing_output"].value
    if donate:
        i64 = ir.IntegerType.get_signless(64)
        n = len(func.regions[0].blocks[0].arguments)
        func.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(
            {"relax.donate": ir.IntegerAttr.get(i64, donate[i])} if i in donate else {}) for i in range(n)])


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


def _fold_divide(a: Expr, b: Expr, facts: Facts | None = None) -> Expr | None:
    """StableHLO integer divide: truncating, x / 0 = -1 (INT_MIN / -1 wraps, see _wrap). A symbolic
    quotient is kept only where the signs are proven (jax's floor_divide of a negated dim, as
    SAME padding computes it, divides -n); None otherwise."""
    if a.is_const and b.is_const:
        x, y = a.value, b.value
        if y == 0:
            return const(-1)
        q = abs(x) // abs(y)
        return const(-q if (x < 0) != (y < 0) else q)
    facts = facts or Facts()
    if facts.prove_positive(-b):
        q = _fold_divide(a, -b, facts)
        return None if q is None else -q
    if not facts.prove_positive(b):
        return None
    if _decide(facts.prove_ge, a, facts, const(0)):
        return floordiv(a, b)
    if _decide(facts.prove_le, a, facts, const(0)):
        return -floordiv(-a, b)
    return None


def _fold_remainder(a: Expr, b: Expr, facts: Facts | None = None) -> Expr | None:
    """StableHLO integer remainder: the sign of a, x % 0 = x; symbolic where the signs are proven."""
    if not (a.is_const and b.is_const):
        facts = facts or Facts()
        if facts.prove_positive(-b):
            b = -b
        if not facts.prove_positive(b):
            return None
        if _decide(facts.prove_ge, a, facts, const(0)):
            return mod(a, b)
        if _decide(facts.prove_le, a, facts, const(0)):
            return -mod(-a, b)
        return None
    x, y = a.value, b.value
    if y == 0:
        return a
    r = abs(x) % abs(y)
    return const(-r if x < 0 else r)


# Folds of known integer values (None: not foldable, emit the op); results wrap to the dtype.
_INT_FOLD: dict[str, Callable] = {
    "stablehlo.add": lambda a, b, facts=None: a + b,
    "stablehlo.subtract": lambda a, b, facts=None: a - b,
    "stablehlo.multiply": lambda a, b, facts=None: a * b,
    "stablehlo.divide": _fold_divide,
    "stablehlo.remainder": _fold_remainder,
    "stablehlo.maximum": lambda a, b, facts=None: max_(a, b),
    "stablehlo.minimum": lambda a, b, facts=None: min_(a, b),
}


def _binary(relax_name, int_fold=None):
    def conv(im: Importer, op, ins):
        a, b = ins
        dims, dt = _res(op)
        dims = _merge_dims(dims, a.dims, b.dims)
        if int_fold is not None and dt.startswith("i") and dt != "i1" and _known_ok(ins) \
                and len(a.known) == len(b.known):
            facts = im.int_facts()
            folded = [int_fold(x, y, facts) for x, y in zip(a.known, b.known)]
            if all(f is not None for f in folded):
                return Val(None, dt, dims, [_wrap(f, dt) for f in folded])
        return im.emit(relax_name, [a, b], len(dims), dt, dims=dims)
    return conv


def _known_sign(e: Expr, facts: Facts) -> int | None:
    if _decide(facts.prove_positive, e, facts):
        return 1
    if _decide(facts.prove_positive, -e, facts):
        return -1
    if _decide(facts.prove_eq, e, facts, const(0)):
        return 0
    return None


def _unary(relax_name):
    def conv(im: Importer, op, ins):
        (a,) = ins
        dims, dt = _res(op)
        if relax_name == "relax.negative" and a.known is not None:
            return Val(None, dt, _merge_dims(dims, a.dims), [_wrap(-x, dt) for x in a.known])
        if relax_name == "relax.sign" and a.known is not None and dt not in _FLOATS:
            facts = im.int_facts()
            signs = [_known_sign(x, facts) for x in a.known]
            if all(v is not None for v in signs):
                return Val(None, dt, _merge_dims(dims, a.dims), [const(v) for v in signs])
            known = [const(v) if v is not None else _positive_indicator(x, facts) - _positive_indicator(-x, facts)
                     for v, x in zip(signs, a.known)]
            return im.emit(relax_name, [a], len(dims), dt, dims=_merge_dims(dims, a.dims), known=known)
        return im.emit(relax_name, [a], len(dims), dt, dims=_merge_dims(dims, a.dims))
    return conv


def _bool_decided(e: Expr, facts: Facts) -> Expr:
    """A boolean Expr in {0, 1} as a constant where the facts (by cases) decide it."""
    if e.is_const:
        return e
    if _decide(facts.prove_eq, e, facts, const(0)):
        return const(0)
    if _decide(facts.prove_eq, e, facts, const(1)):
        return const(1)
    return e


def _and_expr(xs: list[Expr]) -> Expr:
    """The conjunction of booleans known as Exprs in {0, 1}."""
    out = const(1)
    for x in xs:
        if x.is_const and x.value == 0:
            return const(0)
        out = x if out.is_const else (out if x.is_const else out * x)
    return out


def _or_expr(xs: list[Expr]) -> Expr:
    out = const(0)
    for x in xs:
        if x.is_const and x.value != 0:
            return const(1)
        out = x if out.is_const else (out if x.is_const else max_(out, x))
    return out


def _logic(relax_name):
    def conv(im, op, ins):
        dims, dt = _res(op)
        if dt != "i1":
            raise UnsupportedOpError(op.operation.name, str(op.location), "bitwise ops on integers")
        known = None
        if _known_ok(ins) and len({len(v.known) for v in ins}) == 1:
            fn = {"relax.logical_and": _and_expr, "relax.logical_or": _or_expr,
                  "relax.logical_not": lambda xs: const(1) - xs[0]}[relax_name]
            facts = im.int_facts()
            known = [_bool_decided(fn([v.known[i] for v in ins]), facts) for i in range(len(ins[0].known))]
            if all(e.is_const for e in known):
                return Val(None, dt, dims, known)
        return im.emit(relax_name, ins, len(dims), dt, dims=_merge_dims(dims, *[v.dims for v in ins]),
                       known=known)
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
    if dt.startswith("ui"):
        return _unsigned_constant(im, attr, dims, dt)
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
    if x.known is not None and (len(dims) <= 1 or all(d is not None and d.is_const for d in dims)):
        return Val(None, dt, dims, list(x.known))
    return im.reshape(x, dims)


def _dynamic_reshape(im, op, ins):
    x, shp = ins
    dims, dt = _res(op)
    if shp.known is None:
        raise ValueError("output shape is not a known shape computation")
    dims = _merge_dims(dims, shp.known)
    if x.known is not None and (len(dims) <= 1 or all(d is not None and d.is_const for d in dims)):
        return Val(None, dt, dims, list(x.known))
    return im.reshape(x, dims)


def _broadcast_in_dim_impl(im, op, x: Val, bdims, rdims, dt):
    if x.known is not None and len(rdims) <= 1 and all(d is not None and d.is_const and d.value <= 64 for d in rdims):
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
    if _known_ok(ins) and (len(rdims) == 1 or axis == 0 and all(d is not None for d in rdims)):
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
    if _known_ok(ins) and all(e.is_const for e in c.known):
        n = max(len(a.known), len(b.known))
        pick = [c.known[0 if len(c.known) == 1 else i].value for i in range(n)]
        if len(a.known) == len(b.known) == n and len(c.known) in (1, n):
            return Val(None, dt, _merge_dims(rdims, a.dims), [a.known[i] if pick[i] else b.known[i] for i in range(n)])
    known = None
    if _known_ok(ins) and dt not in _FLOATS and dt != "i1" and len(a.known) == len(b.known) \
            and len(c.known) in (1, len(a.known)):
        # c in {0, 1}: b + c * (a - b)
        known = [b.known[i] + c.known[0 if len(c.known) == 1 else i] * (a.known[i] - b.known[i])
                 for i in range(len(a.known))]
        return im.emit("relax.where", [c, a, b], len(rdims), dt, dims=_merge_dims(rdims, a.dims, b.dims, c.dims),
                       known=known)
    return im.emit("relax.where", [c, a, b], len(rdims), dt, dims=_merge_dims(rdims, a.dims, b.dims, c.dims))


_CMP = {"EQ": "relax.equal", "NE": "relax.not_equal", "LT": "relax.less", "LE": "relax.less_equal",
        "GT": "relax.greater", "GE": "relax.greater_equal"}


def _fold_compare(im, direction: str, a: Val, b: Val, op) -> list[Expr] | None:
    """Known integer (or boolean) operands whose relation the facts decide -> known booleans."""
    if not (_known_ok([a, b]) and len(a.known) == len(b.known)) or a.dtype in _FLOATS:
        return None
    if "compare_type" in op.attributes and "FLOAT" in str(op.attributes["compare_type"]):
        return None
    facts = im.int_facts()
    out = []
    for x, y in zip(a.known, b.known):
        d = x - y
        if d.is_const:
            v = {"EQ": d.value == 0, "NE": d.value != 0, "LT": d.value < 0, "LE": d.value <= 0,
                 "GT": d.value > 0, "GE": d.value >= 0}[direction]
        else:
            pos, neg = _decide(facts.prove_positive, d, facts), _decide(facts.prove_positive, -d, facts)
            zero = _decide(facts.prove_eq, d, facts, const(0))
            ge, le = pos or _decide(facts.prove_ge, d, facts, const(0)), neg or _decide(facts.prove_le, d, facts, const(0))
            v = {"EQ": True if zero else (False if pos or neg else None),
                 "NE": False if zero else (True if pos or neg else None),
                 "LT": True if neg else (False if ge else None), "LE": True if le else (False if pos else None),
                 "GT": True if pos else (False if le else None), "GE": True if ge else (False if neg else None)}[direction]
            if v is None:
                out.append(_bool_decided(_bool_expr(direction, d, facts), facts))
                continue
        out.append(const(int(v)))
    return out


def _positive_indicator(e: Expr, facts: Facts) -> Expr:
    """[e > 0] for an integer e, as an Expr in {0, 1}."""
    if facts.prove_ge(e, 0) and facts.prove_le(e, 1):
        return e
    return min_(max_(e, const(0)), const(1))


def _bool_expr(direction: str, d: Expr, facts: Facts) -> Expr:
    """[d <direction> 0] as an Expr in {0, 1} (jax's floor_divide selects on the remainder's sign)."""
    gt, lt = _positive_indicator(d, facts), _positive_indicator(-d, facts)
    return {"GT": gt, "LT": lt, "LE": const(1) - gt, "GE": const(1) - lt, "NE": gt + lt,
            "EQ": const(1) - gt - lt}[direction]


def _compare(im, op, ins):
    a, b = ins
    rdims, _ = _res(op)
    from jax._src.lib.mlir.dialects import hlo

    direction = hlo.ComparisonDirectionAttr(op.attributes["comparison_direction"]).value
    if direction == "EQ" and _known_ok(ins) and len(a.known) == 1 == len(b.known) \
            and a.known[0].is_symbol and b.known[0].is_symbol:
        (sa,), (sb,) = a.known[0].symbols(), b.known[0].symbols()
        im.unions.append((sa, sb))
    folded = _fold_compare(im, direction, a, b, op)
    if folded is not None and all(e.is_const for e in folded):
        return Val(None, "i1", _merge_dims(rdims, a.dims, b.dims), folded)
    # a symbolic boolean keeps its relax op (used as data) and its known value (used in shapes)
    return im.emit(_CMP[direction], [a, b], len(rdims), "i1", dims=_merge_dims(rdims, a.dims, b.dims),
                   known=folded)


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
    if dt.startswith("ui"):
        return v == (0 if lo else (1 << int(dt[2:])) - 1)
    w = int(dt[1:])
    return v == (-(1 << (w - 1)) if lo else (1 << (w - 1)) - 1)


def _reduce(im, op, ins):
    if len(op.results) != 1:
        return _variadic_reduce(im, op, ins)
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


def _optimization_barrier(im, op, ins):
    return list(ins)


# --- slicing (issue 16) ---

def _slice_facts(im) -> Facts:
    """What the importer knows of its symbols: jax dimension variables are >= 1."""
    return Facts(lower={s: 1 for s in im.dim_vars})


def _real_dynamic_slice(im, op, ins):
    """A slice whose start/limit/strides are shape computations (what jax emits for a static
    slice of a symbolic dim): relax.strided_slice with symbolic positions. StableHLO requires
    0 <= start <= limit <= dim; positions outside are clamped into [0, dim] (XLA's behaviour),
    never counted from the end."""
    x, start, limit, strides = ins
    rdims, dt = _res(op)
    if not _known_ok([start, limit]) and strides.known is not None:
        sizes = _slice_sizes_of(im, op)
        if sizes is not None and all(v.is_const and v.value == 1 for v in strides.known):
            return _run_time_slice(im, x, start, sizes, dt, rdims)
    if not _known_ok([start, limit, strides]):
        raise ValueError("start_indices, limit_indices and strides must be shape computations of symbols "
                         "and constants (run-time slice bounds give a result of unknown shape)")
    r = len(x.dims)
    if not (len(start.known) == len(limit.known) == len(strides.known) == r):
        raise ValueError(f"index operands must have {r} entries (the operand's rank)")
    facts = _slice_facts(im)
    steps = []
    for s in strides.known:
        if not s.is_const or s.value < 1:
            raise ValueError(f"strides must be positive constants, got {s}")
        steps.append(s.value)
    begin, end, dims = [], [], []
    for i in range(r):
        b, e, d = start.known[i], limit.known[i], x.dims[i]
        b = b if facts.prove_ge(b, 0) else max_(b, const(0))
        e = e if facts.prove_ge(e, 0) else max_(e, const(0))
        if d is not None:
            b = b if facts.prove_le(b, d) else min_(b, d)
            e = e if facts.prove_le(e, d) else min_(e, d)
        ext = e - b
        if not facts.prove_ge(ext, 0):
            ext = max_(ext, const(0))
        dims.append(ext if steps[i] == 1 else ceildiv(ext, steps[i]))
        begin.append(b)
        end.append(e)
    if x.known is not None and r == 1 and all(v.is_const for v in begin + end):
        return Val(None, dt, _merge_dims(rdims, dims), x.known[begin[0].value:end[0].value:steps[0]])
    return im.emit("relax.strided_slice", [x], r, dt,
                   {"axes": list(range(r)), "begin": begin, "end": end, "strides": steps},
                   dims=_merge_dims(rdims, dims))


def _slice_sizes_of(im, op) -> list | None:
    """limit - start of a real_dynamic_slice whose limit is `add(start, sizes)` with known sizes
    (jax's lax.dynamic_slice of an operand with symbolic dims), else None."""
    start, limit = op.operands[1], op.operands[2]
    owner = limit.owner
    if getattr(owner, "name", None) != "stablehlo.add":
        return None
    a, b = owner.operands[0], owner.operands[1]
    other = b if a == start else a if b == start else None
    v = im.env.get(other) if other is not None else None
    return list(v.known) if v is not None and v.known is not None else None


def _run_time_slice(im, x: Val, start: Val, sizes: list, dt: str, rdims) -> Val:
    """relax.dynamic_slice at the run-time positions of the 1-D `start` (StableHLO clamps them)."""
    r = len(x.dims)
    if len(sizes) != r:
        raise ValueError(f"index operands must have {r} entries (the operand's rank)")
    starts = []
    for i in range(r):
        if start.known is not None:
            starts.append(Val(None, start.dtype, [], [start.known[i]]))
            continue
        e = im.emit("relax.strided_slice", [start], 1, start.dtype, {"axes": [0], "begin": [i], "end": [i + 1]},
                    dims=[const(1)])
        starts.append(im.reshape(e, []))
    return im.emit("relax.dynamic_slice", [x] + starts, r, dt, {"sizes": sizes}, dims=_merge_dims(rdims, sizes))


_CMP_FOLD = {"EQ": lambda f, a, b: (f.prove_eq(a, b), f.prove_lt(a, b) or f.prove_gt(a, b)),
             "NE": lambda f, a, b: (f.prove_lt(a, b) or f.prove_gt(a, b), f.prove_eq(a, b)),
             "LT": lambda f, a, b: (f.prove_lt(a, b), f.prove_ge(a, b)),
             "LE": lambda f, a, b: (f.prove_le(a, b), f.prove_gt(a, b)),
             "GT": lambda f, a, b: (f.prove_gt(a, b), f.prove_le(a, b)),
             "GE": lambda f, a, b: (f.prove_ge(a, b), f.prove_lt(a, b))}


def _scalar_known(v: Val) -> Expr | None:
    return v.known[0] if v.known is not None and len(v.known) == 1 and len(v.dims) == 0 else None


def _fold_shape_scalar(im, op, ins) -> Val | None:
    """The known value of a scalar sign / compare / select / and / or / not of known dim values,
    decided by the facts (jax computes `d // k` of a symbolic dim d through sign, compare,
    remainder, and, select: with d >= 0 and k > 0 the correction branch is provably not taken).
    None when the value is not decided: the op is converted as usual."""
    name = op.operation.name
    if name not in ("stablehlo.sign", "stablehlo.compare", "stablehlo.select", "stablehlo.and", "stablehlo.or",
                    "stablehlo.not") or len(op.results) != 1:
        return None
    rdims, dt = _res(op)
    if rdims or not (dt == "i1" or dt in ("i8", "i16", "i32", "i64")):
        return None
    vals = [_scalar_known(v) for v in ins]
    if any(len(v.dims) != 0 for v in ins):
        return None
    facts = _slice_facts(im)

    def out(e):
        return Val(None, dt, [], [e])

    if name == "stablehlo.sign":
        a = vals[0]
        if a is None:
            return None
        for c, ok in ((1, facts.prove_gt(a, 0)), (0, facts.prove_eq(a, 0)), (-1, facts.prove_lt(a, 0))):
            if ok:
                return out(const(c))
        return None
    if name == "stablehlo.compare":
        from jax._src.lib.mlir.dialects import hlo
        a, b = vals
        direction = hlo.ComparisonDirectionAttr(op.attributes["comparison_direction"]).value
        if a is None or b is None or direction not in _CMP_FOLD:
            return None
        if ins[0].dtype == "i1" or "compare_type" in op.attributes and \
                hlo.ComparisonTypeAttr(op.attributes["compare_type"]).value == "UNSIGNED":
            if not (a.is_const and b.is_const):
                return None
            w = 1 if ins[0].dtype == "i1" else int(ins[0].dtype[1:])
            a, b = const(a.value % (1 << w)), const(b.value % (1 << w))
        yes, no = _CMP_FOLD[direction](facts, a, b)
        return out(const(1)) if yes else out(const(0)) if no else None
    if name == "stablehlo.select":
        p = vals[0]
        if p is None or not p.is_const:
            return None
        chosen = ins[1] if p.value else ins[2]
        return chosen if chosen.known is not None else None
    if dt != "i1":
        return None
    if name == "stablehlo.not":
        return out(const(1 - vals[0].value)) if vals[0] is not None and vals[0].is_const else None
    consts = [v.value for v in vals if v is not None and v.is_const]
    if name == "stablehlo.and" and 0 in consts or name == "stablehlo.or" and 1 in consts:
        return out(const(0 if name == "stablehlo.and" else 1))  # decided by one operand
    if len(consts) == 2:
        return out(const(int(all(consts)) if name == "stablehlo.and" else int(any(consts))))
    return None


def _start_operands(im, starts: list[Val]) -> list[Val]:
    """Scalar start indices of one integer type (i64 when they differ)."""
    if len({s.dtype for s in starts}) <= 1:
        return starts
    return [s if s.dtype == "i64" else im.emit("relax.astype", [s], 0, "i64", {"dtype": _dtype_attr("i64")}, dims=[])
            for s in starts]


def _dynamic_slice(im, op, ins):
    x, starts = ins[0], ins[1:]
    rdims, dt = _res(op)
    sizes = _ints(op.attributes["slice_sizes"])
    return im.emit("relax.dynamic_slice", [x] + _start_operands(im, starts), len(sizes), dt, {"sizes": sizes},
                   dims=[const(s) for s in sizes])


def _dynamic_update_slice(im, op, ins):
    x, upd, starts = ins[0], ins[1], ins[2:]
    rdims, dt = _res(op)
    return im.emit("relax.dynamic_update_slice", [x, upd] + _start_operands(im, starts), len(x.dims), dt,
                   dims=_merge_dims(rdims, x.dims))


def _pad(im, op, ins):
    x, pv = ins
    rdims, dt = _res(op)
    lo = _ints(op.attributes["edge_padding_low"])
    hi = _ints(op.attributes["edge_padding_high"])
    it = _ints(op.attributes["interior_padding"])
    facts = _slice_facts(im)
    dims = []
    for n, a, b, c in zip(x.dims, lo, hi, it):
        if n is None:
            dims.append(None)
            continue
        gaps = const(0) if c == 0 else (n - 1 if facts.prove_ge(n, 1) else max_(n - 1, const(0)))
        dims.append(n + gaps * c + a + b)
    return im.emit("relax.pad", [x, pv], len(x.dims), dt, {"low": lo, "high": hi, "interior": it},
                   dims=_merge_dims(rdims, dims))


def _reverse(im, op, ins):
    (x,) = ins
    rdims, dt = _res(op)
    axes = _ints(op.attributes["dimensions"])
    if not axes:
        return x
    return im.emit("relax.reverse", [x], len(x.dims), dt, {"dimensions": axes}, dims=_merge_dims(rdims, x.dims))
# --- indexing (issue 16) ---


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
    from jax._src.lib.mlir.dialects import hlo

    ct = o.attributes["compare_type"] if "compare_type" in o.attributes else None
    return (hlo.ComparisonDirectionAttr(o.attributes["comparison_direction"]).value,
            hlo.ComparisonTypeAttr(ct).value if ct is not None else None)


def _owner(v):
    o = v.owner
    return o if getattr(o, "name", None) is not None and not hasattr(o, "arguments") else None


def _gather(im, op, ins):
    """stablehlo.gather / dynamic_gather: relax.take for the one-axis row lookups (x[idx]), the
    general relax.gather otherwise."""
    x, idx = ins[0], ins[1]
    rdims, dt = _res(op)
    from jax._src.lib.mlir.dialects import hlo

    dn = hlo.GatherDimensionNumbers(op.attributes["dimension_numbers"])
    offset, collapsed, smap = list(dn.offset_dims), list(dn.collapsed_slice_dims), list(dn.start_index_map)
    obatch, ibatch, ivd = list(dn.operand_batching_dims), list(dn.start_indices_batching_dims), int(dn.index_vector_dim)
    if op.operation.name == "stablehlo.dynamic_gather":
        if ins[2].known is None:
            raise ValueError("slice_sizes is not a known shape computation")
        sizes = list(ins[2].known)
    else:
        sizes = [const(v) for v in _ints(op.attributes["slice_sizes"])]
    r = len(x.dims)
    if not obatch and idx.known is not None and len(idx.dims) == 1 and ivd == 0 and len(smap) == len(idx.known):
        # One start vector known as shape computations (x[:, s - 1:] of a symbolic dim): a static
        # slice, each start clamped into [0, dim - size] as StableHLO's gather does.
        facts = _slice_facts(im)
        begin = [const(0)] * r
        for j, ax in enumerate(smap):
            b, d = idx.known[j], x.dims[ax]
            if d is None:
                break
            hi = d - sizes[ax]
            b = b if facts.prove_ge(b, 0) else max_(b, const(0))
            begin[ax] = b if facts.prove_le(b, hi) else min_(b, hi)
        else:
            sl = im.emit("relax.strided_slice", [x], r, dt,
                         {"axes": list(range(r)), "begin": begin, "end": [b + z for b, z in zip(begin, sizes)]},
                         dims=list(sizes))
            keep = [sizes[i] for i in range(r) if i not in collapsed]
            return im.reshape(sl, keep) if collapsed else sl
    if not obatch and len(smap) == 1 and collapsed == smap and sizes[smap[0]] == const(1):
        ax = smap[0]
        nb = len(idx.dims) - (1 if ivd < len(idx.dims) else 0)
        vec_ok = ivd == len(idx.dims) or (ivd == len(idx.dims) - 1 and idx.dims[ivd] == const(1))
        full = all(i == ax or (x.dims[i] is not None and sizes[i] == x.dims[i]) for i in range(r))
        if vec_ok and full and offset == [i for i in range(len(rdims)) if not ax <= i < ax + nb]:
            ind = im.reshape(idx, idx.dims[:ivd]) if ivd < len(idx.dims) else idx
            return im.emit("relax.take", [x, ind], len(rdims), dt, {"axis": ax},
                           dims=_merge_dims(rdims, x.dims[:ax] + ind.dims + x.dims[ax + 1:]))
    attrs = {"offset_dims": offset, "collapsed_slice_dims": collapsed, "operand_batching_dims": obatch,
             "start_indices_batching_dims": ibatch, "start_index_map": smap, "index_vector_dim": ivd,
             "slice_sizes": sizes}
    # The result dims (relax.gather's deduction, kept here so later shape computations see them):
    # offset dims take the window sizes of the dims neither collapsed nor batching, the others
    # the index dims but index_vector_dim, in order.
    window = [sizes[d] for d in range(r) if d not in collapsed and d not in obatch]
    batch = [idx.dims[i] for i in range(len(idx.dims)) if i != ivd]
    wi, bi = iter(window), iter(batch)
    dims = [next(wi) if i in offset else next(bi) for i in range(len(offset) + len(batch))]
    return im.emit("relax.gather", [x, idx], len(rdims), dt, attrs, dims=_merge_dims(rdims, dims))


_SCATTER_KIND = {"stablehlo.add": "add", "stablehlo.multiply": "mul", "stablehlo.maximum": "max",
                 "stablehlo.minimum": "min", "stablehlo.or": "add", "stablehlo.and": "mul"}
def _custom_call(im, op, ins):
    target = _string(op.attributes["call_target_name"])
    handler = CUSTOM_CALL_TARGETS.get(target)
    if handler is None or isinstance(handler, str):
        why = f"call target @{target}" + (f": {handler}" if handler else "")
        raise UnsupportedOpError("stablehlo.custom_call", str(op.location), why)
    return handler(im, op, ins)


def _scatter(im, op, ins):
    """stablehlo.scatter of one input with an update computation that is replace (return the
    update), add, multiply, maximum or minimum."""
    if len(op.results) != 1:
        raise ValueError("scatter of several inputs is not supported")
    x, idx, upd = ins
    rdims, dt = _res(op)
    from jax._src.lib.mlir.dialects import hlo

    block = op.regions[0].blocks[0]
    body = _body_ops(op)
    args = list(block.arguments)
    ret = body[-1]
    kind = None
    if len(body) == 1 and ret.operands[0] == args[1]:
        kind = "replace"
    elif len(body) == 2 and body[0].name in _SCATTER_KIND and ret.operands[0] == body[0].results[0] \
            and {body[0].operands[0], body[0].operands[1]} == {args[0], args[1]} \
            and (body[0].name not in ("stablehlo.or", "stablehlo.and") or dt == "i1"):
        kind = _SCATTER_KIND[body[0].name]
    if kind is None:
        names = [o.name for o in body[:-1]]
        raise ValueError(f"scatter update computation {names} is not one of replace, add, multiply, maximum, "
                         f"minimum")
    dn = hlo.ScatterDimensionNumbers(op.attributes["scatter_dimension_numbers"])
    attrs = {"update_window_dims": list(dn.update_window_dims), "inserted_window_dims": list(dn.inserted_window_dims),
             "input_batching_dims": list(dn.input_batching_dims),
             "scatter_indices_batching_dims": list(dn.scatter_indices_batching_dims),
             "scatter_dims_to_operand_dims": list(dn.scattered_dims_to_operand_dims),
             "index_vector_dim": int(dn.index_vector_dim), "combiner": ir.StringAttr.get(kind)}
    return im.emit("relax_v.scatter", [x, idx, upd], len(rdims), dt, attrs, dims=_merge_dims(rdims, x.dims))


def _variadic_reduce(im, op, ins):
    """A reduce of (values, iota) pairs with jax's argmax/argmin body -> relax.argmax/argmin."""
    n = len(op.results)
    why = "variadic reduce: only jax's argmax/argmin form (values, iota along the axis) is supported"
    axes = _ints(op.attributes["dimensions"])
    if n != 2 or len(axes) != 1:
        raise ValueError(why)
    axis = axes[0]
    src = _owner(op.operands[1])
    if src is None or src.name not in ("stablehlo.iota", "stablehlo.dynamic_iota") \
            or _ints(src.attributes["iota_dimension"])[0] != axis:
        raise ValueError(why + " (operand #1 is not an iota along the reduced dim)")
    body = _body_ops(op)
    args = list(op.regions[0].blocks[0].arguments)
    names = [o.name for o in body]
    expect = ["stablehlo.compare", "stablehlo.compare", "stablehlo.or", "stablehlo.compare", "stablehlo.compare",
              "stablehlo.and", "stablehlo.or", "stablehlo.select", "stablehlo.select", "stablehlo.return"]
    if names != expect:
        raise ValueError(why + f" (the body is {names[:-1]})")
    c0, cnan, or0, ceq, cidx, and0, or1, s0, s1, ret = body
    d0, d1, d3, d4 = _cmp_info(c0)[0], _cmp_info(cnan)[0], _cmp_info(ceq)[0], _cmp_info(cidx)[0]
    a, ai, b, bi = args
    shape_ok = (list(c0.operands) == [a, b] and d0 in ("GT", "LT") and list(cnan.operands) == [a, a] and d1 == "NE"
                and set(or0.operands) == {c0.results[0], cnan.results[0]} and d3 == "EQ"
                and list(ceq.operands) == [a, b] and d4 == "LT" and list(cidx.operands) == [ai, bi]
                and set(and0.operands) == {ceq.results[0], cidx.results[0]}
                and set(or1.operands) == {or0.results[0], and0.results[0]}
                and list(s0.operands) == [or0.results[0], a, b] and list(s1.operands) == [or1.results[0], ai, bi]
                and list(ret.operands) == [s0.results[0], s1.results[0]])
    if not shape_ok:
        raise ValueError(why + " (the body is not jax's argmax/argmin comparator)")
    x = ins[0]
    greater = d0 == "GT"
    init_v, init_i = _splat_value(op.operands[2]), _splat_value(op.operands[3])
    import math
    if x.dtype in _FLOATS:
        good_v = init_v is not None and math.isinf(init_v) and (init_v < 0) == greater
    elif x.dtype == "i1":
        good_v = init_v is not None and bool(init_v) == (not greater)
    else:
        w = int(x.dtype[1:])
        good_v = init_v == (-(1 << (w - 1)) if greater else (1 << (w - 1)) - 1)
    if not good_v or init_i != 0:
        raise ValueError(why + " (the init values are not jax's argmax/argmin identity)")
    vdims, vdt = _res(op, 0)
    idims, idt = _res(op, 1)
    dims = _merge_dims(idims, [d for i, d in enumerate(x.dims) if i != axis])
    name = "relax.argmax" if greater else "relax.argmin"
    ix = im.emit(name, [x], len(idims), idt, {"axis": axis, "dtype": _dtype_attr(idt)}, dims=dims)
    # the value output: x at the index (a batched gather), usually dead
    r = len(x.dims)
    others = [i for i in range(r) if i != axis]
    val = im.emit("relax.gather", [x, im.reshape(ix, dims + [const(1)])], len(dims), vdt,
                  {"offset_dims": [], "collapsed_slice_dims": [axis], "operand_batching_dims": others,
                   "start_indices_batching_dims": list(range(r - 1)), "start_index_map": [axis],
                   "index_vector_dim": r - 1, "slice_sizes": [1] * r}, dims=dims)
    return [val, ix]


def _sort_key(v, args):
    """The block-argument position behind a comparator operand: the argument itself, or jax's
    canonicalization of a float argument (-0.0 -> 0.0, NaN -> NaN); (position, canonicalized)."""
    if v in args:
        return args.index(v), False
    o = _owner(v)
    if o is None or o.name != "stablehlo.select":
        return None, False
    c, nan, inner = o.operands
    co, io = _owner(c), _owner(inner)
    if co is None or co.name != "stablehlo.compare" or _cmp_info(co)[0] != "NE" or co.operands[0] != co.operands[1]:
        return None, False
    x = co.operands[0]
    if io is None or io.name != "stablehlo.select":
        return None, False
    c2, zero, x2 = io.operands
    c2o = _owner(c2)
    nv, zv = _splat_value(nan), _splat_value(zero)
    import math
    if x2 != x or c2o is None or c2o.name != "stablehlo.compare" or _cmp_info(c2o)[0] != "EQ" \
            or list(c2o.operands) != [x, zero] or nv is None or not math.isnan(nv) or zv != 0 or x not in args:
        return None, False
    return args.index(x), True


def _sort_less(v, args, dts):
    """The keys (operand number, descending) of jax's lexicographic less-than comparator."""
    o = _owner(v)
    if o is None:
        return None
    if o.name == "stablehlo.compare":
        d, ct = _cmp_info(o)
        (pa, ca), (pb, cb) = _sort_key(o.operands[0], args), _sort_key(o.operands[1], args)
        if pa is None or pb is None or d not in ("LT", "GT") or pa // 2 != pb // 2 or pa == pb:
            return None
        key = pa // 2
        if dts[key] in _FLOATS and not (ca == cb and ct == "TOTALORDER"):
            return None  # (a FLOAT compare is no strict weak order with NaNs)
        if dts[key] not in _FLOATS and ct != ("UNSIGNED" if dts[key] == "i1" else "SIGNED"):
            return None
        return [(key, (d == "GT") == (pa % 2 == 0), dts[key] in _FLOATS and not ca)]
    if o.name == "stablehlo.or":
        for lt, rest in (tuple(o.operands), tuple(reversed(list(o.operands)))):
            first = _sort_less(lt, args, dts)
            ao = _owner(rest)
            if first is None or len(first) != 1 or ao is None or ao.name != "stablehlo.and":
                continue
            for eq, p in (tuple(ao.operands), tuple(reversed(list(ao.operands)))):
                eo = _owner(eq)
                if eo is None or eo.name != "stablehlo.compare" or _cmp_info(eo)[0] != "EQ":
                    continue
                keys = sorted(_sort_key(e, args)[0] // 2 for e in eo.operands if _sort_key(e, args)[0] is not None)
                tail = _sort_less(p, args, dts)
                if keys == [first[0][0]] * 2 and tail is not None:
                    return first + tail
    return None


def _sort(im, op, ins):
    """stablehlo.sort with a comparator of jax's form (lax.sort, jnp.sort/argsort): lexicographic
    less-than over the first keys, floats canonicalized and totally ordered."""
    axis = _ints(op.attributes["dimension"])[0]
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    ret = _body_ops(op)[-1]
    dts = [v.dtype for v in ins]
    keys = _sort_less(ret.operands[0], args, dts)
    if keys is None or [kk for kk, _, _ in keys] != list(range(len(keys))):
        raise ValueError("sort comparator is not a lexicographic less-than / greater-than over the leading "
                         "operands of the form jax emits")
    results = [_res(op, i) for i in range(len(op.results))]
    dims = ins[0].dims
    outs = _emit_multi(im, "relax_v.sort", ins, [(_merge_dims(d, dims), dt) for d, dt in results],
                       {"axis": axis % max(len(dims), 1), "num_keys": len(keys),
                        "descending": [int(dsc) for _, dsc, _ in keys],
                        "total_order": [int(raw) for _, _, raw in keys]})
    return outs


def _composite(im, op, ins):
    """stablehlo.composite: chlo.top_k as a descending IEEE-total-order stable sort and a slice (its
    decomposition's semantics); any other composite runs its decomposition function."""
    from jax._src.lib.mlir import ir as jir

    name = _string(op.attributes["name"])
    if name == "chlo.top_k" and len(ins) == 1:
        x = ins[0]
        k = jir.IntegerAttr(jir.DictAttr(op.attributes["composite_attributes"])["k"]).value
        axis = len(x.dims) - 1
        (vd, vdt), (idims, idt) = _res(op, 0), _res(op, 1)
        if x.dims[axis] is None:
            raise ValueError("top_k along an unknown dim")
        iota = _iota_impl(im, x.dims, idt, axis)
        vals, idx = _emit_multi(im, "relax_v.sort", [x, iota], [(x.dims, x.dtype), (x.dims, idt)],
                                {"axis": axis, "num_keys": 1, "descending": [1],
                                 "total_order": [int(x.dtype in _FLOATS)]})
        out = []
        for v, (d, dt) in ((vals, (vd, vdt)), (idx, (idims, idt))):
            out.append(im.emit("relax.strided_slice", [v], len(d), dt,
                               {"axes": [axis], "begin": [0], "end": [k], "strides": [1]},
                               dims=_merge_dims(d, x.dims[:axis] + [const(k)])))
        return out
    callee = _string(op.attributes["decomposition"])
    f = im.funcs.get(callee)
    if f is None:
        raise ValueError(f"composite {name}: unknown decomposition @{callee}")
    outs, _ = im.run_func(f, list(ins))
    return outs
# --- window (issue 16) ---
# reduce_window (pooling, cumulative sums) -> relax.reduce_window; convolution -> relax.conv in the
# canonical layout [b, f, spatial...] x [o, i, spatial...], with permute_dims around it.

_WINDOW_KIND = {"stablehlo.add": "sum", "stablehlo.maximum": "max", "stablehlo.minimum": "min",
                "stablehlo.multiply": "prod"}
_WINDOW_KIND_I1 = {"stablehlo.or": "max", "stablehlo.add": "max", "stablehlo.maximum": "max",
                   "stablehlo.and": "min", "stablehlo.multiply": "min", "stablehlo.minimum": "min"}
_WINDOW_RELAX = {"sum": "relax.sum", "max": "relax.max", "min": "relax.min", "prod": "relax.prod"}


def _divisors(e: Expr, out: set) -> set:
    """The constant divisors of the floordiv/mod atoms of e, and the symbols under them."""
    from relax_mlir.shape.expr import _CALLS

    for mono, _ in e.terms:
        for a in mono:
            node = _CALLS.get(a)
            if node is None:
                continue
            if node.kind in ("floordiv", "mod") and node.args[1].is_const:
                out.add(("c", abs(node.args[1].value)))
                out |= {("s", x) for x in node.args[0].symbols()}
            for x in node.args:
                _divisors(x, out)
    return out


def _decide(prove, e: Expr, facts: Facts, *rest) -> bool:
    """prove(e, *rest), else by cases: every symbol s under a floordiv/mod by constants (lcm L,
    at most 64 cases) written L*q + r for each remainder r, where floordiv and mod simplify
    (jax's floor_divide of -n by 2 leaves 2*floordiv(n, 2) + 2*mod(n, 2) - n + 1, which is
    mod(n, 2) + 1 >= 1 in both cases)."""
    if prove(e, *rest):
        return True
    found = _divisors(e, set())
    divs = [c for k, c in found if k == "c"]
    names = sorted(x for k, x in found if k == "s")
    if not divs or not names:
        return False
    step = 1
    for c in divs:
        step = step * c // np.gcd(step, c)
    if step ** len(names) > 64:
        return False
    import itertools

    for rs in itertools.product(range(step), repeat=len(names)):
        mapping = {}
        lower = {k: v for k, v in facts.lower.items() if k not in names}
        for nm, r in zip(names, rs):
            q = f"zzQ{nm}"
            mapping[nm] = sym(q) * step + r
            lower[q] = max(0, -((r - facts.lower.get(nm, 0)) // step))  # L*q + r >= lower(s)
        case = Facts(lower=lower)
        args = [x.subs(mapping) if isinstance(x, Expr) else x for x in rest]
        if not getattr(case, prove.__name__)(e.subs(mapping), *args):
            return False
    return True


def _window_kind(body_ops, dt: str) -> str:
    kinds = [o.operation.name for o in body_ops if o.operation.name not in ("stablehlo.return", "func.return")]
    table = _WINDOW_KIND_I1 if dt == "i1" else _WINDOW_KIND
    if len(kinds) != 1 or kinds[0] not in table:
        raise ValueError(f"reduce_window body {kinds} is not a single add/max/min/mul (or and/or on i1)")
    return table[kinds[0]]


def _init_value(v):
    """The splat value behind a reduce_window init, through scalar broadcast_in_dim / reshape."""
    while getattr(v.owner, "name", None) in ("stablehlo.broadcast_in_dim", "stablehlo.reshape"):
        v = v.owner.operands[0]
    return _splat_value(v)


def _window_known(v: Val, what: str) -> list[Expr]:
    if v.known is None:
        raise ValueError(f"the {what} of dynamic_reduce_window is not a known shape computation")
    return list(v.known)


def _const_ints(es: list[Expr], what: str) -> list[int]:
    if not all(e.is_const for e in es):
        raise ValueError(f"symbolic {what} {[str(e) for e in es]} (only window sizes and padding may be symbolic)")
    return [e.value for e in es]


def _emit_reduce_window(im, op, x: Val, init: Val, init_value, kind: str, window, strides, bdil, wdil, lo, hi):
    rdims, dt = _res(op)
    r = len(x.dims)
    if not (len(window) == len(strides) == len(bdil) == len(wdil) == len(lo) == len(hi) == r):
        raise ValueError("reduce_window attributes do not match the operand rank")
    identity = _is_identity(_WINDOW_RELAX[kind], dt, init_value)
    holes = any(p != const(0) for p in list(lo) + list(hi)) or any(d != 1 for d in bdil)
    if not identity and kind in ("sum", "prod") and holes:
        raise ValueError(f"reduce_window {kind} with a non-identity init value and padding or base "
                         f"dilation (the padding would hold the init value) is not supported")
    attrs = {"kind": ir.StringAttr.get(kind), "window": list(window), "strides": list(strides),
             "base_dilation": list(bdil), "window_dilation": list(wdil), "pad_lo": list(lo), "pad_hi": list(hi)}
    res = im.emit("relax.reduce_window", [x], r, dt, attrs, dims=rdims)
    if identity:
        return res
    # max/min are idempotent: the init counts once however many padding elements a window holds
    return im.emit(_REDUCE_COMBINE[_WINDOW_RELAX[kind]], [res, init], r, dt, dims=rdims)


def _reduce_window(im, op, ins):
    if len(op.results) != 1 or len(ins) != 2:
        raise ValueError("variadic reduce_window (several operands) is not supported")
    x, init = ins
    kind = _window_kind(op.regions[0].blocks[0].operations, x.dtype)
    r = len(x.dims)
    a = op.attributes

    def ints(name, default):
        return _ints(a[name]) if name in a else [default] * r

    window = [const(v) for v in _ints(a["window_dimensions"])]
    pads = _ints(a["padding"]) if "padding" in a else [0] * (2 * r)
    return _emit_reduce_window(im, op, x, init, _init_value(op.operands[1]), kind, window,
                               ints("window_strides", 1), ints("base_dilations", 1), ints("window_dilations", 1),
                               [const(p) for p in pads[0::2]], [const(p) for p in pads[1::2]])


def _dynamic_reduce_window(im, op, ins):
    """`stablehlo.custom_call @stablehlo.dynamic_reduce_window(x, init, window_dimensions,
    window_strides, base_dilations, window_dilations, padding)`, body in `called_computations`."""
    if len(op.results) != 1 or len(ins) != 7:
        raise ValueError("variadic dynamic_reduce_window (several operands) is not supported")
    x, init = ins[0], ins[1]
    callee = _string(op.attributes["called_computations"][0])
    f = im.funcs.get(callee)
    if f is None:
        raise ValueError(f"unknown reducer @{callee}")
    kind = _window_kind(f.regions[0].blocks[0].operations, x.dtype)
    window = _window_known(ins[2], "window_dimensions")
    strides = _const_ints(_window_known(ins[3], "window_strides"), "window strides")
    bdil = _const_ints(_window_known(ins[4], "base_dilations"), "base dilations")
    wdil = _const_ints(_window_known(ins[5], "window_dilations"), "window dilations")
    pads = _window_known(ins[6], "padding")
    return _emit_reduce_window(im, op, x, init, _init_value(op.operands[1]), kind, window, strides, bdil, wdil,
                               pads[0::2], pads[1::2])


def _convolution(im, op, ins):
    from jax._src.lib.mlir.dialects import hlo

    lhs, rhs = ins[0], ins[1]
    rdims, dt = _res(op)
    if lhs.dtype != rhs.dtype or lhs.dtype != dt:
        raise ValueError(f"mixed element types in convolution ({lhs.dtype} x {rhs.dtype} -> {dt})")
    a = op.attributes
    dn = hlo.ConvDimensionNumbers(a["dimension_numbers"])
    ib, if_, isp = dn.input_batch_dimension, dn.input_feature_dimension, list(dn.input_spatial_dimensions)
    ki, ko, ksp = dn.kernel_input_feature_dimension, dn.kernel_output_feature_dimension, \
        list(dn.kernel_spatial_dimensions)
    ob, of, osp = dn.output_batch_dimension, dn.output_feature_dimension, list(dn.output_spatial_dimensions)
    ns = len(isp)

    def ints(name, default):
        return _ints(a[name]) if name in a else [default] * ns

    if "window_reversal" in a and any(_bools(a["window_reversal"])):
        raise ValueError("window_reversal is not supported")
    if op.operation.name == "stablehlo.dynamic_conv":
        if ins[2].known is None:
            raise ValueError("the padding of dynamic_conv is not a known shape computation")
        pads = list(ins[2].known)
    else:
        pads = [const(p) for p in (_ints(a["padding"]) if "padding" in a else [0] * (2 * ns))]
    fgc = _ints(a["feature_group_count"])[0] if "feature_group_count" in a else 1
    bgc = _ints(a["batch_group_count"])[0] if "batch_group_count" in a else 1
    x = im.permute(lhs, [ib, if_] + isp)
    w = im.permute(rhs, [ko, ki] + ksp)
    canon = [None] * (ns + 2)
    order = [ob, of] + osp
    for j, pos in enumerate(order):
        canon[j] = rdims[pos]
    attrs = {"strides": ints("window_strides", 1), "lhs_dilation": ints("lhs_dilation", 1),
             "rhs_dilation": ints("rhs_dilation", 1), "pad_lo": pads[0::2], "pad_hi": pads[1::2],
             "feature_group_count": fgc, "batch_group_count": bgc}
    c = im.emit("relax.conv", [x, w], ns + 2, dt, attrs, dims=canon)
    inv = [order.index(j) for j in range(ns + 2)]
    return im.permute(c, inv)


def _bools(attr) -> list[bool]:
    from jax._src.lib.mlir import ir as jir

    if isinstance(attr, jir.DenseBoolArrayAttr):
        return [bool(v) for v in attr]
    return [bool(v) for v in _ints(attr)]


# --- integer bits and element math (issue 16) ---

def _bitwise(bool_name, int_name):
    """and/or/not: logical on i1, bitwise on integers."""
    def conv(im, op, ins):
        dims, dt = _res(op)
        if dt == "i1":  # logical, with known (shape computation) values decided on the symbols
            return _logic(bool_name)(im, op, ins)
        return im.emit(int_name, ins, len(dims), dt, dims=_merge_dims(dims, *[v.dims for v in ins]))
    return conv


def _unsigned_constant(im, attr, dims, dt):
    """An unsigned constant: its bits as a signless relax.constant, bitcast to `dt` (kernels and
    the lowered constants compute on signless integers)."""
    from jax._src.lib.mlir import ir as jir

    sdt = dt[1:]
    shape = [d.value for d in dims]
    w = int(sdt[1:])
    if attr.is_splat:
        v = int(attr.get_splat_value().value) & ((1 << w) - 1)
        value = _splat(shape, sdt, v - (1 << w) if v >> (w - 1) else v)
    else:
        if not isinstance(attr, jir.DenseElementsAttr):
            raise ValueError(f"a constant value of kind {type(attr).__name__} is not supported")
        arr = np.ascontiguousarray(np.asarray(attr, dtype=_NP_DTYPES[dt]).view(_NP_DTYPES[sdt]))
        value = ir.DenseElementsAttr.get(arr, type=_elt(sdt))
    c = im.emit("relax.constant", [], len(dims), sdt, {"value": value}, dims=dims)
    return im.emit("relax.bitcast", [c], len(dims), dt, {"dtype": _dtype_attr(dt)}, dims=dims)


def _reduce_precision(im, op, ins):
    (x,) = ins
    dims, dt = _res(op)
    attrs = {"exponent_bits": _ints(op.attributes["exponent_bits"])[0],
             "mantissa_bits": _ints(op.attributes["mantissa_bits"])[0]}
    return im.emit("relax.reduce_precision", [x], len(dims), dt, attrs, dims=_merge_dims(dims, x.dims))


def _bitcast_convert(im, op, ins):
    (x,) = ins
    dims, dt = _res(op)
    if len(dims) != len(x.dims):
        raise ValueError("bitcast_convert between element types of different bit widths")
    if dt == x.dtype:
        return x
    return im.emit("relax.bitcast", [x], len(dims), dt, {"dtype": _dtype_attr(dt)}, dims=_merge_dims(dims, x.dims))


# --- control flow (issue 16) ---
#
# Each region of a StableHLO while / if / case becomes a private graph function marked
# `relax.region` (ops/control_flow.py): its parameters are the region's block arguments (the carried
# values of a while), then the outer values the region uses (captures). A capture that the importer
# knows symbolically (a small integer shape computation, such as jax's dimension-variable argument)
# is not passed: it is re-materialized inside the function where used. Parameter types are left
# unknown ("?") here; relax-infer-shapes gives each region function the types of its op's operands.

def _region_free_values(regions) -> list:
    """Outer values the ops of `regions` (nested regions included) use, in first-use order."""
    inside = set()

    def define(region):
        for b in region.blocks:
            for a in b.arguments:
                inside.add(a)
            for o in b.operations:
                for r in o.results:
                    inside.add(r)
                for inner in o.regions:
                    define(inner)

    free: list = []
    seen = set()

    def uses(region):
        for b in region.blocks:
            for o in b.operations:
                for v in o.operands:
                    if v not in inside and v not in seen:
                        seen.add(v)
                        free.append(v)
                for inner in o.regions:
                    uses(inner)

    for r in regions:
        define(r)
    for r in regions:
        uses(r)
    return free


def _cf_captures(im: Importer, regions, carried: list[Val] = ()) -> tuple[list, list[Val], dict]:
    """(passed jax values, their outer Vals, env entries for the re-materialized ones). A known
    capture is re-materialized only where its symbols are bound in the region function (a bare
    dim of a parameter, perhaps of a witness passed for that purpose); otherwise it is passed as a
    value (its known ints are then lost)."""
    passed, vals, known = [], [], []
    for v in _region_free_values(regions):
        outer = im.env.get(v)
        if outer is None:
            raise UnsupportedOpError("stablehlo region", "", "a region uses a value that is not defined before it")
        if outer.known is not None:
            known.append((v, outer))
        else:
            passed.append(v)
            vals.append(outer)
    bound = {str(d) for p in list(carried) + vals for d in p.dims if d is not None and d.is_symbol}
    # A symbol a known capture needs but no parameter binds: pass a tensor that has it as a whole
    # dim (a witness, say the argument it comes from) so that the region function binds it too.
    need = set().union(set(), *(e.symbols() for _, o in known for e in o.known)) - bound
    for s in sorted(need):
        for k, w in im.env.items():
            if w.value is not None and any(d is not None and d.is_symbol and str(d) == s for d in w.dims):
                if k not in passed:
                    passed.append(k)
                    vals.append(w)
                bound |= {str(d) for d in w.dims if d is not None and d.is_symbol}
                break
    remat = {}
    for v, outer in known:
        if set().union(*(e.symbols() for e in outer.known)) <= bound:
            remat[v] = Val(None, outer.dtype, outer.dims, list(outer.known))
        else:
            passed.append(v)
            vals.append(outer)
    return passed, vals, remat


def _cf_name(im: Importer, kind: str) -> str:
    """A fresh name prefix for the region functions of one control-flow op: main_while3, ..."""
    im.n_regions = getattr(im, "n_regions", 0) + 1
    return f"main_{kind}{im.n_regions}"


def _cf_outline(im: Importer, kind: str, region, params: list[Val], passed: list, remat: dict,
                n_block_args: int) -> tuple[str, list[Val]]:
    """Outline `region` (its only block) into private region function @kind; `params` are the outer
    Vals passed in order (the first `n_block_args` bind the block's arguments, the rest the
    `passed` captures). Returns the function's name and the Vals its region returns."""
    if len(region.blocks) != 1:
        raise UnsupportedOpError(f"stablehlo.{kind}", "", "a region with more than one block")
    block = region.blocks[0]
    name = kind
    types = [_qtype(len(v.dims), v.dtype) for v in params]
    loc = im.loc
    with ir.InsertionPoint(im.relax_module.body):
        f = ir.Operation.create("func.func", regions=1, loc=loc, attributes={
            "sym_name": ir.StringAttr.get(name), "sym_visibility": ir.StringAttr.get("private"),
            "relax.region": ir.UnitAttr.get(),
            "function_type": ir.TypeAttr.get(ir.FunctionType.get(types, []))})
    fblock = f.regions[0].blocks.append(*types, arg_locs=[loc] * len(types))
    # fresh Vals per region: materializing one emits its op in this region's function
    env = {k: Val(None, v.dtype, v.dims, list(v.known)) for k, v in remat.items()}
    for i, (a, v) in enumerate(zip(fblock.arguments, params)):
        inner = Val(a, v.dtype, v.dims)  # a carried value changes from iteration to iteration
        if i < n_block_args:
            env[block.arguments[i]] = inner
        else:
            env[passed[i - n_block_args]] = inner
    with ir.InsertionPoint(fblock):
        outs, ret_loc = im.run_block(block, env)
        im.loc = ret_loc
        rets = [im.use(o) for o in outs]
        ir.Operation.create("func.return", operands=rets, loc=ret_loc)
    im.loc = loc
    f.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(types, [r.type for r in rets]))
    im.region_funcs.append(f)
    return name, outs


def _cf_result_dims(branch_outs: list[list[Val]], i: int, rank: int) -> list:
    dims = []
    for j in range(rank):
        cands = [o[i].dims[j] if j < len(o[i].dims) else None for o in branch_outs]
        dims.append(cands[0] if all(c is not None and c == cands[0] for c in cands) else None)
    return dims


def _while(im, op, ins):
    n = len(ins)
    cond_r, body_r = op.regions[0], op.regions[1]
    carried = [Val(None, v.dtype, v.dims) for v in ins]
    passed, cap_vals, remat = _cf_captures(im, [cond_r, body_r], carried)
    params = carried + cap_vals
    prefix = _cf_name(im, "while")
    cond, _ = _cf_outline(im, f"{prefix}_cond", cond_r, params, passed, remat, n)
    body, outs = _cf_outline(im, f"{prefix}_body", body_r, params, passed, remat, n)
    if len(outs) != n:
        raise UnsupportedOpError("stablehlo.while", str(op.location), f"the body returns {len(outs)} values for {n} carried")
    operands = [im.use(v) for v in ins] + [im.use(v) for v in cap_vals]
    w = ir.Operation.create("relax_v.while", results=[_qtype(len(v.dims), v.dtype) for v in ins], operands=operands,
                            attributes={"cond": ir.FlatSymbolRefAttr.get(cond), "body": ir.FlatSymbolRefAttr.get(body),
                                        "carried": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), n)},
                            loc=im.loc)
    return [Val(r, v.dtype, v.dims) for r, v in zip(w.results, ins)]


def _branches(im, op, selector: Val, opname: str, kinds: list[str], attrs_of):
    passed, cap_vals, remat = _cf_captures(im, list(op.regions))
    names, outs = [], []
    for kind, region in zip(kinds, op.regions):
        nm, o = _cf_outline(im, kind, region, cap_vals, passed, remat, 0)
        if len(o) != len(op.results):
            raise UnsupportedOpError(op.operation.name, str(op.location),
                                     f"a branch returns {len(o)} values, the op has {len(op.results)} results")
        names.append(nm)
        outs.append(o)
    rtypes = [im.ttype(r.type) for r in op.results]
    operands = [im.use(selector)] + [im.use(v) for v in cap_vals]
    c = ir.Operation.create(opname, results=[_qtype(len(d), dt) for d, dt in rtypes], operands=operands,
                            attributes=attrs_of(names), loc=im.loc)
    return [Val(r, dt, _merge_dims(d, _cf_result_dims(outs, i, len(d))))
            for i, (r, (d, dt)) in enumerate(zip(c.results, rtypes))]


def _case(im, op, ins):
    if ins[0].dtype != "i32" or ins[0].dims:
        raise UnsupportedOpError("stablehlo.case", str(op.location), "the index must be a tensor<i32>")
    k = len(op.regions)
    prefix = _cf_name(im, "case")
    return _branches(im, op, ins[0], "relax_v.case", [f"{prefix}_branch{i}" for i in range(k)],
                     lambda names: {"branches": ir.ArrayAttr.get([ir.FlatSymbolRefAttr.get(n) for n in names])})


def _if(im, op, ins):
    if ins[0].dtype != "i1" or ins[0].dims:
        raise UnsupportedOpError("stablehlo.if", str(op.location), "the predicate must be a tensor<i1>")
    prefix = _cf_name(im, "if")
    return _branches(im, op, ins[0], "relax_v.if", [f"{prefix}_then", f"{prefix}_else"],
                     lambda names: {"then_branch": ir.FlatSymbolRefAttr.get(names[0]),
                                    "else_branch": ir.FlatSymbolRefAttr.get(names[1])})


def _finish_region_functions(im: Importer, mapping: dict) -> None:
    """Dead code out of the region functions; region functions no live op calls are erased."""
    from relax_mlir.ops.control_flow import CONTROL_FLOW, region_callees

    funcs = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in im.region_funcs}
    for f in funcs.values():
        _erase_dead_ops(f.regions[0].blocks[0])
    live: set[str] = set()
    work = [op for op in im.relax_module.body.operations if op.operation.name == "func.func"
            and "relax.region" not in op.attributes]
    while work:
        f = work.pop()
        for o in f.regions[0].blocks[0].operations:
            if o.operation.name in CONTROL_FLOW:
                for c in region_callees(o.operation):
                    if c not in live and c in funcs:
                        live.add(c)
                        work.append(funcs[c])
    for n, f in funcs.items():
        if n not in live:
            f.erase()


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
    "stablehlo.dynamic_reduce_window": lambda im, op, ins: _dynamic_reduce_window(im, op, ins),
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


def _fold_compare_known(op, c, facts):
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
    "stablehlo.compare": _fold_compare_known,
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
    "stablehlo.real_dynamic_slice": _real_dynamic_slice,
    "stablehlo.dynamic_slice": _dynamic_slice,
    "stablehlo.dynamic_update_slice": _dynamic_update_slice,
    "stablehlo.pad": _pad,
    "stablehlo.reverse": _reverse,
    "stablehlo.scatter": _scatter,
    "stablehlo.sort": _sort,
    "stablehlo.composite": _composite,
    "stablehlo.reduce_window": _reduce_window,
    "stablehlo.convolution": _convolution,
    "stablehlo.dynamic_conv": _convolution,
    # integer bits and element math (issue 16)
    "stablehlo.not": _bitwise("relax.logical_not", "relax.bitwise_not"),
    "stablehlo.and": _bitwise("relax.logical_and", "relax.bitwise_and"),
    "stablehlo.or": _bitwise("relax.logical_or", "relax.bitwise_or"),
    "stablehlo.xor": _binary("relax.bitwise_xor"),
    "stablehlo.shift_left": _binary("relax.left_shift"),
    "stablehlo.shift_right_logical": _binary("relax.right_shift_logical"),
    "stablehlo.shift_right_arithmetic": _binary("relax.right_shift_arithmetic"),
    "stablehlo.popcnt": _unary("relax.popcount"),
    "stablehlo.count_leading_zeros": _unary("relax.count_leading_zeros"),
    "stablehlo.is_finite": _unary("relax.isfinite"),
    "stablehlo.atan2": _binary("relax.atan2"),
    "stablehlo.cbrt": _unary("relax.cbrt"),
    "stablehlo.tan": _unary("relax.tan"),
    "stablehlo.round_nearest_even": _unary("relax.round_even"),
    "stablehlo.round_nearest_afz": _unary("relax.round"),
    "stablehlo.bitcast_convert": _bitcast_convert,
    "stablehlo.reduce_precision": _reduce_precision,
    "stablehlo.while": _while,
    "stablehlo.case": _case,
    "stablehlo.if": _if,
    # importer infrastructure (issue 16)
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
