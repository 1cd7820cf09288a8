"""dot_general whose operands' element type differs from its result's (jax's
`preferred_element_type`): bf16/f16 products accumulated in f32, i8 products in i32; numerics
against jax.jit at several bindings from one compile."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402


def _run(fn, specs, make, sizes=(1, 13, 64), rtol=1e-5, atol=1e-5, exact=False):
    exe = relax_mlir.compile(from_jax(fn, *specs))
    for n in sizes:
        args = make(n)
        got, want = exe(*args), np.asarray(jax.jit(fn)(*args))
        assert got.dtype == want.dtype and got.shape == want.shape
        if exact:
            np.testing.assert_array_equal(got, want, err_msg=f"n={n}")
        else:
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=f"n={n}")


@pytest.mark.parametrize("low", [jnp.bfloat16, jnp.float16], ids=["bf16", "f16"])
def test_low_precision_dot_accumulates_in_f32(low):
    b = jax.export.symbolic_shape("b")[0]
    fn = lambda x, w: jnp.einsum("bk,kn->bn", x, w, preferred_element_type=jnp.float32)  # noqa: E731
    rng = np.random.default_rng(0)
    w = rng.standard_normal((96, 24)).astype(low)
    # 96 products of magnitude ~1: accumulated in bf16 the sum would be off by several units
    _run(fn, [jax.ShapeDtypeStruct((b, 96), low), jax.ShapeDtypeStruct(w.shape, low)],
         lambda n: [rng.standard_normal((n, 96)).astype(low), w], rtol=1e-5, atol=1e-4)


def test_batched_bf16_attention_scores_in_f32():
    b, s = jax.export.symbolic_shape("b, s")
    fn = lambda q, k: jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)  # noqa: E731
    spec = jax.ShapeDtypeStruct((b, s, 2, 8), jnp.bfloat16)
    rng = np.random.default_rng(1)
    make = lambda n: [rng.standard_normal((2, n, 2, 8)).astype(jnp.bfloat16) for _ in range(2)]  # noqa: E731
    _run(fn, [spec, spec], make, sizes=(1, 7, 33), atol=1e-5)


def test_int8_dot_accumulates_in_i32():
    b = jax.export.symbolic_shape("b")[0]
    fn = lambda x, w: jax.lax.dot(x, w, preferred_element_type=jnp.int32)  # noqa: E731
    rng = np.random.default_rng(2)
    w = rng.integers(-128, 128, (64, 5)).astype(np.int8)
    # extremes: 64 * 128 * 128 overflows i8 and i16, not i32
    make = lambda n: [np.full((n, 64), -128, np.int8) if n == 1 else rng.integers(-128, 128, (n, 64)).astype(np.int8), w]  # noqa: E731
    _run(fn, [jax.ShapeDtypeStruct((b, 64), jnp.int8), jax.ShapeDtypeStruct(w.shape, jnp.int8)], make, exact=True)


@pytest.mark.parametrize("pair", [("uint8", "uint32"), ("uint16", "uint32"), ("uint8", "uint16")])
def test_unsigned_dot_widens_then_multiplies(pair):
    """ui8 x ui8 -> ui32 (`preferred_element_type`, as quantized code writes it): both operands
    zero-extended, products and sums wrapping in the result type, bit for bit as jax.jit (was
    refused: "mixed element types")."""
    low, wide = (getattr(jnp, t) for t in pair)
    n = jax.export.symbolic_shape("n")[0]
    info = np.iinfo(low)

    def make(b):
        rng = np.random.default_rng(b)
        return (rng.integers(0, info.max, (b, 7), endpoint=True).astype(low),
                rng.integers(0, info.max, (7, 5), endpoint=True).astype(low))
    _run(lambda a, w: jnp.dot(a, w, preferred_element_type=wide),
         (jax.ShapeDtypeStruct((n, 7), low), jax.ShapeDtypeStruct((7, 5), low)), make, exact=True)


@pytest.mark.parametrize("pair", [("uint8", "int32"), ("int8", "float32"), ("uint8", "float32"), ("bool", "int32"),
                                  ("uint16", "int32"), ("uint8", "int16"), ("uint8", "int8"), ("int8", "uint32"),
                                  ("int8", "float16"), ("int8", "bfloat16")])
def test_dot_into_another_type_family_converts_the_operands(pair):
    """Operands of another family than `preferred_element_type` (quantized products: ui8 x ui8 ->
    i32, i8 x i8 -> f32, bool x bool -> i32): each operand converted to the result type, the
    product computed there, bit for bit as jax.jit (was refused: "mixed element types"). A
    convolution too."""
    low, out = (getattr(jnp, t) for t in pair)
    n = jax.export.symbolic_shape("n")[0]

    def make(b):
        rng = np.random.default_rng(b)
        if pair[0] == "bool":
            return rng.integers(0, 2, (b, 9)).astype(bool), rng.integers(0, 2, (9, 5)).astype(bool)
        info = np.iinfo(low)
        return (rng.integers(info.min, info.max, (b, 9), endpoint=True).astype(low),
                rng.integers(info.min, info.max, (9, 5), endpoint=True).astype(low))
    _run(lambda a, w: jnp.dot(a, w, preferred_element_type=out),
         (jax.ShapeDtypeStruct((n, 9), low), jax.ShapeDtypeStruct((9, 5), low)), make, exact=True)
    if pair == ("int8", "float32"):
        conv = lambda x, k: jax.lax.conv_general_dilated(  # noqa: E731
            x, k, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"), preferred_element_type=out)
        rng = np.random.default_rng(5)
        k = rng.integers(-128, 128, (3, 3, 4)).astype(np.int8)
        _run(conv, (jax.ShapeDtypeStruct((2, n, 3), low), jax.ShapeDtypeStruct(k.shape, low)),
             lambda b: [rng.integers(-128, 128, (2, b, 3)).astype(np.int8), k], exact=True)


def test_f32_dot_to_bf16_result_rounds_once():
    fn = lambda x, w: jax.lax.dot(x, w, preferred_element_type=jnp.bfloat16)  # noqa: E731
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((5, 32)).astype(np.float32), rng.standard_normal((32, 4)).astype(np.float32)
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(w.shape, w.dtype)))
    got, want = exe(x, w), np.asarray(jax.jit(fn)(x, w))
    assert got.dtype == want.dtype == np.dtype(jnp.bfloat16)
    # one rounding of the f32 result: within one bf16 ulp of it
    exact = x.astype(np.float64) @ w.astype(np.float64)
    assert np.all(np.abs(got.astype(np.float64) - exact) <= np.abs(exact) * 2.0 ** -8 + 1e-6)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2 ** -7)



@pytest.mark.parametrize("dt", [jnp.float16, jnp.bfloat16], ids=["f16", "bf16"])
def test_half_precision_sums_accumulate_in_f32(dt):
    """A 16-bit sum (jax.grad's bias gradient, jnp.sum / mean / prod) accumulates in f32 and
    rounds once, as XLA: a 16-bit running sum stopped growing once its ulp passed the terms (12000
    f16 terms of about 1 summed to 4096; helper probe). Equal to jax.jit at 1, 13 and 12000 rows."""
    (n,) = jax.export.symbolic_shape("n")
    fn = lambda b, x: (jax.grad(lambda b: jnp.sum(jnp.sin(x + b).astype(jnp.float32)))(b),  # noqa: E731
                       jnp.sum(x, axis=0), jnp.mean(x, axis=0), jnp.sum(x), jnp.prod(x[:8] * 0.5 + 0.75, axis=0))
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((4,), dt), jax.ShapeDtypeStruct((n, 4), dt)))
    b = np.full((4,), 0.1).astype(dt)
    for rows in (1, 13, 12000):
        x = np.random.default_rng(rows).uniform(0.5, 1.5, (rows, 4)).astype(dt)
        for i, (got, want) in enumerate(zip(exe(b, x), jax.jit(fn)(b, x))):
            got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
            # one rounding of an f32 sum each: within two 16-bit ulps at the result's scale
            np.testing.assert_allclose(got, want, rtol=2 * float(jnp.finfo(dt).eps), err_msg=f"output {i} rows {rows}")


def test_f32_to_bf16_rounds_as_xla_and_keeps_nan_signs():
    """f32 -> bf16 rounds to nearest even and keeps a NaN's sign (set quiet), bit for bit as
    jax.jit, over random bit patterns, ties, the largest finite values, denormals, infinities and
    NaNs of both signs; bf16 arithmetic's NaN (inf - inf) is negative as XLA's on x86 (it was +NaN
    0x7fc0 for every NaN: helper probe). One compile, several sizes."""
    (n,) = jax.export.symbolic_shape("n")
    fn = lambda x: (jax.lax.bitcast_convert_type(x.astype(jnp.bfloat16), jnp.uint16),  # noqa: E731
                    jax.lax.bitcast_convert_type(x.astype(jnp.bfloat16) - x[::-1].astype(jnp.bfloat16), jnp.uint16))
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((n,), jnp.float32)))
    special = np.array([0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000, 0x3F808000, 0x3F818000, 0x3F80FFFF, 0x00000001,
                        0x807FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFBFFFFF,
                        0x00000000, 0x80000000], np.uint32)
    rng = np.random.default_rng(0)
    for size in (1, 7, 16, 100_003):
        random = rng.integers(0, 2**32, size, dtype=np.uint64).astype(np.uint32)
        random |= np.uint32(0x10000000)  # no denormal terms: XLA flushes a denormal difference to zero
        x = np.concatenate([special, random])[:max(size, 16)].view(np.float32)
        for got, want in zip(exe(x), jax.jit(fn)(x)):
            np.testing.assert_array_equal(got, np.asarray(want))
