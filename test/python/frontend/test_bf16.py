"""bf16 end to end on CPU: imported from jax, compiled, called with ml_dtypes arrays (what jax uses
for numpy bf16), compared with jax.jit."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402

BF16 = jnp.bfloat16


def _check(fn, *arrays, rtol=2e-2, atol=2e-2):
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays]
    exe = relax_mlir.compile(from_jax(fn, *specs))
    got = exe(*arrays)
    want = np.asarray(jax.jit(fn)(*arrays))
    assert got.dtype == want.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=rtol, atol=atol)
    return exe


def test_bf16_elementwise_reduce_matmul():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 8)).astype(BF16)
    w = rng.standard_normal((8, 3)).astype(BF16)
    _check(lambda x, w: jnp.tanh(x @ w) + jnp.sum(jnp.exp(x), axis=1, keepdims=True)[:, :1], x, w, rtol=5e-2,
           atol=5e-2)


def test_bf16_convert_round_trip_and_symbolic_dim():
    b = jax.export.symbolic_shape("b")[0]
    fn = lambda x: (x.astype(jnp.float32) * 3.0).astype(BF16)  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((b, 4), BF16)))
    for n in (1, 7):
        x = np.arange(4 * n, dtype=np.float32).reshape(n, 4).astype(BF16)
        np.testing.assert_array_equal(exe(x), np.asarray(jax.jit(fn)(x)))


def test_bf16_wrong_dtype_is_a_value_error():
    exe = _check(lambda x: x + 1, np.ones((2,), BF16))
    with pytest.raises(ValueError, match=r"argument #0 has dtype float32, expected bfloat16 \(bf16\)"):
        exe(np.ones((2,), np.float32))


@pytest.mark.parametrize("name", ["sigmoid", "gelu_tanh", "gelu_erf", "mean_square", "u16_to_bf16_to_f32",
                                  "bf16_product_to_f32", "bf16_product_to_f16", "bf16_product_to_f16_sum"])
def test_bf16_rounding_is_xla_s(name):
    """Chains of bf16 ops round like XLA's CPU backend, bit for bit: each op's result is rounded to
    bf16 (the f32 emulation's `contract` flags would otherwise let consecutive ops skip it), except
    where the program converts an arithmetic result to f32 (computed in f32: XLA's excess
    precision); a conversion to bf16 always rounds."""
    fns = {
        "sigmoid": lambda a: jax.nn.sigmoid(a),
        "gelu_tanh": lambda a: jax.nn.gelu(a, approximate=True),
        "gelu_erf": lambda a: jax.nn.gelu(a, approximate=False),
        "mean_square": lambda a: jnp.mean(jnp.square(a), axis=-1),
        "u16_to_bf16_to_f32": lambda a: jax.lax.bitcast_convert_type(a, jnp.uint16).astype(BF16).astype(jnp.float32),
        "bf16_product_to_f32": lambda a: (a * a).astype(jnp.float32) * 3.0,
        # to f16 the bf16 product rounds first (the conversion is an extf and a truncf here)
        "bf16_product_to_f16": lambda a: (a * 1000.0).astype(jnp.float16),
        "bf16_product_to_f16_sum": lambda a: (a * 3.0).astype(jnp.float16) + a.astype(jnp.float16) * 3.0,
    }
    b = jax.export.symbolic_shape("b")[0]
    exe = relax_mlir.compile(from_jax(fns[name], jax.ShapeDtypeStruct((b, 64), BF16)))
    for n in (1, 13, 64):
        x = (np.random.default_rng(n).standard_normal((n, 64)) * 2).astype(BF16)
        want = np.asarray(jax.jit(fns[name])(x))
        got = exe(x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32), err_msg=f"n={n}")


@pytest.mark.parametrize("cols", [1, 5, 25, 33])
def test_bf16_vectors_that_only_move_values(cols):
    _moves(cols)
    _copies(cols)


def _copies(cols):
    """Kernels that only copy bf16 values (transpose, concat, pad, reverse, gather, strided slice,
    broadcast, sort, scatter, roll, tile): a vector<25xbf16> load and store aborted LLVM's x86
    instruction selection on an AVX-512 CPU; they move i16 vectors now. Exact."""
    (b,) = jax.export.symbolic_shape("b")

    def f(x, i):
        return (x.T, jnp.concatenate([x, x[:, :1], x[:, ::-1]], 1), jnp.pad(x, ((1, 2), (3, 0)), constant_values=BF16(1.5)),
                x[::-1, ::-1], x[:, i[0] % x.shape[1]], x[:, ::3], jnp.broadcast_to(x[:, :1], x.shape), jnp.sort(x, axis=1),
                x.at[:, i % x.shape[1]].set(BF16(3)), jnp.roll(x, 2, axis=1), jnp.tile(x[:, :1], (1, 3)))
    exe = relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((b, cols), BF16), jax.ShapeDtypeStruct((b,), jnp.int32)))
    for n in (1, 3, 9):
        rng = np.random.default_rng(n)
        args = [rng.standard_normal((n, cols)).astype(BF16), rng.integers(0, 100, n).astype(np.int32)]
        for g, w in zip(exe(*args), jax.jit(f)(*args)):
            np.testing.assert_array_equal(np.asarray(g).astype(np.float32), np.asarray(w).astype(np.float32))


def _moves(cols):
    """Broadcasts of bf16 scalars and selects on odd-length bf16 vectors (a clip's bounds read from
    [1, 1] tensors, where / maximum / minimum): x86 LLVM aborted the process on them ("Do not know
    how to soft promote this operator's operand", fuzz seed 2,361,236); they move i16 bits now.
    Exact against jax.jit, symbolic rows from one compile."""
    (b,) = jax.export.symbolic_shape("b")

    def f(x, y):
        s = jax.nn.sigmoid(x)
        t = jnp.broadcast_to(s, (2,) + s.shape).reshape(2, -1)
        return (jnp.clip(t, 0, 6)[:, None], jnp.where(x > 0, x, y), jnp.maximum(x, BF16(0.5)), jnp.minimum(y, x[:1]),
                jnp.where(y < 0, BF16(-1), BF16(2)), jnp.broadcast_to(x[:1, :1], x.shape))
    exe = relax_mlir.compile(from_jax(f, *[jax.ShapeDtypeStruct((b, cols), BF16)] * 2))
    for n in (1, 3, 8):
        rng = np.random.default_rng(n)
        args = [rng.standard_normal((n, cols)).astype(BF16), rng.standard_normal((n, cols)).astype(BF16)]
        for g, w in zip(exe(*args), jax.jit(f)(*args)):
            np.testing.assert_array_equal(np.asarray(g).astype(np.float32), np.asarray(w).astype(np.float32))



def _fma_matmul(a, b):
    """a @ b in f32, each step of the k loop one fused multiply-add (the f32 product of two f32,
    f16 or bf16 values is exact in f64, one rounding to f32 per step), rounded to a's type."""
    a64, b64 = a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(a.shape[1]):
            acc = (a64[:, k:k + 1] * b64[k:k + 1, :] + acc).astype(np.float32)
    return acc.astype(a.dtype)


_BIG = {np.float16: 300.0}  # a product beyond the type's range; 1e30 for f32 and bf16


def _special(rng, shape, dtype, with_inf):
    big = _BIG.get(dtype, 1e30)
    values = [big, -big, np.inf, -np.inf, 1.0] if with_inf else [big, -big, 1.0, 0.5]
    return rng.choice(values, size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.float16], ids=["f32", "bf16", "f16"])
def test_matmul_accumulates_with_fused_multiply_adds(dtype):
    """A dot accumulates in f32 in k order, each step a fused multiply-add (f16/bf16 operands
    computed in f32), as XLA's CPU dot: a product overflowing f32 (1e30 * -1e30) next to an
    infinite partial sum keeps the infinity (rounding the product first gave inf - inf = NaN:
    differential fuzz seed 2,355,453, a [33, 33] bf16 `x @ x`). Bit for bit against the FMA
    order, NaN equal to NaN, at M = 1, 3, 33 and 64 from one compile (jax dims are >= 1)."""
    m = jax.export.symbolic_shape("m")[0]
    fn = lambda a, b: a @ b  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((m, 33), dtype), jax.ShapeDtypeStruct((33, 9), dtype)))
    for seed, rows in enumerate((1, 3, 33, 64)):
        rng = np.random.default_rng(seed)
        a, b = _special(rng, (rows, 33), dtype, True), _special(rng, (33, 9), dtype, False)
        got = np.asarray(exe(a, b))
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got.astype(np.float32), _fma_matmul(a, b).astype(np.float32))
    a = np.array([[1e30, 1e30]], dtype)
    b = np.array([[-1e30], [1e30]], dtype)
    if dtype != np.float16:  # jax.jit's own answer on the smallest case: -inf (separate products: NaN)
        small = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((1, 2), dtype), jax.ShapeDtypeStruct((2, 1), dtype)))
        np.testing.assert_array_equal(np.asarray(small(a, b)).astype(np.float32),
                                      np.asarray(jax.jit(fn)(a, b)).astype(np.float32))


