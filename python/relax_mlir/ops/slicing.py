"""Slicing with run-time offsets, padding and reversal: dynamic_slice, dynamic_update_slice, pad,
reverse (StableHLO semantics; static slices with symbolic positions are relax.strided_slice)."""
from __future__ import annotations

from mlir import ir

from relax_mlir.dialect.spec import (OPS, DeduceError, OpInfo, OpSpec, TENSOR, attr, attr_dict, operand, relax_op,
                                     result_)
from relax_mlir.dialect.build import array_attr
from relax_mlir.dialect.types import INT_DTYPES, TensorType, as_dim, view
from relax_mlir.ops.common import ONE, ZERO, fmt_dims, normalize_axis, require_rank, symbols_note
from relax_mlir.ops.kernel import Kernel, Legalized, affine_map, identity_map
from relax_mlir.patterns import RewritePattern
from relax_mlir.shape import Expr, max_
from relax_mlir.ops.elementwise import BinaryOp, UnaryOp


def _int_list(op: OpInfo, name: str, n: int) -> list[int]:
    v = op.attr(name)
    if v is None or not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise DeduceError(f"requires '{name}', an array of {n} integers")
    if len(v) != n:
        raise DeduceError(f"'{name}' has {len(v)} entries, expected {n} (the operand's rank)")
    return list(v)


def _starts(op: OpInfo, first: int, rank: int) -> list[TensorType]:
    """The scalar start-index operands (operands first..): `rank` 0-d integer tensors."""
    starts = [op.tensor(i) for i in range(first, len(op.operand_types))]
    if len(starts) != rank:
        raise DeduceError(f"takes {rank} start indices (the operand's rank), got {len(starts)}")
    for i, s in enumerate(starts):
        if s.dims is None or len(s.dims) != 0 or s.dtype not in INT_DTYPES or s.dtype == "i1":
            raise DeduceError(f"start index #{i} must be a 0-d integer tensor, got {s}")
    return starts


def _clamped_offsets(k: Kernel, x: TensorType, x_val: str, sizes: list[str], first: int,
                     starts: list[TensorType]) -> list[str]:
    """StableHLO's start clamp, per dim: clamp(start, 0, dim - size) as `index` values (the sizes
    are known to fit, so dim - size >= 0)."""
    offs = []
    zero = k.const_index(0)
    for i, st in enumerate(starts):
        n = k.dim(x_val, x, i)
        v, ix = k.fresh("st"), k.fresh("ix")
        k.emit(f"{v} = tensor.extract {k.inp(first + i)}[] : {k.ty(st)}")
        k.emit(f"{ix} = arith.index_cast {v} : {st.dtype} to index")
        hi, neg, lo, big, cl = (k.fresh(b) for b in ("hi", "neg", "lo", "big", "cl"))
        k.emit(f"{hi} = arith.subi {n}, {sizes[i]} : index")
        k.emit(f"{neg} = arith.cmpi slt, {ix}, {zero} : index")
        k.emit(f"{lo} = arith.select {neg}, {zero}, {ix} : index")
        k.emit(f"{big} = arith.cmpi sgt, {lo}, {hi} : index")
        k.emit(f"{cl} = arith.select {big}, {hi}, {lo} : index")
        offs.append(cl)
    return offs


def _index_sizes(k: Kernel, value: str, t: TensorType) -> list[str]:
    """Each dim of `value` as an `index` SSA value."""
    return [k.dim(value, t, i) for i in range(len(t.dims))]


def _literal_sizes(k: Kernel, value: str, t: TensorType) -> list[str]:
    """Each dim of `value` as a slice size: a literal when static, else an `index` value."""
    return [str(d.value) if d is not None and d.is_const else k.dim(value, t, i) for i, d in enumerate(t.dims)]


def _is_zero(d: Expr | None) -> bool:
    return d is not None and d.is_const and d.value == 0


def _require_fits(op: OpInfo, sizes, dims, what: str) -> None:
    """A size provably larger than its dim is an error; one not provably <= is checked at run
    time (`_fit_requirements`)."""
    for i, (s, d) in enumerate(zip(sizes, dims)):
        if d is None:
            raise DeduceError(f"operand dim {i} is unknown ('?'); the {what} needs it")
        if op.facts.prove_lt(d, s):
            raise DeduceError(f"the {what} size {s} of dim {i} exceeds the operand's dim {d}" + symbols_note(s, d))


