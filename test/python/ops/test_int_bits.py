"""Integer and bit ops (issue 16) through jax.export with a symbolic dim, compiled ONCE per function
and compared with jax.jit bit for bit at several bindings: bitwise and/or/xor/not, shifts (amounts
0, 31, 32, 33, negative, huge), popcount, count_leading_zeros, clamp, divide/remainder (x / 0,
INT_MIN / -1), and integer power (not emitted by jax: StableHLO text against the StableHLO
reference interpreter's definition)."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402
from relax_mlir.frontend.stablehlo import import_stablehlo  # noqa: E402

import jaxcheck  # noqa: E402

(B,) = jax.export.symbolic_shape("b")
SIZES = (1, 7, 33, 130)
rng = np.random.default_rng(16)


def edge_values(dt):
    info = np.iinfo(dt)
    w = info.bits
    e = [0, 1, -1, 2, -2, 3, 5, -7, w - 1, w, w + 1, 2 * w, -w, info.max, info.min, info.max - 1, info.min + 1, 100]
    return np.array([v for v in e if info.min <= v <= info.max], dt)


def values(dt, n):
    """n values: the edge values first (cycled), then random bit patterns."""
    info = np.iinfo(dt)
    e = edge_values(dt)
    r = rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
    r[: min(n, len(e))] = e[: min(n, len(e))]
    return r


def pair(dt, n):
    """Two arrays covering every (edge, edge) combination that fits, then random pairs."""
    e = edge_values(dt)
    a, b = np.repeat(e, len(e)), np.tile(e, len(e))
    x, y = values(dt, n), values(dt, n)[::-1].copy()
    k = min(n, len(a))
    x[:k], y[:k] = a[:k], b[:k]
    return x, y


def check(fn, dts, sizes=SIZES, arity=2):
    jaxcheck.check(fn, [jaxcheck.spec((B,), d) for d in dts],
                   lambda n: list(pair(dts[0], n)) if arity == 2 else [values(dts[0], n)], sizes)


INTS = [np.int8, np.int16, np.int32]
BINARY = {
    "and": jnp.bitwise_and, "or": jnp.bitwise_or, "xor": jnp.bitwise_xor,
    "shift_left": lax.shift_left, "shift_right_logical": lax.shift_right_logical,
    "shift_right_arithmetic": lax.shift_right_arithmetic,
    "div": lax.div, "rem": lax.rem,
    "clamp": lambda x, y: lax.clamp(jnp.asarray(-5, x.dtype), x, y),
}
UNARY = {"not": jnp.bitwise_not, "popcnt": lax.population_count, "clz": lax.clz,
         "clamp_const": lambda x: lax.clamp(jnp.asarray(-3, x.dtype), x, jnp.asarray(30, x.dtype))}


@pytest.mark.parametrize("dt", INTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_int_op_matches_jax(name, dt):
    check(BINARY[name], [dt, dt])


@pytest.mark.parametrize("dt", INTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_int_op_matches_jax(name, dt):
    check(UNARY[name], [dt], arity=1)


def test_int64_ops_match_jax():
    with jax.enable_x64(True):
        for name in ("and", "xor", "shift_left", "shift_right_logical", "shift_right_arithmetic", "div", "rem"):
            check(BINARY[name], [np.int64, np.int64], sizes=(1, 33))
        for name in ("not", "popcnt", "clz"):
            check(UNARY[name], [np.int64], sizes=(1, 33), arity=1)


def test_bool_bitwise_ops_match_jax():
    fn = lambda a, b: (a & b, a | b, a ^ b, ~a)  # noqa: E731
    spec = jax.ShapeDtypeStruct((B,), jnp.bool_)
    exe = relax_mlir.compile(from_jax(fn, spec, spec))
    for n in (1, 4, 13):
        a, b = rng.integers(0, 2, n).astype(bool), rng.integers(0, 2, n).astype(bool)
        for g, w in zip(exe(a, b), jax.jit(fn)(a, b)):
            np.testing.assert_array_equal(g, np.asarray(w))


def test_shift_amounts_saturate():
    """StableHLO (APInt) semantics, not LLVM poison: amounts >= 32 or < 0 give 0 / the sign fill."""
    fn = lambda x, s: (lax.shift_left(x, s), lax.shift_right_logical(x, s), lax.shift_right_arithmetic(x, s))  # noqa: E731
    spec = jax.ShapeDtypeStruct((B,), jnp.int32)
    exe = relax_mlir.compile(from_jax(fn, spec, spec))
    x = np.array([-8, -8, -8, -8, 8, 8, 8, -2**31, 2**31 - 1], np.int32)
    s = np.array([0, 31, 32, -1, 33, 2**31 - 1, -2**31, 31, 30], np.int32)
    shl, shr, sar = exe(x, s)
    np.testing.assert_array_equal(shl, [-8, 0, 0, 0, 0, 0, 0, 0, -2**30])
    np.testing.assert_array_equal(shr, [-8, 1, 0, 0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(sar, [-8, -1, -1, -1, 0, 0, 0, -1, 1])
    for g, w in zip((shl, shr, sar), jax.jit(fn)(x, s)):
        np.testing.assert_array_equal(g, np.asarray(w))


def test_divide_remainder_edges():
    fn = lambda a, b: (lax.div(a, b), lax.rem(a, b))  # noqa: E731
    spec = jax.ShapeDtypeStruct((B,), jnp.int32)
    exe = relax_mlir.compile(from_jax(fn, spec, spec))
    a = np.array([7, -7, 7, -2**31, -2**31, 5, 0], np.int32)
    b = np.array([0, 0, -2, -1, 1, 3, 0], np.int32)
    q, r = exe(a, b)
    np.testing.assert_array_equal(q, [-1, -1, -3, -2**31, -2**31, 1, -1])
    np.testing.assert_array_equal(r, [7, -7, 1, 0, 0, 2, 0])
    for g, w in zip((q, r), jax.jit(fn)(a, b)):
        np.testing.assert_array_equal(g, np.asarray(w))


def ref_power(a: int, b: int, bits: int, signed: bool) -> int:
    """The StableHLO reference interpreter's integer power (Element.cpp: power)."""
    mask = (1 << bits) - 1
    if signed and b < 0:
        if abs(a) != 1:
            return 0
        b = -b
    e, base, r = b & mask, a & mask, 1
    while e:
        if e & 1:
            r = (r * base) & mask
        base = (base * base) & mask
        e >>= 1
    if signed and r >> (bits - 1):
        r -= 1 << bits
    return r


