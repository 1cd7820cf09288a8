"""Glue from an upstream-level module to a CPU `Executable` (lower, JIT, signatures)."""
from __future__ import annotations

from dataclasses import replace

from mlir import ir

from relax_mlir import knobs
from relax_mlir.backend.cpu import CPUOptions, JitModule, lower
from relax_mlir.backend.cpu_artifact import export
from relax_mlir.runtime import native_rt
from relax_mlir.backend.cpu_profile import register as profile_at_exit
from relax_mlir.runtime.executable import Executable, Function, Signature, TensorSig
from relax_mlir.transforms.lower_shapes import ENTRY_RELATIONS


def entry_signatures(module_op: ir.Operation) -> list[Signature]:
    sigs = []
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "func.func" or "relax.signature" not in op.attributes:
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        ins, outs = [list(a) for a in op.attributes["relax.signature"]]
        params = [TensorSig.parse(ir.StringAttr(t).value) for t in ins]
        results = [TensorSig.parse(ir.StringAttr(t).value) for t in outs]
        names = [f"argument #{i}" for i in range(len(params))]
        donate = {}
        cplx_params, cplx_results = [], []
        if "relax.arg_attrs" in op.attributes:
            for i, d in enumerate(op.attributes["relax.arg_attrs"]):
                if "relax.name" in d:
                    names[i] = f"argument '{ir.StringAttr(d['relax.name']).value}'"
                if "relax.donate" in d:
                    donate[i] = ir.IntegerAttr(d["relax.donate"]).value
                if "relax.complex" in d:
                    cplx_params.append(i)
        if "relax.res_attrs" in op.attributes:
            cplx_results = [r for r, d in enumerate(op.attributes["relax.res_attrs"]) if "relax.complex" in d]
        msgs = [ir.StringAttr(m).value for m in op.attributes["relax.check_messages"]] \
            if "relax.check_messages" in op.attributes else []
        derived = {}
        if "relax.derived_symbols" in op.attributes:
            d = op.attributes["relax.derived_symbols"]
            derived = {d[i].name: ir.StringAttr(d[i].attr).value for i in range(len(d))}
        bounds = {}
        if "relax.symbol_bounds" in op.attributes:
            d = op.attributes["relax.symbol_bounds"]
            bounds = {d[i].name: ir.IntegerAttr(d[i].attr).value for i in range(len(d))}
        lower = {}
        if "relax.symbol_lower" in op.attributes:
            d = op.attributes["relax.symbol_lower"]
            lower = {d[i].name: ir.IntegerAttr(d[i].attr).value for i in range(len(d))}
        workspace = [str(ir.IntegerAttr(w).value) if isinstance(w, ir.IntegerAttr) else ir.StringAttr(w).value
                     for w in op.attributes["relax.workspace"]] if "relax.workspace" in op.attributes else []
        requires = [tuple(ir.StringAttr(ir.DictAttr(d)[k]).value for k in ("lhs", "rhs", "message"))
                    for d in op.attributes[ENTRY_RELATIONS]] if ENTRY_RELATIONS in op.attributes else []
        sigs.append(Signature.make(name, params, results, names, msgs, derived, bounds, workspace, lower, donate,
                                   cplx_params, cplx_results, requires))
    return sigs


def as_module(op: ir.Operation) -> ir.Module:
    """An `ir.Module` holding the ops of the `builtin.module` operation `op` (ExecutionEngine takes
    an ir.Module; ours is an Operation, parsed with file locations or cloned): the ops and the
    module's attributes move, nothing is printed."""
    with op.context, op.location:
        m = ir.Module.create()
    for name in op.attributes:
        m.operation.attributes[name] = op.attributes[name]
    for o in list(op.regions[0].blocks[0].operations):
        m.body.append(o.operation)
    return m