def _fit_requirements(sizes, dims, what: str) -> list:
    return [(s, d, f"the {what} size {s} of dim {i} exceeds the operand's dim {d}")
            for i, (s, d) in enumerate(zip(sizes, dims)) if d is not None and s is not None]


# --- canonicalization --------------------------------------------------------------------------

def _is_one(d) -> bool:
    return d is not None and d.is_const and d.value == 1


def _same_value(a: ir.Value, b: ir.Value) -> bool:
    """The same SSA value, or two relax.constant results of one type and value (the zero starts
    this pattern makes)."""
    if a == b:
        return True
    oa, ob = getattr(a, "owner", None), getattr(b, "owner", None)
    return (isinstance(oa, (ir.Operation, ir.OpView)) and isinstance(ob, (ir.Operation, ir.OpView))
            and oa.name == ob.name == "relax.constant" and a.type == b.type
            and str(oa.attributes["value"]) == str(ob.attributes["value"]))


def _existing(name: str, operands: list[ir.Value], attrs: dict, result: ir.Type, anchor,
              key: int = 0) -> ir.Value | None:
    """The result of an op `name` on these operands, attributes and result type already in
    `anchor`'s block before it, if there is one: what sinking a slice through a shared value made
    for another of its uses (without this reuse, slices sunk through a DAG of shared values, as
    a complex expm1's, multiply along every path: seed 2430542 did not converge)."""
    block = anchor.operation.block
    want = {k: str(v) for k, v in attrs.items()}
    for use in operands[key].uses:  # (a sliced operand: few uses, unlike a shared scalar)
        u = use.owner
        u = u.operation if isinstance(u, ir.OpView) else u
        if u.name != name or len(u.results) != 1 or u.results[0].type != result or u.block != block \
                or not u.is_before_in_block(anchor.operation) or len(u.operands) != len(operands):
            continue
        if all(_same_value(p, q) for p, q in zip(u.operands, operands)) and \
                {k: str(v) for k, v in attr_dict(u).items()} == want:
            return u.results[0]
    return None


def _sliced(x: ir.Value, starts: list[ir.Value], sizes, loc, anchor) -> ir.Value:
    """A `relax.dynamic_slice` of x (at the current insertion point, before `anchor`), or the
    same slice already made before it."""
    t = view(x.type)
    r = TensorType(tuple(sizes), t.dtype).to_mlir()
    attrs = {"sizes": array_attr(sizes)}
    same = _existing("relax.dynamic_slice", [x, *starts], attrs, r, anchor)
    if same is not None:
        return same
    return ir.Operation.create("relax.dynamic_slice", results=[r], operands=[x, *starts], attributes=attrs,
                               loc=loc).results[0]


def _zero_start(like: ir.Value, loc) -> ir.Value:
    """A 0-d integer constant 0 of `like`'s dtype (a start index)."""
    t = view(like.type)
    et = ir.IntegerType.get_signless(int(t.dtype[1:]))
    value = ir.DenseElementsAttr.get_splat(ir.RankedTensorType.get([], et), ir.IntegerAttr.get(et, 0))
    return ir.Operation.create("relax.constant", results=[like.type], attributes={"value": value},
                               loc=loc).results[0]


