"""Complex numbers. A complex tensor is imported as the pair of its real and imaginary parts, two
real tensors of one shape (`CVal`), and every op on complex values becomes ops on the parts: below
the importer nothing sees a complex type, so kernels, fusion, memory planning and every target
work unchanged.

Structural and linear ops (reshape, transpose, slice, gather, pad, select, add, ...) run the real
converter on each part; products, quotients, abs, exp, log, sqrt and compare follow XLA's complex
formulas; sin, cos, tan, tanh, log1p, expm1, rsqrt, logistic and power are built from real ops on
the parts (their special values as jax.jit's: test/python/ops/test_complex.py); sums
(reductions, windows, scatters) sum each part, a product over a short static axis is unrolled;
a sort orders by the real part, then the imaginary part, as jax's comparator (two keys each);
control flow and composites take the pairs as they are (control_flow.py flattens them into region
parameters and results). `stablehlo.fft`
(FFT, IFFT, RFFT, IRFFT over the last 1-3 axes; lengths are static in StableHLO) is a discrete
Fourier transform per axis: a product with a constant table of exact twiddles for lengths up to
`_DENSE_MAX`, Cooley-Tukey's split n = n1 * n2 (two smaller transforms and a twiddle product)
above. Ops without a complex form here are refused with the op named (checks.py reports them all
at once, `COMPLEX_CONVERTERS` is the list).
"""
from __future__ import annotations

import contextlib
import math

import numpy as np
from mlir import ir

from relax_mlir.frontend.stablehlo.common import (CVal, Val, _REAL_PARTS, _dtype_attr, _elt, _ints, _res, _string,
                                                  _splat, complex_part_type)
from relax_mlir.frontend.stablehlo.errors import UnsupportedOpError
from relax_mlir.frontend.stablehlo.indexing import sort_by
from relax_mlir.frontend.stablehlo.registry import CONVERTERS, register_converters
from relax_mlir.frontend.stablehlo.window import _dynamic_reduce_window
from relax_mlir.ops.common import product
from relax_mlir.shape import const


@contextlib.contextmanager
def real_parts():
    """Converters called inside read complex result types as their part type."""
    saved = _REAL_PARTS[0]
    _REAL_PARTS[0] = True
    try:
        yield
    finally:
        _REAL_PARTS[0] = saved


def _part(ins, k: int) -> list:
    return [(v.re if k == 0 else v.im) if isinstance(v, CVal) else v for v in ins]


def _on_parts(im, op, ins):
    """The real converter of `op` run on the real parts, then on the imaginary parts (operands that
    are not complex, a select's predicate or a gather's indices, go to both)."""
    conv = CONVERTERS[op.operation.name]
    with real_parts():
        re = conv(im, op, _part(ins, 0))
        imag = conv(im, op, _part(ins, 1))
    if isinstance(re, Val):
        return CVal(re, imag)
    # several results (optimization_barrier): a real result is its real-part run's
    return [CVal(a, b) if complex_part_type(r.type) is not None else a for a, b, r in zip(re, imag, op.results)]


class _Emit:
    """Elementwise relax ops on tensors of one shape `dims` and float type `dt`."""

    def __init__(self, im, dims, dt: str):
        self.im, self.dims, self.dt = im, list(dims), dt

    def c(self, v: float) -> Val:
        return self.im.emit("relax.constant", [], 0, self.dt, {"value": _splat([], self.dt, v)}, dims=[])

    def __call__(self, name: str, *args, dt: str | None = None) -> Val:
        return self.im.emit(name, list(args), len(self.dims), dt or self.dt, dims=self.dims)

    def add(self, a, b):
        return self("relax.add", a, b)

    def sub(self, a, b):
        return self("relax.subtract", a, b)

    def mul(self, a, b):
        return self("relax.multiply", a, b)

    def div(self, a, b):
        return self("relax.divide", a, b)

    def where(self, c, a, b):
        return self("relax.where", c, a, b)

    def cmp(self, name, a, b):
        return self(name, a, b, dt="i1")

    def isinf(self, a):
        return self.cmp("relax.equal", self("relax.abs", a), self.c(math.inf))

    def zeros(self) -> Val:
        return self.im.broadcast(self.c(0.0), self.dims)

    def broadcast_c(self, v: float) -> Val:
        return self.im.broadcast(self.c(v), self.dims)


def _emitter(im, op, z) -> _Emit:
    dims, dt = _res(op)
    return _Emit(im, [a if a is not None else b for a, b in zip(dims, z.dims)], z.re.dtype)


def _all(e: _Emit, *xs: Val) -> Val:
    """The conjunction of boolean tensors."""
    out = xs[0]
    for x in xs[1:]:
        out = e("relax.logical_and", out, x, dt="i1")
    return out


def _cmul(e: _Emit, a: CVal, b: CVal) -> CVal:
    """(ar + i ai)(br + i bi), XLA's formula."""
    return CVal(e.sub(e.mul(a.re, b.re), e.mul(a.im, b.im)), e.add(e.mul(a.re, b.im), e.mul(a.im, b.re)))


def _multiply(im, op, ins):
    a, b = ins
    return _cmul(_emitter(im, op, a), a, b)


