"""KernelBuilder: writes a destination-passing kernel `func.func` in linalg on tensors.

A kernel takes its inputs, then one output tensor per result, then `index` scalars (the values
of the call's `sym_args`), and returns the outputs. Op classes build kernels in `legalize()`; the
text is the key by which `relax-legalize` shares identical kernels between call sites.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from mlir import ir

from relax_mlir.dialect.types import FLOAT_DTYPES, TensorType, builtin_tensor_text, signless
from relax_mlir.shape import Expr


class LegalizeError(Exception):
    """The op cannot be legalized with these types (reported at the op)."""


def zero_literal(dtype: str) -> str:
    if dtype == "i1":
        return "false"
    return "0.0" if dtype in FLOAT_DTYPES else "0"


def one_literal(dtype: str) -> str:
    if dtype == "i1":
        return "true"
    return "1.0" if dtype in FLOAT_DTYPES else "1"


def lowest_literal(dtype: str) -> str:
    return {"f32": "0xFF800000", "f16": "0xFC00", "bf16": "0xFF80", "f64": "0xFFF0000000000000",
            "i1": "false", "i8": "-128", "i16": "-32768", "i32": "-2147483648",
            "i64": "-9223372036854775808"}[dtype]


def highest_literal(dtype: str) -> str:
    return {"f32": "0x7F800000", "f16": "0x7C00", "bf16": "0x7F80", "f64": "0x7FF0000000000000",
            "i1": "true", "i8": "127", "i16": "32767", "i32": "2147483647",
            "i64": "9223372036854775807"}[dtype]


def via_f32(dtype: str, lines: tuple[str, ...], args: tuple[str, ...]) -> tuple[str, ...]:
    """`lines` (a template over `args`, assigning %r) computed in f32 for f16/bf16 and rounded once
    (`{inf}`: f32's infinity there)."""
    if dtype not in ("f16", "bf16"):
        return lines
    # (marked `contract` as the bf16 emulation's own conversions: an internal widening, after
    # which a bf16 operand computed by the op before stays rounded, as XLA's upcast keeps it)
    pre = tuple(f"{a}_w = arith.extf {a} fastmath<contract> : {{t}} to f32" for a in args)
    body = []
    for line in lines:
        for a in args:
            line = line.replace(f"{a},", f"{a}_w,").replace(f"{a} :", f"{a}_w :")
        body.append(line.replace("%r =", "%r_w =").replace("{t}", "f32").replace("{inf}", highest_literal("f32")))
    return pre + tuple(body) + ("%r = arith.truncf %r_w : f32 to {t}",)


def affine_map(ndims: int, results: Sequence[str]) -> str:
    ds = ", ".join(f"d{i}" for i in range(ndims))
    return f"affine_map<({ds}) -> ({', '.join(results)})>"


def identity_map(rank: int) -> str:
    return affine_map(rank, [f"d{i}" for i in range(rank)])


def broadcast_map(operand: TensorType, out_rank: int, out: TensorType) -> str:
    """The indexing map of a right-aligned numpy-broadcast operand."""
    r = len(operand.dims)
    res = []
    for j, d in enumerate(operand.dims):
        i = out_rank - r + j
        od = out.dims[i]
        if d is not None and d.is_const and d.value == 1 and not (od is not None and od.is_const and od.value == 1):
            res.append("0")
        else:
            res.append(f"d{i}")
    return affine_map(out_rank, res)


@dataclass
class Kernel:
    """A kernel under construction. Values are SSA names in the kernel body."""

    op: str  # the op's short name, used to name the kernel
    inputs: list[TensorType]
    outputs: list[TensorType]
    n_syms: int = 0
    lines: list[str] = field(default_factory=list)
    _n: int = 0

    # names of the arguments
    def inp(self, i: int) -> str:
        return f"%in{i}"

    def out(self, i: int) -> str:
        return f"%out{i}"

    def sym(self, i: int) -> str:
        return f"%s{i}"

    @staticmethod
    def ty(t: TensorType) -> str:
        return builtin_tensor_text(t)

    def fresh(self, base: str = "v") -> str:
        self._n += 1
        return f"%{base}{self._n}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def const_index(self, v: int) -> str:
        name = f"%c{v}".replace("-", "m")
        decl = f"  {name} = arith.constant {v} : index"
        if decl not in self.lines:
            self.lines.insert(0, decl)
        return name

    def dim(self, value: str, t: TensorType, i: int) -> str:
        """The size of dim i of `value` (a constant if static)."""
        d = t.dims[i]
        if d is not None and d.is_const:
            return self.const_index(d.value)
        r = self.fresh("d")
        self.emit(f"{r} = tensor.dim {value}, {self.const_index(i)} : {self.ty(t)}")
        return r

    def empty(self, t: TensorType, dims_from: tuple[str, TensorType] | None = None,
              dyn: Sequence[str] | None = None) -> str:
        """tensor.empty of type t; dynamic sizes from `dyn`, or from a same-shaped value."""
        if dyn is None:
            dyn = []
            for i, d in enumerate(t.dims):
                if d is None or not d.is_const:
                    assert dims_from is not None, "dynamic empty needs its sizes"
                    dyn.append(self.dim(dims_from[0], dims_from[1], i))
        r = self.fresh("e")
        self.emit(f"{r} = tensor.empty({', '.join(dyn)}) : {self.ty(t)}")
        return r

    def fill(self, value_literal: str, dest: str, t: TensorType) -> str:
        c = self.fresh("cst")
        # `arith.constant true : i1` does not parse: a bool literal carries its type
        typ = "" if t.dtype == "i1" else f" : {signless(t.dtype)}"
        self.emit(f"{c} = arith.constant {value_literal}{typ}")
        r = self.fresh("f")
        self.emit(f"{r} = linalg.fill ins({c} : {signless(t.dtype)}) outs({dest} : {self.ty(t)}) -> {self.ty(t)}")
        return r

    def generic(self, ins: Sequence[tuple[str, TensorType, str]], outs: Sequence[tuple[str, TensorType, str]],
                iterators: Sequence[str], body: Sequence[str], results: Sequence[str]) -> list[str]:
        """linalg.generic. Block args are %a0.. (inputs) and %o0.. (outputs); `body` lines compute
        the yielded `results` (scalar SSA names)."""
        maps = [m for _, _, m in ins] + [m for _, _, m in outs]
        its = ", ".join(f'"{i}"' for i in iterators)
        g = self.fresh("g")
        rs = [g] if len(outs) == 1 else [f"{g}#{i}" for i in range(len(outs))]
        res_names = g if len(outs) == 1 else f"{g}:{len(outs)}"
        ins_t = f"ins({', '.join(v for v, _, _ in ins)} : {', '.join(self.ty(t) for _, t, _ in ins)}) " if ins else ""
        outs_t = f"outs({', '.join(v for v, _, _ in outs)} : {', '.join(self.ty(t) for _, t, _ in outs)})"
        self.emit(f"{res_names} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{its}]}} "
                  f"{ins_t}{outs_t} {{")
        bargs = [f"%a{i}: {signless(t.dtype)}" for i, (_, t, _) in enumerate(ins)] + \
                [f"%o{i}: {signless(t.dtype)}" for i, (_, t, _) in enumerate(outs)]
        self.lines.append(f"  ^bb0({', '.join(bargs)}):")
        for b in body:
            self.lines.append("    " + b)
        self.lines.append(f"    linalg.yield {', '.join(results)} : {', '.join(signless(t.dtype) for _, t, _ in outs)}")
        rts = ", ".join(self.ty(t) for _, t, _ in outs)
        self.lines.append(f"  }} -> {rts if len(outs) == 1 else '(' + rts + ')'}")
        return rs

    def text(self, name: str, results: Sequence[str]) -> str:
        args = [f"%in{i}: {self.ty(t)}" for i, t in enumerate(self.inputs)] + \
               [f"%out{i}: {self.ty(t)}" for i, t in enumerate(self.outputs)] + \
               [f"%s{i}: index" for i in range(self.n_syms)]
        rts = ", ".join(self.ty(t) for t in self.outputs)
        body = "\n".join(self.lines)
        return (f"func.func private @{name}({', '.join(args)}) -> ({rts}) attributes {{relax.kernel = \"{self.op}\"}} {{\n"
                f"{body}\n  return {', '.join(results)} : {rts}\n}}")


@dataclass
class Legalized:
    """What an op's `legalize()` returns: the kernel, its results, and the symbolic int args."""

    kernel: Kernel
    results: list[str]
    sym_args: list[Expr] = field(default_factory=list)


def scalar_body(template: Sequence[str], dtype: str, renames: dict[str, str], out: str = "%r") -> tuple[list[str], str]:
    """Instantiate a scalar template ('%r = arith.addf %a, %b : {t}') with fresh names."""
    import re

    uniq = {}

    def sub(m):
        n = m.group(0)
        if n in renames:
            return renames[n]
        if n not in uniq:
            uniq[n] = f"%t{len(uniq)}_{n[1:]}"
        return uniq[n]

    lines = [re.sub(r"%[A-Za-z_][A-Za-z0-9_]*", sub, l.replace("{t}", dtype)) for l in template]
    return lines, sub(re.match(r"%[A-Za-z_][A-Za-z0-9_]*", out))


# --- vectorizable transcendental functions ------------------------------------------------------
# LLVM lowers vector math.exp/tanh/erf to scalar libm calls. For f32 we expand them into plain
# arith (range reduction + polynomial + exponent bit tricks), which the vectorizer keeps in SIMD
# registers; this is what XLA's CPU backend does too. Max relative error ~2e-7 (exp). Results
# below FLT_MIN are flushed to 0 (as XLA's CPU backend does): denormals would make every later op ~100x
# slower (measured: a masked softmax, exp(-1e9), took the transformer block from 5 to 15 ms).

# exp: n = round(x / ln 2), r = x - n ln 2 (two-part ln 2), e**r by a degree-7 polynomial, times
# 2**n built from exponent bits in two halves (2**n1 * 2**n2, n1 + n2 = n) so that n = 128 (x up to
# ln(FLT_MAX)) does not overflow the exponent field. x is clamped to [_EXP_LO, _EXP_HI] first, so
# the polynomial never sees inf/NaN, and the special cases are selected at the end: x > _EXP_HI
# (exp(x) > FLT_MAX) -> +inf, x < _EXP_LO (exp(x) < FLT_MIN, a denormal) -> 0 (XLA's CPU backend
# flushes denormals too), NaN -> NaN. exp(0) = 1 exactly.
_EXP_HI = "88.72283172607422"   # the largest f32 with exp(x) <= FLT_MAX
_EXP_LO = "-87.33654022216797"  # the smallest f32 with exp(x) >= FLT_MIN
_EXP = """{r}_c = arith.constant %s : f32
{r}_cl = arith.constant %s : f32
{r}_x0 = arith.minimumf {x}, {r}_c : f32
{r}_x = arith.maximumf {r}_x0, {r}_cl : f32
{r}_l2e = arith.constant 1.44269504088896341 : f32
{r}_half = arith.constant 0.5 : f32
{r}_t = arith.mulf {r}_x, {r}_l2e : f32
{r}_t2 = arith.addf {r}_t, {r}_half : f32
{r}_n = math.floor {r}_t2 : f32
{r}_h = arith.constant 0.693359375 : f32
{r}_lo = arith.constant -2.12194440e-4 : f32
{r}_nh = arith.mulf {r}_n, {r}_h : f32
{r}_r0 = arith.subf {r}_x, {r}_nh : f32
{r}_nl = arith.mulf {r}_n, {r}_lo : f32
{r}_r = arith.subf {r}_r0, {r}_nl : f32
{r}_p6 = arith.constant 1.9875691500e-4 : f32
{r}_p5 = arith.constant 1.3981999507e-3 : f32
{r}_p4 = arith.constant 8.3334519073e-3 : f32
{r}_p3 = arith.constant 4.1665795894e-2 : f32
{r}_p2 = arith.constant 1.6666665459e-1 : f32
{r}_p1 = arith.constant 5.0000001201e-1 : f32
{r}_one = arith.constant 1.0 : f32
{r}_q5 = math.fma {r}_p6, {r}_r, {r}_p5 : f32
{r}_q4 = math.fma {r}_q5, {r}_r, {r}_p4 : f32
{r}_q3 = math.fma {r}_q4, {r}_r, {r}_p3 : f32
{r}_q2 = math.fma {r}_q3, {r}_r, {r}_p2 : f32
{r}_q1 = math.fma {r}_q2, {r}_r, {r}_p1 : f32
{r}_rr = arith.mulf {r}_r, {r}_r : f32
{r}_q0 = math.fma {r}_q1, {r}_rr, {r}_r : f32
{r}_y = arith.addf {r}_q0, {r}_one : f32
{r}_ni = arith.fptosi {r}_n : f32 to i32
{r}_b = arith.constant 127 : i32
{r}_s = arith.constant 23 : i32
{r}_one_i = arith.constant 1 : i32
{r}_n1 = arith.shrsi {r}_ni, {r}_one_i : i32
{r}_n2 = arith.subi {r}_ni, {r}_n1 : i32
{r}_nb1 = arith.addi {r}_n1, {r}_b : i32
{r}_nb2 = arith.addi {r}_n2, {r}_b : i32
{r}_e1 = arith.shli {r}_nb1, {r}_s : i32
{r}_e2 = arith.shli {r}_nb2, {r}_s : i32
{r}_sc1 = arith.bitcast {r}_e1 : i32 to f32
{r}_sc2 = arith.bitcast {r}_e2 : i32 to f32
{r}_v1 = arith.mulf {r}_y, {r}_sc1 : f32
{r}_v = arith.mulf {r}_v1, {r}_sc2 : f32
{r}_z = arith.constant 0.0 : f32
{r}_inf = arith.constant 0x7F800000 : f32
{r}_under = arith.cmpf olt, {x}, {r}_cl : f32
{r}_over = arith.cmpf ogt, {x}, {r}_c : f32
{r}_u = arith.select {r}_under, {r}_z, {r}_v : f32
{r}_o = arith.select {r}_over, {r}_inf, {r}_u : f32
{r}_ord = arith.cmpf oeq, {x}, {x} : f32
{r} = arith.select {r}_ord, {r}_o, {x} : f32""" % (_EXP_HI, _EXP_LO)

# erf(x) as x * P(x^2) / Q(x^2) on x clamped to [-4, 4] (erf(4) = 1 in f32): one division and no
# exp. Coefficients of the rational approximation that XLA and Eigen use for f32. The earlier
# Abramowitz-Stegun form (a division plus a full exp) made the MLP's gelu cost ~1.4 ns/element.
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
          -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
          -1.42647390514189e-02)


