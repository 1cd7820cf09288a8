"""Sharding annotations and SPMD import.

Single-device import (the default): sdy/GSPMD constraints pass their operands through (a sharding
never changes a program's values, and relax compiles for one device); shard_map's manual
computations are refused, since their bodies hold per-device shapes and collectives.

SPMD import (`import_stablehlo(..., spmd=True)`, `relax_mlir.spmd`): the relax function built is
the per-device program. `SpmdImport` reads the mesh (`sdy.mesh`) and @main's argument and result
`sdy.sharding`s; every argument becomes its local shard (a dim of size `2*k` split over a mesh
axis of size 2 is `k`; a dim not provably divisible is refused at import; the runtime checks the
global dims). Outside a manual computation a value is a *global view*: its dims are global (so
jax's shape arithmetic stays right) and its relax value is the local shard, with its sharding
tracked; inside `sdy.manual_computation` the body's arguments are the local shards with local
dims, and StableHLO collectives become relax collective ops (ops/collective.py). Data ops on a
sharded global view are partitioned by `SpmdImport.partition` for the common cases: elementwise
ops whose sharded operands agree, dot_general (sharded batch / free / contracting dims, an
all_reduce after a split contraction), reductions (an all_reduce over split dims), transposes
and broadcasts. Any other op runs replicated on all-gathered operands, with a logged warning;
what cannot be gathered is refused with a located error. No op ever computes on a local shard
as if it were the whole array.
"""
from __future__ import annotations

import logging

from mlir import ir

from relax_mlir.frontend.stablehlo.checks import _REFUSED_OPS
from relax_mlir.dialect.types import view
from relax_mlir.frontend.stablehlo.common import Val, _ints, _splat_value, _string
from relax_mlir.frontend.stablehlo.errors import UnsupportedOpError
from relax_mlir.frontend.stablehlo.manipulate import _broadcast_in_dim_impl
from relax_mlir.frontend.stablehlo.reduce import _is_identity
from relax_mlir.frontend.stablehlo import registry
from relax_mlir.frontend.stablehlo.registry import register_converters, register_custom_calls
from relax_mlir.shape import const, floordiv, parse, sym

_log = logging.getLogger("relax_mlir.frontend")


def _identity(im, op, ins):
    """An annotation that passes its operands through (sharding constraints, placement)."""
    if getattr(im, "spmd", None) is not None and op.operation.name == "sdy.sharding_constraint":
        return im.spmd.constraint(im, op, ins)
    return list(ins)


def _gspmd_sharding(im, op, ins):
    """with_sharding_constraint in GSPMD form (`@Sharding`, an `mhlo.sharding` string): passed
    through for one device; in an SPMD import only a replicated one (the string is not parsed)."""
    if getattr(im, "spmd", None) is not None and not _replicated_mhlo(op.attributes):
        raise UnsupportedOpError(op.operation.name, str(op.location), "a GSPMD (mhlo.sharding) sharding "
                                 "constraint in an SPMD import: only Shardy (sdy) shardings are read (jax's default)")
    return list(ins)


def _replicated_mhlo(attrs) -> bool:
    return "mhlo.sharding" not in attrs or _string(attrs["mhlo.sharding"]) in ("{replicated}", "{maximal device=0}")


def _refuse_manual(im, op, ins):
    if getattr(im, "spmd", None) is not None:
        return im.spmd.manual_computation(im, op, ins)
    raise UnsupportedOpError(op.operation.name, str(op.location), _REFUSED_OPS[op.operation.name])


_SHARD_MAP_WHY = ("shard_map's manual sharding (per-device shapes) is not supported: relax compiles for one "
                  "device; call the function without shard_map")


# --- reading sdy attributes ---------------------------------------------------------------------

def _sdy():
    from jaxlib.mlir.dialects import sdy

    return sdy


def read_mesh(module) -> dict[str, dict]:
    """mesh symbol -> {"axes": [(name, size)], "devices": [device ids] or None} of every `sdy.mesh`."""
    sdy = _sdy()
    out = {}
    for op in module.body.operations:
        if op.operation.name != "sdy.mesh":
            continue
        mesh = sdy.MeshAttr(op.attributes["mesh"])
        axes = [(sdy.MeshAxisAttr(a).name, sdy.MeshAxisAttr(a).size) for a in mesh.axes]
        devices = [int(d) for d in mesh.device_ids] or None
        out[_string(op.attributes["sym_name"])] = {"axes": axes, "devices": devices}
    return out


