"""`relax-infer-shapes`: apply each op's deduction rule in program order, and `relax-verify`.

Walks every graph function (callees before callers), through `relax.dataflow` regions, binding
symbols where they first appear (function parameters, `relax.match_cast` patterns) and
instantiating a callee's signature at each `func.call` by substitution. A written result type
with "?" dims is filled in; one that contradicts the deduction is an error at the op.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Iterable

from mlir import ir

from relax_mlir.dialect.spec import OPS, DeduceError, OpInfo
from relax_mlir.dialect.types import TypeTextError, OtherType, RelaxType, ShapeType, TensorType, view
from relax_mlir.ops.control_flow import CONTROL_FLOW, region_callees
from relax_mlir.ops.common import (FREE, ONE, ZERO, aligned_requirements, dims_differ, dims_equal,
                                   normalize_axis, product)
from relax_mlir.passes import ModulePass, PassError, where
from relax_mlir.shape import Expr, Facts, ShapeParseError, min_, parse as parse_expr, sym


# --- symbol facts on functions -----------------------------------------------------------------

def function_facts(func: ir.Operation) -> Facts:
    """Facts from `relax.symbol_bounds = {n = 4096}` (upper), `relax.symbol_lower = {n = 1}`, and
    the symbolic `relax.requires` relations lhs <= rhs (checked at entry before anything runs), each
    as an equality with a fresh slack symbol t >= 0: rhs == lhs + t, solved for a lone symbol of
    either side where there is one (`a >= c` substitutes a = c + t, so min(a, c) is c)."""
    lower: dict[str, int] = {}
    upper: dict[str, int] = {}
    attrs = func.attributes
    for key, into in (("relax.symbol_bounds", upper), ("relax.symbol_lower", lower)):
        if key in attrs:
            a = attrs[key]
            if not isinstance(a, ir.DictAttr):
                raise PassError(func, f"'{key}' must be a dictionary of symbol = integer")
            for na in (a[i] for i in range(len(a))):
                if not isinstance(na.attr, ir.IntegerAttr):
                    raise PassError(func, f"'{key}' entry '{na.name}' must be an integer")
                into[na.name] = ir.IntegerAttr(na.attr).value
    eqs = []
    if REQUIRES in attrs and isinstance(attrs[REQUIRES], ir.ArrayAttr):
        for i, e in enumerate(attrs[REQUIRES]):
            if not (isinstance(e, ir.DictAttr) and "rhs" in e and "lhs" in e and isinstance(e["rhs"], ir.StringAttr)
                    and isinstance(e["lhs"], ir.StringAttr)):
                continue  # (checked by requirement_entries; rhs_dim entries name a '?' dim)
            try:
                lhs, rhs = parse_expr(ir.StringAttr(e["lhs"]).value), parse_expr(ir.StringAttr(e["rhs"]).value)
            except ShapeParseError:
                continue
            t = sym(f"_slack{i}")
            eqs.append((lhs, rhs - t) if lhs.is_symbol and not rhs.is_symbol else (rhs, lhs + t))
    try:
        return Facts(lower=lower, upper=upper, equalities=eqs)
    except ValueError:  # contradictory relations: the entry check refuses every call
        return Facts(lower=lower, upper=upper)


def graph_ops_named(module: ir.Operation, names) -> list[ir.Operation]:
    """The ops named one of `names` in the graph functions of `module` (nested regions included),
    collected before any is rewritten: function by function, callees first, in program order."""
    found: list[ir.Operation] = []

    def walk(block):
        for op in block.operations:
            op = op.operation
            if op.name in names:
                found.append(op)
            for reg in op.regions:
                for blk in reg.blocks:
                    walk(blk)

    for f in graph_functions(module):
        for blk in f.regions[0].blocks:
            walk(blk)
    return found


def graph_functions(module: ir.Operation) -> list[ir.Operation]:
    """func.func ops whose signature mentions a relax type (callees before callers)."""
    funcs = {}
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func":
            funcs[ir.StringAttr(op.attributes["sym_name"]).value] = op.operation
    graph = {n: f for n, f in funcs.items() if is_graph_function(f)}
    order: list[ir.Operation] = []
    state: dict[str, int] = {}

    def visit(n: str):
        if state.get(n):
            return
        state[n] = 1
        for callee in _callees(graph[n]):
            if callee in graph:
                visit(callee)
        state[n] = 2
        order.append(graph[n])

    for n in graph:
        visit(n)
    return order


def is_graph_function(f: ir.Operation) -> bool:
    ft = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
    if any(str(t).startswith("!relax.") for t in list(ft.inputs) + list(ft.results)):
        return True
    if "relax.graph" in f.attributes:
        return True
    if not f.regions[0].blocks:
        return False
    return any(op.operation.name.startswith("relax.") for op in f.regions[0].blocks[0].operations)


def _callees(f: ir.Operation) -> Iterable[str]:
    out = []

    def walk(block):
        for op in block.operations:
            op = op.operation
            if op.name == "func.call":
                out.append(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
            elif op.name in CONTROL_FLOW:
                out.extend(region_callees(op))
            for r in op.regions:
                for b in r.blocks:
                    walk(b)

    for b in f.regions[0].blocks:
        walk(b)
    return out


def param_bindings(types: list[RelaxType]) -> dict[str, tuple[int, int]]:
    """symbol -> (param index, dim index) of its first bare occurrence."""
    out: dict[str, tuple[int, int]] = {}
    for i, t in enumerate(types):
        if isinstance(t, TensorType) and t.dims is not None:
            for j, d in enumerate(t.dims):
                if d is not None and not d.is_const and len(d.symbols()) == 1:
                    s = next(iter(d.symbols()))
                    if d == sym(s) and s not in out:
                        out[s] = (i, j)
    return out


# --- donated parameters -----------------------------------------------------------------------

DONATE = "relax.donate"


def donations(f: ir.Operation) -> dict[int, int]:
    """parameter -> result of the function's `relax.donate` argument attributes (the result is
    written into the parameter's buffer)."""
    out: dict[int, int] = {}
    if "arg_attrs" in f.attributes:
        for i, d in enumerate(ir.ArrayAttr(f.attributes["arg_attrs"])):
            if isinstance(d, ir.DictAttr) and DONATE in d:
                a = d[DONATE]
                if not isinstance(a, ir.IntegerAttr):
                    raise PassError(f, f"'func.func' op argument #{i}: '{DONATE}' must be an integer result index, "
                                       f"got {a}")
                out[i] = a.value
    return out


