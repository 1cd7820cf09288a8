"""Importer infrastructure (issue 16): every unsupported op at once, sharding annotations,
stablehlo.composite, custom_call targets, argument dims given as expressions."""
import logging

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402
from relax_mlir.frontend.stablehlo import (StableHLOParseError, UnsupportedOpError, UnsupportedOpsError,  # noqa: E402
                                           UnsupportedTypesError, import_stablehlo, render_error)

TWO_KINDS = """
func.func public @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = "stablehlo.map"(%arg0) ({^bb0(%e: tensor<f32>): stablehlo.return %e : tensor<f32>}) {dimensions = array<i64: 0, 1>} : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("a.py":3:1)
  %1 = "stablehlo.map"(%0) ({^bb0(%e: tensor<f32>): stablehlo.return %e : tensor<f32>}) {dimensions = array<i64: 0, 1>} : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("a.py":4:1)
  %2 = stablehlo.dot %1, %1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("a.py":5:1)
  %3 = call @inner(%2) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %4 = stablehlo.custom_call @lapack_sgetrf(%3) : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("a.py":6:1)
  return %4 : tensor<4x4xf32>
}
func.func private @inner(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = "stablehlo.map"(%arg0) ({^bb0(%e: tensor<f32>): stablehlo.return %e : tensor<f32>}) {dimensions = array<i64: 0, 1>} : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("b.py":9:2)
  return %0 : tensor<4x4xf32>
}
func.func private @never_called(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = stablehlo.atan2 %arg0, %arg0 : tensor<4x4xf32> loc("c.py":1:1)
  return %0 : tensor<4x4xf32>
}
"""


def test_every_unsupported_op_at_once():
    with pytest.raises(UnsupportedOpsError) as info:
        import_stablehlo(TWO_KINDS)
    e = info.value
    assert isinstance(e, UnsupportedOpError)  # callers catching the old error still do
    groups = {name: (why, locs) for name, why, locs in e.groups}
    assert set(groups) == {"stablehlo.map", "stablehlo.dot", "stablehlo.custom_call"}  # not @never_called's atan2
    assert len(groups["stablehlo.map"][1]) == 3 and len(groups["stablehlo.dot"][1]) == 1
    assert groups["stablehlo.custom_call"][0] == "call target @lapack_sgetrf"
    assert "unsupported StableHLO op 'stablehlo.map' (3 occurrences) at a.py:3:1; a.py:4:1; b.py:9:2" in str(e)
    rendered = render_error(e, "in.mlir").splitlines()
    assert rendered == [
        "a.py:3:1: error: unsupported StableHLO op 'stablehlo.map' (3 occurrences; also at a.py:4:1, b.py:9:2)",
        "a.py:5:1: error: unsupported StableHLO op 'stablehlo.dot'",
        "a.py:6:1: error: unsupported StableHLO op 'stablehlo.custom_call': call target @lapack_sgetrf"]


@pytest.mark.parametrize("cls", [UnsupportedOpError, UnsupportedOpsError, UnsupportedTypesError,
                                 StableHLOParseError])
def test_import_errors_are_compile_errors(cls):
    """The importer's refusals are CompileErrors (what compile() raises for what it refuses) and
    still ValueErrors (what they were)."""
    assert issubclass(cls, relax_mlir.CompileError) and issubclass(cls, ValueError)


def test_unsupported_op_through_compile_is_a_compile_error():
    def eig(x):  # a general eigendecomposition: LAPACK's geev, which the importer refuses
        return x + jnp.linalg.eigvals(x).real.sum()

    exported = jax.export.export(jax.jit(eig))(jax.ShapeDtypeStruct((4, 4), jnp.float32))
    with pytest.raises(relax_mlir.CompileError, match=r"unsupported StableHLO op 'stablehlo.custom_call': "
                                                      r"call target @lapack_sgeev_ffi"):
        relax_mlir.compile(exported)
    with pytest.raises(relax_mlir.CompileError, match=r"unsupported StableHLO op 'stablehlo.map'"):
        import_stablehlo(TWO_KINDS)
    with pytest.raises(relax_mlir.CompileError, match=r"expected"):
        import_stablehlo("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32")


TWO_TARGETS = """
func.func public @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = stablehlo.custom_call @lapack_sgeev_ffi(%arg0) : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("a.py":1:1)
  %1 = stablehlo.custom_call @lapack_sgees_ffi(%0) : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("a.py":2:1)
  %2 = stablehlo.custom_call @lapack_sgees_ffi(%1) : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("a.py":3:1)
  return %2 : tensor<4x4xf32>
}
"""


