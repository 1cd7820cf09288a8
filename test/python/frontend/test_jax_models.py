"""JAX models -> StableHLO (shape-polymorphic jax.export) -> relax -> CPU, compared with jax.jit.

Each model is compiled ONCE and run at three values of its symbols (1, a prime, a larger one)."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import export  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402
from relax_mlir.frontend.stablehlo import UnsupportedOpError, import_stablehlo  # noqa: E402

SIZES = [1, 7, 33]
F32 = jnp.float32


def spec(shape, dtype=F32):
    return jax.ShapeDtypeStruct(shape, dtype)


def sym(names):
    return export.symbolic_shape(names)


def check(fn, specs, make_args, sizes=SIZES, rtol=1e-3, atol=1e-4):
    text = from_jax(fn, *specs)
    exe = relax_mlir.compile(text)
    ref = jax.jit(fn)
    for n in sizes:
        args = make_args(n)
        got = exe(*args)
        want = ref(*args)
        if not isinstance(want, (tuple, list)):
            got, want = [got], [want]
        elif not isinstance(got, (tuple, list)):
            got = [got]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)
    return text


rng = np.random.default_rng(0)


def rnd(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_mlp():
    (b,) = sym("b")
    w1, b1, w2 = rnd(32, 64), rnd(64), rnd(64, 16)

    def mlp(x, w1, b1, w2):
        return jnp.tanh(jax.nn.relu(x @ w1 + b1) @ w2)

    text = check(mlp, [spec((b, 32)), spec((32, 64)), spec((64,)), spec((64, 16))],
                 lambda n: [rnd(n, 32), w1, b1, w2])
    assert '!relax.tensor<["b", 32], f32>' in text


def test_softmax():
    b, s = sym("b, s")
    text = check(lambda x: jax.nn.softmax(x, axis=-1), [spec((b, s))], lambda n: [rnd(n, n + 2)])
    assert '!relax.tensor<["b", "s"], f32>' in text


def test_layer_norm():
    (b,) = sym("b")
    g, be = rnd(32), rnd(32)

    def ln(x, g, be):
        m = jnp.mean(x, axis=-1, keepdims=True)
        v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + be

    check(ln, [spec((b, 5, 32)), spec((32,)), spec((32,))], lambda n: [rnd(n, 5, 32), g, be])


def test_attention_causal():
    (s,) = sym("s")
    d = 16

    def attn(q, k, v):
        sc = jnp.einsum("hqd,hkd->hqk", q, k) / np.float32(np.sqrt(d))
        n = q.shape[1]
        mask = jnp.arange(n)[:, None] >= jnp.arange(n)[None, :]
        sc = jnp.where(mask[None], sc, jnp.float32(-1e9))
        p = jax.nn.softmax(sc, axis=-1)
        return jnp.einsum("hqk,hkd->hqd", p, v)

    text = check(attn, [spec((2, s, d))] * 3, lambda n: [rnd(2, n, d), rnd(2, n, d), rnd(2, n, d)])
    assert '!relax.tensor<[2, "s", 16], f32>' in text


def test_embedding_lookup():
    b, s = sym("b, s")
    emb = rnd(100, 16)

    def f(e, idx):
        return e[idx], jnp.take(e, idx, axis=0)

    check(f, [spec((100, 16)), spec((b, s), jnp.int32)],
          lambda n: [emb, rng.integers(0, 100, size=(n, 3)).astype(np.int32)])


def test_reshape_bs():
    b, s = sym("b, s")
    w = rnd(8, 4)

    def f(x, w):
        y = x.reshape(-1, 8) @ w
        return y.reshape(x.shape[0], x.shape[1], 4)

    check(f, [spec((b, s, 8)), spec((8, 4))], lambda n: [rnd(n, n + 1, 8), w])


def test_concat_symbolic():
    b, s = sym("b, s")
    check(lambda x, y: jnp.concatenate([x, y * 2], axis=0), [spec((b, 8)), spec((s, 8))],
          lambda n: [rnd(n, 8), rnd(n + 3, 8)])


def test_broadcasting():
    b, s = sym("b, s")
    check(lambda x, y: x + y, [spec((b, 1, 16)), spec((1, s, 16))], lambda n: [rnd(n, 1, 16), rnd(1, 2 * n, 16)])


def test_elementwise_zoo():
    (b,) = sym("b")

    def f(x, y):
        a = jnp.exp(x) + jnp.log1p(jnp.abs(y)) - jnp.sqrt(jnp.abs(x)) * jnp.sin(y) / (1 + jnp.cos(x) ** 2)
        c = jnp.maximum(x, y) - jnp.minimum(x, y) + jnp.sign(x) + jnp.floor(y) + jnp.ceil(x)
        d = jnp.clip(x, -0.5, 0.5) + jax.nn.sigmoid(y) + jnp.where((x > 0) & ~(y < 0), x, -y)
        return a + c + d, jnp.max(x, axis=0), jnp.min(y, axis=1), x.T

    check(f, [spec((b, 8)), spec((b, 8))], lambda n: [rnd(n, 8), rnd(n, 8)])


def test_unsupported_op_names_op():
    text = """
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.cbrt %arg0 : tensor<4xf32> loc("here")
  return %0 : tensor<4xf32>
}"""
    with pytest.raises(UnsupportedOpError, match="stablehlo.cbrt.*here"):
        import_stablehlo(text)


def test_wrong_shape_names_jax_symbol():
    import jax
    import jax.numpy as jnp

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    (b,) = jax.export.symbolic_shape("b")
    spec = jax.ShapeDtypeStruct((b, 4), jnp.float32)
    exe = relax_mlir.compile(from_jax(lambda x, y: x * y + x, spec, spec))
    x = np.ones((3, 4), np.float32)
    np.testing.assert_allclose(exe(x, x), x * x + x)
    with pytest.raises(ValueError, match=r"dim 0 must be b \(b = 3"):
        exe(x, np.ones((5, 4), np.float32))


def test_dimension_variables_are_at_least_one():
    """jax.export assumes every dimension variable >= 1; so does the import: x[:, :1] of an
    [s, s] array has dim min(1, s) = 1 and broadcasts against s (this failed shape deduction,
    'cannot broadcast dim 1 of size min(1, s) to s'). A call with s = 0 is refused."""
    (s,) = sym("s")
    text = check(lambda x: jnp.exp(x - x[:, :1]), [spec((s, s))], lambda n: [rnd(n, n)])
    assert "relax.symbol_lower = {s = 1}" in text
    exe = relax_mlir.compile(text)
    with pytest.raises(ValueError, match=r"symbol s = 0 .* below its lower bound 1"):
        exe(np.zeros((0, 0), np.float32))
