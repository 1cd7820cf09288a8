"""LLVM code generation of a CPU build on every core.

A build lowered to the LLVM dialect is one module: the host program (each entry inlined into its
`_mlir_ciface_` wrapper) and the kernels it calls, with their outlined parallel bodies. MLIR's
ExecutionEngine compiles a module on the calling thread, and its Python binding holds the GIL
while it does. Here the module is split into pieces, one ExecutionEngine each, made through MLIR's
C API with ctypes (which releases the GIL for the call), so the pieces translate, optimize and
generate code on several cores at once:

- kernel pieces: the functions the host program references (kernels, and the coroutines of the
  parallel loops the host runs itself), with everything they reference, balanced by size over
  the worker threads. A function or constant global two pieces need is copied into both (they
  are all internal); what the host needs from a piece gets external linkage there.
- the host piece: the wrappers and the globals they read; each kernel it calls is a trampoline
  that calls through a 64-bit slot (an external global), so the host imports nothing from the
  kernel pieces and is compiled and linked beside them; the kernels' addresses are written into
  the slots once all pieces are done, before any call. Its wrappers are compiled unoptimised
  (`optnone`): they are straight-line code that calls kernels, thousands of instructions per
  layer in an LLM, on which LLVM's O3 code generation spends seconds (its post-RA scheduler is
  quadratic in a block's length) for 2-3% per call (BENCHMARKS.md). Where the program itself
  loops in the host (a scan, a while: the code runs once per step) they stay optimized, tuned for
  a generic x86-64 (no post-RA scheduling: half the saving).

What cannot be split safely (a top-level op other than functions and globals, a mutable global
that a kernel piece reads, a piece that does not verify) is compiled as one engine, as before.
"""
from __future__ import annotations

import ctypes
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

from mlir import ir
from mlir.dialects import llvm

from relax_mlir import knobs
from relax_mlir.backend.common import LoweringError


class _StringRef(ctypes.Structure):
    _fields_ = [("data", ctypes.c_char_p), ("length", ctypes.c_size_t)]


_LIB: list = []
_LIB_LOCK = threading.Lock()


def _capi():
    """MLIR's C API from the Python bindings' library, opened with ctypes.CDLL: every call releases
    the GIL (the engines run no Python)."""
    with _LIB_LOCK:
        if not _LIB:
            import mlir._mlir_libs as libs

            lib = ctypes.CDLL(os.path.join(os.path.dirname(libs.__file__), "libMLIRPythonCAPI.so"))
            lib.mlirExecutionEngineCreate.restype = ctypes.c_void_p
            lib.mlirExecutionEngineCreate.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                                      ctypes.c_void_p, ctypes.c_bool, ctypes.c_bool]
            lib.mlirExecutionEngineDestroy.argtypes = [ctypes.c_void_p]
            lib.mlirExecutionEngineLookup.restype = ctypes.c_void_p
            lib.mlirExecutionEngineLookup.argtypes = [ctypes.c_void_p, _StringRef]
            lib.mlirExecutionEngineRegisterSymbol.argtypes = [ctypes.c_void_p, _StringRef, ctypes.c_void_p]
            get = ctypes.pythonapi.PyCapsule_GetPointer
            get.restype = ctypes.c_void_p
            get.argtypes = [ctypes.py_object, ctypes.c_char_p]
            _LIB.append((lib, get))
        return _LIB[0]


def _ref(s: str) -> _StringRef:
    b = s.encode()
    return _StringRef(b, len(b))


class Engine:
    """One MLIR ExecutionEngine (C API): creating it translates the module to LLVM IR and runs
    LLVM's optimization pipeline at `opt_level`; the first lookup generates the machine code and
    links it, so every symbol it imports must be registered before."""

    def __init__(self, module: ir.Module, opt_level: int):
        lib, get = _capi()
        ptr = get(module._CAPIPtr, b"mlir.ir.Module._CAPIPtr")
        self._ptr = lib.mlirExecutionEngineCreate(ptr, opt_level, 0, None, False, False)
        if not self._ptr:
            raise LoweringError("jit", "ExecutionEngine", "LLVM could not translate or optimize the module")
        self._finalizer = weakref.finalize(self, lib.mlirExecutionEngineDestroy, self._ptr)

    def register(self, name: str, address: int) -> None:
        _capi()[0].mlirExecutionEngineRegisterSymbol(self._ptr, _ref(name), address)

    def lookup(self, name: str) -> int:
        """The address of `name` (0 when it is not defined or the code does not link)."""
        return _capi()[0].mlirExecutionEngineLookup(self._ptr, _ref(name)) or 0


def _name(op) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _is_internal(op) -> bool:
    return "linkage" in op.attributes and str(op.attributes["linkage"]) in ("#llvm.linkage<internal>",
                                                                          "#llvm.linkage<private>")