def read_sharding(attr, where: str) -> list[list[str]]:
    """Per dim, the mesh axes it is split over (major first), of an `#sdy.sharding`."""
    sdy = _sdy()
    t = sdy.TensorShardingAttr(attr)
    dims = []
    for d in t.dimension_shardings:
        axes = []
        for a in sdy.DimensionShardingAttr(d).axes:
            ref = sdy.AxisRefAttr(a)
            if ref.sub_axis_info is not None:
                raise UnsupportedOpError("sdy.sharding", where, f"sub-axis sharding of axis '{ref.name}' is not supported")
            axes.append(ref.name)
        dims.append(axes)
    if list(t.unreduced_axes):
        raise UnsupportedOpError("sdy.sharding", where, "unreduced axes are not supported")
    return dims


def _attr_dict_list(func, name: str):
    a = func.attributes[name] if name in func.attributes else None
    return list(a) if a is not None else []


# --- the SPMD import state ----------------------------------------------------------------------

class SpmdImport:
    """The mesh, the argument/result shardings, and the sharding of every global-view value."""

    def __init__(self, module):
        self.meshes = read_mesh(module)
        if len(self.meshes) > 1:
            raise UnsupportedOpError("sdy.mesh", "", f"{len(self.meshes)} meshes: one mesh per program is supported")
        if not self.meshes:
            raise UnsupportedOpError("sdy.mesh", "", "an SPMD import needs a module with an sdy.mesh "
                                                     "(export with jax NamedSharding or shard_map)")
        (self.mesh_name, mesh), = self.meshes.items()
        self.axes = dict(mesh["axes"])
        self.axis_order = [a for a, _ in mesh["axes"]]
        self.size = 1
        for _, n in mesh["axes"]:
            self.size *= n
        if mesh["devices"] is not None and mesh["devices"] != list(range(self.size)):
            raise UnsupportedOpError("sdy.mesh", "", f"explicit device order {mesh['devices']} is not supported")
        main = None
        for op in module.body.operations:
            if op.operation.name == "func.func" and _string(op.attributes["sym_name"]) == "main":
                main = op
        self.main = main
        for key in ("arg_attrs", "res_attrs"):
            for i, a in enumerate(_attr_dict_list(main, key)):
                if "sdy.sharding" not in a and not _replicated_mhlo(a):
                    raise UnsupportedOpError("func.func", str(main.location), f"@main {key[:3]} #{i} has a GSPMD "
                                             "mhlo.sharding: only Shardy (sdy) shardings are read in an SPMD import")
        self.arg_shardings: list[list[list[str]] | None] = []
        for i, a in enumerate(_attr_dict_list(main, "arg_attrs")):
            self.arg_shardings.append(read_sharding(a["sdy.sharding"], f"@main argument #{i}")
                                      if "sdy.sharding" in a else None)
        # per result: the declared sharding, or None where @main declares none (jax: unspecified)
        self.result_shardings: list[list[list[str]] | None] = []
        for i, a in enumerate(_attr_dict_list(main, "res_attrs")):
            self.result_shardings.append(read_sharding(a["sdy.sharding"], f"@main result #{i}")
                                         if "sdy.sharding" in a else None)
        self.of: dict[int, list[list[str]]] = {}  # id(Val) -> sharding of a global-view value
        self.keep: list[Val] = []  # the Vals whose ids `of` holds stay alive
        self.collectives = 0
        self.whole: dict[tuple, Val] = {}  # (id(Val), block) of a sharded value -> its all-gathered whole
        self.global_dims: dict[int, list] = {}  # position -> global dims of a sharded argument
        self.sliced_results: list[int] = []  # results computed replicated but declared sharded
        self.gathered = 0  # ops computed replicated on gathered operands (no sharding rule)
        self.bcast: dict[int, tuple] = {}  # id(Val) of a replicated broadcast -> (source, dims, result)

    def reindex(self, unused: dict, total: int) -> None:
        """Argument shardings by relax parameter position (jax.export drops unused arguments from
        @main; the relax function still takes them, replicated)."""
        kept = iter(self.arg_shardings)
        self.arg_shardings = [None if i in unused else next(kept, None) for i in range(total)]

    # -- helpers --
    def ways(self, axes: list[str]) -> int:
        n = 1
        for a in axes:
            if a not in self.axes:
                raise ValueError(f"unknown mesh axis '{a}'")
            n *= self.axes[a]
        return n

    def sharded(self, s) -> bool:
        return s is not None and any(s)

    def track(self, v: Val, s) -> Val:
        if self.sharded(s):
            self.of[id(v)] = s
            self.keep.append(v)
        return v

    def sharding(self, v: Val):
        return self.of.get(id(v))

    def local(self, dims, s, where: str):
        out = []
        for j, d in enumerate(dims):
            n = self.ways(s[j]) if s and j < len(s) else 1
            if n == 1:
                out.append(d)
                continue
            if d is None or not all(c % n == 0 for _, c in d.terms):
                raise UnsupportedOpError("sdy.sharding", where, f"dim {j} ({d}) is split {n} ways over "
                                         f"{s[j]} but is not provably divisible by {n}")
            out.append(floordiv(d, const(n)))
        return out

    def globalize(self, dims, s):
        return [d * self.ways(s[j]) if s and j < len(s) and s[j] and d is not None else d
                for j, d in enumerate(dims)]

    # -- @main's arguments: local shards --
    def localize_arg(self, im, i: int, dims, where: str):
        """The local dims of argument i, and the dim names (im.dim_names[i]) rewritten to match."""
        s = self.arg_shardings[i] if i < len(self.arg_shardings) else None
        if not self.sharded(s):
            return dims
        names = im.dim_names[i] if i < len(im.dim_names) else None
        new_dims, new_names = [], list(names or [None] * len(dims))
        for j, d in enumerate(dims):
            n = self.ways(s[j]) if j < len(s) else 1
            if n == 1:
                new_dims.append(d)
                continue
            if d is not None:
                if d.value % n:
                    raise UnsupportedOpError("func.func", where, f"argument #{i} dim {j} of size {d.value} is split "
                                             f"{n} ways over {s[j]}: not divisible")
                new_dims.append(const(d.value // n))
                continue
            nm = new_names[j] if j < len(new_names) else None
            e = parse(nm) if nm else None
            if e is not None and all(c % n == 0 for _, c in e.terms):
                new_names[j] = str(floordiv(e, const(n)))  # 2*k over 2 ways: k
            elif e is None or e.is_symbol:
                # b (or an unnamed dim) over n ways: the local size is its own symbol b_x, and the
                # global dim n*b_x (the runtime checks b's divisibility before any rank runs)
                local = f"{nm or f'arg{i}_dim{j}'}_{'_'.join(s[j])}"
                new_names[j] = local
                im.dim_vars.add(local)
            else:
                raise UnsupportedOpError("func.func", where, f"argument #{i} dim {j} ({nm}) is split {n} ways over "
                                         f"{s[j]}: an expression not provably divisible by {n} (give it as {n}*k)")
            new_dims.append(None)
        while len(im.dim_names) <= i:
            im.dim_names.append(None)
        im.dim_names[i] = new_names
        return new_dims

    def global_args(self, args: list[Val], positions: list[int]) -> list[Val]:
        """The body sees each argument as a global view: its global dims, its local value."""
        out = []
        for i, v in zip(positions, args):
            s = self.arg_shardings[i] if i < len(self.arg_shardings) else None
            if not self.sharded(s):
                out.append(v)
                continue
            out.append(self.track(Val(v.value, v.dtype, self.globalize(v.dims, s), v.known), s))
            self.global_dims[i] = out[-1].dims
        return out

    def check_results(self, im, results: list[Val], where: str) -> list[Val]:
        """The results as declared: a sharded result declared replicated is all-gathered, a
        replicated one declared sharded is cut by the host; an undeclared one stays as computed."""
        out = []
        while len(self.result_shardings) < len(results):
            self.result_shardings.append(None)
        for r, v in enumerate(results):
            want = self.result_shardings[r]
            have = self.sharding(v)
            if want is None:  # no sharding declared (jax: unspecified): the result stays as computed
                self.result_shardings[r] = want = have
            if not self.sharded(want) and self.sharded(have) and all(len(a) <= 1 for a in have):
                v = self.gather(im, v, have)
                have = None
            if self.sharded(want) and not self.sharded(have):
                self.sliced_results.append(r)  # computed whole on every rank: the host keeps this rank's block
                have = want
            out.append(v)
            if _norm(want) != _norm(have):
                raise UnsupportedOpError("func.return", where, f"result #{r} is sharded {_fmt(have)} in the "
                                         f"partitioned program but the function declares {_fmt(want)}: "
                                         "resharding is not supported")
        return out

    # -- ops --
    def partition(self, im, op, ins):
        """The per-device conversion of a data op outside a manual computation whose operands are
        sharded global views (sharding propagation for the common cases), or None to convert it
        as usual (no sharded operand). An op without a rule runs replicated on gathered operands
        (`_replicated`); nothing is computed on a local shard as if it were the whole array."""

        name = op.operation.name
        if name in _VIEW_OK:
            return None
        sh = [self.sharding(v) for v in ins]
        if not any(self.sharded(s) for s in sh):
            if name in _BROADCASTS and ins[0].known is None:  # remember how a replicated broadcast was built
                outs = registry.CONVERTERS[name](im, op, ins)
                if isinstance(outs, Val) and outs.value is not None:
                    self.bcast[id(outs)] = (ins[0], _ints(op.attributes["broadcast_dimensions"]), outs)
                    self.keep.append(outs)
                return outs
            return None
        where = str(op.location)
        if name in _ELEMENTWISE:
            return self._elementwise(im, op, ins, sh, where)
        if name == "stablehlo.dot_general":
            return self._dot(im, op, ins, sh, where)
        if name == "stablehlo.reduce" and len(op.results) == 1:
            return self._reduce(im, op, ins, sh, where)
        if name in _BROADCASTS:
            return self._broadcast(im, op, ins, sh, where)
        if name == "stablehlo.transpose":
            perm = _ints(op.attributes["permutation"])
            s = [list(sh[0][p]) if p < len(sh[0]) else [] for p in perm]
            return self._convert(im, op, ins, sh, [s], where)
        return self._replicated(im, op, ins, sh, where, f"no sharding rule for '{name}'")

    def _replicated(self, im, op, ins, sh, where, why: str):
        """The fallback: all-gather every sharded operand and compute the op replicated (every rank
        the whole of it; correct, and logged since it costs communication and memory). Refused
        where an operand cannot be gathered (a dim split over several axes)."""

        name = op.operation.name
        for k, s in enumerate(sh):
            if self.sharded(s) and not all(len(d) <= 1 for d in s):
                raise UnsupportedOpError(name, where, f"{why}, and operand #{k} (sharded {_fmt(s)} over several axes "
                                         "in one dim) cannot be gathered: not supported")
        _log.warning("relax-mlir: %s at %s: %s; its sharded operands are all-gathered and it is computed "
                     "replicated", name, where, why)
        self.gathered += 1
        gathered = [self.gather_once(im, v, s) if self.sharded(s) else v for v, s in zip(ins, sh)]
        return registry.CONVERTERS[name](im, op, gathered)

    def gather_once(self, im, v: Val, s) -> Val:
        """`gather`, once per value and block being built (a region body gathers its own copy)."""
        key = (id(v), ir.InsertionPoint.current.block)
        g = self.whole.get(key)
        if g is None:
            g = self.whole[key] = self.gather(im, v, s)
            self.keep.append(v)
        return g

    # -- propagation rules --
    def _local_in(self, v: Val, s) -> Val:
        if not self.sharded(s):
            return v
        return Val(v.value, v.dtype, self.local(v.dims, s, ""), None)

    def _convert(self, im, op, ins, sh, out_sh, where, local_ins=None):
        """Run the op's converter on the local operands with the local result types."""

        local_ins = local_ins or [self._local_in(v, s) for v, s in zip(ins, sh)]
        outs = registry.CONVERTERS[op.operation.name](im, _LocalOp(op, self, out_sh), local_ins)
        outs = [outs] if isinstance(outs, Val) else list(outs)
        return [self.track(Val(im.use(o), o.dtype, self.globalize(o.dims, s)), s) for o, s in zip(outs, out_sh)]

    def _elementwise(self, im, op, ins, sh, where):
        ranks = {len(v.dims) for v in ins if v.dims}
        spec = next(_norm(s) for s in sh if self.sharded(s))
        local_ins = []
        for k, (v, s) in enumerate(zip(ins, sh)):
            if not v.dims:
                local_ins.append(v)
            elif _norm(s) == spec:
                local_ins.append(self._local_in(v, s))
            elif not self.sharded(s) and id(v) in self.bcast and self._rebroadcastable(v, spec):
                local_ins.append(self._rebroadcast(im, v, spec, op, where))
            else:
                return self._replicated(im, op, ins, sh, where, f"operand #{k} is {_fmt(s)} but another is sharded "
                                        f"{_fmt(list(spec))}")
        if len(ranks) > 1:
            raise UnsupportedOpError(op.operation.name, where, "operands of different ranks")
        out = [list(d) for d in spec] + [[]] * (len(op.results[0].type.shape) - len(spec))
        return self._convert(im, op, ins, sh, [out] * len(op.results), where, local_ins)

    def _rebroadcastable(self, v: Val, spec) -> bool:
        src, bdims, _ = self.bcast[id(v)]
        for j, axes in enumerate(spec):
            if axes and j in bdims:
                d = src.dims[bdims.index(j)]
                if d is None or not d.is_const or d.value != 1:
                    return False
        return True

    def _rebroadcast(self, im, v: Val, spec, op, where) -> Val:
        """A replicated broadcast used beside a sharded value: build its local part (it is constant
        along the sharded dims it expanded)."""

        src, bdims, full = self.bcast[id(v)]
        for j, axes in enumerate(spec):
            if axes and j in bdims:
                d = src.dims[bdims.index(j)]
                if d is None or not d.is_const or d.value != 1:
                    raise UnsupportedOpError(op.operation.name, where, f"a replicated operand (a broadcast of dim {d} "
                                             f"into dim {j}) beside one sharded {_fmt(list(spec))}: resharding is "
                                             "not supported")
        local = self.local(full.dims, list(spec), where)
        return _broadcast_in_dim_impl(im, op, src, bdims, local, full.dtype)

    def _broadcast(self, im, op, ins, sh, where):
        bdims = _ints(op.attributes["broadcast_dimensions"])
        s_in = sh[0]
        rank = len(op.results[0].type.shape)
        out = [[] for _ in range(rank)]
        for i, axes in enumerate(s_in):  # a sharded dim (> 1) is never an expanded one
            if axes:
                out[bdims[i]] = list(axes)
        local_ins = [self._local_in(ins[0], s_in)]
        if op.operation.name == "stablehlo.dynamic_broadcast_in_dim":
            shp = ins[1]
            if shp.known is None:
                return self._replicated(im, op, ins, sh, where, "output shape is not a known shape computation")
            local_ins.append(Val(None, shp.dtype, shp.dims, self.local(list(shp.known), out, where)))
            local_ins.extend(ins[2:])
        return self._convert(im, op, ins, sh, [out], where, local_ins)

    def _dot(self, im, op, ins, sh, where):
        """dot_general: sharded batch dims (equal on both sides) and free dims stay sharded in the
        result; contracting dims split alike give partial products, summed by an all_reduce. Where
        the operands' shardings conflict (a mesh axis used twice, contracting or batch dims split
        differently), an operand is all-gathered first (the rhs, else the lhs, else both)."""
        from jaxlib.mlir.dialects import stablehlo as hlo

        dn = hlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
        lb, rb = list(dn.lhs_batching_dimensions), list(dn.rhs_batching_dimensions)
        lc, rc = list(dn.lhs_contracting_dimensions), list(dn.rhs_contracting_dimensions)
        a, b = ins
        full = [[list(x) for x in (s or [])] + [[]] * (len(v.dims) - len(s or [])) for v, s in zip(ins, sh)]
        lf = [i for i in range(len(a.dims)) if i not in lb and i not in lc]
        rf = [i for i in range(len(b.dims)) if i not in rb and i not in rc]

        def plan(sa, sb):
            if any(sa[i] != sb[j] for i, j in zip(lb, rb)) or any(sa[i] != sb[j] for i, j in zip(lc, rc)):
                return None
            reduce_axes = [x for i in lc for x in sa[i]]
            out = [sa[i] for i in lb] + [sa[i] for i in lf] + [sb[i] for i in rf]
            used = [x for d in out for x in d] + reduce_axes
            return (out, reduce_axes) if len(used) == len(set(used)) else None

        def gatherable(s):
            return all(len(d) <= 1 for d in s)

        for ga, gb in ((False, False), (False, True), (True, False), (True, True)):
            if (ga and not (any(full[0]) and gatherable(full[0]))) or (gb and not (any(full[1]) and gatherable(full[1]))):
                continue
            sa = [[] for _ in full[0]] if ga else full[0]
            sb = [[] for _ in full[1]] if gb else full[1]
            p = plan(sa, sb)
            if p is None:
                continue
            out, reduce_axes = p
            ins2, sh2 = list(ins), list(sh)
            for k, g in ((0, ga), (1, gb)):
                if g:
                    ins2[k], sh2[k] = self.gather_once(im, ins[k], full[k]), None
            outs = self._convert(im, op, ins2, sh2, [out], where)
            if reduce_axes:  # partial products: sum them over the contracting dims' axes
                outs = [self._all_reduce(im, outs[0], reduce_axes, "sum", out)]
            return outs
        return self._replicated(im, op, ins, sh, where, f"operands sharded {_fmt(full[0])} and {_fmt(full[1])}")

    def _reduce(self, im, op, ins, sh, where):

        axes = _ints(op.attributes["dimensions"])
        s = [list(x) for x in sh[0]] + [[]] * (len(ins[0].dims) - len(sh[0]))
        if self.sharded(sh[1]):
            return self._replicated(im, op, ins, sh, where, "a sharded init value")
        reduce_axes = [x for i in axes for x in s[i]]
        out = [s[i] for i in range(len(s)) if i not in axes]
        kind = _reduction(op)
        if reduce_axes:
            rk = {"sum": "relax.sum", "prod": "relax.prod", "max": "relax.max", "min": "relax.min"}.get(kind)
            if rk is None or not _is_identity(rk, ins[0].dtype, _splat_value(op.operands[1])):
                return self._replicated(im, op, ins, sh, where, "a reduction over a sharded dim whose init value "
                                        "is not the reduction's identity")
        local_ins = [self._local_in(ins[0], sh[0]), ins[1]]
        outs = self._convert(im, op, ins, sh, [out], where, local_ins)
        if reduce_axes:
            outs = [self._all_reduce(im, outs[0], reduce_axes, kind, out)]
        return outs

    def axis_groups(self, axes: list[str]) -> tuple[list[int], int]:
        """The rank groups that differ only in their coordinates on `axes` (flattened), and their size."""
        shape = [self.axes[a] for a in self.axis_order]
        groups: dict[tuple, list[int]] = {}
        for r in range(self.size):
            c, rest = [], r
            for n in reversed(shape):
                c.append(rest % n)
                rest //= n
            c = dict(zip(reversed(self.axis_order), c))
            key = tuple(c[a] for a in self.axis_order if a not in axes)
            groups.setdefault(key, []).append(r)
        rows = [groups[k] for k in sorted(groups)]
        return [r for row in rows for r in row], len(rows[0])

    def _all_reduce(self, im, v: Val, axes, kind, out_sh) -> Val:
        groups, n = self.axis_groups(axes)
        self.collectives += 1
        local = self.local(v.dims, out_sh, "")
        r = im.emit("relax.all_reduce", [Val(v.value, v.dtype, local)], len(local), v.dtype,
                    {"groups": groups, "group_size": n, "reduce": ir.StringAttr.get(kind)}, dims=local)
        return self.track(Val(r.value, v.dtype, v.dims), out_sh)

    def gather(self, im, v: Val, s) -> Val:
        """A sharded value made replicated: one all_gather per sharded dim."""
        cur = Val(v.value, v.dtype, self.local(v.dims, s, ""))
        for j, axes in enumerate(s):
            if not axes:
                continue
            groups, n = self.axis_groups(axes)
            dims = list(cur.dims)
            dims[j] = dims[j] * n if dims[j] is not None else None
            cur = im.emit("relax.all_gather", [cur], len(dims), cur.dtype,
                          {"groups": groups, "group_size": n, "dim": j}, dims=dims)
            self.collectives += 1
        return Val(cur.value, v.dtype, v.dims)

    def constraint(self, im, op, ins):
        s = read_sharding(op.attributes["sharding"], str(op.location))
        if _norm(s) != _norm(self.sharding(ins[0])):
            raise UnsupportedOpError(op.operation.name, str(op.location),
                                     f"a sharding constraint {_fmt(s)} on a value sharded {_fmt(self.sharding(ins[0]))}: "
                                     "resharding is not supported")
        return list(ins)

    def manual_computation(self, im, op, ins):
        sdy = _sdy()
        where = str(op.location)
        ins_sh = [read_sharding(a, where) for a in sdy.TensorShardingPerValueAttr(op.attributes["in_shardings"]).shardings]
        outs_sh = [read_sharding(a, where) for a in sdy.TensorShardingPerValueAttr(op.attributes["out_shardings"]).shardings]
        from jaxlib.mlir import ir as jir

        every = sdy.ManualAxesAttr.get([jir.StringAttr.get(a) for a in self.axis_order])
        if op.attributes["manual_axes"] != every:
            raise UnsupportedOpError(op.operation.name, where, f"manual axes {op.attributes['manual_axes']} of a mesh "
                                     f"with axes {self.axis_order}: partly manual computations are not supported")
        block = op.regions[0].blocks[0]
        args = []
        for k, (v, s) in enumerate(zip(ins, ins_sh)):
            have = self.sharding(v)
            if _norm(have) != _norm(s):
                raise UnsupportedOpError(op.operation.name, where, f"operand #{k} is sharded {_fmt(have)} but the "
                                         f"manual computation takes it as {_fmt(s)}: resharding is not supported")
            args.append(Val(v.value, v.dtype, self.local(v.dims, s, where), v.known if not self.sharded(s) else None))
        env = {a: v for a, v in zip(block.arguments, args)}
        saved = im.scope
        outs, _ = _run_body(im, block, env)
        im.scope = saved
        results = []
        for v, s in zip(outs, outs_sh):
            results.append(self.track(Val(im.use(v), v.dtype, self.globalize(v.dims, s)), s))
        return results


_VIEW_OK = frozenset({"sdy.manual_computation", "sdy.sharding_constraint", "sdy.reshard",
                      "stablehlo.get_dimension_size"})
_BROADCASTS = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.dynamic_broadcast_in_dim"})
_ELEMENTWISE = frozenset("stablehlo." + n for n in (
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder", "negate", "abs",
    "exponential", "exponential_minus_one", "log", "log_plus_one", "tanh", "logistic", "sqrt", "rsqrt", "sine",
    "cosine", "floor", "ceil", "sign", "compare", "select", "clamp", "convert", "and", "or", "not", "xor"))


class _LocalOp:
    """A jax op seen with its per-device result types (sharded static dims divided), for a
    converter run on local operands."""

    def __init__(self, op, sp: "SpmdImport", out_sh):
        from jaxlib.mlir import ir as jir

        self._op = op
        self.results = []
        for r, s in zip(op.results, out_sh):
            t = jir.RankedTensorType(r.type)
            shape = []
            for j in range(t.rank):
                n = sp.ways(s[j]) if j < len(s) and s[j] else 1
                shape.append(t.get_dynamic_size() if t.is_dynamic_dim(j) else t.shape[j] // n)
            self.results.append(_Result(jir.RankedTensorType.get(shape, t.element_type)))

    def __getattr__(self, name):
        return getattr(self._op, name)


class _Result:
    def __init__(self, t):
        self.type = t


def annotate_spmd(im, func_module) -> None:
    """Record the mesh and the argument/result shardings on the relax @main (`relax.mesh_axes`,
    `relax.mesh_shape`, `relax.arg_shardings`, `relax.result_shardings`: per value, per dim, the
    mesh axes; `relax.arg_global_dims`: a sharded argument's global dims, `2*k`, for the run-time
    messages; `relax.results_replicated`: results the program computes whole on every rank
    although declared sharded), which relax_mlir.spmd reads to scatter, check and gather."""
    from mlir import ir

    sp = im.spmd
    main = None
    for op in func_module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            main = op.operation
    i64 = ir.IntegerType.get_signless(64)

    def sh(s, rank):
        s = list(s or []) + [[]] * max(0, rank - len(s or []))
        return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.StringAttr.get(a) for a in d]) for d in s])

    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)

    def rank(t):
        return len(view(t).dims)

    main.attributes["relax.mesh_axes"] = ir.ArrayAttr.get([ir.StringAttr.get(a) for a in sp.axis_order])
    main.attributes["relax.mesh_shape"] = ir.ArrayAttr.get([ir.IntegerAttr.get(i64, sp.axes[a]) for a in sp.axis_order])
    args = [sp.arg_shardings[i] if i < len(sp.arg_shardings) else None for i in range(len(ftype.inputs))]
    main.attributes["relax.arg_shardings"] = ir.ArrayAttr.get([sh(s, rank(t)) for s, t in zip(args, ftype.inputs)])
    res = [sp.result_shardings[i] if i < len(sp.result_shardings) else None for i in range(len(ftype.results))]
    main.attributes["relax.result_shardings"] = ir.ArrayAttr.get([sh(s, rank(t)) for s, t in zip(res, ftype.results)])

    mapping = {k: sym(v) for k, v in im.renames.items()}
    main.attributes["relax.arg_global_dims"] = ir.ArrayAttr.get([ir.ArrayAttr.get(
        [ir.StringAttr.get(str(d.subs(mapping)) if d is not None else "?") for d in sp.global_dims[i]])
        if i in sp.global_dims else ir.ArrayAttr.get([]) for i in range(len(ftype.inputs))])
    if sp.sliced_results:
        main.attributes["relax.results_replicated"] = ir.ArrayAttr.get(
            [ir.IntegerAttr.get(i64, r) for r in sp.sliced_results])


