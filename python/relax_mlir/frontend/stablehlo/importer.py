"""The walk: `Importer` builds the relax function from a parsed jax-MLIR module's @main (calls
inlined, each op through its converter in `registry.CONVERTERS`), and the entry points
`import_module` / `import_stablehlo`.
"""
from __future__ import annotations

import functools
from typing import Any, Iterable

from mlir import ir

from relax_mlir.core.diagnostics import CompileError, nesting_error, result_number_error
from relax_mlir.core.module import Module
from relax_mlir.core.pipeline import run_pipeline
from relax_mlir.core.session import Session
from relax_mlir.frontend.stablehlo.checks import check_element_types, check_supported_ops
from relax_mlir.frontend.stablehlo.common import (CVal, Val, _DTYPES, _attr, _dtype_attr, _elt, _is_name, _is_symbolic,
                                                  _jax_ttype, _qtype, _res, _scalar_attr, _splat, _string, _subs, _ttype,
                                                  complex_part_type)
from relax_mlir.frontend.stablehlo.complex import convert_complex, touches_complex
from relax_mlir.frontend.stablehlo.errors import (StableHLOParseError, UnsupportedOpError, UnsupportedOpsError,
                                                  UnsupportedTypesError, _file_position)
from relax_mlir.frontend.stablehlo.registry import CONVERTERS
from relax_mlir.frontend.stablehlo.platforms import specialize_platform
from relax_mlir.frontend.stablehlo.shape_arith import _fold_shape_scalar, fold_known
from relax_mlir.frontend.stablehlo.sharding import SpmdImport, annotate_spmd
from relax_mlir.frontend.stablehlo.signs import WHY as SIGNS_WHY, Refused as SignsRefused, SignsError
from relax_mlir.frontend.stablehlo.signs import propagate as propagate_signs
from relax_mlir.frontend.stablehlo.symbols import bind_dim_exprs, name_dim_exprs
from relax_mlir.ops.common import dims_equal, fmt_dims, product
from relax_mlir.ops.manipulate import _same_after_common
from relax_mlir.shape import Expr, Facts, ShapeParseError, const, sym
from relax_mlir.shape import parse as parse_expr

COMPLEX_ATTR = "relax.complex"  # on a parameter / result: a complex array, its parts interleaved in one more dim of 2
_COMPLEX_PARTS = {"complex64": "f32", "complex128": "f64"}


