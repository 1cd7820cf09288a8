"""The per-device import of sharded JAX programs, in one process: local symbolic shapes, the
collectives the importer adds or keeps, the cut at collectives, and the refusals (located).
The meshes are abstract (jax.export needs no devices for them), so these tests run in any
process, whatever number of devices jax started with."""
import jax  # noqa: E402
import numpy as np  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.stablehlo import UnsupportedOpError  # noqa: E402
from relax_mlir.spmd import from_jax_spmd, split_collectives  # noqa: E402

def abstract_mesh(shape, names):
    return AbstractMesh(shape, names, axis_types=(AxisType.Explicit,) * len(shape))


mesh = abstract_mesh((2,), ("x",))


def S(*p):
    return NamedSharding(mesh, P(*p))


def sds(shape, *p):
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=S(*p)) if p else jax.ShapeDtypeStruct(shape, jnp.float32)


def ops_of(mod):
    return [o.operation.name for f in mod.op.regions[0].blocks[0].operations for o in f.regions[0].blocks[0].operations]


def test_shard_map_local_shapes_and_collective():
    def local(x, w):
        return jax.lax.psum(x @ w, "x")

    f = jax.shard_map(local, mesh=mesh, in_specs=(P(None, "x"), P("x", None)), out_specs=P())
    k, = jax.export.symbolic_shape("k")
    mod = from_jax_spmd(f, sds((k, 16), None, "x"), sds((16, 6), "x", None))
    text = str(mod)
    assert '%arg0: !relax.tensor<["k", 8], f32>, %arg1: !relax.tensor<[8, 6], f32>' in text
    assert ops_of(mod).count("relax.all_reduce") == 1


def test_sharded_symbolic_dim_is_local_symbol():
    f = jax.shard_map(lambda x: x * 2.0, mesh=mesh, in_specs=(P("x"),), out_specs=P("x"))
    k, = jax.export.symbolic_shape("k")
    mod = from_jax_spmd(f, sds((4 * k, 3), "x"))
    # 4*k split 2 ways is 2*k: the argument binds k from it (checked at run time)
    assert '!relax.tensor<["2*k", 3], f32>' in str(mod)


def test_split_at_collectives():
    def local(x):
        y = jax.lax.psum(jnp.sin(x), "x")
        return jax.lax.all_gather(jnp.cos(x) + y, "x", axis=0, tiled=True) + 1.0

    f = jax.shard_map(local, mesh=mesh, in_specs=(P("x"),), out_specs=P("x"))
    k, = jax.export.symbolic_shape("k")
    mod = from_jax_spmd(f, sds((2 * k, 3), "x"))
    plan = split_collectives(mod)
    assert [s["kind"] for s in plan["steps"]] == ["segment", "collective", "segment", "collective", "segment"]
    assert [s["op"] for s in plan["steps"] if s["kind"] == "collective"] == ["all_reduce", "all_gather"]
    names = [f.attributes["sym_name"].value for f in mod.op.regions[0].blocks[0].operations]
    assert names == ["main__s0", "main__s1", "main__s2"]
    assert "relax.all_reduce" not in ops_of(mod) and "relax.all_gather" not in ops_of(mod)
    assert plan["arg_shardings"] == [[["x"], []]] and plan["result_shardings"] == [[["x"], []]]


def test_named_sharding_propagation_inserts_all_reduce_for_contracting_dim():
    g = jax.jit(lambda x, w: x @ w, in_shardings=(S(None, "x"), S("x", None)), out_shardings=S())
    b, = jax.export.symbolic_shape("b")
    mod = from_jax_spmd(g, sds((b, 8)), sds((8, 4)))
    assert ops_of(mod).count("relax.all_reduce") == 1
    assert '%arg0: !relax.tensor<["b", 4], f32>, %arg1: !relax.tensor<[4, 4], f32>' in str(mod)


def test_op_without_rule_is_computed_replicated_with_a_warning(caplog):
    g = jax.jit(lambda x: jnp.concatenate([x, x], axis=1), in_shardings=(S("x"),), out_shardings=S("x"))
    k, = jax.export.symbolic_shape("k")
    with caplog.at_level("WARNING", logger="relax_mlir.frontend"):
        mod = from_jax_spmd(g, sds((2 * k, 4)))
    (rec,) = [r for r in caplog.records if "all-gathered" in r.getMessage()]
    assert "stablehlo.concatenate" in rec.getMessage() and "no sharding rule" in rec.getMessage()
    assert "test_spmd_import.py" in rec.getMessage()  # located at the user's line
    assert ops_of(mod).count("relax.all_gather") == 1
    plan = split_collectives(mod)
    assert plan["results_replicated"] == [0]  # the host keeps each rank's rows of the whole result


