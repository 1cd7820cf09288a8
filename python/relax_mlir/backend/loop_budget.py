"""How many loop iterations one invocation of a GPU kernel may run, as a formula of its launch.

Mesa's llvmpipe (lavapipe, the Vulkan driver of CPU-only machines) gives each shader invocation
one loop limiter of 65535 iterations shared by every loop it enters, and when it runs out, leaves
every loop at its next iteration, silently: a one-thread scatter applied only its first 65535
updates and a row sum over 3M elements (32 invocations per row) returned 2,097,120. Whether a
launch stays within the limit depends on the shapes of the call, so the lowering records, for each
kernel launch, an upper bound of the iterations one invocation runs as a formula of the launch's
scalar arguments, grid and block (`annotate`), and the runtime evaluates it where the driver has
such a limit (runtime/loop_budget.py) and refuses the launch before anything runs.

Serial work (a scatter, an argmax, a reduction to a scalar: `in_one_thread` kernels; a cumulative
scan, one invocation per scanned row) runs as one invocation's loop, so a limit of 65535 iterations
would refuse such kernels at modest sizes; `chunk_serial_loops` splits the loop of each
(`relax.chunkable`) into host-level chunks of at most
`CHUNK_ITERATIONS` iterations (inner loops counted), one launch each, in order: the loops keep their
state in memory (linalg-to-loops loads and stores it each iteration), so the chunks compute what one
launch would.

The formula is a JSON tree, written into the launch's `relax.loop_cost` attribute:

    cost   ["loop", lb, ub, step, iv, cost]  one loop: its trips times (1 + the cost of its body)
           ["sum", cost...]  ["max", cost...] (the branches of an scf.if)
    value  ["c", n] constant   ["p", i] the kernel's i-th argument (a scalar)   ["iv", k] loop k's
           induction variable   ["tid"|"bid"|"bdim"|"gdim", d] ids and sizes of dim d
           [fn, value...] arith: add sub mul divs divu ceildiv floordiv rems remu min max sel cast
           ["?"] unknown (a load from memory: the evaluation then cannot bound the loop)
"""
from __future__ import annotations

import json

from mlir import ir

from relax_mlir.backend.common import walk
from relax_mlir.backend.gpu_kernels import CHUNKABLE, const_index, defined_outside, gpu_funcs, make_op

__all__ = ["ATTR", "CHUNK_ITERATIONS", "annotate", "chunk_serial_loops", "kernel_cost"]

ATTR = "relax.loop_cost"

# Loop iterations of one chunk of a serial kernel: under llvmpipe's 65535 with room for small loops.
CHUNK_ITERATIONS = 60000

_DIMS = {"x": 0, "y": 1, "z": 2}
_IDS = {"gpu.thread_id": "tid", "gpu.block_id": "bid", "gpu.block_dim": "bdim", "gpu.grid_dim": "gdim"}
_ARITH = {"arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul", "arith.divsi": "divs",
          "arith.divui": "divu", "arith.ceildivsi": "ceildiv", "arith.ceildivui": "ceildiv",
          "arith.floordivsi": "floordiv", "arith.remsi": "rems", "arith.remui": "remu",
          "arith.minsi": "min", "arith.minui": "min", "arith.maxsi": "max", "arith.maxui": "max",
          "arith.select": "sel", "arith.index_cast": "cast", "arith.index_castui": "cast",
          "arith.extsi": "cast", "arith.extui": "cast", "arith.trunci": "cast"}


class _Kernel:
    """The formulas of one gpu.func's values and loops."""

    def __init__(self, func: ir.Operation):
        self.params = list(func.regions[0].blocks[0].arguments)
        self.ivs: list[ir.Value] = []
        self.memo: dict = {}

    def value(self, v: ir.Value) -> list:
        key = v  # ir.Value hashes by identity of the underlying value
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self._value(v)
        return hit

    def _value(self, v: ir.Value) -> list:
        owner = v.owner
        if isinstance(owner, ir.Block):
            for i, p in enumerate(self.params):
                if p == v:
                    return ["p", i]
            for k, iv in enumerate(self.ivs):
                if iv == v:
                    return ["iv", k]
            return ["?"]  # an iteration argument: a value carried from the previous iteration
        op = owner.operation if hasattr(owner, "operation") else owner
        name = op.name
        if name == "arith.constant":
            attr = op.attributes["value"]
            if isinstance(attr, ir.IntegerAttr):
                return ["c", ir.IntegerAttr(attr).value]
            return ["?"]
        if name in _IDS:
            dim = str(op.attributes["dimension"]).split()[-1].strip(">")
            return [_IDS[name], _DIMS.get(dim, 0)]
        fn = _ARITH.get(name)
        if fn is not None:
            return [fn] + [self.value(x) for x in op.operands]
        return ["?"]

    def block(self, block: ir.Block) -> list:
        parts = []
        for o in block.operations:
            o = o.operation
            if o.name == "scf.for":
                lb, ub, step = (self.value(o.operands[i]) for i in range(3))
                body = o.regions[0].blocks[0]
                self.ivs.append(body.arguments[0])
                parts.append(["loop", lb, ub, step, len(self.ivs) - 1, self.block(body)])
            elif o.name == "scf.if":
                branches = [self.block(r.blocks[0]) for r in o.regions if len(r.blocks)]
                branches = [b for b in branches if b != ["sum"]]
                if branches:
                    parts.append(["max"] + branches)
            elif o.name == "scf.while":
                parts.append(["?"])  # no bound known: the launch cannot be proven within a limit
            elif len(o.regions):
                for r in o.regions:
                    for b in r.blocks:
                        inner = self.block(b)
                        if inner != ["sum"]:
                            parts.append(inner)
        return ["sum"] + parts


