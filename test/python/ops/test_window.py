"""relax.reduce_window through jax: pooling (max / avg / min, strides, padding, base and window
dilation), cumulative sums/max/min/prod (reduce_window at static shapes, the custom call
@stablehlo.dynamic_reduce_window at symbolic ones), each exported with symbolic dims, compiled
ONCE and compared with jax.jit at several bindings; NaN, -inf, integers, empty windows, padding
larger than the input, and the located refusals."""
from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402
from relax_mlir.frontend.stablehlo import UnsupportedOpError  # noqa: E402

import jaxcheck  # noqa: E402
from jaxcheck import spec as S  # noqa: E402

B, N = jax.export.symbolic_shape("b, n")
rng = np.random.default_rng(16)
rnd = functools.partial(jaxcheck.rand, rng, ints=(-50, 50))


check = functools.partial(jaxcheck.check, sizes=(1, 7, 33), rtol=1e-5, atol=1e-5)


def pool(op, init, window, strides, padding, base=None, wdil=None):
    return lambda x: lax.reduce_window(x, init, op, window, strides, padding, base, wdil)


# (name, fn, spec shape, arg shape of n): NHWC pools at symbolic batch and spatial dims
POOLS = [
    ("max_3x3_s2_pad1", pool(lax.max, -jnp.inf, (1, 3, 3, 1), (1, 2, 2, 1), [(0, 0), (1, 1), (1, 1), (0, 0)]),
     (B, N, N, 3), lambda n: (2, n, n, 3)),
    ("max_2x2_valid", pool(lax.max, -jnp.inf, (1, 2, 2, 1), (1, 2, 2, 1), [(0, 0)] * 4),
     (B, N, 5, 2), lambda n: (3, n + 1, 5, 2)),
    ("min_window_dilation", pool(lax.min, jnp.inf, (1, 2, 3), (1, 1, 2), [(0, 0), (2, 1), (0, 3)], None, (1, 2, 2)),
     (B, N, 6), lambda n: (2, n, 6)),
    ("sum_base_dilation", pool(lax.add, 0.0, (1, 3), (1, 1), [(0, 0), (1, 2)], (1, 2)),
     (B, N), lambda n: (3, n)),
    ("max_negative_padding", pool(lax.max, -jnp.inf, (1, 2), (1, 1), [(0, 0), (-1, 2)]),
     (B, N), lambda n: (2, n + 1)),
    ("max_padding_larger_than_input", pool(lax.max, -jnp.inf, (1, 2), (1, 3), [(0, 0), (5, 7)]),
     (B, N), lambda n: (2, n)),
    ("sum_window_larger_than_input", pool(lax.add, 0.0, (1, 5), (1, 1), [(0, 0), (0, 0)]),
     (B, N), lambda n: (2, n)),  # n = 1: no window fits, an empty result
    ("max_windows_only_in_padding", pool(lax.max, -jnp.inf, (1, 1), (1, 1), [(0, 0), (3, 2)]),
     (B, N), lambda n: (2, n)),
    ("max_non_identity_init", pool(lax.max, 0.25, (2, 2), (1, 1), [(1, 0), (0, 1)]),
     (N, 5), lambda n: (n, 5)),
    ("sum_non_identity_init_unpadded", pool(lax.add, 1.5, (1, 3), (1, 2), [(0, 0), (0, 0)]),
     (B, 9), lambda n: (n, 9)),
]


@pytest.mark.parametrize("name, fn, spec, shape", POOLS, ids=[p[0] for p in POOLS])
def test_pool_matches_jax(name, fn, spec, shape):
    check(fn, [S(spec)], lambda n: [rnd(shape(n))])