def test_each_custom_call_target_is_named():
    """Unsupported custom calls are grouped per call target, each named with its own locations."""
    with pytest.raises(UnsupportedOpsError) as info:
        import_stablehlo(TWO_TARGETS)
    assert render_error(info.value, "in.mlir").splitlines() == [
        "a.py:1:1: error: unsupported StableHLO op 'stablehlo.custom_call': call target @lapack_sgeev_ffi",
        "a.py:2:1: error: unsupported StableHLO op 'stablehlo.custom_call': call target @lapack_sgees_ffi "
        "(2 occurrences; also at a.py:3:1)"]


SHARDED = """
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=1]>
  func.func public @main(%arg0: tensor<4x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
                         %arg1: tensor<4x2xf32> {mhlo.sharding = "{replicated}"})
      -> (tensor<4x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {}]> : tensor<4x2xf32>
    %1 = stablehlo.custom_call @Sharding(%arg1) {mhlo.sharding = "{devices=[2,1]<=[2]}"} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %2 = stablehlo.custom_call @annotate_device_placement(%1) {has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %3 = stablehlo.add %0, %2 : tensor<4x2xf32>
    return %3 : tensor<4x2xf32>
  }
}
"""


def test_sharding_annotations_are_dropped_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="relax_mlir.frontend"):
        mod = import_stablehlo(SHARDED)
    (rec,) = [r for r in caplog.records if "sharding annotations dropped" in r.getMessage()]
    msg = rec.getMessage()
    for what in ("sdy.mesh x1", "sdy.sharding x2", "mhlo.sharding x2", "sdy.sharding_constraint x1",
                 "custom_call @Sharding x1"):
        assert what in msg, msg
    exe = relax_mlir.compile(mod)
    a, b = np.arange(8, dtype=np.float32).reshape(4, 2), np.full((4, 2), 0.5, np.float32)
    np.testing.assert_array_equal(exe(a, b), a + b)


def test_sharded_jax_function_compiles_for_one_device(caplog):
    from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
    mesh = jax.make_mesh((1,), ("x",), axis_types=(AxisType.Auto,))
    sh = NamedSharding(mesh, P("x"))

    def f(a, b):
        return jax.lax.with_sharding_constraint(a * 2, sh) + b
    (n,) = jax.export.symbolic_shape("n")
    spec = jax.ShapeDtypeStruct((n, 4), jnp.float32)
    with caplog.at_level(logging.WARNING, logger="relax_mlir.frontend"):
        exe = relax_mlir.compile(from_jax(jax.jit(f, in_shardings=(sh, sh), out_shardings=sh), spec, spec))
    assert any("sdy.sharding_constraint" in r.getMessage() for r in caplog.records)
    for rows in (1, 7, 20):
        a = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
        np.testing.assert_allclose(exe(a, a), jax.jit(f)(a, a), rtol=1e-6)


SHARD_MAP = """
module {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}]>] out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"} (%a: tensor<2xf32>) {
      %1 = stablehlo.add %a, %a : tensor<2xf32>
      sdy.return %1 : tensor<2xf32>
    } : (tensor<4xf32>) -> tensor<4xf32> loc("m.py":2:3)
    %2 = stablehlo.custom_call @SPMDFullToShardShape(%arg0) : (tensor<4xf32>) -> tensor<2xf32> loc("m.py":5:1)
    return %0 : tensor<4xf32>
  }
}
"""


def test_shard_map_is_refused_clearly():
    with pytest.raises(UnsupportedOpsError) as info:
        import_stablehlo(SHARD_MAP)
    text = render_error(info.value, "m.mlir")
    assert "m.py:2:3: error: unsupported StableHLO op 'sdy.manual_computation': shard_map" in text
    assert "relax compiles for one device" in text
    assert "m.py:5:1: error: unsupported StableHLO op 'stablehlo.custom_call': call target @SPMDFullToShardShape: " \
           "shard_map's manual sharding" in text
    assert "sdy.return" not in text  # the region's terminator is not an op of its own to report


