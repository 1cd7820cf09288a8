"""Run under `mpiexec -n 2`: SPMD programs compiled once per rank, run at several symbol values,
compared with jax.jit of the unsharded function. Each rank writes its outcomes (case -> "ok" or
the error) as JSON to <outdir>/rank<r>.json; test_spmd_mpi.py asserts them."""
import json
import os
import sys
import traceback

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from relax_mlir.runtime.mpi import SpmdError  # noqa: E402
from relax_mlir.spmd import compile_spmd, from_jax_spmd  # noqa: E402

mesh = jax.make_mesh((2,), ("x",))


def S(*p):
    return NamedSharding(mesh, P(*p))


def spec(shape, dtype, *p):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=S(*p))


def close(got, want, tol=1e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


from mpi4py import MPI  # noqa: E402

results = {}
rng = np.random.default_rng(1)


def case(name):
    def wrap(fn):
        try:
            fn()
            results[name] = "ok"
        except Exception as e:  # recorded; the test prints it
            results[name] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"
        return fn
    return wrap


@case("mlp_tensor_parallel")
def _():
    D, H = 8, 16

    def local(x, w1, w2):
        return jax.lax.psum(jnp.maximum(x @ w1, 0.0) @ w2, "x")

    f = jax.shard_map(local, mesh=mesh, in_specs=(P(), P(None, "x"), P("x", None)), out_specs=P())
    b, = jax.export.symbolic_shape("b")
    prog = compile_spmd(from_jax_spmd(f, spec((b, D), jnp.float32), spec((D, H), jnp.float32, None, "x"),
                                      spec((H, D), jnp.float32, "x", None)))
    assert [s["op"] for s in prog.plan["steps"] if s["kind"] == "collective"] == ["all_reduce"]
    w1, w2 = rng.standard_normal((D, H), np.float32), rng.standard_normal((H, D), np.float32)
    for n in (1, 5, 33):
        x = rng.standard_normal((n, D), np.float32)
        close(prog.run_global(x, w1, w2), jax.jit(lambda x, a, c: jnp.maximum(x @ a, 0.0) @ c)(x, w1, w2))


@case("data_parallel")
def _():
    def f_(x, w):
        return jnp.tanh(x @ w) * jnp.sum(x, axis=1, keepdims=True)

    f = jax.shard_map(f_, mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x"))
    k, = jax.export.symbolic_shape("k")
    mod = from_jax_spmd(f, spec((2 * k, 8), jnp.float32, "x"), spec((8, 4), jnp.float32))
    prog = compile_spmd(mod)
    assert not [s for s in prog.plan["steps"] if s["kind"] == "collective"]
    w = rng.standard_normal((8, 4), np.float32)
    for n in (2, 14, 22):  # k = 1, 7 (prime), 11
        x = rng.standard_normal((n, 8), np.float32)
        close(prog.run_global(x, w), jax.jit(f_)(x, w))
    # the local shards directly: each rank passes its half
    x = rng.standard_normal((6, 8), np.float32)
    mine = x[3 * prog.rank:3 * prog.rank + 3]
    close(prog(mine, w), np.asarray(jax.jit(f_)(x, w))[3 * prog.rank:3 * prog.rank + 3])
    try:  # an indivisible batch: ValueError on every rank, naming the symbol's dim
        prog.run_global(rng.standard_normal((7, 8), np.float32), w)
    except ValueError as e:
        assert "2*k" in str(e) and "not divisible by 2" in str(e), e
    else:
        raise AssertionError("an indivisible batch ran")


@case("collectives")
def _():
    def f_(x):  # x: local [2k, 4]
        g = jax.lax.all_gather(x, "x", axis=1, tiled=True)              # [2k, 8]
        m = jax.lax.pmax(x, "x")                                        # [2k, 4]
        rs = jax.lax.psum_scatter(g, "x", scatter_dimension=0, tiled=True)  # [k, 8]
        a2a = jax.lax.all_to_all(x, "x", 0, 1, tiled=True)               # [k, 8]
        pp = jax.lax.ppermute(x, "x", perm=[(0, 1), (1, 0)])             # [2k, 4]
        return rs + a2a, m + pp

    f = jax.shard_map(f_, mesh=mesh, in_specs=(P("x"),), out_specs=(P("x"), P("x")))
    k, = jax.export.symbolic_shape("k")
    prog = compile_spmd(from_jax_spmd(f, spec((4 * k, 4), jnp.float32, "x")))
    ops = sorted(s["op"] for s in prog.plan["steps"] if s["kind"] == "collective")
    assert ops == ["all_gather", "all_reduce", "all_to_all", "collective_permute", "reduce_scatter"], ops
    want_f = jax.jit(f)
    for kk in (1, 3, 5):
        x = rng.standard_normal((4 * kk, 4), np.float32)
        got = prog.run_global(x)
        want = want_f(jax.device_put(x, S("x")))
        for g, w in zip(got, want):
            close(g, w)


@case("named_sharding_data_parallel")
def _():
    def dp(x, w, bias):
        h = jnp.tanh(x @ w + bias) * jnp.sum(x, axis=1, keepdims=True)
        return jax.nn.relu(h), jnp.sum(h * h), jnp.max(h, axis=0)

    g = jax.jit(dp, in_shardings=(S("x"), S(), S()), out_shardings=(S("x"), S(), S()))
    k, = jax.export.symbolic_shape("k")
    prog = compile_spmd(from_jax_spmd(g, jax.ShapeDtypeStruct((2 * k, 8), jnp.float32),
                                      jax.ShapeDtypeStruct((8, 4), jnp.float32), jax.ShapeDtypeStruct((4,), jnp.float32)))
    ops = [(s["op"], s["attrs"].get("reduce")) for s in prog.plan["steps"] if s["kind"] == "collective"]
    assert sorted(ops) == [("all_reduce", "max"), ("all_reduce", "sum")], ops
    w, bias = rng.standard_normal((8, 4), np.float32), rng.standard_normal((4,), np.float32)
    for n in (2, 6, 26):  # k = 1, 3, 13
        x = rng.standard_normal((n, 8), np.float32)
        for got, want in zip(prog.run_global(x, w, bias), jax.jit(dp)(x, w, bias)):
            close(got, want, 1e-4)


@case("named_sharding_tensor_parallel")
def _():
    def tp(x, w1, w2):
        return jnp.maximum(x @ w1, 0.0) @ w2

    g = jax.jit(tp, in_shardings=(S(), S(None, "x"), S("x", None)), out_shardings=S())
    b, = jax.export.symbolic_shape("b")
    prog = compile_spmd(from_jax_spmd(g, jax.ShapeDtypeStruct((b, 8), jnp.float32),
                                      jax.ShapeDtypeStruct((8, 16), jnp.float32),
                                      jax.ShapeDtypeStruct((16, 8), jnp.float32)))
    assert [s["op"] for s in prog.plan["steps"] if s["kind"] == "collective"] == ["all_reduce"]
    w1, w2 = rng.standard_normal((8, 16), np.float32), rng.standard_normal((16, 8), np.float32)
    for n in (1, 11, 40):
        x = rng.standard_normal((n, 8), np.float32)
        close(prog.run_global(x, w1, w2), jax.jit(tp)(x, w1, w2), 1e-4)


@case("named_sharding_gathered_result")
def _():
    def f_(x):
        return jnp.exp(x) * 2.0

    g = jax.jit(f_, in_shardings=(S(None, "x"),), out_shardings=S())
    k, = jax.export.symbolic_shape("k")
    prog = compile_spmd(from_jax_spmd(g, jax.ShapeDtypeStruct((k, 6), jnp.float32)))
    assert [s["op"] for s in prog.plan["steps"] if s["kind"] == "collective"] == ["all_gather"]
    for n in (1, 5):
        x = rng.standard_normal((n, 6), np.float32)
        close(prog.run_global(x), jax.jit(f_)(x))


@case("artifact_on_every_rank")
def _():
    from relax_mlir.runtime.mpi import load

    f = jax.shard_map(lambda x, w: jax.lax.psum(x @ w, "x"), mesh=mesh, in_specs=(P(None, "x"), P("x", None)),
                      out_specs=P())
    b, = jax.export.symbolic_shape("b")
    path = os.path.join(sys.argv[1], "artifact")
    comm = MPI.COMM_WORLD
    if comm.Get_rank() == 0:  # compiled once, on one rank
        compile_spmd(from_jax_spmd(f, spec((b, 6), jnp.float32, None, "x"), spec((6, 5), jnp.float32, "x", None))).export(path)
    comm.Barrier()
    prog = load(path)
    assert prog.plan["steps"][1]["op"] == "all_reduce"
    w = rng.standard_normal((6, 5), np.float32)
    for n in (1, 3, 17):
        x = rng.standard_normal((n, 6), np.float32)
        close(prog.run_global(x, w), x @ w, 1e-4)


@case("stablehlo_text_collectives")
def _():
    """collective_broadcast (no jax API emits it), all_gather and a max reduce_scatter from the
    lit test's StableHLO text, against numpy."""
    from relax_mlir.frontend.stablehlo import import_stablehlo

    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "frontend", "sharding-collectives.mlir")) as fh:
        text = fh.read()
    prog = compile_spmd(import_stablehlo(text, spmd=True))
    x = rng.standard_normal((4, 3), np.float32)
    bcast, gathered, scattered = prog.run_global(x)
    close(bcast, np.concatenate([x[:2], x[:2]]))
    close(gathered, np.concatenate([x, x]))
    close(scattered, np.maximum(x[:2], x[2:]))