def _references(op) -> tuple[set[str], int, list]:
    """The symbols `op` (a function or global) references, its number of operations (the size the
    pieces are balanced by) and the types its `llvm.return`s return (a function's result type)."""
    refs: set[str] = set()
    count = [0]
    returned: list = []

    def visit(o):
        count[0] += 1
        name = o.name
        if name == "llvm.call" or name == "llvm.invoke":
            if "callee" in o.attributes:
                refs.add(ir.FlatSymbolRefAttr(o.attributes["callee"]).value)
        elif name == "llvm.mlir.addressof":
            refs.add(ir.FlatSymbolRefAttr(o.attributes["global_name"]).value)
        elif name == "llvm.return" and not returned:
            returned.append([v.type for v in o.operands])
        return ir.WalkResult.ADVANCE

    op.operation.walk(visit)
    return refs, count[0], returned[0] if returned else []


class _Plan:
    """Which top-level symbols go into which piece (piece 0 is the host)."""

    def __init__(self, module_op: ir.Operation, hosts: set[str], workers: int):
        self.ok = False
        self.decls: list = []  # external declarations: copied into every piece
        self.defs: dict[str, object] = {}
        for o in module_op.regions[0].blocks[0].operations:
            kind = o.operation.name
            if kind == "llvm.func" and len(o.regions[0].blocks) == 0:
                self.decls.append(o)
            elif kind in ("llvm.func", "llvm.mlir.global"):
                self.defs[_name(o)] = o
            else:
                return  # comdats, global constructors, aliases...: one engine
        hosts = {n for n in self.defs if n in hosts or (self.defs[n].operation.name == "llvm.func"
                                                         and not _is_internal(self.defs[n]))}
        if not hosts:
            return
        self.refs: dict[str, set[str]] = {}
        self.returns: dict[str, list] = {}
        size: dict[str, int] = {}
        for n, o in self.defs.items():
            self.refs[n], size[n], self.returns[n] = _references(o)
        # The host's closure stops at the functions it calls: each is a root of a kernel piece.
        host = set(hosts)
        roots: list[str] = []
        work = list(hosts)
        while work:
            for r in self.refs[work.pop()]:
                o = self.defs.get(r)
                if o is None or r in host or r in roots:
                    continue
                if o.operation.name == "llvm.func":
                    roots.append(r)
                else:
                    host.add(r)  # a global the host reads
                    work.append(r)
        if not roots or any(str(self.defs[r].attributes["function_type"]).endswith("...)>") for r in roots):
            return  # nothing to split, or a variadic callee (no trampoline for it): one engine
        closures = {r: self._closure(r) for r in roots}
        for c in closures.values():
            for n in c:
                o = self.defs[n]
                if o.operation.name == "llvm.mlir.global" and "constant" not in o.attributes:
                    return  # mutable state a kernel piece would copy: one engine
        # Largest first, each onto the lightest piece (what a piece already holds costs nothing).
        bins: list[set[str]] = [set() for _ in range(max(1, min(workers, len(roots))))]
        load = [0] * len(bins)
        self.owner: dict[str, int] = {}
        for r in sorted(roots, key=lambda r: -sum(size[n] for n in closures[r])):
            k = min(range(len(bins)), key=lambda k: load[k] + sum(size[n] for n in closures[r] - bins[k]))
            load[k] += sum(size[n] for n in closures[r] - bins[k])
            bins[k] |= closures[r]
            self.owner[r] = k + 1
        self.pieces: list[set[str]] = [host] + bins
        self.roots = roots
        self.ok = True

    def _closure(self, root: str) -> set[str]:
        seen = {root}
        work = [root]
        while work:
            for r in self.refs[work.pop()]:
                if r in self.defs and r not in seen:
                    seen.add(r)
                    work.append(r)
        return seen


SLOT = "__relax_slot_"


def _trampoline(plan: _Plan, name: str, ip: ir.InsertionPoint) -> None:
    """In the host piece, `@name` (a kernel another piece defines) as a function that calls
    through the external 64-bit slot `@__relax_slot_<name>`, which is given the kernel's address
    once its piece is compiled. The host piece then imports nothing from the kernel pieces: it is
    compiled and linked at the same time as they are, not after them."""
    o = plan.defs[name]
    ptr = ir.Type.parse("!llvm.ptr")
    i64 = ir.IntegerType.get_signless(64)
    slot = SLOT + name
    llvm.GlobalOp(i64, slot, ir.Attribute.parse("#llvm.linkage<external>"),
                  value=ir.IntegerAttr.get(i64, 0), ip=ip)
    f = llvm.LLVMFuncOp(name, o.attributes["function_type"], linkage=ir.Attribute.parse("#llvm.linkage<internal>"),
                        ip=ip)
    f.attributes["passthrough"] = ir.ArrayAttr.get([ir.StringAttr.get("alwaysinline")])  # one call per kernel call
    block = f.regions[0].blocks.append(*[a.type for a in o.regions[0].blocks[0].arguments])
    with ir.InsertionPoint(block):
        address = llvm.LoadOp(i64, llvm.AddressOfOp(ptr, slot).result).result
        callee = llvm.IntToPtrOp(ptr, address).result
        results = plan.returns[name]
        call = llvm.CallOp(results[0] if results else None, [callee, *block.arguments], [], [])
        llvm.ReturnOp(arg=call.result if results else None)


