"""Loops that write one row of a carried buffer per step (issue 16): lax.scan stacking its outputs,
a GRU in lax.scan, fori_loops updating a buffer with `.at[i].set` (scatter) and with
dynamic_update_slice, a scan whose step updates the stack inside a lax.cond, and the library
layers that do it: flax linen's nn.RNN over an OptimizedLSTMCell (batch 2) and equinox's GRUCell
in lax.scan (hidden size 32 everywhere). Each is exported
with a symbolic length T, compiled ONCE with relax-mlir, checked against jax.jit, then timed at
T = 16, 256, 1024, 4096, interleaved with jax.jit (one call of each in turn, median of the
repeats). A per-step copy of the carried buffer shows as a ratio that grows with T.

    python bench/scan.py [--repeats 30] [--sizes 16,256,1024,4096] [name ...]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("KMP_BLOCKTIME", "0")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import numpy as np  # noqa: E402

D = 32  # feature / hidden size


def _cases():
    import jax
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(0)

    def rnd(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def scan_stack(xs, h0, w):
        def cell(h, x):
            h = jnp.tanh(x + h @ w)
            return h, h * 2.0
        return lax.scan(cell, h0, xs)

    def gru(xs, h0, wz, uz, wh, uh):
        def cell(h, x):
            z = jax.nn.sigmoid(x @ wz + h @ uz)
            hh = jnp.tanh(x @ wh + (z * h) @ uh)
            h = (1.0 - z) * h + z * hh
            return h, h
        return lax.scan(cell, h0, xs)

    def fori_scatter(x):
        return lax.fori_loop(0, x.shape[0], lambda i, s: s.at[i].set(jnp.sin(s[i]) + s[i - 1]), x)

    def fori_dus(x, v):
        def body(i, s):
            return lax.dynamic_update_slice(s, (v * i.astype(jnp.float32))[None], (i, 0))
        return lax.fori_loop(0, x.shape[0], body, x * 0.5)

    def scan_cond(xs):
        def step(c, x):
            i, s = c
            s = lax.cond(x[0] > 0, lambda s: s.at[i].set(x), lambda s: s.at[i].set(-x), s)
            return (i + 1, s), None
        return lax.scan(step, (jnp.int32(0), jnp.zeros_like(xs)), xs)[0][1]

    def f32(*dims):
        return jax.ShapeDtypeStruct(dims, jnp.float32)

    def flax_lstm():
        import flax.linen as nn
        rnn = nn.RNN(nn.OptimizedLSTMCell(D))
        params = rnn.init(jax.random.PRNGKey(0), jnp.zeros((2, 5, D), jnp.float32))
        return lambda x: rnn.apply(params, x)

    def eqx_gru():
        import equinox as eqx
        cell = eqx.nn.GRUCell(D, D, key=jax.random.PRNGKey(1))
        return lambda xs, h0: lax.scan(lambda h, x: (cell(x, h),) * 2, h0, xs)

    from jax import export
    t, = export.symbolic_shape("t")
    return {
        "scan_stack": (scan_stack, [f32(t, D), f32(D), f32(D, D)],
                       lambda n: [rnd(n, D), rnd(D), rnd(D, D, scale=0.2)]),
        "gru": (gru, [f32(t, D), f32(D)] + [f32(D, D)] * 4,
                lambda n: [rnd(n, D), rnd(D)] + [rnd(D, D, scale=0.2) for _ in range(4)]),
        "fori_scatter": (fori_scatter, [f32(t, D)], lambda n: [rnd(n, D)]),
        "fori_dus": (fori_dus, [f32(t, D), f32(D)], lambda n: [rnd(n, D), rnd(D)]),
        "scan_cond": (scan_cond, [f32(t, D)], lambda n: [rnd(n, D)]),
        "flax_lstm": (flax_lstm(), [f32(2, t, D)], lambda n: [rnd(2, n, D)]),
        "eqx_gru": (eqx_gru(), [f32(t, D), f32(D)], lambda n: [rnd(n, D), rnd(D)]),
    }


def bench(name: str, case, sizes, repeats: int) -> list[str]:
    import jax

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    fn, specs, make_args = case
    t0 = time.perf_counter()
    exe = relax_mlir.compile(from_jax(fn, *specs))
    compile_s = time.perf_counter() - t0
    ref = jax.jit(fn)
    rows = []
    for n in sizes:
        args = make_args(n)
        got, want = exe(*args), ref(*args)
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-3, atol=2e-4)
        jax.block_until_ready(ref(*args))
        ours, theirs = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            exe(*args)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            jax.block_until_ready(ref(*args))
            theirs.append(time.perf_counter() - t)
        a, b = statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3
        rows.append(f"{name:14s} {compile_s:9.2f} {n:6d} {a:10.3f} {b:10.3f} {a / b:7.2f}")
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--sizes", default="16,256,1024,4096")
    a = p.parse_args(argv)
    cases = _cases()
    sizes = [int(s) for s in a.sizes.split(",")]
    print(f"{'case':14s} {'compile s':>9s} {'T':>6s} {'relax ms':>10s} {'jax ms':>10s} {'ratio':>7s}")
    for name in a.names or list(cases):
        for row in bench(name, cases[name], sizes, a.repeats):
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
