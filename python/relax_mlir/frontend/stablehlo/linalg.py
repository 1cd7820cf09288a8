"""jax's LAPACK custom calls on the CPU (`lapack_{s,d}potrf_ffi`, `..trsm_ffi`, `..getrf_ffi`,
`..geqrf_ffi`, `..orgqr_ffi`) -> relax_v.cholesky, relax.triangular_solve, relax_v.lu, relax_v.qr,
relax.householder_product (ops/linear_algebra.py); `..syevd_ffi` and `..gesdd_ffi` where only the
eigenvalues / singular values are used -> relax_v.eigvalsh / relax_v.svdvals, sorted (the vectors
are refused: their signs are LAPACK's algorithm's, which a different algorithm cannot reproduce).
The StableHLO ops `cholesky` and `triangular_solve` (what jax exports for TPUs) become the same
relax ops; jax's GPU solver calls are refused by name, pointing to a CPU export.

The matrices have LAPACK's column-major layout in the custom call (operand_layouts), which does
not change what they mean: `uplo = L` is the logical lower triangle. Trailing operands are shape
values (`indices_of_shape_operands`), not read here.
"""
from __future__ import annotations

from mlir import ir

from relax_mlir.frontend.stablehlo.common import Val, _emit_multi, _merge_dims, _res, _splat
from relax_mlir.frontend.stablehlo.registry import register_converters, register_custom_calls
from relax_mlir.frontend.stablehlo.signs import Signs
from relax_mlir.shape import const, max_, min_

_L, _U, _N, _T, _C = ord("L"), ord("U"), ord("N"), ord("T"), ord("C")


def _config(op) -> dict[str, int]:
    from jaxlib.mlir import ir as jir
    if "mhlo.backend_config" not in op.attributes:
        return {}
    d = jir.DictAttr(op.attributes["mhlo.backend_config"])
    out = {}
    for name in ("uplo", "side", "trans_x", "diag", "mode"):
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


def _unavailable(im, op, i: int, what: str) -> Val:
    """Result i, which is not computed: a relax_v.unavailable that the importer erases when unused
    and that is refused by name when used."""
    dims, dt = _res(op, i)
    return im.emit("relax_v.unavailable", [], len(dims), dt, {"message": ir.StringAttr.get(
        f"{what} are not supported")}, dims=dims)


def _sorted_values(im, w: Val, dims, dt, descending: bool) -> Val:
    """w sorted along its last axis (ascending eigenvalues, descending singular values)."""
    (out,) = _emit_multi(im, "relax_v.sort", [w], [(dims, dt)],
                         {"axis": len(dims) - 1, "num_keys": 1, "descending": [int(descending)], "total_order": [0]})
    return out


def _sorted_columns(im, vecs: Val, w: Val, descending: bool) -> Val:
    """The columns of vecs ([..., r, n]) in the order that sorts w ([..., n]) as _sorted_values
    does: each row sorted with w as its key (the same stable order in every row)."""
    dims = list(vecs.dims)
    key = im.broadcast(im.reshape(w, list(w.dims[:-1]) + [const(1), w.dims[-1]]), dims)
    _, out = _emit_multi(im, "relax_v.sort", [key, vecs], [(dims, w.dtype), (dims, vecs.dtype)],
                         {"axis": len(dims) - 1, "num_keys": 1, "descending": [int(descending)], "total_order": [0]})
    return out


def _signed(im, op, v: Val, what: str, nbatch: int, index_axis: int, like: Signs | None = None) -> Val:
    """v as vectors whose signs are the algorithm's: only uses where they cancel may follow
    (signs.py). Axis `index_axis` is the vector index, the first `nbatch` the batch. `like`: the
    Signs of vectors sharing v's signs (an SVD's u for its vt), else a new decomposition."""
    roles = [("b", k) if k < nbatch else None for k in range(len(v.dims))]
    roles[index_axis] = "i"
    if like is None:
        im.decompositions = getattr(im, "decompositions", 0) + 1
        like = Signs(im.decompositions, (), what, im.position(op))
    v.signs = Signs(like.source, tuple(roles), like.what, like.where)
    return v


def _syevd(im, op, ins):
    """The eigenvalues, ascending, and the eigenvectors in their order (results: vectors, values,
    info 0). The vectors' signs are the Jacobi kernel's: signs.py checks where they go; unused,
    only the values are computed (importer.py)."""
    x = ins[0]
    uplo = _config(op).get("uplo", _L)
    if uplo not in (_L, _U):
        raise ValueError(f"syevd with uplo {uplo!r}")
    (vd, vdt), (wd, wdt), (idims, idt) = _res(op, 0), _res(op, 1), _res(op, 2)
    a = x if uplo == _L else _swap_last(im, x)
    vdims = _merge_dims(vd, a.dims)
    _, w, v = _emit_multi(im, "relax_v.eigvalsh", [a], [(vdims, vdt), (_merge_dims(wd, a.dims[:-1]), wdt),
                                                        (vdims, vdt)], {"vectors": 1})
    info = im.broadcast(im.emit("relax.constant", [], 0, idt, {"value": _splat([], idt, 0)}, dims=[]),
                        _merge_dims(idims, a.dims[:-2]))
    vs = _sorted_columns(im, v, w, False)
    n = len(vdims)
    pair = _signed(im, op, vs, "the eigenvectors of jnp.linalg.eigh", n - 2, n - 1)
    return [pair, _sorted_values(im, w, w.dims, wdt, False), info]