def _run_body(im, block, env):
    """Convert the manual computation's body (ending in sdy.return) with `env`."""
    return im.run_block(block, env)


def _norm(s):
    if s is None:
        return ()
    out = [tuple(a) for a in s]
    while out and not out[-1]:
        out.pop()
    return tuple(out)


def _fmt(s) -> str:
    if not _norm(s):
        return "replicated"
    return "[" + ", ".join("{" + ", ".join(f'"{a}"' for a in d) + "}" for d in s) + "]"


# --- collectives (inside a manual computation) -------------------------------------------------

_REDUCER = {"stablehlo.add": "sum", "stablehlo.multiply": "prod", "stablehlo.maximum": "max",
            "stablehlo.minimum": "min", "stablehlo.and": "and", "stablehlo.or": "or"}


def _reduction(op) -> str:
    """sum | prod | max | min | and | or: the computation of an all_reduce / reduce_scatter region."""
    block = op.regions[0].blocks[0]
    ops = list(block.operations)
    if len(ops) == 2 and ops[0].operation.name in _REDUCER and ops[1].operation.name == "stablehlo.return" \
            and list(ops[1].operands) == [ops[0].results[0]] \
            and set(ops[0].operands) == set(block.arguments) and len(block.arguments) == 2:
        kind = _REDUCER[ops[0].operation.name]
        return kind
    raise UnsupportedOpError(op.operation.name, str(op.location),
                             "only a single add, multiply, maximum, minimum, and, or reduces a collective")