class Importer:
    """Walks a parsed jax-MLIR module's @main (inlining calls) and builds the relax function."""

    def __init__(self, module, dim_names=None, unused_args=None, dim_vars: Iterable[str] = (),
                 source_name: str = "<string>", spmd: bool = False):
        self.module = module
        self.dim_names = dim_names or []
        # position -> (dims, dtype) of an argument the exported function does not use (jax.export
        # drops it from @main); the relax function still takes it, so callers pass every argument.
        self.unused_args = dict(unused_args or {})
        self.source_name = source_name
        self.call_sites: list = []  # the func.call ops being imported, outermost first
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
        self.relations: list[tuple[str, str, str]] = []  # jax's constraints lhs <= rhs (their text)
        # shape relations lhs <= rhs an op needs and the folds cannot prove (see require)
        self.requirements: list[tuple[Expr, Expr, str]] = []
        self._locs: dict[str, ir.Location] = {}
        for op in module.body.operations:
            if op.operation.name == "func.func":
                self.funcs[_string(op.attributes["sym_name"])] = op
        self.spmd = None  # the per-device import of a sharded program (sharding.py)
        if spmd:
            self.dim_names = [list(n) if n else n for n in self.dim_names]
            try:
                self.spmd = SpmdImport(module)
            except (TypeError, ValueError, KeyError, IndexError) as e:
                if isinstance(e, UnsupportedOpError):
                    raise
                raise UnsupportedOpError("sdy.mesh", "", f"unreadable mesh or sharding attributes: {e}") from None
            main = self.funcs.get("main")
            if main is not None:
                n = len(main.regions[0].blocks[0].arguments) + len(self.unused_args)
                self.spmd.reindex(self.unused_args, n)

    # --- emission ---------------------------------------------------------------------------

    def location(self, jax_op) -> ir.Location:
        """Our location for a jax op: its first file position (the user's Python line), else that of
        the innermost call being imported that has one (jax's `svd`, `_where`, ... functions carry
        only a name), else unknown."""
        text = str(jax_op.location)
        loc = self._locs.get(text)
        if loc is None:
            p = _file_position(text)
            if p is None:
                for site in reversed(self.call_sites):
                    if _file_position(str(site.location)) is not None:
                        return self.location(site)
                return ir.Location.unknown()
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
            elif not vals:  # a zero-size table (the iota of a 0 dim): no element to list
                value = _splat([0], v.dtype, 0)
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
        """What the integer folds may assume: jax's dimension variables are >= 1 (or their
        `s >= c` constraints)."""
        lower = {s: 1 for s in self.dim_vars}
        for s, v in self.extra_lower.items():
            lower[s] = max(lower.get(s, 1), v)
        return Facts(lower=lower)

    ttype = staticmethod(_jax_ttype)

    def require(self, lhs: Expr, rhs: Expr, what: str) -> None:
        """A relation `lhs <= rhs` between shape expressions that an op needs and the folds
        cannot prove (jax proved it, or assumed it, when it exported): checked at @main's entry
        (`relax.requires`), a ValueError naming the op, its position and the relation before any
        kernel runs. A relation over symbols @main does not bind is refused at the end of the
        import."""
        pos = _position_text(self.loc)
        self.requirements.append((lhs, rhs, f"{what}{f' at {pos}' if pos else ''}"))

    def reshape(self, x: Val, dims) -> Val:
        if len(dims) == len(x.dims) and all(a is not None and b is not None and a == b
                                            for a, b in zip(dims, x.dims)):
            return x
        x = self._check_element_count(x, dims)
        return self.emit("relax.reshape", [x], len(dims), x.dtype, {"shape": list(dims)}, dims=dims)

    def _check_element_count(self, x: Val, dims) -> Val:
        """jax reshapes [n, k] to [n, 2, k floordiv 2] trusting k to be even (its export asserts
        nothing). A count relax cannot prove is checked at run time: x is flattened and
        match_cast to the new count (a ValueError naming the reshape, the dims and the symbols
        when it differs), then reshaped."""
        if any(d is None for d in (*x.dims, *dims)):
            return x
        facts = self.int_facts()
        n_in, n_out = product(x.dims), product(dims)
        if dims_equal(n_in, n_out, facts) or _same_after_common(x.dims, dims, facts):
            return x
        flat = self.reshape(x, [n_in])
        return self.match_dims(flat, [n_out], f"reshape of {fmt_dims(x.dims)} to {fmt_dims(dims)}",
                               f"the element counts {n_in} and {n_out} must be equal")

    def match_dims(self, x: Val, dims, what: str, why: str) -> Val:
        """x as a tensor of `dims`, checked at run time (relax.match_cast: a ValueError naming
        `what`, its position and `why` when they differ)."""
        pos = _position_text(self.loc)
        where = f" at {pos}" if pos else ""
        cast = ir.Operation.create(
            "relax.match_cast", results=[_ttype(list(dims), x.dtype)], operands=[self.use(x)],
            loc=ir.Location.name(f"{what}{where}: {why}"))
        out = Val(cast.results[0], x.dtype, list(dims))
        out.signs = x.signs  # the same values: the same eigenvector signs, if any
        return out

    def same_shapes(self, name: str, ins: list) -> list:
        """The operands of an elementwise StableHLO op (same shape by its definition, which jax's
        shape arithmetic decided) whose dims the folds cannot prove equal (jax.grad of
        jnp.roll(x, 5) over a symbolic n * m adds pieces of sizes written with mod(5, n * m) two
        ways): each is match_cast to the simplest operand's dims, checked at run time."""
        tensors = [v for v in ins if isinstance(v, Val) and v.dims and all(d is not None for d in v.dims)]
        if len(tensors) < 2 or all(v.dims == tensors[0].dims for v in tensors[1:]):
            return ins  # (the common case: the same dims, nothing to prove)
        ref = min(tensors, key=lambda v: sum(len(str(d)) for d in v.dims))
        axes = list(range(len(ref.dims)))
        return [v if v is ref or not (isinstance(v, Val) and len(v.dims) == len(ref.dims))
                else self.align_axes(ref, axes, v, axes, name) for v in ins]

    def align_axes(self, ref: Val, ref_axes, v: Val, v_axes, name: str) -> Val:
        """v, its dims `v_axes` match_cast to ref's `ref_axes` where the folds cannot prove them
        equal (StableHLO requires them equal: a dot_general's contracting and batch dims, the
        other dims of a concatenate's operands); a ValueError naming the op when they differ."""
        facts = None
        dims = list(v.dims)
        for i, j in zip(ref_axes, v_axes):
            a, b = ref.dims[i], v.dims[j]
            if a is None or b is None or a == b:
                continue
            facts = facts or self.int_facts()
            if not dims_equal(a, b, facts):
                dims[j] = a
        if dims == list(v.dims):
            return v
        return self.match_dims(v, dims, f"{name} of {fmt_dims(ref.dims)} and {fmt_dims(v.dims)}",
                               "the operands' dims must be equal")

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
        complex_params = set()  # complex arguments: their parts interleaved, one more dim of 2
        kept = iter(block.arguments)
        for i in range(len(block.arguments) + len(self.unused_args)):
            if i in self.unused_args:
                dims, dt = self.unused_args[i]
                part = _COMPLEX_PARTS.get(dt)
            else:
                t = next(kept).type
                dims, dt = self.ttype(t)
                part = complex_part_type(t)
                if self.spmd is not None:  # the local shard of a sharded argument
                    if part is not None:
                        raise UnsupportedOpError("func.func", str(main.location),
                                                 f"argument #{i}: complex numbers in a sharded program")
                    dims = self.spmd.localize_arg(self, i, dims, str(main.location))
            if part is not None:
                dims, dt = list(dims) + [const(2)], part
                complex_params.add(i)
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
            if self.spmd is not None:
                args = self.spmd.global_args(args, [i for i, _, _ in params if i not in self.unused_args])
            used = [i for i, _, _ in params if i not in self.unused_args]
            args = [self.complex_parts(v) if i in complex_params else v for i, v in zip(used, args)]
            results, ret_loc = self.run_func(main, args)
            for k, r in enumerate(results):
                t = getattr(r, "signs", None)
                if t is not None:
                    raise SignsError(f"{t.where}: error: {t.what} are returned (result #{k}). {SIGNS_WHY}")
            if self.spmd is not None:
                results = self.spmd.check_results(self, results, str(ret_loc))
            self.loc = ret_loc
            complex_results = [k for k, r in enumerate(results) if isinstance(r, CVal)]
            results = [self.interleave(r) if isinstance(r, CVal) else r for r in results]
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
        _import_arg_attrs(main, [i for i, _, _ in params if i not in self.unused_args], func, complex_params)
        if complex_results:
            func.attributes["res_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(
                {COMPLEX_ATTR: ir.UnitAttr.get()} if k in complex_results else {}) for k in range(len(rets))])
        sig = set()
        for _, sdims, _ in params:
            for d in sdims:
                sig |= d.subs(mapping).symbols()
        # jax's dimension variables are >= 1, also those bound inside main from an argument dim
        # given as an expression (k of a 5*k + 15 dim: its own lower bound and the run-time check
        # of the dim against the expression imply k >= 1): region functions inherit the facts
        bound_inside = set()
        for _, e in getattr(self, "dim_exprs", {}).values():
            bound_inside |= e.subs(mapping).symbols()
        lower = {n: 1 for n in sorted({self.renames.get(n, n) for n in self.dim_vars} & (sig | bound_inside))}
        lower.update({n: v for n, v in self.extra_lower.items() if n in sig | bound_inside})
        if lower:
            i64 = ir.IntegerType.get_signless(64)
            func.attributes["relax.symbol_lower"] = ir.DictAttr.get({n: ir.IntegerAttr.get(i64, v)
                                                                     for n, v in sorted(lower.items())})
        reqs = []
        for lhs, rhs, text in self.relations:
            try:
                l, r = parse_expr(lhs).subs(mapping), parse_expr(rhs).subs(mapping)
            except ShapeParseError as e:
                raise UnsupportedOpError("func.func", str(main.location),
                                         f"the jax constraint '{text}' cannot be checked: {e}") from None
            if (l.symbols() | r.symbols()) <= sig | bound_inside:
                reqs.append(_requirement(l, r, f"the jax constraint '{text}' does not hold"))
        for lhs, rhs, what in self.requirements:
            l, r = lhs.subs(mapping), rhs.subs(mapping)
            if not (l.symbols() | r.symbols()) <= sig | bound_inside:
                raise UnsupportedOpError("func.func", str(main.location),
                                         f"{what} (symbols bound inside the program, not checkable at its entry)")
            reqs.append(_requirement(l, r, f"{what}: needs {l} <= {r}"))
        if reqs:
            func.attributes["relax.requires"] = ir.ArrayAttr.get(reqs)
        upper = {n: v for n, v in self.upper.items() if n in sig | bound_inside}
        if upper:
            i64 = ir.IntegerType.get_signless(64)
            func.attributes["relax.symbol_bounds"] = ir.DictAttr.get({n: ir.IntegerAttr.get(i64, v)
                                                                      for n, v in sorted(upper.items())})
        return module.operation

    def complex_parts(self, v: Val) -> CVal:
        """A complex argument, passed as its parts interleaved ([..., 2]: real, imaginary, numpy's
        complex layout), as the pair of its parts."""
        r = len(v.dims)
        dims = v.dims[:-1]
        parts = [self.reshape(self.emit("relax.strided_slice", [v], r, v.dtype,
                                        {"axes": [r - 1], "begin": [k], "end": [k + 1]}, dims=dims + [const(1)]), dims)
                 for k in (0, 1)]
        return CVal(*parts)

    def interleave(self, z: CVal) -> Val:
        """A complex result as its parts interleaved along one more dim of 2 (the caller sees it
        as one complex array: relax.complex on the result)."""
        dims = list(z.dims)
        parts = [self.reshape(p, dims + [const(1)]) for p in (z.re, z.im)]
        return self.emit("relax_v.concat", parts, len(dims) + 1, z.re.dtype, {"axis": len(dims)}, dims=dims + [const(2)])

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
            if name in ("func.return", "stablehlo.return", "sdy.return"):
                outs = [env[o] for o in op.operands]
                carried = [v.signs for v in outs if getattr(v, "signs", None) is not None]
                if carried and name != "func.return":  # out of a loop or branch: not followed further
                    raise SignsError(f"{self.position(op)}: error: {carried[0].what} (computed at {carried[0].where}) "
                                     f"leave a loop or branch body here: relax-mlir follows them only where their "
                                     f"signs cancel, which it does not check through the loop's results")
                return outs, self.location(op)
            if name == "func.call":
                callee = _string(op.attributes["callee"])
                f = self.funcs.get(callee)
                if f is None:
                    raise UnsupportedOpError(name, str(op.location), f"unknown callee @{callee}")
                cargs = [env[o] for o in op.operands]
                self.note_global_constants(f, cargs)
                self.call_sites.append(op)
                try:
                    outs, _ = self.run_func(f, cargs)
                finally:
                    self.call_sites.pop()
                for r, v in zip(op.results, outs):
                    env[r] = v
                continue
            conv = CONVERTERS.get(name)
            if conv is None:
                raise UnsupportedOpError(name, str(op.location))
            ins = [env[o] for o in op.operands]
            self.loc = self.location(op)
            if name in _SAME_SHAPE:
                ins = self.same_shapes(name, ins)
            signs = None
            if any(getattr(v, "signs", None) is not None for v in ins):
                try:
                    signs = propagate_signs(self, op, ins)
                except SignsRefused as e:  # computed nowhere: refused where (if) the results are used
                    results = [_res(op, i) for i in range(len(op.results))]
                    if any(dt not in _DTYPES for _, dt in results):
                        raise SignsError(f"{self.position(op)}: error: {e.message}") from None
                    for r, (dims, dt) in zip(op.results, results):
                        env[r] = self.emit("relax_v.unavailable", [], len(dims), dt,
                                           {"message": ir.StringAttr.get(e.message)}, dims=dims)
                    continue
            self.env = env  # the converter may look through its operands' defining ops
            self.scope = env  # what a converter of an op with regions (stablehlo.while) sees
            try:
                outs = None
                if touches_complex(op, ins):  # complex values as pairs of real parts (complex.py)
                    if self.spmd is not None:
                        raise UnsupportedOpError(name, str(op.location), "complex numbers in a sharded program")
                    outs = convert_complex(self, op, ins)
                else:
                    if self.spmd is not None:  # a data op on sharded global views (sharding.py)
                        outs = self.spmd.partition(self, op, ins)
                    if outs is None:
                        outs = _fold_shape_scalar(self, op, ins)  # a known dim computation (jax's d // k)
                    if outs is None:
                        outs = fold_known(self, op, ins) or conv(self, op, ins)
            except UnsupportedOpError:
                raise
            except (ValueError, KeyError, IndexError, TypeError) as e:
                raise UnsupportedOpError(name, str(op.location), str(e)) from e
            if outs is None:
                outs = []
            if isinstance(outs, (Val, CVal)):
                outs = [outs]
            if signs is not None:
                outs = [_with_signs(v, t, ins) for v, t in zip(outs, signs)]
            for r, v in zip(op.results, outs):
                env[r] = v
        raise ValueError("function without a return")

    def position(self, jax_op) -> str:
        """'file:line:col' of a jax op (its first file position, else its nearest call site's), for
        messages."""
        return _position_text(self.location(jax_op)) or self.source_name or "<unknown>"

    def note_global_constants(self, f, cargs):
        """Name placeholder symbols after the `jax.global_constant` (a jax dimension variable) that
        a callee's argument carries."""
        from jaxlib.mlir import ir as jir

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


