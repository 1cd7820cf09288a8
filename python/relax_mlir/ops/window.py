"""Windowed reductions (StableHLO reduce_window): pooling and cumulative sums/max/min/prod.

The kernels dilate and pad the operand with the reduction's identity (a strided
`tensor.insert_slice` into a filled tensor, `tensor.pad`, a slice for negative padding), then
reduce with one `linalg.generic` over (output dims, window dims) whose input map is
`o * stride + k * window_dilation`. `ops/conv.py` shares the dilate-and-pad step."""
from __future__ import annotations

from typing import Sequence

from relax_mlir.dialect.spec import DeduceError, OpInfo, OpSpec, TENSOR, attr, operand, relax_op, result_
from relax_mlir.dialect.types import TensorType
from relax_mlir.ops.common import ONE, ZERO, int_array, require_rank
from relax_mlir.ops.kernel import Kernel, Legalized, affine_map, identity_map
from relax_mlir.ops.reduce import _INIT, combine
from relax_mlir.shape import Expr, Facts, const, floordiv, max_, parse

KINDS = ("sum", "max", "min", "prod", "logaddexp")


# --- shape algebra shared with ops/conv.py -------------------------------------------------------

def as_dim(v) -> Expr:
    """An attribute element (int or expression string) as an Expr."""
    if isinstance(v, int) and not isinstance(v, bool):
        return const(v)
    if isinstance(v, str):
        return parse(v)
    raise DeduceError(f"expected an integer or a symbolic expression, got {v!r}")


def dims_attr(op: OpInfo, name: str, rank: int, default: int | None = None) -> list[Expr]:
    v = op.attr(name)
    if v is None:
        if default is None:
            raise DeduceError(f"requires attribute '{name}'")
        return [const(default)] * rank
    if len(v) != rank:
        raise DeduceError(f"attribute '{name}' has {len(v)} elements, expected {rank}")
    return [as_dim(x) for x in v]


def ints_attr(op: OpInfo, name: str, rank: int, default: int = 1, minimum: int = 1) -> list[int]:
    return int_array(op, name, rank, default, minimum)


def dilated(n: Expr, d: int, facts: Facts) -> Expr:
    """The size of n elements with d - 1 holes between neighbours: 0 for n = 0, else (n - 1) * d + 1."""
    if d == 1:
        return n
    e = (n - ONE) * d + ONE
    return e if facts.prove_ge(n, ONE) else max_(e, ZERO)


def window_out(n: Expr, lo: Expr, hi: Expr, base_dil: int, win: Expr, win_dil: int, stride: int,
               facts: Facts) -> Expr:
    """The number of window positions: floor((P - W) / stride) + 1 for a padded, dilated input of
    P elements and a dilated window of W (0 when P < W)."""
    p = dilated(n, base_dil, facts) + lo + hi
    w = dilated(win, win_dil, facts)
    if facts.prove_ge(p, w):
        return floordiv(p - w, stride) + ONE
    if facts.prove_lt(p, w):
        return ZERO
    return max_(floordiv(p - w + stride, stride), ZERO)


def check_padded_size(n: Expr, lo: Expr, hi: Expr, base_dil: int, facts: Facts, axis: int) -> None:
    """StableHLO requires the padded, dilated size to be >= 0: refuse what is provably negative (a
    symbolic size that is negative at run time leaves no window: an empty result)."""
    p = dilated(n, base_dil, facts) + lo + hi
    if p.is_const and p.value < 0 or not p.is_const and facts.prove_lt(p, ZERO):
        raise DeduceError(f"padding ({lo}, {hi}) of dim {axis} (size {n}) leaves a negative size {p}")


# --- index arithmetic inside a kernel (ints fold in Python, values become arith ops) -------------

class Ix:
    """Index values of a kernel under construction: Python ints stay ints, SSA names are emitted."""

    def __init__(self, k: Kernel):
        self.k = k

    def _bin(self, op: str, a, b):
        a_s = self.k.const_index(a) if isinstance(a, int) else a
        b_s = self.k.const_index(b) if isinstance(b, int) else b
        r = self.k.fresh("ix")
        self.k.emit(f"{r} = arith.{op} {a_s}, {b_s} : index")
        return r

    def add(self, a, b):
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if b == 0:
            return a
        if a == 0:
            return b
        return self._bin("addi", a, b)

    def sub(self, a, b):
        if isinstance(a, int) and isinstance(b, int):
            return a - b
        if b == 0:
            return a
        return self._bin("subi", a, b)

    def mul(self, a, b):
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        if b == 1:
            return a
        return self._bin("muli", a, b)

    def max0(self, a):
        if isinstance(a, int):
            return max(a, 0)
        return self._bin("maxsi", a, 0)

    @staticmethod
    def text(a) -> str:
        """A size in a slice or reshape: a static literal or an index value."""
        return str(a)


