"""Indexing: StableHLO gather and scatter (any dimension numbers), argmax/argmin, sort.

The ops follow StableHLO's semantics (openxla/stablehlo docs/spec.md) exactly: gather clamps each
start index into [0, dim - slice_size]; scatter drops an update window whose start is out of
bounds (what XLA does; the spec leaves it to the implementation) and applies the updates in
order (a duplicate index with `add` accumulates; with `replace` the last update wins, as XLA's CPU
backend does); argmax/argmin return the first index of the max/min (a NaN counts as the max and
the min: the first NaN wins, as jax); sort is stable, floats in jax's total order (-0.0 == 0.0,
NaNs last).
"""
from __future__ import annotations

from relax_mlir.dialect.spec import DeduceError, OpInfo, OpSpec, TENSOR, attr, operand, relax_op, result_
from relax_mlir.dialect.types import FLOAT_DTYPES, INT_DTYPES, TensorType, as_dim
from relax_mlir.ops.common import ZERO, dims_equal, fmt, int_array, normalize_axis, require_rank
from relax_mlir.ops.kernel import (Kernel, Legalized, affine_map, highest_literal, identity_map,
                                   lowest_literal)

__all__ = ["GatherOp", "ScatterOp", "ArgmaxOp", "ArgminOp", "SortOp"]


def _index_dtype(t: TensorType, what: str) -> None:
    if t.dtype not in INT_DTYPES or t.dtype == "i1":
        raise DeduceError(f"{what} must have an integer element type, got {t.dtype}")


def _ints(op: OpInfo, name: str) -> list[int]:
    return int_array(op, name)


def _check_dims(vals: list[int], rank: int, name: str, sort: bool = False) -> None:
    if any(not 0 <= v < rank for v in vals):
        raise DeduceError(f"'{name}' {vals} must be dims in [0, {rank})")
    if len(set(vals)) != len(vals):
        raise DeduceError(f"'{name}' {vals} repeat a dim")
    if sort and vals != sorted(vals):
        raise DeduceError(f"'{name}' {vals} must be sorted")


def _index_vector(op: OpInfo, idx: TensorType, ivd: int, n: int, what: str):
    """The batch dims of the indices (all but index_vector_dim) after checking the vector's size."""
    d = require_rank(idx, what)
    if not 0 <= ivd <= len(d):
        raise DeduceError(f"index_vector_dim {ivd} is out of range for indices of rank {len(d)}")
    size = d[ivd] if ivd < len(d) else None
    if ivd < len(d) and not (size is not None and size.is_const and size.value == n):
        raise DeduceError(f"the index vector (dim {ivd} of the indices, size {fmt(size)}) must have {n} "
                          f"elements, one per start_index_map / scatter_dims_to_operand_dims entry")
    if ivd == len(d) and n != 1:
        raise DeduceError(f"index_vector_dim {ivd} is the indices' rank: the index vector has 1 element, "
                          f"but {n} start dims are mapped")
    return [x for i, x in enumerate(d) if i != ivd]


def _clamp_lines(v: str, hi: str, r: str) -> list[str]:
    """r = clamp(v, 0, hi) on index values (compares and selects; hi >= 0)."""
    return [f"{r}_z = arith.constant 0 : index", f"{r}_n = arith.cmpi slt, {v}, {r}_z : index",
            f"{r}_l = arith.select {r}_n, {r}_z, {v} : index", f"{r}_b = arith.cmpi sgt, {r}_l, {hi} : index",
            f"{r} = arith.select {r}_b, {hi}, {r}_l : index"]


# --- gather --------------------------------------------------------------------------------------