@case("integer_and_half_collectives")
def _():
    def f_(a, h):
        return jax.lax.psum(a, "x"), jax.lax.pmin(a, "x"), jax.lax.psum(h, "x")

    f = jax.shard_map(f_, mesh=mesh, in_specs=(P("x"), P("x")), out_specs=(P(), P(), P()))
    k, = jax.export.symbolic_shape("k")
    prog = compile_spmd(from_jax_spmd(f, spec((2 * k, 3), jnp.int32, "x"), spec((2 * k, 3), jnp.float16, "x")))
    want_f = jax.jit(f)
    for kk in (1, 4):
        a = rng.integers(-2**30, 2**30, (2 * kk, 3)).astype(np.int32)  # the sum wraps like XLA's
        h = rng.standard_normal((2 * kk, 3)).astype(np.float16)
        got = prog.run_global(a, h)
        want = want_f(jax.device_put(a, S("x")), jax.device_put(h, S("x")))
        for g, w in zip(got, want):
            close(g, w, 0)


@case("dot_operand_gathered")
def _():
    f_ = lambda x, w: jnp.tanh(x @ w)  # noqa: E731
    b, = jax.export.symbolic_shape("b")
    # x rows and w columns split over the same axis: w gathered, the result row-split
    g = jax.jit(f_, in_shardings=(S("x"), S(None, "x")), out_shardings=S("x"))
    prog = compile_spmd(from_jax_spmd(g, jax.ShapeDtypeStruct((2 * b, 6), jnp.float32),
                                      jax.ShapeDtypeStruct((6, 8), jnp.float32)))
    assert [s["op"] for s in prog.plan["steps"] if s["kind"] == "collective"] == ["all_gather"]
    # x split along the contraction but w replicated: x gathered, the result replicated
    g2 = jax.jit(f_, in_shardings=(S(None, "x"), S()), out_shardings=S())
    prog2 = compile_spmd(from_jax_spmd(g2, jax.ShapeDtypeStruct((b, 6), jnp.float32),
                                       jax.ShapeDtypeStruct((6, 8), jnp.float32)))
    w = rng.standard_normal((6, 8), np.float32)
    for n in (1, 3, 8):
        x = rng.standard_normal((2 * n, 6), np.float32)
        close(prog.run_global(x, w), jax.jit(f_)(x, w), 1e-5)
        close(prog2.run_global(x, w), jax.jit(f_)(x, w), 1e-5)


