"""Compile time against program size: a stack of L transformer blocks (examples/models.py, each
layer with its own weights) imported from JAX and compiled for the CPU, for several L; also counts
the IR print/parse calls one compile makes (the text round-trips issue 15 removed).

    .venv/bin/python bench/compile_time.py [--layers 1 3 6 12 24] [--target cpu]

Prints one row per L: import time, relax pipeline time, backend time, ops in the imported
module, and the number of parse / print calls on MLIR objects during import + compile.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

D = 64  # model width: compile time does not depend on it


def stacked(layers: int):
    """f(x, w_0..w_{6L-1}): `layers` transformer blocks in sequence."""
    from models import transformer_block

    def f(x, *ws):
        for i in range(layers):
            x = transformer_block(x, *ws[6 * i:6 * i + 6])
        return x

    return f


def specs(layers: int):
    import jax
    import jax.numpy as jnp

    s = jax.export.symbolic_shape("s")[0]
    w = [(D,), (D, D), (D, D), (D, D), (D, 4 * D), (4 * D, D)]
    return [jax.ShapeDtypeStruct((s, D), jnp.float32)] + \
        [jax.ShapeDtypeStruct(shape, jnp.float32) for _ in range(layers) for shape in w]


class TextCalls:
    """Counts, while active, the whole-IR text crossings: `Module.parse` / `Operation.parse`
    (text -> IR) and `get_asm` / `str()` of a module or operation (IR -> text), wherever in the
    library they happen. Types and attributes printed or parsed one at a time are not counted."""

    def __init__(self):
        self.counts = {"parse": 0, "print": 0}
        self.saved = []

    def _wrap(self, owner, name: str, kind: str, static: bool = False):
        orig = getattr(owner, name)
        counts = self.counts

        def wrapper(*args, **kwargs):
            counts[kind] += 1
            return orig(*args, **kwargs)

        self.saved.append((owner, name, orig))
        setattr(owner, name, staticmethod(wrapper) if static else wrapper)

    def __enter__(self):
        from mlir import ir

        self._wrap(ir.Module, "parse", "parse", static=True)
        self._wrap(ir.Operation, "parse", "parse", static=True)
        for owner in (ir.Operation, ir.OpView):
            self._wrap(owner, "get_asm", "print")
            self._wrap(owner, "__str__", "print")
        self._wrap(ir.Module, "__str__", "print")
        return self

    def __exit__(self, *exc):
        for owner, name, orig in reversed(self.saved):
            setattr(owner, name, orig)


def op_count(module) -> int:
    if isinstance(module, str):  # older from_jax returned text
        import relax_mlir
        module = relax_mlir.parse(module)
    n = [0]

    def visit(o):
        n[0] += 1
        from mlir import ir
        return ir.WalkResult.ADVANCE

    with module.context:
        module.op.walk(visit)
    return n[0]


def measure(layers: int, target: str, count_calls: bool) -> dict:
    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    t0 = time.perf_counter()
    mod = from_jax(stacked(layers), *specs(layers))
    t1 = time.perf_counter()
    exe = relax_mlir.compile(mod, target=target)
    t2 = time.perf_counter()
    row = {"layers": layers, "import_s": t1 - t0, "compile_s": t2 - t1, "ops": op_count(mod)}
    del exe
    if count_calls:
        with TextCalls() as tc:
            mod = from_jax(stacked(layers), *specs(layers))
            relax_mlir.compile(mod, target=target)
        row.update(tc.counts)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 3, 6, 12, 24])
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--no-count", action="store_true", help="skip the (slower) counting run")
    args = ap.parse_args()
    print(f"# load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores, target {args.target}")
    print(f"{'layers':>6} {'ops':>6} {'import s':>9} {'compile s':>10} {'parse':>6} {'print':>6}")
    for L in args.layers:
        r = measure(L, args.target, not args.no_count)
        print(f"{r['layers']:>6} {r['ops']:>6} {r['import_s']:>9.2f} {r['compile_s']:>10.2f} "
              f"{r.get('parse', '-'):>6} {r.get('print', '-'):>6}", flush=True)


if __name__ == "__main__":
    main()