def _groups(im, op) -> tuple[list[int], int]:
    """The flattened replica groups and the group size; the mesh's size when jax lists none."""
    where = str(op.location)
    if im.spmd is None:
        raise UnsupportedOpError(op.operation.name, where, "a collective outside an SPMD import "
                                 "(compile sharded programs with relax_mlir.spmd)")
    attr = op.attributes["replica_groups"]
    from jaxlib.mlir import ir as jir

    shape = jir.ShapedType(attr.type).shape
    flat = _ints(attr)
    if len(shape) != 2 or not shape[1] or min(flat, default=0) < 0:
        raise UnsupportedOpError(op.operation.name, where, f"replica groups of shape {list(shape)}")
    if "use_global_device_ids" not in op.attributes and "channel_handle" in op.attributes:
        pass  # jax's shard_map: ids are device ids over the (single-replica) mesh
    if sorted(flat) != list(range(im.spmd.size)):
        raise UnsupportedOpError(op.operation.name, where, f"replica groups {flat} do not cover the {im.spmd.size} "
                                 "devices of the mesh once")
    return flat, shape[1]



def _all_reduce(im, op, ins):
    groups, n = _groups(im, op)
    red = _reduction(op)
    im.spmd.collectives += len(ins)
    return [im.emit("relax.all_reduce", [x], len(x.dims), x.dtype,
                    {"groups": groups, "group_size": n, "reduce": ir.StringAttr.get(red)}, dims=list(x.dims)) for x in ins]


