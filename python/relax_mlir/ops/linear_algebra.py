"""Dense linear algebra: Cholesky, triangular solve and LU with partial pivoting, as LAPACK's
potrf / trsm / getrf define them (what jax's CPU lowering calls: `jnp.linalg.cholesky`, `solve`,
`inv`, `det`, `slogdet`, `jax.scipy.linalg.solve_triangular`, `cho_solve`, `lu`), and the
eigenvalues of symmetric matrices and singular values by Jacobi rotations (`eigvalsh`, `svdvals`,
`norm(x, 2)`, `cond`, `matrix_rank`; the vectors, whose signs are an algorithm's choice, are not
offered).

Each kernel is scalar loops (scf.for over the batch, then the columns) on tensors; the sums run in
LAPACK's unblocked order (ascending for a forward substitution, descending for a backward one).
"""
from __future__ import annotations

from relax_mlir.dialect.spec import DeduceError, OpInfo, OpSpec, TENSOR, attr, operand, relax_op, result_
from relax_mlir.dialect.types import FLOAT_DTYPES, TensorType
from relax_mlir.ops.common import dims_equal, fmt, require_rank
from relax_mlir.ops.kernel import Kernel, Legalized, identity_map
from relax_mlir.shape import min_

_FLOATS = ("f32", "f64")
_SFMIN = {"f32": "1.17549435E-38", "f64": "2.2250738585072014E-308"}  # LAPACK's safe minimum


def _matrices(t: TensorType, what: str) -> tuple:
    d = require_rank(t, what)
    if len(d) < 2:
        raise DeduceError(f"{what} needs rank >= 2 (a batch of matrices), got rank {len(d)}")
    if t.dtype not in _FLOATS:
        raise DeduceError(f"{what} must be f32 or f64, got {t.dtype}")
    return d


def _min_side(op: OpInfo):
    """min(m, n) of the operand's matrices ("?" when either is)."""
    d = op.tensor(0).dims
    return min_(d[-2], d[-1]) if d[-2] is not None and d[-1] is not None else None


class _Loops:
    """Nested scf.for loops over the batch dims, carrying the output tensors."""

    def __init__(self, k: Kernel, sizes: list[str], carried: list[tuple[str, str]]):
        self.k, self.sizes, self.carried = k, sizes, carried
        self.ivs = [f"%b{d}" for d in range(len(sizes))]
        self.heads = []

    def open(self) -> list[str]:
        k, c0, c1 = self.k, self.k.const_index(0), self.k.const_index(1)
        cur = [v for v, _ in self.carried]
        types = ", ".join(t for _, t in self.carried)
        for d, n in enumerate(self.sizes):
            head = k.fresh("bl")
            inner = [f"{head}_c{i}" for i in range(len(cur))]
            args = ", ".join(f"{a} = {v}" for a, v in zip(inner, cur))
            k.emit(f"{head}:{len(cur)} = scf.for %b{d} = {c0} to {n} step {c1} iter_args({args}) -> ({types}) {{")
            self.heads.append(head)
            cur = inner
        return cur

    def close(self, results: list[str]) -> list[str]:
        types = ", ".join(t for _, t in self.carried)
        for head in reversed(self.heads):
            self.k.emit(f"scf.yield {', '.join(results)} : {types}")
            self.k.emit("}")
            results = [f"{head}#{i}" for i in range(len(results))]
        return results


def _copy(k: Kernel, src: str, dst: str, t: TensorType) -> str:
    rank = len(t.dims)
    return k.generic([(src, t, identity_map(rank))], [(dst, t, identity_map(rank))], ["parallel"] * rank,
                     [], ["%a0"])[0]


def _fill_i32(k: Kernel, dst: str, t: TensorType) -> str:
    return k.fill("0", dst, t)


class _Factorization(OpSpec):
    """Base of the factorizations: one batch of matrices in, the factor and LAPACK's outputs out."""

    x = operand(TENSOR)
    results = result_(TENSOR, variadic=True)


@relax_op
class CholeskyOp(_Factorization):
    """LAPACK potrf (lower): for each symmetric positive definite matrix A of x ([..., n, n], f32 or
    f64) the lower triangle of the first result holds L with A = L L^T (read from A's lower
    triangle); its strict upper triangle is A's, unchanged. The second result ([...], i32) is
    LAPACK's info: 0, or k where the leading minor of order k is not positive definite (its pivot
    <= 0; the factor's values from there on are unspecified, as jax masks them). A NaN pivot is
    not reported, as jax's LAPACK (OpenBLAS) has it: the NaN propagates into the factor."""

    name = "relax_v.cholesky"

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = _matrices(x, "operand")
        if not dims_equal(d[-1], d[-2], op.facts):
            raise DeduceError(f"needs square matrices, got {fmt(d[-2])} x {fmt(d[-1])}")
        return [TensorType(d, x.dtype), TensorType(d[:-2], "i32")]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x = op.tensor(0)
        f_t, i_t = op.result_types
        rank, dt = len(x.dims), x.dtype
        k = Kernel("cholesky", [x], [f_t, i_t])
        c0, c1 = k.const_index(0), k.const_index(1)
        n = k.dim(k.inp(0), x, rank - 1)
        F = _copy(k, k.inp(0), k.out(0), f_t)
        info = _fill_i32(k, k.out(1), i_t)
        loops = _Loops(k, [k.dim(k.inp(0), x, d) for d in range(rank - 2)], [(F, k.ty(f_t)), (info, k.ty(i_t))])
        Fb, Ib = loops.open()
        b = "".join(f"{v}, " for v in loops.ivs)
        T, IT = k.ty(f_t), k.ty(i_t)
        k.emit(f"%zi = arith.constant 0 : i32")
        k.emit(f"%zf = arith.constant 0.0 : {dt}")
        k.emit(f"%cj:2 = scf.for %j = {c0} to {n} step {c1} iter_args(%F = {Fb}, %inf = %zi) -> ({T}, i32) {{")
        k.emit(f"  %ajj = tensor.extract {k.inp(0)}[{b}%j, %j] : {k.ty(x)}")
        k.emit(f"  %s = scf.for %q = {c0} to %j step {c1} iter_args(%acc = %ajj) -> ({dt}) {{")
        k.emit(f"    %l = tensor.extract %F[{b}%j, %q] : {T}")
        k.emit(f"    %l2 = arith.mulf %l, %l : {dt}")
        k.emit(f"    %acc2 = arith.subf %acc, %l2 : {dt}")
        k.emit(f"    scf.yield %acc2 : {dt}")
        k.emit("  }")
        k.emit(f"  %bad = arith.cmpf ole, %s, %zf : {dt}")
        k.emit("  %first = arith.cmpi eq, %inf, %zi : i32")
        k.emit("  %set = arith.andi %bad, %first : i1")
        k.emit(f"  %j1 = arith.addi %j, {c1} : index")
        k.emit("  %j1i = arith.index_cast %j1 : index to i32")
        k.emit("  %inf2 = arith.select %set, %j1i, %inf : i32")
        k.emit(f"  %dg = math.sqrt %s : {dt}")
        k.emit(f"  %F1 = tensor.insert %dg into %F[{b}%j, %j] : {T}")
        k.emit(f"  %F2 = scf.for %i = %j1 to {n} step {c1} iter_args(%G = %F1) -> ({T}) {{")
        k.emit(f"    %aij = tensor.extract {k.inp(0)}[{b}%i, %j] : {k.ty(x)}")
        k.emit(f"    %t = scf.for %q = {c0} to %j step {c1} iter_args(%acc = %aij) -> ({dt}) {{")
        k.emit(f"      %lik = tensor.extract %G[{b}%i, %q] : {T}")
        k.emit(f"      %ljk = tensor.extract %G[{b}%j, %q] : {T}")
        k.emit(f"      %p = arith.mulf %lik, %ljk : {dt}")
        k.emit(f"      %acc2 = arith.subf %acc, %p : {dt}")
        k.emit(f"      scf.yield %acc2 : {dt}")
        k.emit("    }")
        k.emit(f"    %v = arith.divf %t, %dg : {dt}")
        k.emit(f"    %G2 = tensor.insert %v into %G[{b}%i, %j] : {T}")
        k.emit(f"    scf.yield %G2 : {T}")
        k.emit("  }")
        k.emit(f"  scf.yield %F2, %inf2 : {T}, i32")
        k.emit("}")
        k.emit(f"%I2 = tensor.insert %cj#1 into {Ib}[{', '.join(loops.ivs)}] : {IT}")
        outs = loops.close(["%cj#0", "%I2"])
        return Legalized(k, outs)