def check_donations(f: ir.Operation, params: list, results: list, facts: Facts) -> None:
    """Each `relax.donate = r` names a result of exactly the parameter's type (dims proven equal), and
    no result is donated twice; else an error at the function."""
    seen: dict[int, int] = {}
    for i, r in donations(f).items():
        pre = f"'func.func' op argument #{i} (relax.donate = {r})"
        if not 0 <= r < len(results):
            raise PassError(f, f"{pre}: the function has {len(results)} results")
        if r in seen:
            raise PassError(f, f"{pre}: result #{r} is already donated argument #{seen[r]}'s buffer")
        seen[r] = i
        p, t = params[i], results[r]
        ok = isinstance(p, TensorType) and isinstance(t, TensorType) and p.dtype == t.dtype \
            and p.dims is not None and t.dims is not None and len(p.dims) == len(t.dims) \
            and all(a is not None and b is not None and dims_equal(a, b, facts) for a, b in zip(p.dims, t.dims))
        if not ok:
            raise PassError(f, f"{pre}: result #{r} has type {t}, which is not the argument's type {p} "
                               f"(a donated buffer holds a result of the same dtype and shape)")


# --- the walk ----------------------------------------------------------------------------------

class _Checker:
    def __init__(self, module: ir.Operation, infer: bool):
        self.module = module
        self.pending: set[str] = set()  # graph functions not checked yet (run)
        self.infer = infer
        self.types: dict = {}  # value -> deduced type (verify mode leaves the IR untouched)
        self.deduced: dict = {}  # (op name, facts, operand types, result types, attributes) -> deduction
        self.signatures: dict[str, tuple[list[RelaxType], list[RelaxType]]] = {}
        self.kernels: dict[str, ir.Operation] = {}
        for op in module.regions[0].blocks[0].operations:
            if op.operation.name == "func.func":
                self.kernels[ir.StringAttr(op.attributes["sym_name"]).value] = op.operation

    def run(self):
        order = graph_functions(self.module)  # callees first: a call to one not done yet is recursion
        self.pending = {ir.StringAttr(f.attributes["sym_name"]).value for f in order
                        if "relax.region" not in f.attributes}
        for f in order:
            if "relax.region" not in f.attributes:  # checked at its control-flow op
                self.function(f)
                self.pending.discard(ir.StringAttr(f.attributes["sym_name"]).value)

    def function(self, f: ir.Operation, region_params: list[RelaxType] | None = None, caller_facts: Facts | None = None):
        requirement_entries(f)  # one from the input must be well-formed
        # a region function holds its caller's facts (in verify mode too, where its attributes are
        # not copied: `lax.cond` of a body slicing a[1:] of an n >= 1 vector was refused on import)
        self.facts = function_facts(f) if caller_facts is None else caller_facts
        ft = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
        try:
            params = region_params if region_params is not None else [view(t) for t in ft.inputs]
            [view(t) for t in ft.results]
        except TypeTextError as e:
            raise PassError(f, f"'func.func' op {e}") from None
        self.bound: set[str] = set()
        binds = param_bindings(params)
        for t in params:
            if isinstance(t, TensorType):
                for d in t.dims or ():
                    if d is not None:
                        for s in d.symbols():
                            if s not in binds:
                                raise PassError(f, f"symbol '{s}' of the signature is never a whole dim of a "
                                                   f"parameter, so it cannot be bound from the arguments")
        self.bound |= set(binds)
        self.func = f
        name = ir.StringAttr(f.attributes["sym_name"]).value
        if not f.regions[0].blocks:
            self.signatures[name] = (params, [view(t) for t in ft.results])
            return
        self.returned: list[RelaxType] | None = None
        self.block(f.regions[0].blocks[0])
        results = [view(t) for t in ft.results]
        if self.returned is not None:
            new = []
            for i, (w, d) in enumerate(zip(results, self.returned)):
                new.append(self.merge(f, w, d, f"result #{i} of the function"))
            if new != results and self.infer:
                f.attributes["function_type"] = ir.TypeAttr.get(
                    ir.FunctionType.get(list(ft.inputs), [t.to_mlir() for t in new]))
            results = new
        if region_params is None:
            check_donations(f, params, results, self.facts)
        self.signatures[name] = (params, results)

    def block(self, block: ir.Block):
        for op in block.operations:
            self.op(op.operation)

    def op(self, op: ir.Operation):
        try:
            self._op(op)
        except TypeTextError as e:
            raise PassError(op, f"'{op.name}' op {e}") from None

    def _op(self, op: ir.Operation):
        name = op.name
        if name == "relax_v.dataflow":
            _check_order(op.regions[0].blocks[0])
            self.block(op.regions[0].blocks[0])
            term = op.regions[0].blocks[0].operations[len(op.regions[0].blocks[0].operations) - 1]
            if term.operation.name != "gpu.yield":
                raise PassError(op, "body must end in gpu.yield")
            deduced = [self.type_of(v) for v in term.operation.operands]
            self.set_results(op, deduced)
            return
        if name == "func.return":
            self.returned = [self.type_of(v) for v in op.operands]
            return
        if name == "func.call":
            self.call(op)
            return
        if name in CONTROL_FLOW:
            self.control_flow(op)
            return
        spec = OPS.get(name)
        if spec is None:
            if not op.context.is_registered_operation(name):
                raise PassError(op, f"unregistered operation '{name}'")
            return
        if name.startswith("relax_v."):
            self.check_arity(op, spec)
        operand_types = [self.type_of(v) for v in op.operands]
        info = OpInfo(op, self.facts, operand_types)
        # A deduction depends on the op's name, operand types, declared result types, attributes
        # and the facts in force, nothing else: equal ops (every layer of a model repeats its
        # ops with the same types) are deduced once per check
        key = (name, self.facts, tuple(operand_types), tuple(r.type for r in op.results),
               tuple((a, op.attributes[a]) for a in op.attributes))
        deduced = self.deduced.get(key)
        if deduced is None:
            try:
                deduced = spec.deduce(info)
            except DeduceError as e:
                raise PassError(op, f"'{name}' op {e}") from None
            self.deduced[key] = deduced
        deduced = list(deduced)
        if name == "relax.match_cast":
            self.match_cast(op, info.operand_types[0], deduced[0])
        elif name == "relax_v.call_tir":
            self.call_tir(op, info)
        if spec.results_are_declared:
            return
        if self.infer and _computes(spec) and _has_unknown_dims(info.operand_types):
            try:
                rules = unknown_dim_rules(spec, info, deduced)
            except DeduceError as e:
                raise PassError(op, f"'{name}' op {e}") from None
            if self.refine_operands(op, info.operand_types, rules, deduced):
                info = OpInfo(op, self.facts, [self.type_of(v) for v in op.operands])
                try:
                    deduced = spec.deduce(info)
                except DeduceError as e:
                    raise PassError(op, f"'{name}' op {e}") from None
        if self.infer and name == "relax.take":
            self.take_rows(op, info, deduced)
        if self.infer and hasattr(spec, "requirements"):
            self.op_requirements(op, spec, info)
        self.set_results(op, deduced)

    def take_rows(self, op: ir.Operation, info: OpInfo, results: list):
        """`relax.take` reads a row of its table for every index: a table with no rows along the
        axis and a non-empty index tensor (jax refuses it) must raise before its kernel runs. When
        the facts cannot prove it impossible, record the requirement min(count, 1) <= rows on the
        function; relax-lower-shapes checks it in the entry prologue."""
        x, idx = info.tensor(0), info.tensor(1)
        if x.dims is None or idx.dims is None:
            return
        axis = normalize_axis(info.attr("axis", 0), len(x.dims))
        rows, count = x.dims[axis], product(idx.dims)
        if count is None:
            return  # the result is unknown: legalization refuses the op
        if self.facts.prove_eq(count, ZERO) or (rows is not None and self.facts.prove_ge(rows, ONE)):
            return
        need = min_(count, ONE)
        entry = {"lhs": ir.StringAttr.get(str(need))}
        if rows is None:
            v = op.operands[0]
            if not _is_entry_argument(v, self.func):
                raise PassError(op, "'relax.take' op table has an unknown ('?') dim on the gathered axis and is "
                                    "not a function parameter; refine it with relax.match_cast")
            i64 = ir.IntegerType.get_signless(64)
            entry["rhs_dim"] = ir.ArrayAttr.get([ir.IntegerAttr.get(i64, v.arg_number), ir.IntegerAttr.get(i64, axis)])
            what = "?"
        else:
            entry["rhs"] = ir.StringAttr.get(str(rows))
            what = str(rows)
        entry["message"] = ir.StringAttr.get(
            f"'relax.take' op at {where(op)}: the table has no rows along axis {axis} (dim {what}) but "
            f"{count} indices; there is no row to clamp an index into")
        _add_requirement(self.func, ir.DictAttr.get(entry))

    def op_requirements(self, op: ir.Operation, spec, info: OpInfo):
        """Record the shape relations `lhs <= rhs` an op needs (its class's `requirements(info)`:
        (lhs, rhs, what) triples) and the facts cannot prove, on the function; relax-lower-shapes
        checks them at entry, so a failing one raises ValueError before any kernel runs."""
        try:
            reqs = spec.requirements(info)
        except DeduceError as e:
            raise PassError(op, f"'{op.name}' op {e}") from None
        for lhs, rhs, what in reqs:
            if self.facts.prove_le(lhs, rhs):
                continue
            _add_requirement(self.func, ir.DictAttr.get({
                "lhs": ir.StringAttr.get(str(lhs)), "rhs": ir.StringAttr.get(str(rhs)),
                "message": ir.StringAttr.get(f"'{op.name}' op at {where(op)}: {what}")}))

    def refine_operands(self, op: ir.Operation, types: list, rules: list, results: list) -> bool:
        """Refine each "?" operand dim the op's rule pins down with a `relax.match_cast` before the
        op (checked at run time, before any kernel, by relax-lower-shapes). A "?" the rule cannot
        pin down is refused when the op's results are nevertheless known: then its kernel would
        read the operand at a size nobody checked."""
        results_known = all(not isinstance(r, TensorType) or r.known for r in results)
        spec = OPS.get(op.name)
        names = [o.name for o in spec.operands_] if spec is not None and not any(
            o.variadic for o in spec.operands_) else []
        changed = False
        for i, t in enumerate(types):
            if not isinstance(t, TensorType) or t.dims is None or all(d is not None for d in t.dims):
                continue
            rule = rules[i] if rules is not None and i < len(rules) else ()
            what = f"operand #{i}" + (f" ('{names[i]}')" if i < len(names) and names[i] else "")
            pattern = list(t.dims)
            for j, d in enumerate(t.dims):
                if d is not None:
                    continue
                want = rule[j] if j < len(rule) else None
                if want is FREE:
                    continue
                if want is None:
                    if results_known:
                        raise PassError(op, f"'{op.name}' op {what} dim {j} is unknown ('?') and the op cannot "
                                            f"check it at run time; refine it with relax.match_cast")
                    continue
                pattern[j] = want
            if pattern == list(t.dims):
                continue
            v = op.operands[i]
            if not _is_entry_argument(v, self.func):
                raise PassError(op, f"'{op.name}' op {what} has unknown ('?') dims {t}, and it is not a "
                                    f"function parameter; refine it with relax.match_cast")
            pat = TensorType(tuple(pattern), t.dtype)
            self.check_bound(op, pat)
            with ir.InsertionPoint(op), op.location:
                mc = ir.Operation.create("relax.match_cast", results=[pat.to_mlir()], operands=[v], attributes={
                    "relax.origin": ir.StringAttr.get(f"'{op.name}' op {what}"),
                    "relax.reason": ir.StringAttr.get(_reason(spec))})
            op.operands[i] = mc.results[0]
            changed = True
        return changed

    def type_of(self, v: ir.Value) -> RelaxType:
        t = self.types.get(v)
        return t if t is not None else view(v.type)

    def check_arity(self, op, spec):
        fixed = [o for o in spec.operands_ if not o.variadic]
        if not any(o.variadic for o in spec.operands_) and len(op.operands) != len(fixed):
            raise PassError(op, f"'{op.name}' op expects {len(fixed)} operands, got {len(op.operands)}")
        if len(op.operands) < len(fixed):
            raise PassError(op, f"'{op.name}' op expects at least {len(fixed)} operands, got {len(op.operands)}")
        if len(op.regions) != len(spec.regions_):
            raise PassError(op, f"'{op.name}' op expects {len(spec.regions_)} regions, got {len(op.regions)}")
        for a in spec.attributes_:
            if not a.optional and a.name not in op.attributes:
                raise PassError(op, f"'{op.name}' op requires attribute '{a.name}'")

    def set_results(self, op: ir.Operation, deduced: list[RelaxType]):
        if len(deduced) != len(op.results):
            raise PassError(op, f"'{op.name}' op has {len(op.results)} results, deduction gives {len(deduced)}")
        for i, (r, d) in enumerate(zip(op.results, deduced)):
            self.check_bound(op, d)
            w = view(r.type)
            m = self.merge(op, w, d, f"result #{i}")
            self.types[r] = m
            if m != w and self.infer:
                r.set_type(m.to_mlir())

    def check_bound(self, op, t: RelaxType):
        if isinstance(t, (TensorType, ShapeType)):
            for d in t.dims or ():
                if d is not None:
                    free = d.symbols() - self.bound
                    if free:
                        raise PassError(op, f"'{op.name}' op uses symbol '{sorted(free)[0]}', which is not bound in "
                                            f"this function (bind it with a parameter or relax.match_cast)")

    def merge(self, op, written: RelaxType, deduced: RelaxType, what: str) -> RelaxType:
        """The type to keep: the deduced one, when the written one agrees with it (or has '?')."""
        if written == deduced:
            return written
        opname = op.name if op.name != "func.func" else "func.func"
        pre = f"'{opname}' op {what}"
        if isinstance(written, TensorType) and isinstance(deduced, TensorType):
            if written.dtype != deduced.dtype:
                raise PassError(op, f"{pre} has element type {written.dtype}, deduced {deduced.dtype}")
            if written.dims is None:
                return deduced
            if deduced.dims is None:
                return written
            if len(written.dims) != len(deduced.dims):
                raise PassError(op, f"{pre} has rank {len(written.dims)}, deduced rank {len(deduced.dims)} "
                                    f"({written} vs {deduced})")
            dims = []
            for j, (a, b) in enumerate(zip(written.dims, deduced.dims)):
                if a is None:
                    dims.append(b)
                elif b is None:
                    dims.append(a)
                elif dims_equal(a, b, self.facts):
                    dims.append(b)
                else:
                    syms = sorted(a.symbols() | b.symbols())
                    raise PassError(op, f"{pre} dim {j} is declared {a} but deduced {b}"
                                        + (f" (symbols: {', '.join(syms)})" if syms else ""))
            return TensorType(tuple(dims), deduced.dtype)
        if isinstance(written, ShapeType) and isinstance(deduced, ShapeType):
            if len(written.dims) == len(deduced.dims) and all(
                    a is None or b is None or dims_equal(a, b, self.facts) for a, b in zip(written.dims, deduced.dims)):
                return deduced
        if isinstance(written, OtherType) and isinstance(deduced, OtherType):
            return written
        raise PassError(op, f"{pre} has type {written}, deduced {deduced}")

    def match_cast(self, op, src: RelaxType, pat: TensorType):
        new = pat.symbols() - self.bound
        for s in sorted(new):
            # A new symbol must be a whole dim somewhere in the pattern, so it can be bound.
            if not any(d is not None and d == sym(s) for d in pat.dims):
                raise PassError(op, f"'relax.match_cast' op cannot bind symbol '{s}': it is never a whole dim "
                                    f"of the pattern {pat}")
        if isinstance(src, TensorType) and src.dims is not None:
            for i, (a, b) in enumerate(zip(src.dims, pat.dims)):
                if a is None or b is None:
                    continue
                if b.symbols() <= self.bound and dims_differ(a, b, self.facts):
                    raise PassError(op, f"'relax.match_cast' op can never succeed: dim {i} is {a}, the pattern "
                                        f"says {b}")
                if not dims_equal(a, b, self.facts):
                    self.facts = self.facts.with_equality(b, a)
        self.bound |= new

    def call_tir(self, op, info: OpInfo):
        callee = info.attr("callee")
        k = self.kernels.get(callee)
        if k is None:
            raise PassError(op, f"'relax_v.call_tir' op callee @{callee} is not a function of this module")
        ft = ir.FunctionType(ir.TypeAttr(k.attributes["function_type"]).value)
        lowered = info.attr("lowered")
        n_in = lowered[0] if lowered else len(op.operands)
        n_sym = lowered[1] if lowered else len(info.attr("sym_args") or [])
        want = n_in + len(op.results) + n_sym
        if len(ft.inputs) != want:
            raise PassError(op, f"'relax_v.call_tir' op callee @{callee} takes {len(ft.inputs)} arguments, but the "
                                f"call passes {n_in} inputs, {len(op.results)} outputs and {n_sym} symbolic ints")
        for s in info.attr("sym_args") or []:
            e = parse_expr(str(s))
            free = e.symbols() - self.bound
            if free:
                raise PassError(op, f"'relax_v.call_tir' op sym_args use unbound symbol '{sorted(free)[0]}'")
        for i, r in enumerate(op.results):
            t = view(r.type)
            if isinstance(t, TensorType) and not t.known:
                raise PassError(op, f"'relax_v.call_tir' op result #{i} must have a known shape, got {t}")
            self.check_bound(op, t)

    def call(self, op: ir.Operation):
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        if callee in self.pending:
            raise PassError(op, f"'func.call' op @{callee} is called recursively (directly or through other "
                                f"functions): recursion is not supported; write the loop with relax_v.while")
        sig = self.signatures.get(callee)
        if sig is None:
            return
        params, results = sig
        args = [self.type_of(v) for v in op.operands]
        if len(args) != len(params):
            raise PassError(op, f"'func.call' op @{callee} takes {len(params)} arguments, got {len(args)}")
        binds = param_bindings(params)
        mapping: dict[str, Expr] = {}
        for s, (i, j) in binds.items():
            a = args[i]
            if isinstance(a, TensorType) and a.dims is not None and j < len(a.dims) and a.dims[j] is not None:
                mapping[s] = a.dims[j]
        for i, (p, a) in enumerate(zip(params, args)):
            if isinstance(p, TensorType) and isinstance(a, TensorType):
                if p.dtype != a.dtype:
                    raise PassError(op, f"'func.call' op argument #{i} of @{callee} has element type {a.dtype}, "
                                        f"expected {p.dtype}")
                if p.dims is None or a.dims is None:
                    continue
                if len(p.dims) != len(a.dims):
                    raise PassError(op, f"'func.call' op argument #{i} of @{callee} has rank {len(a.dims)}, "
                                        f"expected {len(p.dims)}")
                for j, (pd, ad) in enumerate(zip(p.dims, a.dims)):
                    if pd is None or ad is None or not pd.symbols() <= set(mapping):
                        continue
                    want = pd.subs(mapping)
                    if not dims_equal(want, ad, self.facts):
                        raise PassError(op, f"'func.call' op argument #{i} of @{callee} dim {j} is {ad}, expected "
                                            f"{pd} = {want}")
        deduced = []
        for r in results:
            if isinstance(r, TensorType) and r.dims is not None:
                dims = tuple(None if d is None or not d.symbols() <= set(mapping) else d.subs(mapping) for d in r.dims)
                deduced.append(TensorType(dims, r.dtype))
            else:
                deduced.append(r)
        self.set_results(op, deduced)


    # --- control flow (ops/control_flow.py) -------------------------------------------------

    def control_flow(self, op: ir.Operation):
        names = region_callees(op)
        funcs = []
        for n in names:
            f = self.kernels.get(n)
            if f is None or not f.regions[0].blocks or "relax.region" not in f.attributes:
                raise PassError(op, f"'{op.name}' op: @{n} is not a region function (a func.func marked relax.region)")
            funcs.append(f)
        types = [self.type_of(v) for v in op.operands]
        for i, t in enumerate(types):
            if not isinstance(t, TensorType):
                raise PassError(op, f"'{op.name}' op operand #{i} must be a relax tensor, got {t}")
        if op.name == "relax_v.while":
            carried = op.attributes["carried"] if "carried" in op.attributes else None
            if not isinstance(carried, ir.IntegerAttr):
                raise PassError(op, f"'relax_v.while' op attribute 'carried' must be an integer (the number of "
                                    f"carried values), got {carried}")
            n = carried.value
            if not 0 <= n <= len(types) or len(op.results) != n:
                raise PassError(op, f"'relax_v.while' op carries {n} values: it needs at least {n} operands and "
                                    f"exactly {n} results")
            (c,) = self.region_results(op, funcs[0], types, "the condition", 1)
            if c.dtype != "i1" or c.dims != ():
                raise PassError(op, f"'relax_v.while' op condition @{names[0]} must return tensor<[], i1>, got {c}")
            body = self.region_results(op, funcs[1], types, "the body", n)
            for i, (b, t) in enumerate(zip(body, types[:n])):
                if not self.same_type(b, t):
                    raise PassError(op, f"'relax_v.while' op carried value #{i} changes type in the body @{names[1]}: "
                                        f"carried as {t}, returned as {b}")
            self.set_results(op, types[:n])
            return
        sel = types[0] if types else None
        want = "i1" if op.name == "relax_v.if" else "i32"
        if sel is None or sel.dtype != want or sel.dims != ():
            raise PassError(op, f"'{op.name}' op operand #0 must be tensor<[], {want}>, got {sel}")
        outs = [self.region_results(op, f, types[1:], f"branch @{nm}", len(op.results))
                for f, nm in zip(funcs, names)]
        result = []
        for i in range(len(op.results)):
            ts = [o[i] for o in outs]
            for j, t in enumerate(ts[1:], 1):
                if ts[0].dtype != t.dtype or ts[0].dims is None or t.dims is None or len(ts[0].dims) != len(t.dims):
                    raise PassError(op, f"'{op.name}' op result #{i}: branch @{names[0]} returns {ts[0]}, branch "
                                        f"@{names[j]} returns {t}")
            if ts[0].dims is None:
                result.append(ts[0])
                continue
            # A dim the branches do not provably agree on is unknown ("?"); relax.match_cast refines it.
            dims = tuple(d if all(dims_equal(d, t.dims[k], self.facts) for t in ts[1:]) else None
                         for k, d in enumerate(ts[0].dims))
            result.append(TensorType(dims, ts[0].dtype))
        self.set_results(op, result)

    def hoist_requirements(self, f: ir.Operation, back: dict[str, Expr]):
        """A region function has no error channel, so a shape relation it needs (a slice size
        against a dim our facts do not bound) moves to the function that holds its op, in that
        function's symbols, when they are all bound there (the region's parameter shapes are the
        same at every iteration): checked at its entry before any kernel, or moved on again. Such a
        check also runs when the loop would take no iteration or the branch is not taken (a
        ValueError where jax might compute). A relation over symbols bound inside the body stays
        (and is refused when lowered)."""
        if REQUIRES not in f.attributes or not self.infer:
            return
        keep = []
        for d in requirement_entries(f):
            if "rhs" not in d:  # against a '?' dim of the region's own parameter: stays
                keep.append(d)
                continue
            lhs = parse_expr(ir.StringAttr(d["lhs"]).value).subs(back)
            rhs = parse_expr(ir.StringAttr(d["rhs"]).value).subs(back)
            if not (lhs.symbols() | rhs.symbols()) <= self.bound:
                keep.append(d)
                continue
            if not self.facts.prove_le(lhs, rhs):
                # the op's message names the region's symbols; the relation in the caller's follows
                msg = f"{ir.StringAttr(d['message']).value} (checked at the caller's entry: {lhs} <= {rhs})"
                _add_requirement(self.func, ir.DictAttr.get({
                    "lhs": ir.StringAttr.get(str(lhs)), "rhs": ir.StringAttr.get(str(rhs)),
                    "message": ir.StringAttr.get(msg)}))
        if keep:
            f.attributes[REQUIRES] = ir.ArrayAttr.get(keep)
        else:
            del f.attributes[REQUIRES]

    def same_type(self, a: RelaxType, b: RelaxType) -> bool:
        if not (isinstance(a, TensorType) and isinstance(b, TensorType)) or a.dtype != b.dtype:
            return a == b
        if a.dims is None or b.dims is None:
            return a.dims is None and b.dims is None
        return len(a.dims) == len(b.dims) and all(
            (x is None and y is None) or dims_equal(x, y, self.facts) for x, y in zip(a.dims, b.dims))

    def region_results(self, op, f: ir.Operation, params: list[RelaxType], what: str, n: int) -> list[RelaxType]:
        """Check region function `f` with parameter types `params` (the op's operands), in the
        caller's symbols; its result types, in the caller's symbols."""
        name = ir.StringAttr(f.attributes["sym_name"]).value
        block = f.regions[0].blocks[0]
        if len(block.arguments) != len(params):
            raise PassError(op, f"'{op.name}' op: {what} @{name} takes {len(block.arguments)} arguments, "
                                f"the op passes {len(params)}")
        # A dim whose symbols are not all bare dims of some parameter cannot be bound from the
        # arguments: inside the region it is a fresh symbol (the same for equal expressions).
        binds = param_bindings(params)
        fresh: dict[Expr, Expr] = {}
        inner = []
        for t in params:
            if t.dims is None:
                inner.append(t)
                continue
            dims = []
            for d in t.dims:
                if d is not None and not d.is_const and not d.symbols() <= set(binds):
                    if d not in fresh:
                        fresh[d] = sym(f"{name}_s{len(fresh)}")
                    d = fresh[d]
                dims.append(d)
            inner.append(TensorType(tuple(dims), t.dtype))
        back = {str(v): k for k, v in fresh.items()}
        ft = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
        if self.infer:
            for a, t in zip(block.arguments, inner):
                a.set_type(t.to_mlir())
            f.attributes["function_type"] = ir.TypeAttr.get(
                ir.FunctionType.get([t.to_mlir() for t in inner], list(ft.results)))
            for key in ("relax.symbol_lower", "relax.symbol_bounds"):
                if key in self.func.attributes:
                    f.attributes[key] = self.func.attributes[key]
        for a, t in zip(block.arguments, inner):
            self.types[a] = t
        state = (self.facts, self.bound, self.func, self.returned)
        try:
            self.function(f, inner, self.facts)
        finally:
            self.facts, self.bound, self.func, self.returned = state
        self.hoist_requirements(f, {str(v): k for k, v in fresh.items()})
        results = self.signatures[name][1]
        if len(results) != n:
            raise PassError(op, f"'{op.name}' op: {what} @{name} returns {len(results)} values, expected {n}")
        out = []
        for r in results:
            if isinstance(r, TensorType) and r.dims is not None and back:
                dims = tuple(None if d is None else d.subs({k: v for k, v in back.items()}) for d in r.dims)
                r = TensorType(dims, r.dtype)
            out.append(r)
        return out


