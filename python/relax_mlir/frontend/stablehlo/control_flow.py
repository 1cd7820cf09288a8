"""Control flow: while / if / case (ops/control_flow.py).

Each region of a StableHLO while / if / case becomes a private graph function marked
`relax.region`: its parameters are the region's block arguments (the carried values of a while),
then the outer values the region uses (captures). A capture that the importer knows symbolically
(a small integer shape computation, such as jax's dimension-variable argument) is not passed: it
is re-materialized inside the function where used. Parameter types are left unknown ("?") here;
relax-infer-shapes gives each region function the types of its op's operands. A complex value
(`CVal`, complex.py) is carried, captured and returned as its two parts.
"""
from __future__ import annotations

from mlir import ir

from relax_mlir.frontend.stablehlo.common import CVal, Val, _dtype_attr, _merge_dims, _qtype, complex_part_type
from relax_mlir.frontend.stablehlo.errors import UnsupportedOpError
from relax_mlir.frontend.stablehlo.importer import Importer
from relax_mlir.frontend.stablehlo.registry import register_converters
from relax_mlir.shape import const, sym


def _flat(vals) -> list[Val]:
    """Values with each complex one as its two parts."""
    out = []
    for v in vals:
        out += [v.re, v.im] if isinstance(v, CVal) else [v]
    return out


def _unflat(results, like: list) -> list:
    """Values shaped as `like` (complex where `like` is) from the flat MLIR `results`."""
    it = iter(results)
    return [CVal(Val(next(it), v.re.dtype, v.dims), Val(next(it), v.im.dtype, v.dims)) if isinstance(v, CVal)
            else Val(next(it), v.dtype, v.dims) for v in like]


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


class _Witness:
    """The environment key of a value made only to bind symbol `name` in region functions."""

    def __init__(self, name: str):
        self.name = name


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
        else:
            # No value of this function has the symbol as a whole dim (jax's threefry inside a
            # called function sees only `3*b`-long keys): make one, arange(s), outside the region.
            w = im.emit("relax.arange", [], 1, "i32", {"start": const(0), "end": sym(s), "dtype": _dtype_attr("i32")},
                        dims=[sym(s)])
            key = _Witness(s)
            im.env[key] = w
            passed.append(key)
            vals.append(w)
            bound.add(s)
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
    types = [_qtype(len(v.dims), v.dtype) for v in _flat(params)]
    loc = im.loc
    with ir.InsertionPoint(im.relax_module.body):
        f = ir.Operation.create("func.func", regions=1, loc=loc, attributes={
            "sym_name": ir.StringAttr.get(name), "sym_visibility": ir.StringAttr.get("private"),
            "relax.region": ir.UnitAttr.get(),
            "function_type": ir.TypeAttr.get(ir.FunctionType.get(types, []))})
    fblock = f.regions[0].blocks.append(*types, arg_locs=[loc] * len(types))
    # fresh Vals per region: materializing one emits its op in this region's function
    env = {k: Val(None, v.dtype, v.dims, list(v.known)) for k, v in remat.items()}
    for i, inner in enumerate(_unflat(fblock.arguments, params)):  # a carried value changes each iteration
        if i < n_block_args:
            env[block.arguments[i]] = inner
        else:
            env[passed[i - n_block_args]] = inner
    with ir.InsertionPoint(fblock):
        outs, ret_loc = im.run_block(block, env)
        im.loc = ret_loc
        rets = [im.use(o) for o in _flat(outs)]
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
    carried = [CVal(Val(None, v.re.dtype, v.dims), Val(None, v.im.dtype, v.dims)) if isinstance(v, CVal)
               else Val(None, v.dtype, v.dims) for v in ins]
    passed, cap_vals, remat = _cf_captures(im, [cond_r, body_r], carried)
    params = carried + cap_vals
    prefix = _cf_name(im, "while")
    cond, _ = _cf_outline(im, f"{prefix}_cond", cond_r, params, passed, remat, n)
    body, outs = _cf_outline(im, f"{prefix}_body", body_r, params, passed, remat, n)
    if len(outs) != n:
        raise UnsupportedOpError("stablehlo.while", str(op.location), f"the body returns {len(outs)} values for {n} carried")
    flat = _flat(ins)
    operands = [im.use(v) for v in flat] + [im.use(v) for v in _flat(cap_vals)]
    w = ir.Operation.create("relax_v.while", results=[_qtype(len(v.dims), v.dtype) for v in flat], operands=operands,
                            attributes={"cond": ir.FlatSymbolRefAttr.get(cond), "body": ir.FlatSymbolRefAttr.get(body),
                                        "carried": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(flat))},
                            loc=im.loc)
    return _unflat(w.results, ins)


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
    like = []
    for i, r in enumerate(op.results):
        d, dt = im.ttype(r.type)
        d = _merge_dims(d, _cf_result_dims(outs, i, len(d)))
        part = complex_part_type(r.type)
        like.append(CVal(Val(None, part, d), Val(None, part, d)) if part else Val(None, dt, d))
    operands = [im.use(selector)] + [im.use(v) for v in _flat(cap_vals)]
    c = ir.Operation.create(opname, results=[_qtype(len(v.dims), v.dtype) for v in _flat(like)], operands=operands,
                            attributes=attrs_of(names), loc=im.loc)
    return _unflat(c.results, like)


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


CONVERTERS = register_converters({
    "stablehlo.while": _while,
    "stablehlo.case": _case,
    "stablehlo.if": _if,
})
