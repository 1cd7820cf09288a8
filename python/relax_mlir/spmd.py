"""SPMD programs: import a sharded JAX program as its per-device relax function, cut it at its
collectives, compile the pieces once, and run them on N MPI ranks (runtime/mpi.py).

    mod = from_jax_spmd(jax.shard_map(f, mesh=mesh, in_specs=..., out_specs=...), *specs)
    prog = compile_spmd(mod)                  # the same on every rank
    y = prog.run_global(x, w1, w2)            # under `mpiexec -n 2`: full arrays in, full result out
    y_local = prog(x_local, w1_local, ...)    # or each rank's local shards

Design. The importer (frontend/stablehlo/sharding.py) builds the per-device program: arguments
are local shards with symbolic local dims (a `2*k` dim split 2 ways is `k`), a shard_map body's
collectives are relax collective ops (ops/collective.py). `split_collectives` cuts @main at every
collective into segment functions `main__s0`, `main__s1`, ...: each takes @main's arguments (they
bind the symbols) and the values it needs from earlier segments, and returns the values later
steps need. The segments compile like any relax function (one compile serves every value of the
symbols); the plan (a JSON-able list of segment and collective steps) is run by
`runtime.mpi.SpmdProgram`, which calls the segments and performs each collective through MPI
(mpi4py over the MPICH ABI) on the numpy buffers in between.
"""
from __future__ import annotations

from typing import Any

from mlir import ir

import relax_mlir
from relax_mlir.core.module import Module
from relax_mlir.frontend.jax import _bounds, _dim_names, _is_var, _relations, _unused_args
from relax_mlir.frontend.stablehlo import import_stablehlo
from relax_mlir.ops.collective import COLLECTIVES
from relax_mlir.shape import parse

__all__ = ["from_jax_spmd", "import_exported_spmd", "split_collectives", "compile_spmd"]


def import_exported_spmd(exported) -> Module:
    """A sharded `jax.export.Exported` -> the per-device relax module (with its mesh and shardings)."""

    names = _dim_names(exported.in_avals)
    dim_vars = set()
    for ns in names:
        for n in ns:
            if n is None:
                continue
            if _is_var(n):
                dim_vars.add(n)
            else:
                dim_vars |= set(parse(n).symbols())
    upper, lower = _bounds(exported.in_avals)
    return import_stablehlo(exported.mlir_module(), names, unused_args=_unused_args(exported, names),
                            dim_vars=dim_vars, symbol_bounds=upper, symbol_lower=lower,
                            symbol_relations=_relations(exported.in_avals), spmd=True)


def from_jax_spmd(fn, *arg_specs) -> Module:
    """Export a sharded `fn` (jax.shard_map, under jax.jit) for `arg_specs` (ShapeDtypeStructs with
    their `sharding`, symbolic dims allowed) -> the per-device relax module."""
    import jax

    if not hasattr(fn, "trace"):
        fn = jax.jit(fn)
    return import_exported_spmd(jax.export.export(fn)(*arg_specs))


def _sym_name(f) -> str:
    return ir.StringAttr(f.attributes["sym_name"]).value


def _shardings(attr) -> list[list[list[str]]]:
    return [[[ir.StringAttr(a).value for a in ir.ArrayAttr(d)] for d in ir.ArrayAttr(v)] for v in ir.ArrayAttr(attr)]


def _attr_value(a: ir.Attribute) -> Any:
    if isinstance(a, ir.IntegerAttr):
        return a.value
    if isinstance(a, ir.StringAttr):
        return a.value
    if isinstance(a, ir.ArrayAttr):
        return [_attr_value(x) for x in a]
    raise TypeError(f"unexpected collective attribute {a}")


def split_collectives(module: Module) -> dict:
    """Cut @main at its collectives (in place): @main becomes segment functions main__s<i>; returns
    the plan {"mesh_axes", "mesh_shape", "arg_shardings", "result_shardings", "n_args", "steps",
    "results"} that runtime.mpi.SpmdProgram runs."""
    with module.session.ctx:
        return _split(module.op)