def _jit(upstream: ir.Operation, options, entries=()) -> JitModule:
    """JIT-compile a copy of the upstream-level module `upstream` (which stays as it is). The
    ExecutionEngine generates machine code lazily, at the first symbol lookup (measured: 2.2 s of
    LLVM code generation in the first call of the attention module): looking up `entries` here
    moves that into the build."""
    with upstream.context:
        op = upstream.clone(ip=False)
        lower(op, options)
        jit = JitModule(as_module(op), opt_level=options.opt_level)
    for name in entries:
        jit._lookup(name)
    return jit


# Elements from which a call takes the multi-threaded build. On MLIR's async runtime a parallel
# loop pays 50-100 us to wake the pool's sleeping threads (the measurement below); relax-mlir's
# run-time library keeps its workers spinning between loops and lets the caller run the blocks no
# worker took, so it pays from far smaller calls (quiet 2-core machine, bench/side_by_side.py,
# 256K against 4M: single-head attention d = 256 at s = 512 / 2048 3.57 -> 2.38 / 31.2 -> 18.1
# ms, the transformer block at s = 512 / 2048 8.6 -> 5.8 / 50.7 -> 31.4 ms).
PARALLEL_MIN_RELAX_RT = 1 << 18
PARALLEL_MIN_MLIR_ASYNC = 1 << 22


class ThreadedDispatch:
    """Single-threaded code by default; the multi-threaded build (compiled on first need) for calls
    that touch at least RELAX_MLIR_PARALLEL_MIN_ELEMENTS elements. Measured: waking the async
    runtime's workers costs 50-100 µs per parallel loop, which made the JAX MLP and transformer
    block 1.5-3x slower on two threads than on one at every size tried (batch 1-512, seq 16-512).
    Either build may be compiled up front (`build_cpu_executable`) or at the first call needing it."""

    def __init__(self, upstream: ir.Operation, options, jit1=None, entries=()):
        import threading

        self.upstream = upstream
        self.options = options
        self.entries = list(entries)  # looked up when a build is made (machine code generated then)
        self._jit1 = jit1
        self.jitn = None
        self.min_elements = knobs.parallel_min_elements(
            PARALLEL_MIN_RELAX_RT if native_rt.runs_async_tasks() else PARALLEL_MIN_MLIR_ASYNC)
        self.lock = threading.Lock()

    @property
    def jit1(self) -> JitModule:
        """The one-thread build (compiled at first need when `compile()` did not)."""
        if self._jit1 is None:
            with self.lock:
                if self._jit1 is None:
                    self._jit1 = _jit(self.upstream, replace(self.options, num_threads=1), self.entries)
        return self._jit1

    @property
    def built(self) -> tuple[bool, bool]:
        """Whether the one-thread and the multi-threaded builds are compiled."""
        return self._jit1 is not None, self.jitn is not None

    def invoke(self, name: str, *arrays) -> None:
        if self.options.num_threads > 1 and sum(a.size for a in arrays) >= self.min_elements:
            if self.jitn is None:
                with self.lock:
                    if self.jitn is None:
                        self.jitn = _jit(self.upstream, self.options, self.entries)
            jit = self.jitn
        else:
            jit = self.jit1
        jit.invoke(name, *arrays)


class JitEntry:
    """The fast call path of one entry (runtime/executable.py `Function`): the ctypes function of
    the packed `_mlir__mlir_ciface_<name>` wrapper, from the multi-threaded build for calls that
    touch at least RELAX_MLIR_PARALLEL_MIN_ELEMENTS elements."""

    packed = True

    def __init__(self, run: ThreadedDispatch, name: str):
        self.run = run
        self.name = name
        self.threaded = run.options.num_threads > 1
        # the builds compile() made: their functions now (a first call looks nothing up)
        self._fn1 = run._jit1._lookup(name)[0] if run._jit1 is not None else None
        self._fnn = run.jitn._lookup(name)[0] if run.jitn is not None else None

    def function(self, n_elements: int):
        run = self.run
        if self.threaded and n_elements >= run.min_elements:
            if self._fnn is None:
                if run.jitn is None:
                    with run.lock:
                        if run.jitn is None:
                            run.jitn = _jit(run.upstream, run.options, run.entries)
                self._fnn = run.jitn._lookup(self.name)[0]
            return self._fnn
        if self._fn1 is None:
            self._fn1 = run.jit1._lookup(self.name)[0]
        return self._fn1