def test_max_pool_propagates_nan_and_inf():
    fn = pool(lax.max, -jnp.inf, (1, 3), (1, 1), [(0, 0), (1, 1)])

    def args(n):
        x = rnd((3, n))
        x[0, 0] = np.nan
        x[1, :] = -np.inf
        x[2, n // 2] = np.inf
        return [x]
    check(fn, [S((3, N))], args)


@pytest.mark.parametrize("dt, op, init", [(np.int32, lax.max, -2 ** 31), (np.int32, lax.min, 2 ** 31 - 1),
                                          (np.int32, lax.add, 0), (np.int8, lax.max, -128)])
def test_integer_pool(dt, op, init):
    fn = pool(op, np.array(init, dt), (1, 2, 2), (1, 2, 1), [(0, 0), (0, 1), (1, 1)])
    check(fn, [S((B, N, 4), dt)], lambda n: [rnd((2, n, 4), dt)])


def test_avg_pool_count_include_pad_both_ways():
    """flax's avg_pool: the window sum over the padded window size (count_include_pad=True) or
    over the number of real elements (a reduce_window of ones, count_include_pad=False)."""
    win, st, pad = (1, 3, 3, 1), (1, 2, 2, 1), [(0, 0), (1, 1), (1, 1), (0, 0)]

    def avg(x):
        s = lax.reduce_window(x, 0.0, lax.add, win, st, pad)
        cnt = lax.reduce_window(jnp.ones_like(x), 0.0, lax.add, win, st, pad)
        return s / 9.0, s / cnt
    mod = from_jax(avg, S((B, N, N, 2)))
    exe = relax_mlir.compile(mod)
    for n in (1, 7, 20):
        x = rnd((2, n, n, 2))
        for g, w in zip(exe(x), jax.jit(avg)(x)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def test_pooled_counts_broadcast_over_batch_and_channels():
    """flax's avg_pool(count_include_pad=False) counts the real elements of each window on a
    [1, H, W, 1] plane of ones and broadcasts the counts to [B, H', W', C]: the counts' pooled
    dims must be known symbolically when the broadcast is imported (they were '?': 'shape has
    an unknown dim'), on dims given as expressions of a symbol."""
    (b, h) = jax.export.symbolic_shape("b, h")
    cases = [((1, 3, 3, 1), (1, 1, 1, 1), [(0, 0), (1, 1), (1, 1), (0, 0)]),
             ((1, 2, 3, 1), (1, 3, 2, 1), [(0, 0), (1, 0), (2, 1), (0, 0)])]

    def avg(x):
        out = []
        for win, st, pad in cases:
            s = lax.reduce_window(x, 0.0, lax.add, win, st, pad)
            ones = jnp.ones((1,) + x.shape[1:3] + (1,), x.dtype)
            out.append(s / lax.reduce_window(ones, 0.0, lax.add, win, st, pad))
        return out
    exe = relax_mlir.compile(from_jax(avg, jax.ShapeDtypeStruct((b, h + 4, h + 4, 3), np.float32)))
    for n in (1, 2, 13):
        x = rnd((n % 3 + 1, n + 4, n + 4, 3))
        for g, w in zip(exe(x), jax.jit(avg)(x)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def test_flax_avg_pool_without_padding_counts():
    nn = pytest.importorskip("flax.linen")
    (b, h) = jax.export.symbolic_shape("b, h")

    def f(x):
        return (nn.avg_pool(x, (3, 3), strides=(1, 1), padding="SAME", count_include_pad=False),
                nn.avg_pool(x, (3, 3), strides=(2, 2), padding="SAME"))
    exe = relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((b, h, h, 2), np.float32)))
    for n in (1, 5, 16):
        x = rnd((2, n, n, 2))
        for g, w in zip(exe(x), jax.jit(f)(x)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def test_global_pool_with_symbolic_window_and_strides():
    """Global pooling over a symbolic image size (a ResNet head: flax `avg_pool(x, (h, w),
    strides=(h, w))`, max too): the strides are symbolic, but the window covers the whole axis, so
    there is one window position whatever they are. A symbolic stride elsewhere stays refused."""
    nn = pytest.importorskip("flax.linen")
    (b, h) = jax.export.symbolic_shape("b, h")

    def f(x):
        hw = (x.shape[1], x.shape[2])
        return nn.avg_pool(x, hw, strides=hw), nn.max_pool(x + 1.0, hw, strides=hw)
    exe = relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((b, h + 2, h, 3), np.float32)))
    for n in (1, 5, 16):
        x = rnd((2, n + 2, n, 3))
        for g, w in zip(exe(x), jax.jit(f)(x)):
            assert g.shape == w.shape == (2, 1, 1, 3)
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)

    def g(x):  # windows of 2 at a stride of h: not one position
        return nn.max_pool(x, (2,), strides=(x.shape[1],))
    with pytest.raises(UnsupportedOpError, match="symbolic window strides"):
        from_jax(g, jax.ShapeDtypeStruct((b, 2 * h, 3), np.float32))


CUMULATIVE = [(lax.cumsum, np.float32), (lax.cummax, np.float32), (lax.cummin, np.float32),
              (lax.cumprod, np.float32), (lax.cumsum, np.int32), (lax.cummax, np.int32)]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("op, dt", CUMULATIVE, ids=[f"{o.__name__}-{d.__name__}" for o, d in CUMULATIVE])
def test_cumulative_symbolic(op, dt, reverse):
    """Symbolic length: jax exports @stablehlo.dynamic_reduce_window with a window of n."""
    text = check(lambda x: op(x, axis=1, reverse=reverse), [S((B, N), dt)],
                 lambda n: [rnd((3, n), dt) if op is not lax.cumprod else (1 + 0.1 * rnd((3, n))).astype(dt)],
                 rtol=1e-4).text
    assert '"relax.reduce_window"' in text and 'window = [1, "n"]' in text