@pytest.mark.parametrize("dt", ["i8", "i32", "i64", "ui8", "ui32"])
def test_integer_power_matches_reference(dt):
    text = f"""
func.func public @main(%a: tensor<?x{dt}>, %b: tensor<?x{dt}>) -> tensor<?x{dt}> {{
  %0 = stablehlo.power %a, %b : tensor<?x{dt}>
  return %0 : tensor<?x{dt}>
}}"""
    exe = relax_mlir.compile(import_stablehlo(text, [["n"], ["n"]]))
    npdt = {"i8": np.int8, "i32": np.int32, "i64": np.int64, "ui8": np.uint8, "ui32": np.uint32}[dt]
    signed = not dt.startswith("u")
    bits = np.iinfo(npdt).bits
    for n in (1, 7, 200):
        a, b = pair(np.int8 if npdt == np.uint8 else np.int32 if npdt == np.uint32 else npdt, n)
        a, b = a.astype(npdt), b.astype(npdt)
        b = np.where(np.arange(n) % 3 == 0, b % 70, b).astype(npdt)  # plenty of small exponents
        a[-1:] = np.array(-1).astype(npdt)
        got = exe(a, b)
        want = np.array([ref_power(int(x), int(y), bits, signed) for x, y in zip(a, b)], npdt)
        np.testing.assert_array_equal(got, want)
    if signed:
        np.testing.assert_array_equal(exe(np.array([3, -1, -1, 1, 2, 0], npdt), np.array([4, -3, -2, -5, -1, 0], npdt)),
                                      [81, -1, 1, 1, 0, 1])


@pytest.mark.parametrize("op, dt, msg", [
    ("relax.popcount", "f32", "operand must have an integer element type, got f32"),
    ("relax.count_leading_zeros", "i1", "not defined on i1"),
    ("relax.bitwise_not", "f16", "operand must have an integer element type, got f16"),
])
def test_int_ops_refuse_other_dtypes(op, dt, msg):
    t = f'!relax.tensor<["n"], {dt}>'
    text = f"""func.func @main(%x: {t}) -> {t} {{
  %0 = "{op}"(%x) : ({t}) -> {t}
  return %0 : {t}
}}"""
    with pytest.raises(relax_mlir.CompileError, match=f"<string>:2:8: error: '{op}' op .*{msg}"):
        relax_mlir.compile(text)