class SliceBeforeCompute(RewritePattern):
    """A dynamic_slice of an elementwise op, a broadcast_to or a reshape that only adds or drops
    unit dims computes the slice from sliced operands: the operation then runs on the slice, not
    on the whole operand. (A causal mask built at the maximum context, [T, T], of which a decode
    step reads one row of its cache length: the row is computed, not the table.)

    StableHLO clamps each start into [0, dim - size]. Through an elementwise op without implicit
    broadcasting every operand has the result's dims (or is 0-d: it stays), so the clamped starts are
    the same. Through
    broadcast_to a broadcast dim (1 -> n) is sliced at 0 with size 1 and broadcast to the slice's
    size; an aligned dim keeps its start (equal dims, equal clamp); the added leading dims are
    dropped. Through a reshape the non-unit dims correspond one to one (equal dims, equal clamp)
    and a unit dim's start is clamped to 0 whatever it is."""

    def match_and_rewrite(self, op, rewriter) -> bool:
        x = op.operands[0]
        if not isinstance(x, ir.OpResult):
            return False
        src = x.owner
        name = src.name
        r, xt = view(op.results[0].type), view(x.type)
        if not (isinstance(r, TensorType) and r.known and isinstance(xt, TensorType) and xt.known):
            return False
        if any(d.is_const and d.value == 0 for d in r.dims):
            return False
        starts, sizes, loc = list(op.operands[1:]), list(r.dims), op.location
        if name == "relax.broadcast_to":
            return self._through_broadcast(op, src, starts, sizes, loc, rewriter)
        if name == "relax.reshape":
            return self._through_reshape(op, src, starts, sizes, loc, rewriter)
        spec = OPS.get(name)
        if spec is None or not issubclass(spec, (BinaryOp, UnaryOp)) or len(src.results) != 1:
            return False
        types = [view(v.type) for v in src.operands]
        if any(t.dims != () and t != TensorType(xt.dims, t.dtype) for t in types):
            return False  # implicit broadcasting of a non-scalar operand: not sliced here
        if all(t.dims == () for t in types):
            return False  # a 0-d result: its slice is itself
        with rewriter.ip:
            operands = [v if t.dims == () else _sliced(v, starts, sizes, loc, op) for v, t in zip(src.operands, types)]
            rt = TensorType(tuple(sizes), xt.dtype).to_mlir()
            key = next(i for i, t in enumerate(types) if t.dims != ())  # (one is: checked above)
            same = _existing(name, operands, attr_dict(src), rt, op, key)
            if same is not None:
                rewriter.replace_op(op, [same])
                return True
            new = ir.Operation.create(name, results=[rt], operands=operands, attributes=attr_dict(src), loc=loc)
        rewriter.replace_op(op, new)
        return True

    @staticmethod
    def _through_broadcast(op, src, starts, sizes, loc, rewriter) -> bool:
        y = src.operands[0]
        yt, xt = view(y.type), view(src.results[0].type)
        if not isinstance(yt, TensorType) or not yt.known:
            return False
        lead = len(xt.dims) - len(yt.dims)
        new_starts, new_sizes, zero = [], [], None
        with rewriter.ip:
            for i, d in enumerate(yt.dims):
                j = lead + i
                if _is_one(d) and not _is_one(xt.dims[j]):
                    zero = zero or _zero_start(starts[j], loc)
                    new_starts.append(zero)
                    new_sizes.append(d)
                else:
                    new_starts.append(starts[j])
                    new_sizes.append(sizes[j])
            s = _sliced(y, new_starts, new_sizes, loc, op)
            new = ir.Operation.create("relax.broadcast_to", results=[op.results[0].type], operands=[s],
                                      attributes={"shape": array_attr(sizes)}, loc=loc)
        rewriter.replace_op(op, new)
        return True

    @staticmethod
    def _through_reshape(op, src, starts, sizes, loc, rewriter) -> bool:
        if len(src.operands) != 1:  # relax-lower-shapes has run (dims operands)
            return False
        y = src.operands[0]
        yt, xt = view(y.type), view(src.results[0].type)
        if not isinstance(yt, TensorType) or not yt.known:
            return False
        x_big = [j for j, d in enumerate(xt.dims) if not _is_one(d)]
        y_big = [i for i, d in enumerate(yt.dims) if not _is_one(d)]
        if len(x_big) != len(y_big) or any(xt.dims[j] != yt.dims[i] for i, j in zip(y_big, x_big)):
            return False
        if any(not _is_one(sizes[j]) for j, d in enumerate(xt.dims) if _is_one(d)):
            return False
        if not starts and len(y_big) != len(yt.dims):
            return False  # a 0-d slice of a reshaped [1, ..., 1]: nothing to gain
        of_y = dict(zip(y_big, x_big))
        with rewriter.ip:
            zero = None
            new_starts, new_sizes = [], []
            for i, d in enumerate(yt.dims):
                if i in of_y:
                    new_starts.append(starts[of_y[i]])
                    new_sizes.append(sizes[of_y[i]])
                else:
                    zero = zero or _zero_start(starts[0], loc)
                    new_starts.append(zero)
                    new_sizes.append(d)
            s = _sliced(y, new_starts, new_sizes, loc, op)
            new = ir.Operation.create("relax.reshape", results=[op.results[0].type], operands=[s],
                                      attributes={"shape": array_attr(sizes)}, loc=loc)
        rewriter.replace_op(op, new)
        return True