@pytest.mark.parametrize("shape", [(None, 0), (0, None), (0, 3)])
@pytest.mark.parametrize("op", [lax.cumsum, lax.cummax, lax.cumprod])
def test_cumulative_of_zero_size(shape, op):
    """A scan over a tensor with a static 0 dim (along the axis or beside it) is empty; it was an
    internal error (fuzz seed 2310276: lax.cummax of [n, 0] int8: a slice of the 0 dim)."""
    (n,) = jax.export.symbolic_shape("n")
    spec = jax.ShapeDtypeStruct(tuple(n if d is None else d for d in shape), np.int8)

    def f(x):
        return op(x, axis=0), op(x, axis=1, reverse=True)
    exe = relax_mlir.compile(from_jax(f, spec))
    for k in (1, 5):
        x = np.ones(tuple(k if d is None else d for d in shape), np.int8)
        for g, w in zip(exe(x), jax.jit(f)(x)):
            assert g.shape == w.shape and g.dtype == w.dtype


@pytest.mark.parametrize("axis", [1, 2, 3])
def test_cumulative_beside_static_unit_dims(axis):
    """A scan along one symbolic dim of a tensor with other dims of 1 (static and symbolic): each
    step's slice was rank-reducing, which MLIR's memref folds cannot disambiguate; the canonicalizer
    aborted the process after bufferization (fuzz seed 2340491: lax.cumsum of [1, n-1, n, n] int64
    along axis 2, broadcast from a product; here axis 2 of x)."""
    (n,) = jax.export.symbolic_shape("n")

    def f(x, y):
        return lax.cumsum(x, axis=axis), lax.cummax(y, axis=axis, reverse=True)
    specs = [jax.ShapeDtypeStruct((1, n, n, n), np.int32), jax.ShapeDtypeStruct((1, n, 1, n), np.float32)]
    exe = relax_mlir.compile(from_jax(f, *specs))
    for k in (1, 7, 23):
        x, y = rnd((1, k, k, k), np.int32), rnd((1, k, 1, k))
        for g, w in zip(exe(x, y), jax.jit(f)(x, y)):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_static_and_jnp(reverse):
    check(lambda x: lax.cumsum(x, axis=0, reverse=reverse), [S((11, 3))], lambda n: [rnd((11, 3))], sizes=(None,))
    check(lambda x: jnp.cumsum(x, axis=-1), [S((B, 6))], lambda n: [rnd((n, 6))])


def test_cumsum_nan():
    def args(n):
        x = rnd((2, n))
        x[0, 0] = np.nan
        return [x]
    check(lambda x: jnp.cumsum(x, axis=1), [S((2, N))], args)


@pytest.mark.parametrize("reverse", [False, True])
def test_cumlogsumexp_and_logaddexp_windows(reverse):
    """lax.cumlogsumexp (a reduce_window whose body is jax's logaddexp) and a logaddexp pool:
    NaN, +-Inf and a row of -inf (logaddexp(-inf, -inf) = -inf, not NaN) as jax has them."""
    def args(n):
        x = rnd((3, n)) * 5
        x[2, :] = -np.inf
        if n > 4:
            x[0, 2], x[1, 1], x[1, 3] = np.nan, -np.inf, np.inf
        return [x]
    text = check(lambda x: (lax.cumlogsumexp(x, axis=1, reverse=reverse), lax.cumlogsumexp(x, axis=0),
                            lax.reduce_window(x, -jnp.inf, jnp.logaddexp, (1, 3), (1, 1), "SAME")),
                 [S((B, N))], args, sizes=(1, 7, 300)).text
    assert 'kind = "logaddexp"' in text


def test_cumlogsumexp_half_precision_is_at_least_as_accurate_as_jax():
    """f16: the running value stays f32 (each output rounded once), jax rounds every step; both
    against float64's logaddexp.accumulate."""
    fn = lambda x: lax.cumlogsumexp(x, axis=1)  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, S((B, N), np.float16)))
    for n in (1, 7, 300):
        x = (rnd((3, n)) * 3).astype(np.float16)
        exact = np.logaddexp.accumulate(x.astype(np.float64), axis=1)
        ours = np.abs(exe(x).astype(np.float64) - exact).max()
        theirs = np.abs(np.asarray(jax.jit(fn)(x)).astype(np.float64) - exact).max()
        assert ours <= max(theirs, 2 ** -10 * np.abs(exact).max()), (n, ours, theirs)


def test_symbolic_output_dim_is_deduced():
    text = check(pool(lax.max, -jnp.inf, (1, 3), (1, 2), [(0, 0), (1, 1)]), [S((B, N))],
                 lambda n: [rnd((2, n))]).text
    assert '!relax.tensor<["b", "floordiv(n + 1, 2)"], f32>' in text


