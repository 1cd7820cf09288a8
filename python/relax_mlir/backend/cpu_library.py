"""Library calls on buffers: the CPU backend's lowering of `relax.library`-tagged linalg ops.

`relax-dispatch-library` leaves each BLAS-bound matmul as a `linalg.generic` tagged
`relax.library = "sgemm"` (with `relax.transpose_a/b`). On tensors that op is an ordinary matmul,
so bufferization places its operands and destination like any other. After bufferization
(`stage_bufferize`), `lower_library_ops` replaces each tagged op whose buffers have the identity
layout by a call of a small helper function (one per operand ranks and transposes) that reads the
aligned pointers and sizes of the buffers and calls `relax_rt_sgemm` once per batch element (the op
itself, untagged, stays behind in an `scf.if` for sizes past CBLAS's 32-bit ints, where the helper
returns false: loops there instead of truncated sizes):

    C[.., M, N] = op(A)[.., M, K] * op(B)[.., K, N]    row-major, lda/ldb = last dim, ldc = N

`relax_rt_sgemm` (runtime/relax_rt.c) has CBLAS sgemm's signature: it runs a large product on the
run-time library's contention-aware thread pool as one-thread OpenBLAS calls over chunks of C
(sgemv at one row), a small one directly; where that library cannot be built (no C compiler) the
helpers call `scipy_cblas_sgemm` on one thread (so does RELAX_MLIR_BLAS_THREADS=1).

The zero `linalg.fill` of C right before the op becomes beta = 0 (otherwise beta = 1: the op
accumulates into C, as the generic does); so does a `linalg.generic` that only writes 0.0 into C,
the zero initialization of a relax-multiversion kernel's BLAS version (a fill there would be
caught by the generated versions' schedules, which vectorize every fill of the kernel). The
per-op schedules of backend/cpu.py leave tagged ops alone, so a BLAS version survives even where
its kernel's matmul schedule does not apply. A tagged op on a strided buffer keeps the generic, which
the rest of the pipeline lowers to loops (correct, slow), and is logged.
"""
from __future__ import annotations

import logging

from mlir import ir

from relax_mlir.runtime import native_rt
from relax_mlir.runtime.library import NO_TRANS, ROW_MAJOR, SGEMM_SYMBOL, TRANS

_log = logging.getLogger("relax_mlir.cpu")

LIBRARY_ATTR = "relax.library"


def sgemm_decl(callee: str) -> str:
    return (f"func.func private @{callee}(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, "
            "!llvm.ptr, i32, f32, !llvm.ptr, i32)")


def _dyn_memref(rank: int) -> str:
    return "memref<" + "?x" * rank + "f32>"


def _identity_f32(t: ir.Type) -> bool:
    return isinstance(t, ir.MemRefType) and str(t.element_type) == "f32" and \
        str(t) == "memref<" + "".join(("?" if ir.ShapedType.is_dynamic_size(s) else str(s)) + "x"
                                      for s in t.shape) + "f32>"


def sgemm_callee() -> str:
    """The CBLAS-sgemm-compatible function the helpers call: the run-time library's pooled entry
    (runtime/native_rt.py: large products on a contention-aware thread pool), or OpenBLAS's sgemm on
    one thread (RELAX_MLIR_BLAS_THREADS=1, or the library cannot be built: no C compiler)."""
    return native_rt.SGEMM_SYMBOL if native_rt.pooled_products() else SGEMM_SYMBOL


