"""Canonicalization of grouped-query attention: a matmul whose operand repeats each slice of a
batch axis R times (`jnp.repeat(k, R, axis)`, which StableHLO spells broadcast_in_dim + reshape:
reshape(broadcast_to(z)), z holding a unit dim after the axis) is computed on the unrepeated
operand, the other operand's R rows of a group stacked into the matrix dim. A decode step of a
Llama model with 16 query heads over 4 KV heads then reads its KV cache once instead of
materializing it 4 times (and transposing the 4 copies).

`RepeatBeforePermute` moves a permute_dims before such a repeat (it permutes R times less
data), so that the repeat reaches the matmul; `GroupedMatmul` rewrites the matmul.
`ContiguousOperandTranspose` splits a matmul operand's transpose that moves the innermost axis
into the matrix dims (keys [b, m, g, d] read as [b, g, d, m]) into a transpose of whole rows
([b, g, m, d]) and a swap of the two matrix dims, which library dispatch folds into the BLAS call
(transposed operand): a transpose with the innermost axis moved writes with a stride of the
cache length, 4 KiB-aliased at 2048 positions (13 ms for the 4 MiB of one layer's keys and
values; the row copy is a memcpy)."""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from relax_mlir.dialect.build import array_attr, matmul, permute, reshape
from relax_mlir.dialect.types import TensorType, view
from relax_mlir.patterns import RewritePattern
from relax_mlir.shape import const


def _tensor(v: ir.Value) -> TensorType | None:
    t = view(v.type)
    return t if isinstance(t, TensorType) and t.known else None


def _repeat(y: ir.Value, axis: int, r: int, dims, loc) -> ir.Value:
    """y repeated r times along `axis` (each slice r times in a row), as the importer spells it."""
    t = _tensor(y)
    one = (*t.dims[:axis + 1], _ONE, *t.dims[axis + 1:])
    wide = (*t.dims[:axis + 1], _const(r), *t.dims[axis + 1:])
    z = reshape(y, one, loc)
    b = ir.Operation.create("relax.broadcast_to", results=[TensorType(wide, t.dtype).to_mlir()], operands=[z],
                            attributes={"shape": array_attr(wide)}, loc=loc).results[0]
    return reshape(b, dims, loc)


def _const(n: int):
    return const(n)


_ONE = _const(1)


@dataclass
class Repeat:
    """v = reshape(broadcast_to(z)): z's dim axis+1 is 1, broadcast to r, and merged with dim
    axis; y is z without that unit dim (built on demand)."""

    z: ir.Value
    axis: int
    r: int
    ydims: tuple

    def source(self, loc) -> ir.Value:
        z = self.z
        if isinstance(z, ir.OpResult) and z.owner.name == "relax.reshape" and len(z.owner.operands) == 1 \
                and tuple(_tensor(z.owner.operands[0]).dims) == tuple(self.ydims):
            return z.owner.operands[0]  # the unit dim the repeat's reshape inserted, dropped again
        return reshape(z, self.ydims, loc)


def repeat_of(v: ir.Value) -> Repeat | None:
    if not isinstance(v, ir.OpResult) or v.owner.name != "relax.reshape" or len(v.owner.operands) != 1:
        return None
    s = v.owner.operands[0]
    if not isinstance(s, ir.OpResult) or s.owner.name != "relax.broadcast_to":
        return None
    z = s.owner.operands[0]
    vt, st, zt = _tensor(v), _tensor(s), _tensor(z)
    if vt is None or st is None or zt is None or len(st.dims) != len(vt.dims) + 1 or len(zt.dims) != len(st.dims):
        return None
    n = len(vt.dims)
    for a in range(n):
        r = st.dims[a + 1]
        if not (r.is_const and r.value > 1 and zt.dims[a + 1].is_const and zt.dims[a + 1].value == 1):
            continue
        if st.dims[:a] != vt.dims[:a] or st.dims[a + 2:] != vt.dims[a + 1:] or vt.dims[a] != st.dims[a] * r:
            continue
        if any(zt.dims[i] != st.dims[i] for i in range(len(zt.dims)) if i != a + 1):
            continue
        return Repeat(z, a, r.value, (*zt.dims[:a + 1], *zt.dims[a + 2:]))
    return None