def _import_arg_attrs(main, kept: list[int], func: ir.Operation, complex_params: set[int]) -> None:
    """`tf.aliasing_output = r` on @main's argument k (jax.jit's donate_argnums): relax parameter
    kept[k] gets `relax.donate = r` (result r is written into its buffer; relax-infer-shapes checks
    the types). `jax.buffer_donor` (donated, no result to alias) is dropped: the argument is only read.
    A complex parameter gets `relax.complex` (the runtime passes a complex array as its parts)."""
    from jaxlib.mlir import ir as jir

    attrs = main.attributes["arg_attrs"] if "arg_attrs" in main.attributes else None
    donate = {}
    for k, a in enumerate(attrs if isinstance(attrs, jir.ArrayAttr) else ()):
        if k < len(kept) and isinstance(a, jir.DictAttr) and "tf.aliasing_output" in a \
                and isinstance(a["tf.aliasing_output"], jir.IntegerAttr):
            donate[kept[k]] = a["tf.aliasing_output"].value
    if donate or complex_params:
        i64 = ir.IntegerType.get_signless(64)
        n = len(func.regions[0].blocks[0].arguments)
        func.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(
            ({"relax.donate": ir.IntegerAttr.get(i64, donate[i])} if i in donate else {})
            | ({COMPLEX_ATTR: ir.UnitAttr.get()} if i in complex_params else {})) for i in range(n)])


