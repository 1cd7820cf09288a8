"""The StableHLO importer builds relax IR through the MLIR bindings: no regex over IR, ops located at
the user's Python lines, dead ops erased, `relax.symbol_lower` for jax's dimension variables."""
import ast
import os

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from mlir import ir  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend import stablehlo  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402
from relax_mlir.frontend.stablehlo import import_stablehlo  # noqa: E402

FRONTEND = os.path.dirname(os.path.dirname(stablehlo.__file__))  # relax_mlir/frontend
FRONTEND_FILES = sorted(os.path.relpath(os.path.join(d, f), FRONTEND) for d, _, fs in os.walk(FRONTEND)
                        for f in fs if f.endswith(".py"))


def _imports(path: str) -> set[str]:
    tree = ast.parse(open(path, encoding="utf-8").read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_regex_check_sees_the_importer():
    assert {"jax.py", "stablehlo/__init__.py", "stablehlo/importer.py", "stablehlo/slicing.py"} <= set(FRONTEND_FILES)


@pytest.mark.parametrize("name", FRONTEND_FILES)
def test_frontend_has_no_regex(name):
    """The frontend reads jax's ops, attributes and locations through the bindings, never with a regex."""
    assert "re" not in _imports(os.path.join(FRONTEND, name))


def _main(mod: relax_mlir.Module):
    return mod.op.regions[0].blocks[0].operations[0]


def _scaled_relu(x, w):
    y = x @ w
    return jnp.maximum(y * 2.0, 0.0)


def test_ops_are_located_at_the_python_lines():
    (b,) = jax.export.symbolic_shape("b")
    mod = from_jax(_scaled_relu, jax.ShapeDtypeStruct((b, 4), jnp.float32), jax.ShapeDtypeStruct((4, 3), jnp.float32))
    assert isinstance(mod, relax_mlir.Module)
    lines = {name: i + 1 for i, name in enumerate(open(__file__, encoding="utf-8").read().splitlines())}
    matmul_line = lines["    y = x @ w"]
    with mod.context:
        where = {}
        for op in _main(mod).regions[0].blocks[0].operations:
            loc = op.location
            if op.name.startswith("relax.") and loc.is_a_file():
                where.setdefault(op.name, (loc.filename, loc.start_line))
    assert where["relax.matmul"] == (__file__, matmul_line)
    assert where["relax.maximum"] == (__file__, matmul_line + 1)
    assert where["relax.multiply"] == (__file__, matmul_line + 1)


def test_shape_error_points_at_the_python_line():
    """A program relax-infer-shapes refuses is a CompileError at the user's line, not a traceback."""
    text = """
func.func public @main(%arg0: tensor<?xf32>, %arg1: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<?xf32> loc("user.py":7:3)
  return %0 : tensor<?xf32>
}"""
    where = r"user\.py:7:3: error: 'relax\.add' op broadcast dimensions differ"
    with pytest.raises(relax_mlir.CompileError, match=where):
        import_stablehlo(text)


def test_dead_ops_are_erased():
    text = """
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.exponential %arg0 : tensor<4xf32>
  %1 = stablehlo.log %0 : tensor<4xf32>
  %2 = stablehlo.negate %arg0 : tensor<4xf32>
  return %2 : tensor<4xf32>
}"""
    mod = import_stablehlo(text)
    with mod.context:
        names = [op.name for op in _main(mod).regions[0].blocks[0].operations]
    assert names == ["relax.negative", "func.return"]


def test_symbol_lower_comes_from_jax_dimension_variables():
    """jax.export's dimension variables (named by `jax.global_constant`) are >= 1; a dynamic dim that
    is not one (d0 here) has no lower bound."""
    (b,) = jax.export.symbolic_shape("b")
    mod = from_jax(lambda x: x + 1.0, jax.ShapeDtypeStruct((b, 3), jnp.float32))
    with mod.context:
        lower = _main(mod).attributes["relax.symbol_lower"]
        assert len(lower) == 1 and lower["b"].value == 1
    plain = import_stablehlo("""
func.func public @main(%arg0: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.negate %arg0 : tensor<?xf32>
  return %0 : tensor<?xf32>
}""")
    with plain.context:
        assert "relax.symbol_lower" not in _main(plain).attributes
    exe = relax_mlir.compile(plain)
    assert exe(np.zeros(0, np.float32)).shape == (0,)


def test_constants_cross_by_value():
    """Splat, dense, i1 and bf16 constants keep their values."""
    text = """
func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xi1>, tensor<2xbf16>) {
  %c = stablehlo.constant dense<[1.5, -2.0, 0x7FC00001]> : tensor<3xf32>
  %0 = stablehlo.add %arg0, %c : tensor<3xf32>
  %m = stablehlo.constant dense<[true, false, true]> : tensor<3xi1>
  %h = stablehlo.constant dense<[1.5, 3.0]> : tensor<2xbf16>
  return %0, %m, %h : tensor<3xf32>, tensor<3xi1>, tensor<2xbf16>
}"""
    mod = import_stablehlo(text)
    with mod.context:
        values = [str(op.attributes["value"]) for op in _main(mod).regions[0].blocks[0].operations
                  if op.name == "relax.constant"]
    assert values == ["dense<[1.500000e+00, -2.000000e+00, 0x7FC00001]> : tensor<3xf32>",
                      "dense<[true, false, true]> : tensor<3xi1>",
                      "dense<[1.500000e+00, 3.000000e+00]> : tensor<2xbf16>"]