class RepeatBeforePermute(RewritePattern):
    """permute_dims(repeat(y, axis)) -> repeat(permute_dims(y), the axis's new position)."""

    def match_and_rewrite(self, op, rewriter) -> bool:
        rep = repeat_of(op.operands[0])
        rt = _tensor(op.results[0])
        if rep is None or rt is None or "axes" not in op.attributes:
            return False
        axes = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["axes"])]
        n = len(axes)
        axes = [a % n for a in axes]
        loc = op.location
        with rewriter.ip:
            py = permute(rep.source(loc), axes, loc)
            new = _repeat(py, axes.index(rep.axis), rep.r, rt.dims, loc)
        rewriter.replace_op(op, new.owner)
        return True


class GroupedMatmul(RewritePattern):
    """matmul(A, repeat(Y, axis)) with the repeat on the last batch axis and A's batch dims equal
    to the product's: A [..., G*R, M, K] -> [..., G, R*M, K] (a reshape), times Y [..., G, K, N],
    reshaped back to [..., G*R, M, N]. The repeat on A's side (matmul(repeat(Y), B), Y
    [..., G, M, K]) when B is a transpose (its transpose is free) or N is 1: the transposed
    product, B^T [..., G*R, N, K] reshaped to [..., G, R*N, K] times Y^T [..., G, K, M], is
    [..., G, R*N, M], the result transposed. (Attention's values: Y^T is the values with whole
    rows moved, [b, g, m, d], and B^T the probabilities.)"""

    def match_and_rewrite(self, op, rewriter) -> bool:
        a, b = op.operands[0], op.operands[1]
        ta, tb, tr = _tensor(a), _tensor(b), _tensor(op.results[0])
        if ta is None or tb is None or tr is None or len(ta.dims) < 3 or len(ta.dims) != len(tb.dims):
            return False
        n = len(ta.dims)
        if ta.dims[:n - 2] != tb.dims[:n - 2]:
            return False  # batch broadcasting
        loc = op.location
        rep = repeat_of(b)
        if rep is not None and rep.axis == n - 3:
            g, r = rep.ydims[n - 3], rep.r
            h, m, k = ta.dims[n - 3:]
            with rewriter.ip:
                a2 = reshape(a, (*ta.dims[:n - 3], g, m * r, k), loc)
                p = matmul(a2, rep.source(loc), loc)
                new = reshape(p, tr.dims, loc)
            rewriter.replace_op(op, new.owner)
            return True
        rep = repeat_of(a)
        b_transposed = isinstance(b, ir.OpResult) and b.owner.name == "relax.permute_dims"
        nn = tb.dims[-1]
        if rep is not None and rep.axis == n - 3 and (b_transposed or (nn.is_const and nn.value == 1)):
            g, r = rep.ydims[n - 3], rep.r
            k, m = tb.dims[n - 2], ta.dims[n - 2]
            lead = tuple(tb.dims[:n - 3])
            swap = [*range(n - 2), n - 1, n - 2]
            with rewriter.ip:
                # the transposed product: B^T [..., G*R, N, K] as [..., G, R*N, K] times Y^T
                # [..., G, K, M] is [..., G, R*N, M], the result transposed
                b2 = reshape(permute(b, swap, loc), (*lead, g, nn * r, k), loc)
                p = matmul(b2, permute(rep.source(loc), swap, loc), loc)
                if nn.is_const and nn.value == 1:
                    new = reshape(p, tr.dims, loc)
                else:
                    new = permute(reshape(p, (*lead, g * r, nn, m), loc), swap, loc)
            rewriter.replace_op(op, new.owner)
            return True
        return False


class ContiguousOperandTranspose(RewritePattern):
    """matmul(permute_dims(X, p), B) where p moves X's innermost axis to the operand's row axis
    (p[-2] = n-1) and is not already just the swap of the matrix dims: the operand becomes
    permute_dims(permute_dims(X, q), swap), q = p[:-2] + [p[-1], p[-2]] (X's innermost stays
    innermost: whole rows move), swap the exchange of the last two axes (B only: A only when the
    other operand is such a swap of C too, the product is swap(C @ rows) (or swap(rows @ C)):
    no operand is transposed)."""

    def match_and_rewrite(self, op, rewriter) -> bool:
        for i, v in enumerate(op.operands):
            if not isinstance(v, ir.OpResult) or v.owner.name != "relax.permute_dims" or "axes" not in v.owner.attributes:
                continue
            t = _tensor(v)
            if t is None or len(t.dims) < 3:
                continue
            n = len(t.dims)
            p = [ir.IntegerAttr(a).value % n for a in ir.ArrayAttr(v.owner.attributes["axes"])]
            if p[-2] != n - 1 or p[:-2] == list(range(n - 2)):
                continue  # innermost not moved into the rows, or only the matrix dims swapped
            q = p[:-2] + [p[-1], p[-2]]
            swap = [*range(n - 2), n - 1, n - 2]
            other = op.operands[1 - i]
            if i == 0 and not _is_swap_of(other, n):
                continue  # the product would take a transposed A, which batched dispatch lacks today
            loc = op.location
            with rewriter.ip:
                rows = permute(v.owner.operands[0], q, loc)
                if _is_swap_of(other, n):
                    # both operands transposed: the transposed product of the untransposed ones
                    c = other.owner.operands[0]
                    new = permute(matmul(c, rows, loc) if i == 0 else matmul(rows, c, loc), swap, loc).owner
                else:
                    operands = list(op.operands)
                    operands[i] = permute(rows, swap, loc)
                    new = ir.Operation.create("relax.matmul", results=[op.results[0].type], operands=operands,
                                              loc=loc)
            rewriter.replace_op(op, new)
            return True
        return False