@relax_op
class GatherOp(OpSpec):
    """StableHLO gather: slices of `x` at start indices read from `indices`. Attributes as
    StableHLO's: offset_dims, collapsed_slice_dims, operand_batching_dims,
    start_indices_batching_dims, start_index_map (int arrays), index_vector_dim (int),
    slice_sizes (ints or symbolic expression strings). Each start index is clamped into
    [0, dim - slice_size]."""

    name = "relax.gather"
    x = operand(TENSOR)
    indices = operand(TENSOR)
    result = result_(TENSOR)
    offset_dims = attr("array")
    collapsed_slice_dims = attr("array")
    operand_batching_dims = attr("array")
    start_indices_batching_dims = attr("array")
    start_index_map = attr("array", optional=False)
    index_vector_dim = attr("int", optional=False)
    slice_sizes = attr("array", optional=False)

    @classmethod
    def numbers(cls, op: OpInfo):
        x, idx = op.tensor(0), op.tensor(1)
        xd = require_rank(x, "operand")
        _index_dtype(idx, "indices")
        offset, collapsed = _ints(op, "offset_dims"), _ints(op, "collapsed_slice_dims")
        obatch, ibatch = _ints(op, "operand_batching_dims"), _ints(op, "start_indices_batching_dims")
        smap, ivd = _ints(op, "start_index_map"), op.attr("index_vector_dim")
        sizes_attr = op.attr("slice_sizes")
        if not isinstance(sizes_attr, list) or len(sizes_attr) != len(xd):
            raise DeduceError(f"slice_sizes must have one entry per operand dim ({len(xd)}), got {sizes_attr!r}")
        sizes = [as_dim(s) for s in sizes_attr]
        if any(s is None for s in sizes):
            raise DeduceError("slice_sizes must be known")
        batch = _index_vector(op, idx, ivd, len(smap), "indices")
        rank = len(xd)
        _check_dims(collapsed, rank, "collapsed_slice_dims", sort=True)
        _check_dims(obatch, rank, "operand_batching_dims", sort=True)
        _check_dims(smap, rank, "start_index_map")
        _check_dims(ibatch, len(idx.dims), "start_indices_batching_dims")
        if set(collapsed) & set(obatch):
            raise DeduceError("collapsed_slice_dims and operand_batching_dims overlap")
        if set(smap) & set(obatch):
            raise DeduceError("start_index_map and operand_batching_dims overlap")
        if ivd in ibatch:
            raise DeduceError("start_indices_batching_dims contain index_vector_dim")
        if len(obatch) != len(ibatch):
            raise DeduceError("operand_batching_dims and start_indices_batching_dims differ in length")
        for d in collapsed + obatch:
            if not (sizes[d].is_const and sizes[d].value <= 1):
                raise DeduceError(f"slice size of collapsed or batching dim {d} must be 0 or 1, got {sizes[d]}")
        for d, s in enumerate(sizes):
            if xd[d] is None and not (s.is_const and s.value == 0):
                raise DeduceError(f"operand dim {d} is unknown; refine it with relax.match_cast first")
            if s.is_const and s.value < 0:
                raise DeduceError(f"slice size {s} of dim {d} is negative")
            if xd[d] is not None and op.facts.prove_gt(s, xd[d]):
                raise DeduceError(f"slice size {s} exceeds the operand's dim {d} ({xd[d]})")
        for a, b in zip(obatch, ibatch):
            da, db = xd[a], idx.dims[b]
            if not dims_equal(da, db, op.facts):
                raise DeduceError(f"operand batching dim {a} ({fmt(da)}) and indices batching dim {b} ({fmt(db)}) are "
                                  f"not provably equal")
        window = [d for d in range(rank) if d not in collapsed and d not in obatch]
        if len(offset) != len(window):
            raise DeduceError(f"offset_dims {offset} must have one entry per slice dim kept ({len(window)})")
        out_rank = len(batch) + len(offset)
        _check_dims(offset, out_rank, "offset_dims", sort=True)
        return xd, sizes, offset, collapsed, obatch, ibatch, smap, ivd, batch, window, out_rank

    @classmethod
    def requirements(cls, op: OpInfo):
        """slice_sizes <= the operand's dims (StableHLO's constraint): checked at run time where
        the facts cannot prove it, so the kernel never reads outside the operand."""
        xd, sizes = cls.numbers(op)[:2]
        return [(s, xd[d], f"slice size {s} of dim {d} exceeds the operand's dim ({xd[d]})")
                for d, s in enumerate(sizes) if xd[d] is not None and not (s.is_const and s.value == 0)]

    @classmethod
    def deduce(cls, op: OpInfo):
        xd, sizes, offset, _, _, _, _, _, batch, window, out_rank = cls.numbers(op)
        dims, bi, wi = [], iter(batch), iter(window)
        for i in range(out_rank):
            dims.append(sizes[next(wi)] if i in offset else next(bi))
        return [TensorType(tuple(dims), op.tensor(0).dtype)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, idx, r = op.tensor(0), op.tensor(1), op.result_types[0]
        xd, sizes, offset, collapsed, obatch, ibatch, smap, ivd, batch, window, out_rank = cls.numbers(op)
        k = Kernel("gather", [x, idx], [r])
        syms = []
        body = [f"%i{j} = linalg.index {j} : index" for j in range(out_rank)]
        bcoords = [f"%i{j}" for j in range(out_rank) if j not in offset]  # the indices' batch coords
        # hi[d] = max(dim - size, 0), computed once outside the generic
        his = {}
        for d in smap:
            dim = k.dim(k.inp(0), x, d)
            s = sizes[d]
            if s.is_const:
                sv = k.const_index(s.value)
            elif xd[d] is not None and dims_equal(s, xd[d], op.facts):
                sv = dim
            else:
                sv = k.sym(len(syms))
                syms.append(s)
            h = k.fresh("hi")
            k.emit(f"{h}_d = arith.subi {dim}, {sv} : index")
            k.emit(f"{h}_z = arith.constant 0 : index")
            k.emit(f"{h}_n = arith.cmpi slt, {h}_d, {h}_z : index")
            k.emit(f"{h} = arith.select {h}_n, {h}_z, {h}_d : index")
            his[d] = h
        k.n_syms = len(syms)
        full = ["%z0"] * len(xd)
        body.append("%z0 = arith.constant 0 : index")
        for j, d in enumerate(smap):
            coords = list(bcoords)
            if ivd < len(idx.dims):
                coords.insert(ivd, f"%c{j}_v")
                body.append(f"%c{j}_v = arith.constant {j} : index")
            body.append(f"%st{j}_e = tensor.extract {k.inp(1)}[{', '.join(coords)}] : {k.ty(idx)}")
            body.append(f"%st{j}_i = arith.index_cast %st{j}_e : {idx.dtype} to index")
            body += _clamp_lines(f"%st{j}_i", his[d], f"%st{j}")
            full[d] = f"%st{j}"
        bpos = [j for j in range(len(idx.dims)) if j != ivd]  # indices dim -> position in bcoords
        for a, b in zip(obatch, ibatch):
            full[a] = bcoords[bpos.index(b)]
        for w, o in zip(window, offset):
            if full[w] == "%z0":
                full[w] = f"%i{o}"
            else:
                body.append(f"%f{w} = arith.addi {full[w]}, %i{o} : index")
                full[w] = f"%f{w}"
        body.append(f"%v = tensor.extract {k.inp(0)}[{', '.join(full)}] : {k.ty(x)}")
        g = k.generic([], [(k.out(0), r, identity_map(out_rank))], ["parallel"] * out_rank, body, ["%v"])
        return Legalized(k, g, syms)


# --- scatter -------------------------------------------------------------------------------------

COMBINERS = ("replace", "add", "mul", "max", "min")


def _combine(kind: str, dt: str, old: str, upd: str, r: str) -> list[str]:
    """r = old <kind> upd (StableHLO add/multiply/maximum/minimum; on i1 add is or, multiply and)."""
    if kind == "replace":
        return [f"{r} = arith.select %true, {upd}, {old} : {dt}"]
    if dt in FLOAT_DTYPES:
        o = {"add": "arith.addf", "mul": "arith.mulf", "max": "arith.maximumf", "min": "arith.minimumf"}[kind]
        return [f"{r} = {o} {old}, {upd} : {dt}"]
    if dt == "i1":
        o = "arith.ori" if kind in ("add", "max") else "arith.andi"
        return [f"{r} = {o} {old}, {upd} : i1"]
    if kind in ("max", "min"):
        return [f"{r}_c = arith.cmpi {'sgt' if kind == 'max' else 'slt'}, {old}, {upd} : {dt}",
                f"{r} = arith.select {r}_c, {old}, {upd} : {dt}"]
    return [f"{r} = {'arith.addi' if kind == 'add' else 'arith.muli'} {old}, {upd} : {dt}"]


@relax_op
class ScatterOp(OpSpec):
    """StableHLO scatter of one input: a copy of `x` with `updates` combined in at the windows the
    start indices name. Attributes as StableHLO's (update_window_dims, inserted_window_dims,
    input_batching_dims, scatter_indices_batching_dims, scatter_dims_to_operand_dims,
    index_vector_dim) and `combiner` (replace, add, mul, max, min: the update computation). A
    window whose start is out of bounds is dropped; updates apply in order."""

    name = "relax_v.scatter"
    x = operand(TENSOR)
    indices = operand(TENSOR)
    updates = operand(TENSOR)
    result = result_(TENSOR)
    update_window_dims = attr("array")
    inserted_window_dims = attr("array")
    input_batching_dims = attr("array")
    scatter_indices_batching_dims = attr("array")
    scatter_dims_to_operand_dims = attr("array", optional=False)
    index_vector_dim = attr("int", optional=False)
    combiner = attr("str", optional=False)

    @classmethod
    def numbers(cls, op: OpInfo):
        x, idx, upd = op.tensor(0), op.tensor(1), op.tensor(2)
        xd = require_rank(x, "input")
        ud = require_rank(upd, "updates")
        _index_dtype(idx, "scatter indices")
        if upd.dtype != x.dtype:
            raise DeduceError(f"updates element type {upd.dtype} differs from the input's {x.dtype}")
        kind = op.attr("combiner")
        if kind not in COMBINERS:
            raise DeduceError(f"combiner must be one of {', '.join(COMBINERS)}, got {kind!r}")
        uwd, iwd = _ints(op, "update_window_dims"), _ints(op, "inserted_window_dims")
        ibd, sibd = _ints(op, "input_batching_dims"), _ints(op, "scatter_indices_batching_dims")
        smap, ivd = _ints(op, "scatter_dims_to_operand_dims"), op.attr("index_vector_dim")
        batch = _index_vector(op, idx, ivd, len(smap), "scatter indices")
        rank = len(xd)
        _check_dims(uwd, len(ud), "update_window_dims", sort=True)
        _check_dims(iwd, rank, "inserted_window_dims", sort=True)
        _check_dims(ibd, rank, "input_batching_dims", sort=True)
        _check_dims(smap, rank, "scatter_dims_to_operand_dims")
        _check_dims(sibd, len(idx.dims), "scatter_indices_batching_dims")
        if set(iwd) & set(ibd) or set(smap) & set(ibd) or len(ibd) != len(sibd) or ivd in sibd:
            raise DeduceError("inconsistent inserted_window_dims / input_batching_dims / "
                              "scatter_indices_batching_dims")
        window = [d for d in range(rank) if d not in iwd and d not in ibd]
        if len(uwd) != len(window):
            raise DeduceError(f"update_window_dims {uwd} must have one entry per input dim not inserted or "
                              f"batching ({len(window)})")
        uscatter = [j for j in range(len(ud)) if j not in uwd]
        if len(uscatter) != len(batch):
            raise DeduceError(f"updates have {len(uscatter)} scatter dims, the indices {len(batch)} batch dims")
        for j, b in zip(uscatter, batch):
            if not dims_equal(ud[j], b, op.facts):
                raise DeduceError(f"updates dim {j} ({fmt(ud[j])}) is not provably equal to the indices' batch dim "
                                  f"({fmt(b)})")
        for j, d in zip(uwd, window):
            if ud[j] is not None and xd[d] is not None and op.facts.prove_gt(ud[j], xd[d]):
                raise DeduceError(f"update window dim {j} ({ud[j]}) exceeds the input's dim {d} ({xd[d]})")
        return xd, ud, kind, uwd, iwd, ibd, sibd, smap, ivd, window, uscatter

    @classmethod
    def deduce(cls, op: OpInfo):
        cls.numbers(op)
        x = op.tensor(0)
        return [TensorType(x.dims, x.dtype)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, idx, upd, r = op.tensor(0), op.tensor(1), op.tensor(2), op.result_types[0]
        xd, ud, kind, uwd, iwd, ibd, sibd, smap, ivd, window, uscatter = cls.numbers(op)
        k = Kernel("scatter", [x, idx, upd], [r], n_syms=1)
        if any(d is not None and d.is_const and d.value == 0 for d in x.dims):
            # an empty x: no element to write, every update dropped (and a kernel holding the
            # zero-size buffer does not lower to SPIR-V: fuzz seed 2,380,454 on Vulkan)
            return Legalized(k, [k.out(0)], [ZERO])
        # Symbolic argument 0 is the in-place flag of relax-plan-memory (as dynamic_update_slice's):
        # 1 when x dies here and the result may take x's storage; then the updates go into x
        # itself (a scan writing one row per step), else x is copied into the destination first.
        # Both compute the same tensor.
        flag, init, cp = k.fresh("inplace"), k.fresh("init"), k.fresh("cp")
        k.emit(f"{flag} = arith.cmpi ne, {k.sym(0)}, {k.const_index(0)} : index")
        k.emit(f"{init} = scf.if {flag} -> ({k.ty(r)}) {{")
        k.emit(f"  scf.yield {k.inp(0)} : {k.ty(r)}")
        k.emit("} else {")
        k.emit(f"  {cp} = linalg.copy ins({k.inp(0)} : {k.ty(x)}) outs({k.out(0)} : {k.ty(r)}) -> {k.ty(r)}")
        k.emit(f"  scf.yield {cp} : {k.ty(r)}")
        k.emit("}")
        rank = len(xd)
        xdims = [k.dim(k.inp(0), x, d) for d in range(rank)]
        udims = [k.dim(k.inp(2), upd, j) for j in range(len(ud))]
        # the window size along each input dim: the updates' window dim, or 1 (inserted, batching)
        wsize = [k.const_index(1)] * rank
        for j, d in zip(uwd, window):
            wsize[d] = udims[j]
        c0, c1 = k.const_index(0), k.const_index(1)
        tt = k.ty(r)
        acc = init
        loops = []
        for j in range(len(ud)):
            a = k.fresh("acc")
            k.emit(f"{a}_r = scf.for %u{j} = {c0} to {udims[j]} step {c1} iter_args({a} = {acc}) -> ({tt}) {{")
            loops.append(f"{a}_r")
            acc = a
        body: list[str] = ["%true = arith.constant true"]
        ucoords = [f"%u{j}" for j in uscatter]
        full = [None] * rank
        for j, d in enumerate(smap):
            coords = list(ucoords)
            if ivd < len(idx.dims):
                coords.insert(ivd, f"%cv{j}")
                body.append(f"%cv{j} = arith.constant {j} : index")
            body.append(f"%e{j} = tensor.extract {k.inp(1)}[{', '.join(coords)}] : {k.ty(idx)}")
            body.append(f"%st{j} = arith.index_cast %e{j} : {idx.dtype} to index")
            full[d] = f"%st{j}"
        bpos = [j for j in range(len(idx.dims)) if j != ivd]
        for a, b in zip(ibd, sibd):
            full[a] = ucoords[bpos.index(b)]
        # in bounds: 0 <= start[d] <= dim[d] - window[d] for every input dim
        # (a dim no index moves starts at 0: its window must still fit, 0 <= dim - window)
        ok = "%true"
        for d in range(rank):
            start = full[d] if full[d] is not None else c0
            body += [f"%hi{d} = arith.subi {xdims[d]}, {wsize[d]} : index",
                     f"%ge{d} = arith.cmpi sge, {start}, {c0} : index",
                     f"%le{d} = arith.cmpi sle, {start}, %hi{d} : index",
                     f"%in{d}_a = arith.andi %ge{d}, %le{d} : i1", f"%ok{d} = arith.andi {ok}, %in{d}_a : i1"]
            ok = f"%ok{d}"
        res = []
        for d in range(rank):
            w = f"%u{uwd[window.index(d)]}" if d in window else None
            if full[d] is None:
                res.append(w if w is not None else c0)
            elif w is None:
                res.append(full[d])
            else:
                body.append(f"%p{d} = arith.addi {full[d]}, {w} : index")
                res.append(f"%p{d}")
        dt = x.dtype
        body.append(f"%new = scf.if {ok} -> ({tt}) {{")
        body.append(f"  %old = tensor.extract {acc}[{', '.join(res)}] : {tt}")
        body.append(f"  %up = tensor.extract {k.inp(2)}[{', '.join(f'%u{j}' for j in range(len(ud)))}] : {k.ty(upd)}")
        body += ["  " + l for l in _combine(kind, dt, "%old", "%up", "%cmb")]
        body.append(f"  %ins = tensor.insert %cmb into {acc}[{', '.join(res)}] : {tt}")
        body.append(f"  scf.yield %ins : {tt}")
        body.append("} else {")
        body.append(f"  scf.yield {acc} : {tt}")
        body.append("}")
        for l in body:
            k.emit("  " + l)
        if loops:
            k.emit(f"  scf.yield %new : {tt}")
            for j in range(len(loops) - 1, 0, -1):
                k.emit("}")
                k.emit(f"scf.yield {loops[j]} : {tt}")
            k.emit("}")
            return Legalized(k, [loops[0]], [ZERO])
        return Legalized(k, ["%new"], [ZERO])


# --- argmax / argmin -----------------------------------------------------------------------------


class _ArgOp(OpSpec):
    """Base of argmax/argmin: the first index along `axis` of the max (min) element; a NaN counts
    as beyond every number, so the first NaN's index is the result (as jax)."""

    x = operand(TENSOR)
    result = result_(TENSOR)
    axis = attr("int", optional=False)
    dtype = attr("type", optional=False)
    greater = True

    @classmethod
    def out_dtype(cls, op: OpInfo) -> str:
        return str(op.attr("dtype"))

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = require_rank(x, "operand")
        if not d:
            raise DeduceError("needs an operand of rank >= 1")
        axis = normalize_axis(op.attr("axis"), len(d))
        dt = cls.out_dtype(op)
        if dt not in INT_DTYPES or dt == "i1":
            raise DeduceError(f"the index type must be an integer type, got {dt}")
        return [TensorType(tuple(s for i, s in enumerate(d) if i != axis), dt)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, r = op.tensor(0), op.result_types[0]
        axis = normalize_axis(op.attr("axis"), len(x.dims))
        rank = len(x.dims)
        dt, it = x.dtype, r.dtype
        vt = TensorType(r.dims, dt)
        k = Kernel("argmax" if cls.greater else "argmin", [x], [r])
        vals = k.empty(vt, dims_from=(k.out(0), r))
        init = lowest_literal(dt) if cls.greater else highest_literal(dt)
        vals = k.fill(init, vals, vt)
        idx = k.fill("0", k.out(0), r)
        omap = affine_map(rank, [f"d{i}" for i in range(rank) if i != axis])
        its = ["reduction" if i == axis else "parallel" for i in range(rank)]
        # take (x, i) over the accumulated (v, j) when x is better, or as good and i < j; with a NaN
        # better than every number, so any order of combining gives the first best index.
        body = [f"%ix = linalg.index {axis} : index", f"%i = arith.index_cast %ix : index to {it}",
                f"%earlier = arith.cmpi slt, %i, %o1 : {it}"]
        if dt in FLOAT_DTYPES:
            p = "ogt" if cls.greater else "olt"
            body += [f"%better = arith.cmpf {p}, %a0, %o0 : {dt}", f"%same = arith.cmpf oeq, %a0, %o0 : {dt}",
                     f"%xn = arith.cmpf uno, %a0, %a0 : {dt}", f"%vn = arith.cmpf uno, %o0, %o0 : {dt}",
                     "%true = arith.constant true", "%vnum = arith.xori %vn, %true : i1",
                     "%nanwin = arith.andi %xn, %vnum : i1", "%both = arith.andi %xn, %vn : i1",
                     "%tie0 = arith.ori %same, %both : i1", "%b0 = arith.ori %better, %nanwin : i1"]
        else:
            p = ("ugt" if cls.greater else "ult") if dt == "i1" else ("sgt" if cls.greater else "slt")
            body += [f"%b0 = arith.cmpi {p}, %a0, %o0 : {dt}", f"%tie0 = arith.cmpi eq, %a0, %o0 : {dt}"]
        body += ["%tie = arith.andi %tie0, %earlier : i1", "%take = arith.ori %b0, %tie : i1",
                 f"%nv = arith.select %take, %a0, %o0 : {dt}", f"%ni = arith.select %take, %i, %o1 : {it}"]
        g = k.generic([(k.inp(0), x, identity_map(rank))], [(vals, vt, omap), (idx, r, omap)], its, body,
                      ["%nv", "%ni"])
        return Legalized(k, [g[1]])


@relax_op
class ArgmaxOp(_ArgOp):
    """The first index of the maximum along `axis` (the first NaN if any), as integer `dtype`.
    Attributes: axis (int), dtype (type)."""

    name = "relax.argmax"
    greater = True


@relax_op
class ArgminOp(_ArgOp):
    """The first index of the minimum along `axis` (the first NaN if any), as integer `dtype`.
    Attributes: axis (int), dtype (type)."""

    name = "relax.argmin"
    greater = False


# --- sort ----------------------------------------------------------------------------------------


_BITS = {"f16": "i16", "bf16": "i16", "f32": "i32", "f64": "i64"}


def _less(dt: str, a: str, b: str, r: str, raw: bool = False) -> list[str]:
    """r = a < b in jax's sort order: floats totally ordered with -0.0 == 0.0 and every NaN after
    +inf (NaNs equal to each other); integers signed; i1 false < true. `raw`: IEEE totalOrder of
    the bits (StableHLO's TOTALORDER compare: -NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN)."""
    if dt in FLOAT_DTYPES and raw:
        it = _BITS[dt]
        w = int(it[1:])
        lines = [f"{r}_w = arith.constant {w - 1} : {it}", f"{r}_one = arith.constant 1 : {it}"]
        keys = []
        for v, nm in ((a, "a"), (b, "b")):
            # negative floats: flip every bit but the sign, so the signed integers order as the floats
            lines += [f"{r}_{nm}i = arith.bitcast {v} : {dt} to {it}",
                      f"{r}_{nm}s = arith.shrsi {r}_{nm}i, {r}_w : {it}",
                      f"{r}_{nm}m = arith.shrui {r}_{nm}s, {r}_one : {it}",
                      f"{r}_{nm}k = arith.xori {r}_{nm}i, {r}_{nm}m : {it}"]
            keys.append(f"{r}_{nm}k")
        return lines + [f"{r} = arith.cmpi slt, {keys[0]}, {keys[1]} : {it}"]
    if dt in FLOAT_DTYPES:
        return [f"{r}_lt = arith.cmpf olt, {a}, {b} : {dt}", f"{r}_an = arith.cmpf ord, {a}, {a} : {dt}",
                f"{r}_bn = arith.cmpf uno, {b}, {b} : {dt}", f"{r}_nl = arith.andi {r}_an, {r}_bn : i1",
                f"{r} = arith.ori {r}_lt, {r}_nl : i1"]
    return [f"{r} = arith.cmpi {'ult' if dt == 'i1' else 'slt'}, {a}, {b} : {dt}"]


def _lex_less(dts: list[str], desc: list[bool], raw: list[bool], a: list[str], b: list[str], r: str) -> list[str]:
    """r = (a0, a1, ...) before (b0, b1, ...) lexicographically, key i descending where desc[i],
    in IEEE total order where raw[i]."""
    lines: list[str] = []
    acc = None
    for i in range(len(dts) - 1, -1, -1):
        x, y = (b[i], a[i]) if desc[i] else (a[i], b[i])
        lines += _less(dts[i], x, y, f"{r}_k{i}", raw[i])
        if acc is None:
            acc = f"{r}_k{i}"
            continue
        lines += _less(dts[i], y, x, f"{r}_g{i}", raw[i])
        lines += [f"{r}_t{i} = arith.constant true",
                  f"{r}_ng{i} = arith.xori {r}_g{i}, {r}_t{i} : i1",
                  f"{r}_e{i} = arith.andi {r}_ng{i}, {acc} : i1", f"{r}_o{i} = arith.ori {r}_k{i}, {r}_e{i} : i1"]
        acc = f"{r}_o{i}"
    lines.append(f"{r} = arith.ori {acc}, {acc} : i1")
    return lines


RANK_SORT_MAX = 32
"""Rows of a static length up to this sort by all-pairs ranks; longer or symbolic rows merge sort."""


@relax_op
class SortOp(OpSpec):
    """Stable sort of several same-shaped tensors along `axis`, ordered by the first `num_keys`
    of them lexicographically (jax's order: floats with -0.0 == 0.0 and NaNs last; `descending`,
    one bool per key, reverses a key's order; `total_order`, one bool per key, orders a float key
    by IEEE totalOrder instead, as StableHLO's TOTALORDER compare of raw values). Attributes: axis
    (int), num_keys (int, default 1), descending, total_order (arrays of 0/1, default all 0)."""

    name = "relax_v.sort"
    inputs = operand(TENSOR, variadic=True)
    results = result_(TENSOR, variadic=True)
    axis = attr("int", optional=False)
    num_keys = attr("int", default=1)
    descending = attr("array")
    total_order = attr("array")

    @classmethod
    def config(cls, op: OpInfo):
        ts = [op.tensor(i) for i in range(len(op.operand_types))]
        if not ts:
            raise DeduceError("needs at least one operand")
        d = require_rank(ts[0], "operand #0")
        if not d:
            raise DeduceError("needs operands of rank >= 1")
        axis = normalize_axis(op.attr("axis"), len(d))
        nk = op.attr("num_keys", 1)
        if not isinstance(nk, int) or not 1 <= nk <= len(ts):
            raise DeduceError(f"num_keys must be in [1, {len(ts)}], got {nk!r}")
        desc = op.attr("descending") or [0] * nk
        if not isinstance(desc, list) or len(desc) != nk:
            raise DeduceError(f"descending must have one entry per key ({nk}), got {desc!r}")
        raw = op.attr("total_order") or [0] * nk
        if not isinstance(raw, list) or len(raw) != nk:
            raise DeduceError(f"total_order must have one entry per key ({nk}), got {raw!r}")
        dims = list(d)
        for i, t in enumerate(ts[1:], 1):
            td = require_rank(t, f"operand #{i}")
            if len(td) != len(d):
                raise DeduceError(f"operand #{i} has rank {len(td)}, operand #0 {len(d)}")
            for j, (a, b) in enumerate(zip(dims, td)):
                if not dims_equal(a, b, op.facts):
                    raise DeduceError(f"operand #{i} dim {j} ({fmt(b)}) is not provably equal to operand #0's "
                                      f"({fmt(a)})")
        return ts, tuple(dims), axis, nk, [bool(v) for v in desc], [bool(v) for v in raw]

    @classmethod
    def deduce(cls, op: OpInfo):
        ts, dims = cls.config(op)[:2]
        return [TensorType(dims, t.dtype) for t in ts]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        ts, dims, axis, nk, desc, raw = cls.config(op)
        n = dims[axis]
        if n is not None and n.is_const and n.value <= RANK_SORT_MAX:
            return cls.rank_sort(op)
        return cls.merge_sort(op)

    @classmethod
    def merge_sort(cls, op: OpInfo) -> Legalized:
        """Per row along the axis: a bottom-up stable merge sort of the positions 0..n-1 by the keys
        (O(n log n) compares, scf loops), then one gather of every operand by the sorted positions."""
        ts, dims, axis, nk, desc, raw = cls.config(op)
        rs = op.result_types
        rank = len(dims)
        k = Kernel("sort", ts, rs)
        pt = TensorType(rs[0].dims, "i32")
        rt = TensorType((None,), "i32")
        tp, tr = k.ty(pt), k.ty(rt)
        c0, c1 = k.const_index(0), k.const_index(1)
        sizes = [k.dim(k.out(0), rs[0], d) for d in range(rank)]
        nn = sizes[axis]
        perm = k.empty(pt, dims_from=(k.out(0), rs[0]))
        batch = [d for d in range(rank) if d != axis]
        acc = perm
        heads = []
        for d in batch:
            a = k.fresh("pa")
            k.emit(f"{a}_r = scf.for %b{d} = {c0} to {sizes[d]} step {c1} iter_args({a} = {acc}) -> ({tp}) {{")
            heads.append(f"{a}_r")
            acc = a

        def at(i: str) -> list[str]:
            return [i if d == axis else f"%b{d}" for d in range(rank)]

        dts = [t.dtype for t in ts[:nk]]
        L: list[str] = []
        # the row's positions 0..n-1
        L += [f"%pos0e = tensor.empty({nn}) : {tr}",
              f"%pos0 = scf.for %q = {c0} to {nn} step {c1} iter_args(%t = %pos0e) -> ({tr}) {{",
              "  %qi = arith.index_cast %q : index to i32",
              f"  %t2 = tensor.insert %qi into %t[%q] : {tr}", f"  scf.yield %t2 : {tr}", "}"]
        # while w < n: merge runs [lo, lo + w) and [lo + w, lo + 2w) of A into a fresh B
        L += [f"%srt:2 = scf.while (%w = {c1}, %A = %pos0) : (index, {tr}) -> (index, {tr}) {{",
              f"  %more = arith.cmpi slt, %w, {nn} : index", f"  scf.condition(%more) %w, %A : index, {tr}",
              f"}} do {{", f"^bb0(%w1: index, %A1: {tr}):",
              "  %w2 = arith.addi %w1, %w1 : index", f"  %be = tensor.empty({nn}) : {tr}",
              f"  %B = scf.for %lo = {c0} to {nn} step %w2 iter_args(%Bt = %be) -> ({tr}) {{",
              "    %mid0 = arith.addi %lo, %w1 : index", f"    %mid = arith.minsi %mid0, {nn} : index",
              "    %hi0 = arith.addi %lo, %w2 : index", f"    %hi = arith.minsi %hi0, {nn} : index",
              f"    %mm1 = arith.subi %mid, {c1} : index", f"    %hm1 = arith.subi %hi, {c1} : index",
              f"    %mg:3 = scf.for %p = %lo to %hi step {c1} iter_args(%i = %lo, %j = %mid, %Bm = %Bt) -> "
              f"(index, index, {tr}) {{",
              "      %ii = arith.minsi %i, %mm1 : index", "      %jj = arith.minsi %j, %hm1 : index",
              f"      %xi = tensor.extract %A1[%ii] : {tr}", f"      %xj = tensor.extract %A1[%jj] : {tr}",
              "      %xii = arith.index_cast %xi : i32 to index", "      %xji = arith.index_cast %xj : i32 to index"]
        ka, kb = [], []
        for q in range(nk):
            L += [f"      %ka{q} = tensor.extract {k.inp(q)}[{', '.join(at('%xii'))}] : {k.ty(ts[q])}",
                  f"      %kb{q} = tensor.extract {k.inp(q)}[{', '.join(at('%xji'))}] : {k.ty(ts[q])}"]
            ka.append(f"%ka{q}")
            kb.append(f"%kb{q}")
        # take the left element unless the right one is strictly before it (stable), or the left
        # run is used up; never the right one once it is used up
        L += ["      " + x for x in _lex_less(dts, desc, raw, kb, ka, "%rb")]
        L += ["      %lok = arith.cmpi slt, %i, %mid : index", "      %rok = arith.cmpi slt, %j, %hi : index",
              "      %tru = arith.constant true", "      %nrb = arith.xori %rb, %tru : i1",
              "      %nrok = arith.xori %rok, %tru : i1", "      %pref = arith.ori %nrb, %nrok : i1",
              "      %left = arith.andi %lok, %pref : i1",
              "      %v = arith.select %left, %xi, %xj : i32",
              f"      %Bn = tensor.insert %v into %Bm[%p] : {tr}",
              f"      %i1 = arith.addi %i, {c1} : index", f"      %j1 = arith.addi %j, {c1} : index",
              "      %in = arith.select %left, %i1, %i : index", "      %jn = arith.select %left, %j, %j1 : index",
              f"      scf.yield %in, %jn, %Bn : index, index, {tr}", "    }",
              f"    scf.yield %mg#2 : {tr}", "  }",
              # (copied back into A: a while loop's yield must be its own iter buffer to bufferize)
              f"  %A2 = linalg.copy ins(%B : {tr}) outs(%A1 : {tr}) -> {tr}",
              f"  scf.yield %w2, %A2 : index, {tr}", "}"]
        # the row into the positions tensor, element by element (an insert_slice would be a strided
        # view of the buffer, which the GPU targets' flat buffers do not take)
        L += [f"%row = scf.for %p2 = {c0} to {nn} step {c1} iter_args(%pr = {acc}) -> ({tp}) {{",
              f"  %pv = tensor.extract %srt#1[%p2] : {tr}",
              f"  %pr2 = tensor.insert %pv into %pr[{', '.join(at('%p2'))}] : {tp}",
              f"  scf.yield %pr2 : {tp}", "}"]
        for l in L:
            k.emit("  " * (len(batch)) + l)
        res = "%row"
        if heads:
            k.emit("  " * len(batch) + f"scf.yield %row : {tp}")
            for j in range(len(heads) - 1, 0, -1):
                k.emit("}")
                k.emit(f"scf.yield {heads[j]} : {tp}")
            k.emit("}")
            res = heads[0]
        # out[..., p, ...] = operand[..., perm[..., p, ...], ...]
        body = [f"%g{d} = linalg.index {d} : index" for d in range(rank)]
        body.append("%src = arith.index_cast %a0 : i32 to index")
        coords = ["%src" if d == axis else f"%g{d}" for d in range(rank)]
        outs = []
        for i, t in enumerate(ts):
            body.append(f"%r{i} = tensor.extract {k.inp(i)}[{', '.join(coords)}] : {k.ty(t)}")
            outs.append(f"%r{i}")
        g = k.generic([(res, pt, identity_map(rank))], [(k.out(i), t, identity_map(rank)) for i, t in enumerate(rs)],
                      ["parallel"] * rank, body, outs)
        return Legalized(k, g)

    @classmethod
    def rank_sort(cls, op: OpInfo) -> Legalized:
        """Short static rows: each element's stable rank from all pairs of the row (O(n^2)
        compares, all parallel linalg), then a select of the element of each rank."""
        ts, dims, axis, nk, desc, raw = cls.config(op)
        rs = op.result_types
        rank = len(dims)
        k = Kernel("sort", ts, rs)
        # 1. rank[i] = #{j : key[j] before key[i], or equal and j < i} (a stable position), over an
        #    extra reduction dim j after the operand's dims.
        ct = TensorType(rs[0].dims, "i32")
        cnt = k.fill("0", k.empty(ct, dims_from=(k.out(0), rs[0])), ct)
        n = rank + 1
        at_i = affine_map(n, [f"d{i}" for i in range(rank)])
        at_j = affine_map(n, [f"d{rank}" if i == axis else f"d{i}" for i in range(rank)])
        ins = [(k.inp(i), ts[i], at_i) for i in range(nk)] + [(k.inp(i), ts[i], at_j) for i in range(nk)]
        a = [f"%a{i}" for i in range(nk)]
        b = [f"%a{nk + i}" for i in range(nk)]
        dts = [t.dtype for t in ts[:nk]]
        body = _lex_less(dts, desc, raw, b, a, "%jb") + _lex_less(dts, desc, raw, a, b, "%ib")
        body += [f"%ii = linalg.index {axis} : index", f"%jj = linalg.index {rank} : index",
                 "%jlt = arith.cmpi slt, %jj, %ii : index", "%t = arith.constant true",
                 "%nib = arith.xori %ib, %t : i1", "%njb = arith.xori %jb, %t : i1",
                 "%eq = arith.andi %nib, %njb : i1", "%tie = arith.andi %eq, %jlt : i1",
                 "%before = arith.ori %jb, %tie : i1", "%one = arith.extui %before : i1 to i32",
                 "%c = arith.addi %o0, %one : i32"]
        its = ["parallel"] * rank + ["reduction"]
        rk = k.generic(ins, [(cnt, ct, at_i)], its, body, ["%c"])[0]
        # 2. out[p] = the operand element whose rank is p (exactly one i has it).
        at_p = at_i
        ins2 = [(rk, ct, at_j)] + [(k.inp(i), t, at_j) for i, t in enumerate(ts)]
        outs = [(k.out(i), t, at_p) for i, t in enumerate(rs)]
        body2 = [f"%pp = linalg.index {axis} : index", "%pi = arith.index_cast %pp : index to i32",
                 "%hit = arith.cmpi eq, %a0, %pi : i32"]
        res = []
        for i, t in enumerate(ts):
            body2.append(f"%r{i} = arith.select %hit, %a{i + 1}, %o{i} : {t.dtype}")
            res.append(f"%r{i}")
        g = k.generic(ins2, outs, its, body2, res)
        return Legalized(k, g)
