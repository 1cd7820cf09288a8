"""`relax-dispatch-library`: f32 matmuls become `relax.call_library` of BLAS `sgemm`.

Graph level, before `relax-legalize`. A `relax.matmul` of f32 operands whose shapes sgemm takes
(rhs rank 2 with any lhs rank >= 2, whose leading dims fold into M; or equal ranks >= 3 with the same
batch dims, which the kernel loops over) is replaced by

    %c = "relax_v.call_library"(%a, %b) {callee = "sgemm", transpose_a = false, transpose_b = true}

with the matmul's symbolic result type. A `relax.permute_dims` that swaps the two matrix dims of an
operand is folded into the `transpose_*` flag (`q @ k.T` reads `k` in place). Epilogues are not
taken by the library: the elementwise consumers stay separate kernels that `relax-fuse-kernels`
fuses with each other, so `relu(x @ w + b)` is one sgemm plus one fused bias+relu kernel.

Which matmuls go to the library (`mode`, default `RELAX_MLIR_LIBRARY`, else `auto`):
`always`, `never`, or `auto`, the cost model: the generated register-blocked matmul
(backend/cpu_matmul.py) matches OpenBLAS on one thread when K and N are static and at least
`min_static` (0.95-0.99x at K=512, N=2048, bench/matmul.py), but reaches only about a third of it
when K or N is small or dynamic (the attention products `q @ k.T` and `p @ v`: 20-34 vs 80
GFLOP/s at s=512, d=64). So `auto` dispatches a matmul unless both K and N are static and
>= `min_static`. Measured again for issue 18 (single-head attention d = 256, one thread, load
~1-4): s = 512 2.3 ms through BLAS vs 9-13 ms generated, s = 16 0.02 vs 0.15 ms. Where K and N
are static and >= `min_static`, the row count decides: `relax-multiversion` (run next) gives such
a matmul a BLAS version for the row counts where its measured table prefers BLAS, chosen at run
time (transforms/multiversion.py): for an LLM's weights (K*N >= 2^20, or K >= 1024 and K*N >=
2^18) BLAS past 16 rows, so a prefill's [b*s, K] x [K, N] products are one sgemm each; a 3-D
[b, s, K] x [K, N] product is versioned on its b*s flattened rows.

`relax-legalize` turns each `call_library` into a `call_tir` of a kernel holding the matmul as a
`linalg.generic` tagged `relax.library = "sgemm"` (`legalize_call_library`): shapes stay symbolic,
destination passing and bufferization semantics are exactly the matmul's, so fusion, memory
planning and the shape checks treat it as any other kernel, and a backend that does not know the
tag still computes the right result. The CPU backend leaves tagged kernels unscheduled and, after
bufferization, replaces each tagged op by `scipy_cblas_sgemm` calls on its buffers
(backend/cpu_library.py). `relax_mlir.compile` runs this pass for the CPU target only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mlir import ir

from relax_mlir.dialect.types import TensorType, view
from relax_mlir.ops.kernel import Kernel, affine_map
from relax_mlir.passes import ModulePass, PassError, PipelineError
from relax_mlir.transforms.infer_shapes import check_module, graph_ops_named
from relax_mlir.transforms.multiversion import (check_library_mode, leaves, library_callee, library_flag,
                                                read_versions)


def _same(a, b) -> bool:
    return a is not None and b is not None and str(a) == str(b)


def _swaps_last_two(op: ir.Operation) -> bool:
    """A relax.permute_dims that exchanges exactly the last two axes."""
    if op.name != "relax.permute_dims":
        return False
    t = view(op.operands[0].type)
    if not isinstance(t, TensorType) or t.dims is None or len(t.dims) < 2:
        return False
    r = len(t.dims)
    if "axes" not in op.attributes:
        return r == 2
    axes = [ir.IntegerAttr(a).value % r for a in ir.ArrayAttr(op.attributes["axes"])]
    return axes == list(range(r - 2)) + [r - 1, r - 2]


def sgemm_shapes_ok(a: TensorType, b: TensorType, r: TensorType, ta: bool, tb: bool) -> bool:
    """Can one sgemm (or a loop of them over the batch) compute r = op(a) @ op(b)?"""
    if not (a.known and b.known and r.known) or {a.dtype, b.dtype, r.dtype} != {"f32"}:
        return False
    ra, rb = len(a.dims), len(b.dims)
    if ra < 2 or rb < 2:
        return False
    if rb == 2:
        return ra == 2 or not ta
    return ra == rb and len(r.dims) == ra and all(
        _same(a.dims[i], r.dims[i]) and _same(b.dims[i], r.dims[i]) for i in range(ra - 2))


def _static(d) -> int | None:
    return d.value if d is not None and d.is_const else None


@dataclass(frozen=True)
class DispatchLibraryPass(ModulePass):
    """Replace f32 matmuls by relax.call_library of BLAS sgemm (transposes folded)."""

    name: ClassVar[str] = "relax-dispatch-library"
    mode: str = ""  # auto | always | never; "" reads RELAX_MLIR_LIBRARY
    min_static: int = 256  # auto: keep generated code when static K and N are both >= this

    def validate(self) -> None:
        check_library_mode(self)
        if self.min_static < 0:
            raise PipelineError(f"option min_static of {self.name} must be >= 0, got {self.min_static}")

    def chosen(self, k, n) -> bool:
        from relax_mlir import knobs

        mode = self.mode or knobs.use_library()
        if mode not in ("auto", "always", "never"):
            raise ValueError(f"relax-dispatch-library: mode must be auto, always or never, not '{mode}'")
        if mode == "never":
            return False
        from relax_mlir.runtime import library

        if not library.available():
            return False
        if mode == "always":
            return True
        ks, ns = _static(k), _static(n)
        return not (ks is not None and ns is not None and ks >= self.min_static and ns >= self.min_static)

    def run(self, module: ir.Operation) -> None:
        check_module(module, infer=True)
        for op in graph_ops_named(module, ("relax.matmul",)):
            self.rewrite(op)

    def rewrite(self, op: ir.Operation) -> None:
        lhs, rhs = op.operands[0], op.operands[1]
        flags = []
        srcs = []
        for v in (lhs, rhs):
            owner = v.owner if isinstance(v.owner, ir.Operation) else getattr(v.owner, "operation", None)
            owner = owner.operation if owner is not None and hasattr(owner, "operation") else owner
            if isinstance(owner, ir.Operation) and _swaps_last_two(owner):
                srcs.append(owner.operands[0])
                flags.append(True)
            else:
                srcs.append(v)
                flags.append(False)
        a, b, r = view(srcs[0].type), view(srcs[1].type), view(op.results[0].type)
        if not all(isinstance(t, TensorType) for t in (a, b, r)):
            return
        if not sgemm_shapes_ok(a, b, r, *flags):
            # The transposed form may not fit (a batched lhs with a transpose): try the plain one.
            srcs, flags = [lhs, rhs], [False, False]
            a, b = view(lhs.type), view(rhs.type)
            if not (isinstance(a, TensorType) and isinstance(b, TensorType) and sgemm_shapes_ok(a, b, r, False, False)):
                return
        kdim = a.dims[-2] if flags[0] else a.dims[-1]
        if not self.chosen(kdim, r.dims[-1]):
            return
        with ir.InsertionPoint(op), op.location:
            call = ir.Operation.create("relax_v.call_library", results=[op.results[0].type], operands=srcs,
                                       attributes={"callee": ir.StringAttr.get("sgemm"),
                                                   "transpose_a": ir.BoolAttr.get(flags[0]),
                                                   "transpose_b": ir.BoolAttr.get(flags[1])})
        op.results[0].replace_all_uses_with(call.results[0])
        op.erase()


# --------------------------------------------------------------------------------------------
# Legalization: call_library -> call_tir of a kernel holding a library-tagged linalg op
# --------------------------------------------------------------------------------------------

LIBRARY_ATTR = "relax.library"


def sgemm_kernel(a: TensorType, b: TensorType, r: TensorType, ta: bool, tb: bool) -> tuple[Kernel, str]:
    """The kernel: `fill 0` + a matmul `linalg.generic` tagged `relax.library = "sgemm"` (with
    `relax.transpose_a/b`). On tensors it means exactly the matmul, so every pass, bufferization
    and any backend treat it as one; the CPU backend replaces the tagged op, once it works on
    buffers, by calls of `scipy_cblas_sgemm` (backend/cpu_library.py)."""
    k = Kernel("sgemm", [a, b], [r])
    ra, rb, rr = len(a.dims), len(b.dims), len(r.dims)
    lead = [f"d{i}" for i in range(rr - 2)]
    m, n, kk = f"d{rr - 2}", f"d{rr - 1}", f"d{rr}"
    nloops = rr + 1
    amap = lead[len(lead) - (ra - 2):] + ([kk, m] if ta else [m, kk])  # (a batched lhs keeps its batch dims)
    bmap = ([n, kk] if tb else [kk, n]) if rb == 2 else lead + ([n, kk] if tb else [kk, n])
    omap = lead + [m, n]
    f = k.fill("0.0", k.out(0), r)
    g = k.generic([(k.inp(0), a, affine_map(nloops, amap)), (k.inp(1), b, affine_map(nloops, bmap))],
                  [(f, r, affine_map(nloops, omap))], ["parallel"] * (nloops - 1) + ["reduction"],
                  ["%p = arith.mulf %a0, %a1 : f32", "%s = arith.addf %o0, %p : f32"], ["%s"])
    for i, line in enumerate(k.lines):
        if "= linalg.generic {indexing_maps" in line:
            k.lines[i] = line.replace("]} ins(", f'], {LIBRARY_ATTR} = "sgemm", relax.transpose_a = '
                                      f'{str(ta).lower()}, relax.transpose_b = {str(tb).lower()}}} ins(', 1)
    return k, g[0]


def versioned_sgemm_kernel(a: TensorType, b: TensorType, r: TensorType,
                           leaves: list[tuple[int | None, str]]) -> tuple[Kernel, str]:
    """One kernel holding every version of a 2-D matmul (relax-multiversion): an `scf.if` chain
    on the row count `tensor.dim %in0, 0` (`rows <= max` per version, in order, the last
    unconditional); each branch fills the destination with zeros and computes the product with
    either the BLAS-tagged generic of `sgemm_kernel` or a `linalg.matmul` tagged
    `relax_mlir.matmul_variant` (gemv / small / medium / large) for the CPU backend's schedules."""
    k = Kernel("sgemm_versions", [a, b], [r])
    rt = k.ty(r)
    rows = k.dim(k.inp(0), a, 0)

    def branch(impl: str) -> str:
        if impl == "sgemm":
            # The zero initialization as a generic, not a linalg.fill: the generated versions'
            # schedules vectorize every linalg.fill of the kernel (their fused accumulator
            # fills), which fails on this dynamic one. cpu_library turns it into beta = 0.
            f = k.generic([], [(k.out(0), r, affine_map(2, ["d0", "d1"]))], ["parallel", "parallel"],
                          ["%z = arith.constant 0.0 : f32"], ["%z"])[0]
            g = k.generic([(k.inp(0), a, affine_map(3, ["d0", "d2"])), (k.inp(1), b, affine_map(3, ["d2", "d1"]))],
                          [(f, r, affine_map(3, ["d0", "d1"]))], ["parallel", "parallel", "reduction"],
                          ["%p = arith.mulf %a0, %a1 : f32", "%s = arith.addf %o0, %p : f32"], ["%s"])[0]
            line = k.lines.index(next(ln for ln in reversed(k.lines) if "= linalg.generic {indexing_maps" in ln))
            k.lines[line] = k.lines[line].replace(
                "]} ins(", f'], {LIBRARY_ATTR} = "sgemm", relax.transpose_a = false, relax.transpose_b = false}} ins(', 1)
            return g
        f = k.fill("0.0", k.out(0), r)
        g = k.fresh("mm")
        k.emit(f'{g} = linalg.matmul {{relax_mlir.matmul_variant = "{impl}"}} ins({k.inp(0)}, {k.inp(1)} : '
               f"{k.ty(a)}, {k.ty(b)}) outs({f} : {rt}) -> {rt}")
        return g

    def chain(rest: list[tuple[int | None, str]]) -> str:
        hi, impl = rest[0]
        if hi is None:
            return branch(impl)
        p, res = k.fresh("p"), k.fresh("v")
        k.emit(f"{p} = arith.cmpi ule, {rows}, {k.const_index(hi)} : index")
        k.emit(f"{res} = scf.if {p} -> ({rt}) {{")
        k.emit(f"  scf.yield {branch(impl)} : {rt}")
        k.emit("} else {")
        k.emit(f"  scf.yield {chain(rest[1:])} : {rt}")
        k.emit("}")
        return res

    return k, chain(leaves)