_CONVS = {
    "conv2d": (lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "SAME"), ("m", 3, 6, 5), (4, 3, 3, 2)),
    "conv1d_grouped_dilated": (lambda x, w: jax.lax.conv_general_dilated(x, w, (1,), "VALID", rhs_dilation=(2,),
                                                                         feature_group_count=2), ("m", 4, 11), (6, 2, 3)),
}


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.float16], ids=["f32", "bf16", "f16"])
@pytest.mark.parametrize("name", sorted(_CONVS))
def test_convolution_accumulates_like_xla(name, dtype):
    """A convolution accumulates over the window positions, then the channels innermost, each
    step a fused multiply-add (XLA's convolution: an FMA dot of channels-minor patches), so
    which infinity or NaN an overflowing product next to an infinity gives is XLA's. Bit for
    bit against jax.jit at batch sizes 1, 3 and 8 from one compile."""
    fn, xs, ws = _CONVS[name]
    m = jax.export.symbolic_shape("m")[0]
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct(tuple(m if d == "m" else d for d in xs), dtype),
                                      jax.ShapeDtypeStruct(ws, dtype)))
    for seed, batch in enumerate((1, 3, 8)):
        rng = np.random.default_rng(seed)
        x, w = _special(rng, (batch, *xs[1:]), dtype, True), _special(rng, ws, dtype, False)
        got, want = np.asarray(exe(x, w)), np.asarray(jax.jit(fn)(x, w))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


