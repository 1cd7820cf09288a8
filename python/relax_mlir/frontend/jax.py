"""JAX frontend: trace a function with `jax.export` (shape-polymorphic specs allowed) and import
its StableHLO to relax IR text.

    b = jax.export.symbolic_shape("b")[0]
    text = from_jax(f, jax.ShapeDtypeStruct((b, 64), jnp.float32))
    exe = relax_mlir.compile(text)
"""
from __future__ import annotations

import re

from relax_mlir.frontend.stablehlo import UnsupportedOpError, import_stablehlo

__all__ = ["from_jax", "import_exported", "UnsupportedOpError"]


def _dim_names(avals):
    out = []
    for a in avals:
        names = []
        for d in a.shape:
            s = str(d)
            names.append(s if not isinstance(d, int) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", s) else None)
        out.append(names)
    return out


def import_exported(exported) -> str:
    """A `jax.export.Exported` -> relax IR text (symbols named after jax's dimension variables)."""
    return import_stablehlo(exported.mlir_module(), _dim_names(exported.in_avals))


def from_jax(fn, *arg_specs) -> str:
    """Export `fn` for `arg_specs` (jax.ShapeDtypeStruct, possibly with symbolic dims) -> relax text."""
    import jax

    exported = jax.export.export(jax.jit(fn))(*arg_specs)
    return import_exported(exported)
