"""Dense linear algebra: Cholesky, triangular solve and LU with partial pivoting, as LAPACK's
potrf / trsm / getrf define them (what jax's CPU lowering calls: `jnp.linalg.cholesky`, `solve`,
`inv`, `det`, `slogdet`, `jax.scipy.linalg.solve_triangular`, `cho_solve`, `lu`).

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


__all__ = ["CholeskyOp", "TriangularSolveOp", "LuOp", "QrOp", "HouseholderProductOp"]
