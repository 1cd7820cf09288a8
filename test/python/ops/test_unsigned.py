"""Unsigned element types ui8..ui64 (jax uint8..uint64) through jax.export with a symbolic dim, compiled
ONCE per function and compared with jax.jit bit for bit at several bindings: numpy uint arrays in and
out, unsigned compare/divide/remainder/max/min/shift_right, wrapping arithmetic, conversions to and
from floats (saturating) and between widths (zero extension), and jax.random sampling (threefry
on uint32 bits) from a key passed as an argument."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax, import_exported  # noqa: E402

import jaxcheck  # noqa: E402

(B,) = jax.export.symbolic_shape("b")
SIZES = (1, 7, 33, 130)
rng = np.random.default_rng(1616)
UINTS = [np.uint8, np.uint16, np.uint32]


def values(dt, n):
    info = np.iinfo(dt)
    w = info.bits
    e = np.array([0, 1, 2, 3, 5, 7, w - 1, w, w + 1, info.max, info.max - 1, info.max // 2, info.max // 2 + 1, 100 % info.max],
                 dt)
    r = rng.integers(0, info.max, size=n, dtype=dt, endpoint=True)
    k = min(n, len(e))
    r[:k] = e[:k]
    return r


def pair(dt, n):
    x, y = values(dt, n), values(dt, n)
    e = values(dt, 14)
    a, b = np.repeat(e, len(e)), np.tile(e, len(e))
    k = min(n, len(a))
    x[:k], y[:k] = a[:k], b[:k]
    return x, y


def check(fn, dts, make, sizes=SIZES):
    jaxcheck.check(fn, [jaxcheck.spec((B,), d) for d in dts], make, sizes)


BINARY = {
    "arith": lambda a, b: (a + b, a - b, a * b, -a),
    "div_rem": lambda a, b: (lax.div(a, b), lax.rem(a, b)),
    "max_min": lambda a, b: (jnp.maximum(a, b), jnp.minimum(a, b), lax.clamp(jnp.asarray(3, a.dtype), a, b)),
    "compare": lambda a, b: (a < b, a <= b, a > b, a >= b, a == b, a != b),
    "bits": lambda a, b: (a & b, a | b, a ^ b, ~a, a << b, a >> b, lax.shift_right_arithmetic(a, b)),
    "count": lambda a, b: (lax.population_count(a), lax.clz(b)),
    "where": lambda a, b: jnp.where(a < b, a, b + jnp.asarray(1, a.dtype)),
    "jnp": lambda a, b: (jnp.sign(a), jnp.abs(a), jnp.clip(a, 3, 10), a // 3, a % 3, a ** 3, b // a, b % a),
    "constants": lambda a, b: (a + jnp.asarray(np.iinfo(a.dtype).max - 3, a.dtype),
                               a * jnp.array([3, np.iinfo(a.dtype).max, 1], a.dtype).sum()),
}


@pytest.mark.parametrize("dt", UINTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_unsigned_ops_match_jax(name, dt):
    check(BINARY[name], [dt, dt], lambda n: list(pair(dt, n)))


def test_uint64_ops_match_jax():
    with jax.enable_x64(True):
        for name in ("arith", "div_rem", "max_min", "compare", "bits"):
            check(BINARY[name], [np.uint64, np.uint64], lambda n: list(pair(np.uint64, n)), sizes=(1, 33))


FLOATS = np.array([-1, -0.5, -0.0, 0.0, 0.4, 3.7, 127.5, 255.9, 256, 65535.5, 65536, 1e10, 4294967295.0, 4294967296.0,
                   2.0 ** 31, np.nan, np.inf, -np.inf, 1e-40], np.float32)


@pytest.mark.parametrize("dt", UINTS, ids=lambda d: np.dtype(d).name)
def test_float_to_unsigned_saturates(dt):
    fn = lambda x: (x.astype(dt), x.astype(jnp.float16).astype(dt))  # noqa: E731
    check(fn, [np.float32], lambda n: [np.resize(FLOATS, n)], sizes=(1, len(FLOATS), 100))


@pytest.mark.parametrize("dt", UINTS, ids=lambda d: np.dtype(d).name)
def test_unsigned_conversions(dt):
    def fn(u):
        return (u.astype(jnp.float32), u.astype(jnp.float16), u.astype(jnp.bfloat16).astype(jnp.float32),
                u.astype(jnp.bfloat16).astype(dt), u.astype(jnp.int32), u.astype(jnp.int8),
                u.astype(jnp.uint8), u.astype(jnp.uint32), u.astype(jnp.int8).astype(dt),
                u.astype(jnp.int16).astype(jnp.uint32), u.astype(jnp.bool_), (u > 3).astype(dt))
    check(fn, [dt], lambda n: [values(dt, n)])


def test_bitcast_between_uint32_and_float32():
    fn = lambda u, f: (lax.bitcast_convert_type(u, jnp.float32), lax.bitcast_convert_type(f, jnp.uint32))  # noqa: E731
    check(fn, [np.uint32, np.float32],
          lambda n: [values(np.uint32, n), np.resize(FLOATS, n)])


def test_unsigned_sum_and_arange():
    fn = lambda u: (u.sum(), jnp.arange(u.shape[0], dtype=u.dtype) * u)  # noqa: E731
    check(fn, [np.uint32], lambda n: [values(np.uint32, n)])


def test_unsigned_argument_dtype_is_checked():
    exe = relax_mlir.compile(from_jax(lambda a: a + a, jax.ShapeDtypeStruct((B,), jnp.uint32)))
    np.testing.assert_array_equal(exe(np.array([2**32 - 1, 2], np.uint32)), np.array([2**32 - 2, 4], np.uint32))
    with pytest.raises(ValueError, match="dtype int32, expected uint32"):
        exe(np.array([1, 2], np.int32))


# Order-sensitive ops on unsigned values (the importer maps them onto the signed order by flipping
# the top bit) and data movement of unsigned values (found by a sweep of unseen models: uint8
# images, jnp.searchsorted's uint32 indices, jax.random.permutation's uint32 sort keys).
ORDERED = {
    "reduce": lambda a, b: (a.max(), a.min(), jnp.max(a.reshape(1, -1), axis=1, initial=5)),
    "arg": lambda a, b: (jnp.argmax(a), jnp.argmin(a), jnp.argmax(jnp.stack([a, b]), axis=0)),
    "sort": lambda a, b: (jnp.sort(a), jnp.argsort(b), lax.sort((a, b), num_keys=2)[1], jnp.sort(a)[::-1]),
    "pool": lambda a, b: (lax.reduce_window(a, a.dtype.type(0), lax.max, (3,), (1,), ((1, 1),)),
                          lax.reduce_window(b, b.dtype.type(np.iinfo(b.dtype).max), lax.min, (2,), (2,), ((0, 1),)),
                          lax.reduce_window(a, a.dtype.type(7), lax.max, (2,), (1,), ((1, 0),)),
                          jnp.cumsum(a, dtype=a.dtype), lax.cummax(b)),
    "scatter": lambda a, b: (a.at[jnp.array([0, 0])].max(b[0]), a.at[jnp.array([0])].min(b[:1]),
                             a.at[0].set(b[0]), a.at[jnp.array([0, 0])].add(b[0]), a.at[0].multiply(b[0])),
    "dot": lambda a, b: (jnp.dot(a, b), jnp.matmul(a.reshape(-1, 1), b[:1].reshape(1, 1))),
    "move": lambda a, b: (a[::-1], jnp.pad(a, (2, 1), constant_values=a.dtype.type(np.iinfo(a.dtype).max)), a[1::2],
                          jnp.take(a, jnp.array([2, 0, 1]) % a.shape[0])),
}


@pytest.mark.parametrize("dt", UINTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(ORDERED))
def test_unsigned_order_and_movement_match_jax(name, dt):
    check(ORDERED[name], [dt, dt], lambda n: list(pair(dt, n)))


def test_unsigned_indices():
    """uint32 indices (jnp.searchsorted's) read as unsigned: 2^31 and more clamp to the last
    position or fill, as in jax, instead of reading as negative."""
    def fn(x, i, edges):
        return (jnp.take(x, i, mode="clip"), jnp.take(x, i, mode="fill", fill_value=-1.0),
                jnp.searchsorted(edges, x), jax.lax.dynamic_slice_in_dim(x, i[0], 1))
    big = np.array([0, 1, 2**31, 2**32 - 1, 3], np.uint32)

    def make(n):
        x = rng.standard_normal(n).astype(np.float32)
        i = np.resize(big, n)
        i[i < 2**31] %= n
        return [x, i, np.array([-1.0, -0.5, 0.0, 0.25, 1.5], np.float32)]
    jaxcheck.check(fn, [jaxcheck.spec((B,), np.float32), jaxcheck.spec((B,), np.uint32), jaxcheck.spec((5,))],
                   make, SIZES)


def test_unsigned_refused_where_undefined():
    """Ops whose meaning on unsigned types is not implemented are refused, located, not miscomputed
    (relax.max written on unsigned values; jax's reductions on them import as the signed order)."""
    t = '!relax.tensor<["n"], ui32>'
    text = (f'func.func @main(%x: {t}) -> !relax.tensor<[], ui32> {{\n'
            f'  %0 = "relax.max"(%x) {{axes = [0]}} : ({t}) -> !relax.tensor<[], ui32>\n'
            f'  return %0 : !relax.tensor<[], ui32>\n}}')
    with pytest.raises(relax_mlir.CompileError, match="not supported by relax.max"):
        relax_mlir.compile(text)
    text = f'func.func @main(%x: {t}) -> {t} {{\n  %0 = "relax.abs"(%x) : ({t}) -> {t}\n  return %0 : {t}\n}}'
    with pytest.raises(relax_mlir.CompileError, match=r"<string>:2:8: .*abs is not defined on unsigned ui32"):
        relax_mlir.compile(text)
    t2 = "!relax.tensor<[2], ui32>"
    c = (f"func.func @main() -> {t2} {{\n"
         f'  %0 = "relax.constant"() {{value = dense<[1, 4000000000]> : tensor<2xui32>}} : () -> {t2}\n'
         f"  return %0 : {t2}\n}}")
    with pytest.raises(relax_mlir.CompileError, match=r"<string>:2:8: .*unsigned constant \(ui32\) must be written signless"):
        relax_mlir.compile(c)


# --- jax.random: threefry2x32 on uint32 bits, the key an argument ---------------------------------
# jax lowers threefry for the CPU with a rolled fori_loop (stablehlo.while over a constant trip
# count, unrolled by the importer) and for GPUs unrolled: both lowerings import and run here.

RANDOM = {
    "bits": lambda k, x: jax.random.bits(k, x.shape),
    "uniform": lambda k, x: jax.random.uniform(k, x.shape) * x,
    "randint": lambda k, x: jax.random.randint(k, x.shape, -5, 1000),
    "split_bits_u8": lambda k, x: jax.random.bits(jax.random.split(k)[1], x.shape, jnp.uint8),
    "normal": lambda k, x: jax.random.normal(k, x.shape),
}


def random_module(fn, platform):
    key = jax.ShapeDtypeStruct((2,), jnp.uint32)
    x = jax.ShapeDtypeStruct((B,), jnp.float32)
    if platform == "cpu":
        return relax_mlir.compile(from_jax(fn, key, x))
    return relax_mlir.compile(import_exported(jax.export.export(jax.jit(fn), platforms=[platform])(key, x)))


@pytest.mark.parametrize("platform", ["cpu", "cuda"])
@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_from_key_argument_matches_jax(name, platform):
    fn = RANDOM[name]
    exe = random_module(fn, platform)
    for seed in (0, 42, 2**31 + 7):
        key = np.asarray(jax.random.key_data(jax.random.PRNGKey(seed)))
        for n in (1, 7, 1000):
            x = np.full(n, 1.5, np.float32)
            got, want = exe(key, x), np.asarray(jax.jit(fn)(key, x))
            assert got.dtype == want.dtype and got.shape == want.shape
            if name != "normal":
                np.testing.assert_array_equal(got, want)  # bit for bit
            else:  # the uniform bits are exact; erf_inv's log1p/sqrt round within a few ulps of XLA's
                np.testing.assert_array_max_ulp(got, want, maxulp=4)


def test_fori_loop_with_constant_bounds_is_unrolled():
    fn = lambda x, k: jax.lax.fori_loop(0, 7, lambda i, c: c * 3 + (k >> i), x)  # noqa: E731
    check(fn, [np.uint32, np.uint32], lambda n: list(pair(np.uint32, n)))


def test_unsigned_through_exported_artifact(tmp_path):
    """The .so artifact (runtime.load, no MLIR) takes and returns numpy uint arrays too."""
    from relax_mlir import runtime

    fn = lambda k, x: (jax.random.bits(k, x.shape), x >> jnp.uint32(3))  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((2,), jnp.uint32), jax.ShapeDtypeStruct((B,), jnp.uint32)))
    exe.export(str(tmp_path / "m"))
    art = runtime.load(str(tmp_path / "m"))
    key = np.array([0, 42], np.uint32)
    for n in (1, 9, 100):
        x = values(np.uint32, n)
        for g, w in zip(art(key, x), jax.jit(fn)(key, x)):
            assert g.dtype == np.uint32
            np.testing.assert_array_equal(g, np.asarray(w))


def test_typed_prng_key_arguments():
    """A typed key (`jax.random.key`, flax nnx state holding Rngs) is passed as jax.jit takes it:
    its data (uint32[..., 2], what the exported signature holds); a key result comes back as its
    data (`jax.random.wrap_key_data` makes it a key again). Was 'cannot be made a numpy array'."""
    fn = lambda x, key: (x + jax.random.normal(key, x.shape), jax.random.split(key)[0])  # noqa: E731
    key = jax.random.key(3)
    exe = relax_mlir.compile(import_exported(jax.export.export(jax.jit(fn))(
        jax.ShapeDtypeStruct((B, 4), jnp.float32), jax.ShapeDtypeStruct((), key.dtype))))
    for n in (1, 7):
        x = np.ones((n, 4), np.float32)
        got, want = exe(x, key), jax.jit(fn)(x, key)
        np.testing.assert_allclose(got[0], np.asarray(want[0]), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got[1], np.asarray(jax.random.key_data(want[1])))
        np.testing.assert_array_equal(exe(x, np.asarray(jax.random.key_data(key)))[1], got[1])
