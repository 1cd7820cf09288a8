"""Fused attention: `relax.attention`, softmax(q k^T [*|/ scale] [causal mask]) v in one kernel.

The op is what `relax-fuse-attention` (transforms/fuse_attention.py) makes of the chain jax
exports; it is also written by hand (`relax-opt`). Semantics are exactly those of the chain

    s = matmul(q, permute(k))            [..., Sq, Sk]
    s = s * scale | s / divisor          (attribute `scale` or `divisor`, at most one)
    s = s + bias                         (optional 4th operand, broadcast: see below)
    s = where(row >= col, s, fill)       (attribute `mask = "causal"`, `fill` the masked score)
    m = max(s, axis=-1); e = exp(s - m); p = e / sum(e, axis=-1)
    out = matmul(p, v)                   [..., Sq, Dv]

The additive `bias` (HF Flax Llama's and GPT-2's padding-and-causal mask, 0 / finfo.min) has q's
rank, its last dim Sk, and every other dim 1 (broadcast) or q's. With `query_heads = R` > 1 (grouped-
query attention in the products' layout, as ops/grouped.py leaves it: q [..., G, R*S, D] holds the
R query heads of KV head g stacked in its rows), the bias is in the heads' layout [..., H, S, Sk]
(H = G*R, each of the last three 1 or that size, H and S dims of 1 broadcast): row i of group g
reads head g*R + i // S, row i % S. The kernel reads the bias row by row into each score tile (no
[.., Sq, Sk] copy of it).

Semantics include NaN/Inf: a NaN score makes its row NaN, a row whose scores are all -inf is NaN (as
jax.nn.softmax gives), Sk = 0 gives zeros (an empty sum of products), Sq = 0 an empty result.

The CPU kernel (`legalize`) is flash-attention style: key tiles of `BLOCK_K` columns, query
blocks of `BLOCK_Q` rows (an `scf.forall`, so the runtime's threads share the blocks), and
per query row a running max `m` and sum `l` with the accumulator rescaled by exp(m_old - m_new)
when the max grows. Scores never exist beyond one BLOCK_Q x BLOCK_K tile. The tiles are static
(q, k and v are copied once into zero-padded buffers, k transposed), so each tile op is a small
static linalg op that the CPU backend vectorizes (matmuls register-blocked, exp expanded to
polynomials exactly as the unfused kernels do). Padded key columns are excluded by a select to
-inf before the max and give p = 0 (never exp(-inf - m), which is NaN when m = -inf).

A bias of finfo.min everywhere in a row gives that row uniform weights (its scores are then all
equal), as the chain does; a row of -inf biases is NaN.

f32 only: other float types stay unfused (the pass never makes them), so they accumulate exactly
as the unfused kernels do.
"""
from __future__ import annotations

import math

from relax_mlir.dialect.spec import DeduceError, OpInfo, OpSpec, TENSOR, attr, operand, relax_op, result_, short_name
from relax_mlir.dialect.types import TensorType
from relax_mlir.ops.common import dims_equal, fmt, fmt_dims, require_rank, require_same_dtype, symbols_note
from relax_mlir.ops.kernel import Kernel, LegalizeError, Legalized

# Tile sizes of the CPU kernel (rows of q per task, key columns per step).
BLOCK_Q = 32
BLOCK_K = 64

MASKS = ("none", "causal")

# Below this many keys the unfused chain beats the fused kernel (relax-fuse-attention versions a
# symbolic key length on it). One thread, CPU ms per call, the side-by-side attention model
# (d = 256, causal), fused / unfused: 1.47 at 16 keys, 1.23 at 64, 1.11 at 128, 1.00 at 256,
# 0.85 at 512 (BENCHMARKS.md, "Fused attention versioned on the key length").
SHORT_KEYS = 256
# Below this many query rows (in the op's layout: R*S rows per KV head for grouped-query attention)
# the unfused chain wins too: the fused kernel packs all of k and computes a whole register tile of
# rows. Grouped-query attention, 16 query heads over 4 KV heads, d = 64, 2048 keys, one thread,
# fused / unfused by rows: 4 rows 1.54 (a decode step), 8 1.18, 16 1.10, 32 0.98, 64 0.97.
SHORT_QUERIES = 32

# The query blocks run on the runtime's threads when there are at least this many (batch x
# block) tasks and this many keys; below, in one thread (a thread wake-up costs more).
PARALLEL_MIN_TASKS = 4
PARALLEL_MIN_KEYS = 256


def _f32_literal(x: float) -> str:
    """An f32 literal for arith.constant (hex for inf/NaN)."""
    if math.isnan(x):
        return "0x7FC00000"
    if math.isinf(x):
        return "0x7F800000" if x > 0 else "0xFF800000"
    return repr(float(x))