def _position_text(loc) -> str | None:
    """'file:line:col' of one of our locations (location() builds them), else None."""
    p = _file_position(str(loc)) if loc is not None else None
    return f"{p[0]}:{p[1]}:{p[2]}" if p else None


def _with_signs(v, signs, ins):
    """v carrying `signs` (a copy when v is one of the op's operands, whose own signs stay)."""
    if not isinstance(v, Val) or (signs is None and v.signs is None):
        return v
    if any(v is x for x in ins):
        v = Val(v.value, v.dtype, v.dims, v.known)
    v.signs = signs
    return v


def _erase_dead_ops(block: ir.Block) -> None:
    """Erase the ops whose results are never used (every relax op built here is pure), last first;
    a match_cast stays (it binds symbols and checks them). A decomposition whose vectors are not
    used computes the values alone."""
    for op in reversed(list(block.operations)):
        if op.name not in ("func.return", "relax.match_cast") and all(not list(r.uses) for r in op.results):
            op.erase()
        elif op.name in ("relax_v.eigvalsh", "relax_v.svdvals") and "vectors" in op.attributes:
            _drop_unused_vectors(op)


def _drop_unused_vectors(op) -> None:
    vectors = [op.results[2]] + ([op.results[0]] if op.name == "relax_v.svdvals" else [])
    if any(list(r.uses) for r in vectors):
        return
    with op.location, ir.InsertionPoint(op):
        values = ir.Operation.create(op.name, results=[r.type for r in list(op.results)[:2]],
                                     operands=list(op.operands))
    op.results[1].replace_all_uses_with(values.results[1])
    op.results[0].replace_all_uses_with(values.results[0])
    op.erase()


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


