"""jax's LAPACK custom calls on the CPU (`lapack_{s,d}potrf_ffi`, `..trsm_ffi`, `..getrf_ffi`,
`..geqrf_ffi`, `..orgqr_ffi`) -> relax_v.cholesky, relax.triangular_solve, relax_v.lu, relax_v.qr,
relax.householder_product (ops/linear_algebra.py).

The matrices have LAPACK's column-major layout in the custom call (operand_layouts), which does
not change what they mean: `uplo = L` is the logical lower triangle. Trailing operands are shape
values (`indices_of_shape_operands`), not read here.
"""
from __future__ import annotations

from relax_mlir.frontend.stablehlo.common import Val, _emit_multi, _merge_dims, _res
from relax_mlir.frontend.stablehlo.registry import register_custom_calls

_L, _U, _N, _T, _C = ord("L"), ord("U"), ord("N"), ord("T"), ord("C")


def _config(op) -> dict[str, int]:
    from jax._src.lib.mlir import ir as jir
    if "mhlo.backend_config" not in op.attributes:
        return {}
    d = jir.DictAttr(op.attributes["mhlo.backend_config"])
    out = {}
    for name in ("uplo", "side", "trans_x", "diag"):
        if name in d:
            out[name] = jir.IntegerAttr(d[name]).value
    return out


def _swap_last(im, x: Val) -> Val:
    r = len(x.dims)
    return im.permute(x, list(range(r - 2)) + [r - 1, r - 2])


def _potrf(im, op, ins):
    x = ins[0]
    uplo = _config(op).get("uplo", _L)
    if uplo not in (_L, _U):
        raise ValueError(f"potrf with uplo {uplo!r}")
    (fd, fdt), (idims, _) = _res(op, 0), _res(op, 1)
    a = x if uplo == _L else _swap_last(im, x)  # A's upper triangle is A^T's lower one
    f, info = _emit_multi(im, "relax_v.cholesky", [a], [(_merge_dims(fd, a.dims), fdt),
                                                           (_merge_dims(idims, a.dims[:-2]), "i32")], {})
    return [f if uplo == _L else _swap_last(im, f), info]


def _trsm(im, op, ins):
    a, b = ins[0], ins[1]
    cfg = _config(op)
    side, uplo, trans, diag = cfg.get("side", _L), cfg.get("uplo", _L), cfg.get("trans_x", _N), cfg.get("diag", _N)
    if side not in (_L, ord("R")) or uplo not in (_L, _U) or trans not in (_N, _T, _C) or diag not in (_N, _U):
        raise ValueError(f"trsm with side {side!r}, uplo {uplo!r}, trans_x {trans!r}, diag {diag!r}")
    dims, dt = _res(op)
    lower, transpose = uplo == _L, trans != _N  # real matrices: conjugate transpose is transpose
    if side == _L:
        return [im.emit("relax.triangular_solve", [a, b], len(dims), dt,
                        {"lower": int(lower), "transpose_a": int(transpose), "unit_diagonal": int(diag == _U)},
                        dims=_merge_dims(dims, b.dims))]
    # X op(A) = B  <=>  op(A)^T X^T = B^T
    bt = _swap_last(im, b)
    xt = im.emit("relax.triangular_solve", [a, bt], len(dims), dt,
                 {"lower": int(lower), "transpose_a": int(not transpose), "unit_diagonal": int(diag == _U)}, dims=bt.dims)
    return [_swap_last(im, xt)]


def _getrf(im, op, ins):
    x = ins[0]
    (ld, ldt), (pd, _), (idims, _) = _res(op, 0), _res(op, 1), _res(op, 2)
    return _emit_multi(im, "relax_v.lu", [x], [(_merge_dims(ld, x.dims), ldt), (pd, "i32"),
                                                (_merge_dims(idims, x.dims[:-2]), "i32")], {})


def _geqrf(im, op, ins):
    x = ins[0]
    (ad, adt), (td, _) = _res(op, 0), _res(op, 1)
    return _emit_multi(im, "relax_v.qr", [x], [(_merge_dims(ad, x.dims), adt), (td, adt)], {})


def _orgqr(im, op, ins):
    a, tau = ins[0], ins[1]
    dims, dt = _res(op)
    return [im.emit("relax.householder_product", [a, tau], len(dims), dt, dims=_merge_dims(dims, a.dims))]


_KINDS = {"potrf": _potrf, "trsm": _trsm, "getrf": _getrf, "geqrf": _geqrf, "orgqr": _orgqr}


def _lapack(kind):
    return {f"lapack_{p}{kind}_ffi": _KINDS[kind] for p in ("s", "d")}


CUSTOM_CALLS = register_custom_calls({name: conv for kind in _KINDS for name, conv in _lapack(kind).items()})