def helper_text(name: str, ra: int, rb: int, rr: int, ta: bool, tb: bool, callee: str = SGEMM_SYMBOL) -> str:
    """func @name(A, B, C, beta): the sgemm calls (of `callee`, with CBLAS sgemm's signature) for one
    (ranks, transposes) combination."""
    lines = []
    n = [0]

    def v(stem="v"):
        n[0] += 1
        return f"%{stem}{n[0]}"

    def emit(s):
        lines.append("  " + s)

    consts = {}

    def c(i):
        if i not in consts:
            consts[i] = v("c")
            lines.insert(0, f"  {consts[i]} = arith.constant {i} : index")
        return consts[i]

    def dim(m, r, i):
        x = v("d")
        emit(f"{x} = memref.dim {m}, {c(i)} : {_dyn_memref(r)}")
        return x

    def mul(x, y):
        z = v("p")
        emit(f"{z} = arith.muli {x}, {y} : index")
        return z

    def prod(xs):
        out = None
        for x in xs:
            out = x if out is None else mul(out, x)
        return out if out is not None else c(1)

    nn = dim("%C", rr, rr - 1)
    if rb > 2:
        batch, mm = prod([dim("%C", rr, i) for i in range(rr - 2)]), dim("%C", rr, rr - 2)
    else:
        batch, mm = c(1), prod([dim("%C", rr, i) for i in range(rr - 1)])
    kk = dim("%A", ra, ra - 2 if ta else ra - 1)
    lda, ldb = dim("%A", ra, ra - 1), dim("%B", rb, rb - 1)
    sa, sb, sc = mul(mm, kk), mul(kk, nn), mul(mm, nn)
    ptrs = {}
    for m, r in (("%A", ra), ("%B", rb), ("%C", rr)):
        ptrs[m] = v("ptr")
        emit(f"{ptrs[m]} = memref.extract_aligned_pointer_as_index {m} : {_dyn_memref(r)} -> index")

    def i32(x, at_least_one=False):
        if at_least_one:  # BLAS rejects a leading dimension < 1 (an empty operand)
            y = v("ld")
            emit(f"{y} = arith.maxsi {x}, {c(1)} : index")
            x = y
        z = v("i")
        emit(f"{z} = arith.index_cast {x} : index to i32")
        return z

    # CBLAS takes 32-bit sizes: a product with a size or leading dimension past 2^31 - 1 is left to
    # the caller's generated loops (the helper returns false)
    limit = v("lim")
    emit(f"{limit} = arith.constant {2**31 - 1} : index")
    fits = None
    for x in (mm, nn, kk, lda, ldb):
        ok = v("fit")
        emit(f"{ok} = arith.cmpi sle, {x}, {limit} : index")
        if fits is not None:
            both = v("fit")
            emit(f"{both} = arith.andi {fits}, {ok} : i1")
            ok = both
        fits = ok
    m32, n32, k32 = i32(mm), i32(nn), i32(kk)
    lda32, ldb32, ldc32 = i32(lda, True), i32(ldb, True), i32(nn, True)
    flags = []
    for val in (ROW_MAJOR, TRANS if ta else NO_TRANS, TRANS if tb else NO_TRANS):
        flags.append(v("e"))
        emit(f"{flags[-1]} = arith.constant {val} : i32")
    one = v("one")
    emit(f"{one} = arith.constant 1.0 : f32")
    emit(f"scf.if {fits} {{")
    emit(f"scf.for %b = {c(0)} to {batch} step {c(1)} {{")

    def at(base, stride):
        off, by, addr, i64, p = v("off"), v("by"), v("addr"), v("a"), v("P")
        emit(f"  {off} = arith.muli %b, {stride} : index")
        emit(f"  {by} = arith.muli {off}, {c(4)} : index")
        emit(f"  {addr} = arith.addi {base}, {by} : index")
        emit(f"  {i64} = arith.index_cast {addr} : index to i64")
        emit(f"  {p} = llvm.inttoptr {i64} : i64 to !llvm.ptr")
        return p

    xa, xb, xc = at(ptrs["%A"], sa), at(ptrs["%B"], sb), at(ptrs["%C"], sc)
    emit(f"  func.call @{callee}({flags[0]}, {flags[1]}, {flags[2]}, {m32}, {n32}, {k32}, {one}, {xa}, "
         f"{lda32}, {xb}, {ldb32}, %beta, {xc}, {ldc32}) : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, "
         f"!llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()")
    emit("}")
    emit("}")
    emit(f"return {fits} : i1")
    args = f"%A: {_dyn_memref(ra)}, %B: {_dyn_memref(rb)}, %C: {_dyn_memref(rr)}, %beta: f32"
    return f"func.func private @{name}({args}) -> i1 {{\n" + "\n".join(lines) + "\n}"


def _bool_attr(op: ir.Operation, name: str) -> bool:
    return name in op.attributes and bool(ir.BoolAttr(op.attributes[name]).value)


_SIDE_FREE = frozenset({"arith.constant", "memref.dim", "memref.cast", "arith.index_cast", "arith.muli"})


def _zero_generic(op: ir.Operation, c: ir.Value) -> bool:
    """A linalg.generic with no inputs that writes 0.0 into every element of exactly `c` (the zero
    initialization of a relax-multiversion kernel's BLAS version)."""
    if len(op.operands) != 1 or op.operands[0] != c or len(op.results) != 0:
        return False
    maps = ir.ArrayAttr(op.attributes["indexing_maps"])
    if len(maps) != 1 or not ir.AffineMapAttr(maps[0]).value.is_permutation:
        return False
    body = [o.operation for o in op.regions[0].blocks[0].operations]
    if body[-1].name != "linalg.yield" or len(body[-1].operands) != 1:
        return False
    if any(o.name != "arith.constant" for o in body[:-1]):
        return False
    val = body[-1].operands[0].owner  # the constant may have been hoisted out of the body
    val = getattr(val, "operation", val)
    if not isinstance(val, ir.Operation) or val.name != "arith.constant":
        return False
    attr = val.attributes["value"]
    return isinstance(attr, ir.FloatAttr) and attr.value == 0.0