def import_module(module, dim_names=None, unused_args=None, *, dim_vars: Iterable[str] = (),
                  source_name: str = "<string>", symbol_bounds: dict[str, int] | None = None,
                  symbol_lower: dict[str, int] | None = None, symbol_relations=(),
                  spmd: bool = False, platform_index: int | None = None) -> Module:
    """Import a parsed jax-MLIR module (`jaxlib.mlir.ir.Module`) -> a verified, shape-deduced
    `relax_mlir.Module`.
    `dim_names[i][j]`: the symbol name of dim j of argument i (None: derive one); `unused_args`:
    position -> (dims, dtype) of arguments @main does not take (jax.export drops unused ones),
    which the relax function takes and ignores; `dim_vars`: names that are jax dimension
    variables (>= 1, like those the module's `jax.global_constant` arguments name);
    `symbol_bounds`: symbol -> upper bound (jax's `s <= 32` constraints), `relax.symbol_bounds`;
    `symbol_relations`: (lhs, rhs, text) for jax's constraints between symbols, lhs <= rhs checked
    at entry (`relax.requires`);
    `spmd`: build the per-device program of a sharded module (frontend/stablehlo/sharding.py);
    `platform_index`: the lowering to import from a module exported for several platforms
    (platforms.py; the module is changed in place)."""
    from relax_mlir.targets import registry

    specialize_platform(module, platform_index)
    try:
        check_element_types(module)
    except UnsupportedTypesError as types:  # the unsupported ops too, all in one error
        try:
            check_supported_ops(module, spmd)
        except UnsupportedOpsError as ops:
            raise UnsupportedTypesError(types.items + [ops]) from None
        raise
    check_supported_ops(module, spmd)
    session = Session(source_name)
    with session.ctx, ir.Location.unknown():
        im = Importer(module, dim_names, unused_args, dim_vars, source_name, spmd)
        im.upper = dict(symbol_bounds or {})
        im.relations.extend(symbol_relations or ())
        for n, v in (symbol_lower or {}).items():
            if v > 1:
                im.extra_lower[n] = max(im.extra_lower.get(n, 0), v)
        op = im.run()
        if spmd:
            annotate_spmd(im, op)
    result = Module(session, op)
    if not run_pipeline(session, op, ["relax-infer-shapes"], registry()):
        raise CompileError("\n".join(d.render() for d in session.diags) or "the imported module does not verify")
    return result