def test_sum_with_non_identity_init_and_padding_is_refused():
    fn = pool(lax.add, 1.0, (1, 3), (1, 1), [(0, 0), (1, 1)])
    with pytest.raises(UnsupportedOpError, match="non-identity init value and padding"):
        from_jax(fn, S((B, N)))


def _argmax_pool(x):
    idx = lax.broadcasted_iota(jnp.int32, x.shape, 1)

    def red(a, b):
        pick = a[0] >= b[0]
        return lax.select(pick, a[0], b[0]), lax.select(pick, a[1], b[1])
    return lax.reduce_window((x, idx), (-jnp.inf, 0), red, (1, 2), (1, 2), "VALID")[1]


def _ties_and_specials(shape, dt=np.float32):
    """Values in halves (ties inside a window), a NaN and -inf where the array is large enough."""
    x = np.round(rng.standard_normal(shape) * 2).astype(dt) / 2
    if x.size > 6:
        x.flat[2], x.flat[3], x.flat[5] = np.nan, -np.inf, np.inf
    return x


def test_variadic_argmax_pool():
    """A variadic reduce_window (values, positions) with a select body: the position of each
    window's maximum, the first of ties, unrolled over the window as XLA evaluates it."""
    check(_argmax_pool, [S((B, 2 * N))], lambda n: [_ties_and_specials((3, 2 * n))])


def _jvp(f):
    return lambda x, t: jax.jvp(f, (x,), (t,))


# forward-mode derivatives of pools: jax writes the jvp of a max / min pool as a variadic
# reduce_window selecting each window's tangent with its value, that of a pool written with
# lax.reduce_window's generic form (an array init) as the jvp of its body (min's: a tie's tangents
# averaged, with constants of the enclosing function inside the body)
JVP_POOLS = [
    ("max_2x3_pad", pool(lax.max, -jnp.inf, (2, 3), (1, 2), [(0, 1), (1, 1)]), True),
    ("min_3x1_s2", pool(lax.min, jnp.inf, (3, 1), (2, 1), [(1, 1), (0, 0)]), True),
    ("max_dilated", pool(lax.max, -jnp.inf, (2, 2), (1, 1), [(1, 1), (0, 1)], (2, 1), (1, 2)), True),
    ("generic_min", lambda x: lax.reduce_window(x, jnp.asarray(jnp.inf, x.dtype), lax.min, (1, 3), (1, 2),
                                                ((0, 0), (0, 1))), True),
    ("generic_sum", lambda x: lax.reduce_window(x, jnp.asarray(0, x.dtype), lax.add, (2, 2), (1, 1),
                                                ((1, 0), (0, 1))), False),
]


@pytest.mark.parametrize("name, fn, exact", JVP_POOLS, ids=[p[0] for p in JVP_POOLS])
@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
def test_forward_mode_derivative_of_pools(name, fn, exact, dt):
    """Primal and tangent of each pool at symbolic sizes 1, 7, 33 (one compile): bit for bit where
    the pool selects (ties, NaN, -inf and +inf included), within rounding where it adds."""
    g = _jvp(fn)
    with jax.enable_x64(dt == np.float64):
        _check_jvp(name, g, exact, dt)


def _check_jvp(name, g, exact, dt):
    exe = relax_mlir.compile(from_jax(g, S((B, N), dt), S((B, N), dt)))
    for n in (1, 7, 33):
        x, t = _ties_and_specials((1 + n % 4, n), dt), rng.standard_normal((1 + n % 4, n)).astype(dt)
        for got, want in zip(exe(x, t), jax.jit(g)(x, t)):
            if exact:
                jaxcheck.same(np.asarray(want), np.asarray(got), f"{name} n={n}")
            else:
                np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-6, atol=1e-6, err_msg=f"{name} n={n}")


