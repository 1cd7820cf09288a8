"""stablehlo.rng_bit_generator (frontend/stablehlo/random.py): jax's "rbg" and "unsafe_rbg" PRNGs,
bit for bit as jax.jit computes them on the CPU (XLA's Philox-4x32-10), static and over symbolic
dims (the dynamic form), from ONE compile per program; refusals by name."""
from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import export, lax  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402
from relax_mlir.frontend.stablehlo import import_stablehlo  # noqa: E402

import jaxcheck  # noqa: E402

N, = export.symbolic_shape("n")
SIZES = (1, 7, 257)
exact = functools.partial(jaxcheck.check, sizes=SIZES)
# states that reach every corner of the counter: zero, small, a carry out of the low word at the
# second block, all ones
STATES = ([0, 0], [5, 7], [0x123456789ABCDEF0, 0xFFFFFFFFFFFFFFFE], [2**64 - 1, 2**64 - 1])


@pytest.mark.parametrize("dtype,shape", [("uint32", (13,)), ("uint8", (2, 7)), ("uint16", (9,)), ("uint32", (4,)),
                                         ("uint32", (0,))])
def test_bits_and_state_as_xla(dtype, shape):
    """Every output width (one 32-bit Philox word per element, its low bits), row-major over a
    2-d output, a block cut short and a whole one, an empty draw; the new state too."""
    dt = jnp.dtype(dtype)
    g = lambda s: lax.rng_bit_generator(s, shape, dtype=dt)  # noqa: E731
    with jax.enable_x64(True):
        exe = relax_mlir.compile(from_jax(g, jax.ShapeDtypeStruct((2,), jnp.uint64)))
        for state in STATES:
            s = np.array(state, np.uint64)
            jaxcheck.compare(jax.jit(g)(s), exe(s), err_msg=f"state {state}")


def test_64_bit_output():
    """A 64-bit output takes two words per element (x0 | x1 << 32, x2 | x3 << 32)."""
    g = lambda s: lax.rng_bit_generator(s, (5,), dtype=jnp.uint64)  # noqa: E731
    with jax.enable_x64(True):
        exe = relax_mlir.compile(from_jax(g, jax.ShapeDtypeStruct((2,), jnp.uint64)))
        for state in STATES:
            s = np.array(state, np.uint64)
            jaxcheck.compare(jax.jit(g)(s), exe(s), err_msg=f"state {state}")


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_jax_random_draws_over_a_symbolic_dim(impl):
    """jax.random with an rbg key (key data an argument): uniform, normal, bernoulli, randint,
    categorical, a split and a fold_in, over a symbolic n (dynamic_rng_bit_generator)."""
    def f(kd, x):
        key = jax.random.wrap_key_data(kd, impl=impl)
        k1, k2, k3 = jax.random.split(key, 3)
        return (x + jax.random.uniform(k1, x.shape), jax.random.normal(k2, (x.shape[0], 3)),
                jax.random.bernoulli(jax.random.fold_in(k3, 7), 0.3, x.shape),
                jax.random.randint(k3, x.shape, -5, 100), jax.random.categorical(k1, jnp.stack([x, -x], -1)))

    kd = np.asarray(jax.random.key_data(jax.random.key(3, impl=impl)))
    # the bits are exact; normal's inverse erf may round its last bit apart from XLA's polynomial
    exact(f, [jax.ShapeDtypeStruct(kd.shape, kd.dtype), jax.ShapeDtypeStruct((N,), jnp.float32)],
          lambda n: [kd, np.linspace(-1, 1, n, dtype=np.float32)], rtol=1e-6, atol=1e-6)


def test_dropout_with_an_rbg_key():
    """A dropout mask drawn from an rbg key, as training code with
    jax_default_prng_impl='unsafe_rbg' writes it: [batch, features] with a symbolic batch."""
    def f(kd, x):
        keep = jax.random.bernoulli(jax.random.wrap_key_data(kd, impl="unsafe_rbg"), 0.9, x.shape)
        return jnp.where(keep, x / 0.9, 0.0)

    kd = np.asarray(jax.random.key_data(jax.random.key(11, impl="unsafe_rbg")))
    exact(f, [jax.ShapeDtypeStruct(kd.shape, kd.dtype), jax.ShapeDtypeStruct((N, 16), jnp.float32)],
          lambda n: [kd, np.ones((n, 16), np.float32)])


_THREE_FRY = """
func.func @main(%s: tensor<2xui64>) -> tensor<4xui32> {
  %0, %1 = "stablehlo.rng_bit_generator"(%s) {rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>}
      : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4xui32>)
  return %1 : tensor<4xui32>
}"""


@pytest.mark.parametrize("text,why", [
    (_THREE_FRY, "algorithm THREE_FRY"),
    (_THREE_FRY.replace("THREE_FRY", "PHILOX").replace("tensor<2xui64>", "tensor<3xui64>"), "ui64[2] state"),
    (_THREE_FRY.replace("THREE_FRY", "DEFAULT").replace("4xui32", "4xf32"), "only unsigned integers"),
], ids=["three_fry", "state_shape", "float_output"])
def test_refused_by_name(text, why):
    with pytest.raises(relax_mlir.CompileError, match="stablehlo.rng_bit_generator") as e:
        import_stablehlo(text, source_name="r.mlir")
    assert why in str(e.value) and '"r.mlir":3:' in str(e.value), str(e.value)