def _leading(im, v: Val, axis: int, k) -> Val:
    """The first k entries of v along `axis` (k an expression no larger than that dim)."""
    dims = list(v.dims)
    dims[axis] = k
    return im.emit("relax.strided_slice", [v], len(dims), v.dtype,
                   {"axes": [axis], "begin": [const(0)], "end": [k], "strides": [1]}, dims=dims)


def _gesdd(im, op, ins):
    """The singular values, descending, and (economy mode, or a square matrix) the singular vectors
    in their order (results: a, s, u, vt, info 0). A matrix with more columns than rows is
    transposed (the same values; u and vt trade places). The vectors' signs are the Jacobi
    kernel's: signs.py checks where they go; unused, only the values are computed."""
    x = ins[0]
    (ad, adt), (sd, sdt), (idims, idt) = _res(op, 0), _res(op, 1), _res(op, 4)
    m, n = x.dims[-2], x.dims[-1]
    wide = m is not None and n is not None and m.is_const and n.is_const and m.value < n.value
    a = _swap_last(im, x) if wide else x
    cols = a.dims[-1]
    nb = len(a.dims) - 2
    # A symbolic matrix that may have fewer rows than columns (f32[n, 3]) gets zero rows up to
    # the columns' count: the same singular values and vectors (the zero rows' parts of the left
    # vectors are 0), of which its k = min(m, n) are the first (its rank is at most m).
    k = None
    if not wide and m is not None and n is not None and not im.int_facts().prove_ge(m, n):
        k = min_(m, n)
        extra = max_(n - m, const(0))
        zero = im.emit("relax.constant", [], 0, adt, {"value": _splat([], adt, 0)}, dims=[])
        a = im.emit("relax_v.concat", [x, im.broadcast(zero, list(x.dims[:-2]) + [extra, n])], len(x.dims), adt,
                    {"axis": nb}, dims=list(x.dims[:-2]) + [m + extra, n])
    pu, s, pv = _emit_multi(im, "relax_v.svdvals", [a], [(a.dims, adt), (_merge_dims(sd, a.dims[:-2] + [cols]), sdt),
                                                         (a.dims[:-2] + [cols, cols], adt)], {"vectors": 1})
    info = im.broadcast(im.emit("relax.constant", [], 0, idt, {"value": _splat([], idt, 0)}, dims=[]),
                        _merge_dims(idims, a.dims[:-2]))
    # gesdd's job: 'S' economy (u [m, k], vt [k, n]), 'A' full (u [m, m], vt [n, n]: the same as
    # economy only for a square matrix), 'N' no vectors
    job = _config(op).get("mode", ord("S"))
    square = m is not None and n is not None and m == n
    shapes_ok = job == ord("S") or (job == ord("A") and square)
    s_sorted = _sorted_values(im, s, s.dims, sdt, True)
    if k is not None:
        s_sorted = _leading(im, s_sorted, len(s_sorted.dims) - 1, k)
    if not shapes_ok:  # full_matrices=True on a non-square matrix: a basis completion, not computed
        uv = [_unavailable(im, op, i, "full singular vector bases (jnp.linalg.svd(full_matrices=True) of a "
                                      "non-square matrix)") for i in (2, 3)]
        return [_unavailable(im, op, 0, "the factored matrix of gesdd"), s_sorted, *uv, info]
    left = _sorted_columns(im, pu, s, True)  # a's left vectors [rows, cols]
    right = _sorted_columns(im, pv, s, True)  # a's right vectors [cols, cols]
    what = "the singular vectors of jnp.linalg.svd"
    if wide:  # x = a^T = V S U^T: u = V, vt = U^T
        u, vt = right, _swap_last(im, left)
    else:
        u, vt = left, _swap_last(im, right)
    if k is not None:  # u: the matrix's own rows, k columns; vt: k rows
        u, vt = _leading(im, _leading(im, u, nb, m), nb + 1, k), _leading(im, vt, nb, k)
    u = _signed(im, op, u, what, nb, nb + 1)
    vt = _signed(im, op, vt, what, nb, nb, like=u.signs)  # u_i and v_i share their sign
    return [_unavailable(im, op, 0, "the factored matrix of gesdd"), s_sorted, u, vt, info]


def _gtsv(im, op, ins):
    """lax.linalg.tridiagonal_solve (results: the factored dl, d, du, which jax's lowering does
    not read, then x and info; jax masks x with NaN where info != 0 itself)."""
    dl, d, du, b = ins[:4]  # (then shape values, with symbolic dims)
    (xd, xdt), (idims, _) = _res(op, 3), _res(op, 4)
    x, info = _emit_multi(im, "relax_v.tridiagonal_solve", [dl, d, du, b],
                          [(_merge_dims(xd, b.dims), xdt), (_merge_dims(idims, b.dims[:-2]), "i32")], {})
    factored = [_unavailable(im, op, i, "the factored diagonals of gtsv") for i in range(3)]
    return [*factored, x, info]