def test_conflicting_elementwise_operands_are_gathered():
    g = jax.jit(lambda x, y: x + y, in_shardings=(S("x"), S(None, "x")), out_shardings=S())
    mod = from_jax_spmd(g, sds((4, 4)), sds((4, 4)))
    assert ops_of(mod).count("relax.all_gather") == 2


def test_dim_over_several_axes_without_rule_is_refused():
    mesh2 = abstract_mesh((2, 1), ("a", "b"))
    g = jax.jit(lambda x: jnp.concatenate([x, x], axis=1), in_shardings=(NamedSharding(mesh2, P(("a", "b"))),),
                out_shardings=NamedSharding(mesh2, P(("a", "b"))))
    with pytest.raises(UnsupportedOpError, match="cannot be gathered") as e:
        from_jax_spmd(g, sds((4, 4)))
    assert "test_spmd_import.py" in str(e.value)


def test_mesh_axis_used_twice_gathers_an_operand():
    # rows of x and columns of w both split over x: w is all-gathered, the product stays row-split
    g = jax.jit(lambda x, w: x @ w, in_shardings=(S("x"), S(None, "x")), out_shardings=S("x"))
    mod = from_jax_spmd(g, sds((4, 8)), sds((8, 4)))
    ops = ops_of(mod)
    assert ops.count("relax.all_gather") == 1 and "relax.all_reduce" not in ops
    assert '%arg0: !relax.tensor<[2, 8], f32>, %arg1: !relax.tensor<[8, 2], f32>' in str(mod)


def test_multi_axis_dim_is_refused_where_it_would_need_resharding():
    mesh4 = abstract_mesh((2, 1), ("a", "b"))
    s2 = NamedSharding(mesh4, P(("a", "b")))
    g = jax.jit(lambda x, y: x + y, in_shardings=(s2, NamedSharding(mesh4, P(None, "a"))), out_shardings=s2)
    with pytest.raises(UnsupportedOpError, match="cannot be gathered"):
        from_jax_spmd(g, sds((4, 4)), sds((4, 4)))


def test_collective_has_no_kernel():
    f = jax.shard_map(lambda x: jax.lax.psum(x, "x"), mesh=mesh, in_specs=(P("x"),), out_specs=P())
    mod = from_jax_spmd(f, sds((4, 3), "x"))
    with pytest.raises(Exception, match="has no kernel"):
        relax_mlir.compile(mod)


def test_program_needs_matching_ranks():
    pytest.importorskip("mpi4py", reason="MPI is not installed (pip install -e '.[mpi]')")
    from relax_mlir.runtime.mpi import SpmdError
    from relax_mlir.spmd import compile_spmd

    f = jax.shard_map(lambda x: x * 2.0, mesh=mesh, in_specs=(P("x"),), out_specs=P("x"))
    with pytest.raises(SpmdError, match="mpiexec -n 2"):
        compile_spmd(from_jax_spmd(f, sds((4, 3), "x")))


def test_collective_in_a_loop_is_refused():
    def local(x):
        return jax.lax.fori_loop(0, 3, lambda i, c: c + jax.lax.psum(c, "x") * 0.5, x)

    f = jax.shard_map(local, mesh=mesh, in_specs=(P("x"),), out_specs=P("x"))
    mod = from_jax_spmd(f, sds((4, 3), "x"))
    with pytest.raises(ValueError, match="inside a loop or conditional is not supported"):
        split_collectives(mod)


def test_gspmd_constraint_is_refused_in_spmd_import():
    from relax_mlir.frontend.stablehlo import import_stablehlo

    text = """
module @m attributes {mhlo.num_partitions = 2 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<4x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) -> tensor<4x2xf32> {
    %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{devices=[2,1]<=[2]}"} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    return %0 : tensor<4x2xf32>
  }
}
"""
    with pytest.raises(UnsupportedOpError, match="GSPMD"):
        import_stablehlo(text, spmd=True)


def test_reduction_with_non_identity_init_over_sharded_dim_runs_replicated():
    # sum with init 1.0 (lax.reduce): a per-rank local sum would count the init twice
    g = jax.jit(lambda x: jax.lax.reduce(x, np.float32(1.0), jax.lax.add, (0,)), in_shardings=(S("x"),),
                out_shardings=S())
    mod = from_jax_spmd(g, sds((4, 3)))
    ops = ops_of(mod)
    assert ops.count("relax.all_gather") == 1 and "relax.all_reduce" not in ops
