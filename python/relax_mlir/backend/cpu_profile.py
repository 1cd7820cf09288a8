"""Kernel timing in the CPU host program (`RELAX_MLIR_PROFILE=1`).

With the knob set, the CPU backend (`stage_bufferize`, once kernels are functions on buffers that
the entries call) wraps every call of a kernel in an entry with two `rtclock()` reads (MLIR's C
runner utils, already loaded by the JIT) and adds the difference and 1 to the kernel's slot of
two public globals, `@__relax_profile_seconds : memref<N x f64>` and `@__relax_profile_calls :
memref<N x i64>`; the last slot times each entry's whole body. The slots' names ride on the
module as `relax_cpu.profile_kernels`. Nothing else changes: the same kernels, called in the same
order, and without the knob no code is added.

`table(exe)` reads the counters of a compiled executable's JIT builds (both the one-thread and
the multi-threaded one when both ran) and formats them, most expensive first, with each
kernel's share of the entries' time; `reset(exe)` zeroes them. With the knob set, the process
prints the table of every profiled executable still alive at exit on stderr.

    RELAX_MLIR_PROFILE=1 python bench/llm.py --layers 2 --prompts 128 --contexts 16

The timer costs two clock reads per kernel call (about 40 ns); a kernel's time includes its
call and, in the multi-threaded build, the wake-up of the async runtime's workers.
"""
from __future__ import annotations

import atexit
import ctypes
import sys
import weakref

from mlir import ir
from mlir.dialects import arith, func, memref

__all__ = ["PROFILE_ATTR", "instrument", "reset", "samples", "table"]

PROFILE_ATTR = "relax_cpu.profile_kernels"
_SECONDS = "__relax_profile_seconds"
_CALLS = "__relax_profile_calls"
_CLOCK = "rtclock"
_ADDRESSES = "__relax_profile_addresses"
_ENTRY_SLOT = "(entry total)"


def _sym(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _callee(op: ir.Operation) -> str:
    return ir.FlatSymbolRefAttr(op.attributes["callee"]).value


def instrument(module_op: ir.Operation) -> int:
    """Time every kernel call of every entry (public defined `func.func`) of `module_op` (on
    buffers); returns the number of call sites timed."""
    body = module_op.regions[0].blocks[0]
    funcs = {_sym(f.operation): f.operation for f in body.operations if f.operation.name == "func.func"}
    entries = [f for f in funcs.values()
               if len(f.regions[0].blocks) and not ("sym_visibility" in f.attributes and
                                                   ir.StringAttr(f.attributes["sym_visibility"]).value == "private")]
    kernels = {n for n, f in funcs.items() if len(f.regions[0].blocks) and f not in entries}
    sites: list[ir.Operation] = []
    for e in entries:
        def visit(o):
            o = o.operation
            if o.name == "func.call" and _callee(o) in kernels:
                sites.append(o)
            return ir.WalkResult.ADVANCE

        e.walk(visit)
    names = sorted({_callee(s) for s in sites}) + [_ENTRY_SLOT]
    slot = {n: i for i, n in enumerate(names)}
    ctx = module_op.context
    with ctx, ir.Location.unknown(ctx):
        f64, i64, idx = ir.F64Type.get(), ir.IntegerType.get_signless(64), ir.IndexType.get()
        t_sec = ir.MemRefType.get([len(names)], f64)
        t_cnt = ir.MemRefType.get([len(names)], i64)
        with ir.InsertionPoint.at_block_begin(body):
            for sym, t, zero in ((_SECONDS, t_sec, ir.FloatAttr.get(f64, 0.0)),
                                 (_CALLS, t_cnt, ir.IntegerAttr.get(i64, 0))):
                if sym in funcs or _ADDRESSES in funcs:
                    raise ValueError(f"RELAX_MLIR_PROFILE: the module already defines @{sym}")
                memref.GlobalOp(sym, t, initial_value=ir.DenseElementsAttr.get_splat(
                    ir.RankedTensorType.get([len(names)], t.element_type), zero))
            if _CLOCK not in funcs:
                func.FuncOp(_CLOCK, ([], [f64]), visibility="private")
            # The globals' addresses, for `samples` (the engine looks up functions only).
            addr = func.FuncOp(_ADDRESSES, ([], [idx, idx]))
            with ir.InsertionPoint(addr.add_entry_block()):
                func.ReturnOp([memref.extract_aligned_pointer_as_index(memref.get_global(t, sym))
                               for sym, t in ((_SECONDS, t_sec), (_CALLS, t_cnt))])

        def record(ip: ir.InsertionPoint, t0: ir.Value, i: int) -> None:
            with ip:
                t1 = func.CallOp([f64], ir.FlatSymbolRefAttr.get(_CLOCK), []).result
                dt = arith.subf(t1, t0)
                at = arith.constant(idx, i)
                sec, cnt = memref.get_global(t_sec, _SECONDS), memref.get_global(t_cnt, _CALLS)
                memref.store(arith.addf(memref.load(sec, [at]), dt), sec, [at])
                memref.store(arith.addi(memref.load(cnt, [at]), arith.constant(i64, 1)), cnt, [at])

        def clock(ip: ir.InsertionPoint) -> ir.Value:
            with ip:
                return func.CallOp([f64], ir.FlatSymbolRefAttr.get(_CLOCK), []).result

        # A call is never a block's terminator: the op after it exists.
        after: dict[ir.Operation, ir.Operation] = {}
        for block in {s.block for s in sites}:
            ops = [o.operation for o in block.operations]
            after.update(zip(ops, ops[1:]))
        for s in sites:
            t0 = clock(ir.InsertionPoint(s))
            record(ir.InsertionPoint(after[s]), t0, slot[_callee(s)])
        for e in entries:
            block = e.regions[0].blocks[0]
            t0 = clock(ir.InsertionPoint.at_block_begin(block))
            ops = list(block.operations)
            record(ir.InsertionPoint(ops[-1]), t0, slot[_ENTRY_SLOT])
        module_op.attributes[PROFILE_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(n) for n in names])
    return len(sites)


