"""Complex numbers inside a function (frontend/stablehlo/complex.py: pairs of real parts): the FFT
family against jax.jit over a symbolic batch at several sizes from one compile (table lengths, a
prime, lengths split by Cooley-Tukey), arithmetic on every pair of special values (signed zeros,
infinities, NaN) as XLA computes it, the transcendental functions (sin ... power) on moderate,
large and special parts, products and sums of complex tensors, and the refusals:
complex arguments / results, and ops without a complex form, named all at once."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import toolchecks  # noqa: E402
from jaxcheck import check, spec  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402
from relax_mlir.frontend.stablehlo import UnsupportedOpError  # noqa: E402


def _parts(*zs):
    out = []
    for z in zs:
        out += [z.real, z.imag] if jnp.iscomplexobj(z) else [z]
    return tuple(out)


def _rows(shape):
    return lambda n: [np.random.default_rng(n).standard_normal((n,) + shape).astype(np.float32)]


def test_fft_family_matches_jax():
    (b,) = jax.export.symbolic_shape("b")

    def f(x):
        z = x.astype(jnp.complex64) * (1 + 0.5j)
        return _parts(jnp.fft.fft(x), jnp.fft.ifft(z, axis=1), jnp.fft.rfft(x), jnp.fft.irfft(jnp.fft.rfft(x), n=16),
                      jnp.fft.irfft(z[..., :9], n=16, norm="ortho"), jnp.fft.irfft(z[..., :4], n=7),
                      jnp.fft.fft2(z), jnp.fft.ifft2(z, norm="forward"), jnp.fft.rfft2(x), jnp.fft.irfft2(z[..., :9]),
                      jnp.fft.fftn(z, axes=(1, 2)), jnp.fft.rfft(x[..., :7]), jnp.fft.fft(z[:, :5], axis=1))
    check(f, [spec((b, 6, 16))], _rows((6, 16)), [1, 7, 33], rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("n", [600, 1031, 1024])
def test_fft_long_lengths(n):
    """600 = 24 x 25 and 1024 = 32 x 32 are split (Cooley-Tukey), the prime 1031 is one table."""
    (b,) = jax.export.symbolic_shape("b")

    def f(x):
        return _parts(jnp.fft.fft(x), jnp.fft.rfft(x), jnp.fft.irfft(jnp.fft.rfft(x) * 1j, n=n), jnp.fft.ifft(x))
    check(f, [spec((b, n))], _rows((n,)), [1, 3], rtol=1e-4, atol=2e-4)


def test_fft_empty_batch():
    check(lambda x: _parts(jnp.fft.rfft(x), jnp.fft.fft(x)), [spec((0, 8))], lambda n: [np.zeros((0, 8), np.float32)],
          [1], rtol=0, atol=0)


def test_fft_convolution_and_spectral_layer():
    """What users write: a long convolution by FFT (S4 / Hyena) and an FNO-style spectral layer
    whose complex weights are built inside from real parameters."""
    b, s = jax.export.symbolic_shape("b, s")

    def conv(x, k):
        n = 2 * 32
        return jnp.fft.irfft(jnp.fft.rfft(x, n=n) * jnp.fft.rfft(k, n=n), n=n)[..., :32]

    def spectral(x, wr, wi):
        w = lax.complex(wr, wi)
        xf = jnp.fft.rfft(x, axis=-1)
        out = jnp.zeros((x.shape[0], 4, x.shape[-1] // 2 + 1), jnp.complex64)
        out = out.at[:, :, :6].set(jnp.einsum("bci,coi->boi", xf[..., :6], w))  # a scatter of complex values
        y, xf = lax.optimization_barrier((jnp.fft.irfft(out, n=x.shape[-1], axis=-1), xf))
        return y, jnp.abs(xf).sum(-1)

    rng = np.random.default_rng(0)
    k = rng.standard_normal(32).astype(np.float32)
    check(conv, [spec((b, 32)), spec((32,))], lambda n: [rng.standard_normal((n, 32)).astype(np.float32), k],
          [1, 5, 64], rtol=1e-4, atol=1e-4)
    wr, wi = (rng.standard_normal((3, 4, 6)).astype(np.float32) for _ in range(2))
    check(spectral, [spec((b, 3, 20)), spec((3, 4, 6)), spec((3, 4, 6))],
          lambda n: [rng.standard_normal((n, 3, 20)).astype(np.float32), wr, wi], [1, 2, 9], rtol=1e-4, atol=1e-4)


_SPECIAL = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-30, 7.0, 0.1], np.float32)


def test_arithmetic_on_special_values_as_xla():
    """Every pair of special values: products (XLA's FMA leaves a rounding residue where the exact
    result cancels to 0: within atol), quotients (Smith's algorithm and its NaN recoveries), abs,
    exp, log, sqrt, sign, compare, conj, angle; NaN positions and infinities exactly."""
    (n,) = jax.export.symbolic_shape("n")

    def f(ar, ai, br, bi):
        a, b = lax.complex(ar, ai), lax.complex(br, bi)
        return _parts(a * b, a / b, jnp.abs(a), jnp.exp(a), jnp.log(a), jnp.sqrt(a), jnp.sign(a), a == b, a != b,
                      jnp.conj(a), jnp.angle(a), a + b, a - b, -a)
    re, im = (g.reshape(-1) for g in np.meshgrid(_SPECIAL, _SPECIAL, indexing="ij"))
    i, k = np.repeat(np.arange(re.size), re.size), np.tile(np.arange(re.size), re.size)
    args = [re[i], im[i], re[k], im[k]]
    exe = relax_mlir.compile(from_jax(f, *[spec((n,))] * 4))
    want = [np.asarray(w) for w in jax.jit(f)(*args)]
    got = exe(*args)
    assert len(got) == len(want)
    for j, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape, j
        if w.dtype == bool:
            np.testing.assert_array_equal(g, w, err_msg=f"result {j}")
            continue
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"result {j}: NaN positions")
        inf = np.isinf(w)
        np.testing.assert_array_equal(g[inf], w[inf], err_msg=f"result {j}: infinities")
        np.testing.assert_allclose(g[~inf], w[~inf], rtol=1e-5, atol=1e-7, err_msg=f"result {j}")


def test_products_sums_and_structure():
    b, s = jax.export.symbolic_shape("b, s")

    def f(xr, xi, w):
        z = lax.complex(xr, xi)
        m = z @ (w + 2j * w.T)
        y = jnp.concatenate([z, z[:, ::-1] * 1j], axis=1).reshape(-1, 2, 4).transpose(0, 2, 1)
        sel = jnp.where(xr > 0, z, jnp.conj(z))
        return _parts(m, y, sel, z.sum(axis=1), z.mean(), jnp.pad(z, ((0, 0), (1, 2))), z[:, 1:3] / (z[:, :2] + 3),
                      jnp.abs(m), (z * z.conj()).real, jnp.einsum("bi,bj->bij", z, z.conj()),
                      jnp.prod(z, axis=1), jnp.sin(z), jnp.cos(z), z.astype(jnp.complex64) == z[:, ::-1])

    def make(n):
        rng = np.random.default_rng(n)
        return [rng.standard_normal((n, 4)).astype(np.float32), rng.standard_normal((n, 4)).astype(np.float32),
                rng.standard_normal((4, 4)).astype(np.float32)]
    check(f, [spec((b, 4)), spec((b, 4)), spec((4, 4))], make, [1, 7, 40], rtol=1e-5, atol=1e-5)


def test_scatter_set_and_add():
    (b,) = jax.export.symbolic_shape("b")

    def f(xr, xi, i):
        z = lax.complex(xr, xi)
        return _parts(jnp.zeros((6,), jnp.complex64).at[i].set(z[:, 0]), jnp.ones((6,), jnp.complex64).at[i].add(z[:, 1]))

    def make(n):
        rng = np.random.default_rng(n)
        return [rng.standard_normal((n, 3)).astype(np.float32), rng.standard_normal((n, 3)).astype(np.float32),
                rng.permutation(max(n, 6))[:n].astype(np.int32) % 6]
    check(f, [spec((b, 3)), spec((b, 3)), spec((b,), jnp.int32)], make, [1, 5, 6], rtol=1e-6, atol=1e-6)
    with pytest.raises(UnsupportedOpError, match="only scatters that set or add"):
        from_jax(lambda x, i: _parts(jnp.ones((6,), jnp.complex64).at[i].multiply(x * 1j)), spec((b,)),
                 spec((b,), jnp.int32))


def test_control_flow_and_windows_carry_complex_values():
    """A scan whose carry is complex (a diagonal linear recurrence, as S4D / LRU), a while loop that
    captures a complex value, cond / switch returning complex values, cumsum and a summing window."""
    b, s = jax.export.symbolic_shape("b, s")

    def f(x, k):
        z = jnp.fft.rfft(x)

        def step(h, zt):
            h = h * (0.5 + 0.25j) + zt
            return h, (jnp.abs(h), h)
        last, (mags, hs) = lax.scan(step, jnp.zeros(z.shape[:1], jnp.complex64), z.T)
        acc = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + (z * c[0]).real.sum()), (0, x.sum()))[1]
        y = x * (1 + 2j)
        r = lax.cond(k[0] > 0, lambda: y * 2, lambda: jnp.conj(y))
        r = lax.switch(k[0] % 3, [lambda a: a, lambda a: a * 1j, lambda a: a + x], r)
        w = lax.reduce_window(y, 0j, lax.add, (1, 3), (1, 1), "SAME")
        return _parts(last, mags, hs, acc, r, jnp.cumsum(y, axis=1), w)

    def make(n):
        rng = np.random.default_rng(n)
        return [[rng.standard_normal((n, 8)).astype(np.float32), np.int32([k])] for k in (1, -1, 2)]
    check(f, [spec((b, 8)), spec((1,), jnp.int32)], make, [1, 3, 20], rtol=1e-5, atol=1e-5, cases=True)


def test_complex_cumsum_over_a_symbolic_axis():
    """jnp.cumsum of complex values along a symbolic axis: jax's `dynamic_reduce_window` custom
    call, each part summed on its own (was refused: "custom_call on complex numbers")."""
    (b,) = jax.export.symbolic_shape("b")
    f = lambda x: _parts(jnp.cumsum(lax.complex(x, -2 * x), axis=0), jnp.cumsum(x * 1j, axis=0)[::-1])  # noqa: E731
    check(f, [spec((b, 3))], _rows((3,)), [1, 7, 33], rtol=1e-5, atol=1e-5)


def test_jnp_complex_api():
    """What jnp builds on complex values: composites (their decompositions run on the parts), dims
    of complex values, vdot / norm / conj products, sinh / cos (jax's real decompositions)."""
    (b,) = jax.export.symbolic_shape("b")

    def f(x):
        z = lax.complex(x, x[:, ::-1])
        y = jnp.fft.fft(z)
        return _parts(jnp.abs(y).max(1), (y * jnp.conj(y)).real, jnp.vdot(z[0], z[-1]), jnp.matmul(z, z.T.conj()),
                      jnp.linalg.norm(z, axis=1), jnp.sqrt(z), jnp.sign(z), z / (z + 1.0), jnp.mean(z, axis=0),
                      jnp.where(x > 0, z, 0), jnp.roll(z, 2, axis=1), jnp.stack([z, z]).sum(0), jnp.cos(z), jnp.sinh(z),
                      jnp.square(z), z ** 2, jnp.reciprocal(z + 3), jnp.fft.fftshift(y, axes=1))
    check(f, [spec((b, 8))], _rows((8,)), [1, 7, 33], rtol=1e-4, atol=1e-5)


def test_scipy_signal_spectra():
    """jax.scipy.signal's stft / istft / welch: framing, complex FFTs, and welch's one-sided
    scaling, a complex scatter that multiplies at unique indices."""
    import jax.scipy.signal as sig
    (b,) = jax.export.symbolic_shape("b")

    def f(x):
        _, _, z = sig.stft(x, nperseg=16, noverlap=8)
        return _parts(z, sig.istft(z, nperseg=16, noverlap=8)[1], sig.welch(x, nperseg=16)[1],
                      sig.csd(x, x[:, ::-1], nperseg=16)[1])
    check(f, [spec((b, 64))], _rows((64,)), [1, 7, 33], rtol=1e-4, atol=1e-5)


def test_complex128_under_x64():
    (b,) = jax.export.symbolic_shape("b")
    with jax.enable_x64(True):
        check(lambda x: _parts(jnp.fft.fft(x), jnp.exp(1j * x) / (x + 1j)), [spec((b, 12), jnp.float64)],
              lambda n: [np.random.default_rng(n).standard_normal((n, 12))], [1, 5], rtol=1e-12, atol=1e-12)


def _cplx(rng, shape, dtype=np.complex64):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def test_complex_arguments_and_results():
    """Complex arrays in and out of the compiled function (numpy's complex64 / complex128): the
    relax parameter is the parts interleaved in one more dim of 2 (`relax.complex`), a view of the
    caller's array; results come back as complex arrays."""
    (b,) = jax.export.symbolic_shape("b")

    def f(z, x, s):
        return jnp.fft.fft(z * x), jnp.abs(z), z.conj() * s, jnp.fft.rfft(x), lax.cond(s.real > 0, lambda: z * 1j, lambda: z)

    def make(n):
        rng = np.random.default_rng(n)
        return [[_cplx(rng, (n, 8)), rng.standard_normal((n, 8)).astype(np.float32), np.complex64(s)]
                for s in (1.5 - 2j, -0.5 + 1j)]
    mod = check(f, [spec((b, 8), jnp.complex64), spec((b, 8)), spec((), jnp.complex64)], make, [1, 7, 33],
                rtol=1e-5, atol=1e-5, cases=True).module
    assert 'tensor<["b", 8, 2], f32> {relax.complex}' in str(mod) and 'tensor<[2], f32> {relax.complex}' in str(mod)
    exe = relax_mlir.compile(mod)
    rng = np.random.default_rng(0)
    z, x = _cplx(rng, (16, 16))[:, ::2], np.ones((16, 8), np.float32)  # a strided view: copied
    np.testing.assert_allclose(exe(z, x, np.complex64(1))[1], np.abs(z), rtol=1e-6)
    for bad, what in [(z.real.copy(), "argument #0 has dtype float32, expected complex64"),
                      (z.astype(np.complex128), "has dtype complex128, expected complex64"),
                      (z[0], r"argument #0 has rank 1 \(shape \(8,\)\), expected rank 2: \[b, 8\] complex64")]:
        with pytest.raises(ValueError, match=what):
            exe(bad, x, np.complex64(1))
    # bound once: the same conversion
    p = exe[exe.main].partial({0: z})
    np.testing.assert_allclose(p(x, np.complex64(2j))[2], z.conj() * 2j, rtol=1e-6)
    np.testing.assert_allclose(p(x, 2j)[2], z.conj() * 2j, rtol=1e-6)  # a Python complex, as jax.jit takes it


def test_complex_donation_unused_arguments_and_x64(tmp_path):
    (b,) = jax.export.symbolic_shape("b")
    rng = np.random.default_rng(3)
    f = lambda z, w: z * 2j + w  # noqa: E731
    exe = relax_mlir.compile(from_jax(f, spec((b, 3), jnp.complex64), spec((b, 3), jnp.complex64), donate_argnums=(0,)))
    z, w = _cplx(rng, (5, 3)), _cplx(rng, (5, 3))
    want = np.asarray(jax.jit(f)(z, w))
    got = exe(z, w)
    assert got is z  # written in place: the caller's complex array
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(ValueError, match="donated"):
        exe(_cplx(rng, (5, 6))[:, ::2], w)
    # arguments jax.export drops (unused) are still complex parameters of the function
    g = lambda a, z, s: a * 2  # noqa: E731
    exe = relax_mlir.compile(from_jax(g, spec((b,)), spec((b, 2), jnp.complex64), spec((), jnp.complex64)))
    np.testing.assert_array_equal(exe(np.ones(4, np.float32), _cplx(rng, (4, 2)), np.complex64(1j)), np.full(4, 2.0))
    exe.export(str(tmp_path / "art"))
    from relax_mlir.runtime import load
    with pytest.raises(ValueError, match="argument #1 has dtype float32, expected complex64"):
        load(str(tmp_path / "art"))(np.ones(4, np.float32), np.ones((4, 2, 2), np.float32), np.complex64(1j))
    with jax.enable_x64(True):
        h = lambda z: (jnp.fft.ifft(z), z.real + 1, z[0, 0])  # noqa: E731
        exe = relax_mlir.compile(from_jax(h, spec((b, 4), jnp.complex128)))
        for n in (1, 6):
            z = _cplx(rng, (n, 4), np.complex128)
            for got, want in zip(exe(z), jax.jit(h)(z)):
                assert got.dtype == want.dtype and got.shape == want.shape
                np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-14)


def test_transcendental_ops_match_jax():
    """sin, cos, tan, tanh, log1p, expm1, rsqrt, logistic and power (and jax's sinh, cosh, arcsin,
    arctan, arcsinh, log2, ... built from them) over a symbolic batch, at moderate and large parts
    (e^a past f32's range: exp splits it as XLA does), from one compile."""
    (b,) = jax.export.symbolic_shape("b")

    def f(ar, ai, br, bi):
        a, w = lax.complex(ar, ai), lax.complex(br, bi)
        return _parts(jnp.sin(a), jnp.cos(a), jnp.tan(a), jnp.tanh(a), jnp.log1p(a), jnp.expm1(a), lax.rsqrt(a),
                      lax.logistic(a), a ** w, a ** 2.5, a ** 3, jnp.sinh(a), jnp.cosh(a), jnp.arcsin(a),
                      jnp.arctan(a), jnp.arcsinh(a), jnp.log2(a), jnp.exp2(a), jnp.exp(a * 30))

    def args(n):
        rng = np.random.default_rng(n)
        return [(rng.standard_normal((n, 4)) * s).astype(np.float32) for s in (2.0, 2.0, 1.0, 1.0)]
    check(f, [spec((b, 4))] * 4, args, [1, 7, 64], rtol=2e-4, atol=1e-5)


_GRID = np.array([0.0, -0.0, 1e-8, -0.5, 1.0, 3.0, -30.0, 100.0, 1e30, np.inf, -np.inf, np.nan], np.float32)


def test_transcendental_special_values_as_xla():
    """Every pair of the grid's parts: NaN positions and infinities as jax.jit (C99's tanh(inf + iy)
    = 1 + 0i, Kahan's cases of the power: 0^w, z^0, 1^w, inf^c; rsqrt 0 - 0i at an infinite part),
    finite parts close to its."""
    (n,) = jax.export.symbolic_shape("n")

    def f(ar, ai, br, bi):
        a, w = lax.complex(ar, ai), lax.complex(br, bi)
        return _parts(jnp.sin(a), jnp.cos(a), jnp.tan(a), jnp.tanh(a), jnp.log1p(a), lax.rsqrt(a), lax.logistic(a),
                      a ** w)
    re, im = (g.reshape(-1) for g in np.meshgrid(_GRID, _GRID, indexing="ij"))
    k = np.roll(np.arange(re.size), 5)
    exe = relax_mlir.compile(from_jax(f, *[spec((n,))] * 4))
    got, want = exe(re, im, re[k], im[k]), jax.jit(f)(re, im, re[k], im[k])
    for j, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"result {j}: NaN positions")
        inf = np.isinf(w)
        np.testing.assert_array_equal(g[inf], w[inf], err_msg=f"result {j}: infinities")
        fin = ~inf & ~np.isnan(w)
        np.testing.assert_allclose(g[fin], w[fin], rtol=1e-5, atol=1e-6, err_msg=f"result {j}")


