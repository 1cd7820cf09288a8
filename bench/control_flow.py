"""The graph's loops on each target: an RNN cell over a symbolic sequence (lax.scan) and a
data-dependent while loop, compiled once per target (cpu, vulkan; the GPU targets run the loop on
the host program and read each decision back from the device), against jax.jit, interleaved (one
call of each in turn, best of the repeats). Reports ms per call and per loop iteration.

    python bench/control_flow.py [--repeats 7] [--targets cpu,vulkan]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import numpy as np  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--targets", default="cpu,vulkan")
    args = ap.parse_args()
    import jax
    import jax.numpy as jnp

    import relax_mlir

    d = 64
    rng = np.random.default_rng(0)
    wh = (rng.standard_normal((d, d)) * 0.1).astype(np.float32)

    def rnn(x, wh):
        return jax.lax.scan(lambda h, xt: (jnp.tanh(h @ wh + xt), None), jnp.zeros(d, x.dtype), x)[0]

    def halve(x):  # trip count = how many halvings bring the norm under 1
        return jax.lax.while_loop(lambda c: jnp.abs(c[0]).sum() > 1.0, lambda c: (c[0] * 0.5, c[1] + 1), (x, 0))

    s = jax.export.symbolic_shape("s")[0]
    f32 = jnp.float32
    models = [("scan rnn d=64", rnn, [jax.ShapeDtypeStruct((s, d), f32), jax.ShapeDtypeStruct((d, d), f32)],
               lambda n: [rng.standard_normal((n, d)).astype(np.float32), wh], lambda n: n),
              ("while halve", halve, [jax.ShapeDtypeStruct((s,), jnp.float32)],
               lambda n: [np.full(n, 2.0 ** 20, np.float32)], lambda n: int(np.ceil(np.log2(n * 2.0 ** 20))) + 1)]
    targets = args.targets.split(",")
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    print(f"{'model':16s} {'n':>6s} {'iters':>6s} {'jax ms':>8s} "
          + " ".join(f"{t + ' ms':>10s} {'/ jax':>6s}" for t in targets) + " "
          + " ".join(f"{t + ' us/it':>11s}" for t in targets))
    for name, fn, specs, make, iters in models:
        exp = jax.export.export(jax.jit(fn))(*specs)
        exes = {t: relax_mlir.compile(exp, target=t) for t in targets}
        jf = jax.jit(fn)
        for n in (16, 256, 2048):
            xs = make(n)
            want = jax.tree.leaves(jf(*xs))
            for t, exe in exes.items():
                got = exe(*xs)
                for g, w in zip(got if isinstance(got, (tuple, list)) else [got], want):
                    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-3, atol=1e-3)
            times = {k: [] for k in ["jax", *targets]}
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                jax.block_until_ready(jf(*xs))
                times["jax"].append(time.perf_counter() - t0)
                for t, exe in exes.items():
                    t0 = time.perf_counter()
                    exe(*xs)
                    times[t].append(time.perf_counter() - t0)
            best = {k: min(v) * 1e3 for k, v in times.items()}
            k = iters(n)
            print(f"{name:16s} {n:6d} {k:6d} {best['jax']:8.3f} "
                  + " ".join(f"{best[t]:10.3f} {best[t] / best['jax']:6.2f}" for t in targets) + " "
                  + " ".join(f"{best[t] * 1e3 / k:11.1f}" for t in targets), flush=True)


if __name__ == "__main__":
    main()