@functools.cache
def _jax_dialects():
    """(context class, registry) for `_jax_ir_context`, made once per process."""
    from jaxlib.mlir import ir as jir
    from jaxlib.mlir._mlir_libs import _jax_mlir_ext

    class Context(jir.Context):
        def __init__(self):
            super(jir.Context, self).__init__()  # (the base class's __init__ loads every dialect)

    registry = jir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    return Context, registry


def _jax_ir_context():
    """A context of jaxlib's MLIR holding the dialects `jax.export` writes (StableHLO, CHLO, Shardy,
    MPMD, MHLO and the upstream ones jax registers), as jax's own `make_ir_context` builds it but
    without importing jax: jaxlib's MLIR is a package of its own, and importing jax (with
    ml_dtypes) was ~2 s of every relax-import-stablehlo run. Dialects are loaded one by one, not
    every dialect linked into the library (what `ir.Context()`'s constructor would do)."""
    from jaxlib.mlir.dialects import chlo, mhlo, mpmd, sdy, stablehlo

    context_class, registry = _jax_dialects()
    ctx = context_class()
    ctx.append_dialect_registry(registry)
    ctx.load_all_available_dialects()
    sdy.register_dialect(ctx)
    mpmd.register_dialect(ctx)
    mhlo.register_mhlo_dialect(ctx)
    chlo.register_dialect(ctx)
    stablehlo.register_dialect(ctx)
    return ctx


