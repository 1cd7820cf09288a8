"""Gradients of the differential fuzzer's programs: for a seed, jax.grad of a weighted sum of the
program's float results with respect to its float arguments (float32 / float64; programs with
NaN / Inf inputs, half-precision or complex arguments are skipped), exported with the program's
symbolic dims, compiled ONCE and compared with jax.jit at every binding (campaign.compare, as an
inexact float chain). The transposes of slices, pads, convolutions, gathers and pools over
symbolic and zero-size dims are programs the forward fuzzer never writes (seed 2412535: the
gradient of a convolution whose output has a 0 dim was an internal error).

Known divergence, XLA's: a floor / trunc of a quotient that is exactly an integer where XLA divides
by a broadcast divisor as a product with its reciprocal (seed 2413774: jnp.remainder(x, y) with
x == y, whose gradient takes floor(|x / y|) = 0 in jax.jit, 1 in IEEE arithmetic and here).

In-process (no worker per batch: a signal ends the run, and names its seed on stderr first):

    python test/python/fuzz/grad_campaign.py --programs 1000 --first-seed 2412200 --out grads.jsonl

`--mode jvp` takes forward-mode derivatives instead (jax.jvp along a fixed tangent), `--mode hvp`
Hessian-vector products (the jvp of the gradient): their programs carry tangents through loops,
sorts, scatters and linear algebra the reverse mode never writes.
"""
from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # test/python: `import fuzz`

from fuzz import campaign, gen  # noqa: E402

FLOATS = ("float32", "float64")


def gradient_program(prog: gen.Program, mode: str = "grad"):
    """(jax function of the program's arguments giving the derivatives, the argument indices
    differentiated), or None where the program has no float argument and result to differentiate.
    `mode`: "grad" (reverse: jax.grad of a weighted sum of the float results), "jvp" (forward:
    jax.jvp of the float results along a fixed tangent of every float argument) or "hvp"
    (forward over reverse: the jvp of that gradient, a Hessian-vector product)."""
    import jax
    import jax.numpy as jnp

    wrt = tuple(i for i, a in enumerate(prog.args) if a.dtype in FLOATS and a.index_into is None)
    outs = [k for k, o in enumerate(prog.outputs) if prog.values[o].dtype in FLOATS]
    if prog.specials or not wrt or not outs or any(a.dtype not in FLOATS + gen.INTS + gen.UINTS + ("bool",)
                                                   for a in prog.args):
        return None
    f = prog.function()

    def loss(*args):
        results = f(*args)
        total = jnp.zeros((), jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)
        for k in outs:
            y = results[k]
            w = jnp.cos(jnp.arange(y.size, dtype=y.dtype).reshape(y.shape) * 0.37)  # a fixed cotangent
            total = total + (jnp.where(jnp.isfinite(y), y, 0) * w).sum().astype(total.dtype)
        return total

    def tangent(x, k):
        return jnp.sin(jnp.arange(x.size, dtype=x.dtype).reshape(x.shape) * 0.53 + k)

    def along(g):
        """The derivative of g (a function of the float arguments) along the fixed tangents."""
        def fn(*args):
            def of(*fargs):
                full = list(args)
                for i, v in zip(wrt, fargs):
                    full[i] = v
                return g(*full)
            prim = tuple(args[i] for i in wrt)
            return jax.jvp(of, prim, tuple(tangent(x, k) for k, x in enumerate(prim)))[1]
        return fn

    if mode == "jvp":
        return along(lambda *a: tuple(f(*a)[k] for k in outs)), wrt
    grad = jax.grad(loss, argnums=wrt)
    if mode == "hvp":
        return along(grad), wrt
    return grad, wrt


def run_seed(seed: int, mode: str = "grad") -> dict:
    """{"seed", "status": skipped | generator | ok | refused | wrong | error, "detail"}."""
    import jax

    import relax_mlir

    prog = gen.generate(seed)
    made = gradient_program(prog, mode)
    if made is None:
        return {"seed": seed, "status": "skipped"}
    fn, _ = made
    try:
        exported = jax.export.export(jax.jit(fn))(*prog.specs())
    except Exception as e:  # noqa: BLE001 (jax cannot export this gradient: not ours)
        return {"seed": seed, "status": "generator", "detail": f"{type(e).__name__}: {e}"[:300]}
    try:
        exe = relax_mlir.compile(exported)
    except (relax_mlir.CompileError, NotImplementedError, ValueError) as e:
        internal = "internal error" in str(e) or "Traceback" in str(e)
        return {"seed": seed, "status": "error" if internal else "refused", "detail": f"{type(e).__name__}: {e}"[:2000]}
    ref = jax.jit(fn)
    for env in prog.bindings():
        args = gen.make_inputs(prog, env)
        want = [np.asarray(x) for x in ref(*args)]
        got = exe(*args)
        got = [np.asarray(x) for x in (got if isinstance(got, tuple) else (got,))]
        if len(got) != len(want):
            return {"seed": seed, "status": "wrong", "detail": f"{env}: {len(got)} results, want {len(want)}"}
        for k, (g, w) in enumerate(zip(got, want)):
            # errors against max(1, |gradient|): a gradient that is 0 in exact arithmetic comes out
            # as rounding noise on both sides (seed 70003267: angle((a - b)(1 - i)), -3.7e-9 in jax)
            m = campaign.compare(g, w, exact=False, order_dependent=True, unit_scale=True)
            if m is not None:
                return {"seed": seed, "status": "wrong", "detail": f"{env}: gradient #{k}: {m}"}
    return {"seed": seed, "status": "ok"}


def main() -> int:
    return campaign.in_process_main(run_seed, __doc__.split("\n\n")[0], modes=("grad", "jvp", "hvp"))


if __name__ == "__main__":
    sys.exit(main())
