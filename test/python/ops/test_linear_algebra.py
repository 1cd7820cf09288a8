"""Dense linear algebra through jax's LAPACK custom calls (potrf / trsm / getrf): cholesky (both
triangles), cho_solve, solve_triangular (every side / triangle / transpose / unit diagonal), solve,
inv, det, slogdet and lu (pivots and permutation bit for bit), exported with a symbolic batch or a
symbolic matrix size, compiled once, run at several bindings against jax.jit; failures as jax has
them (a matrix that is not positive definite gives NaN, a singular one det 0 and Inf/NaN solves)."""
from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
from jax import export, lax  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402

import jaxcheck  # noqa: E402

B, N = export.symbolic_shape("b, n")
check = functools.partial(jaxcheck.check, sizes=(1, 4, 9), rtol=2e-4, atol=2e-5)


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def spd(b, m, seed=0):
    a = rnd(b, m, m, seed=seed)
    return a @ a.transpose(0, 2, 1) + m * np.eye(m, dtype=np.float32)


def leaves(f):
    """f with its results as a flat tuple (slogdet and lu return named tuples)."""
    return lambda *a: tuple(jax.tree.leaves(f(*a)))


def S(*dims):
    return jax.ShapeDtypeStruct(dims, jnp.float32)


def test_cholesky_and_cho_solve_over_a_symbolic_batch():
    def f(a, x):
        return (jnp.linalg.cholesky(a), jsl.cholesky(a, lower=False),
                jsl.cho_solve(jsl.cho_factor(a, lower=True), x), jsl.cho_solve(jsl.cho_factor(a, lower=False), x))
    check(f, [S(B, 5, 5), S(B, 5, 3)], lambda b: [spd(b, 5, seed=b), rnd(b, 5, 3, seed=b + 1)])


def test_cholesky_of_a_symbolic_size_and_of_one_matrix():
    """[n, n] without a batch (info is a scalar), n = 1, 4, 9."""
    check(lambda a: jnp.linalg.cholesky(a), [S(N, N)], lambda n: [spd(1, n, seed=n)[0]])


def test_cholesky_of_matrices_that_are_not_positive_definite_is_nan():
    """jax masks the whole factor with NaN where LAPACK's info is not 0: a negative pivot in the
    first, middle or last column; a NaN on the diagonal is not reported by jax's LAPACK (OpenBLAS
    checks pivot <= 0) and propagates from its column on; a positive definite matrix beside them."""
    def args(b):
        a = spd(5, 4, seed=b)
        a[0, 0, 0] = -1.0
        a[1, 2, 2] = -50.0
        a[2, 3, 3] = -50.0
        a[3, 1, 1] = np.nan
        return [a]
    c = check(lambda a: jnp.linalg.cholesky(a), [S(5, 4, 4)], args, sizes=(1,))
    got = c.exe(*args(1))
    lower = np.tril(np.ones((4, 4), bool))
    assert np.isnan(got[:3][:, lower]).all() and not np.isnan(got[3][:, 0]).any() and np.isnan(got[3][1:, 1:]).any()
    assert not np.isnan(got[4]).any()


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_left(lower, trans, unit):
    def f(a, x):
        return jsl.solve_triangular(a, x, lower=lower, trans=trans, unit_diagonal=unit)
    check(f, [S(B, 6, 6), S(B, 6, 2)], lambda b: [rnd(b, 6, 6, seed=b) + 6 * np.eye(6, dtype=np.float32),
                                                 rnd(b, 6, 2, seed=b + 1)])


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", [False, True])
def test_triangular_solve_right_side(lower, transpose_a):
    """lax.linalg.triangular_solve(left_side=False): X op(A) = B, a symbolic number of rows of B."""
    def f(a, x):
        return lax.linalg.triangular_solve(a, x, left_side=False, lower=lower, transpose_a=transpose_a)
    check(f, [S(4, 4), S(N, 4)], lambda n: [rnd(4, 4, seed=n) + 4 * np.eye(4, dtype=np.float32), rnd(n, 4, seed=n + 1)])


def test_solve_inv_det_slogdet():
    def f(a, x):
        return jnp.linalg.solve(a, x), jnp.linalg.inv(a), jnp.linalg.det(a), jnp.linalg.slogdet(a)
    check(leaves(f), [S(B, 5, 5), S(B, 5, 2)], lambda b: [rnd(b, 5, 5, seed=b), rnd(b, 5, 2, seed=b + 3)], rtol=1e-3,
          atol=1e-4)