def _divide(im, op, ins):
    """Smith's algorithm; where both of its parts are NaN, the cases XLA (MLIR's complex lowering)
    recovers: a zero divisor (numerator not all NaN) gives infinities signed by the divisor's real
    part times the numerator; an infinite numerator over a finite divisor, infinities; a finite
    numerator over an infinite divisor, signed zeros."""
    a, b = ins
    e = _emitter(im, op, a)
    ar, ai, br, bi = a.re, a.im, b.re, b.im
    zero, one, inf = e.c(0.0), e.c(1.0), e.c(math.inf)

    def and_(*xs):
        return _all(e, *xs)

    def or_(x, y):
        return e("relax.logical_or", x, y, dt="i1")

    def not_nan(x):
        return e.cmp("relax.equal", x, x)

    def negative(x):  # x's sign bit: x < 0, or a zero whose reciprocal is -inf (a NaN: either)
        return or_(e.cmp("relax.less", x, zero), e.cmp("relax.less", e.div(one, x), zero))

    def copysign(mag, x):  # mag >= 0
        return e.where(negative(x), e("relax.negative", mag), mag)

    abr, abi = e("relax.abs", br), e("relax.abs", bi)
    # |br| < |bi|: r = br / bi, den = bi + r br, ((ar r + ai) / den, (ai r - ar) / den)
    r1 = e.div(br, bi)
    d1 = e.add(bi, e.mul(r1, br))
    re1, im1 = e.div(e.add(e.mul(ar, r1), ai), d1), e.div(e.sub(e.mul(ai, r1), ar), d1)
    # else: r = bi / br, den = br + r bi, ((ar + ai r) / den, (ai - ar r) / den)
    r2 = e.div(bi, br)
    d2 = e.add(br, e.mul(r2, bi))
    re2, im2 = e.div(e.add(ar, e.mul(ai, r2)), d2), e.div(e.sub(ai, e.mul(ar, r2)), d2)
    small_r = e.cmp("relax.less", abr, abi)
    re, imv = e.where(small_r, re1, re2), e.where(small_r, im1, im2)
    # finite numerator, infinite divisor: 0 * (ar c' + ai d'), 0 * (ai c' - ar d')
    abr_inf, abi_inf = e.cmp("relax.equal", abr, inf), e.cmp("relax.equal", abi, inf)
    aar, aai = e("relax.abs", ar), e("relax.abs", ai)
    ar_inf, ai_inf = e.cmp("relax.equal", aar, inf), e.cmp("relax.equal", aai, inf)
    ar_fin, ai_fin = e.cmp("relax.less", aar, inf), e.cmp("relax.less", aai, inf)
    br_fin, bi_fin = e.cmp("relax.less", abr, inf), e.cmp("relax.less", abi, inf)
    cs, ds = copysign(e.where(abr_inf, one, zero), br), copysign(e.where(abi_inf, one, zero), bi)
    case3 = and_(ar_fin, ai_fin, or_(abr_inf, abi_inf))
    re3 = e.where(case3, e.mul(zero, e.add(e.mul(ar, cs), e.mul(ai, ds))), re)
    im3 = e.where(case3, e.mul(zero, e.sub(e.mul(ai, cs), e.mul(ar, ds))), imv)
    # infinite numerator, finite divisor: inf * (a' br + b' bi), inf * (b' br - a' bi)
    as_, bs = copysign(e.where(ar_inf, one, zero), ar), copysign(e.where(ai_inf, one, zero), ai)
    case2 = and_(or_(ar_inf, ai_inf), br_fin, bi_fin)
    re3 = e.where(case2, e.mul(inf, e.add(e.mul(as_, br), e.mul(bs, bi))), re3)
    im3 = e.where(case2, e.mul(inf, e.sub(e.mul(bs, br), e.mul(as_, bi))), im3)
    # zero divisor, numerator not all NaN: copysign(inf, br) * numerator
    case1 = and_(e.cmp("relax.equal", abr, zero), e.cmp("relax.equal", abi, zero), or_(not_nan(ar), not_nan(ai)))
    sinf = e.where(negative(br), e.c(-math.inf), inf)
    re3 = e.where(case1, e.mul(sinf, ar), re3)
    im3 = e.where(case1, e.mul(sinf, ai), im3)
    both_nan = and_(e("relax.logical_not", not_nan(re), dt="i1"), e("relax.logical_not", not_nan(imv), dt="i1"))
    return CVal(e.where(both_nan, re3, re), e.where(both_nan, im3, imv))


def _hypot(e: _Emit, a: Val, b: Val) -> Val:
    """|a + i b| without overflow: max * sqrt(1 + (min / max)^2); both parts infinite: inf; a NaN
    part: NaN (XLA's, even beside an infinite one)."""
    x, y = e("relax.abs", a), e("relax.abs", b)
    hi, lo = e("relax.maximum", x, y), e("relax.minimum", x, y)
    q = e.div(lo, hi)
    r = e.mul(hi, e("relax.sqrt", e.add(e.c(1.0), e.mul(q, q))))
    r = e.where(e.cmp("relax.equal", lo, e.c(0.0)), hi, r)
    return e.where(e.cmp("relax.equal", lo, e.c(math.inf)), lo, r)


def _abs(im, op, ins):
    (z,) = ins
    return _hypot(_emitter(im, op, z), z.re, z.im)


def _exp(im, op, ins):
    """e^(a + ib) = e^a (cos b + i sin b); a real argument (b == 0) keeps a zero imaginary part.
    Where e^a overflows but a is finite, e^(a/2) (e^(a/2) cos b) (XLA's: e^100 sin 1e-8 is 2.7e35
    in f32, not inf)."""
    (z,) = ins
    e = _emitter(im, op, z)
    ea = e("relax.exp", z.re)
    h = e("relax.exp", e.mul(z.re, e.c(0.5)))
    split = e("relax.logical_and", e.cmp("relax.equal", ea, e.c(math.inf)),
              e.cmp("relax.less", z.re, e.c(math.inf)), dt="i1")
    cos_b, sin_b = e("relax.cos", z.im), e("relax.sin", z.im)
    re_b = e.where(split, e.mul(h, e.mul(h, cos_b)), e.mul(ea, cos_b))
    im_b = e.where(split, e.mul(h, e.mul(h, sin_b)), e.mul(ea, sin_b))
    imv = e.where(e.cmp("relax.equal", z.im, e.c(0.0)), z.im, im_b)
    re = e.where(e.cmp("relax.equal", z.im, e.c(0.0)), ea, re_b)
    return CVal(re, imv)


def _log(im, op, ins):
    """log(z) = log|z| + i atan2(b, a)."""
    (z,) = ins
    e = _emitter(im, op, z)
    return CVal(e("relax.log", _hypot(e, z.re, z.im)), e("relax.atan2", z.im, z.re))


def _sqrt(im, op, ins):
    """The principal root: t = sqrt((|a| + |z|) / 2); a >= 0: (t, b / 2t), else (|b| / 2t, +-t)
    with b's sign; sqrt(0) = 0 (b's sign kept), an infinite b gives (inf, b)."""
    (z,) = ins
    e = _emitter(im, op, z)
    a, b = z.re, z.im
    zero = e.c(0.0)
    t = e("relax.sqrt", e.mul(e.add(e("relax.abs", a), _hypot(e, a, b)), e.c(0.5)))
    two_t = e.add(t, t)
    pos = e.cmp("relax.greater_equal", a, zero)
    re = e.where(pos, t, e.div(e("relax.abs", b), two_t))
    imv = e.where(pos, e.div(b, two_t), e.where(e.cmp("relax.less", b, zero), e("relax.negative", t), t))
    is_zero = e("relax.logical_and", e.cmp("relax.equal", a, zero), e.cmp("relax.equal", b, zero), dt="i1")
    re = e.where(is_zero, zero, re)
    imv = e.where(is_zero, b, imv)
    binf = e.isinf(b)
    return CVal(e.where(binf, e.c(math.inf), re), e.where(binf, b, imv))


