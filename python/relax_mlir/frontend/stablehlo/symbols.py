"""Argument dims given as expressions: jax.export's "5*k + 15" gives @main an argument of
unknown dim D; the module recovers k = (D - 15) floordiv 5 through its own arithmetic
(`divmod` functions of divide, remainder, sign, compare, select) and asserts D mod 5 == 0 and
k >= 1 with shape_assertion custom calls, which the import drops. `bind_dim_exprs`
names the symbol instead: a `relax.arange` of (D - 15) floordiv 5 elements match_cast to [k]
binds k, and a match_cast of the argument to [5*k + 15, ...] checks D = 5*k + 15 at run time
(its message names the argument, the expression and k); D >= 20 (k >= 1) becomes D's
`relax.symbol_lower`. The body then sees 5*k + 15, and the known-value folds (shape_arith.py)
turn jax's floor_divide / remainder arithmetic back into k.
"""
from __future__ import annotations

from mlir import ir

from relax_mlir.frontend.stablehlo.common import Val, _dtype_attr, _is_name, _ttype
from relax_mlir.frontend.stablehlo.errors import UnsupportedOpError
from relax_mlir.shape import Expr, floordiv, sym


def _solve_affine(e: Expr, s: str) -> tuple[int, Expr] | None:
    """(a, b) with e == a*s + b, a > 0 and b free of s; None when e is not of that form."""
    a, rest = 0, []
    for mono, c in e.terms:
        if s in mono:
            if mono != (s,):
                return None
            a = c
        else:
            rest.append((mono, c))
    if a <= 0:
        return None
    b = e - a * sym(s)
    if s in b.symbols():
        return None
    return a, b


def _arg_dim_symbol(i: int, j: int, taken: set[str]) -> str:
    name = f"arg{i}_dim{j}"
    while name in taken:
        name += "_"
    return name


def name_dim_exprs(im, params):
    """Give each argument dim that jax names by an expression (not a bare symbol) its own
    symbol `arg<i>_dim<j>`; record (symbol, expression) in `im.dim_exprs`. An expression whose
    symbols are all whole dims of arguments (2*b beside a [b, ...] argument) stays in the
    signature: the runtime binds the symbols and checks the dim before native code runs."""
    from relax_mlir.shape import ShapeParseError, parse
    im.dim_exprs = {}
    taken = {n for ns in im.dim_names for n in (ns or []) if n and _is_name(n)}
    bare = set(taken)
    out = []
    for i, sdims, dt in params:
        names = im.dim_names[i] if i < len(im.dim_names) else None
        new = list(sdims)
        for j, d in enumerate(sdims):
            nm = names[j] if names and j < len(names) else None
            if not nm or _is_name(nm) or not str(d).startswith("zzA"):
                continue
            try:
                e = parse(nm)
            except ShapeParseError:
                raise UnsupportedOpError("func.func", "", f"argument #{i} dim {j} is given as '{nm}', which is not "
                                                          f"a shape expression relax reads") from None
            if e.symbols() <= bare:
                new[j] = e
                continue
            s = _arg_dim_symbol(i, j, taken)
            taken.add(s)
            new[j] = sym(s)
            im.dim_exprs[(i, j)] = (s, e)
        out.append((i, new, dt))
    return out


def bind_dim_exprs(im, params, args: list) -> list:
    """Bind the symbols of expression dims (k of 5*k + 15) and check each such argument against
    its expression at run time; the argument values the body sees have the expression dims."""
    exprs = getattr(im, "dim_exprs", {})
    if not exprs:
        return args
    bare = {str(d) for _, sdims, _ in params for d in sdims if d.is_symbol}
    defs: dict[str, Expr] = {}
    for (i, j), (s, e) in sorted(exprs.items()):
        for k in sorted(e.symbols()):
            if k in bare or k in defs:
                continue
            ab = _solve_affine(e, k) if len(e.symbols()) == 1 else None
            if ab is None or not ab[1].is_const:
                continue
            a, b = ab
            defs[k] = floordiv(sym(s) - b, a)
            # k >= 1 (a jax dimension variable): the argument dim is at least a + b
            im.extra_lower[s] = max(im.extra_lower.get(s, 0), a + b.value)
    for (i, j), (s, e) in sorted(exprs.items()):
        missing = sorted(e.symbols() - bare - set(defs))
        if missing:
            raise UnsupportedOpError("func.func", "", f"argument #{i} dim {j} is given as '{e}': its symbol "
                                                      f"{missing[0]} is neither a whole dim of an argument nor "
                                                      f"recoverable as (dim - b) floordiv a from one a*{missing[0]} + b")
    for k, value in defs.items():
        t = im.emit("relax.arange", [], 1, "i64", {"end": value, "dtype": _dtype_attr("i64")}, dims=[value])
        ir.Operation.create("relax.match_cast", results=[_ttype([sym(k)], "i64")], operands=[t.value],
                            loc=ir.Location.name(f"symbol {k} of the argument shapes"))
        im.dim_vars.add(k)
    by_arg = {}
    for (i, j), (s, e) in exprs.items():
        by_arg.setdefault(i, {})[j] = (s, e)
    out = []
    positions = [i for i, _, _ in params if i not in im.unused_args]
    for i, v in zip(positions, args):
        if i not in by_arg:
            out.append(v)
            continue
        dims = list(v.dims)
        for j, (s, e) in by_arg[i].items():
            dims[j] = e
        what = ", ".join(f"dim {j} = {e}" for j, (_, e) in sorted(by_arg[i].items()))
        cast = ir.Operation.create("relax.match_cast", results=[_ttype(dims, v.dtype)], operands=[v.value],
                                   loc=ir.Location.name(f"argument #{i} ({what})"))
        out.append(Val(cast.results[0], v.dtype, dims))
    return out