def test_lu_pivots_and_permutation_bit_for_bit():
    """lax.linalg.lu of wide, tall and square matrices: the pivots and the permutation as LAPACK
    chooses them (the first row of largest magnitude), ties included (integer-valued matrices)."""
    def f(a, w, t):
        return lax.linalg.lu(a), lax.linalg.lu(w), lax.linalg.lu(t)

    def args(b):
        r = np.random.default_rng(b)
        return [r.integers(-3, 4, (b, 5, 5)).astype(np.float32), rnd(b, 3, 6, seed=b), rnd(b, 6, 3, seed=b + 1)]
    check(leaves(f), [S(B, 5, 5), S(B, 3, 6), S(B, 6, 3)], args, rtol=1e-4, atol=1e-5)


def test_singular_matrices_as_jax_has_them():
    """A zero column (LAPACK's info > 0, the factorization completed): det 0, slogdet (0, -inf),
    solve and inv Inf/NaN where jax has them."""
    def f(a, x):
        return jnp.linalg.det(a), jnp.linalg.slogdet(a), jnp.linalg.solve(a, x)

    def args(b):
        a = rnd(b, 4, 4, seed=b)
        a[:, :, 1] = 0.0
        return [a, rnd(b, 4, 1, seed=b + 1)]
    check(leaves(f), [S(B, 4, 4), S(B, 4, 1)], args, sizes=(1, 3))


def test_float64_and_a_least_squares_program():
    """The d* custom calls (jax_enable_x64), and the normal equations of a least squares fit
    through cholesky + two triangular solves over a symbolic number of observations."""
    jax.config.update("jax_enable_x64", True)
    try:
        def fit(x, y):
            g = x.T @ x + 1e-3 * jnp.eye(x.shape[1], dtype=x.dtype)
            c = jnp.linalg.cholesky(g)
            z = jsl.solve_triangular(c, x.T @ y, lower=True)
            return jsl.solve_triangular(c.T, z, lower=False)
        spec = [jax.ShapeDtypeStruct((N, 3), jnp.float64), jax.ShapeDtypeStruct((N,), jnp.float64)]
        exe = relax_mlir.compile(from_jax(fit, *spec))
        for n in (3, 17, 200):
            r = np.random.default_rng(n)
            x, y = r.standard_normal((n, 3)), r.standard_normal(n)
            np.testing.assert_allclose(exe(x, y), np.asarray(jax.jit(fit)(x, y)), rtol=1e-10, atol=1e-12)
    finally:
        jax.config.update("jax_enable_x64", False)


def _symmetric(b, m, seed=0, spread=1.0):
    a = rnd(b, m, m, seed=seed)
    return (a + a.transpose(0, 2, 1)) * spread


def test_eigenvalues_and_singular_values():
    """syevd / gesdd whose vectors are unused (eigvalsh, svd(compute_uv=False), the 2-norm, cond,
    matrix_rank): Jacobi rotations, sorted as LAPACK's (ascending / descending); tall, wide and
    square matrices, a repeated eigenvalue, a rank-deficient and a zero matrix in the batch."""
    def f(s, a, w):
        return (jnp.linalg.eigvalsh(s), jnp.linalg.eigvalsh(s, UPLO="U"), jnp.linalg.svd(a, compute_uv=False),
                jnp.linalg.svd(w, compute_uv=False), jnp.linalg.norm(a, 2, axis=(1, 2)), jnp.linalg.cond(s + 9 * np.eye(5)),
                jnp.linalg.matrix_rank(a), jnp.linalg.norm(w, "nuc", axis=(1, 2)))

    def args(b):
        s, a, w = _symmetric(b + 1, 5, seed=b), rnd(b + 1, 6, 4, seed=b + 1), rnd(b + 1, 3, 7, seed=b + 2)
        s[0] = np.diag([2.0, -1.0, 2.0, 0.5, 2.0])  # a triple eigenvalue
        a[0, :, 3] = a[0, :, 1] + a[0, :, 2]  # rank 3
        a[-1] = 0.0
        return [s, a, w]
    check(f, [S(B, 5, 5), S(B, 6, 4), S(B, 3, 7)], args)