def kernel_cost(func: ir.Operation) -> list | None:
    """The formula of the loop iterations one invocation of `func` (a gpu.func) runs, or None when
    it has no loop."""
    k = _Kernel(func)
    cost = k.block(func.regions[0].blocks[0])
    return None if cost == ["sum"] else cost


def annotate(module_op: ir.Operation) -> int:
    """Attach `relax.loop_cost` to each gpu.launch_func of a kernel that has loops (after kernel
    outlining). Returns the number of launches annotated."""
    kernels = {(m, k): f for m, k, f in gpu_funcs(module_op)}
    costs: dict = {}
    launches = []
    walk(module_op, lambda o: launches.append(o) if o.name == "gpu.launch_func" else None)
    n = 0
    for launch in launches:
        key = tuple(ir.SymbolRefAttr(launch.attributes["kernel"]).value)
        if key not in costs:
            func = kernels.get(key)
            cost = kernel_cost(func) if func is not None else None
            costs[key] = None if cost is None else ir.StringAttr.get(json.dumps(cost, separators=(",", ":")))
        if costs[key] is not None:
            launch.attributes[ATTR] = costs[key]
            n += 1
    return n


def _arith(name: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return make_op(f"arith.{name}", [a.type], [a, b]).results[0]


# Ops a loop bound may be computed with that can move out of a one-thread kernel to the host.
_HOISTABLE = ("memref.dim", "arith.constant") + tuple(f"arith.{n}" for n in (
    "addi", "subi", "muli", "divsi", "divui", "ceildivsi", "floordivsi", "remsi", "remui", "minsi", "maxsi",
    "minui", "maxui", "index_cast", "index_castui"))


def _hoist(v: ir.Value, par: ir.Operation) -> bool:
    """Make `v` defined outside `par` by moving the index computation that makes it (memref.dim of
    an outside buffer, index arithmetic) before `par`; False when it depends on the kernel's work."""
    if defined_outside(v, par):
        return True
    owner = v.owner
    if isinstance(owner, ir.Block):
        return False
    op = owner.operation if hasattr(owner, "operation") else owner
    if op.name not in _HOISTABLE or len(op.regions) or not all(_hoist(x, par) for x in op.operands):
        return False
    op.move_before(par)
    return True


def _host_cost(block: ir.Block, par: ir.Operation) -> ir.Value | None:
    """Host index arithmetic (built at the insertion point) for the loop iterations one run of
    `block` takes, when every loop bound in it is defined outside `par`; else None."""
    total = const_index(0)
    for o in block.operations:
        o = o.operation
        if o.name == "scf.for":
            lb, ub, step = (o.operands[i] for i in range(3))
            if not all(_hoist(v, par) for v in (lb, ub, step)):
                return None
            inner = _host_cost(o.regions[0].blocks[0], par)
            if inner is None:
                return None
            span = _arith("maxsi", _arith("subi", ub, lb), const_index(0))
            trips = _arith("ceildivsi", span, _arith("maxsi", step, const_index(1)))
            total = _arith("addi", total, _arith("muli", trips, _arith("addi", inner, const_index(1))))
        elif o.name == "scf.if":
            costs = [_host_cost(r.blocks[0], par) for r in o.regions if len(r.blocks)]
            if any(c is None for c in costs):
                return None
            worst = costs[0]
            for c in costs[1:]:
                worst = _arith("maxsi", worst, c)
            total = _arith("addi", total, worst)
        elif len(o.regions):
            return None
    return total


def chunk_serial_loops(module_op: ir.Operation) -> int:
    """Split the scf.for of each `relax.chunkable` scf.parallel (a one-thread kernel, an interchanged
    scan; before mapping) into a host loop over chunks of at most CHUNK_ITERATIONS iterations:
    `for c = lb to ub step k*step { parallel { for i = c to min(c + k*step, ub) step step } }` with
    k = CHUNK_ITERATIONS / (1 + the iterations of its body), computed on the host. Returns the
    number split."""
    pars = []
    walk(module_op, lambda o: pars.append(o) if o.name == "scf.parallel" and CHUNKABLE in o.attributes else None)
    n = 0
    for par in pars:
        ops = [o.operation for o in par.regions[0].blocks[0].operations][:-1]  # (the last: scf.reduce)
        loops = [o for o in ops if o.name == "scf.for"]
        if len(loops) != 1 or len(loops[0].results) or any(o.name not in _HOISTABLE for o in ops if o != loops[0]):
            continue
        loop = loops[0]
        lb, ub, step = (loop.operands[i] for i in range(3))
        if not all(_hoist(v, par) for v in (lb, ub, step)):
            continue
        with par.context, par.location, ir.InsertionPoint(par):
            inner = _host_cost(loop.regions[0].blocks[0], par)
            if inner is None:
                continue  # (the launch's loop cost still guards it)
            per = _arith("divsi", const_index(CHUNK_ITERATIONS), _arith("addi", inner, const_index(1)))
            stride = _arith("muli", step, _arith("maxsi", per, const_index(1)))
            outer = make_op("scf.for", [], [lb, ub, stride], regions=1)
            body = outer.regions[0].blocks.append(ir.IndexType.get())
            with ir.InsertionPoint(body):
                start = body.arguments[0]
                stop = _arith("minsi", _arith("addi", start, stride), ub)
                make_op("scf.yield")
            par.move_before(body.operations[len(body.operations) - 1])
            loop.operands[0] = start
            loop.operands[1] = stop
        n += 1
    return n