def _reason(spec) -> str:
    if spec.name == "relax.reshape":
        return "the element counts must be equal"
    if spec.name in ("relax.broadcast_to", "relax.matmul") or spec.__module__.endswith(".elementwise"):
        return "a '?' dim is not broadcast from 1 at run time"
    return "the op's kernel reads the operand at that size"


def requirement_entries(func: ir.Operation) -> list[ir.DictAttr]:
    """The function's `relax.requires` entries, checked (the attribute may come from the input):
    dictionaries of a shape-expression string `lhs`, a string `message`, and a shape-expression
    string `rhs` or an [parameter, dim] pair `rhs_dim`; a located PassError otherwise."""
    if REQUIRES not in func.attributes:
        return []
    a = func.attributes[REQUIRES]
    what = ("'func.func' op attribute 'relax.requires' must be an array of dictionaries {lhs, rhs or rhs_dim, "
            "message} (shape expression strings, an [parameter, dim] pair of integers, a string)")
    if not isinstance(a, ir.ArrayAttr):
        raise PassError(func, what)
    out = []
    for e in a:
        if not isinstance(e, ir.DictAttr) or not all(k in e and isinstance(e[k], ir.StringAttr) for k in ("lhs", "message")):
            raise PassError(func, what)
        if "rhs" in e:
            exprs = [e["lhs"], e["rhs"]]
            if not isinstance(e["rhs"], ir.StringAttr):
                raise PassError(func, what)
        elif "rhs_dim" in e and isinstance(e["rhs_dim"], ir.ArrayAttr) and len(e["rhs_dim"]) == 2 and all(
                isinstance(x, ir.IntegerAttr) for x in e["rhs_dim"]):
            exprs = [e["lhs"]]
        else:
            raise PassError(func, what)
        for x in exprs:
            try:
                parse_expr(ir.StringAttr(x).value)
            except ShapeParseError as err:
                raise PassError(func, f"'func.func' op attribute 'relax.requires': {err}") from None
        out.append(e)
    return out