def test_eigenvalues_of_a_symbolic_size_wide_ranges_and_non_finite():
    """n symbolic (1, 4, 9, 40); entries from 1e-20 to 1e20 (scaled before rotating: no overflow of
    the squares); a NaN or an infinity gives NaN values, as jax's for LAPACK's failure."""
    check(lambda s: jnp.linalg.eigvalsh(s), [S(N, N)], lambda n: [_symmetric(1, n, seed=n)[0]], sizes=(1, 4, 9, 40),
          rtol=5e-4, atol=5e-5)
    f = lambda s: (jnp.linalg.eigvalsh(s), jnp.linalg.svd(s, compute_uv=False))  # noqa: E731
    for spread in (1e-20, 1e20):
        check(f, [S(B, 4, 4)], lambda b: [_symmetric(b, 4, seed=b, spread=spread)], rtol=2e-4, atol=0.0)
    bad = _symmetric(3, 4)
    bad[0, 1, 2] = bad[0, 2, 1] = np.nan
    bad[1, 3, 3] = np.inf
    check(f, [S(B, 4, 4)], lambda b: [bad], sizes=(3,))


def _eigh_function(s):
    """expm of a symmetric matrix through its eigenvectors: V diag(exp(w)) V^T."""
    w, v = jnp.linalg.eigh(s)
    return (v * jnp.exp(w * 0.3)[..., None, :]) @ jnp.swapaxes(v, -1, -2)


def _reconstruct(a):
    u, s, vt = jnp.linalg.svd(a, full_matrices=False)
    return (u * s[..., None, :]) @ vt


def test_vectors_where_their_signs_cancel():
    """Eigenvectors and singular vectors (Jacobi rotations accumulated; their signs are not
    LAPACK's) through uses that do not depend on the signs: a matrix function through eigh (with a
    triple eigenvalue in the batch, where the basis of the eigenspace is arbitrary too), pinv of
    tall, wide and square matrices (a rank-deficient and a zero one in the batch), lstsq, an SVD
    reconstruction, polyfit; a symbolic batch, one compile, against jax.jit."""
    def f(s, a, w, q):
        return (_eigh_function(s), jnp.linalg.pinv(a), jnp.linalg.pinv(w), jnp.linalg.pinv(q), _reconstruct(a),
                _reconstruct(w))

    def args(b):
        s, a, w, q = (_symmetric(b + 1, 5, seed=b), rnd(b + 1, 6, 4, seed=b + 1), rnd(b + 1, 3, 7, seed=b + 2),
                      rnd(b + 1, 4, 4, seed=b + 3))
        s[0] = np.diag([2.0, -1.0, 2.0, 0.5, 2.0])
        a[0, :, 3] = a[0, :, 1] + a[0, :, 2]  # rank 3
        a[-1] = 0.0
        return [s, a, w, q]
    check(f, [S(B, 5, 5), S(B, 6, 4), S(B, 3, 7), S(B, 4, 4)], args, rtol=1e-3, atol=1e-4)
    # a symbolic square matrix: jax's svd job is 'S' (economy) for pinv, 'A' (full) for svd()
    check(lambda a: (jnp.linalg.pinv(a), _reconstruct(a), (lambda u, s, vt: (u * s) @ vt)(*jnp.linalg.svd(a))),
          [S(N, N)], lambda n: [rnd(n, n, seed=n)], rtol=1e-3, atol=1e-4)
    (m,) = export.symbolic_shape("m")
    check(lambda a, y: jnp.linalg.lstsq(a, y)[0], [S(9, 3), S(9, m)], lambda n: [rnd(9, 3, seed=n), rnd(9, n, seed=n + 1)],
          rtol=1e-3, atol=1e-4)
    check(lambda x, y: jnp.polyfit(x, y, 3), [S(12), S(12, m)], lambda n: [np.linspace(-1, 1, 12, dtype=np.float32),
                                                                          rnd(12, n, seed=n)], rtol=1e-3, atol=1e-3)