def test_hessian_vector_product_through_max_pool():
    """Forward over reverse (a Hessian-vector product) of a loss through a max pool: the jvp of
    select_and_scatter's gradient and of the pool."""
    def loss(x):
        return jnp.sum(jnp.tanh(pool(lax.max, -jnp.inf, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")(x)) ** 2)

    def hvp(x, v):
        return jax.jvp(jax.grad(loss), (x,), (v,))[1]
    check(hvp, [S((B, 2 * N, 2 * N, 3)), S((B, 2 * N, 2 * N, 3))],
          lambda n: [rnd((2, 2 * n, 2 * n, 3)), rnd((2, 2 * n, 2 * n, 3))])


def test_gradient_of_a_pool_whose_windows_may_not_fit():
    """jax.grad of a 3-wide, stride-2 max pool over a symbolic n (no window at n = 1, 2): the
    window slices' deduced extents could not be proven equal to the window positions (a compile
    error before); n = 1 .. 8 from one compile, against jax.jit."""
    def loss(x):
        return jnp.sum(jnp.sin(lax.reduce_window(x, -jnp.inf, lax.max, (3,), (2,), "VALID")))
    check(jax.grad(loss), [S((N,))], lambda n: [rnd((n,))], sizes=range(1, 9))


def test_variadic_reduce_window_refusals_are_located():
    def big(x):  # 9 x 9 = 81 window elements: more than are unrolled
        return jax.jvp(pool(lax.max, -jnp.inf, (9, 9), (1, 1), "VALID"), (x,), (x,))[1]
    with pytest.raises(UnsupportedOpError, match="variadic reduce_window: a window of 81 elements"):
        from_jax(big, S((16, 16)))

    def body_exp(x):
        idx = lax.broadcasted_iota(jnp.float32, x.shape, 1)
        return lax.reduce_window((x, idx), (0.0, 0.0), lambda a, b: (a[0] + jnp.exp(b[0]), a[1] + b[1]),
                                 (1, 2), (1, 1), "VALID")[0]
    with pytest.raises(UnsupportedOpError, match="'stablehlo.exponential'"):
        from_jax(body_exp, S((2, 8)))


def test_cumulative_large_binding():
    """The O(n) scan at a large length, forward and reversed."""
    fn = lambda x: (jnp.cumsum(x, axis=1), lax.cummax(x, axis=1, reverse=True))  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, S((B, N))))
    for n in (1, 2003):
        x = rnd((2, n))
        for g, w in zip(exe(x), jax.jit(fn)(x)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-3)


def test_float_cumsum_is_accurate_along_long_axes():
    """A float running sum carries Kahan's compensation: every prefix of 2^20 values within 2e-7
    of the exact sum (a plain f32 running sum drifted to 1.1e-5; XLA's is 2.7e-7 here), reversed
    too, and infinities / NaN still propagate as jax's do."""
    fn = lambda x: (jnp.cumsum(x), lax.cumsum(x, reverse=True))  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, S((N,))))
    rng = np.random.default_rng(5)
    for n in (1, 7, 2**20 + 3):
        x = rng.random(n).astype(np.float32)
        fwd, rev = (np.asarray(v, np.float64) for v in exe(x))
        exact = np.cumsum(x.astype(np.float64))
        assert np.max(np.abs(fwd - exact) / exact) < 2e-7, n
        exact_rev = np.cumsum(x[::-1].astype(np.float64))[::-1]
        assert np.max(np.abs(rev - exact_rev) / exact_rev) < 2e-7, n
    for x in ([1, np.inf, 2, -np.inf, 3], [1, np.nan, 2], [np.inf, 1e38, 1e38], [3e38, 3e38, 1]):
        x = np.array(x, np.float32)
        with np.errstate(all="ignore"):
            for g, w in zip(exe(x), jax.jit(fn)(x)):
                np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def T(dims, dt="f32") -> str:
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + f"], {dt}>"


def window_src(attrs: str, dims=("n", 8), dt="f32") -> str:
    rt = T(["?"] * len(dims), dt)
    return (f"func.func @main(%x: {T(dims, dt)}) -> {rt} {{\n"
            f'  %0 = "relax.reduce_window"(%x) {{{attrs}}} : ({T(dims, dt)}) -> {rt}\n'
            f"  return %0 : {rt}\n}}\n")


@pytest.mark.parametrize("attrs, msg", [
    ('kind = "avg", window = [1, 2]', "kind must be one of sum, max, min, prod"),
    ('kind = "max", window = [2]', "attribute 'window' has 1 elements, expected 2"),
    ('kind = "max", window = [1, -1]', "window dims must be >= 0"),
    ('kind = "max", window = [1, 2], strides = [1, 0]', "'strides' must hold integers >= 1"),
    ('kind = "max", window = [1, 2], pad_lo = [0, -9]', "leaves a negative size"),
    ('kind = "max", window = [1, "q"]', "symbol 'q', which is not bound"),
])
def test_reduce_window_bad_attributes_are_located(attrs, msg):
    with pytest.raises(relax_mlir.CompileError, match=r"<string>:2:8: error: 'relax.reduce_window' op .*" + msg):
        relax_mlir.compile(window_src(attrs))


def test_reduce_window_sum_of_booleans_is_refused():
    with pytest.raises(relax_mlir.CompileError, match="cannot sum booleans"):
        relax_mlir.compile(window_src('kind = "sum", window = [1, 2]', dt="i1"))


@pytest.mark.parametrize("op, init", [(lax.bitwise_or, False), (lax.bitwise_and, True)])
def test_boolean_pool(op, init):
    """On i1, or is max and and is min (padding holds the identity: false / true)."""
    fn = pool(op, init, (1, 2), (1, 1), [(0, 0), (1, 0)])
    check(fn, [S((B, N), jnp.bool_)], lambda n: [rng.standard_normal((3, n)) > (1 if init is False else -1)])