def import_stablehlo(text: str, dim_names=None, source_name: str = "<string>", unused_args=None, *,
                     dim_vars: Iterable[str] = (), symbol_bounds: dict[str, int] | None = None,
                     symbol_lower: dict[str, int] | None = None, symbol_relations=(),
                     spmd: bool = False, platform_index: int | None = None) -> Module:
    """StableHLO text (as `jax.export` prints it) -> a `relax_mlir.Module`. Errors:
    StableHLOParseError, UnsupportedOpError (UnsupportedTypesError), CompileError, ValueError;
    `render_error` formats any of them."""
    from jaxlib.mlir import ir as jir

    deep = nesting_error(text, source_name) or result_number_error(text, source_name)
    if deep is not None:  # MLIR's parser would overflow the stack, or run out of memory
        raise StableHLOParseError([(f'loc("{source_name}":{deep.line}:{deep.col})', deep.message)])
    ctx = _jax_ir_context()
    with ctx, jir.Location.unknown():
        try:
            op = jir.Operation.parse(text, source_name=source_name)
        except MemoryError:  # (an allocation the pre-parse checks did not foresee)
            raise StableHLOParseError([(f'loc("{source_name}":1:1)', "MLIR's parser ran out of memory on this "
                                                                      "input")]) from None
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
                             symbol_bounds=symbol_bounds, symbol_lower=symbol_lower,
                             symbol_relations=symbol_relations, spmd=spmd, platform_index=platform_index)


# Elementwise StableHLO ops whose tensor operands have one shape (scalar operands of select and
# clamp aside): Importer.same_shapes checks what the folds cannot prove.
_SAME_SHAPE = frozenset("stablehlo." + n for n in (
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder", "atan2", "and", "or",
    "xor", "shift_left", "shift_right_arithmetic", "shift_right_logical", "compare", "select", "clamp", "complex"))


def _requirement(lhs: Expr, rhs: Expr, message: str) -> ir.DictAttr:
    """A `relax.requires` entry of @main: lhs <= rhs, checked at its entry."""
    return ir.DictAttr.get({"lhs": ir.StringAttr.get(str(lhs)), "rhs": ir.StringAttr.get(str(rhs)),
                            "message": ir.StringAttr.get(message)})


class _ModuleView:
    """A parsed `builtin.module` operation seen through the `Module` attributes the importer uses."""

    def __init__(self, op):
        self.operation = op.operation
        self.body = op.regions[0].blocks[0]