def expr_value(k: Kernel, e: Expr, syms: list[Expr]):
    """An Expr as a kernel index value: an int if constant, else a symbolic kernel argument."""
    if e.is_const:
        return e.value
    for i, s in enumerate(syms):
        if s == e:
            return k.sym(i)
    syms.append(e)
    return k.sym(len(syms) - 1)


def sized_tensor(dims: Sequence, dtype: str) -> TensorType:
    """A tensor type of kernel sizes: ints are static dims, index values dynamic ones."""
    return TensorType(tuple(const(d) if isinstance(d, int) else None for d in dims), dtype)


def _dyn(dims: Sequence) -> list[str]:
    return [d for d in dims if not isinstance(d, int)]


def dilate_pad(k: Kernel, value: str, t: TensorType, axes: Sequence[int], lows: Sequence, highs: Sequence,
               dils: Sequence[int], fill: str) -> tuple[str, TensorType, list]:
    """`value` with `dils[j] - 1` holes between neighbours along axes[j], then lows[j]/highs[j]
    elements of padding (ints may be negative: a slice; SSA index values are >= 0), every new
    element `fill` (a literal). Returns the value, its type and its dims (int or index values)."""
    ix = Ix(k)
    rank = len(t.dims)
    sizes = [d.value if d is not None and d.is_const else k.dim(value, t, i) for i, d in enumerate(t.dims)]
    cur, cur_t = value, t
    if any(d != 1 for d in dils):
        nd = list(sizes)
        for a, d in zip(axes, dils):
            if d != 1:
                nd[a] = ix.max0(ix.add(ix.mul(ix.sub(sizes[a], 1), d), 1))
        nt = sized_tensor(nd, t.dtype)
        e = k.empty(nt, dyn=_dyn(nd))
        f = k.fill(fill, e, nt)
        strides = [1] * rank
        for a, d in zip(axes, dils):
            strides[a] = d
        if any(isinstance(s, int) and s == 0 for s in sizes):
            # no element to place (a strided insert_slice of none does not verify: jax.grad of a
            # convolution whose output has a 0 dim dilates that empty cotangent)
            r = f
        else:
            r = k.fresh("dil")
            k.emit(f"{r} = tensor.insert_slice {cur} into {f}[{', '.join('0' for _ in range(rank))}] "
                   f"[{', '.join(ix.text(s) for s in sizes)}] [{', '.join(map(str, strides))}] : "
                   f"{k.ty(cur_t)} into {k.ty(nt)}")
        cur, cur_t, sizes = r, nt, nd
    lo_pos, hi_pos = [0] * rank, [0] * rank
    lo_neg, hi_neg = [0] * rank, [0] * rank

    def split(v):
        """(the padding, the cut) of a padding amount: an int, an index value >= 0, or
        ("signed", value) for a symbolic amount of unknown sign (both computed at run time)."""
        if isinstance(v, int):
            return (v, 0) if v >= 0 else (0, -v)
        if isinstance(v, tuple):
            return ix.max0(v[1]), ix.max0(ix.sub(0, v[1]))
        return v, 0

    for a, lo, hi in zip(axes, lows, highs):
        lo_pos[a], lo_neg[a] = split(lo)
        hi_pos[a], hi_neg[a] = split(hi)
    if any(v != 0 for v in lo_pos + hi_pos):
        nd = [ix.add(ix.add(s, lo), hi) for s, lo, hi in zip(sizes, lo_pos, hi_pos)]
        nt = sized_tensor(nd, t.dtype)
        r = k.fresh("pad")
        idx = ", ".join(f"%pi{i}: index" for i in range(rank))
        typ = "" if t.dtype == "i1" else f" : {t.dtype}"
        k.emit(f"{r} = tensor.pad {cur} low[{', '.join(map(str, lo_pos))}] high[{', '.join(map(str, hi_pos))}] {{")
        k.lines.append(f"  ^bb0({idx}):")
        k.lines.append(f"    %pv = arith.constant {fill}{typ}")
        k.lines.append(f"    tensor.yield %pv : {t.dtype}")
        k.lines.append(f"  }} : {k.ty(cur_t)} to {k.ty(nt)}")
        cur, cur_t, sizes = r, nt, nd
    if any(v != 0 for v in lo_neg + hi_neg):
        nd = [ix.max0(ix.sub(ix.sub(s, lo), hi)) for s, lo, hi in zip(sizes, lo_neg, hi_neg)]
        nt = sized_tensor(nd, t.dtype)
        r = k.fresh("cut")
        # (a size clamped at 0 only where StableHLO's padded size would be negative: no window fits)
        offs = [o if isinstance(o, int) and isinstance(s, int) or o == 0 else ix._bin("minsi", o, s)
                for o, s in zip(lo_neg, sizes)]
        k.emit(f"{r} = tensor.extract_slice {cur}[{', '.join(map(str, offs))}] "
               f"[{', '.join(ix.text(s) for s in nd)}] [{', '.join('1' for _ in range(rank))}] : "
               f"{k.ty(cur_t)} to {k.ty(nt)}")
        cur, cur_t, sizes = r, nt, nd
    return cur, cur_t, sizes