# tanh(x) likewise: x * P(x^2) / Q(x^2) on x clamped to +-7.90531110763549805 (tanh = +-1 in f32
# beyond); max error 3.3e-7 against float64 (measured). The exp-based form needed an exp and a
# division.
_TANH_P = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
           1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03)
_TANH_Q = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)


def _horner(r: str, name: str, coeffs, var: str) -> tuple[list[str], str]:
    lines = [f"{r}_{name}c{i} = arith.constant {c!r} : f32" for i, c in enumerate(coeffs)]
    acc = f"{r}_{name}c0"
    for i in range(1, len(coeffs)):
        lines.append(f"{r}_{name}h{i} = math.fma {acc}, {var}, {r}_{name}c{i} : f32")
        acc = f"{r}_{name}h{i}"
    return lines, acc


def _rational_odd(r: str, x: str, bound: str, pc, qc, saturate: bool = False) -> str:
    """x * P(x^2) / Q(x^2) with x clamped to [-bound, bound]."""
    lines = [f"{r}_hi = arith.constant {bound} : f32", f"{r}_lo = arith.constant -{bound} : f32",
             f"{r}_c0 = arith.minimumf {x}, {r}_hi : f32", f"{r}_c = arith.maximumf {r}_c0, {r}_lo : f32",
             f"{r}_x2 = arith.mulf {r}_c, {r}_c : f32"]
    pl, p = _horner(r, "p", pc, f"{r}_x2")
    ql, q = _horner(r, "q", qc, f"{r}_x2")
    lines += pl + ql + [f"{r}_px = arith.mulf {p}, {r}_c : f32"]
    if not saturate:
        return "\n".join(lines + [f"{r} = arith.divf {r}_px, {q} : f32"])
    # past the bound the function is +-1 (the rational there gives 1 - 2.4e-7)
    lines += [f"{r}_rq = arith.divf {r}_px, {q} : f32", f"{r}_ax = math.absf {x} : f32",
              f"{r}_one = arith.constant 1.0 : f32", f"{r}_sgn = math.copysign {r}_one, {x} : f32",
              f"{r}_sat = arith.cmpf oge, {r}_ax, {r}_hi : f32", f"{r} = arith.select {r}_sat, {r}_sgn, {r}_rq : f32"]
    return "\n".join(lines)




