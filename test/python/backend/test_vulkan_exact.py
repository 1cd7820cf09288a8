"""IEEE special values on the Vulkan target where the driver would rewrite them away, and f16 bits.

Mesa (lavapipe) applies its inexact float rewrites to every shader it gets through naga (which drops
the NoContraction decoration that marks ops exact): `x * 0` and `x - x` came back +0.0 for every x
where StableHLO gives NaN for an infinite or NaN x and -0.0 for a negative x, and `0 - x` was -x
(-0.0 for +0.0) (probe s22/vk V5). The kernels compute these on the bits now. A bitcast between f16
and a 16-bit integer in a kernel (`jnp.signbit` of f16) failed to lower (V6)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relax_mlir
import toolchecks

SPECIALS = [np.nan, -np.nan, np.inf, -np.inf, -3.0, -1.0, 2.0, -0.0, 0.0, 1e30, 3e38, -7.5]


def _vulkan():
    if not toolchecks.vulkan_adapter():
        pytest.skip("no Vulkan adapter (wgpu with lavapipe or a GPU driver)")


def _same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=what)
    np.testing.assert_array_equal(got[~nan], want[~nan], err_msg=what)
    np.testing.assert_array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]), err_msg=f"{what}: sign of zero")


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16])
def test_times_zero_minus_self_and_zero_minus(dtype):
    _vulkan()
    n = jax.export.symbolic_shape("n")[0]

    def f(x, y):
        return (x * 0, -0.0 * x, x - x, x + (-x), 0.0 - x, x * (y - y), (x * y) * 0, x * y - x * y,
                jnp.where(x < 0, x * 0, x), jnp.select([x < -2.5, x < 0], [x * 0, x * 2], -1))

    spec = jax.ShapeDtypeStruct((n,), dtype)
    exe = relax_mlir.compile(jax.export.export(jax.jit(f))(spec, spec), target="vulkan")
    rng = np.random.default_rng(1)
    for size in (len(SPECIALS), 1, 97, 1031):
        x = np.resize(np.array(SPECIALS, dtype), size)
        y = rng.permutation(np.resize(np.array(SPECIALS, dtype), size))
        with np.errstate(all="ignore"):
            want = jax.jit(f)(x, y)
        for k, (g, w) in enumerate(zip(exe(x, y), want)):
            _same(g, w, f"output {k} at n = {size} ({np.dtype(dtype).name})")


def test_f16_bits_move_exactly():
    _vulkan()
    n = jax.export.symbolic_shape("n")[0]

    def f(h, u):
        return (jax.lax.bitcast_convert_type(h, jnp.uint16).astype(jnp.uint32),
                jax.lax.bitcast_convert_type(u.astype(jnp.uint16), jnp.float16), jnp.signbit(h),
                jax.lax.bitcast_convert_type(h, jnp.int16).astype(jnp.int32))

    exe = relax_mlir.compile(jax.export.export(jax.jit(f))(jax.ShapeDtypeStruct((n,), jnp.float16),
                                                           jax.ShapeDtypeStruct((n,), jnp.uint32)),
                             target="vulkan")
    bits = np.arange(65536, dtype=np.uint16)  # every f16: zeros, subnormals, normals, infinities, NaNs
    nan = ((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0)
    for part in (bits, bits[:1], bits[31744:31751]):  # (0x7c00: +inf and the first NaNs)
        h = part.view(np.float16)
        a, b, s, i = (np.asarray(v) for v in exe(h, part.astype(np.uint32)))
        keep = ~nan[part.astype(np.int64)]
        np.testing.assert_array_equal(a[keep], part[keep])
        np.testing.assert_array_equal(i.astype(np.int16).view(np.uint16)[keep], part[keep])
        np.testing.assert_array_equal(s, np.signbit(h))
        np.testing.assert_array_equal(b.view(np.uint16)[keep], part[keep])
        # a NaN stays a NaN of its sign (lavapipe's f16 conversions do not keep payload bits)
        assert np.isnan(b[~keep]).all() and np.array_equal(np.signbit(b[~keep]), np.signbit(h[~keep]))
        assert (((a[~keep] & 0x7C00) == 0x7C00) & ((a[~keep] & 0x3FF) != 0)).all()


def test_float_power_matches_jax():
    """jnp.power on floats (optax's Adam bias correction, Gemma's RoPE frequencies) was refused on
    Vulkan; it is exp(y log|x|) with C's special cases now (exact for y = 0, 1, 2, -1, x = 1)."""
    _vulkan()
    n = jax.export.symbolic_shape("n")[0]
    sp = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 1.5,
                   -1.5, 10.0, 1e-3, 1e30, -7.0, 0.9], np.float32)  # (no subnormal x: XLA's CPU flushes them)
    xs, ys = (v.ravel() for v in np.meshgrid(sp, sp))
    rng = np.random.default_rng(3)
    for dtype, tol in ((jnp.float32, 2e-5), (jnp.float16, 1e-3)):
        spec = jax.ShapeDtypeStruct((n,), dtype)
        exe = relax_mlir.compile(jax.export.export(jax.jit(jnp.power))(spec, spec), target="vulkan")
        for x, y in ((xs, ys), (rng.uniform(0, 20, 1031), rng.uniform(-20, 20, 1031)), (xs[:1], ys[:1])):
            x, y = x.astype(dtype), y.astype(dtype)
            with np.errstate(all="ignore"):
                want = np.asarray(jax.jit(jnp.power)(x, y)).astype(np.float64)
            got = np.asarray(exe(x, y)).astype(np.float64)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            ok = ~np.isnan(want)
            np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))
            np.testing.assert_allclose(got[ok], want[ok], rtol=tol, atol=0)
            exact = ok & (np.isin(y, [0, 1, 2, -1]) | (x == 1) | np.isinf(want) | (want == 0))
            np.testing.assert_array_equal(got[exact], want[exact])


def test_float_power_by_constants():
    """A constant exponent lets the driver rewrite exp(c log|x|) (it lost a NaN x: pow(NaN, 2.5)
    came back 0.0 before the explicit NaN select)."""
    _vulkan()
    n = jax.export.symbolic_shape("n")[0]
    xs = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -3.0, 1e30, 0.9], np.float32)
    for c in (2.5, -0.5, 3.0, -3.0, np.inf, np.nan, 7.0):
        f = lambda x, c=c: (jnp.power(x, jnp.float32(c)), jnp.power(jnp.float32(c), x))  # noqa: E731
        exe = relax_mlir.compile(jax.export.export(jax.jit(f))(jax.ShapeDtypeStruct((n,), jnp.float32)),
                                 target="vulkan")
        for x in (xs, xs[:1], np.resize(xs, 101)):
            with np.errstate(all="ignore"):
                want = [np.asarray(w, np.float64) for w in jax.jit(f)(x)]
            for g, w in zip(exe(x), want):
                g = np.asarray(g, np.float64)
                np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"c = {c}")
                ok = ~np.isnan(w)
                np.testing.assert_array_equal(np.signbit(g[ok]), np.signbit(w[ok]), err_msg=f"c = {c}")
                np.testing.assert_allclose(g[ok], w[ok], rtol=2e-5, atol=0, err_msg=f"c = {c}")