def test_composite_is_inlined():
    def f(x):
        return jax.lax.composite(lambda y: jnp.sin(y) * 2 + y, name="my.sin2")(x) - 1
    # static shape: jax 0.10.2 cannot lower a composite under shape polymorphism (its
    # decomposition takes the dimension variable as an extra operand and fails to verify)
    mod = from_jax(f, jax.ShapeDtypeStruct((5, 3), jnp.float32))
    text = str(mod)
    assert "relax.sin" in text and "composite" not in text
    exe = relax_mlir.compile(mod)
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(exe(x), jax.jit(f)(x), rtol=1e-5, atol=1e-6)


def _expr_model():
    (L,) = jax.export.symbolic_shape("5*k + 15")

    def f(x, y):
        # uses k itself: y has k + 3 rows, x's rows reshaped to (k + 3, 5)
        return jnp.sin(x).reshape(-1, 5, 2).sum(axis=1) + y
    k = L // 5 - 3
    return f, [jax.ShapeDtypeStruct((L, 2), jnp.float32), jax.ShapeDtypeStruct((k + 3, 2), jnp.float32)]


def test_dim_given_as_expression():
    f, specs = _expr_model()
    mod = from_jax(f, *specs)
    text = str(mod)
    assert '!relax.tensor<["5*k + 15", 2], f32>' in text and '!relax.tensor<["k + 3", 2], f32>' in text
    exe = relax_mlir.compile(mod)
    rng = np.random.default_rng(0)
    for k in (1, 7, 30):
        x = rng.standard_normal((5 * k + 15, 2)).astype(np.float32)
        y = rng.standard_normal((k + 3, 2)).astype(np.float32)
        np.testing.assert_allclose(exe(x, y), jax.jit(f)(x, y), rtol=1e-5, atol=1e-5)


def test_dim_given_as_expression_is_checked_at_run_time():
    f, specs = _expr_model()
    exe = relax_mlir.compile(from_jax(f, *specs))
    y = np.zeros((4, 2), np.float32)
    with pytest.raises(ValueError, match=r"argument #0 \(dim 0 = 5\*k \+ 15\).*dim 0 is the argument's size, "
                                         r"the pattern requires 5\*k \+ 15 \(given: argument #0 \(21, 2\)"):
        exe(np.zeros((21, 2), np.float32), y)
    with pytest.raises(ValueError, match=r"symbol arg0_dim0 = 15 \(from argument #0 dim 0\) is below its lower "
                                         r"bound 20"):
        exe(np.zeros((15, 2), np.float32), np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match=r"argument #1 \(dim 0 = k \+ 3\).*requires k \+ 3"):
        exe(np.zeros((20, 2), np.float32), np.zeros((5, 2), np.float32))


def test_expression_dim_that_cannot_be_solved_is_refused():
    """jax.export refuses such specs itself; a caller naming dims by expressions gets a clear error."""
    text = """
func.func public @main(%arg0: tensor<?xf32>) -> tensor<?xf32> {
  return %arg0 : tensor<?xf32>
}"""
    with pytest.raises(UnsupportedOpError, match=r"argument #0 dim 0 is given as 'a\*b'.*neither a whole dim"):
        import_stablehlo(text, dim_names=[["a*b"]])


def test_jax_upper_bound_constraints_become_symbol_bounds():
    """jax.export's `s <= 8` constraint lets jax slice a [16, 16] table to [s, s] (min(16, s)
    otherwise); the import keeps it as relax.symbol_bounds, which the executable checks."""
    (s,) = jax.export.symbolic_shape("s", constraints=("s <= 8",))
    table = np.arange(256, dtype=np.float32).reshape(16, 16)

    def f(x):
        return x + jnp.asarray(table)[:x.shape[0], :x.shape[0]]
    mod = from_jax(f, jax.ShapeDtypeStruct((s, s), jnp.float32))
    assert "relax.symbol_bounds = {s = 8 : i64}" in str(mod)
    exe = relax_mlir.compile(mod)
    for n in (1, 5, 8):
        x = np.random.default_rng(n).standard_normal((n, n)).astype(np.float32)
        np.testing.assert_allclose(exe(x), jax.jit(f)(x), rtol=1e-6)
    with pytest.raises(ValueError, match=r"symbol s = 9 .* exceeds its upper bound 8"):
        exe(np.zeros((9, 9), np.float32))


