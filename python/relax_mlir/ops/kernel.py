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


# The expansions by op name: (number of operands, text template writer).
_EXPANSIONS = {
    "math.exp": (1, lambda r, a: _expand_one("exp", r, a[0])),
    "math.tanh": (1, lambda r, a: _expand_one("tanh", r, a[0])),
    "math.erf": (1, lambda r, a: _expand_one("erf", r, a[0])),
    "arith.remf": (2, lambda r, a: _remf_template(r, a[0], a[1])),
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
