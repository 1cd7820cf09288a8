"""Sharded programs on 1 and 2 MPI ranks: time per call and bytes communicated per call against
the theoretical minimum (runtime/mpi.py `min_bytes_sent`).

    mpiexec -n 2 python bench/sharded.py

Per example: the unsharded function compiled for one device (rank 0 alone, the other rank waits
in a barrier) and the sharded per-device program on 2 ranks (each passing its local shards),
interleaved rep by rep, medians. On the 2-core machines no speed-up is expected (and other jobs
share the cores); the communication volume is the figure.
"""
import os
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
os.environ.setdefault("RELAX_MLIR_NUM_THREADS", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402
from mpi4py import MPI  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402
from relax_mlir.spmd import compile_spmd, from_jax_spmd  # noqa: E402

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
mesh = jax.make_mesh((2,), ("x",))


def S(*p):
    return NamedSharding(mesh, P(*p))


def sds(shape, *p):
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=S(*p))


def mlp_case(b=64, d=256, h=1024):
    f = lambda x, w1, w2: jnp.maximum(x @ w1, 0.0) @ w2  # noqa: E731
    sm = jax.shard_map(lambda x, w1, w2: jax.lax.psum(f(x, w1, w2), "x"), mesh=mesh,
                       in_specs=(P(), P(None, "x"), P("x", None)), out_specs=P())
    n, = jax.export.symbolic_shape("b")
    rng = np.random.default_rng(0)
    full = [rng.standard_normal(s, np.float32) for s in ((b, d), (d, h), (h, d))]
    local = [full[0], full[1][:, rank * h // 2:(rank + 1) * h // 2], full[2][rank * h // 2:(rank + 1) * h // 2]]
    return ("mlp_tp", f, [jax.ShapeDtypeStruct((n, d), jnp.float32), jax.ShapeDtypeStruct((d, h), jnp.float32),
                          jax.ShapeDtypeStruct((h, d), jnp.float32)],
            sm, [sds((n, d)), sds((d, h), None, "x"), sds((h, d), "x", None)], full, local)


def dp_case(b=256, d=256, h=256):
    f = lambda x, w: (jnp.tanh(x @ w), jnp.mean(jnp.tanh(x @ w) ** 2))  # noqa: E731
    g = jax.jit(f, in_shardings=(S("x"), S()), out_shardings=(S("x"), S()))
    k, = jax.export.symbolic_shape("k")
    rng = np.random.default_rng(0)
    full = [rng.standard_normal((b, d), np.float32), rng.standard_normal((d, h), np.float32)]
    local = [full[0][rank * b // 2:(rank + 1) * b // 2], full[1]]
    spec = [jax.ShapeDtypeStruct((2 * k, d), jnp.float32), jax.ShapeDtypeStruct((d, h), jnp.float32)]
    return ("data_parallel", f, spec, g, spec, full, local)


def time_it(fn, args, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn(*args)
        ts.append(time.perf_counter() - t)
    return ts


def main(reps=30):
    rows = []
    for name, f, spec1, fs, spec2, full, local in (mlp_case(), dp_case()):
        prog = compile_spmd(from_jax_spmd(fs if hasattr(fs, "trace") else jax.jit(fs), *spec2))
        one = relax_mlir.compile(from_jax(f, *spec1)) if rank == 0 else None
        prog(*local)  # warm
        if one is not None:
            one(*full)
        t1, t2 = [], []
        b0, m0 = prog.bytes_sent, prog.min_bytes_sent
        for _ in range(reps):
            comm.Barrier()
            if rank == 0:
                t1 += time_it(one, full, 1)
            comm.Barrier()
            t2 += time_it(prog, local, 1)
        sent, least = (prog.bytes_sent - b0) / reps, (prog.min_bytes_sent - m0) / reps
        t2max = comm.reduce(np.median(t2), op=MPI.MAX)
        if rank == 0:
            rows.append((name, np.median(t1) * 1e3, t2max * 1e3, sent, least))
    if rank == 0:
        print(f"load average: {os.getloadavg()}")
        print("| example | 1 rank (ms) | 2 ranks (ms, slowest rank) | payload per rank per call (B) | minimum sent per rank (B) |")
        print("| --- | --- | --- | --- | --- |")
        for r in rows:
            print(f"| {r[0]} | {r[1]:.3f} | {r[2]:.3f} | {r[3]:.0f} | {r[4]:.0f} |")


if __name__ == "__main__":
    main()