def _split(mop) -> dict:
    body = mop.regions[0].blocks[0]
    main = None
    for f in body.operations:
        if f.operation.name == "func.func" and _sym_name(f) == "main":
            main = f.operation
    if main is None or "relax.mesh_axes" not in main.attributes:
        raise ValueError("split_collectives needs the per-device @main of an SPMD import (relax_mlir.spmd.from_jax_spmd)")
    for f in body.operations:
        if f.operation != main and f.operation.name == "func.func":
            for o in f.regions[0].blocks[0].operations:
                if o.operation.name in COLLECTIVES:
                    raise ValueError(f"{o.location}: a collective ('{o.operation.name}') inside a loop or conditional "
                                     "is not supported: the host runs collectives between the program's segments")
    plan = {"mesh_axes": [ir.StringAttr(a).value for a in main.attributes["relax.mesh_axes"]],
            "mesh_shape": [ir.IntegerAttr(a).value for a in main.attributes["relax.mesh_shape"]],
            "arg_shardings": _shardings(main.attributes["relax.arg_shardings"]),
            "result_shardings": _shardings(main.attributes["relax.result_shardings"]),
            "results_replicated": [ir.IntegerAttr(a).value for a in main.attributes["relax.results_replicated"]]
            if "relax.results_replicated" in main.attributes else [],
            "global_names": [[ir.StringAttr(d).value for d in ir.ArrayAttr(a)]
                             for a in main.attributes["relax.arg_global_dims"]]}
    block = main.regions[0].blocks[0]
    args = list(block.arguments)
    plan["n_args"] = len(args)
    ids: dict = {}

    def vid(v: ir.Value) -> str:
        key = v
        if key not in ids:
            ids[key] = f"v{len(ids)}"
        return ids[key]

    for i, a in enumerate(args):
        ids[a] = f"a{i}"
    ops = [o.operation for o in block.operations]
    ret = ops[-1]
    # segments: runs of non-collective ops between collectives
    groups: list[list[ir.Operation]] = [[]]
    cuts: list[ir.Operation] = []
    for o in ops[:-1]:
        if o.name in COLLECTIVES:
            cuts.append(o)
            groups.append([])
        else:
            groups[-1].append(o)
    # which values each later step uses
    later_uses: list[set] = []  # later_uses[s]: values used by anything after segment s
    uses_after: set = {v for v in ret.operands}
    for s in range(len(groups) - 1, -1, -1):
        later_uses.append(set(uses_after))
        for o in groups[s]:
            uses_after |= set(o.operands)
        if s > 0:
            uses_after |= set(cuts[s - 1].operands)
    later_uses.reverse()
    lower = main.attributes["relax.symbol_lower"] if "relax.symbol_lower" in main.attributes else None
    bounds = main.attributes["relax.symbol_bounds"] if "relax.symbol_bounds" in main.attributes else None
    steps = []
    with ir.InsertionPoint(body), main.location:
        for s, seg in enumerate(groups):
            if seg:
                defined = {r for o in seg for r in o.results}
                needed: list[ir.Value] = []
                for o in seg:
                    for v in o.operands:
                        if v not in defined and v not in needed and not any(v == a for a in args):
                            needed.append(v)
                outs = [r for o in seg for r in o.results if r in later_uses[s]]
                in_types = [a.type for a in args] + [v.type for v in needed]
                name = f"main__s{s}"
                f = ir.Operation.create("func.func", regions=1, attributes={
                    "sym_name": ir.StringAttr.get(name),
                    "function_type": ir.TypeAttr.get(ir.FunctionType.get(in_types, [v.type for v in outs]))})
                if lower is not None:
                    f.attributes["relax.symbol_lower"] = lower
                if bounds is not None:
                    f.attributes["relax.symbol_bounds"] = bounds
                fb = f.regions[0].blocks.append(*in_types, arg_locs=[main.location] * len(in_types))
                mapping = {a: fa for a, fa in zip(args, fb.arguments)}
                for v, fa in zip(needed, list(fb.arguments)[len(args):]):
                    mapping[v] = fa
                with ir.InsertionPoint(fb):
                    for o in seg:
                        new = o.clone()
                        for k, v in enumerate(o.operands):
                            if v in mapping:
                                new.operands[k] = mapping[v]
                        for r, nr in zip(o.results, new.results):
                            mapping[r] = nr
                    ir.Operation.create("func.return", operands=[mapping[v] for v in outs])
                steps.append({"kind": "segment", "function": name, "in": [vid(v) for v in needed],
                              "out": [vid(v) for v in outs]})
            if s < len(cuts):
                c = cuts[s]
                attrs = {n: _attr_value(c.attributes[n]) for n in
                         ("groups", "group_size", "reduce", "dim", "split_dim", "concat_dim", "pairs")
                         if n in c.attributes}
                steps.append({"kind": "collective", "op": c.name.split(".", 1)[1], "attrs": attrs,
                              "in": [vid(c.operands[0])], "out": [vid(c.results[0])]})
    plan["steps"] = steps
    plan["results"] = [vid(v) for v in ret.operands]
    main.erase()
    return plan


def compile_spmd(module: Module, target: str = "cpu", comm=None, **options):
    """Split `module` (a per-device SPMD import) at its collectives, compile it once, and return a
    `runtime.mpi.SpmdProgram` for this rank (`comm`: an mpi4py communicator, default COMM_WORLD)."""
    from relax_mlir.runtime.mpi import SpmdProgram  # (mpi4py: MPI starts when it is imported)

    plan = split_collectives(module)
    if not any(s["kind"] == "segment" for s in plan["steps"]):
        exe = None
    else:
        exe = relax_mlir.compile(module, target, **options)
    return SpmdProgram(exe, plan, comm)