def _sortable(n, dtype):
    """Complex values with repeated real parts (the imaginary part decides), NaN and signed zeros
    in either part, infinities."""
    rng = np.random.default_rng(n)
    z = (rng.integers(-2, 3, n) + 1j * rng.standard_normal(n)).astype(dtype)
    for k, v in enumerate([complex(np.nan, 1), complex(-0.0, np.nan), complex(0.0, -0.0), complex(np.inf, -np.inf),
                           complex(-0.0, 1)][:max(n - 3, 0)]):
        z[k] = v
    return z


def test_complex_sort_as_jax():
    """jnp.sort / argsort / sort_complex / unique and lax.sort on complex values (refused before):
    jax's comparator orders by the real part, then the imaginary part (-0 as 0, NaN last), so each
    complex operand sorts as its two parts; bit for bit against jax.jit at n = 1, 5, 13, 100 from
    one compile, complex64 and complex128."""
    (n,) = jax.export.symbolic_shape("n")

    def f(z):
        return _parts(jnp.sort(z), jnp.argsort(z), jnp.argsort(z, stable=True, descending=True),
                      jnp.sort(z, descending=True), jnp.sort_complex(z), jnp.unique(z, size=4, fill_value=0),
                      jnp.sort(jnp.stack([z, z * 1j]), axis=1), *lax.sort((jnp.abs(z) > 1, z), num_keys=1),
                      *lax.sort((z, jnp.arange(z.shape[0])), num_keys=1))

    mod = check(f, [spec((n,), jnp.complex64)], lambda m: [_sortable(m, np.complex64)], [1, 5, 13, 100]).module
    assert '"relax_v.sort"' in str(mod)
    jax.config.update("jax_enable_x64", True)
    try:
        check(f, [spec((n,), jnp.complex128)], lambda m: [_sortable(m, np.complex128)], [1, 5, 100])
    finally:
        jax.config.update("jax_enable_x64", False)


