"""`relax-lower-shapes`: symbols become `index` values, relations become run-time checks.

In each graph function, every symbol is computed once at entry: from the dim of the parameter
where it first appears whole (`relax.dim`), or, for a `relax.match_cast`-bound symbol, from the
cast value's (symbolic) dim. Every other occurrence of a symbol in the signature and every
match_cast relation becomes a `relax.assert` with a message; symbolic expressions become `arith`
on `index`. `call_tir` gets its symbolic ints and its results' dynamic dims as operands; `reshape`
its result dims. All of it sits in the function's entry prologue, so a failing check stops the
call before any kernel runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mlir import ir

from relax_mlir.dialect.spec import attr_dict
from relax_mlir.dialect.types import TensorType, view
from relax_mlir.passes import ModulePass, PassError, where
from relax_mlir.shape import Expr, parse as parse_expr
from relax_mlir.shape.expr import _CALLS
from relax_mlir.transforms.infer_shapes import (REQUIRES, check_module, function_facts, graph_functions,
                                                param_bindings, requirement_entries)


class Materializer:
    """Builds `index` arithmetic for symbolic expressions at one insertion point (cached)."""

    def __init__(self, ip: ir.InsertionPoint, loc: ir.Location):
        self.ip = ip
        self.loc = loc
        self.index = ir.IndexType.get()
        self.values: dict[str, ir.Value] = {}  # symbol -> value
        self.cache: dict[Expr, ir.Value] = {}
        self.consts: dict[int, ir.Value] = {}

    def create(self, name, operands, attrs=None, result=None) -> ir.Value:
        with self.ip, self.loc:
            op = ir.Operation.create(name, results=[result or self.index], operands=operands,
                                     attributes=attrs or {})
        return op.results[0]

    def const(self, v: int) -> ir.Value:
        if v not in self.consts:
            self.consts[v] = self.create("arith.constant", [], {"value": ir.IntegerAttr.get(self.index, v)})
        return self.consts[v]

    def binop(self, name: str, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.create(name, [a, b])

    def atom(self, a: str) -> ir.Value:
        node = _CALLS.get(a)
        if node is None:
            if a not in self.values:
                raise KeyError(a)
            return self.values[a]
        args = [self.expr(x) for x in node.args]
        op = {"floordiv": "arith.floordivsi", "mod": "arith.remsi", "min": "arith.minsi",
              "max": "arith.maxsi"}[node.kind]
        v = args[0]
        for b in args[1:]:
            v = self.binop(op, v, b)
        if node.kind == "mod":  # floor semantics for a negative dividend
            s = self.binop("arith.addi", v, args[1])
            v = self.binop("arith.remsi", s, args[1])
        return v

    def expr(self, e: Expr) -> ir.Value:
        if e in self.cache:
            return self.cache[e]
        if e.is_const:
            v = self.const(e.value)
        else:
            v = None
            for mono, coeff in e.terms:
                t = None
                for a in mono:
                    x = self.atom(a)
                    t = x if t is None else self.binop("arith.muli", t, x)
                if t is None:
                    t = self.const(coeff)
                elif coeff != 1:
                    t = self.binop("arith.muli", t, self.const(coeff))
                v = t if v is None else self.binop("arith.addi", v, t)
        self.cache[e] = v
        return v


def _func_type(f: ir.Operation) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)


def lower_function(f: ir.Operation, messages: list[str], derived: dict[str, str]) -> None:
    block = f.regions[0].blocks[0]
    params = [view(t) for t in _func_type(f).inputs]
    # The prologue goes before an anchor that is never rewritten (ops after it may be replaced).
    first = block.operations[0]
    with ir.InsertionPoint(first), f.location:
        anchor = ir.Operation.create("arith.constant", results=[ir.IndexType.get()],
                                     attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), 0)})
    m = Materializer(ir.InsertionPoint(anchor), f.location)
    # (the anchor is not the cached 0: checks go before it, and a check may compare with 0)
    names = _arg_names(f, len(params))

    def dim_of(value: ir.Value, axis: int) -> ir.Value:
        return m.create("relax.dim", [value], {"axis": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), axis)})

    in_body = []  # non-empty once the parameter checks are done

    def check(cond_a: ir.Value, cond_b: ir.Value, message: str, predicate: int = 0):
        c = m.create("arith.cmpi", [cond_a, cond_b], {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), predicate)},
                     result=ir.IntegerType.get_signless(1))
        messages.append(message)
        attrs = {"message": ir.StringAttr.get(message),
                 "code": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(messages))}
        if in_body and "relax.region" in f.attributes:
            # a check of a loop/branch body (match_cast, requirements), not of its arguments
            # (those the control-flow op's operand types guarantee): relax-to-upstream refuses it
            attrs["relax.body_check"] = ir.UnitAttr.get()
        with m.ip, m.loc:
            ir.Operation.create("relax.assert", results=[], operands=[c], attributes=attrs)

    binds = param_bindings(params)
    for s, (i, j) in binds.items():
        m.values[s] = dim_of(block.arguments[i], j)
    for s, ub in sorted(function_facts(f).upper.items()):
        if s in m.values:  # sle: the memory plan sizes storage at these bounds
            check(m.values[s], m.const(ub), f"symbol {s} exceeds its upper bound {ub} (relax.symbol_bounds)", 3)
    for i, t in enumerate(params):
        if isinstance(t, TensorType) and t.dims is None:
            raise PassError(f, f"parameter #{i} has unknown rank, which the run time does not support yet")
        if isinstance(t, TensorType):
            for j, d in enumerate(t.dims):
                if d is None or (d.is_symbol and binds.get(str(d)) == (i, j)):
                    continue
                check(dim_of(block.arguments[i], j), m.expr(d),
                      f"{names[i]} dim {j} must be {d}" + _bound_by(d, binds, names))

    in_body.append(True)

    def walk(blk: ir.Block):
        for op in list(blk.operations):
            op = op.operation
            for r in op.regions:
                for b in r.blocks:
                    walk(b)
            if op.name == "relax.match_cast":
                src, pat = view(op.operands[0].type), view(op.results[0].type)
                for j, (a, b) in enumerate(zip(src.dims, pat.dims)):
                    if b is None:
                        continue
                    actual = m.expr(a) if a is not None else dim_of(op.operands[0], j)
                    if b.is_symbol and str(b) not in m.values:
                        m.values[str(b)] = actual
                        if a is not None:
                            derived[str(b)] = str(a)
                        continue
                    if a is not None and a == b:
                        continue
                    missing = [s for s in b.symbols() if s not in m.values]
                    if missing:
                        raise PassError(op, f"'relax.match_cast' op cannot compute symbol '{missing[0]}' of {b}")
                    check(actual, m.expr(b), _match_cast_message(op, j, a, b, block, names))
            elif op.name == "relax_v.call_tir":
                _lower_call_tir(op, m)
            elif op.name == "relax.reshape" and len(op.operands) == 1:
                t = view(op.results[0].type)
                dims = [m.expr(d) for d in t.dims if not d.is_const]
                with ir.InsertionPoint(op), op.location:
                    new = ir.Operation.create("relax.reshape", results=[op.results[0].type],
                                              operands=[op.operands[0]] + dims,
                                              attributes=attr_dict(op))
                op.results[0].replace_all_uses_with(new.results[0])
                op.erase()

    try:
        walk(block)
        # Requirements recorded by relax-infer-shapes (lhs <= rhs), now that every symbol has a value.
        if REQUIRES in f.attributes:
            relations = []
            for req in requirement_entries(f):
                lhs = m.expr(parse_expr(ir.StringAttr(req["lhs"]).value))
                if "rhs_dim" in req:
                    i, j = (ir.IntegerAttr(a).value for a in ir.ArrayAttr(req["rhs_dim"]))
                    pt = view(block.arguments[i].type) if 0 <= i < len(block.arguments) else None
                    if not (isinstance(pt, TensorType) and pt.dims is not None and 0 <= j < len(pt.dims)):
                        raise PassError(f, f"'func.func' op attribute 'relax.requires': rhs_dim [{i}, {j}] names no "
                                           f"dim of a parameter")
                    rhs = dim_of(block.arguments[i], j)
                else:
                    rhs = m.expr(parse_expr(ir.StringAttr(req["rhs"]).value))
                check(lhs, rhs, ir.StringAttr(req["message"]).value, 3)  # sle
                if "rhs" in req:
                    relations.append(ir.DictAttr.get({k: req[k] for k in ("lhs", "rhs", "message")}))
            del f.attributes[REQUIRES]
            if relations:  # for the runtime: it allocates the results before this prologue runs
                f.attributes[ENTRY_RELATIONS] = ir.ArrayAttr.get(relations)
    except KeyError as e:
        raise PassError(f, f"symbol '{e.args[0]}' has no run-time value in this function") from None


def _lower_call_tir(op: ir.Operation, m: Materializer) -> None:
    if "lowered" in op.attributes:
        return
    syms = []
    if "sym_args" in op.attributes:
        syms = [parse_expr(ir.StringAttr(a).value) for a in ir.ArrayAttr(op.attributes["sym_args"])]
    out_dims = []
    for r in op.results:
        t = view(r.type)
        out_dims += [d for d in t.dims if not d.is_const]
    sv = [m.expr(e) for e in syms]
    dv = [m.expr(e) for e in out_dims]
    attrs = {k: v for k, v in attr_dict(op).items() if k != "sym_args"}
    i64 = ir.IntegerType.get_signless(64)
    attrs["lowered"] = ir.ArrayAttr.get([ir.IntegerAttr.get(i64, n) for n in (len(op.operands), len(sv), len(dv))])
    if syms:
        attrs["sym_args"] = op.attributes["sym_args"]
    with ir.InsertionPoint(op), op.location:
        new = ir.Operation.create("relax_v.call_tir", results=[r.type for r in op.results],
                                  operands=list(op.operands) + sv + dv, attributes=attrs)
    for a, b in zip(op.results, new.results):
        a.replace_all_uses_with(b)
    op.erase()


def _arg_names(f: ir.Operation, n: int) -> list[str]:
    names = [f"argument #{i}" for i in range(n)]
    if "arg_attrs" in f.attributes:
        for i, d in enumerate(ir.ArrayAttr(f.attributes["arg_attrs"])):
            d = ir.DictAttr(d)
            if "relax.name" in d:
                names[i] = f"argument '{ir.StringAttr(d['relax.name']).value}'"
    return names


def _bound_by(d: Expr, binds, names) -> str:
    parts = [f"{s} from {names[binds[s][0]]} dim {binds[s][1]}" for s in sorted(d.symbols()) if s in binds]
    return f" ({', '.join(parts)})" if parts else ""


def _match_cast_message(op: ir.Operation, j: int, a, b: Expr, entry: ir.Block, names: list[str]) -> str:
    if "relax.origin" not in op.attributes:
        shown = a if a is not None else "?"
        if str(shown).startswith("arg") and "_dim" in str(shown):  # the importer's name of a plain argument dim
            shown = "the argument's size"
        return f"match_cast at {where(op)}: dim {j} is {shown}, the pattern requires {b}"
    # Inserted by relax-infer-shapes: an op's deduction needs this "?" dim to be b.
    origin = ir.StringAttr(op.attributes["relax.origin"]).value
    src = op.operands[0]
    arg = ""
    if isinstance(src, ir.BlockArgument) and src.owner == entry:
        arg = f" = {names[src.arg_number]}"
    reason = ir.StringAttr(op.attributes["relax.reason"]).value if "relax.reason" in op.attributes else ""
    return (f"{origin}{arg} at {where(op)}: dim {j} must be {b} (it is '?' in the signature"
            + (f"; {reason}" if reason else "") + ")")


# The function's symbolic relations lhs <= rhs (its relax.requires without '?' dims), kept for the
# runtime's signature (runtime/executable.py Signature.requires).
ENTRY_RELATIONS = "relax.entry_relations"


@dataclass(frozen=True)
class LowerShapesPass(ModulePass):
    """Compute symbols as index values from argument dims; emit run-time shape checks."""

    name: ClassVar[str] = "relax-lower-shapes"

    def run(self, module: ir.Operation) -> None:
        check_module(module, infer=True)
        for f in graph_functions(module):
            if not f.regions[0].blocks or "relax.shapes_lowered" in f.attributes:
                continue
            messages: list[str] = []
            derived: dict[str, str] = {}
            lower_function(f, messages, derived)
            f.attributes["relax.derived_symbols"] = ir.DictAttr.get(
                {k: ir.StringAttr.get(v) for k, v in derived.items()})
            f.attributes["relax.shapes_lowered"] = ir.UnitAttr.get()
            f.attributes["relax.check_messages"] = ir.ArrayAttr.get([ir.StringAttr.get(s) for s in messages])


PASSES = (LowerShapesPass,)
