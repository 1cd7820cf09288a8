"""Convolution (StableHLO convolution) over the canonical layout: lhs [batch, feature, spatial...],
rhs [out feature, in feature, spatial...], result [batch, out feature, spatial...]; the importer
transposes other layouts into it.

The kernel dilates and pads the lhs with zeros (ops/window.py), splits the feature (or batch)
dim into groups with `tensor.expand_shape`, and accumulates in one `linalg.generic` over
(batch, group, out feature, kernel spatial..., in feature, out spatial...). On the CPU,
`relax-conv-to-matmul` makes most convolutions a `relax.window_patches` (im2col) and a matmul."""
from __future__ import annotations

from relax_mlir.dialect.spec import DeduceError, OpInfo, OpSpec, TENSOR, attr, operand, relax_op, result_
from relax_mlir.dialect.types import FLOAT_DTYPES, TensorType
from relax_mlir.ops.common import dims_equal, require_rank, symbols_note
from relax_mlir.ops.kernel import Kernel, Legalized, affine_map, identity_map, zero_literal
from relax_mlir.ops.window import (sized_tensor, check_padded_size, dilate_pad, dims_attr, ints_attr, pad_values,
                                   window_out)
from relax_mlir.shape import Expr, const, floordiv


@relax_op
class ConvOp(OpSpec):
    """N-d convolution (cross-correlation, StableHLO semantics) in the canonical layout: lhs
    [B, C, S...], rhs [O, C / feature_group_count, K...] -> [B / batch_group_count, O, Q...].
    Attributes: strides, lhs_dilation, rhs_dilation (positive ints, default 1), pad_lo, pad_hi
    (dims, default 0; negative constants cut), feature_group_count, batch_group_count (default 1)."""

    name = "relax.conv"
    lhs = operand(TENSOR)
    rhs = operand(TENSOR)
    result = result_(TENSOR)
    strides = attr("array")
    lhs_dilation = attr("array")
    rhs_dilation = attr("array")
    pad_lo = attr("array")
    pad_hi = attr("array")
    feature_group_count = attr("int", default=1)
    batch_group_count = attr("int", default=1)

    @classmethod
    def params(cls, op: OpInfo, ns: int):
        fgc, bgc = op.attr("feature_group_count", 1), op.attr("batch_group_count", 1)
        if fgc < 1 or bgc < 1:
            raise DeduceError(f"group counts must be >= 1, got feature {fgc}, batch {bgc}")
        if fgc > 1 and bgc > 1:
            raise DeduceError("feature_group_count and batch_group_count cannot both exceed 1")
        return (ints_attr(op, "strides", ns), ints_attr(op, "lhs_dilation", ns), ints_attr(op, "rhs_dilation", ns),
                dims_attr(op, "pad_lo", ns, 0), dims_attr(op, "pad_hi", ns, 0), fgc, bgc)

    @classmethod
    def deduce(cls, op: OpInfo):
        lhs, rhs = op.tensor(0), op.tensor(1)
        a, w = require_rank(lhs, "lhs"), require_rank(rhs, "rhs")
        if len(a) < 2 or len(a) != len(w):
            raise DeduceError(f"lhs and rhs must have the same rank >= 2, got {len(a)} and {len(w)}")
        if lhs.dtype != rhs.dtype:
            raise DeduceError(f"element types differ: lhs is {lhs.dtype}, rhs is {rhs.dtype}")
        if lhs.dtype == "i1":
            raise DeduceError("convolution of booleans is not supported")
        ns = len(a) - 2
        strides, ldil, rdil, lo, hi, fgc, bgc = cls.params(op, ns)
        b, c, o, i = a[0], a[1], w[0], w[1]
        facts = op.facts
        if c is not None and i is not None and not dims_equal(c, i * fgc, facts):
            raise DeduceError(f"lhs features {c} must equal rhs input features {i} times feature_group_count "
                              f"{fgc}" + symbols_note(c, i))
        g = max(fgc, bgc)
        if o is not None and not _divisible(o, g, facts):
            raise DeduceError(f"rhs output features {o} must be divisible by the group count {g}")
        if bgc > 1 and b is not None and not _divisible(b, bgc, facts):
            raise DeduceError(f"lhs batch {b} must be divisible by batch_group_count {bgc}" + symbols_note(b))
        out_b = None if b is None else (b if bgc == 1 else floordiv(b, bgc))
        out = [out_b, o]
        for j in range(ns):
            n, kw = a[2 + j], w[2 + j]
            if n is None or kw is None:
                out.append(None)
                continue
            check_padded_size(n, lo[j], hi[j], ldil[j], facts, 2 + j)
            out.append(window_out(n, lo[j], hi[j], ldil[j], kw, rdil[j], strides[j], facts))
        return [TensorType(tuple(out), lhs.dtype)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        lhs, rhs, r = op.tensor(0), op.tensor(1), op.result_types[0]
        ns = len(lhs.dims) - 2
        strides, ldil, rdil, lo, hi, fgc, bgc = cls.params(op, ns)
        dt = lhs.dtype
        k = Kernel("conv", [lhs, rhs], [r])
        syms: list[Expr] = []
        lows = pad_values(k, lo, syms, op.facts)
        highs = pad_values(k, hi, syms, op.facts)
        k.n_syms = len(syms)
        zero = zero_literal(dt)
        f = k.fill(zero, k.out(0), r)
        if any(d is not None and d.is_const and d.value == 0 for d in r.dims):
            return Legalized(k, [f], syms)
        axes = list(range(2, 2 + ns))
        xp, xp_t, xs = dilate_pad(k, k.inp(0), lhs, axes, lows, highs, ldil, zero)
        g = max(fgc, bgc)
        # lhs -> [B, G, Cg, P...] (feature groups) or [G, B', C, P...] (batch groups)
        if bgc > 1:
            bsz = xs[0] if isinstance(xs[0], int) else None
            l4 = [g, None if bsz is None else bsz // g, xs[1]] + xs[2:]
            sizes = [str(g), _div_text(k, xs[0], g)] + [_ix_text(k, s) for s in xs[1:]]
            reassoc = [[0, 1]] + [[j + 1] for j in range(1, ns + 2)]
        else:
            csz = xs[1]
            l4 = [xs[0], g, csz // g if isinstance(csz, int) else None] + xs[2:]
            sizes = [_ix_text(k, xs[0]), str(g), _div_text(k, csz, g)] + [_ix_text(k, s) for s in xs[2:]]
            reassoc = [[0], [1, 2]] + [[j + 1] for j in range(2, ns + 2)]
        l4_t = sized_tensor([d if isinstance(d, int) else "?" for d in l4], dt)
        xe = k.fresh("xg")
        k.emit(f"{xe} = tensor.expand_shape {xp} {_reassoc(reassoc)} output_shape [{', '.join(sizes)}] : "
               f"{k.ty(xp_t)} into {k.ty(l4_t)}")
        # rhs [O, Cg, K...] -> [G, Og, Cg, K...]
        wd = [d.value if d is not None and d.is_const else None for d in rhs.dims]
        w4 = [g, None if wd[0] is None else wd[0] // g] + wd[1:]
        w4_t = sized_tensor([d if d is not None else "?" for d in w4], dt)
        wsz = [str(g), _div_text(k, _size(k, k.inp(1), rhs, 0), g)] + \
              [_ix_text(k, _size(k, k.inp(1), rhs, j)) for j in range(1, ns + 2)]
        we = k.fresh("wg")
        k.emit(f"{we} = tensor.expand_shape {k.inp(1)} {_reassoc([[0, 1]] + [[j + 1] for j in range(1, ns + 2)])} "
               f"output_shape [{', '.join(wsz)}] : {k.ty(rhs)} into {k.ty(w4_t)}")
        # out [B', O, Q...] -> [B', G, Og, Q...]
        rd = [d.value if d is not None and d.is_const else None for d in r.dims]
        o4 = [rd[0], g, None if rd[1] is None else rd[1] // g] + rd[2:]
        # f16/bf16: products and sums in f32, rounded once at the end (as XLA's convolution)
        half = dt in ("f16", "bf16")
        acc_dt = "f32" if half else dt
        acc_r = TensorType(r.dims, acc_dt)
        acc = k.fill("0.0", k.empty(acc_r, (k.out(0), r)), acc_r) if half else f
        o4_t = sized_tensor([d if d is not None else "?" for d in o4], acc_dt)
        osz = [_ix_text(k, _size(k, f, r, 0)), str(g), _div_text(k, _size(k, f, r, 1), g)] + \
              [_ix_text(k, _size(k, f, r, j)) for j in range(2, ns + 2)]
        o_re = _reassoc([[0], [1, 2]] + [[j + 1] for j in range(2, ns + 2)])
        oe = k.fresh("og")
        k.emit(f"{oe} = tensor.expand_shape {acc} {o_re} output_shape [{', '.join(osz)}] : "
               f"{k.ty(acc_r)} into {k.ty(o4_t)}")
        # loops: b, g, og, c, k_0.., q_0..: the output's last spatial dim (contiguous in the
        # output and, at stride 1, in the input) innermost, where the CPU backend vectorizes
        # The reduction runs over the window positions, then the channels innermost, each step
        # one fused multiply-add: XLA's convolution (an FMA dot of channels-minor patches), whose
        # infinities and NaNs a different order or rounded products would not reproduce (a
        # product overflowing to -inf next to an infinite partial sum).
        n = 3 + ns + 1 + ns
        kk = [f"d{3 + j}" for j in range(ns)]
        c = f"d{3 + ns}"
        q = [f"d{4 + ns + j}" for j in range(ns)]
        sp = [_term(q[j], kk[j], strides[j], rdil[j]) for j in range(ns)]
        lmap = affine_map(n, (["d1", "d0", c] if bgc > 1 else ["d0", "d1", c]) + sp)
        wmap = affine_map(n, ["d1", "d2", c] + kk)
        omap = affine_map(n, ["d0", "d1", "d2"] + q)
        if half:
            body = [f"%x = arith.extf %a0 : {dt} to f32", f"%w = arith.extf %a1 : {dt} to f32",
                    "%m = arith.mulf %x, %w fastmath<contract> : f32",
                    "%y = arith.addf %o0, %m fastmath<contract> : f32"]
        elif dt in FLOAT_DTYPES:
            body = [f"%m = arith.mulf %a0, %a1 fastmath<contract> : {dt}",
                    f"%y = arith.addf %o0, %m fastmath<contract> : {dt}"]
        else:
            body = [f"%m = arith.muli %a0, %a1 : {dt}", f"%y = arith.addi %o0, %m : {dt}"]
        gen = k.generic([(xe, l4_t, lmap), (we, w4_t, wmap)], [(oe, o4_t, omap)],
                        ["parallel"] * 3 + ["reduction"] * (1 + ns) + ["parallel"] * ns, body, ["%y"])[0]
        res = k.fresh("res")
        k.emit(f"{res} = tensor.collapse_shape {gen} {o_re} : {k.ty(o4_t)} into {k.ty(acc_r)}")
        if half:
            rank = ns + 2
            res = k.generic([(res, acc_r, identity_map(rank))], [(k.out(0), r, identity_map(rank))],
                            ["parallel"] * rank, [f"%t = arith.truncf %a0 : f32 to {dt}"], ["%t"])[0]
        return Legalized(k, [res], syms)


def _divisible(e: Expr, g: int, facts) -> bool:
    if g == 1:
        return True
    if e.is_const:
        return e.value % g == 0
    return facts.prove_eq(floordiv(e, g) * g, e)


def _size(k: Kernel, value: str, t: TensorType, i: int):
    d = t.dims[i]
    return d.value if d is not None and d.is_const else k.dim(value, t, i)


def _ix_text(k: Kernel, s) -> str:
    return str(s)


def _div_text(k: Kernel, s, g: int) -> str:
    if isinstance(s, int):
        return str(s // g)
    if g == 1:
        return s
    r = k.fresh("q")
    k.emit(f"{r} = arith.divui {s}, {k.const_index(g)} : index")
    return r


def _reassoc(groups) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, grp)) + "]" for grp in groups) + "]"


def _term(o: str, w: str, stride: int, dil: int) -> str:
    a = o if stride == 1 else f"{o} * {stride}"
    b = w if dil == 1 else f"{w} * {dil}"
    return f"{a} + {b}"



@relax_op
class WindowPatchesOp(OpSpec):
    """The windows of a convolution's input as rows (im2col), channels last: x [B, S..., C] ->
    [B, Q..., K..., C], element (b, q..., k..., c) = x'[b, q * stride + k * rhs_dilation, c] of x'
    the input with `lhs_dilation - 1` holes between neighbours and `pad_lo` / `pad_hi` zeros at the
    ends of each spatial dim (negative constants cut), Q... as relax.conv's. Attributes: window
    (the positive static window sizes K...), strides, lhs_dilation, rhs_dilation, pad_lo, pad_hi
    as relax.conv's. `relax-conv-to-matmul` makes a convolution the product of these rows
    (flattened to [B * Q..., K... * C]) with its kernel flattened to [K... * C, O]."""

    name = "relax.window_patches"
    x = operand(TENSOR)
    result = result_(TENSOR)
    window = attr("array", optional=False)
    strides = attr("array")
    lhs_dilation = attr("array")
    rhs_dilation = attr("array")
    pad_lo = attr("array")
    pad_hi = attr("array")

    @classmethod
    def params(cls, op: OpInfo, ns: int):
        return (ints_attr(op, "window", ns), ints_attr(op, "strides", ns), ints_attr(op, "lhs_dilation", ns),
                ints_attr(op, "rhs_dilation", ns), dims_attr(op, "pad_lo", ns, 0), dims_attr(op, "pad_hi", ns, 0))

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = require_rank(x, "x")
        if len(d) < 3:
            raise DeduceError(f"x must have rank >= 3 ([B, S..., C]), got rank {len(d)}")
        ns = len(d) - 2
        window, strides, ldil, rdil, lo, hi = cls.params(op, ns)
        out = [d[0]]
        for j in range(ns):
            n = d[1 + j]
            if n is None:
                out.append(None)
                continue
            check_padded_size(n, lo[j], hi[j], ldil[j], op.facts, 1 + j)
            out.append(window_out(n, lo[j], hi[j], ldil[j], const(window[j]), rdil[j], strides[j], op.facts))
        return [TensorType(tuple(out + [const(w) for w in window] + [d[-1]]), x.dtype)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, r = op.tensor(0), op.result_types[0]
        ns = len(x.dims) - 2
        window, strides, ldil, rdil, lo, hi = cls.params(op, ns)
        k = Kernel("window_patches", [x], [r])
        syms: list[Expr] = []
        lows, highs = pad_values(k, lo, syms, op.facts), pad_values(k, hi, syms, op.facts)
        k.n_syms = len(syms)
        if any(d is not None and d.is_const and d.value == 0 for d in r.dims):
            return Legalized(k, [k.out(0)], syms)
        xp, xp_t, _ = dilate_pad(k, k.inp(0), x, list(range(1, 1 + ns)), lows, highs, ldil, zero_literal(x.dtype))
        n = 2 + 2 * ns  # loops: b, q..., k..., c (the result's own order: a copy written in place)
        spatial = [_term(f"d{1 + j}", f"d{1 + ns + j}", strides[j], rdil[j]) for j in range(ns)]
        imap = affine_map(n, ["d0"] + spatial + [f"d{n - 1}"])
        res = k.generic([(xp, xp_t, imap)], [(k.out(0), r, identity_map(n))], ["parallel"] * n, [], ["%a0"])
        return Legalized(k, res, syms)