def _expm1_real(e: _Emit, x: Val) -> Val:
    """e**x - 1 of a real part, accurate near 0 (Kahan's, as the real converter)."""
    one = e.c(1.0)
    u = e("relax.exp", x)
    um1 = e.sub(u, one)
    k = e.mul(um1, e.div(x, e("relax.log", u)))
    r = e.where(e.cmp("relax.equal", um1, e.c(-1.0)), um1, k)
    r = e.where(e.cmp("relax.equal", u, e.c(math.inf)), u, r)
    return e.where(e.cmp("relax.equal", u, one), x, r)


def _sinh_cosh(e: _Emit, b: Val) -> tuple[Val, Val]:
    """(sinh b, cosh b); sinh as (expm1(b) - expm1(-b)) / 2, exact in sign and accurate near 0."""
    half = e.c(0.5)
    sinh = e.mul(e.sub(_expm1_real(e, b), _expm1_real(e, e("relax.negative", b))), half)
    eb = e("relax.exp", b)
    cosh = e.mul(e.add(eb, e.div(e.c(1.0), eb)), half)
    return sinh, cosh


def _sin(im, op, ins):
    """sin(a + ib) = sin a cosh b + i cos a sinh b."""
    (z,) = ins
    e = _emitter(im, op, z)
    sh, ch = _sinh_cosh(e, z.im)
    return CVal(e.mul(e("relax.sin", z.re), ch), e.mul(e("relax.cos", z.re), sh))


def _cos(im, op, ins):
    """cos(a + ib) = cos a cosh b - i sin a sinh b."""
    (z,) = ins
    e = _emitter(im, op, z)
    sh, ch = _sinh_cosh(e, z.im)
    return CVal(e.mul(e("relax.cos", z.re), ch), e("relax.negative", e.mul(e("relax.sin", z.re), sh)))


def _tanh_parts(e: _Emit, a: Val, b: Val) -> CVal:
    """tanh(a + ib) = (t + i s) / (1 + i t s), t = tanh a, s = tan b: with d = 1 + t^2 s^2, the
    real part t (1 + s^2) / d and the imaginary part s (1 - t^2) / d, 1 - t^2 as 1 / cosh^2 a (no
    cancellation where t rounds to +-1). An infinite a gives +-1 + 0i for finite b."""
    t, s = e("relax.tanh", a), e("relax.tan", b)
    one = e.c(1.0)
    ts = e.mul(t, s)
    d = e.add(one, e.mul(ts, ts))
    ea = e("relax.exp", e("relax.abs", a))
    ch = e.mul(e.add(ea, e.div(one, ea)), e.c(0.5))
    re, imv = e.div(e.mul(t, e.add(one, e.mul(s, s))), d), e.div(s, e.mul(e.mul(ch, ch), d))
    # C99 (and jax): tanh(+-inf + iy) = +-1 + 0i whatever y; tanh(x + 0i) keeps the zero
    a_inf = e.isinf(a)
    s_fin = e.cmp("relax.less", e("relax.abs", s), e.c(math.inf))
    re = e.where(a_inf, t, re)
    imv = e.where(a_inf, e.where(s_fin, e.mul(e.c(0.0), s), e.c(0.0)), imv)
    return CVal(re, e.where(e.cmp("relax.equal", b, e.c(0.0)), b, imv))


def _tanh(im, op, ins):
    (z,) = ins
    return _tanh_parts(_emitter(im, op, z), z.re, z.im)


def _tan(im, op, ins):
    """tan z = -i tanh(iz), iz = -b + ia."""
    (z,) = ins
    e = _emitter(im, op, z)
    w = _tanh_parts(e, e("relax.negative", z.im), z.re)
    return CVal(w.im, e("relax.negative", w.re))


def _log1p(im, op, ins):
    """log(1 + z): the imaginary part atan2(b, 1 + a); the real part 0.5 log1p(a (a + 2) + b^2)
    where |z| < 0.5 (no cancellation near 0), else log |1 + z|."""
    (z,) = ins
    e = _emitter(im, op, z)
    a, b = z.re, z.im
    one = e.c(1.0)
    ap1 = e.add(a, one)
    near = e("relax.log1p", e.add(e.mul(a, e.add(a, e.c(2.0))), e.mul(b, b)))
    small = e.cmp("relax.less", _hypot(e, a, b), e.c(0.5))
    re = e.where(small, e.mul(near, e.c(0.5)), e("relax.log", _hypot(e, ap1, b)))
    return CVal(re, e("relax.atan2", b, ap1))


def _expm1(im, op, ins):
    """e^z - 1: the real part expm1(a) cos b - 2 sin^2(b / 2) (no cancellation near 0), the
    imaginary part e^a sin b (b itself where b == 0: a real argument keeps its zero); past e^a's
    overflow the parts are infinite, as jax's (no split as in _exp)."""
    (z,) = ins
    e = _emitter(im, op, z)
    a, b = z.re, z.im
    sh = e("relax.sin", e.mul(b, e.c(0.5)))
    re = e.sub(e.mul(_expm1_real(e, a), e("relax.cos", b)), e.mul(e.c(2.0), e.mul(sh, sh)))
    imv = e.where(e.cmp("relax.equal", b, e.c(0.0)), b, e.mul(e("relax.exp", a), e("relax.sin", b)))
    return CVal(re, imv)