def test_jax_constraints_between_symbols_are_checked_at_entry():
    """jax's constraints between symbols (`a >= c`, `a <= 2*c + 1`) let it export x[:c] of an [a]
    array as [c]; jax.export drops their shape assertions from the module. The executable checks
    each one (relax.requires) before any kernel runs: a violating call is a ValueError naming the
    constraint (it returned [1, 2] for x[:5] of [0, 1, 2], a wrong result). Shape deduction uses
    them (a == c + t, t >= 0): x[:c] + y imports (was refused: min(a, c) is not provably c)."""
    a, c = jax.export.symbolic_shape("a, c", constraints=("a >= c", "a <= 2*c + 1"))
    f = lambda x, y: (x[:y.shape[0]], x[:y.shape[0]] + y, jnp.concatenate([y, x[y.shape[0]:]]) + x)  # noqa: E731
    mod = from_jax(f, jax.ShapeDtypeStruct((a,), jnp.float32), jax.ShapeDtypeStruct((c,), jnp.float32))
    assert "relax.requires" in str(mod)
    exe = relax_mlir.compile(mod)
    for na, nc in [(3, 3), (7, 5), (9, 4)]:
        x, y = np.arange(na, dtype=np.float32), np.ones(nc, np.float32)
        for got, want in zip(exe(x, y), jax.jit(f)(x, y)):
            np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match=r"the jax constraint 'a >= c' does not hold"):
        exe(np.arange(3, dtype=np.float32), np.ones(5, np.float32))
    with pytest.raises(ValueError, match=r"the jax constraint '2\*c \+ 1 >= a' does not hold"):
        exe(np.arange(12, dtype=np.float32), np.ones(5, np.float32))


def test_upper_bound_of_a_symbol_inside_an_argument_dim():
    """An argument dim s + 2 with `s <= 62` (GPT-2 / Llama training specs of [b, s + 2] slicing
    their 64-row causal mask table to [s + 2, s + 2]): the bound of s, bound inside main, is kept
    (it was dropped: only symbols naming a whole dim kept theirs) and proves min(64, s + 2) =
    s + 2 by checking every value of s's range (the clamped size is a min / max expression equal
    only below the bound); was refused: "cannot broadcast dim 2 of size -max(...) ... to s + 2".
    s past the bound is refused by the executable."""
    b, s = jax.export.symbolic_shape("b, s", constraints=("s <= 62",))
    table = np.tril(np.ones((1, 1, 64, 64), np.float32))

    def f(x):
        n = x.shape[1]
        return jnp.broadcast_to(x[:, None, None, :], (x.shape[0], 1, n, n)) * jnp.asarray(table)[:, :, :n, :n]
    exe = relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((b, s + 2), jnp.float32)))
    for length in (3, 17, 64):
        x = np.random.default_rng(length).standard_normal((2, length)).astype(np.float32)
        np.testing.assert_array_equal(exe(x), jax.jit(f)(x))
    with pytest.raises(ValueError, match=r"symbol s = 63 .* exceeds its upper bound 62"):
        exe(np.zeros((2, 65), np.float32))


def test_jax_lower_bound_constraints_and_clamped_slices():
    """BigBird's block-sparse attention concatenates x[:, 1:-3], x[:, 2:-2] and x[:, 3:-1] of a
    length of k blocks, which jax exports given `k >= 8` (its sizes differ below): the sizes are
    written differently and equal (k - 4), so the concat imports (it was refused: 'operand #1 dim
    1 is ..., expected ...'). The constraint becomes relax.symbol_lower, checked by the executable
    on k, which an argument dim 4*k derives (before any result shape, k - 4, is computed: numpy
    refused a negative dim). Equal to jax.jit at k = 8, 9, 13 from one compile."""
    constraints = ("k >= 8",)
    b, s = jax.export.symbolic_shape("b, 4*k", constraints=constraints)

    def f(m):
        x = m.reshape(m.shape[0], m.shape[1] // 4, 4)
        return jnp.concatenate([x[:, 1:-3], x[:, 2:-2], x[:, 3:-1]], axis=2)
    mod = from_jax(f, jax.ShapeDtypeStruct((b, s), jnp.float32))
    exe = relax_mlir.compile(mod)
    assert "k = 8 : i64" in str(mod)
    for k in (8, 9, 13):
        x = np.random.default_rng(k).standard_normal((2, 4 * k)).astype(np.float32)
        np.testing.assert_array_equal(exe(x), jax.jit(f)(x))
    for k in (2, 7, 2):  # (the second 2: the cached binding reports it again)
        with pytest.raises(ValueError, match=rf"symbol k = {k} .*is below its lower bound 8"):
            exe(np.zeros((2, 4 * k), np.float32))
