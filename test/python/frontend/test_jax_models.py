"""JAX models -> StableHLO (shape-polymorphic jax.export) -> relax -> CPU, compared with jax.jit.

Each model is compiled ONCE and run at three values of its symbols (1, a prime, a larger one)."""
import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402
from relax_mlir.frontend.stablehlo import UnsupportedOpError, import_stablehlo  # noqa: E402

import jaxcheck  # noqa: E402
import model_zoo as zoo  # noqa: E402
from model_zoo import spec, sym  # noqa: E402


check = functools.partial(jaxcheck.check, sizes=(1, 7, 33), rtol=1e-3, atol=1e-4)


rng = np.random.default_rng(0)


def rnd(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_model_on_cpu(name):
    """Every test model (model_zoo.py): compiled ONCE, matches jax.jit at each of its sizes."""
    exe = relax_mlir.compile(zoo.relax_text(name))
    for n, (args, want) in zip(zoo.MODELS[name].sizes, zoo.references(name)):
        zoo.assert_matches(name, zoo.as_list(exe(*args)), want, n)


@pytest.mark.parametrize("name, typ", [("mlp", '!relax.tensor<["b", 32], f32>'),
                                       ("softmax", '!relax.tensor<["b", "s"], f32>'),
                                       ("attention_causal", '!relax.tensor<[2, "s", 16], f32>'),
                                       ("embedding", '!relax.tensor<["b", "s"], i32>'),
                                       ("concat", '!relax.tensor<["s", 8], f32>')])
def test_symbolic_dims_survive_the_import(name, typ):
    assert typ in zoo.relax_text(name)


def test_unsupported_op_names_op():
    text = """
func.func public @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = "stablehlo.map"(%arg0) ({^bb0(%e: tensor<f32>): stablehlo.return %e : tensor<f32>}) {dimensions = array<i64: 0, 1>} : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("here")
  return %0 : tensor<4x4xf32>
}"""
    with pytest.raises(UnsupportedOpError, match="stablehlo.map.*here"):
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
    mod = check(lambda x: jnp.exp(x - x[:, :1]), [spec((s, s))], lambda n: [rnd(n, n)]).module
    with mod.context:
        main = mod.op.regions[0].blocks[0].operations[0]
        lower = main.attributes["relax.symbol_lower"]
        assert len(lower) == 1 and lower["s"].value == 1
    exe = relax_mlir.compile(mod)
    with pytest.raises(ValueError, match=r"symbol s = 0 .* below its lower bound 1"):
        exe(np.zeros((0, 0), np.float32))