def _zero_fill_before(op: ir.Operation, c: ir.Value) -> ir.Operation | None:
    """The `linalg.fill` of 0.0 into exactly `c` that precedes `op` with only side-effect-free
    scalar/view ops in between, if any."""
    before = []
    for o in op.block.operations:
        o = o.operation
        if o == op:
            break
        before.append(o)
    for prev in reversed(before):
        if prev.name in _SIDE_FREE:
            continue
        if prev.name == "linalg.generic" and LIBRARY_ATTR not in prev.attributes:
            return prev if _zero_generic(prev, c) else None
        if prev.name != "linalg.fill" or len(prev.operands) != 2 or prev.operands[1] != c:
            return None
        val = prev.operands[0].owner
        val = getattr(val, "operation", val)
        if not isinstance(val, ir.Operation) or val.name != "arith.constant":
            return None
        attr = val.attributes["value"]
        return prev if isinstance(attr, ir.FloatAttr) and attr.value == 0.0 else None
    return None


def lower_library_ops(module_op: ir.Operation) -> int:
    """Replace the `relax.library = "sgemm"` linalg ops on buffers by BLAS calls; returns the count."""
    tagged: list[ir.Operation] = []

    def visit(o):
        o = o.operation
        if o.name == "linalg.generic" and LIBRARY_ATTR in o.attributes:
            tagged.append(o)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    if not tagged:
        return 0
    body = module_op.regions[0].blocks[0]
    names = {ir.StringAttr(o.attributes["sym_name"]).value for o in body.operations if "sym_name" in o.attributes}
    callee = sgemm_callee()
    keep = []
    done = 0
    for op in tagged:
        if ir.StringAttr(op.attributes[LIBRARY_ATTR]).value != "sgemm" or len(op.operands) != 3:
            continue
        a, b, c = op.operands
        if not all(_identity_f32(x.type) for x in (a, b, c)):
            _log.info("sgemm-tagged op on non-identity buffers (%s, %s, %s): left to the generated loops",
                      a.type, b.type, c.type)
            continue
        ra, rb, rr = a.type.rank, b.type.rank, c.type.rank
        ta, tb = _bool_attr(op, "relax.transpose_a"), _bool_attr(op, "relax.transpose_b")
        name = f"__relax_sgemm_{ra}{rb}{rr}_{'t' if ta else 'n'}{'t' if tb else 'n'}"
        if name not in names:
            parsed = ir.Module.parse(helper_text(name, ra, rb, rr, ta, tb, callee) + "\n" + sgemm_decl(callee),
                                     module_op.context)
            keep.append(parsed)  # alive until its ops have moved
            ops = [o.operation for o in parsed.body.operations]
            body.append(ops[0])
            for decl in ops[1:]:
                sym = ir.StringAttr(decl.attributes["sym_name"]).value
                if sym not in names:
                    body.append(decl)
                    names.add(sym)
            names.add(name)
        fill = _zero_fill_before(op, c)
        with ir.InsertionPoint(op), op.location:
            args = []
            for x, r in ((a, ra), (b, rb), (c, rr)):
                t = ir.Type.parse(_dyn_memref(r))
                args.append(x if x.type == t else ir.Operation.create("memref.cast", [t], [x]).results[0])
            f32 = ir.F32Type.get()
            beta = ir.Operation.create("arith.constant", [f32], [], {
                "value": ir.FloatAttr.get(f32, 0.0 if fill is not None else 1.0)}).results[0]
            i1 = ir.IntegerType.get_signless(1)
            done_call = ir.Operation.create("func.call", [i1], args + [beta],
                                            {"callee": ir.FlatSymbolRefAttr.get(name)}).results[0]
            # sizes past CBLAS's 32-bit ints: the product as generated loops (the op, untagged)
            true = ir.Operation.create("arith.constant", [i1], [], {"value": ir.IntegerAttr.get(i1, 1)}).results[0]
            missed = ir.Operation.create("arith.xori", [i1], [done_call, true]).results[0]
            branch = ir.Operation.create("scf.if", [], [missed], regions=2)
            then = branch.regions[0].blocks.append()
            with ir.InsertionPoint(then):
                end = ir.Operation.create("scf.yield", [], [])
        if fill is not None:
            fill.move_before(end)
        op.move_before(end)
        for attr in (LIBRARY_ATTR, "relax.transpose_a", "relax.transpose_b"):
            if attr in op.attributes:
                del op.attributes[attr]
        done += 1
    return done