@case("replicated_fallback")
def _():
    """Ops without a sharding rule run replicated on gathered operands; a replicated result declared
    sharded is cut by the host."""
    def f_(x, y):
        c = jnp.cumsum(jnp.concatenate([x, y], axis=1), axis=0)
        return c, x + y

    g = jax.jit(f_, in_shardings=(S("x"), S(None, "x")), out_shardings=(S("x"), S()))
    k, = jax.export.symbolic_shape("k")
    prog = compile_spmd(from_jax_spmd(g, jax.ShapeDtypeStruct((2 * k, 4), jnp.float32),
                                      jax.ShapeDtypeStruct((2 * k, 4), jnp.float32)))
    for n in (1, 5):
        x, y = rng.standard_normal((2 * n, 4), np.float32), rng.standard_normal((2 * n, 4), np.float32)
        for got, want in zip(prog.run_global(x, y), jax.jit(f_)(x, y)):
            close(got, want, 1e-5)
    # a sum whose init is 1 over the sharded dim: the init counts once
    h = lambda x: jax.lax.reduce(x, np.float32(1.0), jax.lax.add, (0,))  # noqa: E731
    prog = compile_spmd(from_jax_spmd(jax.jit(h, in_shardings=(S("x"),), out_shardings=S()),
                                      jax.ShapeDtypeStruct((2 * k, 3), jnp.float32)))
    x = rng.standard_normal((6, 3), np.float32)
    close(prog.run_global(x), jax.jit(h)(x), 1e-5)