# --------------------------------------------------------------------------------------------
# Reading the counters
# --------------------------------------------------------------------------------------------

_profiled: "weakref.WeakSet" = weakref.WeakSet()


def _counters(jit):
    """(names, seconds array, calls array) as ctypes views of one JIT build's globals, or None;
    looked up once per build (the views stay valid while the build lives)."""
    cached = getattr(jit, "_profile_counters", False)
    if cached is not False:
        return cached
    jit._profile_counters = _lookup_counters(jit)
    return jit._profile_counters


def _lookup_counters(jit):
    op = jit.module.operation
    if PROFILE_ATTR not in op.attributes:
        return None
    names = [ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes[PROFILE_ATTR])]
    # The packed wrapper of its C interface: void(void **args), args[0] -> the result struct's address.
    fn = jit.engine.lookup_packed("_mlir_ciface_" + _ADDRESSES)
    if not fn:
        return None
    res = (ctypes.c_int64 * 2)()
    arg = ctypes.c_void_p(ctypes.addressof(res))
    ptrs = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(fn)(ctypes.addressof(ptrs))
    sec, cnt = res[0], res[1]
    return (names, (ctypes.c_double * len(names)).from_address(sec),
            (ctypes.c_int64 * len(names)).from_address(cnt))


def _builds(exe) -> list:
    run = next((k for k in getattr(exe, "_keepalive", None) or () if hasattr(k, "built")), None)
    if run is None:
        return []
    return [j for j in (run._jit1, run.jitn) if j is not None]


def samples(exe) -> dict[str, tuple[float, int]]:
    """{kernel: (seconds, calls)} summed over the executable's JIT builds; the entries' total
    time is under "(entry total)". Empty when it was not compiled with RELAX_MLIR_PROFILE=1."""
    out: dict[str, tuple[float, int]] = {}
    for jit in _builds(exe):
        c = _counters(jit)
        if c is None:
            continue
        for n, s, k in zip(*c):
            t, m = out.get(n, (0.0, 0))
            out[n] = (t + s, m + k)
    return out


def reset(exe) -> None:
    """Zero the executable's counters."""
    for jit in _builds(exe):
        c = _counters(jit)
        if c is not None:
            for i in range(len(c[0])):
                c[1][i], c[2][i] = 0.0, 0


def table(exe, top: int | None = None) -> str:
    """The counters as a table, the most expensive kernel first: seconds, calls, microseconds per
    call and share of the entries' total; the rest of the total is the host program's own work
    (shape checks, allocation, views) between the kernels."""
    data = samples(exe)
    if not data:
        return "(no profile: compile with RELAX_MLIR_PROFILE=1 and call the executable)"
    total = data.pop(_ENTRY_SLOT, (0.0, 0))
    rows = sorted(data.items(), key=lambda kv: -kv[1][0])
    lines = [f"{'kernel':48s} {'ms':>10s} {'calls':>7s} {'us/call':>9s} {'share':>6s}"]
    shown = rows if top is None else rows[:top]
    for n, (s, k) in shown:
        if k:
            n = n.removeprefix("__relax_kernel_")
            lines.append(f"{n[:48]:48s} {s * 1e3:10.2f} {k:7d} {s / k * 1e6:9.1f} "
                         f"{100 * s / max(total[0], 1e-12):5.1f}%")
    kern = sum(s for s, _ in data.values())
    if len(shown) < len(rows):
        rest = sum(s for _, (s, _) in rows[len(shown):])
        lines.append(f"{'(' + str(len(rows) - len(shown)) + ' more kernels)':48s} {rest * 1e3:10.2f}")
    lines.append(f"{'(host program between kernels)':48s} {(total[0] - kern) * 1e3:10.2f} {'':7s} {'':9s} "
                 f"{100 * (total[0] - kern) / max(total[0], 1e-12):5.1f}%")
    lines.append(f"{'(entry calls, total)':48s} {total[0] * 1e3:10.2f} {total[1]:7d}")
    return "\n".join(lines)


def register(exe) -> None:
    """Print `exe`'s table at exit (RELAX_MLIR_PROFILE=1). The exit handler is registered with the
    first executable, after the libraries that were imported before it (jax, MLIR's bindings):
    handlers run in reverse order, so the report reads the counters before those libraries'
    handlers tear down LLVM's state (a lookup in the engine after them aborted the process:
    "invalid mangling mode")."""
    if not _profiled and not _REPORT_REGISTERED:
        atexit.register(_report)
        _REPORT_REGISTERED.append(True)
    _profiled.add(exe)


_REPORT_REGISTERED: list[bool] = []


def _report() -> None:
    for exe in list(_profiled):
        if samples(exe).get(_ENTRY_SLOT, (0.0, 0))[1]:
            print(f"RELAX_MLIR_PROFILE: executable {getattr(exe, 'main', '?')}\n{table(exe)}", file=sys.stderr)
