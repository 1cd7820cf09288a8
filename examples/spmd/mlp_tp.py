"""Tensor-parallel MLP over MPI: column-parallel W1, row-parallel W2, one all-reduce.

    mpiexec -n 2 python examples/spmd/mlp_tp.py

Every rank compiles the same per-device program once (symbolic batch b) and runs it at several
batch sizes; rank 0 compares with jax.jit of the unsharded function.
"""
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from relax_mlir.spmd import compile_spmd, from_jax_spmd  # noqa: E402

D, H = 16, 32


def mlp(x, w1, w2):
    return jnp.maximum(x @ w1, 0.0) @ w2


def build():
    mesh = jax.make_mesh((2,), ("x",))
    S = lambda *p: NamedSharding(mesh, P(*p))  # noqa: E731

    def local(x, w1, w2):  # w1: columns split, w2: rows split; the partial products are summed
        return jax.lax.psum(jnp.maximum(x @ w1, 0.0) @ w2, "x")

    f = jax.shard_map(local, mesh=mesh, in_specs=(P(), P(None, "x"), P("x", None)), out_specs=P())
    b, = jax.export.symbolic_shape("b")
    return from_jax_spmd(f, jax.ShapeDtypeStruct((b, D), jnp.float32, sharding=S()),
                         jax.ShapeDtypeStruct((D, H), jnp.float32, sharding=S(None, "x")),
                         jax.ShapeDtypeStruct((H, D), jnp.float32, sharding=S("x", None)))


def main(batches=(1, 7, 64)):
    prog = compile_spmd(build())
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((D, H), dtype=np.float32)
    w2 = rng.standard_normal((H, D), dtype=np.float32)
    worst = 0.0
    for b in batches:
        x = rng.standard_normal((b, D), dtype=np.float32)
        got = prog.run_global(x, w1, w2)
        want = np.asarray(jax.jit(mlp)(x, w1, w2))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
        worst = max(worst, float(np.abs(got - want).max()))
    if prog.rank == 0:
        print(f"mlp_tp: ranks={prog.size} batches={list(batches)} max|err|={worst:.2e} ok")


if __name__ == "__main__":
    main(tuple(int(a) for a in sys.argv[1:]) or (1, 7, 64))
