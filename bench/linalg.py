"""Dense linear algebra, relax-mlir against jax.jit (LAPACK through XLA's CPU custom calls).

One export per function with a symbolic matrix size n, compiled once by relax-mlir; jax.jit per
shape. Calls interleaved (one of each side per round), median of `--rounds` rounds, ms per call;
results checked against jax.jit first.

    python bench/linalg.py --sizes 16,64,200,400 --rounds 9 [--only eigvalsh,pinv]
"""
from __future__ import annotations

import argparse
import os
import numpy as np

from _jaxbench import interleaved_ms


def functions():
    import jax
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    def spd(m, seed):
        a = np.random.default_rng(seed).standard_normal((m, m)).astype(np.float32)
        return a @ a.T + m * np.eye(m, dtype=np.float32)

    def gen(m, seed, cols=None):
        return np.random.default_rng(seed).standard_normal((m, cols or m)).astype(np.float32)

    return {
        "cholesky": (lambda a: jnp.linalg.cholesky(a), lambda m: [spd(m, 1)]),
        "cho_solve (8 rhs)": (lambda a, b: jsl.cho_solve(jsl.cho_factor(a), b),
                              lambda m: [spd(m, 2), gen(m, 3, 8)]),
        "solve (8 rhs)": (lambda a, b: jnp.linalg.solve(a, b), lambda m: [gen(m, 4), gen(m, 5, 8)]),
        "inv": (lambda a: jnp.linalg.inv(a), lambda m: [gen(m, 6)]),
        "slogdet": (lambda a: jnp.linalg.slogdet(a)[1], lambda m: [gen(m, 7)]),
        "eigvalsh": (lambda a: jnp.linalg.eigvalsh(a), lambda m: [spd(m, 8)]),
        "svdvals": (lambda a: jnp.linalg.svd(a, compute_uv=False), lambda m: [gen(m, 9)]),
        # the vectors where their signs cancel (frontend/stablehlo/signs.py)
        "eigh: V diag(exp w) V^T": (lambda a: (lambda w, v: (v * jnp.exp(w / a.shape[0])) @ v.T)(*jnp.linalg.eigh(a)),
                                    lambda m: [spd(m, 10)]),
        "pinv": (lambda a: jnp.linalg.pinv(a), lambda m: [gen(m, 11)]),
        # gtsv: a diagonally dominant tridiagonal system, 8 right-hand sides (session 28)
        "tridiagonal_solve (8 rhs)": (lambda dl, d, du, b: jax.lax.linalg.tridiagonal_solve(dl, d, du, b),
                                      lambda m: [gen(1, 12, m)[0], 4 + np.abs(gen(1, 13, m)[0]), gen(1, 14, m)[0],
                                                 gen(m, 15, 8)]),
        # gradients through the values (V diag(g) V^T; session 28)
        "grad of sum(eigvalsh)^2": (jax.grad(lambda a: jnp.sum(jnp.linalg.eigvalsh(a) ** 2)), lambda m: [spd(m, 16)]),
        "grad of nuclear norm": (jax.grad(lambda a: jnp.linalg.norm(a, "nuc")), lambda m: [gen(m, 17)]),
        # forward mode: diag(V^T dA V) and V (F * V^T dA V) (session 29)
        "jvp of eigvalsh": (lambda a, t: jax.jvp(jnp.linalg.eigvalsh, (a,), (t,)), lambda m: [spd(m, 18), spd(m, 19)]),
        "jvp of V diag(exp w) V^T": (lambda a, t: jax.jvp(lambda x: (lambda w, v: (v * jnp.exp(w / x.shape[0])) @ v.T)(
            *jnp.linalg.eigh(x)), (a,), (t,)), lambda m: [spd(m, 20), spd(m, 21)]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="16,64,200,400")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--only", default="", help="comma-separated function names (default: all)")
    args = ap.parse_args()
    import jax
    import jax.numpy as jnp

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    sizes = [int(s) for s in args.sizes.split(",")]
    (n,) = jax.export.symbolic_shape("n")
    print(f"load average before: {os.getloadavg()}")
    print("| function | n | jax.jit ms | relax-mlir ms | / jax |")
    print("|---|---|---|---|---|")
    only = [o for o in args.only.split(",") if o]
    for name, (f, make) in functions().items():
        if only and not any(name.startswith(o) for o in only):
            continue
        example = make(5)
        specs = [jax.ShapeDtypeStruct(tuple(n if d == 5 else d for d in a.shape), jnp.float32) for a in example]
        exe = relax_mlir.compile(from_jax(f, *specs))
        ref = jax.jit(f)
        for m in sizes:
            xs = make(m)
            want = [np.asarray(w) for w in jax.tree.leaves(ref(*xs))]
            got = exe(*xs)
            got = list(got) if isinstance(got, (list, tuple)) else [got]
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-3 * max(1.0, float(np.abs(w).max())))
            t = interleaved_ms({"ours": lambda: exe(*xs), "jax": lambda: jax.block_until_ready(ref(*xs))},
                               args.rounds)
            a, b = t["jax"], t["ours"]
            print(f"| {name} | {m} | {a:.3f} | {b:.3f} | {b / a:.2f} |", flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