def _rsqrt(im, op, ins):
    """1 / sqrt(z), the principal root, divided as complex division does; 0 - 0i where a part is
    infinite."""
    (z,) = ins
    e = _emitter(im, op, z)
    r = _divide(im, op, [CVal(e.broadcast_c(1.0), e.zeros()), _sqrt(im, op, ins)])
    # an infinite part (even beside a NaN) gives 0 - 0i, zeros signed as jax's: (copysign(0, a),
    # copysign(0, -b)), -0 for a NaN b
    zero, nzero = e.c(0.0), e.c(-0.0)

    def negative(x):
        return e("relax.logical_or", e.cmp("relax.less", x, zero), e.cmp("relax.less", e.div(e.c(1.0), x), zero),
                 dt="i1")
    big = e("relax.logical_or", e.isinf(z.re), e.isinf(z.im), dt="i1")
    re = e.where(big, e.where(negative(z.re), nzero, zero), r.re)
    # on the cut (a < 0, b = +-0) the sign of b's zero picks the side: 1/sqrt(-x -+ 0i) = +-i/sqrt(x)
    cut = e("relax.logical_and", e.cmp("relax.less", z.re, zero), e.cmp("relax.equal", z.im, zero), dt="i1")
    mag = e("relax.abs", r.im)
    imv = e.where(cut, e.where(negative(z.im), mag, e("relax.negative", mag)), r.im)
    imv = e.where(big, e.where(negative(z.im), zero, nzero), imv)
    return CVal(re, imv)


def _logistic(im, op, ins):
    """1 / (1 + e^-z)."""
    (z,) = ins
    e = _emitter(im, op, z)
    w = _exp(im, op, [CVal(e("relax.negative", z.re), e("relax.negative", z.im))])
    return _divide(im, op, [CVal(e.broadcast_c(1.0), e.zeros()), CVal(e.add(w.re, e.c(1.0)), w.im)])


def _power(im, op, ins):
    """z^w (w = c + id) as MLIR's complex lowering (what XLA on CPU computes): |z|^c e^(-d arg z)
    times cos q + i sin q, q = c arg z + d log|z|; then Kahan's cases: 0^w = 0 for d = 0 < c,
    z^0 = 1 (also 0^0), 1^w = 1, and (+inf + 0i)^c = inf (c > 0) or 0 (c < 0) for d = 0."""
    z, w = ins
    e = _emitter(im, op, z if isinstance(z, CVal) else w)
    if not isinstance(w, CVal):
        w = CVal(w, e.zeros())
    if not isinstance(z, CVal):
        z = CVal(z, e.zeros())
    a, b, c, d = z.re, z.im, w.re, w.im
    zero, one, inf = e.c(0.0), e.c(1.0), e.c(math.inf)

    def and_(*xs):
        return _all(e, *xs)

    absz = _hypot(e, a, b)
    arg = e("relax.atan2", b, a)
    coeff = e.mul(e("relax.power", absz, c), e("relax.exp", e.mul(e("relax.negative", d), arg)))
    q = e.add(e.mul(c, arg), e.mul(d, e("relax.log", absz)))
    re, imv = e.mul(coeff, e("relax.cos", q)), e.mul(coeff, e("relax.sin", q))
    c0, d0 = e.cmp("relax.equal", c, zero), e.cmp("relax.equal", d, zero)
    w0 = and_(c0, d0)
    case0 = and_(e.cmp("relax.equal", absz, zero), d0, e.cmp("relax.less_equal", zero, c))
    re = e.where(case0, e.where(w0, one, zero), re)
    imv = e.where(case0, zero, imv)
    one_z = and_(e.cmp("relax.equal", a, one), e.cmp("relax.equal", b, zero))
    ones = e("relax.logical_or", w0, one_z, dt="i1")
    re, imv = e.where(ones, one, re), e.where(ones, zero, imv)
    inf_z = and_(e.cmp("relax.equal", a, inf), e.cmp("relax.equal", b, zero), d0)
    re = e.where(and_(inf_z, e.cmp("relax.greater", c, zero)), inf, re)
    re = e.where(and_(inf_z, e.cmp("relax.less", c, zero)), zero, re)
    imv = e.where(and_(inf_z, e("relax.logical_not", c0, dt="i1")), zero, imv)
    return CVal(re, imv)


def _sign(im, op, ins):
    """z / |z|; 0 for 0, NaN for NaN."""
    (z,) = ins
    e = _emitter(im, op, z)
    m = _hypot(e, z.re, z.im)
    nz = e.cmp("relax.equal", m, e.c(0.0))
    return CVal(e.where(nz, z.re, e.div(z.re, m)), e.where(nz, z.im, e.div(z.im, m)))


def _compare(im, op, ins):
    from jaxlib.mlir.dialects import stablehlo as hlo

    a, b = ins
    direction = hlo.ComparisonDirectionAttr(op.attributes["comparison_direction"]).value
    if direction not in ("EQ", "NE"):
        raise UnsupportedOpError(op.operation.name, str(op.location), f"{direction} on complex numbers (unordered)")
    e = _emitter(im, op, a)
    if direction == "EQ":
        return e("relax.logical_and", e.cmp("relax.equal", a.re, b.re), e.cmp("relax.equal", a.im, b.im), dt="i1")
    return e("relax.logical_or", e.cmp("relax.not_equal", a.re, b.re), e.cmp("relax.not_equal", a.im, b.im), dt="i1")


def _complex(im, op, ins):
    re, imv = ins
    return CVal(re, imv)


def _real(im, op, ins):
    (z,) = ins
    if isinstance(z, CVal):
        return z.re
    return z


def _imag(im, op, ins):
    (z,) = ins
    if isinstance(z, CVal):
        return z.im
    return _Emit(im, z.dims, z.dtype).zeros()


def _astype(im, x: Val, dt: str) -> Val:
    if x.dtype == dt:
        return x
    return im.emit("relax.astype", [x], len(x.dims), dt, {"dtype": _dtype_attr(dt)}, dims=x.dims)


def _convert(im, op, ins):
    """real -> complex (a zero imaginary part), complex -> complex (each part), complex -> real
    (the real part, as StableHLO's convert; to a boolean: nonzero)."""
    (x,) = ins
    dims, dt = _res(op)
    part = complex_part_type(op.results[0].type)
    if part is not None:
        if isinstance(x, CVal):
            return CVal(_astype(im, x.re, part), _astype(im, x.im, part))
        re = _astype(im, x, part)
        return CVal(re, _Emit(im, x.dims, part).zeros())
    if dt == "i1":
        e = _Emit(im, x.dims, x.re.dtype)
        return e("relax.logical_or", e.cmp("relax.not_equal", x.re, e.c(0.0)),
                 e.cmp("relax.not_equal", x.im, e.c(0.0)), dt="i1")
    return _astype(im, x.re, dt)