def test_svd_of_a_matrix_whose_rows_may_be_fewer_than_its_columns():
    """f32[n, 3] and f32[3, n] with n symbolic: min(n, 3) singular values and economy vectors, for
    n below, at and above 3 from one compile (the Jacobi kernel takes zero rows up to the columns;
    it refused n < 3 at run time before); values, a reconstruction, V S^-1 U^T (a pseudo-inverse:
    jax exports neither pinv nor cond of such a matrix), the 2-norm and the nuclear norm."""
    def f(a):
        u, s, vt = jnp.linalg.svd(a, full_matrices=False)
        return (s, _reconstruct(a), (vt.T / s) @ u.T, jnp.linalg.norm(a, 2), jnp.linalg.norm(a, "nuc"))
    for spec, make in (([S(N, 3)], lambda n: [rnd(n, 3, seed=n)]), ([S(3, N)], lambda n: [rnd(3, n, seed=n)])):
        check(f, spec, make, sizes=(1, 2, 3, 4, 9), rtol=1e-3, atol=1e-4)
    check(lambda a: (jnp.linalg.svd(a, compute_uv=False), _reconstruct(a)), [S(B, N, 2)],
          lambda n: [rnd(2, n, 2, seed=n)], sizes=(1, 2, 5), rtol=1e-3, atol=1e-4)


def test_gradients_of_eigenvalues_and_singular_values():
    """jax.grad through eigvalsh and the singular values (refused before): jax's transpose is
    V diag(g) V^T (U diag(g) V^T), the diagonal written by a scatter of g at indices [i, i] into
    zeros; the signs of v_j cancel against themselves there (signs.py). A logdet, the nuclear and
    the spectral norm as penalties, over symbolic sizes and batches, from one compile each. A
    scatter that is not diagonal stays refused; a diagonal the user writes the same way compiles."""
    sym = lambda m: [_symmetric(1, m, seed=m)[0]]  # noqa: E731
    check(jax.grad(lambda a: jnp.sum(jnp.sin(jnp.linalg.eigvalsh(a)))), [S(N, N)], sym,
          sizes=(1, 2, 5, 8), rtol=1e-4, atol=1e-5)
    check(jax.grad(lambda a: jnp.sum(jnp.log(jnp.linalg.eigvalsh(a @ a.mT + jnp.eye(a.shape[-1]))))),
          [S(B, 4, 4)], lambda b: [rnd(b, 4, 4, seed=b)], sizes=(1, 3), rtol=1e-4, atol=1e-5)
    check(jax.grad(lambda a: jnp.sum(jnp.linalg.svd(a, compute_uv=False) ** 2) + jnp.linalg.norm(a, "nuc")),
          [S(N, 3)], lambda n: [rnd(n, 3, seed=n)], sizes=(1, 2, 4, 9), rtol=1e-4, atol=1e-5)
    penalty = jax.grad(lambda w, x: jnp.sum((x @ w) ** 2) + 0.1 * jnp.linalg.norm(w, 2) ** 2, argnums=(0, 1))
    check(penalty, [S(6, 4), S(B, 6)], lambda b: [rnd(6, 4, seed=b), rnd(b, 6, seed=b + 1)], sizes=(1, 5),
          rtol=1e-4, atol=1e-5)

    def user_diagonal(s, w):
        v = jnp.linalg.eigh(s)[1]
        i = jnp.arange(s.shape[0])
        return v @ jnp.zeros_like(s).at[i, i].add(w) @ v.T
    check(user_diagonal, [S(N, N), S(N)], lambda n: [_symmetric(1, n, seed=n)[0], rnd(n, seed=n)],
          sizes=(1, 3, 6), rtol=1e-4, atol=1e-5)
    off_diagonal = lambda s, t: (lambda v, i: v @ jnp.zeros_like(s).at[i, (i + 1) % s.shape[0]].add(t[0]) @ v.T)(  # noqa: E731
        jnp.linalg.eigh(s)[1], jnp.arange(s.shape[0]))
    with pytest.raises(relax_mlir.CompileError, match="the eigenvectors of jnp.linalg.eigh .* reach "
                                                      "'stablehlo.dot_general' here"):
        relax_mlir.compile(from_jax(off_diagonal, S(N, N), S(N, N)))