def _gpu_programs():
    u = T(["?", "?", "?"])
    x = T(["b", "n", 4])
    return {
        "pool": (f"func.func @main(%x: {x}) -> {u} {{\n"
                 f'  %r = "relax.reduce_window"(%x) {{kind = "max", window = [1, 3, 1], strides = [1, 2, 1], '
                 f"pad_lo = [0, 1, 0], pad_hi = [0, 1, 0]}} : ({x}) -> {u}\n  return %r : {u}\n}}"),
        "cumulative": (f"func.func @main(%x: {x}) -> {u} {{\n"
                       f'  %r = "relax.reduce_window"(%x) {{kind = "sum", window = [1, "n", 1], '
                       f'pad_lo = [0, "n - 1", 0], pad_hi = [0, 0, 0]}} : ({x}) -> {u}\n  return %r : {u}\n}}'),
        "conv": (f"func.func @main(%x: {T(['b', 4, 'n'])}, %w: {T([6, 2, 3])}) -> {u} {{\n"
                 f'  %r = "relax.conv"(%x, %w) {{feature_group_count = 2, pad_lo = [1], pad_hi = [1]}} : '
                 f"({T(['b', 4, 'n'])}, {T([6, 2, 3])}) -> {u}\n  return %r : {u}\n}}"),
    }


@pytest.mark.parametrize("name", ["pool", "cumulative", "conv"])
def test_window_kernels_lower_to_ptx(name):
    """The GPU backend maps the window, scan and conv kernels to gpu.func kernels and PTX."""
    from relax_mlir.backend import gpu

    m = relax_mlir.run_passes(relax_mlir.parse(_gpu_programs()[name]),
                              ["relax-infer-shapes", "relax-legalize", "relax-lower-shapes", "relax-to-upstream"])
    with m.context:
        gpu.lower(m.op, gpu.GPUOptions())
        ptx = gpu.ptx_of(m.op)
    assert ptx
    for kname, text in ptx.items():
        assert ".entry" in text and ".target sm_90" in text, kname


@pytest.mark.parametrize("kind, op, init", [("max", lax.max, -np.inf), ("sum", lax.add, 0.0)])
def test_zero_size_dims_from_relax_text(kind, op, init):
    """A symbol that may be 0 (relax text, no lower bound): one compile, n = 0, 1, a prime."""
    exe = relax_mlir.compile(window_src(f'kind = "{kind}", window = [2, 3], strides = [1, 2], '
                                        f"pad_lo = [1, 1], pad_hi = [0, 1]", dims=("n", 8)))
    for n in (0, 1, 5):
        x = rnd((n, 8))
        want = lax.reduce_window(x, np.float32(init), op, (2, 3), (1, 2), [(1, 0), (1, 1)])
        got = exe(x)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dt", [jnp.float16, jnp.bfloat16], ids=["f16", "bf16"])
def test_half_cumsum_is_rounded_once(dt):
    """f16/bf16 cumsum accumulates in f32 and rounds each prefix once: within an ulp of the exact
    prefix sums (an f16 running sum drifts by many ulps over 300 terms)."""
    fn = lambda x: jnp.cumsum(x, axis=1)  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, S((B, N), dt)))
    for n in (1, 300):
        x = np.asarray(jnp.asarray(rnd((2, n)), dt))
        got = np.asarray(exe(x))
        assert got.dtype == x.dtype
        exact = np.cumsum(x.astype(np.float64), axis=1)
        eps = 2.0 ** (-10 if dt == jnp.float16 else -7)
        ulp = 2.0 ** np.floor(np.log2(np.maximum(np.abs(exact), 2.0 ** -14))) * eps
        err = np.abs(got.astype(np.float64) - exact)
        assert np.all(err <= ulp), (n, float((err / ulp).max()))


def test_scalar_reduce_window():
    """Rank 0: no window dims, the result is the operand combined with the init."""
    check(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (), (), ()), [S(())], lambda n: [rnd(())], sizes=(None,))