def _all_gather(im, op, ins):
    groups, n = _groups(im, op)
    dim = int(op.attributes["all_gather_dim"].value)
    outs = []
    for x in ins:
        dims = list(x.dims)
        dims[dim] = dims[dim] * n if dims[dim] is not None else None
        outs.append(im.emit("relax.all_gather", [x], len(dims), x.dtype,
                            {"groups": groups, "group_size": n, "dim": dim}, dims=dims))
    im.spmd.collectives += len(ins)
    return outs


def _reduce_scatter(im, op, ins):
    groups, n = _groups(im, op)
    red = _reduction(op)
    dim = int(op.attributes["scatter_dimension"].value)
    (x,) = ins
    dims = list(x.dims)
    d = dims[dim]
    if d is None or not all(c % n == 0 for _, c in d.terms):
        raise UnsupportedOpError(op.operation.name, str(op.location), f"scattered dim {d} is not provably "
                                 f"divisible by the group size {n}")
    dims[dim] = floordiv(d, const(n))
    im.spmd.collectives += 1
    return im.emit("relax.reduce_scatter", [x], len(dims), x.dtype,
                   {"groups": groups, "group_size": n, "dim": dim, "reduce": ir.StringAttr.get(red)}, dims=dims)


def _all_to_all(im, op, ins):
    groups, n = _groups(im, op)
    s = int(op.attributes["split_dimension"].value)
    c = int(op.attributes["concat_dimension"].value)
    count = int(op.attributes["split_count"].value)
    if count != n:
        raise UnsupportedOpError(op.operation.name, str(op.location), f"split_count {count} differs from the "
                                 f"group size {n}")
    outs = []
    for x in ins:
        dims = list(x.dims)
        d = dims[s]
        if d is None or not all(k % n == 0 for _, k in d.terms):
            raise UnsupportedOpError(op.operation.name, str(op.location), f"split dim {d} is not provably "
                                     f"divisible by {n}")
        dims[s] = floordiv(d, const(n))
        dims[c] = dims[c] * n if dims[c] is not None else None
        outs.append(im.emit("relax.all_to_all", [x], len(dims), x.dtype,
                            {"groups": groups, "group_size": n, "split_dim": s, "concat_dim": c}, dims=dims))
    im.spmd.collectives += len(ins)
    return outs