@pytest.mark.parametrize("name", ["round", "round_decimals", "to_int32", "to_uint8", "sqrt_of_square"])
def test_ops_computed_in_f32_read_the_rounded_bf16_operand(name):
    """An op that computes bf16 in f32 inside its kernel (round, float -> int conversions, sqrt)
    reads its operand rounded to bf16 as XLA's upcast does: round(x * 10) of bf16 rounds x * 10
    to bf16 first (-4.0625 * 10 = -40.625 -> -40.5 -> -40; it was -41), and (x * 10).astype(i32)
    truncates the bf16 product (319 of 2000 values differed). Only the program's own conversion
    to f32 computes the product in f32 (XLA's excess precision). Bit for bit against jax.jit at
    n = 1, 7, 2000 from one compile."""
    fns = {"round": lambda x: jnp.round(x * 10), "round_decimals": lambda x: jnp.round(x, 1),
           "to_int32": lambda x: (x * 10).astype(jnp.int32), "to_uint8": lambda x: (jnp.abs(x) * 10).astype(jnp.uint8),
           "sqrt_of_square": lambda x: jnp.sqrt(x * x)}
    fn = fns[name]
    (n,) = jax.export.symbolic_shape("n")
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((n,), BF16)))
    for k in (1, 7, 2000):
        x = (np.random.default_rng(k).standard_normal(k) * 8).astype(BF16)
        x[0] = -4.0625
        got, want = np.asarray(exe(x)), np.asarray(jax.jit(fn)(x))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64), err_msg=f"n={k}")


def test_dot_operand_computed_in_bf16_stays_rounded():
    """dot(h, w * s) of bf16 values with an f32 result (int8-style dequantization): the product
    w * s is a bf16 value, rounded before the dot widens it to f32 (XLA's upcast); the widening
    is the compiler's (relax.astype internal), so the excess-precision fold that keeps a program's
    own conversion to f32 unrounded does not apply (was off by bf16 rounding, 0.023 of 18.7).
    XLA itself keeps the product unrounded for a single row (its matrix-vector fusion): compared
    with jax.jit from two rows on, with the rounded product's exact dot at every size."""
    fn = lambda h, w, s: jnp.dot(h, w * s, preferred_element_type=jnp.float32)  # noqa: E731
    (n,) = jax.export.symbolic_shape("n")
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((n, 32), BF16), jax.ShapeDtypeStruct((32, 8), BF16),
                                      jax.ShapeDtypeStruct((8,), BF16)))
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (32, 8)).astype(np.float32).astype(BF16)
    s = rng.uniform(0.005, 0.02, (8,)).astype(BF16)
    for k in (1, 4, 33):
        h = rng.standard_normal((k, 32)).astype(BF16)
        want = np.asarray(jax.jit(fn)(h, w, s))
        rounded = h.astype(np.float64) @ (w * s).astype(np.float64)  # the product rounded to bf16
        got = np.asarray(exe(h, w, s))
        if k > 1:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"n={k}")
        np.testing.assert_allclose(got, rounded, rtol=1e-5, atol=1e-5, err_msg=f"n={k}")