def _export(exe: Executable, path: str, cpu: str | None) -> None:
    """The artifact: the one-thread build, and the multi-threaded one where a call may take it
    (exported parallel loops always run on relax-mlir's run-time library, compiled in)."""
    sigs = [f.sig for f in exe.functions.values()]
    options = exe.artifacts.get("options")
    threaded = options is not None and options.num_threads > 1 and _may_thread(sigs, PARALLEL_MIN_RELAX_RT)
    export(exe.artifacts["upstream"], sigs, exe.main, path, cpu, options if threaded else None,
           PARALLEL_MIN_RELAX_RT if threaded else None)


def _elements_at(sig, bound: dict, unbounded_as_zero: bool) -> int | None:
    """The elements a call of the entry touches (arguments and results) with each symbol at
    `bound`. A tensor with a symbol that has no bound there counts 0 if `unbounded_as_zero`,
    else the answer is None."""
    total = 0
    for t in list(sig.params) + list(sig.results):
        n = 1
        for d in t.dims:
            if d is None or not d.symbols() <= bound.keys():
                if not unbounded_as_zero:
                    return None
                n = 0
                break
            n *= max(int(d.evaluate(bound)), 0)
        total += n
    return total


def _most_elements(sig) -> int | None:
    """The most elements a call of the entry can touch (symbolic dims at their upper bounds);
    None when a symbol has no upper bound."""
    return _elements_at(sig, dict(sig.upper), False)


def _fewest_elements(sig) -> int:
    """About the fewest elements a call of the entry touches: symbolic dims at their declared
    lower bounds, 0 for a tensor with a symbol that has none (only decides which builds compile()
    makes, never what a call computes)."""
    return _elements_at(sig, dict(sig.lower), True)


def _may_thread(sigs, min_elements: int) -> bool:
    """Can some call of some entry choose the multi-threaded build?"""
    for s in sigs:
        most = _most_elements(s)
        if most is None or most >= min_elements:
            return True
    return False


def build_cpu_executable(module, options=None) -> Executable:
    options = options or CPUOptions()
    with module.context:
        sigs = entry_signatures(module.op)
        if not sigs:
            raise ValueError("the module has no public graph function to call")
        upstream = module.op.clone(ip=False)  # kept for the multi-threaded build and export()
    names = [s.name for s in sigs]
    run = ThreadedDispatch(upstream, options, entries=names)
    threaded = options.num_threads > 1
    small = not threaded or min(_fewest_elements(s) for s in sigs) < run.min_elements
    if threaded and _may_thread(sigs, run.min_elements) and (knobs.builds() == "all" or not small):
        # Some call may take the multi-threaded build (issue 18: every variant is built by
        # compile(), so that no first call at any shape compiles). A background build was
        # measured and refused: the lowering holds the GIL for up to 1.1 s at a time, which a
        # first call made meanwhile would wait for. With RELAX_MLIR_BUILDS=first it waits for
        # its first call when the one-thread build is made here.
        run.jitn = _jit(upstream, options, names)
    if small:
        # Some call may run on one thread. When every call of every entry takes the
        # multi-threaded build (an LLM's prefill and decode step: the weights alone reach the
        # threshold), the one-thread build is never compiled unless a call needs it.
        run.jit1
    funcs = {s.name: Function(s, (lambda n: lambda *a: run.invoke(n, *a))(s.name), JitEntry(run, s.name))
             for s in sigs}
    main = "main" if "main" in funcs else sigs[0].name
    exe = Executable(funcs, main, keepalive=(module, run), artifacts={"upstream": upstream, "exporter": _export,
                                                                    "options": options})
    if knobs.profile():
        profile_at_exit(exe)
    return exe