def _is_swap_of(v: ir.Value, n: int) -> bool:
    """v = permute_dims(c) exchanging only the last two of n axes."""
    if not isinstance(v, ir.OpResult) or v.owner.name != "relax.permute_dims" or "axes" not in v.owner.attributes:
        return False
    p = [ir.IntegerAttr(a).value % n for a in ir.ArrayAttr(v.owner.attributes["axes"])]
    return p == [*range(n - 2), n - 1, n - 2]


def _single_use(v: ir.Value) -> bool:
    return sum(1 for _ in v.uses) == 1


class SliceBeforeMatmul(RewritePattern):
    """strided_slice(reshape(matmul(A [M, K], W [K, N]))) where the reshape splits only the rows
    ([..., N]) and the slice keeps the last axis whole -> the rows sliced before the product:
    reshape(matmul(reshape(strided_slice(reshape(A, [..., K]))), W)). A causal LM's prefill takes
    the logits of the last position only: the LM head ([b*s, d] x [d, vocab], 8.4 GFLOP at 128
    tokens for a 32000 vocab) then runs on b rows."""

    def match_and_rewrite(self, op, rewriter) -> bool:
        x = op.operands[0]
        if not isinstance(x, ir.OpResult) or x.owner.name != "relax.reshape" or len(x.owner.operands) != 1:
            return False
        mm = x.owner.operands[0]
        if not isinstance(mm, ir.OpResult) or mm.owner.name != "relax.matmul" or not (_single_use(mm) and _single_use(x)):
            return False
        a, w = mm.owner.operands[0], mm.owner.operands[1]
        ta, tw, tx, tr = _tensor(a), _tensor(w), _tensor(x), _tensor(op.results[0])
        if None in (ta, tw, tx, tr) or len(ta.dims) != 2 or len(tw.dims) != 2 or not tx.dims or tx == tr:
            return False
        n, k = tw.dims[1], tw.dims[0]
        if tx.dims[-1] != n:
            return False
        rank = len(tx.dims)
        attrs = {name: op.attributes[name] for name in ("axes", "begin", "end", "strides") if name in op.attributes}
        axes = [ir.IntegerAttr(v).value % rank for v in ir.ArrayAttr(attrs["axes"])]
        ends = list(ir.ArrayAttr(attrs["end"]))
        if rank - 1 in axes:
            i = axes.index(rank - 1)
            b = ir.ArrayAttr(attrs["begin"])[i]
            s = ir.ArrayAttr(attrs["strides"])[i] if "strides" in attrs else None
            e = ends[i]
            whole = (isinstance(e, ir.IntegerAttr) and n.is_const and e.value >= n.value) or \
                (isinstance(e, ir.StringAttr) and e.value == str(n))
            if not (isinstance(b, ir.IntegerAttr) and b.value == 0 and whole
                    and (s is None or ir.IntegerAttr(s).value == 1)):
                return False
            ends[i] = array_attr([k])[0]
        attrs["end"] = ir.ArrayAttr.get(ends)
        loc = op.location
        rows = _const(1)
        for d in tr.dims[:-1]:
            rows = rows * d
        with rewriter.ip:
            a3 = reshape(a, (*tx.dims[:-1], k), loc)
            sl = ir.Operation.create("relax.strided_slice", results=[TensorType((*tr.dims[:-1], k), ta.dtype).to_mlir()],
                                     operands=[a3], attributes=attrs, loc=loc).results[0]
            p = matmul(reshape(sl, (rows, k), loc), w, loc)
            new = reshape(p, tr.dims, loc)
        rewriter.replace_op(op, new.owner)
        return True
