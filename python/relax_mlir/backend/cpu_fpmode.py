"""Denormal floats flushed to zero while compiled code runs, as XLA on CPU does (an option).

By default compiled code runs in its caller's floating-point mode: IEEE denormals (numpy's and
StableHLO's semantics) unless the caller changed the mode. XLA's CPU runtime instead executes with
the x86 MXCSR bits FTZ (results that would be denormal become 0) and DAZ (denormal operands read as
0) set; measured with jax.jit here: `sign(1e-40) == 0`, `1e-40 * 0.5 == 0`, `1 / 1e-40 == inf`,
`1e-38 > 0` is False, and a sort places +-1e-40 with the zeros. `RELAX_MLIR_DENORMALS=flush`
(knobs.flush_denormals, `CPUOptions.flush_denormals`) compiles that mode: every entry's
C-interface wrapper saves the caller's MXCSR, sets FTZ and DAZ, and restores the saved value
before it returns (the caller's Python and numpy keep theirs), parallel bodies do the same on the
pool threads that run them, and every function carries LLVM's `denormal-fp-math=preserve-sign`
so that LLVM's own folding agrees. Values that only move through a select or a copy keep their
bits (XLA's choice of instruction may flush them); every decision a denormal can change
(comparisons, signs, division, conversions, sort order) is XLA's.

In either mode the run-time library's workers take the submitting thread's FP control bits with
each product or task (runtime/relax_rt.c), so a threaded build computes as the one-thread build.
Only x86-64 hosts have the flush mode; elsewhere the option is ignored."""
from __future__ import annotations

import platform

from mlir import ir
from mlir.dialects import llvm

# MXCSR: bit 6 DAZ (denormals are zero), bit 15 FTZ (flush to zero).
_FTZ_DAZ = (1 << 15) | (1 << 6)


def host_supports_flush() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def _set_flush(loc, block: ir.Block) -> ir.Value:
    """At the start of `block`: save MXCSR in a stack slot (returned), set FTZ and DAZ."""
    ctx = loc.context
    i32 = ir.IntegerType.get_signless(32, ctx)
    ptr = ir.Type.parse("!llvm.ptr", ctx)
    with loc, ir.InsertionPoint.at_block_begin(block):
        one = llvm.ConstantOp(i32, ir.IntegerAttr.get(i32, 1)).result
        saved = llvm.AllocaOp(ptr, one, i32, alignment=4).result
        mode_slot = llvm.AllocaOp(ptr, one, i32, alignment=4).result
        llvm.CallIntrinsicOp(None, "llvm.x86.sse.stmxcsr", [saved], [], [])
        old = llvm.LoadOp(i32, saved, alignment=4).result
        bits = llvm.ConstantOp(i32, ir.IntegerAttr.get(i32, _FTZ_DAZ)).result
        llvm.StoreOp(llvm.OrOp(old, bits).result, mode_slot, alignment=4)
        llvm.CallIntrinsicOp(None, "llvm.x86.sse.ldmxcsr", [mode_slot], [], [])
    return saved


def flush_denormals(op: ir.Operation, wrappers, parallel_bodies) -> None:
    """Each wrapper and each parallel body (`llvm.func`s) sets FTZ|DAZ at its start and restores
    the MXCSR it found before each of its returns: a body runs on the caller's thread, where they
    are set already, or as an async task on a pool thread (the run-time library's workers take the
    submitter's bits anyway, MLIR's async runtime's do not), which keeps its own mode afterwards.
    Every defined function of `op` is marked `denormal-fp-math=preserve-sign`."""
    mode = ir.StringAttr.get("preserve-sign,preserve-sign", op.context)
    for f in op.regions[0].blocks[0].operations:
        if f.operation.name == "llvm.func" and len(f.regions[0].blocks) > 0:
            f.attributes["denormal_fp_math"] = mode
            f.attributes["denormal_fp_math_f32"] = mode
    for f in [*wrappers, *parallel_bodies]:
        saved = _set_flush(f.location, f.regions[0].blocks[0])
        returns = [inner for block in f.regions[0].blocks for inner in block.operations
                   if inner.operation.name == "llvm.return"]
        for ret in returns:
            with f.location, ir.InsertionPoint(ret):
                llvm.CallIntrinsicOp(None, "llvm.x86.sse.ldmxcsr", [saved], [], [])