def _piece_module(module_op: ir.Operation, plan: _Plan, k: int, optnone: set[str],
                  generic: set[str] = frozenset()) -> ir.Module:
    """Piece `k` of `module_op` as a new module of copies (the original stays whole)."""
    ctx = module_op.context
    external = ir.Attribute.parse("#llvm.linkage<external>", ctx)
    with ctx, module_op.location:
        m = ir.Module.create()
        for a in module_op.attributes:
            m.operation.attributes[a] = module_op.attributes[a]
        ip = ir.InsertionPoint(m.body)
        for d in plan.decls:
            d.operation.clone(ip)
        members = plan.pieces[k]
        needed: set[str] = set()
        for n in sorted(members):  # a deterministic order: the same module text every compile
            needed |= plan.refs[n]
        for n in sorted(needed - members):
            if n in plan.defs:  # defined in the piece that owns it
                if k == 0:
                    _trampoline(plan, n, ip)
                else:
                    llvm.LLVMFuncOp(n, plan.defs[n].attributes["function_type"], ip=ip)
        for n in sorted(members):
            c = plan.defs[n].operation.clone(ip)
            if k > 0 and plan.owner.get(n) == k:
                c.attributes["linkage"] = external
                if "sym_visibility" in c.attributes:
                    del c.attributes["sym_visibility"]
            if n in generic:  # optimized, scheduled for a generic x86-64 (no post-RA scheduler)
                c.attributes["tune_cpu"] = ir.StringAttr.get("generic")
            if n in optnone:
                flags = [a for a in ir.ArrayAttr(c.attributes["passthrough"])] if "passthrough" in c.attributes else []
                flags = [a for a in flags if str(a) not in ('"alwaysinline"', '"inlinehint"')]
                c.attributes["passthrough"] = ir.ArrayAttr.get(
                    flags + [ir.StringAttr.get("noinline"), ir.StringAttr.get("optnone")])
    return m


class SplitEngine:
    """A build's machine code from several engines compiled at once (module docstring), the
    external `symbols` (name -> address) registered with each. `hosts`: the entries and their
    wrappers (the host program); `wrappers`: the entries' C-interface wrappers, compiled
    unoptimised, or with `host_loops` (an entry runs a loop of the program) optimized but tuned
    for a generic CPU."""

    def __init__(self, module: ir.Module, opt_level: int, symbols: dict[str, int], hosts: set[str],
                 wrappers: set[str], threads: int | None = None, host_loops: bool = False):
        threads = knobs.jit_threads() if threads is None else threads
        op = module.operation
        plan = _Plan(op, hosts, threads) if threads > 1 else None
        pieces = None
        if plan is not None and plan.ok:
            try:
                # A host that loops (a scan, a while) repeats its code per iteration: optimized
                # there (scan with a cond at 4096 steps: 0.51-0.55 ms, 0.83-1.05 unoptimised),
                # only not tuned for this CPU, whose post-RA scheduler is most of its cost.
                host_only = [set(), wrappers] if host_loops else [wrappers, set()]
                pieces = [_piece_module(op, plan, k, *(host_only if k == 0 else [set(), set()]))
                          for k in range(len(plan.pieces))]
                for p in pieces:
                    p.operation.verify()
            except ir.MLIRError:
                pieces = None  # what the split could not express: one engine below
        if pieces is None:
            self.engines = [Engine(module, opt_level)]
            for s, a in symbols.items():
                self.engines[0].register(s, a)
            return
        # An engine translates its module with the context's LLVM translations, which its first
        # creation registers (appends to the context's dialect registry): done here, on one thread,
        # so that the concurrent creations below only read the registry.
        with op.context, op.location:
            Engine(ir.Module.create(), 0)
        engines: list = [None] * len(pieces)

        addresses: dict[str, int] = {}

        def build(k: int):
            e = Engine(pieces[k], opt_level)
            for s, a in symbols.items():
                e.register(s, a)
            engines[k] = e
            # generate and link the piece's code now (the first lookup does it for the whole piece)
            names = [SLOT + r for r in plan.roots] if k == 0 else [r for r in plan.roots if plan.owner[r] == k]
            for n in names:
                addresses[n] = e.lookup(n)
                if not addresses[n]:
                    raise LoweringError("jit", "ExecutionEngine", f"the piece defining @{n} does not link")

        # The kernel pieces first, one per worker; the host piece on one more thread beside them.
        with ThreadPoolExecutor(max_workers=threads + 1) as pool:
            futures = [pool.submit(build, k) for k in [*range(1, len(pieces)), 0]]
            for f in futures:
                f.result()
        for r in plan.roots:  # each kernel's address into its slot in the host piece
            ctypes.c_uint64.from_address(addresses[SLOT + r]).value = addresses[r]
        self.engines = engines

    def lookup_packed(self, name: str) -> int:
        """The address of the packed wrapper `_mlir_<name>` (`void(void **args)`, which the engine
        generates for each external function) in the host piece, where every entry's C interface
        is; 0 if absent. (The Python binding's `raw_lookup` is this lookup.)"""
        return self.engines[0].lookup("_mlir_" + name)