@relax_op
class DynamicSliceOp(OpSpec):
    """Slice of static `sizes` at run-time start indices (StableHLO dynamic_slice: each start is
    clamped into [0, dim - size]). Operands: x, then one 0-d integer tensor per dim. Attribute:
    sizes (array of non-negative int, each provably <= its dim)."""

    name = "relax.dynamic_slice"
    x = operand(TENSOR)
    starts = operand(TENSOR, variadic=True)
    result = result_(TENSOR)
    sizes = attr("array", optional=False, doc="the slice sizes (int or expression strings)")
    canonicalization_patterns = (SliceBeforeCompute,)

    @classmethod
    def sizes_of(cls, op: OpInfo, rank: int) -> list[Expr]:
        v = op.attr("sizes")
        if v is None or not isinstance(v, list) or len(v) != rank:
            raise DeduceError(f"requires 'sizes', an array of {rank} sizes (the operand's rank)")
        out = []
        for s in v:
            try:
                e = as_dim(s)
            except ValueError as err:
                raise DeduceError(f"sizes: {err}")
            if e is None or not op.facts.prove_ge(e, ZERO):
                raise DeduceError(f"sizes must be non-negative, got {s}")
            out.append(e)
        return out

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = require_rank(x, "operand")
        _starts(op, 1, len(d))
        sizes = cls.sizes_of(op, len(d))
        _require_fits(op, sizes, d, "slice")
        return [TensorType(tuple(sizes), x.dtype)]

    @classmethod
    def requirements(cls, op: OpInfo):
        """Each size <= its dim (checked at run time where not provable)."""
        d = op.tensor(0).dims
        return _fit_requirements(cls.sizes_of(op, len(d)), d, "slice")

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, r = op.tensor(0), op.result_types[0]
        starts = [op.tensor(i) for i in range(1, len(op.operand_types))]
        k = Kernel("dynamic_slice", [x] + starts, [r])
        if any(_is_zero(d) for d in r.dims):
            return Legalized(k, [k.out(0)])
        lits = _literal_sizes(k, k.out(0), r)
        offs = _clamped_offsets(k, x, k.inp(0), _index_sizes(k, k.out(0), r), 1, starts)
        s = k.fresh("sl")
        rank = len(r.dims)
        k.emit(f"{s} = tensor.extract_slice {k.inp(0)}[{', '.join(offs)}] [{', '.join(lits)}] "
               f"[{', '.join(['1'] * rank)}] : {k.ty(x)} to {k.ty(r)}")
        g = k.generic([(s, r, identity_map(rank))], [(k.out(0), r, identity_map(rank))], ["parallel"] * rank,
                      [], ["%a0"])
        return Legalized(k, g)


@relax_op
class DynamicUpdateSliceOp(OpSpec):
    """x with `update` written at run-time start indices (StableHLO dynamic_update_slice: each
    start is clamped into [0, dim - update dim]). Operands: x, update (same rank and dtype, each
    dim provably <= x's), then one 0-d integer tensor per dim."""

    name = "relax.dynamic_update_slice"
    x = operand(TENSOR)
    update = operand(TENSOR)
    starts = operand(TENSOR, variadic=True)
    result = result_(TENSOR)

    @classmethod
    def deduce(cls, op: OpInfo):
        x, u = op.tensor(0), op.tensor(1)
        d = require_rank(x, "operand")
        ud = require_rank(u, "update")
        if len(ud) != len(d):
            raise DeduceError(f"update has rank {len(ud)}, operand rank {len(d)}")
        if u.dtype != x.dtype:
            raise DeduceError(f"update has element type {u.dtype}, operand {x.dtype}")
        _starts(op, 2, len(d))
        for i, s in enumerate(ud):
            if s is None:
                raise DeduceError(f"update dim {i} is unknown ('?')")
        _require_fits(op, ud, d, "update")
        return [TensorType(tuple(d), x.dtype)]

    @classmethod
    def requirements(cls, op: OpInfo):
        """Each update dim <= the operand's (checked at run time where not provable)."""
        return _fit_requirements(op.tensor(1).dims, op.tensor(0).dims, "update")

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, u, r = op.tensor(0), op.tensor(1), op.result_types[0]
        starts = [op.tensor(i) for i in range(2, len(op.operand_types))]
        k = Kernel("dynamic_update_slice", [x, u] + starts, [r], n_syms=1)
        rank = len(r.dims)
        ident = identity_map(rank)
        # Symbolic argument 0 is 1 when relax-plan-memory found x dead after this op and gave the
        # result x's storage: then the update goes into x itself (bufferization writes it in
        # place, no copy of x); else x is copied into the destination first. Both compute the
        # same tensor, so the flag never changes the result. (The kernel is inlined, the flag
        # a constant there: the other branch folds away.)
        inplace, acc = k.fresh("inplace"), k.fresh("acc")
        k.emit(f"{inplace} = arith.cmpi ne, {k.sym(0)}, {k.const_index(0)} : index")
        k.emit(f"{acc} = scf.if {inplace} -> ({k.ty(r)}) {{")
        k.emit(f"  scf.yield {k.inp(0)} : {k.ty(r)}")
        k.emit("} else {")
        cp0 = k.generic([(k.inp(0), x, ident)], [(k.out(0), r, ident)], ["parallel"] * rank, [], ["%a0"])[0]
        k.emit(f"  scf.yield {cp0} : {k.ty(r)}")
        k.emit("}")
        if any(_is_zero(d) for d in u.dims) or any(_is_zero(d) for d in r.dims):
            return Legalized(k, [acc], [ZERO])
        offs = _clamped_offsets(k, x, k.inp(0), _index_sizes(k, k.inp(1), u), 2, starts)
        where = f"[{', '.join(offs)}] [{', '.join(_literal_sizes(k, k.inp(1), u))}] [{', '.join(['1'] * rank)}]"
        # An elementwise copy into the destination's slice, then the slice put back: the CPU
        # backend vectorizes it in place (as relax_v.concat does).
        sl, ins = k.fresh("sl"), k.fresh("ins")
        k.emit(f"{sl} = tensor.extract_slice {acc}{where} : {k.ty(r)} to {k.ty(u)}")
        cp = k.generic([(k.inp(1), u, ident)], [(sl, u, ident)], ["parallel"] * rank, [], ["%a0"])[0]
        k.emit(f"{ins} = tensor.insert_slice {cp} into {acc}{where} : {k.ty(u)} into {k.ty(r)}")
        return Legalized(k, [ins], [ZERO])


