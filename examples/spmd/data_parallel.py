"""Data-parallel over MPI: the batch split across ranks (jax.jit with NamedSharding in/out
shardings; relax propagates the sharding, a loss-like full reduction becomes one all-reduce).

    mpiexec -n 2 python examples/spmd/data_parallel.py

The batch is exported as 2*k (jax requires a sharded symbolic dim to be a multiple of the mesh
axis); each rank's local batch is k, bound at run time; one compile serves every k. An odd
batch raises ValueError on every rank.
"""
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from relax_mlir.spmd import compile_spmd, from_jax_spmd  # noqa: E402

D, H = 16, 8


def model(x, w, b):
    h = jnp.tanh(x @ w + b)
    return h, jnp.mean(h * h)  # per-example activations (sharded) and a scalar (replicated)


def build():
    mesh = jax.make_mesh((2,), ("x",))
    S = lambda *p: NamedSharding(mesh, P(*p))  # noqa: E731
    g = jax.jit(model, in_shardings=(S("x"), S(), S()), out_shardings=(S("x"), S()))
    k, = jax.export.symbolic_shape("k")
    return from_jax_spmd(g, jax.ShapeDtypeStruct((2 * k, D), jnp.float32), jax.ShapeDtypeStruct((D, H), jnp.float32),
                         jax.ShapeDtypeStruct((H,), jnp.float32))


def main(batches=(2, 14, 64)):
    prog = compile_spmd(build())
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((D, H), dtype=np.float32), rng.standard_normal((H,), dtype=np.float32)
    for n in batches:
        x = rng.standard_normal((n, D), dtype=np.float32)
        h, loss = prog.run_global(x, w, b)
        want_h, want_loss = jax.jit(model)(x, w, b)
        np.testing.assert_allclose(h, want_h, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(loss, want_loss, rtol=1e-5, atol=1e-6)
    try:
        prog.run_global(rng.standard_normal((7, D), dtype=np.float32), w, b)
    except ValueError as e:
        msg = str(e)
    else:
        raise AssertionError("an odd batch ran")
    if prog.rank == 0:
        print(f"data_parallel: ranks={prog.size} batches={list(batches)} ok; batch 7: {msg}")


if __name__ == "__main__":
    main(tuple(int(a) for a in sys.argv[1:]) or (2, 14, 64))