def test_forward_mode_derivatives_through_eigh_and_svd():
    """jax.jvp / jacfwd / Hessian-vector products through eigvalsh, the singular values and matrix
    functions (refused before): jax's tangent of the values is diag(V^T dA V), a product of the
    vectors with the vectors keeping a vector index of each (s_a s_b M[a, b]: two vector axes,
    signs.py), whose diagonal (a gather at [i, i], or jnp.trace's mask) carries no signs; that of
    the vectors is V (F * V^T dA V), whose contracted index cancels. Symbolic sizes 1, 4, 9 and a
    symbolic batch, one compile each."""
    def sym2(n):
        return [_symmetric(1, n, seed=n)[0], _symmetric(1, n, seed=n + 50)[0]]
    jvp = lambda f: lambda a, t: jax.jvp(f, (a,), (t,))  # noqa: E731
    check(jvp(jnp.linalg.eigvalsh), [S(N, N), S(N, N)], sym2)
    check(jvp(jnp.linalg.eigvalsh), [S(B, 5, 5), S(B, 5, 5)], lambda b: [_symmetric(b, 5, seed=b),
                                                                         _symmetric(b, 5, seed=b + 9)], sizes=(1, 3))
    check(jvp(lambda a: jnp.linalg.svd(a, compute_uv=False)), [S(N, 3), S(N, 3)],
          lambda n: [rnd(n, 3, seed=n), rnd(n, 3, seed=n + 1)])
    check(jax.jacfwd(jnp.linalg.eigvalsh), [S(N, N)], lambda n: sym2(n)[:1])
    expm = lambda a: (lambda w, v: (v * jnp.exp(w / 4)) @ v.T)(*jnp.linalg.eigh(a))  # noqa: E731
    check(jvp(expm), [S(N, N), S(N, N)], sym2)
    hvp = lambda a, t: jax.jvp(jax.grad(lambda m: jnp.sum(jnp.log1p(jnp.abs(jnp.linalg.eigvalsh(m))))),  # noqa: E731
                               (a,), (t,))[1]
    check(hvp, [S(N, N), S(N, N)], sym2)
    check(lambda s, a: jnp.trace((lambda v: v.T @ a @ v)(jnp.linalg.eigh(s)[1])), [S(N, N), S(N, N)], sym2)
    # a two-index value used where its signs matter stays refused
    vav = lambda s, a: (lambda v: v.T @ a @ v)(jnp.linalg.eigh(s)[1])  # noqa: E731
    for f, msg in ((lambda s, a: vav(s, a)[0], "it takes part of a vector axis"),
                   (lambda s, a: jnp.sum(vav(s, a), axis=0), "it sums over a vector axis"),
                   (lambda s, a: jnp.diagonal(vav(s, a), offset=1), "it gathers from a vector axis"),
                   (lambda s, a: jnp.diagonal(vav(s, a) ** 2), "multiplies the vectors elementwise"),
                   (lambda s, a: jnp.einsum("ia,ib,ic->abc", *(jnp.linalg.eigh(s)[1],) * 3),
                    "it keeps more than two vector axes")):
        with pytest.raises(relax_mlir.CompileError, match=f"the eigenvectors of jnp.linalg.eigh .* reach .*{msg}"):
            relax_mlir.compile(from_jax(f, S(6, 6), S(6, 6)))


def test_matrix_functions_written_with_jnp_diag():
    """`v @ jnp.diag(f(w)) @ v.T` and `u @ jnp.diag(s) @ vt`, the way most code writes a matrix
    function and a reconstruction (refused before: only `(v * f(w)) @ v.T` was seen to cancel the
    signs): jnp.diag is a where() on `iota == iota` with zeros elsewhere, a diagonal like the
    gradient's scatter (signs.relax_diagonal), as is w[:, None] * jnp.eye(n). An off-diagonal
    (jnp.diag(x, k=1)) or a full matrix between the vectors stays refused."""
    def f(s, a):
        w, v = jnp.linalg.eigh(s)
        u, sv, vt = jnp.linalg.svd(a, full_matrices=False)
        return (v @ jnp.diag(jnp.exp(w / s.shape[0])) @ v.T, v @ (w[:, None] * jnp.eye(s.shape[0])) @ v.T,
                u @ jnp.diag(sv) @ vt)
    check(f, [S(N, N), S(N, 3)], lambda n: [_symmetric(1, n, seed=n)[0], rnd(n, 3, seed=n)], sizes=(1, 3, 6),
          rtol=1e-3, atol=1e-4)
    for g in (lambda s: (lambda w, v: v @ jnp.diag(w[1:], k=1) @ v.T)(*jnp.linalg.eigh(s)),
              lambda s: (lambda w, v: v @ jnp.outer(w, w) @ v.T)(*jnp.linalg.eigh(s))):
        with pytest.raises(relax_mlir.CompileError, match="eigenvectors of jnp.linalg.eigh .* reach "
                                                          "'stablehlo.dot_general' here"):
            relax_mlir.compile(from_jax(g, S(N, N)))