def pad_values(k: Kernel, pads: Sequence[Expr], syms: list[Expr], facts: Facts) -> list:
    """Padding amounts as kernel values: ints, index values proven >= 0, or ("signed", value)."""
    out = []
    for p in pads:
        v = expr_value(k, p, syms)
        out.append(v if p.is_const or facts.prove_ge(p, ZERO) else ("signed", v))
    return out


# --- relax.reduce_window ---------------------------------------------------------------------------

@relax_op
class ReduceWindowOp(OpSpec):
    """Reduce every window of x (StableHLO reduce_window with the reduction's identity as init).
    Attributes: kind ("sum", "max", "min", "prod", "logaddexp": jax's log(exp(a) + exp(b)) on floats), window (dims: int or expression), strides,
    base_dilation, window_dilation (positive ints, default 1), pad_lo, pad_hi (dims, default 0;
    negative constants cut). Padding and holes hold the identity: -inf / +inf / the integer
    extremes for max / min, 0 for sum, 1 for prod, -inf for logaddexp. NaN propagates through max and min."""

    name = "relax.reduce_window"
    x = operand(TENSOR)
    result = result_(TENSOR)
    kind = attr("str", optional=False)
    window = attr("array", optional=False)
    strides = attr("array")
    base_dilation = attr("array")
    window_dilation = attr("array")
    pad_lo = attr("array")
    pad_hi = attr("array")

    @classmethod
    def params(cls, op: OpInfo, rank: int):
        kind = op.attr("kind")
        if kind not in KINDS:
            raise DeduceError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        win = dims_attr(op, "window", rank)
        for w in win:
            if w.is_const and w.value < 0:
                raise DeduceError(f"window dims must be >= 0, got {[str(x) for x in win]}")
        return (kind, win, ints_attr(op, "strides", rank), ints_attr(op, "base_dilation", rank),
                ints_attr(op, "window_dilation", rank), dims_attr(op, "pad_lo", rank, 0),
                dims_attr(op, "pad_hi", rank, 0))

    @staticmethod
    def cumulative_axis(x: TensorType, win, strides, bdil, wdil, lo, hi, facts: Facts):
        """(axis, reverse) when the op is a cumulative reduction (jax's cumsum/cummax/...): one axis
        whose window is the whole dim, padded by dim - 1 before (or after, reversed), stride 1, no
        dilation, every other window 1 and unpadded; None otherwise."""
        if any(s != 1 for s in strides) or any(d != 1 for d in list(bdil) + list(wdil)):
            return None
        found = None
        for i, n in enumerate(x.dims):
            if win[i] == ONE and lo[i] == ZERO and hi[i] == ZERO:
                continue
            if found is not None or n is None or not (win[i] == n or facts.prove_eq(win[i], n)):
                return None
            if facts.prove_eq(lo[i], n - ONE) and hi[i] == ZERO:
                found = (i, False)
            elif facts.prove_eq(hi[i], n - ONE) and lo[i] == ZERO:
                found = (i, True)
            else:
                return None
        return found

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = require_rank(x, "operand")
        kind, win, strides, bdil, wdil, lo, hi = cls.params(op, len(d))
        if x.dtype == "i1" and kind in ("sum", "prod"):
            raise DeduceError("cannot sum booleans; cast with relax.astype first")
        if kind == "logaddexp" and x.dtype not in ("f16", "bf16", "f32", "f64"):
            raise DeduceError(f"logaddexp needs a float operand, got {x.dtype}")
        out = []
        for i, n in enumerate(d):
            if n is None:
                out.append(None)
                continue
            check_padded_size(n, lo[i], hi[i], bdil[i], op.facts, i)
            out.append(window_out(n, lo[i], hi[i], bdil[i], win[i], wdil[i], strides[i], op.facts))
        return [TensorType(tuple(out), x.dtype)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, r = op.tensor(0), op.result_types[0]
        rank = len(x.dims)
        kind, win, strides, bdil, wdil, lo, hi = cls.params(op, rank)
        scan = cls.cumulative_axis(x, win, strides, bdil, wdil, lo, hi, op.facts)
        if scan is not None:
            return _scan_kernel(kind, x, r, *scan)
        k = Kernel("reduce_window", [x], [r])
        syms: list[Expr] = []
        init = _INIT[kind](x.dtype)
        lows = pad_values(k, lo, syms, op.facts)
        highs = pad_values(k, hi, syms, op.facts)
        wins = [expr_value(k, w, syms) for w in win]
        k.n_syms = len(syms)
        f = k.fill(init, k.out(0), r)
        if any(d is not None and d.is_const and d.value == 0 for d in r.dims):
            return Legalized(k, [f], syms)
        xp, xp_t, _ = dilate_pad(k, k.inp(0), x, range(rank), lows, highs, bdil, init)
        wt = sized_tensor(wins, x.dtype)
        we = k.empty(wt, dyn=_dyn(wins))
        # loops: output dims but the last, window dims, the last output dim innermost (contiguous,
        # where the CPU backend vectorizes: the channels of an NHWC pool)
        n = 2 * rank
        od = [i if i < rank - 1 else n - 1 for i in range(rank)]
        wd = [rank - 1 + i for i in range(rank)]
        in_map = affine_map(n, [_term(od[i], wd[i], strides[i], wdil[i]) for i in range(rank)])
        win_map = affine_map(n, [f"d{wd[i]}" for i in range(rank)])
        out_map = affine_map(n, [f"d{od[i]}" for i in range(rank)])
        g = k.generic([(xp, xp_t, in_map), (we, wt, win_map)], [(f, r, out_map)],
                      (["parallel"] * (rank - 1) + ["reduction"] * rank + ["parallel"]) if rank else [],
                      combine(kind, x.dtype, "%a0", "%o0", "%y"), ["%y"])[0]
        return Legalized(k, [g], syms)


def _scan_kernel(kind: str, x: TensorType, r: TensorType, axis: int, reverse: bool) -> Legalized:
    """A cumulative reduction in O(n): an scf.for along `axis` carrying the running value of the
    other dims, each step one elementwise linalg.generic over a slice (vectorized across them)."""
    k = Kernel("cumulative", [x], [r])
    if any(d is not None and d.is_const and d.value == 0 for d in x.dims):
        # no element (a static 0 dim): nothing to scan, and a slice of a 0 dim does not verify
        return Legalized(k, [k.out(0)])
    rank = len(x.dims)
    # f16/bf16 sums and products run in f32, each prefix rounded once (no error growing along n)
    wide = x.dtype in ("f16", "bf16") and kind in ("sum", "prod", "logaddexp")
    # Each step's slice keeps the scanned axis as a dim of 1: a rank-reducing slice of a tensor
    # with another static dim of 1 ([1, n, m, k] scanned along m) is ambiguous to MLIR's memref
    # folds (which dim was dropped, guessed from dynamic strides), and the canonicalizer then
    # aborted the process after bufferization (fuzz seed 2340491).
    slice_t = TensorType(tuple(ONE if i == axis else d for i, d in enumerate(x.dims)), x.dtype)
    acc_t = TensorType(slice_t.dims, "f32" if wide else x.dtype)
    sizes = [str(d.value) if d is not None and d.is_const else k.dim(k.inp(0), x, i) for i, d in enumerate(x.dims)]
    acc_dyn = [s for i, s in enumerate(sizes) if i != axis and not s.isdigit()]
    acc0 = k.fill(_INIT[kind](acc_t.dtype), k.empty(acc_t, dyn=acc_dyn), acc_t)
    # A float sum carries Kahan's compensation (the low-order bits the running sum lost): each prefix
    # is then within a few ulps however long the axis (a plain running sum drifts by ~n ulps; XLA's
    # cumsum of 2^20 values was 30x closer than ours). Reset at an infinite or NaN sum.
    kahan = kind == "sum" and acc_t.dtype == "f32"
    comp0 = k.fill(_INIT[kind](acc_t.dtype), k.empty(acc_t, dyn=acc_dyn), acc_t) if kahan else None
    n = sizes[axis] if not sizes[axis].isdigit() else k.const_index(int(sizes[axis]))
    c0, c1 = k.const_index(0), k.const_index(1)
    res = k.fresh("scan")
    carried = 3 if kahan else 2
    k.emit(f"{res}:{carried} = scf.for %it = {c0} to {n} step {c1} iter_args(%so = {k.out(0)}, %sa = {acc0}"
           + (f", %sc = {comp0}) -> ({k.ty(r)}, {k.ty(acc_t)}, {k.ty(acc_t)}) {{" if kahan else
              f") -> ({k.ty(r)}, {k.ty(acc_t)}) {{"))
    if reverse:
        k.emit(f"  %last = arith.subi {n}, {c1} : index")
        k.emit("  %pos = arith.subi %last, %it : index")
    else:
        k.emit(f"  %pos = arith.addi %it, {c0} : index")
    offs = ", ".join("%pos" if i == axis else "0" for i in range(rank))
    szs = ", ".join("1" if i == axis else sizes[i] for i in range(rank))
    ones = ", ".join("1" for _ in range(rank))
    k.emit(f"  %sx = tensor.extract_slice {k.inp(0)}[{offs}] [{szs}] [{ones}] : {k.ty(x)} to {k.ty(slice_t)}")
    ar = len(acc_t.dims)
    if wide:
        body = [f"%x = arith.extf %a0 : {x.dtype} to f32"] + combine(kind, "f32", "%x", "%o0", "%y")
    else:
        body = combine(kind, x.dtype, "%a0", "%o0", "%y")
    if kahan:
        xin = "%x" if wide else "%a0"
        body = body[:1] if wide else []
        body += [f"%ky = arith.subf {xin}, %o1 : f32", "%y = arith.addf %o0, %ky : f32",
                 "%kd = arith.subf %y, %o0 : f32", "%kc = arith.subf %kd, %ky : f32",
                 "%ka = math.absf %y : f32", "%kmax = arith.constant 3.40282347e+38 : f32",
                 "%kf = arith.cmpf ole, %ka, %kmax : f32", "%kz = arith.constant 0.0 : f32",
                 "%kn = arith.select %kf, %kc, %kz : f32"]
        g, gc = k.generic([("%sx", slice_t, identity_map(ar))],
                          [("%sa", acc_t, identity_map(ar)), ("%sc", acc_t, identity_map(ar))],
                          ["parallel"] * ar, body, ["%y", "%kn"])
    else:
        g = k.generic([("%sx", slice_t, identity_map(ar))], [("%sa", acc_t, identity_map(ar))], ["parallel"] * ar,
                      body, ["%y"])[0]
    val = g
    if wide:
        e = k.empty(slice_t, dyn=acc_dyn)
        val = k.generic([(g, acc_t, identity_map(ar))], [(e, slice_t, identity_map(ar))], ["parallel"] * ar,
                        [f"%t = arith.truncf %a0 : f32 to {x.dtype}"], ["%t"])[0]
    k.emit(f"  %so2 = tensor.insert_slice {val} into %so[{offs}] [{szs}] [{ones}] : {k.ty(slice_t)} into {k.ty(r)}")
    if kahan:
        k.emit(f"  scf.yield %so2, {g}, {gc} : {k.ty(r)}, {k.ty(acc_t)}, {k.ty(acc_t)}")
    else:
        k.emit(f"  scf.yield %so2, {g} : {k.ty(r)}, {k.ty(acc_t)}")
    k.emit("}")
    return Legalized(k, [f"{res}#0"])


def _term(o: int, w: int, stride: int, dil: int) -> str:
    a = f"d{o}" if stride == 1 else f"d{o} * {stride}"
    b = f"d{w}" if dil == 1 else f"d{w} * {dil}"
    return f"{a} + {b}"


__all__ = ["ReduceWindowOp", "dilate_pad", "pad_values", "window_out", "check_padded_size", "dilated",
           "dims_attr", "ints_attr", "expr_value", "Ix"]