def _add_requirement(func: ir.Operation, req: ir.DictAttr) -> None:
    """Record `lhs <= rhs` (symbolic; `rhs_dim` = [parameter, dim] for a '?' dim) on the function,
    for relax-lower-shapes to check at entry; once per message."""
    # (checked once by requirement_entries when the function's check began)
    have = list(ir.ArrayAttr(func.attributes[REQUIRES])) if REQUIRES in func.attributes else []
    msg = ir.StringAttr(req["message"]).value
    if any(ir.StringAttr(ir.DictAttr(a)["message"]).value == msg for a in have):
        return
    func.attributes[REQUIRES] = ir.ArrayAttr.get(have + [req])


REQUIRES = "relax.requires"


def _computes(spec) -> bool:
    """Graph ops whose legalized kernel reads its operands at their typed sizes."""
    return hasattr(spec, "legalize") or spec.name == "relax.reshape"


def _has_unknown_dims(types) -> bool:
    return any(isinstance(t, TensorType) and t.dims is not None and any(d is None for d in t.dims) for t in types)


def _is_entry_argument(v: ir.Value, func: ir.Operation) -> bool:
    return isinstance(v, ir.BlockArgument) and v.owner == func.regions[0].blocks[0]


def unknown_dim_rules(spec, info: OpInfo, results: list) -> list | None:
    """Per operand, per dim: what a "?" dim must be (see ops/common.py: an Expr, FREE, or None)."""
    hook = getattr(spec, "unknown_dims", None)
    if hook is not None:
        return hook(info, results)
    mod = spec.__module__.rsplit(".", 1)[-1]
    if mod == "elementwise" and len(results) == 1 and isinstance(results[0], TensorType):
        return [aligned_requirements(t.dims, results[0].dims) if isinstance(t, TensorType) else ()
                for t in info.operand_types]
    if mod == "reduce" and hasattr(spec, "reduced_axes"):
        d = info.tensor(0).dims
        axes = set(spec.reduced_axes(info, len(d)))
        return [tuple(FREE if j in axes else None for j in range(len(d)))]
    if hasattr(spec, "norm_axes"):  # layer_norm / rms_norm: parameters have the normalized dims
        x = info.tensor(0)
        want = tuple(x.dims[a] for a in spec.norm_axes(info, len(x.dims)))
        return [(None,) * len(x.dims)] + [aligned_requirements(t.dims, want) if isinstance(t, TensorType) else ()
                                          for t in info.operand_types[1:]]
    return None


