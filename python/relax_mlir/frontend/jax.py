"""JAX frontend: trace a function with `jax.export` (shape-polymorphic specs allowed) and import
its StableHLO as a relax module.

    b = jax.export.symbolic_shape("b")[0]
    mod = from_jax(f, jax.ShapeDtypeStruct((b, 64), jnp.float32))
    exe = relax_mlir.compile(mod)
"""
from __future__ import annotations

from relax_mlir.core import forksafe
from relax_mlir.core.module import Module
from relax_mlir.frontend.stablehlo import UnsupportedOpError, import_stablehlo
from relax_mlir.frontend.stablehlo.platforms import choose_platform

__all__ = ["from_jax", "import_exported", "UnsupportedOpError"]


def _dim_names(avals):
    out = []
    for a in avals:
        names = []
        for d in a.shape:
            s = str(d)
            # a bare dimension variable, or an expression ("5*k + 15") the importer binds k from
            names.append(None if isinstance(d, int) else s)
        out.append(names)
    return out


def _is_var(name) -> bool:
    return name is not None and name.isascii() and name.isidentifier()


_JAX_DTYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "bool": "i1",
               "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "ui8", "uint16": "ui16",
               "uint32": "ui32", "uint64": "ui64"}


def _unused_args(exported, names) -> dict:
    """position -> (dims, dtype) of the arguments jax.export dropped from @main (unused ones)."""
    from relax_mlir.shape import const, sym

    kept = set(exported.module_kept_var_idx)
    out = {}
    for i, a in enumerate(exported.in_avals):
        if i in kept:
            continue
        dims = [const(d) if isinstance(d, int) else (sym(names[i][j]) if _is_var(names[i][j]) else None)
                for j, d in enumerate(a.shape)]
        out[i] = (dims, _JAX_DTYPES.get(str(a.dtype), str(a.dtype)))
    return out


def import_exported(exported) -> Module:
    """A `jax.export.Exported` -> a `relax_mlir.Module` (symbols named after jax's dimension variables).

    jax.export assumes every dimension variable is >= 1; the importer says so in the function's
    `relax.symbol_lower`, so that shape deduction proves what jax proved (x[:, :1] of an [s, s]
    array has dim min(1, s) = 1, and broadcasts to s). An export for several platforms imports
    its CPU lowering (else its first; frontend/stablehlo/platforms.py) and takes the same
    arguments as a one-platform export."""
    with forksafe.compiling():  # builds MLIR objects: a fork in another thread waits for it
        return _import_exported(exported)


def _import_exported(exported) -> Module:
    names = _dim_names(exported.in_avals)
    dim_vars = {n for ns in names for n in ns if _is_var(n)}
    upper, lower = _bounds(exported.in_avals)
    return import_stablehlo(exported.mlir_module(), names, unused_args=_unused_args(exported, names),
                            dim_vars=dim_vars, symbol_bounds=upper, symbol_lower=lower,
                            symbol_relations=_relations(exported.in_avals),
                            platform_index=choose_platform(exported.platforms))


def _relations(avals) -> list[tuple[str, str, str]]:
    """(lhs, rhs, the constraint as written) with lhs <= rhs for each constraint of the specs'
    symbolic scope that relates symbols (`a >= b`, `a <= 2*b`, `a == b + 1` as both directions;
    jax.export drops their shape assertions from the module): checked at entry by the executable
    (`relax.requires`), a ValueError before any kernel runs. The single-symbol ones are _bounds'."""
    out, seen = [], set()
    for a in avals:
        for d in a.shape:
            scope = getattr(d, "scope", None)
            for c in getattr(scope, "_explicit_constraints", ()) or ():
                e1, e2, cmp = getattr(c, "e1", None), getattr(c, "e2", None), str(getattr(c, "cmp", ""))
                if (isinstance(e1, int) and _is_var(str(e2))) or (isinstance(e2, int) and _is_var(str(e1))):
                    continue  # (s <= c, s >= c: symbol bounds)
                text = f"{e1} {'==' if cmp.endswith('EQ') and not cmp.endswith('GEQ') else '>='} {e2}"
                if text in seen:
                    continue
                seen.add(text)
                out.append((str(e2), str(e1), text))
                if not cmp.endswith("GEQ"):
                    out.append((str(e1), str(e2), text))
    return out


def _bounds(avals) -> tuple[dict[str, int], dict[str, int]]:
    """(symbol -> c for the `symbol <= c`, symbol -> c for the `symbol >= c` constraints) of the
    specs' symbolic scope (`jax.export.symbolic_shape("s", constraints=("s <= 32",))`), which
    jax's shape reasoning used (GPT-2 slices its causal mask to [s, s] only given s <= 32;
    BigBird's block-sparse attention concatenates slices x[:, 1:-3], x[:, 2:-2] of a length
    given as k >= 8 blocks); the executable checks them. Other constraints (between symbols)
    stay jax's (its shape assertions are not kept)."""
    upper: dict[str, int] = {}
    lower: dict[str, int] = {}
    for a in avals:
        for d in a.shape:
            scope = getattr(d, "scope", None)
            for c in getattr(scope, "_explicit_constraints", ()) or ():
                e1, e2, cmp = getattr(c, "e1", None), getattr(c, "e2", None), str(getattr(c, "cmp", ""))
                if not cmp.endswith("GEQ"):
                    continue
                if isinstance(e1, int) and _is_var(str(e2)):  # c >= s
                    upper[str(e2)] = min(upper.get(str(e2), e1), e1)
                elif isinstance(e2, int) and _is_var(str(e1)):  # s >= c
                    lower[str(e1)] = max(lower.get(str(e1), e2), e2)
    return upper, lower


def from_jax(fn, *arg_specs, donate_argnums=()) -> Module:
    """Export `fn` for `arg_specs` (jax.ShapeDtypeStruct, possibly with symbolic dims) -> a `relax_mlir.Module`.

    `fn` may already be `jax.jit(f, donate_argnums=...)` (kept as it is: wrapping it again would
    drop its donations), or `donate_argnums` given here. A donated argument whose type equals a
    result's is written in place by the executable (`relax.donate`, see the README)."""
    import jax

    if donate_argnums or not hasattr(fn, "trace"):
        fn = jax.jit(fn, donate_argnums=donate_argnums)
    exported = jax.export.export(fn)(*arg_specs)
    return import_exported(exported)
