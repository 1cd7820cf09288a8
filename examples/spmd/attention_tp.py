"""Tensor-parallel attention over MPI: the heads split across ranks (Megatron style): Q, K, V
projections column-parallel (each rank holds its heads), the output projection row-parallel,
one all-reduce. Sequence length s symbolic.

    mpiexec -n 2 python examples/spmd/attention_tp.py
"""
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from relax_mlir.spmd import compile_spmd, from_jax_spmd  # noqa: E402

D, HEADS, HD = 16, 4, 4  # model dim, heads, head dim (HEADS * HD = D)


def attention(x, wq, wk, wv, wo):
    """x [s, D]; wq/wk/wv [D, heads, HD]; wo [heads, HD, D]; causal softmax attention."""
    q = jnp.einsum("sd,dhe->hse", x, wq)
    k = jnp.einsum("sd,dhe->hse", x, wk)
    v = jnp.einsum("sd,dhe->hse", x, wv)
    scores = jnp.einsum("hse,hte->hst", q, k) / np.float32(np.sqrt(HD))
    s = x.shape[0]
    mask = jnp.arange(s)[:, None] >= jnp.arange(s)[None, :]
    scores = jnp.where(mask[None], scores, -1e30)
    p = jax.nn.softmax(scores, axis=-1)
    o = jnp.einsum("hst,hte->hse", p, v)
    return jnp.einsum("hse,hed->sd", o, wo)


def build():
    mesh = jax.make_mesh((2,), ("x",))
    S = lambda *p: NamedSharding(mesh, P(*p))  # noqa: E731

    def local(x, wq, wk, wv, wo):  # this rank's heads; the head-sum of the output projection is a psum
        return jax.lax.psum(attention(x, wq, wk, wv, wo), "x")

    hs = P(None, "x", None)
    f = jax.shard_map(local, mesh=mesh, in_specs=(P(), hs, hs, hs, P("x", None, None)), out_specs=P())
    s, = jax.export.symbolic_shape("s")
    w = jax.ShapeDtypeStruct((D, HEADS, HD), jnp.float32, sharding=S(None, "x", None))
    return from_jax_spmd(f, jax.ShapeDtypeStruct((s, D), jnp.float32, sharding=S()), w, w, w,
                         jax.ShapeDtypeStruct((HEADS, HD, D), jnp.float32, sharding=S("x", None, None)))


def main(lengths=(1, 7, 32)):
    prog = compile_spmd(build())
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((D, HEADS, HD), dtype=np.float32) * 0.3 for _ in range(3)]
    wo = rng.standard_normal((HEADS, HD, D), dtype=np.float32) * 0.3
    for n in lengths:
        x = rng.standard_normal((n, D), dtype=np.float32)
        got = prog.run_global(x, *ws, wo)
        np.testing.assert_allclose(got, jax.jit(attention)(x, *ws, wo), rtol=1e-4, atol=1e-5)
    if prog.rank == 0:
        print(f"attention_tp: ranks={prog.size} seq={list(lengths)} ok")


if __name__ == "__main__":
    main(tuple(int(a) for a in sys.argv[1:]) or (1, 7, 32))