def _literal_values(text: str, part: str) -> np.ndarray:
    """The numbers of a printed `dense<...>` complex literal, flattened, as float pairs: MLIR prints
    each element `(re,im)` in decimal that reads back exactly, or as the hex bits of a non-finite
    value, or the whole payload as one hex string (its raw little-endian bytes)."""
    body = text[text.index("dense<") + len("dense<"):text.rindex("> :")].strip()
    ft = np.float32 if part == "f32" else np.float64
    if body.startswith('"0x'):
        raw = np.frombuffer(bytes.fromhex(body[3:-1]), dtype=ft)
        return raw.reshape(-1, 2)
    it = np.dtype(np.uint32 if part == "f32" else np.uint64)
    out = []
    for tok in body.replace("[", " ").replace("]", " ").replace("(", " ").replace(")", " ").replace(",", " ").split():
        out.append(np.array(int(tok, 16), dtype=it).view(ft) if tok.startswith(("0x", "0X")) else ft(float(tok)))
    return np.array(out, dtype=ft).reshape(-1, 2)


def _constant(im, op, ins):
    """A complex constant: its literal read from the op's printed form (neither jax's nor our
    bindings read complex elements attributes), split into two real constants."""
    dims, dt = _res(op)
    part = complex_part_type(op.results[0].type)
    asm = op.operation.get_asm(enable_debug_info=False)
    vals = _literal_values(asm, part)
    shape = [d.value for d in dims]
    n = int(np.prod(shape, dtype=np.int64))
    if len(vals) == 1 and n != 1:
        vals = np.broadcast_to(vals, (n, 2))
    out = []
    for k in range(2):
        arr = np.ascontiguousarray(vals[:, k]).reshape(shape)
        flat = arr.reshape(-1)
        if n == 0 or n == 1 or (np.all(flat == flat[0]) and not np.isnan(flat[0])):
            attr = _splat(shape, part, float(flat[0]) if n else 0.0)
        else:
            attr = ir.DenseElementsAttr.get(arr, type=_elt(part))
        out.append(im.emit("relax.constant", [], len(shape), part, {"value": attr}, dims=dims))
    return CVal(out[0], out[1])


def _dot_general(im, op, ins):
    """(A + iB)(C + iD) = (AC - BD) + i(AD + BC): four real products."""
    a, b = ins
    if not (isinstance(a, CVal) and isinstance(b, CVal)):
        raise UnsupportedOpError(op.operation.name, str(op.location), "a product of complex and real operands")
    conv = CONVERTERS[op.operation.name]
    with real_parts():
        ac, bd = conv(im, op, [a.re, b.re]), conv(im, op, [a.im, b.im])
        ad, bc = conv(im, op, [a.re, b.im]), conv(im, op, [a.im, b.re])
    e = _Emit(im, ac.dims, ac.dtype)
    return CVal(e.sub(ac, bd), e.add(ad, bc))


def _body_op(op) -> str | None:
    """The combiner of a reduction body `return f(arg0, arg1)` on its two arguments, or None."""
    block = op.regions[0].blocks[0]
    ops = list(block.operations)
    if len(ops) != 2 or ops[1].operation.name not in ("stablehlo.return", "func.return") \
            or list(ops[1].operands) != [ops[0].result] or len(block.arguments) != 2:
        return None
    if sorted(str(o.get_name()) for o in ops[0].operands) != sorted(str(a.get_name()) for a in block.arguments):
        return None
    return ops[0].operation.name


def _scatter(im, op, ins):
    """A scatter that replaces (`x.at[i].set(z)`) or adds (`.add`): each part on its own. One that
    multiplies with `unique_indices` (welch's `.at[..., 1:].multiply(2)`): the factors scattered
    into ones (three real scatters: the parts, and where an index hit), multiplied in where hit."""
    block = op.regions[0].blocks[0]
    ops = list(block.operations)
    replaces = (len(ops) == 1 and len(block.arguments) == 2
                and [str(o.get_name()) for o in ops[0].operands] == [str(block.arguments[1].get_name())])
    body = _body_op(op)
    if len(op.results) == 1 and (replaces or body == "stablehlo.add"):
        return _on_parts(im, op, ins)
    unique = "unique_indices" in op.attributes and str(op.attributes["unique_indices"]) == "true"
    if len(op.results) != 1 or body != "stablehlo.multiply" or not unique or len(ins) != 3:
        raise UnsupportedOpError(op.operation.name, str(op.location), "on complex numbers only scatters that set "
                                 "or add, or multiply at unique indices, are supported")
    x, idx, u = ins
    conv = CONVERTERS[op.operation.name]
    e = _Emit(im, x.dims, x.re.dtype)
    ones = im.broadcast(e.c(1.0), x.dims)
    with real_parts():
        f_re = conv(im, op, [ones, idx, u.re])  # u's real parts where hit, 1 elsewhere
        f_im1 = conv(im, op, [ones, idx, u.im])
        miss = conv(im, op, [ones, idx, _Emit(im, u.dims, u.re.dtype).zeros()])  # 0 where hit, 1 elsewhere
    prod = _cmul(e, x, CVal(f_re, e.sub(f_im1, miss)))
    hit = e.cmp("relax.equal", miss, e.c(0.0))
    return CVal(e.where(hit, prod.re, x.re), e.where(hit, prod.im, x.im))


def _sort(im, op, ins):
    """A sort of complex values (jnp.sort, argsort, unique, sort_complex): jax's comparator orders
    them by real part, then imaginary part (each canonicalized, totally ordered), so each complex
    operand sorts as its two parts, two keys where it is a key."""
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    parts = {}  # (block argument, "stablehlo.real" / "stablehlo.imag") -> the comparator's value
    for o in block.operations:
        if o.name in ("stablehlo.real", "stablehlo.imag") and o.operands[0] in args:
            if (o.operands[0], o.name) in parts:
                raise ValueError("sort comparator reads a complex part twice")
            parts[(o.operands[0], o.name)] = o.results[0]
    flat, sources, results = [], [], []
    with real_parts():
        for k, v in enumerate(ins):
            rd, rdt = _res(op, k)
            pieces = [(v.re, "stablehlo.real"), (v.im, "stablehlo.imag")] if isinstance(v, CVal) else [(v, None)]
            for x, part in pieces:
                flat.append(x)
                results.append((rd, rdt))
                for side in (2 * k, 2 * k + 1):
                    a = args[side]
                    sources.append(a if part is None else parts.get((a, part), a))
        outs = sort_by(im, op, flat, sources, results)
    merged, i = [], 0
    for v in ins:
        if isinstance(v, CVal):
            merged.append(CVal(outs[i], outs[i + 1]))
            i += 2
        else:
            merged.append(outs[i])
            i += 1
    return merged