@relax_op
class TriangularSolveOp(OpSpec):
    """LAPACK trsm, left side: X with op(A) X = B for each matrix of a ([..., m, m]) and b
    ([..., m, n]); op(A) is A or, with `transpose_a` = 1, A^T. `lower` (1, or 0: upper) says which
    triangle of A is read (the other is ignored); `unit_diagonal` = 1 takes A's diagonal as ones. A zero or NaN on the
    diagonal gives Inf / NaN, as LAPACK (no check). f32 or f64."""

    name = "relax.triangular_solve"
    a = operand(TENSOR)
    b = operand(TENSOR)
    result = result_(TENSOR)
    lower = attr("int", default=1)
    transpose_a = attr("int", default=0)
    unit_diagonal = attr("int", default=0)

    @classmethod
    def deduce(cls, op: OpInfo):
        a, b = op.tensor(0), op.tensor(1)
        da, db = _matrices(a, "operand 'a'"), _matrices(b, "operand 'b'")
        if a.dtype != b.dtype:
            raise DeduceError(f"operands have different element types {a.dtype} and {b.dtype}")
        if len(da) != len(db):
            raise DeduceError(f"operands have different ranks {len(da)} and {len(db)}")
        if not dims_equal(da[-1], da[-2], op.facts):
            raise DeduceError(f"'a' must be square, got {fmt(da[-2])} x {fmt(da[-1])}")
        for i in range(len(da) - 1):
            if not dims_equal(da[i], db[i], op.facts):
                what = "rows" if i == len(da) - 2 else f"batch dim {i}"
                raise DeduceError(f"'a' and 'b' differ in {what}: {fmt(da[i])} and {fmt(db[i])}")
        return [TensorType(db, b.dtype)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        a, b = op.tensor(0), op.tensor(1)
        r = op.result_types[0]
        rank, dt = len(b.dims), b.dtype
        trans, unit = bool(op.attr("transpose_a", 0)), bool(op.attr("unit_diagonal", 0))
        forward = bool(op.attr("lower", 1)) != trans  # op(A) lower: forward substitution
        k = Kernel("trsm", [a, b], [r])
        c0, c1 = k.const_index(0), k.const_index(1)
        m, n = k.dim(k.inp(1), b, rank - 2), k.dim(k.inp(1), b, rank - 1)
        X = _copy(k, k.inp(1), k.out(0), r)
        loops = _Loops(k, [k.dim(k.inp(1), b, d) for d in range(rank - 2)], [(X, k.ty(r))])
        (Xb,) = loops.open()
        bi = "".join(f"{v}, " for v in loops.ivs)
        T, A = k.ty(r), k.ty(a)

        def a_at(i: str, q: str) -> str:
            return f"{k.inp(0)}[{bi}{q}, {i}]" if trans else f"{k.inp(0)}[{bi}{i}, {q}]"
        k.emit(f"%zf = arith.constant 0.0 : {dt}")
        k.emit(f"%m1 = arith.subi {m}, {c1} : index")
        k.emit(f"%cc = scf.for %c = {c0} to {n} step {c1} iter_args(%X = {Xb}) -> ({T}) {{")
        k.emit(f"  %ct = scf.for %t = {c0} to {m} step {c1} iter_args(%Y = %X) -> ({T}) {{")
        k.emit(f"    %i = arith.{'addi' if forward else 'subi'} {'%t' if forward else '%m1'}, "
               f"{c0 if forward else '%t'} : index")
        k.emit(f"    %bv = tensor.extract %Y[{bi}%i, %c] : {T}")
        # the solved part: k in [0, i) ascending (forward), k in (i, m) descending (backward)
        lo, hi = (c0, "%i") if forward else ("%i1", m)
        if not forward:
            k.emit(f"    %i1 = arith.addi %i, {c1} : index")
        k.emit(f"    %s = scf.for %q0 = {lo} to {hi} step {c1} iter_args(%acc = %bv) -> ({dt}) {{")
        if forward:
            k.emit("      %q = arith.addi %q0, %c0 : index")
        else:
            k.emit(f"      %qr = arith.subi %q0, %i1 : index")
            k.emit(f"      %q = arith.subi %m1, %qr : index")
        k.emit(f"      %aq = tensor.extract {a_at('%i', '%q')} : {A}")
        k.emit(f"      %xq = tensor.extract %Y[{bi}%q, %c] : {T}")
        k.emit(f"      %p = arith.mulf %aq, %xq : {dt}")
        k.emit(f"      %acc2 = arith.subf %acc, %p : {dt}")
        if not trans:  # LAPACK's column form skips a solved zero (0 * Inf does not reach B)
            k.emit(f"      %xz = arith.cmpf oeq, %xq, %zf : {dt}")
            k.emit(f"      %acc3 = arith.select %xz, %acc, %acc2 : {dt}")
            k.emit(f"      scf.yield %acc3 : {dt}")
        else:
            k.emit(f"      scf.yield %acc2 : {dt}")
        k.emit("    }")
        if unit:
            val = "%s"
        else:
            k.emit(f"    %aii = tensor.extract {k.inp(0)}[{bi}%i, %i] : {A}")
            k.emit(f"    %sd = arith.divf %s, %aii : {dt}")
            val = "%sd"
        k.emit(f"    %Y2 = tensor.insert {val} into %Y[{bi}%i, %c] : {T}")
        k.emit(f"    scf.yield %Y2 : {T}")
        k.emit("  }")
        k.emit(f"  scf.yield %ct : {T}")
        k.emit("}")
        return Legalized(k, loops.close(["%cc"]))


@relax_op
class LuOp(_Factorization):
    """LAPACK getrf: A = P L U with partial pivoting for each matrix of x ([..., m, n], f32 or f64).
    Results: L (unit lower, below the diagonal) and U (on and above it) in one [..., m, n] tensor;
    the pivots ([..., min(m, n)], i32, 1-based: row j was swapped with row pivots[j] - 1, the first
    row of largest magnitude in column j); info ([...], i32: 0, or k where U[k-1, k-1] is exactly 0,
    the first such; the factorization is completed)."""

    name = "relax_v.lu"

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d, r = _matrices(x, "operand"), _min_side(op)
        return [TensorType(d, x.dtype), TensorType(d[:-2] + (r,), "i32"), TensorType(d[:-2], "i32")]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x = op.tensor(0)
        lu_t, p_t, i_t = op.result_types
        rank, dt = len(x.dims), x.dtype
        k = Kernel("lu", [x], [lu_t, p_t, i_t])
        c0, c1 = k.const_index(0), k.const_index(1)
        m, n = k.dim(k.inp(0), x, rank - 2), k.dim(k.inp(0), x, rank - 1)
        LU = _copy(k, k.inp(0), k.out(0), lu_t)
        P = _fill_i32(k, k.out(1), p_t)
        info = _fill_i32(k, k.out(2), i_t)
        T, PT, IT = k.ty(lu_t), k.ty(p_t), k.ty(i_t)
        loops = _Loops(k, [k.dim(k.inp(0), x, d) for d in range(rank - 2)], [(LU, T), (P, PT), (info, IT)])
        Ab, Pb, Ib = loops.open()
        bi = "".join(f"{v}, " for v in loops.ivs)
        k.emit(f"%zi = arith.constant 0 : i32")
        k.emit(f"%zf = arith.constant 0.0 : {dt}")
        k.emit(f"%one = arith.constant 1.0 : {dt}")
        k.emit(f"%sfmin = arith.constant {_SFMIN[dt]} : {dt}")
        k.emit(f"%r = arith.minsi {m}, {n} : index")
        k.emit(f"%cj:3 = scf.for %j = {c0} to %r step {c1} iter_args(%A = {Ab}, %Pv = {Pb}, %inf = %zi) "
               f"-> ({T}, {PT}, i32) {{")
        # the pivot: the first row i >= j of largest |A[i, j]| (a NaN never wins, as isamax)
        k.emit(f"  %a0 = tensor.extract %A[{bi}%j, %j] : {T}")
        k.emit(f"  %m0 = math.absf %a0 : {dt}")
        k.emit(f"  %j1 = arith.addi %j, {c1} : index")
        k.emit(f"  %pv:2 = scf.for %i = %j1 to {m} step {c1} iter_args(%p = %j, %mx = %m0) -> (index, {dt}) {{")
        k.emit(f"    %ai = tensor.extract %A[{bi}%i, %j] : {T}")
        k.emit(f"    %vi = math.absf %ai : {dt}")
        k.emit(f"    %gt = arith.cmpf ogt, %vi, %mx : {dt}")
        k.emit("    %p2 = arith.select %gt, %i, %p : index")
        k.emit(f"    %mx2 = arith.select %gt, %vi, %mx : {dt}")
        k.emit(f"    scf.yield %p2, %mx2 : index, {dt}")
        k.emit("  }")
        k.emit("  %p1 = arith.addi %pv#0, %c1 : index")
        k.emit("  %p1i = arith.index_cast %p1 : index to i32")
        k.emit(f"  %Pv2 = tensor.insert %p1i into %Pv[{bi}%j] : {PT}")
        k.emit(f"  %apj = tensor.extract %A[{bi}%pv#0, %j] : {T}")
        k.emit(f"  %nz = arith.cmpf une, %apj, %zf : {dt}")
        k.emit(f"  %A3 = scf.if %nz -> ({T}) {{")
        # swap rows j and p (all columns), then scale the column below the pivot
        k.emit(f"    %As = scf.for %c = {c0} to {n} step {c1} iter_args(%S = %A) -> ({T}) {{")
        k.emit(f"      %u = tensor.extract %S[{bi}%j, %c] : {T}")
        k.emit(f"      %w = tensor.extract %S[{bi}%pv#0, %c] : {T}")
        k.emit(f"      %S1 = tensor.insert %w into %S[{bi}%j, %c] : {T}")
        k.emit(f"      %S2 = tensor.insert %u into %S1[{bi}%pv#0, %c] : {T}")
        k.emit(f"      scf.yield %S2 : {T}")
        k.emit("    }")
        k.emit(f"    %ab = math.absf %apj : {dt}")
        k.emit(f"    %big = arith.cmpf oge, %ab, %sfmin : {dt}")
        k.emit(f"    %rcp = arith.divf %one, %apj : {dt}")
        k.emit(f"    %Ad = scf.for %i = %j1 to {m} step {c1} iter_args(%D = %As) -> ({T}) {{")
        k.emit(f"      %aij = tensor.extract %D[{bi}%i, %j] : {T}")
        k.emit(f"      %mul = arith.mulf %aij, %rcp : {dt}")
        k.emit(f"      %dv = arith.divf %aij, %apj : {dt}")
        k.emit(f"      %nv = arith.select %big, %mul, %dv : {dt}")
        k.emit(f"      %D2 = tensor.insert %nv into %D[{bi}%i, %j] : {T}")
        k.emit(f"      scf.yield %D2 : {T}")
        k.emit("    }")
        k.emit(f"    scf.yield %Ad : {T}")
        k.emit("  } else {")
        k.emit(f"    scf.yield %A : {T}")
        k.emit("  }")
        k.emit("  %first = arith.cmpi eq, %inf, %zi : i32")
        k.emit("  %zero = arith.cmpf oeq, %apj, %zf : " + dt)
        k.emit("  %set = arith.andi %zero, %first : i1")
        k.emit("  %j1i = arith.index_cast %j1 : index to i32")
        k.emit("  %inf2 = arith.select %set, %j1i, %inf : i32")
        # the trailing submatrix: A[i, c] -= A[i, j] * A[j, c] for i, c > j
        k.emit(f"  %Au = scf.for %i = %j1 to {m} step {c1} iter_args(%U = %A3) -> ({T}) {{")
        k.emit(f"    %lij = tensor.extract %U[{bi}%i, %j] : {T}")
        k.emit(f"    %Ur = scf.for %c = %j1 to {n} step {c1} iter_args(%V = %U) -> ({T}) {{")
        k.emit(f"      %ujc = tensor.extract %V[{bi}%j, %c] : {T}")
        k.emit(f"      %aic = tensor.extract %V[{bi}%i, %c] : {T}")
        k.emit(f"      %pr = arith.mulf %lij, %ujc : {dt}")
        k.emit(f"      %nw = arith.subf %aic, %pr : {dt}")
        k.emit(f"      %V2 = tensor.insert %nw into %V[{bi}%i, %c] : {T}")
        k.emit(f"      scf.yield %V2 : {T}")
        k.emit("    }")
        k.emit(f"    scf.yield %Ur : {T}")
        k.emit("  }")
        k.emit(f"  scf.yield %Au, %Pv2, %inf2 : {T}, {PT}, i32")
        k.emit("}")
        k.emit(f"%I2 = tensor.insert %cj#2 into {Ib}[{', '.join(loops.ivs)}] : {IT}")
        return Legalized(k, loops.close(["%cj#0", "%cj#1", "%I2"]))


def _apply_reflector(k: Kernel, M: str, T: str, bi: str, i: str, c_lo: str, n: str, m: str, tau: str, dt: str) -> str:
    """Lines applying H = I - tau v v^T (v = [1, M[i+1:m, i]]) from the left to M[i:m, c_lo:n],
    as LAPACK's larf: w = M^T v per column, then M[q, c] += v[q] * (-tau * w) (ger's order)."""
    c1 = k.const_index(1)
    r = k.fresh("hr")
    k.emit(f"{r} = scf.for {r}_c = {c_lo} to {n} step {c1} iter_args({r}_H = {M}) -> ({T}) {{")
    k.emit(f"  {r}_hi0 = tensor.extract {r}_H[{bi}{i}, {r}_c] : {T}")
    k.emit(f"  {r}_ip1 = arith.addi {i}, {c1} : index")
    k.emit(f"  {r}_w = scf.for {r}_q = {r}_ip1 to {m} step {c1} iter_args({r}_acc = {r}_hi0) -> ({dt}) {{")
    k.emit(f"    {r}_vq = tensor.extract {r}_H[{bi}{r}_q, {i}] : {T}")
    k.emit(f"    {r}_hq = tensor.extract {r}_H[{bi}{r}_q, {r}_c] : {T}")
    k.emit(f"    {r}_pq = arith.mulf {r}_vq, {r}_hq : {dt}")
    k.emit(f"    {r}_acc2 = arith.addf {r}_acc, {r}_pq : {dt}")
    k.emit(f"    scf.yield {r}_acc2 : {dt}")
    k.emit("  }")
    k.emit(f"  {r}_ntau = arith.negf {tau} : {dt}")
    k.emit(f"  {r}_tw = arith.mulf {r}_ntau, {r}_w : {dt}")
    k.emit(f"  {r}_top = arith.addf {r}_hi0, {r}_tw : {dt}")
    k.emit(f"  {r}_H1 = tensor.insert {r}_top into {r}_H[{bi}{i}, {r}_c] : {T}")
    k.emit(f"  {r}_H2 = scf.for {r}_q = {r}_ip1 to {m} step {c1} iter_args({r}_G = {r}_H1) -> ({T}) {{")
    k.emit(f"    {r}_vq = tensor.extract {r}_G[{bi}{r}_q, {i}] : {T}")
    k.emit(f"    {r}_gq = tensor.extract {r}_G[{bi}{r}_q, {r}_c] : {T}")
    k.emit(f"    {r}_up = arith.mulf {r}_vq, {r}_tw : {dt}")
    k.emit(f"    {r}_gn = arith.addf {r}_gq, {r}_up : {dt}")
    k.emit(f"    {r}_G2 = tensor.insert {r}_gn into {r}_G[{bi}{r}_q, {r}_c] : {T}")
    k.emit(f"    scf.yield {r}_G2 : {T}")
    k.emit("  }")
    k.emit(f"  scf.yield {r}_H2 : {T}")
    k.emit("}")
    return r


@relax_op
class QrOp(_Factorization):
    """LAPACK geqrf (unblocked geqr2's order): x ([..., m, n], f32 or f64) = Q R with Q a product
    of k = min(m, n) Householder reflectors H(i) = I - tau[i] v v^T (v[i] = 1, v[:i] = 0). Results:
    R on and above the diagonal and the v's below it, in one [..., m, n] tensor; tau ([..., k]).
    Each reflector is larfg's: beta = -sign(alpha) |(alpha, ||x||)|, tau = (beta - alpha) / beta,
    and tau = 0 (H = I) where the column below the diagonal is already 0."""

    name = "relax_v.qr"

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d, r = _matrices(x, "operand"), _min_side(op)
        return [TensorType(d, x.dtype), TensorType(d[:-2] + (r,), x.dtype)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x = op.tensor(0)
        a_t, t_t = op.result_types
        rank, dt = len(x.dims), x.dtype
        k = Kernel("geqrf", [x], [a_t, t_t])
        c0, c1 = k.const_index(0), k.const_index(1)
        m, n = k.dim(k.inp(0), x, rank - 2), k.dim(k.inp(0), x, rank - 1)
        A = _copy(k, k.inp(0), k.out(0), a_t)
        Tau = k.fill("0.0", k.out(1), t_t)
        T, TT = k.ty(a_t), k.ty(t_t)
        loops = _Loops(k, [k.dim(k.inp(0), x, d) for d in range(rank - 2)], [(A, T), (Tau, TT)])
        Ab, Tb = loops.open()
        bi = "".join(f"{v}, " for v in loops.ivs)
        k.emit(f"%zf = arith.constant 0.0 : {dt}")
        k.emit(f"%one = arith.constant 1.0 : {dt}")
        k.emit(f"%r = arith.minsi {m}, {n} : index")
        k.emit(f"%ci:2 = scf.for %i = {c0} to %r step {c1} iter_args(%A = {Ab}, %Tv = {Tb}) -> ({T}, {TT}) {{")
        k.emit(f"  %alpha = tensor.extract %A[{bi}%i, %i] : {T}")
        k.emit(f"  %i1 = arith.addi %i, {c1} : index")
        k.emit(f"  %ss = scf.for %q = %i1 to {m} step {c1} iter_args(%acc = %zf) -> ({dt}) {{")
        k.emit(f"    %xq = tensor.extract %A[{bi}%q, %i] : {T}")
        k.emit(f"    %x2 = arith.mulf %xq, %xq : {dt}")
        k.emit(f"    %acc2 = arith.addf %acc, %x2 : {dt}")
        k.emit(f"    scf.yield %acc2 : {dt}")
        k.emit("  }")
        k.emit(f"  %xn = math.sqrt %ss : {dt}")
        k.emit(f"  %isz = arith.cmpf oeq, %xn, %zf : {dt}")
        # |(alpha, xnorm)| as lapy2: w sqrt(1 + (z / w)^2), w the larger magnitude
        k.emit(f"  %aa = math.absf %alpha : {dt}")
        k.emit(f"  %w = arith.maximumf %aa, %xn : {dt}")
        k.emit(f"  %z = arith.minimumf %aa, %xn : {dt}")
        k.emit(f"  %zw = arith.divf %z, %w : {dt}")
        k.emit(f"  %zw2 = arith.mulf %zw, %zw : {dt}")
        k.emit(f"  %op = arith.addf %one, %zw2 : {dt}")
        k.emit(f"  %sq = math.sqrt %op : {dt}")
        k.emit(f"  %h = arith.mulf %w, %sq : {dt}")
        k.emit(f"  %sh = math.copysign %h, %alpha : {dt}")
        k.emit(f"  %beta = arith.negf %sh : {dt}")
        k.emit(f"  %bma = arith.subf %beta, %alpha : {dt}")
        k.emit(f"  %tau0 = arith.divf %bma, %beta : {dt}")
        k.emit(f"  %tau = arith.select %isz, %zf, %tau0 : {dt}")
        k.emit(f"  %amb = arith.subf %alpha, %beta : {dt}")
        k.emit(f"  %scl = arith.divf %one, %amb : {dt}")
        k.emit(f"  %top = arith.select %isz, %alpha, %beta : {dt}")
        k.emit(f"  %A1 = tensor.insert %top into %A[{bi}%i, %i] : {T}")
        k.emit(f"  %A2 = scf.for %q = %i1 to {m} step {c1} iter_args(%S = %A1) -> ({T}) {{")
        k.emit(f"    %xq = tensor.extract %S[{bi}%q, %i] : {T}")
        k.emit(f"    %xs = arith.mulf %xq, %scl : {dt}")
        k.emit(f"    %xv = arith.select %isz, %xq, %xs : {dt}")
        k.emit(f"    %S2 = tensor.insert %xv into %S[{bi}%q, %i] : {T}")
        k.emit(f"    scf.yield %S2 : {T}")
        k.emit("  }")
        k.emit(f"  %Tv2 = tensor.insert %tau into %Tv[{bi}%i] : {TT}")
        A3 = _apply_reflector(k, "%A2", T, bi, "%i", "%i1", n, m, "%tau", dt)
        k.emit(f"  scf.yield {A3}, %Tv2 : {T}, {TT}")
        k.emit("}")
        return Legalized(k, loops.close(["%ci#0", "%ci#1"]))


@relax_op
class HouseholderProductOp(OpSpec):
    """LAPACK orgqr (unblocked org2r's order): the first n columns of Q = H(0) H(1) ... H(k-1)
    for each matrix a ([..., m, n], the reflectors' v below the diagonal of its first k columns, as
    relax_v.qr leaves them) and tau ([..., k], k <= n <= m). f32 or f64."""

    name = "relax.householder_product"
    a = operand(TENSOR)
    tau = operand(TENSOR)
    result = result_(TENSOR)

    @classmethod
    def deduce(cls, op: OpInfo):
        a, t = op.tensor(0), op.tensor(1)
        d, td = _matrices(a, "operand 'a'"), require_rank(t, "operand 'tau'")
        if t.dtype != a.dtype:
            raise DeduceError(f"operands have different element types {a.dtype} and {t.dtype}")
        if len(td) != len(d) - 1 or any(not dims_equal(x, y, op.facts) for x, y in zip(td[:-1], d[:-2])):
            raise DeduceError(f"'tau' must have the batch dims of 'a' and one more, got {len(td)} dims")
        for lo, hi, what in ((td[-1], d[-1], "k <= n"), (d[-1], d[-2], "n <= m")):
            if lo is not None and hi is not None and lo.is_const and hi.is_const and lo.value > hi.value:
                raise DeduceError(f"needs {what}, got {fmt(lo)} > {fmt(hi)}")
        return [TensorType(d, a.dtype)]

    @classmethod
    def requirements(cls, op: OpInfo):
        a, t = op.tensor(0), op.tensor(1)
        d, k = a.dims, t.dims[-1]
        out = []
        if k is not None and d[-1] is not None:
            out.append((k, d[-1], f"the reflector count {fmt(k)} exceeds the columns {fmt(d[-1])}"))
        if d[-1] is not None and d[-2] is not None:
            out.append((d[-1], d[-2], f"the columns {fmt(d[-1])} exceed the rows {fmt(d[-2])}"))
        return out

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        a, t = op.tensor(0), op.tensor(1)
        r = op.result_types[0]
        rank, dt = len(a.dims), a.dtype
        k = Kernel("orgqr", [a, t], [r])
        c0, c1 = k.const_index(0), k.const_index(1)
        m, n = k.dim(k.inp(0), a, rank - 2), k.dim(k.inp(0), a, rank - 1)
        kk = k.dim(k.inp(1), t, rank - 2)
        Q = _copy(k, k.inp(0), k.out(0), r)
        T, TT = k.ty(r), k.ty(t)
        loops = _Loops(k, [k.dim(k.inp(0), a, d) for d in range(rank - 2)], [(Q, T)])
        (Qb,) = loops.open()
        bi = "".join(f"{v}, " for v in loops.ivs)
        k.emit(f"%zf = arith.constant 0.0 : {dt}")
        k.emit(f"%one = arith.constant 1.0 : {dt}")
        # columns k..n-1: those of the unit matrix
        k.emit(f"%Qu = scf.for %c = {kk} to {n} step {c1} iter_args(%U = {Qb}) -> ({T}) {{")
        k.emit(f"  %Uc = scf.for %q = {c0} to {m} step {c1} iter_args(%V = %U) -> ({T}) {{")
        k.emit("    %diag = arith.cmpi eq, %q, %c : index")
        k.emit(f"    %e = arith.select %diag, %one, %zf : {dt}")
        k.emit(f"    %V2 = tensor.insert %e into %V[{bi}%q, %c] : {T}")
        k.emit(f"    scf.yield %V2 : {T}")
        k.emit("  }")
        k.emit(f"  scf.yield %Uc : {T}")
        k.emit("}")
        k.emit(f"%km1 = arith.subi {kk}, {c1} : index")
        k.emit(f"%cq = scf.for %t = {c0} to {kk} step {c1} iter_args(%Q = %Qu) -> ({T}) {{")
        k.emit("  %i = arith.subi %km1, %t : index")
        k.emit(f"  %i1 = arith.addi %i, {c1} : index")
        k.emit(f"  %tau = tensor.extract {k.inp(1)}[{bi}%i] : {TT}")
        k.emit(f"  %Q1 = tensor.insert %one into %Q[{bi}%i, %i] : {T}")
        Q2 = _apply_reflector(k, "%Q1", T, bi, "%i", "%i1", n, m, "%tau", dt)
        k.emit(f"  %ntau = arith.negf %tau : {dt}")
        k.emit(f"  %Q3 = scf.for %q = %i1 to {m} step {c1} iter_args(%S = {Q2}) -> ({T}) {{")
        k.emit(f"    %sq = tensor.extract %S[{bi}%q, %i] : {T}")
        k.emit(f"    %sv = arith.mulf %ntau, %sq : {dt}")
        k.emit(f"    %S2 = tensor.insert %sv into %S[{bi}%q, %i] : {T}")
        k.emit(f"    scf.yield %S2 : {T}")
        k.emit("  }")
        k.emit(f"  %omt = arith.subf %one, %tau : {dt}")
        k.emit(f"  %Q4 = tensor.insert %omt into %Q3[{bi}%i, %i] : {T}")
        k.emit(f"  %Q5 = scf.for %q = {c0} to %i step {c1} iter_args(%S = %Q4) -> ({T}) {{")
        k.emit(f"    %S2 = tensor.insert %zf into %S[{bi}%q, %i] : {T}")
        k.emit(f"    scf.yield %S2 : {T}")
        k.emit("  }")
        k.emit(f"  scf.yield %Q5 : {T}")
        k.emit("}")
        return Legalized(k, loops.close(["%cq"]))


_EPS = {"f32": "5.96046448E-8", "f64": "1.1102230246251565E-16"}  # LAPACK's eps (half an ulp of 1)
_SWEEPS = 64  # Jacobi sweeps at most (a converged matrix stops rotating after a few; NaN never does)


def _scale_down(k: Kernel, M: str, T: str, bi: str, rows: str, cols: str, dt: str) -> tuple[str, str, str]:
    """M divided by its largest magnitude (no overflow in squares), that magnitude (1 when it is 0
    or not finite, where nothing is scaled), and whether every element is finite (where not, the
    values are NaN, as jax's for LAPACK's failure)."""
    c0, c1 = k.const_index(0), k.const_index(1)
    s = k.fresh("sc")
    k.emit(f"{s}_m = scf.for %i = {c0} to {rows} step {c1} iter_args(%jq_acc = %zf) -> ({dt}) {{")
    k.emit(f"  %jq_r = scf.for %j = {c0} to {cols} step {c1} iter_args(%jq_a2 = %jq_acc) -> ({dt}) {{")
    k.emit(f"    %jq_v = tensor.extract {M}[{bi}%i, %j] : {T}")
    k.emit(f"    %jq_av = math.absf %jq_v : {dt}")
    k.emit(f"    %jq_mx = arith.maximumf %jq_a2, %jq_av : {dt}")
    k.emit(f"    scf.yield %jq_mx : {dt}")
    k.emit("  }")
    k.emit(f"  scf.yield %jq_r : {dt}")
    k.emit("}")
    k.emit(f"{s}_pos = arith.cmpf ogt, {s}_m, %zf : {dt}")
    k.emit(f"{s}_inf = arith.constant 0x{'7F800000' if dt == 'f32' else '7FF0000000000000'} : {dt}")
    k.emit(f"{s}_fin = arith.cmpf olt, {s}_m, {s}_inf : {dt}")
    k.emit(f"{s}_ok = arith.andi {s}_pos, {s}_fin : i1")
    k.emit(f"{s} = arith.select {s}_ok, {s}_m, %one : {dt}")
    return _rewrite_elements(k, M, T, bi, rows, cols, f"arith.divf %jq_v, {s} : {dt}"), s, f"{s}_fin"


def _rewrite_elements(k: Kernel, M: str, T: str, bi: str, rows: str, cols: str, expr: str) -> str:
    """M with each element %jq_v of its matrix (rows x cols at batch index `bi`) replaced by `expr`."""
    c0, c1 = k.const_index(0), k.const_index(1)
    r = k.fresh("rw")
    k.emit(f"{r} = scf.for %i = {c0} to {rows} step {c1} iter_args(%jq_A = {M}) -> ({T}) {{")
    k.emit(f"  %jq_r = scf.for %j = {c0} to {cols} step {c1} iter_args(%jq_B = %jq_A) -> ({T}) {{")
    k.emit(f"    %jq_v = tensor.extract %jq_B[{bi}%i, %j] : {T}")
    k.emit(f"    %jq_d = {expr}")
    k.emit(f"    %jq_B2 = tensor.insert %jq_d into %jq_B[{bi}%i, %j] : {T}")
    k.emit(f"    scf.yield %jq_B2 : {T}")
    k.emit("  }")
    k.emit(f"  scf.yield %jq_r : {T}")
    k.emit("}")
    return r


def _rotation(k: Kernel, zeta: str, dt: str) -> tuple[str, str]:
    """c, s of the rotation that zeroes an off-diagonal pair: t = sign(zeta) / (|zeta| +
    sqrt(zeta^2 + 1)) (1 for zeta = 0; 0 where zeta^2 overflows), c = 1 / sqrt(t^2 + 1), s = t c."""
    r = k.fresh("rot")
    k.emit(f"{r}_a = math.absf {zeta} : {dt}")
    k.emit(f"{r}_z2 = arith.mulf {zeta}, {zeta} : {dt}")
    k.emit(f"{r}_z21 = arith.addf {r}_z2, %one : {dt}")
    k.emit(f"{r}_sq = math.sqrt {r}_z21 : {dt}")
    k.emit(f"{r}_den = arith.addf {r}_a, {r}_sq : {dt}")
    k.emit(f"{r}_sg = math.copysign %one, {zeta} : {dt}")
    k.emit(f"{r}_t = arith.divf {r}_sg, {r}_den : {dt}")
    k.emit(f"{r}_t2 = arith.mulf {r}_t, {r}_t : {dt}")
    k.emit(f"{r}_t21 = arith.addf {r}_t2, %one : {dt}")
    k.emit(f"{r}_st = math.sqrt {r}_t21 : {dt}")
    k.emit(f"{r}_c = arith.divf %one, {r}_st : {dt}")
    k.emit(f"{r}_s = arith.mulf {r}_t, {r}_c : {dt}")
    return f"{r}_c", f"{r}_s"


def _rotate_columns(k: Kernel, M: str, T: str, bi: str, p: str, q: str, rows: str, c: str, s: str, dt: str,
                    rows_too: bool) -> str:
    """Columns p, q of M (and, with `rows_too`, then rows p, q: J^T M J) rotated by (c, s)."""
    c0, c1 = k.const_index(0), k.const_index(1)
    out = M
    for at in ([lambda i: f"%k, {i}"] + ([lambda i: f"{i}, %k"] if rows_too else [])):
        r = k.fresh("rot")
        k.emit(f"{r} = scf.for %k = {c0} to {rows} step {c1} iter_args(%jq_R = {out}) -> ({T}) {{")
        k.emit(f"  %jq_xp = tensor.extract %jq_R[{bi}{at(p)}] : {T}")
        k.emit(f"  %jq_xq = tensor.extract %jq_R[{bi}{at(q)}] : {T}")
        k.emit(f"  %jq_cp = arith.mulf {c}, %jq_xp : {dt}")
        k.emit(f"  %jq_sq = arith.mulf {s}, %jq_xq : {dt}")
        k.emit(f"  %jq_np = arith.subf %jq_cp, %jq_sq : {dt}")
        k.emit(f"  %jq_sp = arith.mulf {s}, %jq_xp : {dt}")
        k.emit(f"  %jq_cq = arith.mulf {c}, %jq_xq : {dt}")
        k.emit(f"  %jq_nq = arith.addf %jq_sp, %jq_cq : {dt}")
        k.emit(f"  %jq_R1 = tensor.insert %jq_np into %jq_R[{bi}{at(p)}] : {T}")
        k.emit(f"  %jq_R2 = tensor.insert %jq_nq into %jq_R1[{bi}{at(q)}] : {T}")
        k.emit(f"  scf.yield %jq_R2 : {T}")
        k.emit("}")
        out = r
    return out


def _jacobi_kernel(name: str, op: OpInfo):
    """The start of a Jacobi kernel: the working matrix (a copy of the operand), the values (zeros)
    and, with the op's `vectors`, the accumulated rotations (an identity) carried through the batch
    loops, and the constants the steps use. Returns (kernel, loops, the carried tensors inside
    them, their types, the batch index prefix)."""
    x = op.tensor(0)
    types = list(op.result_types)
    a_t, w_t = types[0], types[1]
    rank, dt = len(x.dims), x.dtype
    k = Kernel(name, [x], types)
    A = _copy(k, k.inp(0), k.out(0), a_t)
    W = k.fill("0.0", k.out(1), w_t)
    carried = [(A, k.ty(a_t)), (W, k.ty(w_t))]
    if len(types) == 3:
        v_t = types[2]
        r = len(v_t.dims)
        V = k.generic([], [(k.out(2), v_t, identity_map(r))], ["parallel"] * r,
                      [f"%i = linalg.index {r - 2} : index", f"%j = linalg.index {r - 1} : index",
                       "%eq = arith.cmpi eq, %i, %j : index", f"%one_ = arith.constant 1.0 : {dt}",
                       f"%zero_ = arith.constant 0.0 : {dt}", f"%y = arith.select %eq, %one_, %zero_ : {dt}"], ["%y"])[0]
        carried.append((V, k.ty(v_t)))
    loops = _Loops(k, [k.dim(k.inp(0), x, d) for d in range(rank - 2)], carried)
    inside = loops.open()
    k.emit(f"%zf = arith.constant 0.0 : {dt}")
    k.emit(f"%one = arith.constant 1.0 : {dt}")
    k.emit(f"%eps = arith.constant {_EPS[dt]} : {dt}")
    k.emit(f"%jq_nan = arith.constant 0x{'7FC00000' if dt == 'f32' else '7FF8000000000000'} : {dt}")
    k.emit("%true = arith.constant true")
    return k, loops, inside, [t for _, t in carried], "".join(f"{v}, " for v in loops.ivs)


def _nan_unless(k: Kernel, M: str, T: str, bi: str, rows: str, cols: str, finite: str, dt: str) -> str:
    """M, or NaN everywhere where the matrix was not finite (as the values)."""
    return _rewrite_elements(k, M, T, bi, rows, cols, f"arith.select {finite}, %jq_v, %jq_nan : {dt}")


def _sweeps(k: Kernel, M: str, T: str, n: str, body, V: str | None = None, VT: str | None = None) -> tuple[str, str | None]:
    """Cyclic Jacobi sweeps over the pairs p < q < n until a sweep rotates nothing (at most
    _SWEEPS); `body(M, V, p, q)` emits one pair's step and returns (new M, new V, whether it
    rotated). V (the accumulated rotations, type VT) is carried when given. Returns (M, V)."""
    c0, c1 = k.const_index(0), k.const_index(1)
    carried = [(M, T)] + ([(V, VT)] if V is not None else [])
    names = ["%jq_M", "%jq_V"][:len(carried)]
    nc = len(carried)
    types = ", ".join(t for _, t in carried)

    def args(level: str, src: list[str]) -> str:
        return ", ".join(f"{nm}{level} = {v}" for nm, v in zip(names, src))

    def cur(level: str) -> list[str]:
        return [f"{nm}{level}" for nm in names]

    def res(head: str, count: int) -> list[str]:
        return [f"{head}#{i}" for i in range(count)]

    k.emit(f"%jq_nsw = arith.constant {_SWEEPS} : index")
    k.emit("%false = arith.constant false")
    k.emit(f"%jq_sw:{nc + 1} = scf.for %t = {c0} to %jq_nsw step {c1} iter_args({args('0', [v for v, _ in carried])}, "
           f"%jq_done = %false) -> ({types}, i1) {{")
    k.emit(f"  %jq_swr:{nc + 1} = scf.if %jq_done -> ({types}, i1) {{")
    k.emit(f"    scf.yield {', '.join(cur('0'))}, %jq_done : {types}, i1")
    k.emit("  } else {")
    k.emit(f"    %jq_pl:{nc + 1} = scf.for %p = {c0} to {n} step {c1} iter_args({args('1', cur('0'))}, %jq_rot1 = %false) "
           f"-> ({types}, i1) {{")
    k.emit(f"      %jq_p1 = arith.addi %p, {c1} : index")
    k.emit(f"      %jq_ql:{nc + 1} = scf.for %q = %jq_p1 to {n} step {c1} iter_args({args('2', cur('1'))}, "
           f"%jq_rot2 = %jq_rot1) -> ({types}, i1) {{")
    M3, V3, rot = body("%jq_M2", "%jq_V2" if V is not None else None, "%p", "%q")
    k.emit(f"        %jq_rot3 = arith.ori %jq_rot2, {rot} : i1")
    k.emit(f"        scf.yield {', '.join([M3] + ([V3] if V is not None else []))}, %jq_rot3 : {types}, i1")
    k.emit("      }")
    k.emit(f"      scf.yield {', '.join(res('%jq_ql', nc + 1))} : {types}, i1")
    k.emit("    }")
    k.emit(f"    %jq_still = arith.xori %jq_pl#{nc}, %true : i1")
    k.emit(f"    scf.yield {', '.join(res('%jq_pl', nc))}, %jq_still : {types}, i1")
    k.emit("  }")
    k.emit(f"  scf.yield {', '.join(res('%jq_swr', nc + 1))} : {types}, i1")
    k.emit("}")
    return "%jq_sw#0", ("%jq_sw#1" if V is not None else None)


def _pair_step(k: Kernel, M: str, T: str, bi: str, p: str, q: str, dt: str, rows: str, symmetric: bool,
               V: str | None = None, VT: str | None = None, vrows: str | None = None):
    """One Jacobi step on the pair (p, q): two-sided on a symmetric matrix (a_pq against a_pp,
    a_qq), one-sided on columns (their dot product against their squared norms); skipped where the
    coupling is below eps times the geometric mean of the diagonal terms (de Rijk's test). With V
    (`vrows` rows), the same rotation of V's columns p, q accumulates the product of the rotations
    (the eigenvectors, or the right singular vectors). Returns (M, V, whether it rotated)."""
    c0, c1 = k.const_index(0), k.const_index(1)
    if symmetric:
        k.emit(f"        %jq_g = tensor.extract {M}[{bi}{p}, {q}] : {T}")
        k.emit(f"        %jq_al = tensor.extract {M}[{bi}{p}, {p}] : {T}")
        k.emit(f"        %jq_be = tensor.extract {M}[{bi}{q}, {q}] : {T}")
    else:
        k.emit(f"        %jq_dots:3 = scf.for %k = {c0} to {rows} step {c1} iter_args(%jq_sa = %zf, %jq_sb = %zf, %jq_sg = %zf) "
               f"-> ({dt}, {dt}, {dt}) {{")
        k.emit(f"          %jq_xp = tensor.extract {M}[{bi}%k, {p}] : {T}")
        k.emit(f"          %jq_xq = tensor.extract {M}[{bi}%k, {q}] : {T}")
        k.emit(f"          %jq_pp = arith.mulf %jq_xp, %jq_xp : {dt}")
        k.emit(f"          %jq_qq = arith.mulf %jq_xq, %jq_xq : {dt}")
        k.emit(f"          %jq_pq = arith.mulf %jq_xp, %jq_xq : {dt}")
        k.emit(f"          %jq_sa2 = arith.addf %jq_sa, %jq_pp : {dt}")
        k.emit(f"          %jq_sb2 = arith.addf %jq_sb, %jq_qq : {dt}")
        k.emit(f"          %jq_sg2 = arith.addf %jq_sg, %jq_pq : {dt}")
        k.emit(f"          scf.yield %jq_sa2, %jq_sb2, %jq_sg2 : {dt}, {dt}, {dt}")
        k.emit("        }")
        k.emit("        %jq_al = arith.addf %jq_dots#0, %zf : " + dt)
        k.emit("        %jq_be = arith.addf %jq_dots#1, %zf : " + dt)
        k.emit("        %jq_g = arith.addf %jq_dots#2, %zf : " + dt)
    k.emit(f"        %jq_ag = math.absf %jq_g : {dt}")
    k.emit(f"        %jq_aal = math.absf %jq_al : {dt}")
    k.emit(f"        %jq_abe = math.absf %jq_be : {dt}")
    k.emit(f"        %jq_ral = math.sqrt %jq_aal : {dt}")
    k.emit(f"        %jq_rbe = math.sqrt %jq_abe : {dt}")
    k.emit(f"        %jq_gm = arith.mulf %jq_ral, %jq_rbe : {dt}")
    k.emit(f"        %jq_thr = arith.mulf %eps, %jq_gm : {dt}")
    k.emit(f"        %jq_small = arith.cmpf ole, %jq_ag, %jq_thr : {dt}")
    types = f"{T}, {VT}, i1" if V is not None else f"{T}, i1"
    both = f"{M}, {V}" if V is not None else M
    n_res = 3 if V is not None else 2
    k.emit(f"        %jq_step:{n_res} = scf.if %jq_small -> ({types}) {{")
    k.emit(f"          scf.yield {both}, %false : {types}")
    k.emit("        } else {")
    k.emit(f"          %jq_d = arith.subf %jq_be, %jq_al : {dt}")
    k.emit(f"          %jq_g2 = arith.addf %jq_g, %jq_g : {dt}")
    k.emit(f"          %jq_zeta = arith.divf %jq_d, %jq_g2 : {dt}")
    c, s = _rotation(k, "%jq_zeta", dt)
    R = _rotate_columns(k, M, T, bi, p, q, rows, c, s, dt, symmetric)
    if V is not None:
        RV = _rotate_columns(k, V, VT, bi, p, q, vrows, c, s, dt, False)
        k.emit(f"          scf.yield {R}, {RV}, %true : {types}")
    else:
        k.emit(f"          scf.yield {R}, %true : {types}")
    k.emit("        }")
    if V is not None:
        return "%jq_step#0", "%jq_step#1", "%jq_step#2"
    return "%jq_step#0", None, "%jq_step#1"


@relax_op
class EigvalshOp(OpSpec):
    """The eigenvalues of each symmetric matrix of x ([..., n, n], f32 or f64; its lower triangle
    is read, as LAPACK syevd's uplo = L), unsorted, in the second result ([..., n]); the first
    ([..., n, n]) is the working matrix (nearly diagonal). With `vectors`, a third result
    ([..., n, n]) holds the eigenvectors, column j for value j (the product of the rotations; their
    signs are this algorithm's, not LAPACK's: the importer lets them reach only uses where the
    signs cancel, frontend/stablehlo/signs.py). Cyclic Jacobi rotations on the matrix scaled by its
    largest magnitude, until a sweep rotates nothing; accurate to a few eps of the matrix's norm, as
    LAPACK. NaN in a matrix gives NaN eigenvalues (and eigenvectors)."""

    name = "relax_v.eigvalsh"
    x = operand(TENSOR)
    results = result_(TENSOR, variadic=True)
    vectors = attr("int", doc="1: also the eigenvectors (a third result)")

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = _matrices(x, "operand")
        if not dims_equal(d[-1], d[-2], op.facts):
            raise DeduceError(f"needs square matrices, got {fmt(d[-2])} x {fmt(d[-1])}")
        out = [TensorType(d, x.dtype), TensorType(d[:-1], x.dtype)]
        return out + ([TensorType(d, x.dtype)] if op.attr("vectors", 0) else [])

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, dt = op.tensor(0), op.tensor(0).dtype
        k, loops, inside, types, bi = _jacobi_kernel("syevj", op)
        Ab, Wb = inside[0], inside[1]
        T, WT = types[0], types[1]
        Vb, VT = (inside[2], types[2]) if len(inside) == 3 else (None, None)
        c0, c1 = k.const_index(0), k.const_index(1)
        n = k.dim(k.inp(0), x, len(x.dims) - 1)
        # the upper triangle from the lower one
        k.emit(f"%jq_sy = scf.for %i = {c0} to {n} step {c1} iter_args(%jq_S = {Ab}) -> ({T}) {{")
        k.emit(f"  %jq_i1 = arith.addi %i, {c1} : index")
        k.emit(f"  %jq_r = scf.for %j = %jq_i1 to {n} step {c1} iter_args(%jq_S2 = %jq_S) -> ({T}) {{")
        k.emit(f"    %jq_v = tensor.extract %jq_S2[{bi}%j, %i] : {T}")
        k.emit(f"    %jq_S3 = tensor.insert %jq_v into %jq_S2[{bi}%i, %j] : {T}")
        k.emit(f"    scf.yield %jq_S3 : {T}")
        k.emit("  }")
        k.emit(f"  scf.yield %jq_r : {T}")
        k.emit("}")
        M, scale, finite = _scale_down(k, "%jq_sy", T, bi, n, n, dt)
        D, V = _sweeps(k, M, T, n, lambda m, v, p, q: _pair_step(k, m, T, bi, p, q, dt, n, True, v, VT, n), Vb, VT)
        k.emit(f"%jq_wv = scf.for %i = {c0} to {n} step {c1} iter_args(%jq_V = {Wb}) -> ({WT}) {{")
        k.emit(f"  %jq_d = tensor.extract {D}[{bi}%i, %i] : {T}")
        k.emit(f"  %jq_d0 = arith.mulf %jq_d, {scale} : {dt}")
        k.emit(f"  %jq_ds = arith.select {finite}, %jq_d0, %jq_nan : {dt}")
        k.emit(f"  %jq_V2 = tensor.insert %jq_ds into %jq_V[{bi}%i] : {WT}")
        k.emit(f"  scf.yield %jq_V2 : {WT}")
        k.emit("}")
        if V is None:
            return Legalized(k, loops.close([D, "%jq_wv"]))
        return Legalized(k, loops.close([D, "%jq_wv", _nan_unless(k, V, VT, bi, n, n, finite, dt)]))


@relax_op
class SvdvalsOp(OpSpec):
    """The singular values of each matrix of x ([..., m, n], m >= n, f32 or f64), in the second
    result ([..., n], unsorted: the importer sorts them descending); the first is the working
    matrix (orthogonal columns). One-sided Jacobi (Hestenes) rotations of column pairs on the
    matrix scaled by its largest magnitude until a sweep rotates nothing; the values are the
    columns' norms (high relative accuracy, as LAPACK gesdd's). With `vectors`, the first result
    holds the left singular vectors (the working columns over their norms; a zero column stays
    zero) and a third result ([..., n, n]) the right ones (the product of the rotations), column j
    for value j: A = U diag(s) V^T. Their signs are this algorithm's, not LAPACK's (the importer
    lets them reach only uses where the signs cancel, frontend/stablehlo/signs.py)."""

    name = "relax_v.svdvals"
    x = operand(TENSOR)
    results = result_(TENSOR, variadic=True)
    vectors = attr("int", doc="1: the left singular vectors in the first result, the right ones in a third")

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = _matrices(x, "operand")
        m, n = d[-2], d[-1]
        if m is not None and n is not None and m.is_const and n.is_const and m.value < n.value:
            raise DeduceError(f"needs rows >= columns, got {fmt(m)} x {fmt(n)} (transpose it)")
        out = [TensorType(d, x.dtype), TensorType(d[:-2] + (n,), x.dtype)]
        return out + ([TensorType(d[:-2] + (n, n), x.dtype)] if op.attr("vectors", 0) else [])

    @classmethod
    def requirements(cls, op: OpInfo):
        d = op.tensor(0).dims
        if d[-1] is None or d[-2] is None:
            return []
        return [(d[-1], d[-2], f"the columns {fmt(d[-1])} exceed the rows {fmt(d[-2])}")]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, dt = op.tensor(0), op.tensor(0).dtype
        k, loops, inside, types, bi = _jacobi_kernel("gesvj", op)
        Ab, Wb = inside[0], inside[1]
        T, WT = types[0], types[1]
        Vb, VT = (inside[2], types[2]) if len(inside) == 3 else (None, None)
        c0, c1 = k.const_index(0), k.const_index(1)
        m, n = k.dim(k.inp(0), x, len(x.dims) - 2), k.dim(k.inp(0), x, len(x.dims) - 1)
        M, scale, finite = _scale_down(k, Ab, T, bi, m, n, dt)
        D, V = _sweeps(k, M, T, n, lambda mm, v, p, q: _pair_step(k, mm, T, bi, p, q, dt, m, False, v, VT, n), Vb, VT)
        k.emit(f"%jq_wv:2 = scf.for %j = {c0} to {n} step {c1} iter_args(%jq_V = {Wb}, %jq_U = {D}) -> ({WT}, {T}) {{")
        k.emit(f"  %jq_ss = scf.for %i = {c0} to {m} step {c1} iter_args(%jq_acc = %zf) -> ({dt}) {{")
        k.emit(f"    %jq_v = tensor.extract {D}[{bi}%i, %j] : {T}")
        k.emit(f"    %jq_v2 = arith.mulf %jq_v, %jq_v : {dt}")
        k.emit(f"    %jq_acc2 = arith.addf %jq_acc, %jq_v2 : {dt}")
        k.emit(f"    scf.yield %jq_acc2 : {dt}")
        k.emit("  }")
        k.emit(f"  %jq_nrm = math.sqrt %jq_ss : {dt}")
        k.emit(f"  %jq_n0 = arith.mulf %jq_nrm, {scale} : {dt}")
        k.emit(f"  %jq_ns = arith.select {finite}, %jq_n0, %jq_nan : {dt}")
        k.emit(f"  %jq_V2 = tensor.insert %jq_ns into %jq_V[{bi}%j] : {WT}")
        if V is None:
            k.emit(f"  scf.yield %jq_V2, %jq_U : {WT}, {T}")
        else:  # column j of U: the working column over its norm (zero where the norm is)
            k.emit(f"  %jq_nz = arith.cmpf ogt, %jq_nrm, %zf : {dt}")
            k.emit(f"  %jq_un = scf.for %i = {c0} to {m} step {c1} iter_args(%jq_U2 = %jq_U) -> ({T}) {{")
            k.emit(f"    %jq_x = tensor.extract {D}[{bi}%i, %j] : {T}")
            k.emit(f"    %jq_q = arith.divf %jq_x, %jq_nrm : {dt}")
            k.emit(f"    %jq_q2 = arith.select %jq_nz, %jq_q, %zf : {dt}")
            k.emit(f"    %jq_U3 = tensor.insert %jq_q2 into %jq_U2[{bi}%i, %j] : {T}")
            k.emit(f"    scf.yield %jq_U3 : {T}")
            k.emit("  }")
            k.emit(f"  scf.yield %jq_V2, %jq_un : {WT}, {T}")
        k.emit("}")
        if V is None:
            return Legalized(k, loops.close([D, "%jq_wv#0"]))
        U = _nan_unless(k, "%jq_wv#1", T, bi, m, n, finite, dt)
        return Legalized(k, loops.close([U, "%jq_wv#0", _nan_unless(k, V, VT, bi, n, n, finite, dt)]))


@relax_op
class TridiagonalSolveOp(OpSpec):
    """LAPACK gtsv: solves A X = B for each tridiagonal matrix A, given by its sub-diagonal `dl`
    (dl[i] = A[i, i-1]; dl[0] is not read), diagonal `d` and super-diagonal `du` (du[i] = A[i, i+1];
    du[m-1] is not read), all [..., m], and each right-hand side b ([..., m, n]); f32 or f64 (jax's
    `lax.linalg.tridiagonal_solve`). Gaussian elimination with partial pivoting as gtsv does it
    (rows i and i+1 exchanged where |A[i+1, i]| > |the pivot|, a NaN comparing false), then back
    substitution with the two super-diagonals. Results: X ([..., m, n]) and info ([...], i32: 0,
    or k where the pivot of row k - 1 is exactly 0, the first such; X is then unspecified, as jax
    masks it with NaN). One sequential pass over the rows per matrix: O(m n)."""

    name = "relax_v.tridiagonal_solve"
    dl = operand(TENSOR)
    d = operand(TENSOR)
    du = operand(TENSOR)
    b = operand(TENSOR)
    results = result_(TENSOR, variadic=True)

    @classmethod
    def deduce(cls, op: OpInfo):
        bt = op.tensor(3)
        bd = _matrices(bt, "b")
        for i, what in enumerate(("dl", "d", "du")):
            t = op.tensor(i)
            td = require_rank(t, what)
            if t.dtype != bt.dtype:
                raise DeduceError(f"{what} must have b's dtype {bt.dtype}, got {t.dtype}")
            if len(td) != len(bd) - 1 or not all(dims_equal(x, y, op.facts) for x, y in zip(td, bd[:-1])):
                raise DeduceError(f"{what} must be [{', '.join(fmt(x) for x in bd[:-1])}] (b's dims but the last), "
                                  f"got [{', '.join(fmt(x) for x in td)}]")
        return [TensorType(bd, bt.dtype), TensorType(bd[:-2], "i32")]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        diag_t, b_t = op.tensor(1), op.tensor(3)
        x_t, i_t = op.result_types
        rank, dt = len(b_t.dims), b_t.dtype
        k = Kernel("gtsv", [op.tensor(0), diag_t, op.tensor(2), b_t], [x_t, i_t])
        c0, c1, c2 = k.const_index(0), k.const_index(1), k.const_index(2)
        m, n = k.dim(k.inp(3), b_t, rank - 2), k.dim(k.inp(3), b_t, rank - 1)
        # working copies of the diagonals: gtsv overwrites them with U's (and the second
        # super-diagonal, fill-in of a row exchange, where dl was: U2[i] in DL[i + 1])
        work = [_copy(k, k.inp(i), k.empty(diag_t, dims_from=(k.inp(i), diag_t)), diag_t) for i in range(3)]
        X = _copy(k, k.inp(3), k.out(0), x_t)
        info = _fill_i32(k, k.out(1), i_t)
        T, DT, IT = k.ty(x_t), k.ty(diag_t), k.ty(i_t)
        loops = _Loops(k, [k.dim(k.inp(3), b_t, d) for d in range(rank - 2)],
                       [(X, T), (info, IT)] + [(w, DT) for w in work])
        Xb, Ib, DLb, Db, DUb = loops.open()
        bi = "".join(f"{v}, " for v in loops.ivs)
        k.emit("%zi = arith.constant 0 : i32")
        k.emit(f"%zf = arith.constant 0.0 : {dt}")
        k.emit(f"%m1 = arith.subi {m}, {c1} : index")
        # elimination: row k + 1 loses its sub-diagonal entry against row k (or they swap first)
        k.emit(f"%el:5 = scf.for %k = {c0} to %m1 step {c1} iter_args(%X = {Xb}, %L = {DLb}, %D = {Db}, "
               f"%U = {DUb}, %inf = %zi) -> ({T}, {DT}, {DT}, {DT}, i32) {{")
        k.emit(f"  %k1 = arith.addi %k, {c1} : index")
        k.emit(f"  %l = tensor.extract %L[{bi}%k1] : {DT}")  # A[k + 1, k]
        k.emit(f"  %dk = tensor.extract %D[{bi}%k] : {DT}")
        k.emit(f"  %dk1 = tensor.extract %D[{bi}%k1] : {DT}")
        k.emit(f"  %uk = tensor.extract %U[{bi}%k] : {DT}")
        k.emit(f"  %uk1 = tensor.extract %U[{bi}%k1] : {DT}")
        k.emit(f"  %ad = math.absf %dk : {dt}")
        k.emit(f"  %al = math.absf %l : {dt}")
        k.emit(f"  %keep = arith.cmpf oge, %ad, %al : {dt}")
        k.emit(f"  %num = arith.select %keep, %l, %dk : {dt}")
        k.emit(f"  %den = arith.select %keep, %dk, %l : {dt}")
        k.emit(f"  %fact = arith.divf %num, %den : {dt}")
        # keep: D[k+1] - fact * U[k]; swap: U[k] - fact * D[k+1]
        k.emit(f"  %p = arith.select %keep, %dk1, %uk : {dt}")
        k.emit(f"  %q = arith.select %keep, %uk, %dk1 : {dt}")
        k.emit(f"  %fq = arith.mulf %fact, %q : {dt}")
        k.emit(f"  %dk1n = arith.subf %p, %fq : {dt}")
        k.emit(f"  %dkn = arith.select %keep, %dk, %l : {dt}")
        k.emit(f"  %ukn = arith.select %keep, %uk, %dk1 : {dt}")
        k.emit(f"  %fu = arith.mulf %fact, %uk1 : {dt}")
        k.emit(f"  %nfu = arith.negf %fu : {dt}")
        k.emit(f"  %uk1n = arith.select %keep, %uk1, %nfu : {dt}")
        k.emit(f"  %ln = arith.select %keep, %zf, %uk1 : {dt}")  # the second super-diagonal of row k
        k.emit(f"  %D1 = tensor.insert %dkn into %D[{bi}%k] : {DT}")
        k.emit(f"  %D2 = tensor.insert %dk1n into %D1[{bi}%k1] : {DT}")
        k.emit(f"  %U1 = tensor.insert %ukn into %U[{bi}%k] : {DT}")
        k.emit(f"  %U2 = tensor.insert %uk1n into %U1[{bi}%k1] : {DT}")
        k.emit(f"  %L1 = tensor.insert %ln into %L[{bi}%k1] : {DT}")
        k.emit(f"  %zero = arith.cmpf oeq, %dk, %zf : {dt}")
        k.emit("  %sing = arith.andi %keep, %zero : i1")
        k.emit("  %first = arith.cmpi eq, %inf, %zi : i32")
        k.emit("  %set = arith.andi %sing, %first : i1")
        k.emit("  %k1i = arith.index_cast %k1 : index to i32")
        k.emit("  %inf2 = arith.select %set, %k1i, %inf : i32")
        k.emit(f"  %Xn = scf.for %j = {c0} to {n} step {c1} iter_args(%Y = %X) -> ({T}) {{")
        k.emit(f"    %bk = tensor.extract %Y[{bi}%k, %j] : {T}")
        k.emit(f"    %bk1 = tensor.extract %Y[{bi}%k1, %j] : {T}")
        # keep: B[k+1] - fact * B[k]; swap: B[k] - fact * B[k+1], and B[k] = B[k+1]
        k.emit(f"    %bp = arith.select %keep, %bk1, %bk : {dt}")
        k.emit(f"    %bq = arith.select %keep, %bk, %bk1 : {dt}")
        k.emit(f"    %fb = arith.mulf %fact, %bq : {dt}")
        k.emit(f"    %b1n = arith.subf %bp, %fb : {dt}")
        k.emit(f"    %Y1 = tensor.insert %bq into %Y[{bi}%k, %j] : {T}")
        k.emit(f"    %Y2 = tensor.insert %b1n into %Y1[{bi}%k1, %j] : {T}")
        k.emit(f"    scf.yield %Y2 : {T}")
        k.emit("  }")
        k.emit(f"  scf.yield %Xn, %L1, %D2, %U2, %inf2 : {T}, {DT}, {DT}, {DT}, i32")
        k.emit("}")
        # the last pivot
        k.emit(f"%has = arith.cmpi sgt, {m}, {c0} : index")
        k.emit("%infl = scf.if %has -> (i32) {")
        k.emit(f"  %dlast = tensor.extract %el#2[{bi}%m1] : {DT}")
        k.emit(f"  %zl = arith.cmpf oeq, %dlast, %zf : {dt}")
        k.emit("  %firstl = arith.cmpi eq, %el#4, %zi : i32")
        k.emit("  %setl = arith.andi %zl, %firstl : i1")
        k.emit(f"  %mi = arith.index_cast {m} : index to i32")
        k.emit("  %vl = arith.select %setl, %mi, %el#4 : i32")
        k.emit("  scf.yield %vl : i32")
        k.emit("} else {")
        k.emit("  scf.yield %el#4 : i32")
        k.emit("}")
        # back substitution, rows m-1 down to 0: (B[i] - U[i] B[i+1] - U2[i] B[i+2]) / D[i]
        k.emit(f"%bs = scf.for %j = {c0} to {n} step {c1} iter_args(%Y = %el#0) -> ({T}) {{")
        k.emit(f"  %br = scf.for %t = {c0} to {m} step {c1} iter_args(%Z = %Y) -> ({T}) {{")
        k.emit("    %i = arith.subi %m1, %t : index")
        k.emit(f"    %i1 = arith.addi %i, {c1} : index")
        k.emit(f"    %i2 = arith.addi %i, {c2} : index")
        k.emit(f"    %ok1 = arith.cmpi slt, %i1, {m} : index")
        k.emit(f"    %ok2 = arith.cmpi slt, %i2, {m} : index")
        k.emit("    %i1c = arith.minsi %i1, %m1 : index")
        k.emit("    %i2c = arith.minsi %i2, %m1 : index")
        k.emit(f"    %bi0 = tensor.extract %Z[{bi}%i, %j] : {T}")
        k.emit(f"    %x1 = tensor.extract %Z[{bi}%i1c, %j] : {T}")
        k.emit(f"    %x2 = tensor.extract %Z[{bi}%i2c, %j] : {T}")
        k.emit(f"    %u1 = tensor.extract %el#3[{bi}%i] : {DT}")
        k.emit(f"    %u2 = tensor.extract %el#1[{bi}%i1c] : {DT}")
        k.emit(f"    %di = tensor.extract %el#2[{bi}%i] : {DT}")
        k.emit(f"    %t1 = arith.mulf %u1, %x1 : {dt}")
        k.emit(f"    %t1s = arith.select %ok1, %t1, %zf : {dt}")
        k.emit(f"    %t2 = arith.mulf %u2, %x2 : {dt}")
        k.emit(f"    %t2s = arith.select %ok2, %t2, %zf : {dt}")
        k.emit(f"    %r1 = arith.subf %bi0, %t1s : {dt}")
        k.emit(f"    %r2 = arith.subf %r1, %t2s : {dt}")
        k.emit(f"    %xi = arith.divf %r2, %di : {dt}")
        k.emit(f"    %Z1 = tensor.insert %xi into %Z[{bi}%i, %j] : {T}")
        k.emit(f"    scf.yield %Z1 : {T}")
        k.emit("  }")
        k.emit(f"  scf.yield %br : {T}")
        k.emit("}")
        ivs = ", ".join(loops.ivs)
        k.emit(f"%I2 = tensor.insert %infl into {Ib}[{ivs}] : {IT}")
        outs = loops.close(["%bs", "%I2", "%el#1", "%el#2", "%el#3"])
        return Legalized(k, outs[:2])


@relax_op
class UnavailableOp(OpSpec):
    """A result the importer does not compute (jax's eigenvectors and singular vectors): the
    importer erases it when nothing uses it; otherwise shape deduction refuses it with `message`
    at its location."""

    name = "relax_v.unavailable"
    message = attr("str", optional=False, doc="why the value is not computed")
    result = result_(TENSOR)

    @classmethod
    def deduce(cls, op: OpInfo):
        raise DeduceError(op.attr("message"))


__all__ = ["CholeskyOp", "TriangularSolveOp", "LuOp", "QrOp", "HouseholderProductOp", "EigvalshOp", "SvdvalsOp",
           "TridiagonalSolveOp", "UnavailableOp"]