def test_cumulative_on_vulkan_from_one_compile():
    """The O(n) scan kernel walks strided views of its buffers; on Vulkan its loads and stores
    are folded into the identity-layout buffers (was refused: "non-identity layout")."""
    import os
    import subprocess
    import sys

    from toolchecks import vulkan_adapter

    if not vulkan_adapter():
        pytest.skip("no Vulkan adapter (wgpu with lavapipe or a GPU driver)")
    code = """
import jax, jax.numpy as jnp, numpy as np
from jax import lax
import relax_mlir
from relax_mlir.frontend.jax import from_jax
n, = jax.export.symbolic_shape('n')
rng = np.random.default_rng(0)
cases = [("cumsum", lax.cumsum, np.float32, np.cumsum), ("cummax", lax.cummax, np.float32, np.maximum.accumulate),
         ("cumprod", lax.cumprod, np.float32, np.cumprod), ("cumsum_i32", lax.cumsum, np.int32, np.cumsum)]
for name, op, dt, ref in cases:
    for reverse in (False, True):
        spec = jax.ShapeDtypeStruct((3, n), dt)
        exe = relax_mlir.compile(from_jax(lambda x: op(x, axis=1, reverse=reverse), spec), target="vulkan")
        for k in (1, 7, 300):
            x = (1 + 0.01 * rng.standard_normal((3, k))).astype(dt) if name == "cumprod" else \\
                (rng.integers(-50, 50, (3, k)) if dt == np.int32 else rng.standard_normal((3, k))).astype(dt)
            want = ref(x[:, ::-1], axis=1)[:, ::-1] if reverse else ref(x, axis=1)
            got = np.asarray(exe(x))
            ok = np.array_equal(got, want) if dt == np.int32 else np.allclose(got, want, rtol=1e-4, atol=1e-4)
            print(name, reverse, k, "OK" if ok else f"BAD {np.abs(got - want).max()}")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")})
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.split()[:1] and ln.split()[0].startswith("cum")]
    assert len(lines) == 4 * 2 * 3, r.stdout
    assert all(ln.endswith("OK") for ln in lines), r.stdout


def _pool_grad(pool, loss=lambda y: jnp.sum(jnp.sin(y))):
    return lambda x: jax.grad(lambda x: loss(pool(x)))(x)


# (name, fn of x, spec shape, arg shape of n): gradients of max / min pooling, whose transpose is
# stablehlo.select_and_scatter (windows overlapping or not, padding, ties and NaN in the inputs)
SELECT_AND_SCATTER = [
    ("max_2x2", _pool_grad(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                                         "VALID"), lambda y: jnp.sum(y ** 2)),
     (B, 6, 7, 3), lambda n: (n, 6, 7, 3)),
    ("max_3x3_s2_same", _pool_grad(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1),
                                                                 "SAME")),
     (B, 7, 5, 2), lambda n: (n, 7, 5, 2)),
    ("max_1d_overlapping_symbolic", _pool_grad(
        lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 1), (1, 1, 1), [(0, 0), (1, 1), (0, 0)]),
        lambda y: jnp.sum(y * jnp.arange(y.shape[1])[None, :, None])),
     (B, N, 2), lambda n: (2, n, 2)),
    ("min_2x3_s12_same", _pool_grad(lambda x: lax.reduce_window(x, jnp.inf, lax.min, (1, 2, 3, 1), (1, 1, 2, 1),
                                                                  "SAME")),
     (B, 4, 5, 1), lambda n: (n, 4, 5, 1)),
]


@pytest.mark.parametrize("name, fn, spec, shape", SELECT_AND_SCATTER, ids=[c[0] for c in SELECT_AND_SCATTER])
def test_select_and_scatter_matches_jax(name, fn, spec, shape):
    """select_and_scatter (max / min pooling's gradient), compiled once, at several sizes: the
    element each window selects (the first of ties; StableHLO's order around NaN) gets the
    source, overlapping windows add up, padding is never selected."""
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct(spec, np.float32)))
    for n in (1, 5, 16):
        x = rnd(shape(n)).astype(np.float32)
        x.reshape(-1)[1::7] = x.reshape(-1)[0::7][:len(x.reshape(-1)[1::7])]  # ties
        if n == 5:
            x.reshape(-1)[3] = np.nan
            x.reshape(-1)[10] = -np.inf
        np.testing.assert_allclose(np.asarray(exe(x)), np.asarray(jax.jit(fn)(x)), rtol=1e-5, atol=1e-6,
                                   equal_nan=True)


def test_select_and_scatter_with_a_huge_window_is_refused():
    fn = _pool_grad(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 9, 9), (1, 9, 9), "VALID"))
    with pytest.raises(UnsupportedOpError, match="select_and_scatter window of 81 elements"):
        from_jax(fn, jax.ShapeDtypeStruct((B, 18, 18), np.float32))


# Pooling gradients over a symbolic image size: jax pads the cotangent back with a dynamic_pad
# whose amounts are floordiv / mod expressions of h (interior padding by the stride - 1, edges that
# may crop where the stride exceeds the window); the prover has to show their signs.
POOL_GRADS_SYMBOLIC = [
    ("max", (3, 3), (2, 2), "SAME"),
    ("avg", (3, 3), (2, 2), "SAME"),
    ("avg", (2, 2), (3, 3), "SAME"),
    ("avg", (2, 2), (3, 3), ((1, 0), (0, 2))),
    ("max", (2, 3), (2, 1), "VALID"),
    # a 2 x 2 / 2 pool of odd sizes: the cotangent's dim is written with min / max / mod of h, its
    # sign beyond the prover (the pad of its interior was refused: "not provably >= 0")
    ("avg", (2, 2), (2, 2), "VALID"),
    ("max", (2, 2), (2, 2), "VALID"),
    ("avg", (3, 3), (3, 3), "VALID"),
]


@pytest.mark.parametrize("kind, window, strides, padding", POOL_GRADS_SYMBOLIC,
                         ids=[f"{c[0]}_{c[1][0]}x{c[1][1]}_s{c[2][0]}{c[2][1]}_{c[3] if isinstance(c[3], str) else 'explicit'}"
                              for c in POOL_GRADS_SYMBOLIC])
def test_pool_gradient_over_a_symbolic_image_size(kind, window, strides, padding):
    nn = pytest.importorskip("flax.linen")
    pool = nn.max_pool if kind == "max" else nn.avg_pool
    fn = _pool_grad(lambda x: pool(x, window, strides=strides, padding=padding))
    (b, h) = jax.export.symbolic_shape("b, h")
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((b, h + 2, h, 2), np.float32)))
    for bb, n in ((1, 1), (2, 7), (1, 16)):
        x = rnd((bb, n + 2, n, 2)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(exe(x)), np.asarray(jax.jit(fn)(x)), rtol=1e-5, atol=1e-6)


def test_cnn_training_step_over_a_symbolic_image_size():
    """value_and_grad of a small flax CNN (conv, max_pool, conv, strided SAME avg_pool, mean,
    dense, cross-entropy) with a symbolic batch and image size: one compile, equal to jax at
    h = 1, 7, 13, 16 (before, the pooling gradients' padding stopped the import)."""
    nn = pytest.importorskip("flax.linen")

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Conv(8, (3, 3), padding="SAME")(x))
            x = nn.max_pool(x, (2, 2), strides=(2, 2), padding="SAME")
            x = nn.relu(nn.Conv(16, (3, 3), padding="SAME")(x))
            x = nn.avg_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            return nn.Dense(10)(jnp.mean(x, axis=(1, 2)))

    model = CNN()
    flat, tree = jax.tree_util.tree_flatten(model.init(jax.random.PRNGKey(0), jnp.zeros((1, 8, 8, 3))))
    flat = [np.asarray(a) for a in flat]

    def step(x, y, *leaves):
        def loss(params):
            logp = jax.nn.log_softmax(model.apply(params, x))
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))
        return jax.value_and_grad(loss)(jax.tree_util.tree_unflatten(tree, leaves))
    (b, h) = jax.export.symbolic_shape("b, h")
    exe = relax_mlir.compile(from_jax(step, jax.ShapeDtypeStruct((b, h, h, 3), np.float32),
                                      jax.ShapeDtypeStruct((b,), np.int32),
                                      *[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in flat]))
    rng = np.random.default_rng(0)
    for bb, n in ((1, 1), (3, 7), (5, 13), (2, 16)):
        x = rng.standard_normal((bb, n, n, 3)).astype(np.float32)
        y = rng.integers(0, 10, bb).astype(np.int32)
        got = jax.tree_util.tree_leaves(exe(x, y, *flat))
        want = jax.tree_util.tree_leaves(jax.jit(step)(x, y, *flat))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)