@relax_op
class AttentionOp(OpSpec):
    """softmax(q k^T * scale (or / divisor) [+ bias], causal-masked with `fill`) v, fused (flash-style
    on CPU). q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] -> [..., Sq, Dv]; same batch dims, f32;
    optional bias broadcastable to the scores (query_heads: grouped-query rows, module doc)."""

    name = "relax.attention"
    q = operand(TENSOR)
    k = operand(TENSOR)
    v = operand(TENSOR)
    bias = operand(TENSOR, variadic=True)
    result = result_(TENSOR)
    scale = attr("float", doc="scores are multiplied by it")
    divisor = attr("float", doc="scores are divided by it (exclusive with scale)")
    mask = attr("str", doc='"none" (default) or "causal": keep scores at row >= column')
    fill = attr("float", doc="the value of masked scores (default -inf)")
    query_heads = attr("int", doc="query heads stacked in q's rows per KV head (grouped-query; default 1)")

    @classmethod
    def deduce(cls, op: OpInfo):
        q, k, v = op.tensor(0), op.tensor(1), op.tensor(2)
        dt = require_same_dtype([q, k, v], ["q", "k", "v"])
        if dt != "f32":
            raise DeduceError(f"relax.attention supports f32 only, got {dt}")
        qd, kd, vd = require_rank(q, "q"), require_rank(k, "k"), require_rank(v, "v")
        if len(qd) < 2 or len(kd) != len(qd) or len(vd) != len(qd):
            raise DeduceError(f"q, k and v must have one rank >= 2, got {fmt_dims(qd)}, {fmt_dims(kd)}, "
                              f"{fmt_dims(vd)}")
        for i in range(len(qd) - 2):
            for other, what in ((kd, "k"), (vd, "v")):
                a, b = qd[i], other[i]
                if a is not None and b is not None and not dims_equal(a, b, op.facts):
                    raise DeduceError(f"batch dim {i} of q ({a}) and {what} ({b}) differ" + symbols_note(a, b))
        for (a, b, what) in ((qd[-1], kd[-1], "head dims of q and k"), (kd[-2], vd[-2], "key lengths of k and v")):
            if a is not None and b is not None and not dims_equal(a, b, op.facts):
                raise DeduceError(f"{what} differ: {a} vs {b}" + symbols_note(a, b))
        if op.attr("scale") is not None and op.attr("divisor") is not None:
            raise DeduceError("attributes 'scale' and 'divisor' exclude each other")
        if op.attr("mask", "none") not in MASKS:
            raise DeduceError(f"attribute 'mask' must be one of {', '.join(MASKS)}, got '{op.attr('mask')}'")
        heads = op.attr("query_heads", 1)
        if not isinstance(heads, int) or heads < 1:
            raise DeduceError(f"attribute 'query_heads' must be an integer >= 1, got {heads}")
        if heads > 1 and op.attr("mask", "none") != "none":
            raise DeduceError("a causal mask with query_heads > 1 is not supported (the mask would index "
                              "the stacked rows); give the mask as a bias")
        if len(op.operand_types) > 4:
            raise DeduceError(f"takes q, k, v and at most one bias, got {len(op.operand_types)} operands")
        if len(op.operand_types) == 4:
            check_bias(op.tensor(3), qd, kd[-2], heads, dt, op.facts)
        elif heads > 1 and len(qd) < 3:
            raise DeduceError("query_heads > 1 needs a head dim before the rows (q of rank >= 3)")
        return [TensorType(tuple(qd[:-1]) + (vd[-1],), dt)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        q, k, v = op.tensor(0), op.tensor(1), op.tensor(2)
        bias = op.tensor(3) if len(op.operand_types) > 3 else None
        r = op.result_types[0]
        kern = Kernel(short_name(cls.name), [q, k, v] + ([bias] if bias is not None else []), [r])
        res = flash_kernel(kern, q, k, v, r, scale=op.attr("scale"), divisor=op.attr("divisor"),
                           causal=op.attr("mask", "none") == "causal", fill=op.attr("fill", -math.inf),
                           bias=bias, query_heads=op.attr("query_heads", 1))
        return Legalized(kern, [res])


def bias_shape(qd, sk, heads: int) -> tuple:
    """The scores' shape a bias is broadcast to: [..., Sq, Sk] for q dims `qd`; with heads = R > 1
    (grouped-query rows) the heads' layout [..., G*R, Sq/R, Sk]."""
    if heads == 1:
        return (*qd[:-1], sk)
    g, rows = qd[-3], qd[-2]
    return (*qd[:-3], None if g is None else g * heads, None if rows is None else rows // heads, sk)


def check_bias(b: TensorType, qd, sk, heads: int, dt: str, facts) -> None:
    """Raise DeduceError unless bias `b` broadcasts to the scores (bias_shape) as the op allows: its
    last dim the key length, every other dim 1 or the scores' dim."""
    if b.dtype != dt:
        raise DeduceError(f"the bias must have the dtype of q, k and v ({dt}), got {b.dtype}")
    bd = require_rank(b, "bias")
    if heads > 1:
        if len(qd) < 3:
            raise DeduceError("query_heads > 1 needs a head dim before the rows (q of rank >= 3)")
        rows = qd[-2]
        if rows is None or not dims_equal(rows // heads * heads, rows, facts):
            raise DeduceError(f"the query rows ({fmt(rows)}) are not provably a multiple of query_heads = {heads}"
                              + (symbols_note(rows) if rows is not None else ""))
    want = bias_shape(qd, sk, heads)
    if len(bd) != len(want):
        raise DeduceError(f"the bias must have rank {len(want)} (the scores' {fmt_dims(want)}), got {fmt_dims(bd)}")
    for i, (a, w) in enumerate(zip(bd, want)):
        if a is None:
            # the kernel indexes the bias by the scores' indices: an unknown dim could be a 1
            raise DeduceError(f"bias dim {i} is unknown ('?'); refine it with relax.match_cast first")
        last = i == len(want) - 1
        if not last and a.is_const and a.value == 1:
            continue
        if not dims_equal(a, w, facts):  # (never for an unknown scores' dim)
            what = "its last dim must be the key length" if last else "each dim must be 1 or the scores' dim"
            raise DeduceError(f"bias dim {i} ({a}) does not broadcast to the scores' {fmt_dims(want)}: {what}"
                              + symbols_note(a, w))


def _to3(k: Kernel, value: str, t: TensorType) -> tuple[str, str]:
    """`value` as a rank-3 tensor [batch, rows, cols] (batch dims collapsed, or a unit batch
    added); returns (name, builtin type text)."""
    rank = len(t.dims)
    dims = t.dims
    static = [d is not None and d.is_const for d in dims]
    last = ["?" if not s else str(d.value) for d, s in zip(dims[-2:], static[-2:])]
    if rank == 2:
        ty = f"tensor<1x{last[0]}x{last[1]}xf32>"
        sizes = [k.dim(value, t, i) if not static[i] else str(dims[i].value) for i in range(2)]
        out = k.fresh("x3")
        k.emit(f"{out} = tensor.expand_shape {value} [[0, 1], [2]] output_shape [1, {sizes[0]}, {sizes[1]}] : "
               f"{k.ty(t)} into {ty}")
        return out, ty
    if rank == 3:
        return value, k.ty(t)
    if sum(1 for s in static[:-2] if not s) > 1:
        raise LegalizeError("relax.attention: at most one batch dim may be symbolic")
    b = 1
    for d, s in zip(dims[:-2], static[:-2]):
        b = b * d.value if s else None if b is None else b
    bs = "?" if any(not s for s in static[:-2]) else str(b)
    ty = f"tensor<{bs}x{last[0]}x{last[1]}xf32>"
    out = k.fresh("x3")
    k.emit(f"{out} = tensor.collapse_shape {value} [[{', '.join(str(i) for i in range(rank - 2))}], "
           f"[{rank - 2}], [{rank - 1}]] : {k.ty(t)} into {ty}")
    return out, ty


_RM = 8      # rows of a register tile
_LANES = 16  # f32 lanes of one AVX-512 vector (LLVM splits it on AVX2); a register tile is _RM x 2 vectors


def _tile_matmul(k: Kernel, a: str, at: str, bmat: str, bt: str, c: str, ct: str, m: int, n: int,
                 kk: int, alpha: str | None = None, a_pre: str = "", a_rows: tuple[str, str] | None = None,
                 b_pre: str = "", b_row0: str | None = None, kk_dyn: str | None = None,
                 m_dyn: str | None = None, n_dyn: str | None = None) -> str:
    """res = c (* alpha per row) + a @ b on static tiles, as an explicit register-blocked micro-kernel
    (_RM rows x 2 vectors of accumulators, broadcast a, fma); returns the result's name.
    `a` may be a bigger tensor: its element is a[a_pre, row, d] with row = min(base + i, limit - 1)
    for `a_rows` = (base, limit) (rows past the limit repeat the last one; their results are
    never stored); `b` likewise b[b_pre, b_row0 + d, col]; `kk_dyn` bounds the d loop at run time,
    `m_dyn` / `n_dyn` the row and column loops (multiples of the register tile: short sequences
    compute only the tiles they use; the rest of `c` is left as it was). The
    backend's per-op matmul schedule on these tiles made the kernel 3x slower (measured)."""
    E, L = k.emit, _LANES
    vt = f"vector<{L}xf32>"
    c0, c1 = k.const_index(0), k.const_index(1)
    crm, c2l, ck = k.const_index(_RM), k.const_index(2 * L), k.const_index(kk)
    cm, cn, cl = k.const_index(m), k.const_index(n), k.const_index(L)
    u = k.fresh("mm")[1:]
    E(f"%{u}r = scf.for %{u}i = {c0} to {m_dyn or cm} step {crm} iter_args(%{u}ti = {c}) -> ({ct}) {{")
    E(f"  %{u}c = scf.for %{u}j = {c0} to {n_dyn or cn} step {c2l} iter_args(%{u}tj = %{u}ti) -> ({ct}) {{")
    E(f"    %{u}j2 = arith.addi %{u}j, {cl} : index")
    rows = [f"%{u}i" if r == 0 else f"%{u}i{r}" for r in range(_RM)]
    for r in range(1, _RM):
        E(f"    {rows[r]} = arith.addi %{u}i, {k.const_index(r)} : index")
    arows = rows
    if a_rows is not None:
        base, limit = a_rows
        E(f"    %{u}lim = arith.subi {limit}, {c1} : index")
        arows = []
        for r in range(_RM):
            E(f"    %{u}ar{r}a = arith.addi {base}, {rows[r]} : index")
            E(f"    %{u}ar{r} = arith.minsi %{u}ar{r}a, %{u}lim : index")
            arows.append(f"%{u}ar{r}")
    E("    %" + u + "pad = arith.constant 0.0 : f32")
    init = []
    for r in range(_RM):
        if alpha is not None:
            E(f"    %{u}al{r} = tensor.extract {alpha}[{rows[r]}] : tensor<{m}xf32>")
            E(f"    %{u}alv{r} = vector.broadcast %{u}al{r} : f32 to {vt}")
        for h, col in enumerate((f"%{u}j", f"%{u}j2")):
            E(f"    %{u}c{r}_{h} = vector.transfer_read %{u}tj[{rows[r]}, {col}], %{u}pad {{in_bounds = [true]}} : {ct}, {vt}")
            if alpha is not None:
                E(f"    %{u}s{r}_{h} = arith.mulf %{u}c{r}_{h}, %{u}alv{r} : {vt}")
                init.append(f"%{u}s{r}_{h}")
            else:
                init.append(f"%{u}c{r}_{h}")
    accs = [f"%{u}x{i}" for i in range(len(init))]
    E(f"    %{u}acc:{len(init)} = scf.for %{u}d = {c0} to {kk_dyn or ck} step {c1} iter_args("
      + ", ".join(f"{x} = {i}" for x, i in zip(accs, init)) + ") -> (" + ", ".join([vt] * len(init)) + ") {")
    brow = f"%{u}d"
    if b_row0 is not None:
        E(f"      %{u}br = arith.addi {b_row0}, %{u}d : index")
        brow = f"%{u}br"
    E(f"      %{u}b0 = vector.transfer_read {bmat}[{b_pre}{brow}, %{u}j], %{u}pad {{in_bounds = [true]}} : {bt}, {vt}")
    E(f"      %{u}b1 = vector.transfer_read {bmat}[{b_pre}{brow}, %{u}j2], %{u}pad {{in_bounds = [true]}} : {bt}, {vt}")
    outs = []
    for r in range(_RM):
        E(f"      %{u}as{r} = tensor.extract {a}[{a_pre}{arows[r]}, %{u}d] : {at}")
        E(f"      %{u}av{r} = vector.broadcast %{u}as{r} : f32 to {vt}")
        for h in range(2):
            E(f"      %{u}f{r}_{h} = vector.fma %{u}av{r}, %{u}b{h}, {accs[2 * r + h]} : {vt}")
            outs.append(f"%{u}f{r}_{h}")
    E(f"      scf.yield {', '.join(outs)} : {', '.join([vt] * len(outs))}")
    E("    }")
    cur = f"%{u}tj"
    for r in range(_RM):
        for h, col in enumerate((f"%{u}j", f"%{u}j2")):
            nxt = f"%{u}w{r}_{h}"
            E(f"    {nxt} = vector.transfer_write %{u}acc#{2 * r + h}, {cur}[{rows[r]}, {col}] {{in_bounds = [true]}} : {vt}, {ct}")
            cur = nxt
    E(f"    scf.yield {cur} : {ct}")
    E("  }")
    E(f"  scf.yield %{u}c : {ct}")
    E("}")
    return f"%{u}r"


def flash_kernel(k: Kernel, q: TensorType, kt: TensorType, v: TensorType, r: TensorType, *, scale, divisor,
                 causal: bool, fill: float, bias: TensorType | None = None, query_heads: int = 1) -> str:
    """Emit the tiled online-softmax kernel into `k` (the bias, if any, is its input 3); returns the
    result's SSA name."""
    d_dim, dv_dim = q.dims[-1], v.dims[-1]
    if d_dim is None or not d_dim.is_const or dv_dim is None or not dv_dim.is_const:
        raise LegalizeError("relax.attention: the head dims of q and v must be static")
    D, DV, BQ, BK = d_dim.value, dv_dim.value, BLOCK_Q, BLOCK_K
    q3, q3t = _to3(k, k.inp(0), q)
    k3, k3t = _to3(k, k.inp(1), kt)
    v3, v3t = _to3(k, k.inp(2), v)
    # The output is written in place in its own shape (a reshaped view of it would make the
    # kernel return a value that is not its argument: the backend then inlines it into its
    # caller, where RELAX_MLIR_PROFILE cannot time it)
    o3, o3t = k.out(0), k.ty(r)
    nbatch = len(r.dims) - 2
    bsizes = [k.dim(o3, r, i) for i in range(nbatch)] if nbatch > 1 else []
    bstat = q3t.split("<")[1].split("x")[0]
    bdim = bstat if bstat != "?" else None
    c0, c1 = k.const_index(0), k.const_index(1)
    cbq, cbk = k.const_index(BQ), k.const_index(BK)
    cbq1, cbk1 = k.const_index(BQ - 1), k.const_index(BK - 1)
    E = k.emit
    if bdim is None:
        E(f"%B = tensor.dim {q3}, {c0} : {q3t}")
    else:
        E(f"%B = arith.constant {bdim} : index")
    E(f"%Sq = tensor.dim {q3}, {c1} : {q3t}")
    E(f"%Sk = tensor.dim {k3}, {c1} : {k3t}")
    E(f"%sq1 = arith.addi %Sq, {cbq1} : index")
    E(f"%nqb = arith.divui %sq1, {cbq} : index")
    E(f"%sk1 = arith.addi %Sk, {cbk1} : index")
    E(f"%nkb = arith.divui %sk1, {cbk} : index")
    E("%zero = arith.constant 0.0 : f32")
    E("%ninf = arith.constant 0xFF800000 : f32")
    E(f"%skz = arith.cmpi eq, %Sk, {c0} : index")
    if bias is not None:
        E(f"%sqlast = arith.subi %Sq, {c1} : index")  # (tasks exist only when Sq >= 1)
    if bias is not None and query_heads > 1:
        E(f"%Shd = arith.divui %Sq, {k.const_index(query_heads)} : index")  # rows per query head
    bdyn = "%B, " if bdim is None else ""
    b = bstat

    # k packed tile by tile and transposed: [B, nkb, Dp, BLOCK_K] (Dp: D rounded up to the
    # transpose block), so that the tile of one step is contiguous (a [D, BLOCK_K] slice of a
    # [B, D, Sk] transpose strides Sk floats per row: cache-set conflicts at power-of-two
    # lengths). Key rows past Sk read as 0 (their scores are replaced by -inf anyway); q and v
    # are read in place (rows past Sq repeat the last one and are never stored; the product
    # with v stops at Sk).
    L = _LANES
    DP = -(-D // L) * L
    ktt = f"tensor<{b}x?x{DP}x{BK}xf32>"
    E(f"%kte = tensor.empty({bdyn}%nkb) : {ktt}")
    vt2 = f"vector<{L}x{L}xf32>"
    cl = k.const_index(L)
    E(f"%ktp = scf.for %pb = {c0} to %B step {c1} iter_args(%t0 = %kte) -> ({ktt}) {{")
    E(f"  %t1r = scf.for %pt = {c0} to %nkb step {c1} iter_args(%t1 = %t0) -> ({ktt}) {{")
    E(f"    %t2r = scf.for %pj = {c0} to {cbk} step {cl} iter_args(%t2 = %t1) -> ({ktt}) {{")
    E(f"      %t3r = scf.for %pd = {c0} to {k.const_index(DP)} step {cl} iter_args(%t3 = %t2) -> ({ktt}) {{")
    E(f"        %pr0 = arith.muli %pt, {cbk} : index")
    E("        %pr = arith.addi %pr0, %pj : index")
    E(f"        %blk = vector.transfer_read {k3}[%pb, %pr, %pd], %zero {{in_bounds = [false, {'true' if D % L == 0 else 'false'}]}} : {k3t}, {vt2}")
    E(f"        %blt = vector.transpose %blk, [1, 0] : {vt2} to {vt2}")
    E(f"        %t4 = vector.transfer_write %blt, %t3[%pb, %pt, %pd, %pj] {{in_bounds = [true, true]}} : {vt2}, {ktt}")
    E(f"        scf.yield %t4 : {ktt}")
    E("      }")
    E(f"      scf.yield %t3r : {ktt}")
    E("    }")
    E(f"    scf.yield %t2r : {ktt}")
    E("  }")
    E(f"  scf.yield %t1r : {ktt}")
    E("}")

    tq, tk, tdk, tqv = (f"tensor<{BQ}xf32>", f"tensor<{BQ}x{BK}xf32>",
                        f"tensor<{DP}x{BK}xf32>", f"tensor<{BQ}x{DV}xf32>")
    id2 = "affine_map<(d0, d1) -> (d0, d1)>"
    row2 = "affine_map<(d0, d1) -> (d0)>"
    id1 = "affine_map<(d0) -> (d0)>"
    body, val = [], "%x"
    if scale is not None or divisor is not None:
        body = [f"%sc = arith.constant {_f32_literal(scale if scale is not None else divisor)} : f32",
                f"%y0 = arith.{'mulf' if scale is not None else 'divf'} %x, %sc : f32"]
        val = "%y0"
    if bias is not None:
        body.append(f"%yb = arith.addf {val}, %bv : f32")
        val = "%yb"
    body += ["%ci = linalg.index 1 : index", "%col0 = arith.addi %ci, %j0 : index"]
    if causal:
        body += ["%ri = linalg.index 0 : index", "%row = arith.addi %ri, %i0 : index",
                 "%keep = arith.cmpi sge, %row, %col0 : index",
                 f"%fl = arith.constant {_f32_literal(fill)} : f32",
                 f"%y1 = arith.select %keep, {val}, %fl : f32"]
        val = "%y1"
    # padded key columns: -inf, so that they change no max and get p = 0
    body += ["%inb = arith.cmpi slt, %col0, %Sk : index", "%ni = arith.constant 0xFF800000 : f32",
             f"%y2 = arith.select %inb, {val}, %ni : f32"]
    if causal:
        # the last key row of v holding a non-finite value, per batch (-1: none)
        E("%true = arith.constant true")
        E(f"%fillv = arith.constant {_f32_literal(fill)} : f32")
        E("%explo = arith.constant -87.33654022216797 : f32")  # ops/kernel.py's exp flushes below it
        E(f"%fillninf = arith.constant {'true' if fill == -math.inf else 'false'}")
        E(f"%lbe = tensor.empty({bdyn.rstrip(', ')}) : tensor<{b}xindex>")
        E("%lbm = arith.constant -1 : index")
        E(f"%lbf = linalg.fill ins(%lbm : index) outs(%lbe : tensor<{b}xindex>) -> tensor<{b}xindex>")
        E(f"%lastbad = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, "
          f"affine_map<(d0, d1, d2) -> (d0)>], iterator_types = [\"parallel\", \"reduction\", \"reduction\"]}} "
          f"ins({v3} : {v3t}) outs(%lbf : tensor<{b}xindex>) {{")
        k.lines += ["  ^bb0(%x: f32, %o: index):", "    %j = linalg.index 1 : index", "    %d = arith.subf %x, %x : f32",
                    "    %z = arith.constant 0.0 : f32", "    %fin = arith.cmpf oeq, %d, %z : f32",
                    "    %mj = arith.maxsi %o, %j : index", "    %y = arith.select %fin, %o, %mj : index",
                    "    linalg.yield %y : index", f"  }} -> tensor<{b}xindex>"]
    # Tasks: (batch, query block), linearized. Parallel (an scf.forall on the runtime's threads)
    # only when there are several and each is worth a thread wake-up: waking the workers costs
    # 50-100 us (more on a loaded machine: a 4 ms scheduler tick); small calls run the same body
    # in a plain loop.
    E("%ntask = arith.muli %B, %nqb : index")
    E(f"%manyt = arith.cmpi uge, %ntask, {k.const_index(PARALLEL_MIN_TASKS)} : index")
    E(f"%longk = arith.cmpi uge, %Sk, {k.const_index(PARALLEL_MIN_KEYS)} : index")
    E("%par = arith.andi %manyt, %longk : i1")
    E(f"%res = scf.if %par -> ({o3t}) {{")
    E(f"%resp = scf.forall (%t) in (%ntask) shared_outs(%os = {o3}) -> ({o3t}) {{")
    E("// task body")  # const_index() inserts above: find the body by this line, not by position
    E("  %b = arith.divui %t, %nqb : index")
    E("  %qi = arith.remui %t, %nqb : index")
    E(f"  %i0 = arith.muli %qi, {cbq} : index")
    # the output's batch indices of task batch %b (row-major over its batch dims)
    bidx = ["%b"] if nbatch == 1 else []
    if nbatch > 1:
        rem = "%b"
        bidx = [""] * nbatch
        for i in range(nbatch - 1, 0, -1):
            E(f"  %bx{i} = arith.remui {rem}, {bsizes[i]} : index")
            E(f"  %br{i} = arith.divui {rem}, {bsizes[i]} : index")
            bidx[i], rem = f"%bx{i}", f"%br{i}"
        bidx[0] = rem
    ins_at = ("[" + ", ".join(bidx + ["%i0", "0"]) + "] [" + ", ".join(["1"] * nbatch + ["%rows", str(DV)]) + "] ["
              + ", ".join(["1"] * (nbatch + 2)) + "]")
    # rows of the block the products compute: those below Sq, rounded up to the register tile
    E("  %qleft = arith.subi %Sq, %i0 : index")
    E(f"  %qn = arith.minui %qleft, {cbq} : index")
    E(f"  %qn1 = arith.addi %qn, {k.const_index(_RM - 1)} : index")
    E(f"  %qn2 = arith.divui %qn1, {k.const_index(_RM)} : index")
    E(f"  %nrows = arith.muli %qn2, {k.const_index(_RM)} : index")
    # one tensor.empty per row-vector result: a shared one makes bufferization copy between them
    # (memrefCopy calls, measured: a sixth of the kernel's time at s = 128)
    E(f"  %me0 = tensor.empty() : {tq}")
    E(f"  %me1 = tensor.empty() : {tq}")
    E(f"  %m0 = linalg.fill ins(%ninf : f32) outs(%me0 : {tq}) -> {tq}")
    E(f"  %l0 = linalg.fill ins(%zero : f32) outs(%me1 : {tq}) -> {tq}")
    E(f"  %ae = tensor.empty() : {tqv}")
    E(f"  %a0 = linalg.fill ins(%zero : f32) outs(%ae : {tqv}) -> {tqv}")
    E(f"  %se = tensor.empty() : {tk}")
    # the bias tile: its own type (a [1, BQ, BK] tile), so that CSE does not merge its
    # tensor.empty with the scores' (bufferization would copy between them)
    tbt = f"tensor<1x{BQ}x{BK}xf32>"
    if bias is not None:
        E(f"  %bte = tensor.empty() : {tbt}")

    def bias_tile() -> str:
        """The bias of the tile's rows and key columns as a [1, BQ, BK] tile: per row, BK / 16
        vector reads of the bias row (key columns past Sk read as 0: they are masked to -inf;
        rows past Sq repeat the last one: never stored)."""
        nb = len(bias.dims) - 2
        E(f"    %btl = scf.for %bri = {c0} to {cbq} step {c1} iter_args(%bta = %bte) -> ({tbt}) {{")
        E("      %brow0 = arith.addi %i0, %bri : index")
        E("      %brow = arith.minui %brow0, %sqlast : index")
        one = [d.is_const and d.value == 1 for d in bias.dims]
        idx = [c0 if one[i] else bidx[i] for i in range(nb)]
        row = "%brow"
        if query_heads > 1:
            E("      %bhin = arith.divui %brow, %Shd : index")
            E("      %brin = arith.remui %brow, %Shd : index")
            row = "%brin"
            if not one[nb - 1]:
                E(f"      %bh0 = arith.muli {bidx[nb - 1]}, {k.const_index(query_heads)} : index")
                E("      %bh = arith.addi %bh0, %bhin : index")
                idx[nb - 1] = "%bh"
        idx.append(c0 if one[nb] else row)
        bt, vt = k.ty(bias), f"vector<{L}xf32>"
        cur = "%bta"
        for c in range(0, BK, L):
            E(f"      %bcol{c} = arith.addi %j0, {k.const_index(c)} : index")
            E(f"      %bvec{c} = vector.transfer_read {k.inp(3)}[{', '.join(idx)}, %bcol{c}], %zero "
              f"{{in_bounds = [false]}} : {bt}, {vt}")
            E(f"      %btw{c} = vector.transfer_write %bvec{c}, {cur}[{c0}, %bri, {k.const_index(c)}] "
              f"{{in_bounds = [true]}} : {vt}, {tbt}")
            cur = f"%btw{c}"
        E(f"      scf.yield {cur} : {tbt}")
        E("    }")
        return "%btl"
    def key_loop(name: str, lo: str, hi: str, m0: str, l0: str, a0: str) -> None:
        """The key-tile loop from tile `lo` to `hi`, carrying (max, sum, accumulator)."""
        E(f"  %{name}:3 = scf.for %kj = {lo} to {hi} step {c1} iter_args(%m = {m0}, %l = {l0}, %acc = {a0}) -> ({tq}, {tq}, {tqv}) {{")
        E(f"    %j0 = arith.muli %kj, {cbk} : index")
        E(f"    %kb = tensor.extract_slice %ktp[%b, %kj, 0, 0] [1, 1, {DP}, {BK}] [1, 1, 1, 1] : {ktt} to {tdk}")
        E("    %kleft = arith.subi %Sk, %j0 : index")
        E(f"    %jn = arith.minui %kleft, {cbk} : index")
        E(f"    %jn1 = arith.addi %jn, {k.const_index(2 * _LANES - 1)} : index")
        E(f"    %jn2 = arith.divui %jn1, {k.const_index(2 * _LANES)} : index")
        E(f"    %ncols = arith.muli %jn2, {k.const_index(2 * _LANES)} : index")
        E(f"    %sz = linalg.fill ins(%zero : f32) outs(%se : {tk}) -> {tk}")
        sres = _tile_matmul(k, q3, q3t, "%kb", tdk, "%sz", tk, BQ, BK, D, a_pre="%b, ", a_rows=("%i0", "%Sq"),
                            m_dyn="%nrows", n_dyn="%ncols")
        if bias is None:
            E(f"    %s2 = linalg.generic {{indexing_maps = [{id2}, {id2}], iterator_types = [\"parallel\", \"parallel\"]}} "
              f"ins({sres} : {tk}) outs(%se : {tk}) {{")
            k.lines.append("    ^bb0(%x: f32, %o: f32):")
        else:
            btile = bias_tile()
            E(f"    %s2 = linalg.generic {{indexing_maps = [{id2}, affine_map<(d0, d1) -> (0, d0, d1)>, {id2}], "
              f"iterator_types = [\"parallel\", \"parallel\"]}} ins({sres}, {btile} : {tk}, {tbt}) outs(%se : {tk}) {{")
            k.lines.append("    ^bb0(%x: f32, %bv: f32, %o: f32):")
        for line in body:
            k.lines.append("      " + line)
        k.lines.append("      linalg.yield %y2 : f32")
        k.lines.append(f"    }} -> {tk}")
        # The running max and sum are updated in place (reductions whose init is the loop's own
        # value): reductions from fresh fills were merged by CSE with the loop's initial fills,
        # and bufferization then copied between them (memrefCopy calls, a sixth of the time at
        # s = 128, measured). m_old is kept for the rescale factor.
        E(f"    %me4 = tensor.empty() : {tq}")
        E(f"    %me5 = tensor.empty() : {tq}")
        E(f"    %mold = linalg.generic {{indexing_maps = [{id1}, {id1}], iterator_types = [\"parallel\"]}} "
          f"ins(%m : {tq}) outs(%me4 : {tq}) {{")
        k.lines += ["    ^bb0(%x: f32, %o: f32):", "      linalg.yield %x : f32", f"    }} -> {tq}"]
        E(f"    %mn = linalg.generic {{indexing_maps = [{id2}, {row2}], iterator_types = [\"parallel\", \"reduction\"]}} "
          f"ins(%s2 : {tk}) outs(%m : {tq}) {{")
        k.lines += ["    ^bb0(%x: f32, %o: f32):", "      %y = arith.maximumf %o, %x : f32", "      linalg.yield %y : f32",
                    f"    }} -> {tq}"]
        # alpha = exp(m_old - m_new), 1 where the max did not change (-inf - -inf would be NaN)
        E(f"    %al = linalg.generic {{indexing_maps = [{id1}, {id1}, {id1}], iterator_types = [\"parallel\"]}} "
          f"ins(%mold, %mn : {tq}, {tq}) outs(%me5 : {tq}) {{")
        k.lines += ["    ^bb0(%mo: f32, %mx: f32, %o2: f32):",
                    "      %eq = arith.cmpf oeq, %mo, %mx : f32",
                    "      %dd = arith.subf %mo, %mx : f32",
                    "      %ex = math.exp %dd : f32",
                    "      %one = arith.constant 1.0 : f32",
                    "      %a = arith.select %eq, %one, %ex : f32",
                    "      linalg.yield %a : f32",
                    f"    }} -> {tq}"]
        # p = exp(s - m_new), 0 where s = -inf (a padded or -inf score: never exp(-inf - -inf))
        E(f"    %p = linalg.generic {{indexing_maps = [{id2}, {row2}, {id2}], iterator_types = [\"parallel\", \"parallel\"]}} "
          f"ins(%s2, %mn : {tk}, {tq}) outs(%se : {tk}) {{")
        k.lines += ["    ^bb0(%x: f32, %m1: f32, %o: f32):",
                    "      %dd = arith.subf %x, %m1 : f32",
                    "      %ex = math.exp %dd : f32",
                    "      %ni = arith.constant 0xFF800000 : f32",
                    "      %z = arith.constant 0.0 : f32",
                    "      %isn = arith.cmpf oeq, %x, %ni : f32",
                    "      %pv = arith.select %isn, %z, %ex : f32",
                    "      linalg.yield %pv : f32",
                    f"    }} -> {tk}"]
        # l = l * alpha + sum(p), in place
        E(f"    %lsc = linalg.generic {{indexing_maps = [{id1}, {id1}], iterator_types = [\"parallel\"]}} "
          f"ins(%al : {tq}) outs(%l : {tq}) {{")
        k.lines += ["    ^bb0(%a: f32, %lo: f32):", "      %y = arith.mulf %lo, %a : f32", "      linalg.yield %y : f32",
                    f"    }} -> {tq}"]
        E(f"    %l2 = linalg.generic {{indexing_maps = [{id2}, {row2}], iterator_types = [\"parallel\", \"reduction\"]}} "
          f"ins(%p : {tk}) outs(%lsc : {tq}) {{")
        k.lines += ["    ^bb0(%x: f32, %o: f32):", "      %y = arith.addf %o, %x : f32", "      linalg.yield %y : f32",
                    f"    }} -> {tq}"]
        # acc * alpha + p @ v in one micro-kernel
        ac2 = _tile_matmul(k, "%p", tk, v3, v3t, "%acc", tqv, BQ, DV, BK, alpha="%al", b_pre="%b, ", b_row0="%j0",
                           kk_dyn="%jn", m_dyn="%nrows")
        E(f"    scf.yield %mn, %l2, {ac2} : {tq}, {tq}, {tqv}")
        E("  }")
    if not causal:
        key_loop("lq", c0, "%nkb", "%m0", "%l0", "%a0")
    else:
        # Causal: key tiles from `kend` on are masked for every row of the block. They are
        # skipped when that changes nothing: every row's p there, exp(fill - m), is exactly 0
        # (fill - m below the exp's flush bound, or fill = -inf) and v is finite there (0 * v = 0;
        # a non-finite v must still make its NaN). Otherwise they are processed like the rest.
        E(f"  %ie = arith.addi %i0, {k.const_index(BQ + BK - 1)} : index")
        E(f"  %ke = arith.divui %ie, {cbk} : index")
        E("  %kend = arith.minui %ke, %nkb : index")
        key_loop("lp", c0, "%kend", "%m0", "%l0", "%a0")
        E(f"  %sf = scf.for %r = {c0} to {cbq} step {c1} iter_args(%ok = %true) -> (i1) {{")
        E(f"    %mr = tensor.extract %lp#0[%r] : {tq}")
        E("    %fm = arith.subf %fillv, %mr : f32")
        E("    %under = arith.cmpf olt, %fm, %explo : f32")
        E("    %ok2 = arith.andi %ok, %under : i1")
        E("    scf.yield %ok2 : i1")
        E("  }")
        E("  %safe = arith.ori %sf, %fillninf : i1")
        E(f"  %kst = arith.muli %kend, {cbk} : index")
        E("  %lb = tensor.extract %lastbad[%b] : tensor<" + b + "xindex>")
        E("  %vfin = arith.cmpi slt, %lb, %kst : index")
        E("  %skip = arith.andi %safe, %vfin : i1")
        E(f"  %lq:3 = scf.if %skip -> ({tq}, {tq}, {tqv}) {{")
        E(f"    scf.yield %lp#0, %lp#1, %lp#2 : {tq}, {tq}, {tqv}")
        E("  } else {")
        key_loop("lr", "%kend", "%nkb", "%lp#0", "%lp#1", "%lp#2")
        E(f"    scf.yield %lr#0, %lr#1, %lr#2 : {tq}, {tq}, {tqv}")
        E("  }")
    # out = acc / l; Sk = 0: zeros (the empty sum), not 0 / 0
    E(f"  %on = linalg.generic {{indexing_maps = [{id2}, {row2}, {id2}], iterator_types = [\"parallel\", \"parallel\"]}} "
      f"ins(%lq#2, %lq#1 : {tqv}, {tq}) outs(%ae : {tqv}) {{")
    k.lines += ["    ^bb0(%a: f32, %ll: f32, %o: f32):",
                "      %y = arith.divf %a, %ll : f32",
                "      %z = arith.constant 0.0 : f32",
                "      %y2 = arith.select %skz, %z, %y : f32",
                "      linalg.yield %y2 : f32", f"    }} -> {tqv}"]
    E("  %left = arith.subi %Sq, %i0 : index")
    E(f"  %rows = arith.minui %left, {cbq} : index")
    E(f"  %onr = tensor.extract_slice %on[0, 0] [%rows, {DV}] [1, 1] : {tqv} to tensor<?x{DV}xf32>")
    body = k.lines[k.lines.index("  // task body") + 1:]
    E("  scf.forall.in_parallel {")
    E(f"    tensor.parallel_insert_slice %onr into %os{ins_at} : tensor<?x{DV}xf32> into {o3t}")
    E("  }")
    E("}")
    E(f"scf.yield %resp : {o3t}")
    E("} else {")
    E(f"%ress = scf.for %t = {c0} to %ntask step {c1} iter_args(%os = {o3}) -> ({o3t}) {{")
    k.lines += body
    E(f"  %ins = tensor.insert_slice %onr into %os{ins_at} : tensor<?x{DV}xf32> into {o3t}")
    E(f"  scf.yield %ins : {o3t}")
    E("}")
    E(f"scf.yield %ress : {o3t}")
    E("}")
    return "%res"