def call_library_kernel(op: ir.Operation, table) -> str:
    """The symbol of the library kernel that computes one `relax_v.call_library` (added to the
    module through `table`, a legalize KernelTable, and tagged with `relax.library`); the
    legalize pass replaces the op by a `call_tir` of it."""
    callee = library_callee(op)
    if callee is None:
        raise PassError(op, "'relax_v.call_library' op: 'callee' must be a string attribute naming the routine")
    if callee != "sgemm":
        raise PassError(op, f"'relax_v.call_library' op: unknown library routine '{callee}' (known: sgemm)")
    flags = [library_flag(op, f) for f in ("transpose_a", "transpose_b")]
    for f, v in zip(("transpose_a", "transpose_b"), flags):
        if v is None:
            raise PassError(op, f"'relax_v.call_library' op: '{f}' must be a bool attribute, not {op.attributes[f]}")
    if len(op.operands) != 2 or len(op.results) != 1:
        raise PassError(op, "'relax_v.call_library' op: sgemm takes two operands and has one result")
    a, b, r = view(op.operands[0].type), view(op.operands[1].type), view(op.results[0].type)
    if not all(isinstance(t, TensorType) for t in (a, b, r)) or not sgemm_shapes_ok(a, b, r, *flags):
        raise PassError(op, f"'relax_v.call_library' op: sgemm cannot compute {r} from {a} and {b} "
                            f"(transpose_a={flags[0]}, transpose_b={flags[1]})")
    versions = read_versions(op)
    if versions is not None:
        if any(flags) or len(a.dims) != 2 or len(b.dims) != 2:
            raise PassError(op, "'relax_v.call_library' op: versions need an untransposed 2-D sgemm")
        k, res = versioned_sgemm_kernel(a, b, r, leaves(versions))
        return table.get("sgemm_versions", lambda nm: k.text(nm, [res]))
    k, res = sgemm_kernel(a, b, r, *flags)
    base = "sgemm" + ("_t" if any(flags) else "") + ("a" if flags[0] else "") + ("b" if flags[1] else "")
    name = table.get(base, lambda nm: k.text(nm, [res]))
    for f in table.module.regions[0].blocks[0].operations:
        if "sym_name" in f.attributes and ir.StringAttr(f.attributes["sym_name"]).value == name:
            f.attributes[LIBRARY_ATTR] = ir.StringAttr.get("sgemm")
    return name


PASSES = (DispatchLibraryPass,)