def test_unsupported_complex_ops_are_refused_by_name():
    (b,) = jax.export.symbolic_shape("b")
    with pytest.raises(UnsupportedOpError) as e:
        from_jax(lambda x: _parts(lax.clamp(0j, x * 1j, 1 + 1j), lax.atan2(x * 1j, x + 0j), jnp.sqrt(x + 0j)),
                 spec((b, 4)))
    assert sorted(i.op_name for i in e.value.items) == ["stablehlo.atan2", "stablehlo.clamp"], str(e.value)
    assert all("on complex numbers" in i.why for i in e.value.items), str(e.value)
    with pytest.raises(UnsupportedOpError, match="a complex product over dim b"):
        from_jax(lambda x: _parts(jnp.prod(x * 1j, axis=0)), spec((b, 4)))
    with pytest.raises(UnsupportedOpError, match="only windows that add"):
        from_jax(lambda x: _parts(jnp.cumprod(x * 1j, axis=1)), spec((b, 4)))


_VULKAN_FFT = """
import jax, jax.numpy as jnp, numpy as np, relax_mlir
from relax_mlir.frontend.jax import from_jax
(b,) = jax.export.symbolic_shape("b")
f = lambda x, k: jnp.fft.irfft(jnp.fft.rfft(x) * jnp.fft.rfft(k, n=16), n=16)
exe = relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((b, 16), jnp.float32), jax.ShapeDtypeStruct((5,), jnp.float32)),
                         target="vulkan")
k = np.random.default_rng(0).standard_normal(5).astype(np.float32)
for n in (1, 7, 33):
    x = np.random.default_rng(n).standard_normal((n, 16)).astype(np.float32)
    np.testing.assert_allclose(exe(x, k), np.asarray(jax.jit(f)(x, k)), rtol=1e-4, atol=1e-5)
print("ok")
"""


def test_fft_convolution_on_vulkan():
    """The parts are real tensors, so GPU targets take complex programs as they are: an FFT
    convolution on Vulkan (lavapipe), in a child process (a lavapipe device breaks the CPU JIT of
    later tests)."""
    if not toolchecks.vulkan_adapter():
        pytest.skip("no Vulkan adapter (lavapipe)")
    out = subprocess.run([sys.executable, "-c", _VULKAN_FFT], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
