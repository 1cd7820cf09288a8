"""Shape manipulation: matmul, permute_dims, reshape, broadcast_to, concat, split, strided_slice,
take."""
from __future__ import annotations

import numpy as np
from mlir import ir

from relax_mlir.dialect.spec import (INDEX, DeduceError, OpInfo, OpSpec, TENSOR, attr, operand, py_attr, relax_op,
                                    result_)
from relax_mlir.dialect.types import FLOAT_DTYPES, INT_DTYPES, TensorType, as_dim, view
from relax_mlir.ops.common import (FREE, ONE, ZERO, aligned_requirements, broadcast_shapes, dims_equal, fmt_dims,
                                   has_division, normalize_axis, product, require_rank, require_same_dtype,
                                   splat_constant, splat_source, symbols_note)
from relax_mlir.ops.kernel import (Kernel, Legalized, LegalizeError, affine_map, broadcast_map, identity_map,
                                   zero_literal)
from relax_mlir.ops.grouped import ContiguousOperandTranspose, GroupedMatmul, RepeatBeforePermute, SliceBeforeMatmul
from relax_mlir.patterns import RewritePattern
from relax_mlir.shape import Expr, ceildiv, const, min_, max_


@relax_op
class MatmulOp(OpSpec):
    """Batched matrix product with numpy (`np.matmul`) semantics."""

    name = "relax.matmul"
    lhs = operand(TENSOR)
    rhs = operand(TENSOR)
    result = result_(TENSOR)
    canonicalization_patterns = (GroupedMatmul, ContiguousOperandTranspose)

    @classmethod
    def deduce(cls, op: OpInfo):
        a, b = op.tensor(0), op.tensor(1)
        dt = require_same_dtype([a, b], ["lhs", "rhs"])
        ad, bd = require_rank(a, "lhs"), require_rank(b, "rhs")
        if not ad or not bd:
            raise DeduceError("operands of matmul must have rank >= 1")
        la = ad if len(ad) > 1 else (ONE,) + ad
        lb = bd if len(bd) > 1 else bd + (ONE,)
        k1, k2 = la[-1], lb[-2]
        if k1 is not None and k2 is not None and not dims_equal(k1, k2, op.facts):
            raise DeduceError(f"inner dimensions differ: {k1} vs {k2}" + symbols_note(k1, k2))
        batch = broadcast_shapes([la[:-2], lb[:-2]], ["lhs", "rhs"], op.facts) if (len(la) > 2 or len(lb) > 2) else ()
        dims = list(batch)
        if len(ad) > 1:
            dims.append(la[-2])
        if len(bd) > 1:
            dims.append(lb[-1])
        return [TensorType(tuple(dims), dt)]

    @classmethod
    def unknown_dims(cls, op: OpInfo, results):
        """Batch dims follow the result (broadcast), M and N are the result's, an unknown K must
        equal the other operand's K."""
        ad, bd = op.tensor(0).dims, op.tensor(1).dims
        r = results[0].dims
        ka, kb = ad[-1], (bd[0] if len(bd) == 1 else bd[-2])
        nb = len(r) - (len(ad) > 1) - (len(bd) > 1)
        batch = r[:nb]

        def side(d, is_lhs):
            if len(d) == 1:
                return ((kb if is_lhs else ka),)
            out = list(aligned_requirements(d[:-2], batch)) if len(d) > 2 else []
            mn = r[nb] if is_lhs else r[-1]
            out += [mn, kb, ] if is_lhs else [ka, mn]
            return tuple(out)

        return [side(ad, True), side(bd, False)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        a, b = op.tensor(0), op.tensor(1)
        r = op.result_types[0]
        k = Kernel("matmul", [a, b], [r])
        float_ = a.dtype in FLOAT_DTYPES
        lead_dynamic = sum(1 for d in r.dims[:-1] if not d.is_const)
        # (memref.expand_shape lowering allows at most one dynamic size per reassociation group.)
        boolean = a.dtype == "i1"  # StableHLO dot on i1: or of ands (linalg.matmul would add with xor)
        half = a.dtype in ("f16", "bf16")
        if len(b.dims) == 2 and len(a.dims) >= 2 and lead_dynamic <= 1 and not boolean:
            # Collapse the leading dims of lhs into M: one 2-D linalg.matmul (library- and schedule-friendly).
            lhs, out = k.inp(0), k.out(0)
            groups = [list(range(len(a.dims) - 1)), [len(a.dims) - 1]]
            a2, r2 = _collapsed(a, groups), _collapsed(r, groups)
            if len(a.dims) > 2:
                lhs = k.fresh("lhs")
                k.emit(f"{lhs} = tensor.collapse_shape {k.inp(0)} {_reassoc(groups)} : {k.ty(a)} into {k.ty(a2)}")
                out = k.fresh("o")
                k.emit(f"{out} = tensor.collapse_shape {k.out(0)} {_reassoc(groups)} : {k.ty(r)} into {k.ty(r2)}")
            if half:  # products and sums in f32, rounded once at the end (XLA's dot on f16/bf16)
                acc_t = TensorType(r2.dims, "f32")
                f = k.fill("0.0", k.empty(acc_t, (out, r2)), acc_t)
            else:
                acc_t, f = r2, k.fill(zero_literal(a.dtype), out, r2)
            m = k.fresh("mm")
            k.emit(f"{m} = linalg.matmul ins({lhs}, {k.inp(1)} : {k.ty(a2)}, {k.ty(b)}) "
                   f"outs({f} : {k.ty(acc_t)}) -> {k.ty(acc_t)}")
            if half:
                m = k.generic([(m, acc_t, identity_map(2))], [(out, r2, identity_map(2))], ["parallel"] * 2,
                              [f"%t = arith.truncf %a0 : f32 to {a.dtype}"], ["%t"])[0]
            if len(a.dims) > 2:
                sizes = [k.dim(k.out(0), r, i) if not (r.dims[i] is not None and r.dims[i].is_const)
                         else str(r.dims[i].value) for i in range(len(r.dims))]
                e = k.fresh("x")
                k.emit(f"{e} = tensor.expand_shape {m} {_reassoc(groups)} output_shape [{', '.join(sizes)}] : "
                       f"{k.ty(r2)} into {k.ty(r)}")
                m = e
            return Legalized(k, [m])
        # General batched form, with numpy broadcasting of batch dims and 1-D operands.
        la = a.dims if len(a.dims) > 1 else (ONE,) + a.dims
        lb = b.dims if len(b.dims) > 1 else b.dims + (ONE,)
        nb = max(len(la), len(lb)) - 2
        loops = nb
        m_ = n_ = None
        if len(a.dims) > 1:
            m_, loops = f"d{loops}", loops + 1
        if len(b.dims) > 1:
            n_, loops = f"d{loops}", loops + 1
        k_, nloops = f"d{loops}", loops + 1

        def batch_map(full_rank_dims):
            nbd = len(full_rank_dims) - 2
            res = []
            for j in range(nbd):
                i = nb - nbd + j
                d = full_rank_dims[j]
                od = r.dims[i]
                one = d is not None and d.is_const and d.value == 1
                res.append("0" if one and not (od is not None and od.is_const and od.value == 1) else f"d{i}")
            return res

        amap = batch_map(la) + ([m_, k_] if m_ else [k_])
        bmap = batch_map(lb) + ([k_, n_] if n_ else [k_])
        omap = [f"d{i}" for i in range(nb)] + ([m_] if m_ else []) + ([n_] if n_ else [])
        mul, add = ("arith.mulf", "arith.addf") if float_ else \
            ("arith.andi", "arith.ori") if boolean else ("arith.muli", "arith.addi")
        if half:  # products and sums in f32, rounded once at the end (XLA's dot on f16/bf16)
            acc_t = TensorType(r.dims, "f32")
            f = k.fill("0.0", k.empty(acc_t, (k.out(0), r)), acc_t)
            body = [f"%x = arith.extf %a0 : {a.dtype} to f32", f"%y = arith.extf %a1 : {a.dtype} to f32",
                    "%p = arith.mulf %x, %y fastmath<contract> : f32",
                    "%s = arith.addf %o0, %p fastmath<contract> : f32"]
        else:  # float products fused into the sum (XLA's dot), as the 2-D form's vector.contract
            acc_t, f = r, k.fill(zero_literal(a.dtype), k.out(0), r)
            fm = " fastmath<contract>" if float_ else ""
            body = [f"%p = {mul} %a0, %a1{fm} : {a.dtype}", f"%s = {add} %o0, %p{fm} : {a.dtype}"]
        g = k.generic([(k.inp(0), a, affine_map(nloops, amap)), (k.inp(1), b, affine_map(nloops, bmap))],
                      [(f, acc_t, affine_map(nloops, omap))], ["parallel"] * (nloops - 1) + ["reduction"], body, ["%s"])
        if half:
            rank = len(r.dims)
            g = k.generic([(g[0], acc_t, identity_map(rank))], [(k.out(0), r, identity_map(rank))], ["parallel"] * rank,
                          [f"%t = arith.truncf %a0 : f32 to {a.dtype}"], ["%t"])
        return Legalized(k, g)


@relax_op
class PermuteDimsOp(OpSpec):
    """Transpose. Attribute: axes (array of int; default reverses the dims)."""

    name = "relax.permute_dims"
    x = operand(TENSOR)
    result = result_(TENSOR)
    axes = attr("array", doc="the permutation")
    canonicalization_patterns = (RepeatBeforePermute,)

    @classmethod
    def axes_of(cls, op: OpInfo, rank: int) -> list[int]:
        axes = op.attr("axes")
        if axes is None:
            return list(range(rank))[::-1]
        if not isinstance(axes, list) or len(axes) != rank or not all(isinstance(a, int) for a in axes):
            raise DeduceError(f"axes {axes} are not a permutation of rank {rank}")
        out = [normalize_axis(a, rank, "permutation axis") for a in axes]  # -rank <= a < rank, as numpy
        if sorted(out) != list(range(rank)):
            raise DeduceError(f"axes {axes} are not a permutation of rank {rank}")
        return out

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = require_rank(x, "operand")
        return [TensorType(tuple(d[a] for a in cls.axes_of(op, len(d))), x.dtype)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, r = op.tensor(0), op.result_types[0]
        k = Kernel("permute_dims", [x], [r])
        perm = cls.axes_of(op, len(x.dims))
        t = k.fresh("t")
        k.emit(f"{t} = linalg.transpose ins({k.inp(0)} : {k.ty(x)}) outs({k.out(0)} : {k.ty(r)}) "
               f"permutation = [{', '.join(map(str, perm))}]")
        return Legalized(k, [t])


def _shape_attr(op: OpInfo, name: str = "shape") -> list:
    s = op.attr(name)
    if s is None or not isinstance(s, list):
        raise DeduceError(f"requires a '{name}' array attribute")
    try:
        return [int(v) if isinstance(v, int) else v for v in s]
    except Exception as e:  # pragma: no cover - attribute of a wrong kind
        raise DeduceError(f"'{name}' must hold integers or symbolic expressions: {e}")


def _exprs(vals: list, what: str) -> list[Expr]:
    out = []
    for v in vals:
        try:
            d = as_dim(v)
        except ValueError as e:
            raise DeduceError(f"{what}: {e}")
        if d is None:
            raise DeduceError(f"{what} may not contain '?'")
        out.append(d)
    return out


class FoldSplatConstantView(RewritePattern):
    """reshape/broadcast_to of a splat constant to a static shape -> one splat constant of that
    shape."""

    def match_and_rewrite(self, op, rewriter) -> bool:
        t = view(op.results[0].type)
        if not isinstance(t, TensorType) or not t.known or not all(d.is_const for d in t.dims):
            return False
        src = splat_source(op.operands[0])
        if src is None:
            return False
        with rewriter.ip:
            new = splat_constant(src, [d.value for d in t.dims], op.location)
        rewriter.replace_op(op, new)
        return True


def _same_after_common(a, b, facts) -> bool:
    """The products of dims `a` and `b` are equal once the dims they share (identical
    expressions, each once) are cancelled: [b, X] to [b, floordiv(n, 2), 1] when X equals
    floordiv(n, 2), which the prover shows alone and not as b*X vs b*floordiv(n, 2) (the gradient
    of a VALID max pool over a symbolic axis)."""
    if any(x is None for x in (*a, *b)):
        return False
    rest = list(b)
    left = []
    for x in a:
        for i, y in enumerate(rest):
            if x == y:
                del rest[i]
                break
        else:
            left.append(x)
    if len(left) + len(rest) == len(a) + len(b):
        return False  # nothing in common: the full products were compared already
    return dims_equal(product(left), product(rest), facts)


@relax_op
class ReshapeOp(OpSpec):
    """Reshape to a symbolic shape; the element count must provably stay the same.
    Attribute: shape (array of int or expression strings; one -1 is inferred)."""

    name = "relax.reshape"
    x = operand(TENSOR)
    dims = operand(INDEX, variadic=True)  # the result's dynamic dims, added by relax-lower-shapes
    result = result_(TENSOR)
    shape = attr("array", optional=False, doc="the new shape")
    canonicalization_patterns = (FoldSplatConstantView,)

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = require_rank(x, "operand")
        raw = _shape_attr(op)
        n_in = product(d)
        minus = [i for i, v in enumerate(raw) if v == -1]
        if len(minus) > 1:
            raise DeduceError("at most one dim of the new shape may be -1")
        if minus:
            rest = product(_exprs([v for i, v in enumerate(raw) if i != minus[0]], "shape"))
            if n_in is None:
                raise DeduceError("cannot infer the -1 dim of an operand with unknown dims")
            from relax_mlir.shape import floordiv
            inferred = floordiv(n_in, rest)
            if not op.facts.prove_eq(inferred * rest, n_in):
                raise DeduceError(f"cannot infer the -1 dim: {n_in} elements are not provably divisible by {rest}")
            new = [inferred if i == minus[0] else v for i, v in enumerate(raw)]
        else:
            new = raw
        dims = _exprs(new, "shape")
        n_out = product(dims)
        if n_in is not None and not dims_equal(n_in, n_out, op.facts) and not _same_after_common(d, dims, op.facts):
            raise DeduceError(
                f"cannot reshape {fmt_dims(d)} to {fmt_dims(dims)}: element counts {n_in} vs {n_out} "
                f"are not provably equal" + symbols_note(n_in, n_out))
        return [TensorType(tuple(dims), x.dtype)]

    @classmethod
    def unknown_dims(cls, op: OpInfo, results):
        """One unknown dim is the element count over the known ones (an element-count check);
        with two or more the count cannot be checked dim by dim: unresolved."""
        from relax_mlir.shape import floordiv

        d = op.tensor(0).dims
        unknown = [j for j, v in enumerate(d) if v is None]
        n_out = product(results[0].dims)
        if len(unknown) != 1 or n_out is None:
            return [(None,) * len(d)]
        known = product([v for v in d if v is not None])
        if known.is_const and known.value == 0:
            # Zero elements whatever the unknown dim is: only a zero-element result can match.
            if op.facts.prove_eq(n_out, ZERO):
                return [tuple(FREE if v is None else v for v in d)]
            raise DeduceError(f"cannot reshape {fmt_dims(d)} (no elements) to {fmt_dims(results[0].dims)}")
        if known.is_const and n_out.is_const:
            if n_out.value % known.value:
                raise DeduceError(f"cannot reshape {fmt_dims(d)} to {fmt_dims(results[0].dims)}: {n_out.value} "
                                  f"elements are not a multiple of {known.value}")
            q = const(n_out.value // known.value)
        else:
            q = floordiv(n_out, known)
            if not op.facts.prove_eq(q * known, n_out) or has_division(q):
                return [(None,) * len(d)]
        return [tuple(q if v is None else v for v in d)]


@relax_op
class BroadcastToOp(OpSpec):
    """Broadcast to a shape (numpy rules). Attribute: shape (array of int or expression strings)."""

    name = "relax.broadcast_to"
    x = operand(TENSOR)
    result = result_(TENSOR)
    shape = attr("array", optional=False, doc="the target shape")
    canonicalization_patterns = (FoldSplatConstantView,)

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = require_rank(x, "operand")
        target = _exprs(_shape_attr(op), "shape")
        if len(d) > len(target):
            raise DeduceError(f"cannot broadcast rank {len(d)} to rank {len(target)}")
        for i, s in enumerate(d):
            t = target[len(target) - len(d) + i]
            if s is None or (s.is_const and s.value == 1) or dims_equal(s, t, op.facts):
                continue
            raise DeduceError(f"cannot broadcast dim {i} of size {s} to {t}" + symbols_note(s, t))
        return [TensorType(tuple(target), x.dtype)]

    @classmethod
    def unknown_dims(cls, op: OpInfo, results):
        """An unknown dim must be the target dim (it is not broadcast from 1 at run time)."""
        return [aligned_requirements(op.tensor(0).dims, results[0].dims)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, r = op.tensor(0), op.result_types[0]
        k = Kernel("broadcast_to", [x], [r])
        rank = len(r.dims)
        g = k.generic([(k.inp(0), x, broadcast_map(x, rank, r))], [(k.out(0), r, identity_map(rank))],
                      ["parallel"] * rank, [], ["%a0"])
        return Legalized(k, g)


@relax_op
class ConcatOp(OpSpec):
    """Concatenate along an axis; the result dim is the sum. Attribute: axis (int, default 0)."""

    name = "relax_v.concat"
    inputs = operand(TENSOR, variadic=True)
    result = result_(TENSOR)
    axis = attr("int", default=0)

    @classmethod
    def deduce(cls, op: OpInfo):
        if not op.operand_types:
            raise DeduceError("needs at least one operand")
        ts = [op.tensor(i) for i in range(len(op.operand_types))]
        dt = require_same_dtype(ts, [f"operand #{i}" for i in range(len(ts))])
        ranks = {len(require_rank(t, "operand")) for t in ts}
        if len(ranks) != 1:
            raise DeduceError(f"operands have different ranks {sorted(ranks)}")
        rank = ranks.pop()
        axis = normalize_axis(op.attr("axis", 0), rank)
        dims = list(ts[0].dims)
        total = ZERO
        for i, t in enumerate(ts):
            for j in range(rank):
                if j == axis:
                    continue
                if dims[j] is None:
                    dims[j] = t.dims[j]
                elif t.dims[j] is not None and not dims_equal(dims[j], t.dims[j], op.facts):
                    raise DeduceError(f"operand #{i} dim {j} is {t.dims[j]}, expected {dims[j]}"
                                      + symbols_note(dims[j], t.dims[j]))
            total = None if (total is None or t.dims[axis] is None) else total + t.dims[axis]
        dims[axis] = total
        return [TensorType(tuple(dims), dt)]

    @classmethod
    def unknown_dims(cls, op: OpInfo, results):
        """Dims off the axis must be the result's; the axis dims only add up (unresolved)."""
        r = results[0].dims
        axis = normalize_axis(op.attr("axis", 0), len(r))
        return [tuple(None if j == axis else r[j] for j in range(len(r))) for _ in op.operand_types]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        ts = [op.tensor(i) for i in range(len(op.operand_types))]
        r = op.result_types[0]
        axis = normalize_axis(op.attr("axis", 0), len(r.dims))
        k = Kernel("concat", ts, [r])
        acc = k.out(0)
        if any(d.is_const and d.value == 0 for d in r.dims):  # an empty result: nothing to copy
            return Legalized(k, [acc])
        offset = "0"
        for i, t in enumerate(ts):
            if t.dims[axis].is_const and t.dims[axis].value == 0:  # an empty piece (its slice may start at the end)
                continue
            sizes = _sizes(k, k.inp(i), t)
            offs = ["0"] * len(r.dims)
            offs[axis] = offset
            # Each piece is copied by an elementwise generic into its slice of the destination, which
            # the CPU backend vectorizes in place. (A bare insert_slice bufferizes to a strided
            # memref.copy through the runtime's element-by-element copy: the decoder's KV-cache
            # concat took 2.0 ms at L = 2048 against jax's 0.37.)
            where = _slice_text(k, offs, sizes, ["1"] * len(r.dims))
            sl = k.fresh("sl")
            k.emit(f"{sl} = tensor.extract_slice {acc}{where} : {k.ty(r)} to {k.ty(t)}")
            rank = len(r.dims)
            cp = k.generic([(k.inp(i), t, identity_map(rank))], [(sl, t, identity_map(rank))], ["parallel"] * rank,
                           [], ["%a0"])[0]
            nxt = k.fresh("ins")
            k.emit(f"{nxt} = tensor.insert_slice {cp} into {acc}{where} : {k.ty(t)} into {k.ty(r)}")
            acc = nxt
            if i + 1 < len(ts):
                if offset == "0" and sizes[axis].lstrip("-").isdigit():
                    offset = sizes[axis]
                else:
                    o = k.fresh("off")
                    a = offset if not offset.lstrip("-").isdigit() else k.const_index(int(offset))
                    s = sizes[axis] if not sizes[axis].lstrip("-").isdigit() else k.const_index(int(sizes[axis]))
                    k.emit(f"{o} = arith.addi {a}, {s} : index")
                    offset = o
        return Legalized(k, [acc])


@relax_op
class SplitOp(OpSpec):
    """Split along an axis. Attributes: axis (int), and either sections (int, equal parts) or
    indices (array of split points)."""

    name = "relax_v.split"
    x = operand(TENSOR)
    results = result_(TENSOR, variadic=True)
    axis = attr("int", default=0)
    sections = attr("int")
    indices = attr("array")

    @classmethod
    def bounds(cls, op: OpInfo, dim: Expr | None) -> list[tuple[Expr, Expr | None]]:
        """[(begin, extent)] of each part."""
        from relax_mlir.shape import floordiv
        sections, indices = op.attr("sections"), op.attr("indices")
        if (sections is None) == (indices is None):
            raise DeduceError("needs exactly one of 'sections' or 'indices'")
        if sections is not None:
            if sections < 1:
                raise DeduceError(f"sections must be >= 1, got {sections}")
            if dim is None:
                return [(ZERO, None)] * sections
            part = floordiv(dim, sections)
            if not op.facts.prove_eq(part * sections, dim):
                raise DeduceError(f"dim {dim} is not provably divisible into {sections} sections" + symbols_note(dim))
            return [(part * i, part) for i in range(sections)]
        pts = [ZERO] + _exprs(indices, "indices")
        out = []
        for i, b in enumerate(pts):
            e = pts[i + 1] if i + 1 < len(pts) else dim
            if e is not None and op.facts.prove_lt(e, b):
                raise DeduceError(f"split indices must be increasing: {b} > {e}")
            out.append((b, None if e is None else e - b))
        return out

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = require_rank(x, "operand")
        axis = normalize_axis(op.attr("axis", 0), len(d))
        out = []
        for _, ext in cls.bounds(op, d[axis]):
            nd = list(d)
            nd[axis] = ext
            out.append(TensorType(tuple(nd), x.dtype))
        if op.result_types and len(op.result_types) != len(out):
            raise DeduceError(f"produces {len(out)} results, but {len(op.result_types)} are declared")
        return out

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x = op.tensor(0)
        rs = list(op.result_types)
        axis = normalize_axis(op.attr("axis", 0), len(x.dims))
        k = Kernel("split", [x], rs)
        offset = "0"
        outs = []
        for i, r in enumerate(rs):
            sizes = _sizes(k, k.out(i), r)
            offs = ["0"] * len(x.dims)
            offs[axis] = offset
            s = k.fresh("sl")
            k.emit(f"{s} = tensor.extract_slice {k.inp(0)}{_slice_text(k, offs, sizes, ['1'] * len(x.dims))} : "
                   f"{k.ty(x)} to {k.ty(r)}")
            outs.append(_copy(k, s, r, k.out(i), r))
            a = offset if not offset.isdigit() else k.const_index(int(offset))
            b = sizes[axis] if not sizes[axis].isdigit() else k.const_index(int(sizes[axis]))
            o = k.fresh("off")
            k.emit(f"{o} = arith.addi {a}, {b} : index")
            offset = o
        return Legalized(k, outs)


# dtypes whose dense constants numpy reads and writes element for element (i1 is packed bits,
# bf16 has no numpy type without ml_dtypes; unsigned constants are signless)
_NP_CONSTANT_DTYPES = {"f16": "float16", "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16",
                       "i32": "int32", "i64": "int64"}
_FOLD_SLICE_MAX_ELEMENTS = 4096


class FoldConstantSlice(RewritePattern):
    """strided_slice of a constant (static shape, constant positions) -> the sliced constant. The
    coefficient tables of polynomial approximations (jax.scipy.special.ndtri, erfinv ...) are
    arrays sliced into scalars: folded, each scalar is a splat that a kernel holds as an immediate,
    not one more buffer it reads (on Vulkan, ndtri's kernel needed 55 storage buffers, over the
    adapter's 32). Only small results, so that a large constant is not copied."""

    def match_and_rewrite(self, op, rewriter) -> bool:
        src = op.operands[0]
        if not isinstance(src, ir.OpResult) or src.owner.name != "relax.constant" \
                or "value" not in src.owner.attributes:
            return False
        x, r = view(src.type), view(op.results[0].type)
        if not (isinstance(x, TensorType) and isinstance(r, TensorType) and x.known and r.known) \
                or not all(d.is_const for d in (*x.dims, *r.dims)) or x.dtype not in _NP_CONSTANT_DTYPES:
            return False
        a = src.owner.attributes["value"]
        if not isinstance(a, ir.DenseElementsAttr) or a.is_splat:
            return False  # (a splat: FoldSplatConstantView's case and the elementwise ops' scalar operands)
        shape = [d.value for d in r.dims]
        if int(np.prod(shape, dtype=np.int64)) > _FOLD_SLICE_MAX_ELEMENTS:
            return False
        axes, begin, end = (py_attr(op.attributes[k]) for k in ("axes", "begin", "end"))
        strides = py_attr(op.attributes["strides"]) if "strides" in op.attributes else [1] * len(axes)
        if not all(isinstance(v, int) for v in (*axes, *begin, *end, *strides)) or any(v < 1 for v in strides):
            return False
        index = [slice(None)] * len(x.dims)
        for ax, b, e, st in zip(axes, begin, end, strides):
            index[ax % len(x.dims)] = slice(b, e, st)  # numpy's positions: the op's semantics
        dt = np.dtype(_NP_CONSTANT_DTYPES[x.dtype])
        dense = ir.DenseFPElementsAttr(a) if dt.kind == "f" else ir.DenseIntElementsAttr(a)
        values = np.asarray(dense).astype(dt, copy=False).reshape([d.value for d in x.dims])[tuple(index)]
        if list(values.shape) != shape:
            return False
        attr = ir.DenseElementsAttr.get(np.ascontiguousarray(values), type=ir.ShapedType(a.type).element_type,
                                        shape=shape)
        with rewriter.ip:
            new = ir.Operation.create("relax.constant", results=[op.results[0].type], attributes={"value": attr},
                                      loc=op.location)
        rewriter.replace_op(op, new)
        return True


@relax_op
class StridedSliceOp(OpSpec):
    """Slice `begin:end:stride` on the given axes (numpy semantics for constant positions: a negative
    constant counts from the end, positions clamp into [0, dim]). Attributes: axes (distinct),
    begin, end (arrays of int or expression strings; a symbolic position that is negative at run
    time counts from the end too), strides (array of positive int)."""

    name = "relax.strided_slice"
    x = operand(TENSOR)
    result = result_(TENSOR)
    axes = attr("array", optional=False)
    begin = attr("array", optional=False)
    end = attr("array", optional=False)
    strides = attr("array")
    canonicalization_patterns = (SliceBeforeMatmul, FoldConstantSlice)

    @classmethod
    def slices(cls, op: OpInfo, dims) -> dict[int, tuple[Expr, Expr, int]]:
        """axis -> (begin, extent, stride), with begin/end clamped into [0, dim]."""
        axes, begin, end = op.attr("axes"), op.attr("begin"), op.attr("end")
        strides = op.attr("strides") or [1] * len(axes)
        if not (len(axes) == len(begin) == len(end) == len(strides)):
            raise DeduceError("axes, begin, end and strides must have the same length")
        out = {}
        for ax, b, e, s in zip(axes, begin, end, strides):
            ax = normalize_axis(ax, len(dims))
            if ax in out:
                raise DeduceError(f"axes {list(axes)} repeat axis {ax}")
            if not isinstance(s, int) or s < 1:
                raise DeduceError(f"strides must be positive integers, got {s}")
            dim = dims[ax]
            be, ee = cls._clamp(as_dim(b), dim, op), cls._clamp(as_dim(e), dim, op)
            if be is None or ee is None:
                out[ax] = (be, None, s)
                continue
            ext = ee - be
            if op.facts.prove_le(ext, ZERO):
                ext = ZERO
            elif not op.facts.prove_ge(ext, ZERO):
                ext = max_(ext, ZERO)
            out[ax] = (be, ceildiv(ext, s) if s != 1 else ext, s)
        return out

    @staticmethod
    def _clamp(v: Expr | None, dim, op: OpInfo):
        if v is None:
            return None
        if v.is_const and v.value < 0:
            if dim is None:
                return None
            v = dim + v
            if dim.is_const:
                return const(max(v.value, 0))
            return v if op.facts.prove_ge(v, ZERO) else max_(v, ZERO)
        if dim is None:
            return None  # the slice depends on the unknown dim: the result dim is unknown too
        if dim.is_const and v.is_const:
            return const(min(v.value, dim.value))
        # A symbolic position that may be negative at run time counts from the end there, as in
        # numpy: v + dim * [v < 0], with [v < 0] = 1 - min(max(v + 1, 0), 1) for an integer v.
        if not op.facts.prove_ge(v, ZERO):
            if op.facts.prove_lt(v, ZERO):
                v = v + dim
            else:
                v = v + dim * (ONE - min_(max_(v + ONE, ZERO), ONE))
            if not op.facts.prove_ge(v, ZERO):
                v = max_(v, ZERO)
        return v if op.facts.prove_le(v, dim) else min_(v, dim)

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = list(require_rank(x, "operand"))
        for ax, (_, ext, _) in cls.slices(op, d).items():
            d[ax] = ext
        return [TensorType(tuple(d), x.dtype)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, r = op.tensor(0), op.result_types[0]
        sl = cls.slices(op, list(x.dims))
        syms: list[Expr] = []
        k = Kernel("strided_slice", [x], [r])
        offs, strides = [], []
        for i in range(len(x.dims)):
            if i in sl:
                b, _, s = sl[i]
                if b is None:
                    raise LegalizeError("slice begin must be known")
                if b.is_const:
                    offs.append(str(b.value))
                else:
                    offs.append(k.sym(len(syms)))
                    syms.append(b)
                strides.append(str(s))
            else:
                offs.append("0")
                strides.append("1")
        k.n_syms = len(syms)
        if any(d is not None and d.is_const and d.value == 0 for d in r.dims):
            # An empty result: nothing to copy (and a static slice at offset 0 of a 0 dim is invalid IR).
            return Legalized(k, [k.out(0)], syms)
        sizes = _sizes(k, k.out(0), r)
        s = k.fresh("sl")
        k.emit(f"{s} = tensor.extract_slice {k.inp(0)}{_slice_text(k, offs, sizes, strides)} : {k.ty(x)} to {k.ty(r)}")
        return Legalized(k, [_copy(k, s, r, k.out(0), r)], syms)


@relax_op
class TakeOp(OpSpec):
    """Gather along an axis: result dims are x's with the axis replaced by the indices' dims.
    Attribute: axis (int, default 0). Semantics of StableHLO's gather (what jax's `x[idx]` imports
    to): each index is clamped into [0, n - 1], so a negative index reads row 0 and one >= n row
    n - 1 on every target (jax wraps negative indices itself before its gather). A table with no
    rows along the axis and a non-empty index tensor raises ValueError at run time (jax refuses it)."""

    name = "relax.take"
    x = operand(TENSOR)
    indices = operand(TENSOR)
    result = result_(TENSOR)
    axis = attr("int", default=0)

    @classmethod
    def deduce(cls, op: OpInfo):
        x, idx = op.tensor(0), op.tensor(1)
        if idx.dtype not in INT_DTYPES or idx.dtype == "i1":
            raise DeduceError(f"indices must have an integer element type, got {idx.dtype}")
        d = require_rank(x, "operand")
        axis = normalize_axis(op.attr("axis", 0), len(d))
        return [TensorType(d[:axis] + require_rank(idx, "indices") + d[axis + 1:], x.dtype)]

    @classmethod
    def unknown_dims(cls, op: OpInfo, results):
        """The table's axis dim is read at run time (the clamp bound); the others are the result's."""
        d = op.tensor(0).dims
        axis = normalize_axis(op.attr("axis", 0), len(d))
        return [tuple(FREE if j == axis else None for j in range(len(d))), (None,) * len(op.tensor(1).dims)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, idx, r = op.tensor(0), op.tensor(1), op.result_types[0]
        axis = normalize_axis(op.attr("axis", 0), len(x.dims))
        k = Kernel("take", [x, idx], [r])
        rank, ri = len(r.dims), len(idx.dims)
        n = k.dim(k.inp(0), x, axis)
        imap = affine_map(rank, [f"d{axis + j}" for j in range(ri)])
        body = [f"%i{j} = linalg.index {j} : index" for j in range(rank)]
        body += [f"%iv = arith.index_cast %a0 : {idx.dtype} to index", "%zero = arith.constant 0 : index",
                 "%one = arith.constant 1 : index", f"%last = arith.subi {n}, %one : index",
                 # clamp(iv, 0, n - 1) as compares and selects: GL.SMax/SMin on lavapipe returned the
                 # last row for a negative index (a sign problem on i32); SLessThan/SGreaterThan do not.
                 "%neg = arith.cmpi slt, %iv, %zero : index", "%lo = arith.select %neg, %zero, %iv : index",
                 "%big = arith.cmpi sgt, %lo, %last : index", "%cl = arith.select %big, %last, %lo : index"]
        coords = ([f"%i{j}" for j in range(axis)] + ["%cl"]
                  + [f"%i{axis + ri + j}" for j in range(len(x.dims) - axis - 1)])
        body.append(f"%v = tensor.extract {k.inp(0)}[{', '.join(coords)}] : {k.ty(x)}")
        g = k.generic([(k.inp(1), idx, imap)], [(k.out(0), r, identity_map(rank))], ["parallel"] * rank, body, ["%v"])
        return Legalized(k, g)


# --- kernel helpers ----------------------------------------------------------------------------


def _collapsed(t: TensorType, groups: list[list[int]]) -> TensorType:
    return TensorType(tuple(product([t.dims[i] for i in g]) for g in groups), t.dtype)


def _reassoc(groups: list[list[int]]) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"


def _slice_text(k: Kernel, offsets: list[str], sizes: list[str], strides: list[str]) -> str:
    return f"[{', '.join(offsets)}] [{', '.join(sizes)}] [{', '.join(strides)}]"


def _sizes(k: Kernel, value: str, t: TensorType) -> list[str]:
    return [str(d.value) if d is not None and d.is_const else k.dim(value, t, i) for i, d in enumerate(t.dims)]


def _copy(k: Kernel, src: str, src_t: TensorType, dst: str, dst_t: TensorType) -> str:
    c = k.fresh("cp")
    k.emit(f"{c} = linalg.copy ins({src} : {k.ty(src_t)}) outs({dst} : {k.ty(dst_t)}) -> {k.ty(dst_t)}")
    return c