_KINDS = {"potrf": _potrf, "trsm": _trsm, "getrf": _getrf, "geqrf": _geqrf, "orgqr": _orgqr,
          "syevd": _syevd, "gesdd": _gesdd, "gtsv": _gtsv}


def _lapack(kind):
    return {f"lapack_{p}{kind}_ffi": _KINDS[kind] for p in ("s", "d")}


CUSTOM_CALLS = register_custom_calls({name: conv for kind in _KINDS for name, conv in _lapack(kind).items()})

# jax's GPU solvers (a CUDA or ROCm export of jnp.linalg): refused by name, with the way out.
_GPU_WHY = ("a GPU solver call (jnp.linalg in a CUDA / ROCm export); export for the CPU platform "
            "(jax.export(..., platforms=('cpu', ...))): relax-mlir compiles that lowering for every target")
register_custom_calls({f"{p}{name}": _GPU_WHY for p in ("cu", "hip") for name in (
    *(f"solver_{k}_ffi" for k in ("potrf", "getrf", "geqrf", "orgqr", "ormqr", "syevd", "gesvd", "gesvdj",
                                  "gesvdp", "gesdd", "geev", "sytrd", "syrk")),
    "_lu_pivots_to_permutation", "_cholesky_update_ffi", "_tridiagonal_solve_perturbed", "hybrid_eig_real",
    "hybrid_eig_comp")})
register_custom_calls({name: f"the TPU lowering of jnp.linalg ({name}); export for the CPU platform "
                             "(jax.export(..., platforms=('cpu', ...))): relax-mlir compiles that lowering for "
                             "every target" for name in ("LuDecomposition", "Qr")})


def _bool_attr(op, name: str) -> bool:
    from jaxlib.mlir import ir as jir
    return name in op.attributes and jir.BoolAttr(op.attributes[name]).value


def _cholesky(im, op, ins):
    """stablehlo.cholesky (a TPU export's jnp.linalg.cholesky): the factor of the `lower` (else
    upper) triangle; a matrix that is not positive definite gives a factor of NaNs (StableHLO leaves
    it implementation-defined; jax's CPU lowering says NaN), as does the triangle the spec leaves
    unspecified of such a matrix; elsewhere that triangle is the operand's."""
    x = ins[0]
    lower = _bool_attr(op, "lower")
    dims, dt = _res(op)
    a = x if lower else _swap_last(im, x)
    dims = _merge_dims(dims, a.dims)
    f, info = _emit_multi(im, "relax_v.cholesky", [a], [(dims, dt), (list(a.dims[:-2]), "i32")], {})
    zero = im.emit("relax.constant", [], 0, "i32", {"value": _splat([], "i32", 0)}, dims=[])
    bad = im.emit("relax.not_equal", [info, im.broadcast(zero, info.dims)], len(info.dims), "i1", dims=info.dims)
    bad = im.broadcast(im.reshape(bad, list(info.dims) + [const(1), const(1)]), dims)
    nan = im.broadcast(im.emit("relax.constant", [], 0, dt, {"value": _splat([], dt, float("nan"))}, dims=[]), dims)
    f = im.emit("relax.where", [bad, nan, f], len(dims), dt, dims=dims)
    return [f if lower else _swap_last(im, f)]


def _triangular_solve(im, op, ins):
    """stablehlo.triangular_solve: op(a) x = b (left_side) or x op(a) = b, reading the `lower` (else
    upper) triangle of a, its diagonal taken as ones with unit_diagonal."""
    from jaxlib.mlir.dialects import stablehlo as hlo

    a, b = ins
    lower, left, unit = _bool_attr(op, "lower"), _bool_attr(op, "left_side"), _bool_attr(op, "unit_diagonal")
    trans = str(hlo.TransposeAttr(op.attributes["transpose_a"]).value)
    if trans not in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"):
        raise ValueError(f"triangular_solve with transpose_a {trans}")
    transpose = trans != "NO_TRANSPOSE"  # real matrices: the adjoint is the transpose
    dims, dt = _res(op)
    attrs = {"lower": int(lower), "unit_diagonal": int(unit)}
    if left:
        return [im.emit("relax.triangular_solve", [a, b], len(dims), dt, attrs | {"transpose_a": int(transpose)},
                        dims=_merge_dims(dims, b.dims))]
    bt = _swap_last(im, b)  # X op(A) = B  <=>  op(A)^T X^T = B^T
    xt = im.emit("relax.triangular_solve", [a, bt], len(dims), dt, attrs | {"transpose_a": int(not transpose)},
                 dims=bt.dims)
    return [_swap_last(im, xt)]


CONVERTERS = register_converters({
    "stablehlo.cholesky": _cholesky,
    "stablehlo.triangular_solve": _triangular_solve,
})