@relax_op
class PadOp(OpSpec):
    """StableHLO pad: `low`/`high` elements of `pad_value` at each end of each dim (negative:
    cropped off) and `interior` elements between neighbours. Operands: x, pad_value (a 0-d tensor
    of x's dtype). Attributes: low, high (arrays of int), interior (array of non-negative int).
    Result dim: low + d + max(d - 1, 0) * interior + high, >= 0 where low and high are (d is a
    dim); with a negative amount, checked at run time where not provable."""

    name = "relax.pad"
    x = operand(TENSOR)
    pad_value = operand(TENSOR)
    result = result_(TENSOR)
    low = attr("array", optional=False)
    high = attr("array", optional=False)
    interior = attr("array", optional=False)

    @classmethod
    def result_dims(cls, op: OpInfo) -> list:
        x, p = op.tensor(0), op.tensor(1)
        d = require_rank(x, "operand")
        if p.dims is None or len(p.dims) != 0 or p.dtype != x.dtype:
            raise DeduceError(f"pad_value must be a 0-d tensor of {x.dtype}, got {p}")
        lo, hi, it = (_int_list(op, n, len(d)) for n in ("low", "high", "interior"))
        if any(v < 0 for v in it):
            raise DeduceError(f"interior padding must be non-negative, got {it}")
        out = []
        for i, n in enumerate(d):
            if n is None:
                out.append(None)
                continue
            gaps = ZERO if it[i] == 0 else (n - ONE if op.facts.prove_ge(n, ONE) else max_(n - ONE, ZERO))
            out.append(n + gaps * it[i] + lo[i] + hi[i])
        return out

    @classmethod
    def deduce(cls, op: OpInfo):
        return [TensorType(tuple(cls.result_dims(op)), op.tensor(0).dtype)]

    @classmethod
    def requirements(cls, op: OpInfo):
        """A result dim that crops (a negative low or high) is >= 0: checked at run time where
        not provable. (With low, high >= 0 it is: the operand's dim is.)"""
        d = op.tensor(0).dims
        lo, hi = (_int_list(op, n, len(d)) for n in ("low", "high"))
        return [(ZERO, e, f"dim {i} of the result, {e}, is negative (operand {fmt_dims(d)}, low {lo[i]}, high {hi[i]})")
                for i, e in enumerate(cls.result_dims(op)) if e is not None and (lo[i] < 0 or hi[i] < 0)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, p, r = op.tensor(0), op.tensor(1), op.result_types[0]
        rank = len(r.dims)
        lo, hi, it = (list(op.attr(n)) for n in ("low", "high", "interior"))
        k = Kernel("pad", [x, p], [r])
        if any(_is_zero(d) for d in r.dims):
            return Legalized(k, [k.out(0)])
        ns = [k.dim(k.inp(0), x, i) for i in range(rank)]
        # Per output element: source position j = o - low; it reads x[j / (interior + 1)] when
        # j >= 0, j is a multiple of interior + 1 and the quotient is < dim; else the pad value.
        body = ["%zero = arith.constant 0 : index", "%true = arith.constant true"]
        ok, coords = "%true", []
        for i in range(rank):
            step = it[i] + 1
            body += [f"%ix{i} = linalg.index {i} : index", f"%lw{i} = arith.constant {lo[i]} : index",
                     f"%j{i} = arith.subi %ix{i}, %lw{i} : index",
                     f"%ge{i} = arith.cmpi sge, %j{i}, %zero : index",
                     f"%jc{i} = arith.select %ge{i}, %j{i}, %zero : index"]
            if step == 1:
                q = f"%jc{i}"
                cond = f"%ge{i}"
            else:
                body += [f"%st{i} = arith.constant {step} : index",
                         f"%q{i} = arith.divui %jc{i}, %st{i} : index",
                         f"%rm{i} = arith.remui %jc{i}, %st{i} : index",
                         f"%ex{i} = arith.cmpi eq, %rm{i}, %zero : index",
                         f"%cd{i} = arith.andi %ge{i}, %ex{i} : i1"]
                q, cond = f"%q{i}", f"%cd{i}"
            body += [f"%lt{i} = arith.cmpi slt, {q}, {ns[i]} : index", f"%v{i} = arith.andi {cond}, %lt{i} : i1",
                     f"%ok{i} = arith.andi {ok}, %v{i} : i1"]
            ok = f"%ok{i}"
            coords.append(q)
        body += [f"%val = scf.if {ok} -> ({r.dtype}) {{",
                 f"  %e = tensor.extract {k.inp(0)}[{', '.join(coords)}] : {k.ty(x)}",
                 f"  scf.yield %e : {r.dtype}", "} else {", f"  scf.yield %a0 : {r.dtype}", "}"]
        g = k.generic([(k.inp(1), p, affine_map(rank, []))], [(k.out(0), r, identity_map(rank))],
                      ["parallel"] * rank, body, ["%val"])
        return Legalized(k, g)


@relax_op
class ReverseOp(OpSpec):
    """Reverse the order of elements along the given dims (StableHLO reverse). Attribute:
    dimensions (array of distinct int)."""

    name = "relax.reverse"
    x = operand(TENSOR)
    result = result_(TENSOR)
    dimensions = attr("array", optional=False)

    @classmethod
    def axes(cls, op: OpInfo, rank: int) -> list[int]:
        dims = op.attr("dimensions")
        if dims is None or not isinstance(dims, list) or not all(isinstance(a, int) for a in dims):
            raise DeduceError("requires 'dimensions', an array of integers")
        axes = [normalize_axis(a, rank) for a in dims]
        if len(set(axes)) != len(axes):
            raise DeduceError(f"dimensions {dims} repeat a dim")
        return axes

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = require_rank(x, "operand")
        cls.axes(op, len(d))
        return [TensorType(tuple(d), x.dtype)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, r = op.tensor(0), op.result_types[0]
        rank = len(r.dims)
        axes = set(cls.axes(op, rank))
        k = Kernel("reverse", [x], [r])
        if any(_is_zero(d) for d in r.dims):
            return Legalized(k, [k.out(0)])
        if not axes:
            g = k.generic([(k.inp(0), x, identity_map(rank))], [(k.out(0), r, identity_map(rank))],
                          ["parallel"] * rank, [], ["%a0"])
            return Legalized(k, g)
        ns = {i: k.dim(k.inp(0), x, i) for i in sorted(axes)}
        body = ["%one = arith.constant 1 : index"]
        coords = []
        for i in range(rank):
            body.append(f"%ix{i} = linalg.index {i} : index")
            if i in axes:
                body += [f"%l{i} = arith.subi {ns[i]}, %one : index", f"%r{i} = arith.subi %l{i}, %ix{i} : index"]
                coords.append(f"%r{i}")
            else:
                coords.append(f"%ix{i}")
        body.append(f"%v = tensor.extract {k.inp(0)}[{', '.join(coords)}] : {k.ty(x)}")
        g = k.generic([], [(k.out(0), r, identity_map(rank))], ["parallel"] * rank, body, ["%v"])
        return Legalized(k, g)
