"""The differential fuzzer's programs under jax.vmap over a symbolic batch `b`: for a seed, each
argument is batched at a random axis (or, some of them, not batched: in_axes None), exported with
the program's symbolic dims and `b`, compiled ONCE and compared with jax.jit of the same vmap at
every binding (b = 1, 2, 5). jax's batching rules write programs the forward fuzzer never does: a
dynamic_slice with batched starts becomes a gather, a while loop with a batched predicate runs
until every element's predicate is false (selects in its body), a convolution with a batched kernel
is a grouped one, a scatter gains batch dims, a cond with a batched predicate runs both branches.

A mismatch against jax's vmap is checked as campaign.check_program checks the forward program's:
against jax.jit of the program on each batch element, stacked (the unbatched meaning of the vmap;
XLA may compute its own vmap differently, as it computes the forward program differently under
fusion), on inputs one float width wider, and with the float inputs moved by a few ulps.

In-process (no worker per batch: a signal ends the run, and names its seed on stderr first):

    python test/python/fuzz/vmap_campaign.py --programs 500 --first-seed 2415000 --out vmap.jsonl
"""
from __future__ import annotations

import dataclasses
import os
import random
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # test/python: `import fuzz`

from fuzz import campaign, gen  # noqa: E402

BATCHES = (1, 2, 5)  # b at the three bindings of gen.BINDINGS


def batching(prog: gen.Program) -> list[int | None]:
    """in_axes of each argument (deterministic in the seed): at least one argument batched."""
    r = random.Random(prog.seed * 7919 + 17)
    axes = [None if r.random() < 0.3 else r.randint(0, len(a.dims)) for a in prog.args]
    if all(x is None for x in axes):
        k = r.randrange(len(axes))
        axes[k] = r.randint(0, len(prog.args[k].dims))
    return axes


def specs(prog: gen.Program, axes):
    import jax

    names = prog.symbols + ["b"]
    dims = dict(zip(names, jax.export.symbolic_shape(", ".join(names))))
    out = []
    for a, ax in zip(prog.args, axes):
        shape = [d if isinstance(d, int) else eval(str(d), {}, dims) for d in a.dims]  # noqa: S307
        if ax is not None:
            shape.insert(ax, dims["b"])
        out.append(jax.ShapeDtypeStruct(tuple(shape), np.dtype(a.dtype) if a.dtype != "bfloat16"
                                        else jax.numpy.bfloat16))
    return out


def inputs(prog: gen.Program, axes, env: dict, batch: int) -> list[np.ndarray]:
    """Batch element i's arguments are the program's inputs for seed + i (so an element's values
    are the forward fuzzer's kind: its index arguments in range, its specials); an unbatched
    argument is element 0's."""
    per = [gen.make_inputs(dataclasses.replace(prog, seed=prog.seed + 1_000_003 * i), env) for i in range(batch)]
    return [per[0][k] if ax is None else np.stack([p[k] for p in per], axis=ax) for k, ax in enumerate(axes)]


def _elementwise_reference(jitted_one, args, axes, batch, want) -> list | None:
    """jax.jit of the unbatched program on each batch element, stacked on axis 0; None where it
    does not run or its shapes differ."""
    try:
        rows = []
        for i in range(batch):
            one = [a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, axes)]
            rows.append([np.asarray(x) for x in campaign.as_list(jitted_one(*one))])
        out = [np.stack([r[k] for r in rows]) for k in range(len(rows[0]))]
    except Exception:  # noqa: BLE001
        return None
    if len(out) != len(want) or any(o.shape != np.asarray(w).shape for o, w in zip(out, want)):
        return None
    return out


def run_seed(seed: int) -> dict:
    """{"seed", "status": generator | unsupported | ok | refused | wrong | error, "detail"}."""
    import jax

    import relax_mlir
    from relax_mlir.frontend.jax import UnsupportedOpError

    prog = gen.generate(seed)
    axes = batching(prog)
    res = {"seed": seed, "in_axes": axes}
    try:
        fn = jax.vmap(prog.function(), in_axes=axes)
        exported = jax.export.export(jax.jit(fn))(*specs(prog, axes))
    except Exception as e:  # noqa: BLE001 (jax cannot batch or export this: not ours)
        return {**res, "status": "generator", "detail": f"{type(e).__name__}: {e}"[:300]}
    try:
        exe = relax_mlir.compile(exported)
    except UnsupportedOpError as e:
        return {**res, "status": "unsupported", "detail": str(e)[:500]}
    except (relax_mlir.CompileError, NotImplementedError, ValueError) as e:
        internal = "internal error" in str(e) or "Traceback" in str(e)
        return {**res, "status": "error" if internal else "refused", "detail": f"{type(e).__name__}: {e}"[:2000]}
    except Exception as e:  # noqa: BLE001 (anything else out of compile() is a bug)
        return {**res, "status": "error", "detail": f"{type(e).__name__}: {e}"[:2000]}
    ref_one = prog.function(reference=True)
    jitted = jax.jit(jax.vmap(ref_one, in_axes=axes))
    jitted_one = jax.jit(ref_one)
    flags = list(zip(prog.exact_outputs(), prog.output_precisions(), prog.order_dependent_outputs(),
                     prog.unit_scale_outputs()))
    for env, batch in zip(prog.bindings() * (3 if len(prog.bindings()) == 1 else 1), BATCHES):
        args = inputs(prog, axes, env, batch)
        where = {**env, "b": batch}
        try:
            want = [np.asarray(w) for w in campaign.as_list(jitted(*args))]
        except Exception as e:  # noqa: BLE001
            return {**res, "status": "generator", "detail": f"jax.jit failed at {where}: {e}"[:300]}
        try:
            got = [np.asarray(g) for g in campaign.as_list(exe(*args))]
        except Exception as e:  # noqa: BLE001
            return {**res, "status": "error", "detail": f"{where}: {type(e).__name__}: {e}"[:2000]}
        if len(got) != len(want):
            return {**res, "status": "wrong", "detail": f"{where}: {len(got)} results, want {len(want)}"}

        element = ("element", lambda: _elementwise_reference(jitted_one, args, axes, batch, want))
        msgs, _ = campaign.judge(got, want, flags, jitted, args, references=[element])
        for k, m in enumerate(msgs):
            if m is not None:
                return {**res, "status": "wrong", "detail": f"{where}: result #{k}: {m}"}
    return {**res, "status": "ok"}


def main() -> int:
    return campaign.in_process_main(run_seed, __doc__.split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