def test_vectors_where_their_signs_matter_are_refused():
    """A use that depends on the vectors' signs (returning them, summing them, abs, an elementwise
    square: the last two independent of the signs but not of the basis of a repeated eigenvalue's
    eigenspace) is refused at its line, naming the decomposition's line; so is svd with
    full_matrices=True of a non-square matrix (a completed basis). The values alone still compile
    to the Jacobi kernel without vectors."""
    import inspect
    line = inspect.currentframe().f_lineno
    cases = [
        (lambda s: jnp.linalg.eigh(s)[1], r"the eigenvectors of jnp.linalg.eigh are returned \(result #0\)"),
        (lambda s: jnp.linalg.eigh(s)[1].sum(0), r"reach 'stablehlo.reduce' here, which depends on their signs"),
        (lambda s: jnp.abs(jnp.linalg.eigh(s)[1]), r"reach 'stablehlo.abs' here"),
        (lambda s: jnp.linalg.eigh(s)[1] ** 2, r"reach 'stablehlo.multiply' here.*multiplies the vectors elementwise"),
        (lambda a: jnp.linalg.svd(a)[0][:, 0], r"the singular vectors of jnp.linalg.svd .*reach"),
    ]
    for k, (f, msg) in enumerate(cases):
        with pytest.raises(relax_mlir.CompileError, match=rf"test_linear_algebra.py:{line + 2 + k}:\d+: .*{msg}") as e:
            relax_mlir.compile(from_jax(f, S(B, 3, 3)) if k < 4 else from_jax(f, S(3, 3)))
        assert f"computed at " in str(e.value) or "returned" in str(e.value)
    stacked = lambda xs: lax.scan(lambda c, x: (c, jnp.linalg.eigh(x)[1]), 0.0, xs)[1]  # noqa: E731
    with pytest.raises(relax_mlir.CompileError, match="eigenvectors of jnp.linalg.eigh .* reach "
                                                      "'stablehlo.dynamic_update_slice' here"):
        relax_mlir.compile(from_jax(stacked, S(B, 3, 3)))
    # where they cancel inside a loop body, the loop compiles
    check(lambda xs: lax.scan(lambda c, x: (c, _eigh_function(x)), 0.0, xs)[1], [S(B, 4, 4)],
          lambda b: [_symmetric(b, 4, seed=b)], rtol=1e-3, atol=1e-4)
    with pytest.raises(relax_mlir.CompileError, match="full singular vector bases .* are not supported"):
        relax_mlir.compile(from_jax(lambda a: (lambda u, s, vt: (u[:, :3] * s) @ vt)(*jnp.linalg.svd(a)), S(5, 3)))
    text = str(from_jax(lambda s: jnp.linalg.eigvalsh(s), S(B, 3, 3)))
    assert "relax_v.eigvalsh" in text and "vectors" not in text