def _collective_permute(im, op, ins):
    where = str(op.location)
    if im.spmd is None:
        raise UnsupportedOpError(op.operation.name, where, "a collective outside an SPMD import")
    pairs = _ints(op.attributes["source_target_pairs"])
    (x,) = ins
    im.spmd.collectives += 1
    return im.emit("relax.collective_permute", [x], len(x.dims), x.dtype,
                   {"groups": list(range(im.spmd.size)), "group_size": im.spmd.size, "pairs": pairs},
                   dims=list(x.dims))


def _collective_broadcast(im, op, ins):
    groups, n = _groups(im, op)
    (x,) = ins
    im.spmd.collectives += 1
    return im.emit("relax.collective_broadcast", [x], len(x.dims), x.dtype,
                   {"groups": groups, "group_size": n}, dims=list(x.dims))


CONVERTERS = register_converters({
    "sdy.sharding_constraint": _identity,
    "sdy.reshard": _identity,
    "sdy.manual_computation": _refuse_manual,
    "stablehlo.all_reduce": _all_reduce,
    "stablehlo.all_gather": _all_gather,
    "stablehlo.reduce_scatter": _reduce_scatter,
    "stablehlo.all_to_all": _all_to_all,
    "stablehlo.collective_permute": _collective_permute,
    "stablehlo.collective_broadcast": _collective_broadcast,
})

CUSTOM_CALLS = register_custom_calls({
    "Sharding": _gspmd_sharding,  # with_sharding_constraint (GSPMD): mhlo.sharding on an identity
    "annotate_device_placement": _identity,  # memory kind / device placement of a value
    "SPMDFullToShardShape": _SHARD_MAP_WHY,
    "SPMDShardToFullShape": _SHARD_MAP_WHY,
})