def _constant_parts(v) -> tuple[float, float] | None:
    """(re, im) of the complex splat constant behind jax value `v` (through scalar broadcasts and
    reshapes), or None."""
    while getattr(v.owner, "name", None) in ("stablehlo.broadcast_in_dim", "stablehlo.reshape"):
        v = v.owner.operands[0]
    if getattr(v.owner, "name", None) != "stablehlo.constant":
        return None
    vals = _literal_values(v.owner.get_asm(enable_debug_info=False), complex_part_type(v.type))
    if not len(vals) or (vals != vals[0]).any():
        return None
    return float(vals[0][0]), float(vals[0][1])


def _window_sum(im, op, ins):
    """A reduce_window that adds (cumsum, sum pooling): each part on its own, from its part of the
    init (padding holds it)."""
    if len(op.results) != 1 or len(ins) != 2 or _body_op(op) != "stablehlo.add":
        raise UnsupportedOpError(op.operation.name, str(op.location),
                                 "on complex numbers only windows that add are supported")
    (x, init), parts = ins, _constant_parts(op.operands[1]) or (None, None)
    _reduce_window = CONVERTERS[op.operation.name]  # window.py's, which takes the init's value
    with real_parts():
        return CVal(_reduce_window(im, op, [x.re, init.re], parts[0]), _reduce_window(im, op, [x.im, init.im], parts[1]))


def _custom_call(im, op, ins):
    """jax's `stablehlo.dynamic_reduce_window` (a cumsum over a symbolic axis) that adds: each
    part on its own, as `_window_sum`; any other target on complex numbers is refused by name."""
    target = _string(op.attributes["call_target_name"])
    if target != "stablehlo.dynamic_reduce_window" or len(ins) != 7 or not isinstance(ins[0], CVal) \
            or not isinstance(ins[1], CVal):
        raise UnsupportedOpError("stablehlo.custom_call", str(op.location), f"call target @{target} on complex numbers")
    callee = im.funcs.get(_string(op.attributes["called_computations"][0]))
    body = [] if callee is None else [o.operation.name for o in callee.regions[0].blocks[0].operations
                                      if o.operation.name not in ("stablehlo.return", "func.return")]
    if body != ["stablehlo.add"]:
        raise UnsupportedOpError("stablehlo.custom_call", str(op.location),
                                 "on complex numbers only dynamic_reduce_window windows that add are supported")
    (x, init), parts = ins[:2], _constant_parts(op.operands[1]) or (None, None)
    with real_parts():
        return CVal(_dynamic_reduce_window(im, op, [x.re, init.re, *ins[2:]], parts[0]),
                    _dynamic_reduce_window(im, op, [x.im, init.im, *ins[2:]], parts[1]))


_UNROLL_MAX = 64  # the most factors of a complex product reduction unrolled


def _reduce(im, op, ins):
    """A complex sum (each part summed, then the init added) or product (a static axis of at most
    `_UNROLL_MAX` factors, multiplied in order, then the init)."""
    body = _body_op(op)
    if len(ins) != 2 or body not in ("stablehlo.add", "stablehlo.multiply"):
        raise UnsupportedOpError(op.operation.name, str(op.location),
                                 "on complex numbers only sums and products are supported")
    x, init = ins
    axes = sorted(_ints(op.attributes["dimensions"]))
    keep = [d for i, d in enumerate(x.dims) if i not in axes]
    if body == "stablehlo.add":
        def total(v: Val) -> Val:
            return im.emit("relax.sum", [v], len(keep), v.dtype, {"axes": axes, "keepdims": False}, dims=keep)
        r = CVal(total(x.re), total(x.im))
        e = _Emit(im, keep, x.re.dtype)
        return CVal(e.add(r.re, init.re), e.add(r.im, init.im))
    for a in reversed(axes):
        d = x.dims[a]
        if d is None or not d.is_const or d.value > _UNROLL_MAX:
            raise UnsupportedOpError(op.operation.name, str(op.location), f"a complex product over dim {d} "
                                     f"(only static dims of at most {_UNROLL_MAX} factors)")
        dims = [x.dims[i] for i in range(len(x.dims)) if i != a]

        def factor(v: Val, k: int) -> Val:
            one = im.emit("relax.strided_slice", [v], len(v.dims), v.dtype,
                          {"axes": [a], "begin": [k], "end": [k + 1], "strides": [1]},
                          dims=[c if i != a else const(1) for i, c in enumerate(v.dims)])
            return im.reshape(one, dims)
        e = _Emit(im, dims, x.re.dtype)
        acc = None
        for k in range(d.value):
            f = CVal(factor(x.re, k), factor(x.im, k))
            acc = f if acc is None else _cmul(e, acc, f)
        if acc is None:  # an empty axis: the product is one
            acc = CVal(im.broadcast(e.c(1.0), dims), e.zeros())
        x = acc
    e = _Emit(im, keep, x.re.dtype)
    return _cmul(e, x, CVal(im.broadcast(init.re, keep), im.broadcast(init.im, keep)))


# --- discrete Fourier transforms ------------------------------------------------------------

_DENSE_MAX = 64  # the largest length transformed by one table product (512 was 1.5-3x slower: bench/fft.py)
_PRIME_MAX = 4096  # the largest length without a factor to split on (tables of 64 MiB in f32)