def test_gradient_of_a_valid_max_pool_over_symbolic_axes():
    """jax.grad of a VALID, stride-2 max / min pool over a symbolic axis (a CNN training step's):
    its reshape [b, X] -> [b, floordiv(n, 2), 1] needs X == floordiv(n, 2), which the prover shows
    once the common b is cancelled (was refused, as with a jax constraint n >= m beside it)."""
    from relax_mlir.frontend.jax import from_jax

    jnp = jax.numpy
    b, n, m = jax.export.symbolic_shape("b, n, m", constraints=("n >= m",))
    pool = lambda x, op, init: jax.lax.reduce_window(x, init, op, (1, 2), (1, 2), "VALID")  # noqa: E731
    fn = jax.grad(lambda x, y: (pool(x, jax.lax.max, -jnp.inf).sum() + pool(x, jax.lax.min, jnp.inf).sum() * 0.5
                                + (y * y).sum()), argnums=(0, 1))
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((b, n), jnp.float32),
                                      jax.ShapeDtypeStruct((m,), jnp.float32)))
    rng = np.random.default_rng(4)
    for bb, nn, mm in ((1, 1, 1), (2, 7, 3), (3, 13, 13), (2, 40, 9)):
        x, y = rng.standard_normal((bb, nn)).astype(np.float32), rng.standard_normal(mm).astype(np.float32)
        for got, want in zip(exe(x, y), jax.jit(fn)(x, y)):
            np.testing.assert_allclose(got, np.asarray(want), rtol=1e-6, atol=1e-6)