def _tridiagonal(shape, seed, case, dtype=np.float32):
    """dl, d, du ([..., m]) and b ([..., m, 3]): random (rows exchanged wherever |dl| > |d|),
    diagonally dominant, an exactly zero pivot in the first row (info 1: jax's NaN), a NaN on the
    diagonal, or a zero last pivot (info m)."""
    r = np.random.default_rng(seed)
    dl, d, du = (r.standard_normal(shape).astype(dtype) for _ in range(3))
    m = shape[-1]
    if case == "dominant":
        d = d + 4 * np.sign(d)
    elif case == "zero_pivot" and m > 1:
        d[..., 0], dl[..., 1] = 0, 0
    elif case == "nan":
        d[..., m // 2] = np.nan
    elif case == "zero_last":
        dl[..., 1:], d[..., -1] = 0, 0
    return [dl, d, du, r.standard_normal(shape + (3,)).astype(dtype)]


_TRIDIAGONAL_CASES = ("random", "dominant", "zero_pivot", "nan", "zero_last")


def test_tridiagonal_solve():
    """lax.linalg.tridiagonal_solve (jax's lapack_sgtsv_ffi: refused by name before): gtsv's
    elimination with row exchanges, over a symbolic batch and size, m = 1, 4, 9, 50 from one
    compile; singular systems NaN as jax has them; f64; the gradient (its transpose is another
    tridiagonal solve); zero-size systems."""
    from jax.lax.linalg import tridiagonal_solve as solve
    c = check(solve, [S(B, N)] * 3 + [S(B, N, 3)],
              lambda n: [_tridiagonal((2, n), n + k, case) for k, case in enumerate(_TRIDIAGONAL_CASES)],
              sizes=(1, 4, 9, 50), rtol=1e-5, atol=1e-6, cases=True)
    assert "relax_v.tridiagonal_solve" in c.text
    got = c.exe(*_tridiagonal((2, 9), 0, "zero_pivot"))
    assert np.isnan(got).all()
    loss = jax.grad(lambda dl, d, du, b: jnp.sum(jnp.sin(solve(dl, d, du, b))), argnums=(0, 1, 2, 3))
    check(loss, [S(N)] * 3 + [S(N, 3)], lambda n: [a[0] for a in _tridiagonal((1, n), n, "dominant")],
          sizes=(1, 5, 40), rtol=1e-4, atol=1e-5)
    jax.config.update("jax_enable_x64", True)
    try:
        spec = [jax.ShapeDtypeStruct((N,), jnp.float64)] * 3 + [jax.ShapeDtypeStruct((N, 3), jnp.float64)]
        check(solve, spec, lambda n: [[a[0] for a in _tridiagonal((1, n), n + k, case, np.float64)]
                                      for k, case in enumerate(_TRIDIAGONAL_CASES)],
              sizes=(1, 7, 33), rtol=1e-12, atol=1e-13, cases=True)
    finally:
        jax.config.update("jax_enable_x64", False)
    for m, k in ((0, 3), (5, 0)):
        check(solve, [S(m)] * 3 + [S(m, k)], lambda _: [np.ones((m,), np.float32)] * 3 + [np.ones((m, k), np.float32)],
              sizes=(0,))


@pytest.mark.parametrize("target", ["cuda", "vulkan", "webgpu"])
def test_gpu_targets_refuse_the_sequential_kernels(target):
    """The kernels are sequential scalar loops with no GPU mapping: a located refusal at compile
    time (a first Vulkan run returned NaN for a positive definite matrix)."""
    from jax.lax.linalg import tridiagonal_solve
    platform = {"cuda": "CUDA", "vulkan": "Vulkan", "webgpu": "WebGPU"}[target]
    for name, mod in (("relax_v.cholesky", from_jax(lambda a: jnp.linalg.cholesky(a), S(B, 3, 3))),
                      ("relax_v.tridiagonal_solve", from_jax(tridiagonal_solve, *[S(N)] * 3, S(N, 2)))):
        with pytest.raises(relax_mlir.CompileError, match=rf"{name} \(a kernel of sequential scalar loops.*"
                                                          rf"is not supported on {platform} yet"):
            relax_mlir.compile(mod, target=target)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)], ids=["tall", "wide", "square"])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(shape, mode):
    """jnp.linalg.qr (geqrf + orgqr): Householder signs as LAPACK's larfg chooses them, so Q and R
    equal jax's, not only up to signs; a column already zero below the diagonal (tau = 0) and a zero
    matrix among the batch."""
    def args(b):
        a = rnd(b + 1, *shape, seed=b)
        a[0, 1:, 0] = 0.0
        a[-1] = 0.0
        return [a]
    check(leaves(lambda a: jnp.linalg.qr(a, mode=mode)), [S(B, *shape)], args)


def test_qr_least_squares_over_a_symbolic_number_of_rows():
    def f(x, y):
        q, r = jnp.linalg.qr(x)
        return jsl.solve_triangular(r, q.T @ y, lower=False)
    check(f, [S(N + 3, 3), S(N + 3, 2)], lambda n: [rnd(n + 3, 3, seed=n), rnd(n + 3, 2, seed=n + 1)], rtol=1e-3,
          atol=1e-4)