def _twiddles(n_in: int, n_out: int, n: int, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of 2 pi j k / n for j < n_in, k < n_out, from the exact residue j k mod n (so
    quarter turns are exact zeros and ones), in float64, times `scale`."""
    jk = (np.arange(n_in, dtype=np.int64)[:, None] * np.arange(n_out, dtype=np.int64)[None, :]) % n
    ang = 2.0 * np.pi * jk / n
    c, s = np.cos(ang), np.sin(ang)
    quarter = (4 * jk) % n == 0
    q = (4 * jk) // n
    c = np.where(quarter, np.array([1.0, 0.0, -1.0, 0.0])[q % 4], c)
    s = np.where(quarter, np.array([0.0, 1.0, 0.0, -1.0])[q % 4], s)
    return c * scale, s * scale


class _Dft:
    """Transforms along the last axis of [M, n] parts (M symbolic)."""

    def __init__(self, im, dt: str):
        self.im, self.dt = im, dt
        self.np_dt = np.float32 if dt == "f32" else np.float64

    def table(self, arr: np.ndarray) -> Val:
        a = np.ascontiguousarray(arr.astype(self.np_dt))
        attr = ir.DenseElementsAttr.get(a, type=_elt(self.dt))
        return self.im.emit("relax.constant", [], 2, self.dt, {"value": attr}, dims=[const(d) for d in a.shape])

    def mm(self, x: Val, t: Val) -> Val:
        return self.im.emit("relax.matmul", [x, t], 2, self.dt, dims=[x.dims[0], t.dims[1]])

    def ew(self, name, a, b) -> Val:
        return self.im.emit(name, [a, b], len(a.dims), self.dt, dims=a.dims)

    def complex_dft(self, z: CVal, n: int, inverse: bool) -> CVal:
        """Y_k = sum_j z_j w^(jk), w = e^(-+2 pi i / n); the inverse scaled by 1 / n."""
        if _one_table(n):
            c, s = _twiddles(n, n, n, 1.0 / n if inverse else 1.0)
            if not inverse:
                s = -s
            tc, ts = self.table(c), self.table(s)
            # (zr + i zi)(c + i s)
            re = self.ew("relax.subtract", self.mm(z.re, tc), self.mm(z.im, ts))
            imv = self.ew("relax.add", self.mm(z.re, ts), self.mm(z.im, tc))
            return CVal(re, imv)
        n1, n2 = _split(n)
        return self._four_step(z, n, n1, n2, inverse)

    def _four_step(self, z: CVal, n: int, n1: int, n2: int, inverse: bool) -> CVal:
        """Cooley-Tukey: j = n2 j1 + j2, k = k1 + n1 k2; transforms of length n1 over j1, a
        twiddle w^(j2 k1), transforms of length n2 over j2."""
        im = self.im
        m = z.re.dims[0]

        def each(f, v: CVal) -> CVal:
            return CVal(f(v.re), f(v.im))

        def reshape(dims):
            return lambda x: im.reshape(x, dims)

        def permute(axes):
            return lambda x: im.permute(x, axes)

        x = each(reshape([m, const(n1), const(n2)]), z)
        x = each(permute([0, 2, 1]), x)  # [m, j2, j1]
        x = each(reshape([m * n2, const(n1)]), x)
        x = self.complex_dft(x, n1, inverse)  # [m n2, k1]
        x = each(reshape([m, const(n2), const(n1)]), x)
        c, s = _twiddles(n2, n1, n)
        if not inverse:
            s = -s
        tw = CVal(self.table(c), self.table(s))
        tw = CVal(im.reshape(tw.re, [const(1), const(n2), const(n1)]), im.reshape(tw.im, [const(1), const(n2), const(n1)]))
        e = _Emit(im, x.re.dims, self.dt)
        x = _cmul(e, x, tw)
        x = each(permute([0, 2, 1]), x)  # [m, k1, j2]
        x = each(reshape([m * n1, const(n2)]), x)
        x = self.complex_dft(x, n2, inverse)  # [m n1, k2]
        x = each(reshape([m, const(n1), const(n2)]), x)
        x = each(permute([0, 2, 1]), x)  # [m, k2, k1]: k = k1 + n1 k2
        return each(reshape([m, const(n)]), x)

    def rfft(self, x: Val, n: int) -> CVal:
        h = n // 2 + 1
        if _one_table(n):
            c, s = _twiddles(n, h, n)
            return CVal(self.mm(x, self.table(c)), self.mm(x, self.table(-s)))
        zero = _Emit(self.im, x.dims, self.dt).zeros()
        full = self.complex_dft(CVal(x, zero), n, False)
        return CVal(self._first(full.re, h), self._first(full.im, h))

    def irfft(self, z: CVal, n: int) -> Val:
        """x_t = (1 / n) sum_k w_k (re_k cos - im_k sin)(2 pi k t / n) over k <= n / 2, with w_k = 2
        where the conjugate term k' = n - k is implied; the imaginary parts of the zero (and, for
        even n, the middle) term do not contribute, as numpy and XLA."""
        h = n // 2 + 1
        if _one_table(n):
            c, s = _twiddles(h, n, n, 1.0 / n)
            w = np.full((h, 1), 2.0)
            w[0] = 1.0
            if n % 2 == 0:
                w[-1] = 1.0
            return self.ew("relax.subtract", self.mm(z.re, self.table(w * c)), self.mm(z.im, self.table(w * s)))
        # the full Hermitian spectrum: X_(n-k) = conj(X_k) for 0 < k < n - h + 1
        tail = n - h
        rest = CVal(self._reverse(self._slice(z.re, 1, 1 + tail)),
                    self.im.emit("relax.negative", [self._reverse(self._slice(z.im, 1, 1 + tail))], 2, self.dt,
                                 dims=[z.re.dims[0], const(tail)]))
        full = CVal(self._cat(z.re, rest.re, n), self._cat(z.im, rest.im, n))
        return self.complex_dft(full, n, True).re

    def _first(self, x: Val, k: int) -> Val:
        return self._slice(x, 0, k)

    def _slice(self, x: Val, start: int, end: int) -> Val:
        return self.im.emit("relax.strided_slice", [x], 2, self.dt,
                            {"axes": [1], "begin": [start], "end": [end], "strides": [1]},
                            dims=[x.dims[0], const(end - start)])

    def _reverse(self, x: Val) -> Val:
        return self.im.emit("relax.reverse", [x], 2, self.dt, {"dimensions": [1]}, dims=x.dims)

    def _cat(self, a: Val, b: Val, n: int) -> Val:
        return self.im.emit("relax_v.concat", [a, b], 2, self.dt, {"axis": 1}, dims=[a.dims[0], const(n)])


def _one_table(n: int) -> bool:
    """Whether a transform of length n is one table product (short, or a prime: nothing to split);
    ValueError for a prime above _PRIME_MAX."""
    if n <= _DENSE_MAX or _split(n) is not None:
        return n <= _DENSE_MAX
    if n > _PRIME_MAX:
        raise ValueError(f"an FFT of length {n} (a prime above {_PRIME_MAX}) is not supported")
    return True


def _split(n: int) -> tuple[int, int] | None:
    """n = n1 * n2 with n1 the largest factor <= sqrt(n), or None for a prime."""
    for d in range(math.isqrt(n), 1, -1):
        if n % d == 0:
            return d, n // d
    return None


def _along(im, x, axis: int, f, n_out: int):
    """Apply `f` ([M, n] parts -> [M, n_out] parts) along `axis` of x (Val or CVal)."""
    dims = list(x.dims)
    r = len(dims)
    perm = [i for i in range(r) if i != axis] + [axis]
    inv = [perm.index(i) for i in range(r)]
    lead = [dims[i] for i in perm[:-1]]
    m = product(lead)

    def to2(v: Val) -> Val:
        return im.reshape(im.permute(v, perm), [m, dims[axis]])

    def back(v: Val) -> Val:
        return im.permute(im.reshape(v, lead + [const(n_out)]), inv)

    y = f(CVal(to2(x.re), to2(x.im)) if isinstance(x, CVal) else to2(x))
    return CVal(back(y.re), back(y.im)) if isinstance(y, CVal) else back(y)


def _fft(im, op, ins):
    from jaxlib.mlir.dialects import stablehlo as hlo

    (x,) = ins
    kind = hlo.FftTypeAttr(op.attributes["fft_type"]).value
    lengths = _ints(op.attributes["fft_length"])
    r = len(x.dims)
    axes = list(range(r - len(lengths), r))
    part = x.re.dtype if isinstance(x, CVal) else x.dtype
    if kind in ("FFT", "IFFT", "IRFFT") and not isinstance(x, CVal) or kind == "RFFT" and isinstance(x, CVal):
        raise ValueError(f"{kind} of {x.dtype}")
    if part not in ("f32", "f64"):
        raise ValueError(f"an FFT of element type {part}")
    for a, n in zip(axes, lengths):
        want = n // 2 + 1 if kind == "IRFFT" and a == axes[-1] else n
        d = x.dims[a]
        if n < 1 or d is None or not d.is_const or d.value != want:
            raise ValueError(f"fft_length {lengths} does not match the operand's dims")
    dft = _Dft(im, part)
    if kind in ("FFT", "IFFT"):
        for a, n in zip(axes, lengths):
            x = _along(im, x, a, lambda z, n=n: dft.complex_dft(z, n, kind == "IFFT"), n)
        return x
    if kind == "RFFT":
        n = lengths[-1]
        x = _along(im, x, axes[-1], lambda v: dft.rfft(v, n), n // 2 + 1)
        for a, n in zip(axes[:-1], lengths[:-1]):
            x = _along(im, x, a, lambda z, n=n: dft.complex_dft(z, n, False), n)
        return x
    for a, n in zip(axes[:-1], lengths[:-1]):  # IRFFT
        x = _along(im, x, a, lambda z, n=n: dft.complex_dft(z, n, True), n)
    n = lengths[-1]
    return _along(im, x, axes[-1], lambda z: dft.irfft(z, n), n)


_GENERIC = ("stablehlo.broadcast_in_dim", "stablehlo.dynamic_broadcast_in_dim", "stablehlo.reshape",
            "stablehlo.dynamic_reshape", "stablehlo.transpose", "stablehlo.concatenate", "stablehlo.slice",
            "stablehlo.real_dynamic_slice", "stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice",
            "stablehlo.pad", "stablehlo.dynamic_pad", "stablehlo.reverse", "stablehlo.gather",
            "stablehlo.dynamic_gather", "stablehlo.select", "stablehlo.add", "stablehlo.subtract",
            "stablehlo.negate", "stablehlo.optimization_barrier")

# StableHLO op -> converter of the op on complex operands or results (the importer dispatches here
# whenever an operand is a CVal or a result type is complex).
COMPLEX_CONVERTERS = {name: _on_parts for name in _GENERIC}
# control flow carries, captures and returns complex values as their parts (control_flow.py); a
# composite runs its decomposition
def _as_real_converter(im, op, ins):
    return CONVERTERS[op.operation.name](im, op, ins)


COMPLEX_CONVERTERS.update({name: _as_real_converter for name in ("stablehlo.while", "stablehlo.if", "stablehlo.case",
                                                             "stablehlo.composite", "stablehlo.get_dimension_size")})
COMPLEX_CONVERTERS.update({
    "stablehlo.multiply": _multiply,
    "stablehlo.divide": _divide,
    "stablehlo.abs": _abs,
    "stablehlo.exponential": _exp,
    "stablehlo.log": _log,
    "stablehlo.sqrt": _sqrt,
    "stablehlo.sign": _sign,
    "stablehlo.sine": _sin,
    "stablehlo.cosine": _cos,
    "stablehlo.tan": _tan,
    "stablehlo.tanh": _tanh,
    "stablehlo.log_plus_one": _log1p,
    "stablehlo.exponential_minus_one": _expm1,
    "stablehlo.rsqrt": _rsqrt,
    "stablehlo.logistic": _logistic,
    "stablehlo.power": _power,
    "stablehlo.compare": _compare,
    "stablehlo.complex": _complex,
    "stablehlo.real": _real,
    "stablehlo.imag": _imag,
    "stablehlo.convert": _convert,
    "stablehlo.constant": _constant,
    "stablehlo.dot_general": _dot_general,
    "stablehlo.reduce": _reduce,
    "stablehlo.scatter": _scatter,
    "stablehlo.reduce_window": _window_sum,
    "stablehlo.custom_call": _custom_call,
    "stablehlo.fft": _fft,
    "stablehlo.sort": _sort,
})


# The ops that exist only for complex numbers (real / imag of a real value also convert here).
register_converters({name: COMPLEX_CONVERTERS[name] for name in
                     ("stablehlo.fft", "stablehlo.complex", "stablehlo.real", "stablehlo.imag")})


def touches_complex(op, ins) -> bool:
    """Whether `op` has a complex operand or result (then COMPLEX_CONVERTERS converts it)."""
    if any(isinstance(v, CVal) for v in ins):
        return True
    return any(complex_part_type(r.type) is not None for r in op.results)


def convert_complex(im, op, ins):
    name = op.operation.name
    conv = COMPLEX_CONVERTERS.get(name)
    if conv is None:
        raise UnsupportedOpError(name, str(op.location), "on complex numbers")
    return conv(im, op, ins)