def _check_order(block: ir.Block) -> None:
    """MLIR checks no dominance in the region of an unregistered op (relax_v.dataflow): a value
    of the block must be defined before its first use."""
    later = {r for o in block.operations for r in o.operation.results}
    for o in block.operations:
        o = o.operation
        for i, v in enumerate(o.operands):
            if v in later:
                raise PassError(o, f"'{o.name}' op operand #{i} is used before its definition in the "
                                   f"relax_v.dataflow body")
        for r in o.results:
            later.discard(r)


def check_module(module: ir.Operation, *, infer: bool) -> None:
    """Deduce every op's result types; raise PassError at the first mismatch."""
    import relax_mlir.ops  # noqa: F401

    _Checker(module, infer).run()


@dataclass(frozen=True)
class InferShapesPass(ModulePass):
    """Deduce result types op by op and fill in "?" dims; report mismatches at the op."""

    name: ClassVar[str] = "relax-infer-shapes"

    def run(self, module: ir.Operation) -> None:
        check_module(module, infer=True)


@dataclass(frozen=True)
class VerifyPass(ModulePass):
    """Check that every written relax type agrees with its deduction ("?" dims allowed)."""

    name: ClassVar[str] = "relax-verify"

    def run(self, module: ir.Operation) -> None:
        check_module(module, infer=False)