@case("local_symbol_of_split_dim")
def _():
    """A split dim named by no multiple (2*k) gets its own local symbol; the global size must be
    even, checked before any rank runs (ValueError naming the global dim on every rank)."""
    from relax_mlir.frontend.stablehlo import import_stablehlo

    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "frontend", "sharding-spmd-local-symbol.mlir")) as fh:
        prog = compile_spmd(import_stablehlo(fh.read(), spmd=True))
    for n in (2, 6, 14):
        x = rng.standard_normal((n, 3), np.float32)
        close(prog.run_global(x), -x)
    try:
        prog.run_global(np.ones((5, 3), np.float32))
    except ValueError as e:
        assert "2*arg0_dim0_x" in str(e) and "not divisible by 2" in str(e), e
    else:
        raise AssertionError("an odd size ran")


@case("two_axis_mesh")
def _():
    mesh2 = jax.make_mesh((1, 2), ("a", "b"))

    def f_(x, w):
        return jnp.tanh(x @ w), jnp.sum(x)

    g = jax.jit(f_, in_shardings=(NamedSharding(mesh2, P("b")), NamedSharding(mesh2, P())),
                out_shardings=(NamedSharding(mesh2, P("b")), NamedSharding(mesh2, P())))
    k, = jax.export.symbolic_shape("k")
    prog = compile_spmd(from_jax_spmd(g, jax.ShapeDtypeStruct((2 * k, 4), jnp.float32),
                                      jax.ShapeDtypeStruct((4, 3), jnp.float32)))
    w = rng.standard_normal((4, 3), np.float32)
    for n in (2, 10):
        x = rng.standard_normal((n, 4), np.float32)
        for got, want in zip(prog.run_global(x, w), jax.jit(f_)(x, w)):
            close(got, want, 1e-5)


@case("unused_argument")
def _():
    def f_(x, unused, y):
        return x * y

    g = jax.jit(f_, in_shardings=(S("x"), S(), S("x")), out_shardings=S("x"))
    prog = compile_spmd(from_jax_spmd(g, jax.ShapeDtypeStruct((4, 3), jnp.float32),
                                      jax.ShapeDtypeStruct((5,), jnp.float32), jax.ShapeDtypeStruct((4, 3), jnp.float32)))
    x, y = rng.standard_normal((4, 3), np.float32), rng.standard_normal((4, 3), np.float32)
    close(prog.run_global(x, np.zeros(5, np.float32), y), x * y)


@case("bad_rank_input")
def _():
    f = jax.shard_map(lambda x: jax.lax.psum(x * 2.0, "x"), mesh=mesh, in_specs=(P("x"),), out_specs=P())
    k, = jax.export.symbolic_shape("k")
    prog = compile_spmd(from_jax_spmd(f, spec((2 * k, 3), jnp.float32, "x")))
    x = np.ones((2, 3), np.float32) if prog.rank == 0 else np.ones((2, 5), np.float32)
    try:
        prog(x)
    except SpmdError as e:
        assert "rank" in str(e), e
    else:
        raise AssertionError("mismatched shards ran")
    # every rank's input fails the compiled program's own check: every rank raises, naming the ranks
    try:
        prog(np.ones((2, 4), np.float32))
    except SpmdError as e:
        assert "rank 0" in str(e) and "rank 1" in str(e), e
    else:
        raise AssertionError("a wrong trailing dim ran")
    # full arrays that only one rank gets wrong (indivisible on rank 1): both ranks raise, naming rank 1
    full = np.ones((4, 3), np.float32) if prog.rank == 0 else np.ones((5, 3), np.float32)
    try:
        prog.run_global(full)
    except SpmdError as e:
        assert "rank 1" in str(e) and "not divisible by 2" in str(e) and "rank 0" not in str(e), e
    else:
        raise AssertionError("an indivisible array on one rank ran")
    # the program still runs after the failed calls (no rank is left inside a collective)
    y = np.ones((2, 3), np.float32)
    close(prog(y), np.full((2, 3), 4.0, np.float32))


os.makedirs(sys.argv[1], exist_ok=True)
from mpi4py import MPI  # noqa: E402

with open(os.path.join(sys.argv[1], f"rank{MPI.COMM_WORLD.Get_rank()}.json"), "w") as fh:
    json.dump(results, fh)