def _expand_one(kind: str, r: str, x: str) -> str:
    if kind == "exp":
        return _EXP.format(r=r, x=x)
    if kind == "erf":
        return _rational_odd(r, x, "4.0", _ERF_P, _ERF_Q)
    return _rational_odd(r, x, "7.90531110763549805", _TANH_P, _TANH_Q, saturate=True)


def _remf_template(r: str, x: str, y: str, chunk: int = 7) -> str:
    """Exact f32 fmod (arith.remf) in integer arithmetic only: with |x| = mx * 2^(ex - 150) and
    |y| = my * 2^(ey - 150) (24-bit integer significands, e = max(biased exponent, 1)), the result
    is ((mx * 2^(ex - ey)) mod my) * 2^(ey - 150): the power of two enters `chunk` bits at a time,
    r = (r << chunk) urem my, which stays below 2^31 since r < my < 2^24. The result's bits are
    built directly (a normal number from the exponent of uitofp(r), a denormal as r << (ey - 1)),
    so nothing depends on the rounding of a GPU's division, on a fused fma or on denormal support:
    SPIR-V's OpFRem and x - y * trunc(x / y) lose the result once the quotient passes 2^24, NVVM
    has no frem at all, and GLSL promises neither a correctly rounded division nor an fma."""
    steps = -(-253 // chunk)  # ex - ey <= 254 - 1
    L = [f"{r}_xb = arith.bitcast {x} : f32 to i32", f"{r}_yb = arith.bitcast {y} : f32 to i32",
         f"{r}_abs = arith.constant 2147483647 : i32", f"{r}_sgn = arith.constant -2147483648 : i32",
         f"{r}_ax = arith.andi {r}_xb, {r}_abs : i32", f"{r}_ay = arith.andi {r}_yb, {r}_abs : i32",
         f"{r}_sx = arith.andi {r}_xb, {r}_sgn : i32",
         f"{r}_c23 = arith.constant 23 : i32", f"{r}_i0 = arith.constant 0 : i32",
         f"{r}_i1 = arith.constant 1 : i32", f"{r}_mm = arith.constant 8388607 : i32",
         f"{r}_hid = arith.constant 8388608 : i32", f"{r}_ck = arith.constant {chunk} : i32"]
    for v in ("x", "y"):  # significand and exponent (denormals: e = 1, no hidden bit)
        L += [f"{r}_e{v}0 = arith.shrui {r}_a{v}, {r}_c23 : i32",
              f"{r}_n{v} = arith.cmpi ugt, {r}_e{v}0, {r}_i0 : i32",
              f"{r}_e{v} = arith.select {r}_n{v}, {r}_e{v}0, {r}_i1 : i32",
              f"{r}_f{v} = arith.andi {r}_a{v}, {r}_mm : i32",
              f"{r}_h{v} = arith.select {r}_n{v}, {r}_hid, {r}_i0 : i32",
              f"{r}_m{v} = arith.ori {r}_f{v}, {r}_h{v} : i32"]
    # (for |x| < |y| or a zero, NaN or infinite operand my may be 0: divide by 1 there, the
    # result is replaced below)
    L += [f"{r}_myz = arith.cmpi eq, {r}_my, {r}_i0 : i32",
          f"{r}_myd = arith.select {r}_myz, {r}_i1, {r}_my : i32",
          f"{r}_d0 = arith.subi {r}_ex, {r}_ey : i32",
          f"{r}_dneg = arith.cmpi slt, {r}_d0, {r}_i0 : i32",
          f"{r}_d = arith.select {r}_dneg, {r}_i0, {r}_d0 : i32",
          f"{r}_q0 = arith.remui {r}_mx, {r}_myd : i32"]
    cur, d = f"{r}_q0", f"{r}_d"
    for i in range(steps):
        p = f"{r}_s{i}"
        L += [f"{p}_lt = arith.cmpi ult, {d}, {r}_ck : i32",
              f"{p}_k = arith.select {p}_lt, {d}, {r}_ck : i32",
              f"{p}_sh = arith.shli {cur}, {p}_k : i32",
              f"{p}_q = arith.remui {p}_sh, {r}_myd : i32",
              f"{p}_d = arith.subi {d}, {p}_k : i32"]
        cur, d = f"{p}_q", f"{p}_d"
    # the result: cur * 2^(ey - 150) (cur < 2^24 is exact in f32)
    L += [f"{r}_fr = arith.uitofp {cur} : i32 to f32", f"{r}_frb = arith.bitcast {r}_fr : f32 to i32",
          f"{r}_fe = arith.shrui {r}_frb, {r}_c23 : i32",  # 127 + p for cur in [2^p, 2^(p+1))
          f"{r}_c150 = arith.constant 150 : i32",
          f"{r}_ne0 = arith.addi {r}_fe, {r}_ey : i32",  # the biased exponent plus 150
          f"{r}_c151 = arith.constant 151 : i32",
          f"{r}_normal = arith.cmpi sge, {r}_ne0, {r}_c151 : i32",
          f"{r}_adj0 = arith.subi {r}_ey, {r}_c150 : i32",
          f"{r}_adj = arith.shli {r}_adj0, {r}_c23 : i32",
          f"{r}_nb = arith.addi {r}_frb, {r}_adj : i32",
          f"{r}_eym1 = arith.subi {r}_ey, {r}_i1 : i32",
          f"{r}_db = arith.shli {cur}, {r}_eym1 : i32",
          f"{r}_zero = arith.cmpi eq, {cur}, {r}_i0 : i32",
          f"{r}_mag0 = arith.select {r}_normal, {r}_nb, {r}_db : i32",
          f"{r}_mag = arith.select {r}_zero, {r}_i0, {r}_mag0 : i32",
          f"{r}_rb = arith.ori {r}_mag, {r}_sx : i32",
          f"{r}_res = arith.bitcast {r}_rb : i32 to f32",
          # |x| < |y| (x = +-0 included): x; NaN operands, an infinite x or a zero y: NaN;
          # an infinite y with a finite x: x (covered by |x| < |y|)
          f"{r}_inf = arith.constant 2139095040 : i32",
          f"{r}_small = arith.cmpi ult, {r}_ax, {r}_ay : i32",
          f"{r}_v = arith.select {r}_small, {x}, {r}_res : f32",
          f"{r}_xbad = arith.cmpi uge, {r}_ax, {r}_inf : i32",
          f"{r}_ynan = arith.cmpi ugt, {r}_ay, {r}_inf : i32",
          f"{r}_yz = arith.cmpi eq, {r}_ay, {r}_i0 : i32",
          f"{r}_b0 = arith.ori {r}_xbad, {r}_ynan : i1",
          f"{r}_bad = arith.ori {r}_b0, {r}_yz : i1",
          f"{r}_nan = arith.constant 0x7FC00000 : f32",
          f"{r} = arith.select {r}_bad, {r}_nan, {r}_v : f32"]
    return "\n".join(L)


def _two_over_pi_words(words: int = 7, pad: int = 8) -> list[int]:
    """The binary digits of 2/pi after `pad` zero bits, as 32-bit words (most significant first):
    pi from Machin's formula in integer fixed point with 64 guard bits."""
    nbits = 32 * words - pad
    g = nbits + 64
    one = 1 << g

    def arctan_inv(x: int) -> int:
        total, t, k, sign = 0, one // x, 1, 1
        while t:
            total += sign * (t // k)
            t //= x * x
            k, sign = k + 2, -sign
        return total

    pi = 4 * (4 * arctan_inv(5) - arctan_inv(239))  # pi * 2^g
    digits = (2 << (g + nbits)) // pi  # floor(2/pi * 2^nbits), under 2^nbits
    return [(digits >> (32 * (words - 1 - i))) & 0xFFFFFFFF for i in range(words)]


def _trig_template(r: str, x: str, kind: str) -> str:
    """f32 sin or cos with Payne-Hanek range reduction in 32-bit integers for |x| >= 2^17; below
    that the target's own sin/cos (accurate there on lavapipe; its built-ins return garbage
    from about 1e8 and NaN near 3e38). With |x| = m * 2^(e - 150) (m a 24-bit integer), x * 2/pi
    mod 4 is m times a 96-bit window of the digits of 2/pi that starts e - 151 digits in (earlier
    digits only add multiples of 4): three 24x32-bit products (in 12x16-bit pieces) give the
    quadrant and a 62-bit fraction, the reduced argument is (fraction - [fraction >= 1/2]) * pi/2,
    whose sin and cos the built-ins compute to an ulp. Within 2^-24 of the exact values over the
    whole f32 range (checked against 400-bit mpmath)."""
    words = _two_over_pi_words()

    def i32(v: int) -> str:
        return str(v - (1 << 32) if v >= 1 << 31 else v)

    L = [f"{r}_xb = arith.bitcast {x} : f32 to i32", f"{r}_abs = arith.constant 2147483647 : i32",
         f"{r}_ax = arith.andi {r}_xb, {r}_abs : i32", f"{r}_c23 = arith.constant 23 : i32",
         f"{r}_eb = arith.shrui {r}_ax, {r}_c23 : i32", f"{r}_mm = arith.constant 8388607 : i32",
         f"{r}_hid = arith.constant 8388608 : i32", f"{r}_m0 = arith.andi {r}_ax, {r}_mm : i32",
         f"{r}_m = arith.ori {r}_m0, {r}_hid : i32",
         f"{r}_c144 = arith.constant 144 : i32", f"{r}_c255 = arith.constant 255 : i32",
         f"{r}_i0 = arith.constant 0 : i32", f"{r}_i1 = arith.constant 1 : i32",
         f"{r}_i2 = arith.constant 2 : i32", f"{r}_i3 = arith.constant 3 : i32",
         f"{r}_c5 = arith.constant 5 : i32", f"{r}_c31 = arith.constant 31 : i32",
         f"{r}_c32 = arith.constant 32 : i32",
         # the window's first digit: e - 151 digits in, after the table's 8 zero bits (e >= 144
         # on this path; others are clamped, their result is the built-in's)
         f"{r}_big = arith.cmpi uge, {r}_eb, {r}_c144 : i32",
         f"{r}_fin = arith.cmpi ult, {r}_eb, {r}_c255 : i32",
         f"{r}_o0 = arith.subi {r}_eb, {r}_c144 : i32",
         f"{r}_use = arith.andi {r}_big, {r}_fin : i1",
         f"{r}_o = arith.select {r}_use, {r}_o0, {r}_i0 : i32",
         f"{r}_k = arith.shrui {r}_o, {r}_c5 : i32", f"{r}_s = arith.andi {r}_o, {r}_c31 : i32",
         f"{r}_k0 = arith.cmpi eq, {r}_k, {r}_i0 : i32", f"{r}_k1 = arith.cmpi eq, {r}_k, {r}_i1 : i32",
         f"{r}_k2 = arith.cmpi eq, {r}_k, {r}_i2 : i32"]
    L += [f"{r}_t{i} = arith.constant {i32(w)} : i32" for i, w in enumerate(words)]
    for i in range(4):  # W[k + i] for k in 0..3
        L += [f"{r}_w{i}c = arith.select {r}_k2, {r}_t{i + 2}, {r}_t{i + 3} : i32",
              f"{r}_w{i}b = arith.select {r}_k1, {r}_t{i + 1}, {r}_w{i}c : i32",
              f"{r}_w{i} = arith.select {r}_k0, {r}_t{i}, {r}_w{i}b : i32"]
    L += [f"{r}_s0 = arith.cmpi eq, {r}_s, {r}_i0 : i32", f"{r}_rs = arith.subi {r}_c32, {r}_s : i32",
          f"{r}_rs1 = arith.select {r}_s0, {r}_i1, {r}_rs : i32"]  # (unused when s = 0)
    for name, (a, b) in zip("ABC", ((0, 1), (1, 2), (2, 3))):
        L += [f"{r}_{name}h = arith.shli {r}_w{a}, {r}_s : i32",
              f"{r}_{name}l = arith.shrui {r}_w{b}, {r}_rs1 : i32",
              f"{r}_{name}o = arith.ori {r}_{name}h, {r}_{name}l : i32",
              f"{r}_{name} = arith.select {r}_s0, {r}_w{a}, {r}_{name}o : i32"]
    # m (24 bits) times a 32-bit word as (low, high) words, from four 12x16-bit products (no
    # mului_extended: naga, wgpu's SPIR-V reader, has no OpUMulExtended)
    L += [f"{r}_c12 = arith.constant 12 : i32", f"{r}_c16 = arith.constant 16 : i32",
          f"{r}_c20 = arith.constant 20 : i32", f"{r}_c28 = arith.constant 28 : i32",
          f"{r}_c4 = arith.constant 4 : i32", f"{r}_m12 = arith.constant 4095 : i32",
          f"{r}_m16 = arith.constant 65535 : i32",
          f"{r}_ml = arith.andi {r}_m, {r}_m12 : i32", f"{r}_mh = arith.shrui {r}_m, {r}_c12 : i32"]
    for w in ("B", "C"):
        t = f"{r}_{w}x"
        L += [f"{t}wl = arith.andi {r}_{w}, {r}_m16 : i32", f"{t}wh = arith.shrui {r}_{w}, {r}_c16 : i32",
              f"{t}a = arith.muli {r}_ml, {t}wl : i32", f"{t}b = arith.muli {r}_ml, {t}wh : i32",
              f"{t}c = arith.muli {r}_mh, {t}wl : i32", f"{t}d = arith.muli {r}_mh, {t}wh : i32",
              f"{t}bl = arith.shli {t}b, {r}_c16 : i32", f"{t}cl = arith.shli {t}c, {r}_c12 : i32",
              f"{t}dl = arith.shli {t}d, {r}_c28 : i32",
              f"{t}s1 = arith.addi {t}a, {t}bl : i32", f"{t}k1 = arith.cmpi ult, {t}s1, {t}a : i32",
              f"{t}s2 = arith.addi {t}s1, {t}cl : i32", f"{t}k2 = arith.cmpi ult, {t}s2, {t}s1 : i32",
              f"{t}s3 = arith.addi {t}s2, {t}dl : i32", f"{t}k3 = arith.cmpi ult, {t}s3, {t}s2 : i32",
              f"{t}bh = arith.shrui {t}b, {r}_c16 : i32", f"{t}ch = arith.shrui {t}c, {r}_c20 : i32",
              f"{t}dh = arith.shrui {t}d, {r}_c4 : i32",
              f"{t}k1i = arith.extui {t}k1 : i1 to i32", f"{t}k2i = arith.extui {t}k2 : i1 to i32",
              f"{t}k3i = arith.extui {t}k3 : i1 to i32",
              f"{t}h1 = arith.addi {t}bh, {t}ch : i32", f"{t}h2 = arith.addi {t}h1, {t}dh : i32",
              f"{t}h3 = arith.addi {t}h2, {t}k1i : i32", f"{t}h4 = arith.addi {t}h3, {t}k2i : i32",
              f"{r}_h{w.lower()} = arith.addi {t}h4, {t}k3i : i32",
              f"{r}_l{w.lower()} = arith.addi {t}s3, {r}_i0 : i32"]
    L += [f"{r}_la = arith.muli {r}_m, {r}_A : i32",
          f"{r}_p1 = arith.addi {r}_hc, {r}_lb : i32",
          f"{r}_cy = arith.cmpi ult, {r}_p1, {r}_hc : i32",
          f"{r}_cyi = arith.extui {r}_cy : i1 to i32",
          f"{r}_p2a = arith.addi {r}_hb, {r}_la : i32",
          f"{r}_p2 = arith.addi {r}_p2a, {r}_cyi : i32",
          f"{r}_c30 = arith.constant 30 : i32", f"{r}_c29 = arith.constant 29 : i32",
          f"{r}_q0 = arith.shrui {r}_p2, {r}_c30 : i32",
          f"{r}_fm = arith.constant 1073741823 : i32",
          f"{r}_hi = arith.andi {r}_p2, {r}_fm : i32",
          f"{r}_negi = arith.shrui {r}_hi, {r}_c29 : i32",
          f"{r}_neg = arith.cmpi ne, {r}_negi, {r}_i0 : i32",
          f"{r}_q = arith.addi {r}_q0, {r}_negi : i32",
          # a fraction >= 1/2: 2^62 - fraction, negated below
          f"{r}_lon = arith.subi {r}_i0, {r}_p1 : i32",
          f"{r}_bw = arith.cmpi ne, {r}_p1, {r}_i0 : i32",
          f"{r}_bwi = arith.extui {r}_bw : i1 to i32",
          f"{r}_c2p30 = arith.constant 1073741824 : i32",
          f"{r}_hin0 = arith.subi {r}_c2p30, {r}_hi : i32",
          f"{r}_hin1 = arith.subi {r}_hin0, {r}_bwi : i32",
          f"{r}_hin = arith.andi {r}_hin1, {r}_fm : i32",
          f"{r}_fh = arith.select {r}_neg, {r}_hin, {r}_hi : i32",
          f"{r}_fl = arith.select {r}_neg, {r}_lon, {r}_p1 : i32",
          f"{r}_ffh = arith.uitofp {r}_fh : i32 to f32", f"{r}_ffl = arith.uitofp {r}_fl : i32 to f32",
          f"{r}_sc30 = arith.constant 9.31322574615478515625e-10 : f32",  # 2^-30
          f"{r}_sc62 = arith.constant 2.168404344971008868014905e-19 : f32",  # 2^-62
          f"{r}_fa = arith.mulf {r}_ffh, {r}_sc30 : f32", f"{r}_fb = arith.mulf {r}_ffl, {r}_sc62 : f32",
          f"{r}_fr = arith.addf {r}_fa, {r}_fb : f32",
          f"{r}_pio2 = arith.constant 1.57079637 : f32",
          f"{r}_ra = arith.mulf {r}_fr, {r}_pio2 : f32",
          f"{r}_rn = arith.negf {r}_ra : f32",
          f"{r}_rr = arith.select {r}_neg, {r}_rn, {r}_ra : f32",
          f"{r}_sr = math.sin {r}_rr : f32", f"{r}_cr = math.cos {r}_rr : f32",
          f"{r}_nsr = arith.negf {r}_sr : f32", f"{r}_ncr = arith.negf {r}_cr : f32",
          f"{r}_q2 = arith.andi {r}_q, {r}_i3 : i32",
          f"{r}_qa = arith.cmpi eq, {r}_q2, {r}_i0 : i32", f"{r}_qb = arith.cmpi eq, {r}_q2, {r}_i1 : i32",
          f"{r}_qc = arith.cmpi eq, {r}_q2, {r}_i2 : i32"]
    order = ("sr", "cr", "nsr", "ncr") if kind == "sin" else ("cr", "nsr", "ncr", "sr")
    L += [f"{r}_v2 = arith.select {r}_qc, {r}_{order[2]}, {r}_{order[3]} : f32",
          f"{r}_v1 = arith.select {r}_qb, {r}_{order[1]}, {r}_v2 : f32",
          f"{r}_v0 = arith.select {r}_qa, {r}_{order[0]}, {r}_v1 : f32"]
    red = f"{r}_v0"  # cos is even
    if kind == "sin":  # sin is odd: the sign of x
        L += [f"{r}_xneg = arith.cmpi slt, {r}_xb, {r}_i0 : i32", f"{r}_nv0 = arith.negf {r}_v0 : f32",
              f"{r}_red = arith.select {r}_xneg, {r}_nv0, {r}_v0 : f32"]
        red = f"{r}_red"
    L += [f"{r}_bi = math.{kind} {x} : f32",
          f"{r}_inf = arith.constant 0x7FC00000 : f32",  # for an infinite or NaN x
          f"{r}_v = arith.select {r}_big, {red}, {r}_bi : f32",
          f"{r} = arith.select {r}_fin, {r}_v, {r}_inf : f32"]
    return "\n".join(L)


# The expansions by op name: (number of operands, text template writer).
_EXPANSIONS = {
    "math.exp": (1, lambda r, a: _expand_one("exp", r, a[0])),
    "math.tanh": (1, lambda r, a: _expand_one("tanh", r, a[0])),
    "math.erf": (1, lambda r, a: _expand_one("erf", r, a[0])),
    "arith.remf": (2, lambda r, a: _remf_template(r, a[0], a[1])),
    "math.sin": (1, lambda r, a: _trig_template(r, a[0], "sin")),
    "math.cos": (1, lambda r, a: _trig_template(r, a[0], "cos")),
}


def _math_templates(ctx, names) -> dict:
    """op name -> (template func body ops, arguments, result) for the f32 expansions, parsed once
    per call from the text templates above into a scratch module of `ctx`."""
    funcs = []
    for i, name in enumerate(names):
        n, write = _EXPANSIONS[name]
        args = [f"%a{j}" for j in range(n)]
        funcs.append(f"func.func @t{i}({', '.join(a + ': f32' for a in args)}) -> f32 {{\n" + write("%r", args)
                     + "\nreturn %r : f32\n}")
    with ctx:
        mod = ir.Module.parse("\n".join(funcs))
    out = {"module": mod}
    for name, f in zip(names, mod.body.operations):
        block = f.regions[0].blocks[0]
        ops = list(block.operations)
        out[name] = (ops[:-1], list(block.arguments), ops[-1].operands[0])
    return out


def expand_math(op: ir.Operation, kinds=("exp", "tanh", "erf")) -> int:
    """Replace every f32 scalar `math.<kind>` (or `arith.remf` for kind "remf") under `op` by its
    arith expansion (the templates above, cloned through the bindings). Returns how many."""
    names = {f"arith.{k}" if k == "remf" else f"math.{k}" for k in kinds}
    todo = []

    def visit(o):
        if o.name in names and isinstance(o.results[0].type, ir.F32Type):
            todo.append(o)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    if not todo:
        return 0
    templates = _math_templates(op.context, sorted({o.name for o in todo}))
    for o in todo:
        body, args, ret = templates[o.name]
        mapping = dict(zip(args, o.operands))
        with ir.InsertionPoint(o), o.location:
            for t in body:
                c = t.clone(ir.InsertionPoint(o))
                for i, v in enumerate(c.operands):
                    if v in mapping:
                        c.operands[i] = mapping[v]
                for a, b in zip(t.results, c.results):
                    mapping[a] = b
        o.results[0].replace_all_uses_with(mapping[ret])
        o.erase()
    return len(todo)