def test_shift_refuses_floats():
    t = '!relax.tensor<["n"], f32>'
    text = f"""func.func @main(%x: {t}) -> {t} {{
  %0 = "relax.left_shift"(%x, %x) : ({t}, {t}) -> {t}
  return %0 : {t}
}}"""
    with pytest.raises(relax_mlir.CompileError, match="integer element type, got f32"):
        relax_mlir.compile(text)


def test_bitcast_results_do_not_share_storage():
    """A same-width bitcast between signed and unsigned is a no-op kernel that the CPU backend
    turns into a view of its input; the memory plan must keep that input's storage to itself. Two
    returned scalars, each a bitcast of a planned temporary, came back equal (the second's
    temporary reused the first's block: 3 for 103, a silent wrong result on main)."""
    def fn(a):
        return (lax.bitcast_convert_type(a.max() ^ jnp.int8(3), jnp.uint8),
                lax.bitcast_convert_type(a.min() ^ jnp.int8(3), jnp.uint8),
                lax.bitcast_convert_type((a + 1) * 2, jnp.uint8), lax.bitcast_convert_type(a - 7, jnp.uint8))
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((B,), jnp.int8)))
    rng = np.random.default_rng(3)
    for n in (1, 6, 37):
        a = rng.integers(-128, 128, n).astype(np.int8)
        for g, w in zip(exe(a), jax.jit(fn)(a)):
            np.testing.assert_array_equal(g, np.asarray(w))


def test_bitcast_between_widths_splits_and_joins_elements_lowest_bits_first():
    """bitcast_convert_type to a narrower type adds a minor axis of W/w elements, lowest bits
    first (jax on CPU); to a wider type it takes that axis away. Floats, bf16, unsigned and signed
    parts (a negative narrow part must not sign-extend into its neighbours), NaN and Inf bits."""
    def fn(x, u, i8):
        return (lax.bitcast_convert_type(x, jnp.uint16), lax.bitcast_convert_type(x, jnp.int8),
                lax.bitcast_convert_type(u, jnp.float32), lax.bitcast_convert_type(i8, jnp.int32),
                lax.bitcast_convert_type(i8[:, :2], jnp.bfloat16),
                lax.bitcast_convert_type(x.astype(jnp.float16), jnp.uint8),
                lax.bitcast_convert_type(lax.bitcast_convert_type(x, jnp.int8), jnp.float32))
    specs = [jax.ShapeDtypeStruct((B,), jnp.float32), jax.ShapeDtypeStruct((B, 2), jnp.uint16),
             jax.ShapeDtypeStruct((B, 4), jnp.int8)]
    exe = relax_mlir.compile(from_jax(fn, *specs))
    r = np.random.default_rng(5)
    for n in (1, 7, 130):
        x = (r.standard_normal(n) * 1e5).astype(np.float32)
        x[: min(n, 3)] = [np.nan, -np.inf, -0.0][: min(n, 3)]
        args = [x, r.integers(0, 2**16, (n, 2)).astype(np.uint16), r.integers(-128, 128, (n, 4)).astype(np.int8)]
        for i, (g, w) in enumerate(zip(exe(*args), jax.jit(fn)(*args))):
            w = np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape, (i, g.dtype, g.shape, w.dtype, w.shape)
            np.testing.assert_array_equal(np.asarray(g).view(np.uint8), w.view(np.uint8), err_msg=f"result {i}, n={n}")


def test_packbits_of_two_symbolic_dims():
    """jnp.packbits of a bool [n, m] array (flattened: n*m bits, padded to whole bytes): its byte
    count floordiv(n*m + 7*mod(n*m, 8), 8) simplifies, so the pad's reshape is proven (was refused
    'not provably equal'). (jax's export pads 8 more bits where n*m is a multiple of 8, unlike
    jax.jit; its own exported.call does too: the sizes below avoid those.)"""
    n, m = jax.export.symbolic_shape("n, m")
    fn = lambda b: (jnp.packbits(b), jnp.packbits(b, axis=1, bitorder="little"))  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((n, m), jnp.bool_)))
    rng = np.random.default_rng(0)
    for shape in [(1, 3), (7, 5), (3, 3), (13, 11)]:
        b = rng.integers(0, 2, shape).astype(bool)
        for got, want in zip(exe(b), jax.jit(fn)(b)):
            np.testing.assert_array_equal(got, np.asarray(want))
