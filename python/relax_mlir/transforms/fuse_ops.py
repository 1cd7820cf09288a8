"""`relax-fuse-kernels`: fuse chains of elementwise `call_tir` kernels into one kernel, and
elementwise producers into the reduction that consumes them (a reduction's prologue).

Runs after `relax-legalize` (before `relax-lower-shapes`). In each graph function, a producer
`call_tir` whose single result has exactly one use, by a consumer `call_tir` in the same block,
is fused with it when both kernels are one all-parallel `linalg.generic` (elementwise or
broadcast) and the intermediate's symbolic type equals the consumer's result type (so the
intermediate is never broadcast). The fused kernel takes the producer's inputs, then the
consumer's other inputs (deduplicated), the consumer's outputs, then the union of both sym_args.
Its body is built by calling both kernels from a wrapper (the intermediate's destination is a
`tensor.empty` sized by `tensor.dim` of the consumer's output), inlining, and running upstream
`linalg-fuse-elementwise-ops`, `canonicalize` and `cse`; a fusion whose result is not a single
all-parallel generic is dropped. Repeated to a fixpoint, so a chain of N elementwise ops becomes
one kernel. Identical fused kernels are shared through the legalizer's kernel table.

Reduction prologues: a consumer that is a reduction kernel (fill + one generic with reduction
iterators, optionally through the collapse/expand of a keepdims reduction) takes an elementwise
producer whose result it reads over its whole iteration space (identity map), so each element is
computed once inside the reduction loop and the intermediate never reaches memory: softmax's
masked, scaled scores feed its max directly, exp(x - max) its sum, (x - mu)^2 the variance's
sum. The intermediate's dims come from a fused input of the same symbolic type.

Matmul epilogues are deliberately NOT fused: the CPU backend's register-blocked matmul schedule
(`cpu_matmul.matmul_kernel_shape`) only recognizes kernels that are exactly [fill +] matmul, so a
matmul+epilogue kernel would lose the fast schedule.
"""
from __future__ import annotations

import ctypes
import hashlib
import functools
import heapq
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

from mlir import ir
from mlir.dialects import arith, func, tensor
from mlir.passmanager import PassManager

from relax_mlir.analysis.pattern_kind import (
    func_type as _func_type, is_elementwise_kernel, is_reduction_kernel, reads_whole as _reads_whole,
    reduction_parts as _reduction_parts, through as _through, top_ops as _body_ops)
from relax_mlir.dialect.types import TensorType, view
from relax_mlir.passes import ModulePass, PipelineError
from relax_mlir.transforms.infer_shapes import check_module, graph_functions
from relax_mlir.transforms.legalize import KernelTable, module_symbols

# No canonicalize: it would swap the generic's unread `outs(%out)` for a tensor.empty, breaking
# destination passing. `_tidy` below restores the destination and drops dead scalar/dim ops.
SMALL_KERNEL_OPS = 16  # ops (walk count) in a producer kernel that may be duplicated
# A transcendental is one op here but ~30 after expansion (ops/kernel.py expand_math): recomputing
# softmax's exp(x - max) in the normalize kernel instead of reading it back made the causal
# attention at seq 512 take 1.74 ms instead of 1.32 (measured in one process).
_TRANSCENDENTAL_COST = {f"math.{f}": SMALL_KERNEL_OPS for f in ("exp", "exp2", "expm1", "log", "log1p", "log2", "tanh",
                                                                 "erf", "sin", "cos", "tan", "atan", "atan2", "powf",
                                                                 "rsqrt", "sqrt")}
_SCRATCH_PIPELINE = "builtin.module(inline,func.func(linalg-fuse-elementwise-ops,cse))"
_MAX_NAME = 48


def _kernel_id(k: ir.Operation) -> str:
    """What identifies a kernel's code: the kernel table's key (a hash of the legalizer's template
    instance, or of a fusion's parts), else its symbol (a kernel written in the input module)."""
    if "relax.kernel_key" in k.attributes:
        return ir.StringAttr(k.attributes["relax.kernel_key"]).value
    return "sym:" + ir.StringAttr(k.attributes["sym_name"]).value


def _fusion_key(kernels, steps, in_types, n_syms: int, shape_from, reduction: bool) -> str:
    """The kernel table key of a fusion: its parts' ids and how they are wired (equal keys build
    equal kernels)."""
    parts = (tuple(_kernel_id(k) for k in kernels), tuple((tuple(r), tuple(s)) for _, r, s in steps),
             tuple(str(t) for t in in_types), n_syms, shape_from, reduction)
    return "fuse:" + hashlib.sha1(repr(parts).encode()).hexdigest()[:16]


def _scratch_pipeline(text: str, ctx: ir.Context) -> PassManager:
    return PassManager.parse(text, context=ctx)


def _tidy_reduction(f: ir.Operation) -> bool:
    """A fused reduction kernel's fill must write its out argument (destination passing)."""
    parts = _reduction_parts(f)
    if parts is None or "relax.fused_out" not in f.attributes:
        return False
    k = ir.IntegerAttr(f.attributes["relax.fused_out"]).value
    del f.attributes["relax.fused_out"]
    fill, _ = parts
    dest = _through(fill.operands[len(fill.operands) - 1], "tensor.collapse_shape")
    if dest != f.regions[0].blocks[0].arguments[k]:
        return False
    for o in reversed(_body_ops(f)):
        if o.name in ("tensor.empty", "tensor.dim", "arith.constant") and all(len(list(r.uses)) == 0 for r in o.results):
            o.erase()
    return True


def _tidy(f: ir.Operation) -> bool:
    """Make the single generic write into the kernel's out argument; erase dead helper ops."""
    ops = _body_ops(f)
    gens = [o for o in ops if o.name == "linalg.generic"]
    if len(gens) != 1 or len(gens[0].results) != 1:
        return False
    g = gens[0]
    block = f.regions[0].blocks[0]
    init = g.operands[len(g.operands) - 1]
    # The out argument's index, recorded by the wrapper builder:
    out_arg = f.attributes["relax.fused_out"] if "relax.fused_out" in f.attributes else None
    if out_arg is None:
        return False
    k = ir.IntegerAttr(out_arg).value
    del f.attributes["relax.fused_out"]
    dest = block.arguments[k]
    if init != dest:
        if dest.type != init.type:
            return False
        if isinstance(init, ir.OpResult) and init.owner.name == "tensor.empty":
            g.operands[len(g.operands) - 1] = dest
        else:
            return False
    changed = True
    while changed:
        changed = False
        for o in reversed(_body_ops(f)):
            if o.name in ("tensor.empty", "tensor.dim", "arith.constant") and \
                    all(len(list(r.uses)) == 0 for r in o.results):
                o.erase()
                changed = True
    return True


def _kernel_base(func: ir.Operation) -> str:
    if "relax.kernel" in func.attributes:
        return ir.StringAttr(func.attributes["relax.kernel"]).value
    return ir.StringAttr(func.attributes["sym_name"]).value


def _sym_args(op: ir.Operation) -> list[str]:
    if "sym_args" not in op.attributes:
        return []
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes["sym_args"])]


def _callee(op: ir.Operation) -> str:
    return ir.FlatSymbolRefAttr(op.attributes["callee"]).value


def _walk(op: ir.Operation, fn) -> None:
    fn(op)
    for r in op.regions:
        for b in r.blocks:
            for o in b.operations:
                _walk(o.operation, fn)


def _blocks(op: ir.Operation):
    for r in op.regions:
        for b in r.blocks:
            yield b
            for o in b.operations:
                yield from _blocks(o.operation)



def _slot(ins: list, v: ir.Value) -> int:
    """The position of `v` among a fused kernel's inputs `ins` (appended when new)."""
    for k, w in enumerate(ins):
        if w == v:
            return k
    ins.append(v)
    return len(ins) - 1


def _buffers(ops, inner) -> int:
    """Distinct tensor operands of `ops` that are not results of `inner` (the fused values), plus
    one result: the buffers a fusion of `ops` binds."""
    fused = {id_of(o) for o in inner}
    seen = set()
    for o in ops:
        for v in o.operands:
            owner = v.owner.operation if isinstance(v, ir.OpResult) and hasattr(v.owner, "operation") else v.owner
            if isinstance(v, ir.OpResult) and id_of(owner) in fused:
                continue
            seen.add(v)
    return len(seen) + 1


class _Fuser:
    def __init__(self, module: ir.Operation, max_buffers: int = 0):
        self.module = module
        self.max_buffers = max_buffers  # 0: no limit
        self.table = KernelTable(module)
        self.syms = module_symbols(module)
        self.elementwise: dict[str, bool] = {}
        self.reduction: dict[str, bool] = {}
        self.failed: set[tuple[str, str, int]] = set()
        self.touched: set[str] = set()
        self.cache: dict[tuple, str | None] = {}

    def kernel(self, name: str) -> ir.Operation | None:
        return self.syms.get(name)

    def note_kernel(self, name: str) -> None:
        """Record the kernel `name` that the kernel table returned: an existing one, or the one
        it just appended to the module (its last operation; no walk over the module)."""
        if name in self.syms:
            return
        last = self.module.regions[0].blocks[0].operations[-1].operation
        if "sym_name" in last.attributes and ir.StringAttr(last.attributes["sym_name"]).value == name:
            self.syms[name] = last
        else:
            self.syms[name] = module_symbols(self.module)[name]

    def is_reduction(self, name: str) -> bool:
        if name not in self.reduction:
            k = self.kernel(name)
            self.reduction[name] = k is not None and "relax.kernel" in k.attributes and is_reduction_kernel(k)
        return self.reduction[name]

    def is_ew(self, name: str) -> bool:
        if name not in self.elementwise:
            k = self.kernel(name)
            self.elementwise[name] = (k is not None and "relax.kernel" in k.attributes
                                      and is_elementwise_kernel(k))
        return self.elementwise[name]

    # -- legality -------------------------------------------------------------------------------
    def candidate(self, c: ir.Operation, block_ops) -> tuple[ir.Operation, int] | None:
        if c.name != "relax_v.call_tir" or "lowered" in c.attributes or len(c.results) != 1:
            return None
        if "callee" not in c.attributes:
            return None
        reduction = not self.is_ew(_callee(c))
        if reduction and not self.is_reduction(_callee(c)):
            return None
        ctype = view(c.results[0].type)
        if not isinstance(ctype, TensorType) or not ctype.known:
            return None
        for j, v in enumerate(c.operands):
            if not isinstance(v, ir.OpResult):
                continue
            p = v.owner.operation if hasattr(v.owner, "operation") else v.owner
            if p.name != "relax_v.call_tir" or "lowered" in p.attributes or len(p.results) != 1:
                continue
            if id_of(p) not in block_ops:
                continue
            if "callee" not in p.attributes or not self.is_ew(_callee(p)):
                continue
            if len(list(p.results[0].uses)) != 1 and not self.duplicable(p):
                continue  # a multi-use producer is recomputed in each consumer only when cheap
            if reduction:
                if not _reads_whole(self.kernel(_callee(c)), j):
                    continue  # the reduction's prologue: each element computed once
            elif view(p.results[0].type).dims != ctype.dims:
                continue  # same symbolic shape (the element type may differ: compare -> select)
            if (_callee(p), _callee(c), j) in self.failed:
                continue
            if not self.signature_ok(p, c, j):
                continue
            if self.max_buffers and _buffers([p, c], [p]) > self.max_buffers:
                continue  # a GPU kernel binds each buffer: over the device's limit per kernel
            return p, j
        return None

    def duplicable(self, p: ir.Operation) -> bool:
        """A multi-use producer may be recomputed in each consumer when its kernel is small and it
        reads at most one operand of its result's full shape (the others broadcast): a consumer
        then reads no more than it would read from the intermediate. Recomputing a residual
        stream `x + a` would make each consumer read both, and the next residual add `(x + a) + b`
        three, and so on: layer k of an LLM re-added every earlier layer's output (O(depth^2)
        work, and a different kernel per layer for LLVM to compile)."""
        if not self.small(_callee(p)):
            return False
        dims = view(p.results[0].type).dims
        full = 0
        for v in p.operands:
            t = view(v.type)
            if isinstance(t, TensorType) and (not t.known or t.dims == dims):
                full += 1
        return full <= 1

    def small(self, name: str) -> bool:
        """A kernel cheap enough to recompute in every consumer (XLA-style producer duplication)."""
        k = self.kernel(name)
        if k is None:
            return False
        count = [0]

        def visit(o):
            count[0] += _TRANSCENDENTAL_COST.get(o.name, 1)

        _walk(k, visit)
        return count[0] <= SMALL_KERNEL_OPS

    def signature_ok(self, p: ir.Operation, c: ir.Operation, j: int) -> bool:
        kp, kc = self.kernel(_callee(p)), self.kernel(_callee(c))
        tp, tc = _func_type(kp), _func_type(kc)
        np_, nc = len(p.operands), len(c.operands)
        if len(tp.inputs) != np_ + 1 + len(_sym_args(p)) or len(tc.inputs) != nc + 1 + len(_sym_args(c)):
            return False
        tint = tp.inputs[np_]
        if not (tint == tc.inputs[j] == tp.results[0] and tc.inputs[nc] == tc.results[0]):
            return False
        if self.is_reduction(_callee(c)):
            return True
        return ir.RankedTensorType(tint).shape == ir.RankedTensorType(tc.results[0]).shape

    # -- building the fused kernel -------------------------------------------------------------
    def fused_kernel(self, p: ir.Operation, c: ir.Operation, j: int, ins_map_p, ins_map_c, n_ins,
                     in_types, sym_map_p, sym_map_c, n_syms, shape_from: int | None) -> str | None:
        """The kernel computing producer `p` into the consumer `c`'s operand `j`. `shape_from`: for
        a reduction consumer, the fused input whose dims the intermediate has (None: the
        intermediate is static); it is part of the cache key, since it depends on the call
        site's symbolic types."""
        c_refs, it = [], iter(ins_map_c)
        for k in range(len(c.operands)):
            c_refs.append(None if k == j else next(it))
        steps = [(_callee(p), list(ins_map_p), list(sym_map_p)), (_callee(c), c_refs, list(sym_map_c))]
        return self.build_kernel(steps, in_types, n_syms, reduction=self.is_reduction(_callee(c)),
                                 shape_from=shape_from)

    def fuse(self, p: ir.Operation, c: ir.Operation, j: int) -> tuple[ir.Operation, bool] | None:
        """Replace `c` by a call of the fused kernel: (the new call, whether `p` survives), or None."""
        ins: list[ir.Value] = []
        index = functools.partial(_slot, ins)

        ins_map_p = [index(v) for v in p.operands]
        ins_map_c = [index(v) for k, v in enumerate(c.operands) if k != j]
        syms: list[str] = []

        def sindex(s: str) -> int:
            if s not in syms:
                syms.append(s)
            return syms.index(s)

        sym_map_p = [sindex(s) for s in _sym_args(p)]
        sym_map_c = [sindex(s) for s in _sym_args(c)]
        kp, kc = self.kernel(_callee(p)), self.kernel(_callee(c))
        tp, tc = _func_type(kp), _func_type(kc)
        in_types = [None] * len(ins)
        for k, m in enumerate(ins_map_p):
            in_types[m] = tp.inputs[k]
        ck = [k for k in range(len(c.operands)) if k != j]
        for k, m in zip(ck, ins_map_c):
            if in_types[m] is not None and in_types[m] != tc.inputs[k]:
                return None
            in_types[m] = tc.inputs[k]
        shape_from = None
        if self.is_reduction(_callee(c)):
            want = view(p.results[0].type).dims
            tint = tp.results[0]
            srcs = [k for k, v in enumerate(ins) if isinstance(view(v.type), TensorType)
                    and view(v.type).dims == want and in_types[k] == tint]
            if srcs:
                shape_from = srcs[0]
            elif not ir.RankedTensorType(tint).has_static_shape:
                self.failed.add((_callee(p), _callee(c), j))
                return None
        name = self.fused_kernel(p, c, j, ins_map_p, ins_map_c, len(ins), in_types,
                                 sym_map_p, sym_map_c, len(syms), shape_from)
        if name is None:
            self.failed.add((_callee(p), _callee(c), j))
            return None
        attrs = {"callee": ir.FlatSymbolRefAttr.get(name)}
        if syms:
            attrs["sym_args"] = ir.ArrayAttr.get([ir.StringAttr.get(s) for s in syms])
        with ir.InsertionPoint(c), c.location:
            new = ir.Operation.create("relax_v.call_tir", results=[c.results[0].type], operands=ins,
                                      attributes=attrs)
        c.results[0].replace_all_uses_with(new.results[0])
        self.touched.update((_callee(p), _callee(c)))
        c.erase()
        if not list(p.results[0].uses):
            p.erase()
            return new, False
        return new, True

    def chain_from(self, p: ir.Operation, c: ir.Operation, j: int, pos) -> list[tuple[ir.Operation, int]]:
        """[(c, j), (d, k), ...]: `c` and the elementwise consumers that the step-by-step scan
        would fuse next, each the only user of the one before it and fusing with it through its
        first legal operand. Fused in one build, a chain of N ops costs O(N), not O(N^2)."""
        chain = [(c, j)]
        if not self.is_ew(_callee(c)) or not self.is_ew(_callee(p)):
            return chain
        cur = c
        # the tensors the chain's kernel binds so far (the fused values excluded), grown op by op
        outside = {v for o in (p, c) for v in o.operands} - {p.results[0]}
        while True:
            uses = list(cur.results[0].uses)
            if len(uses) != 1:
                return chain
            d = uses[0].owner
            d = d.operation if hasattr(d, "operation") else d
            if id_of(d) not in pos or d.name != "relax_v.call_tir" or "callee" not in d.attributes \
                    or not self.is_ew(_callee(d)):
                return chain
            found = self.candidate(d, pos)
            if found is None or id_of(found[0]) != id_of(cur):
                return chain
            if self.max_buffers:
                grown = outside | (set(d.operands) - {cur.results[0], p.results[0]})
                if len(grown) + 1 > self.max_buffers:
                    return chain
                outside = grown
            chain.append((d, found[1]))
            cur = d

    def fuse_chain(self, p: ir.Operation, chain: list[tuple[ir.Operation, int]]) -> tuple[ir.Operation, bool] | None:
        """Fuse the elementwise producer `p` and the consumer chain (each consuming the one before
        at its slot) into one kernel, built once; replaces the last consumer. None: not fusable
        in one piece (the caller fuses step by step)."""
        ins: list[ir.Value] = []
        index = functools.partial(_slot, ins)

        syms: list[str] = []

        def sindex(s: str) -> int:
            if s not in syms:
                syms.append(s)
            return syms.index(s)

        ops = [(p, None)] + chain
        steps = []  # (kernel name, operand refs: input index or None for the previous result, sym refs)
        in_types: dict[int, ir.Type] = {}
        for o, slot in ops:
            k = self.kernel(_callee(o))
            t = _func_type(k)
            if len(t.inputs) != len(o.operands) + 1 + len(_sym_args(o)) or len(t.results) != 1:
                return None
            refs = []
            for m, v in enumerate(o.operands):
                if m == slot:
                    refs.append(None)
                    continue
                x = index(v)
                if x in in_types and in_types[x] != t.inputs[m]:
                    return None
                in_types[x] = t.inputs[m]
                refs.append(x)
            steps.append((_callee(o), refs, [sindex(s) for s in _sym_args(o)]))
        name = self.chain_kernel(steps, [in_types[k] for k in range(len(ins))], len(syms))
        if name is None:
            return None
        last = chain[-1][0]
        attrs = {"callee": ir.FlatSymbolRefAttr.get(name)}
        if syms:
            attrs["sym_args"] = ir.ArrayAttr.get([ir.StringAttr.get(s) for s in syms])
        with ir.InsertionPoint(last), last.location:
            new = ir.Operation.create("relax_v.call_tir", results=[last.results[0].type], operands=ins,
                                      attributes=attrs)
        last.results[0].replace_all_uses_with(new.results[0])
        self.touched.update(_callee(o) for o, _ in ops)
        for o, _ in reversed(chain):
            o.erase()
        if not list(p.results[0].uses):
            p.erase()
            return new, False
        return new, True

    def chain_kernel(self, steps, in_types, n_syms: int) -> str | None:
        """The kernel computing the elementwise `steps` in sequence, fused into one generic."""
        return self.build_kernel(steps, in_types, n_syms)

    def build_kernel(self, steps, in_types, n_syms: int, reduction: bool = False,
                     shape_from: int | None = None) -> str | None:
        """The kernel `(ins..., out, syms...)` that calls each step's kernel in turn, each writing
        a `tensor.empty` (the last: the out argument) and reading the previous result where its
        operand ref is None; inlined and fused by upstream into one generic, checked, and moved
        into the module. `steps`: (kernel name, input refs, sym refs). None if it does not fuse
        into one elementwise (or, with `reduction`, one reduction) kernel.

        Built through the bindings in a scratch module of the same context: the step kernels are
        cloned into it, never printed and parsed. Its table key derives from the steps' kernel
        keys and the wiring, so identical fusions share one kernel."""
        kernels = [self.kernel(n) for n, _, _ in steps]
        types = [_func_type(k) for k in kernels]
        tout = types[-1].results[0]
        key = _fusion_key(kernels, steps, in_types, n_syms, shape_from, reduction)
        if key in self.cache:
            return self.cache[key]
        known = self.table.lookup(key)
        if known is not None:
            self.cache[key] = known
            return known
        out = ir.RankedTensorType(tout)
        # The intermediates' dims: from the out argument (elementwise: same shape), or for a
        # reduction from the input `shape_from` (of the intermediate's exact symbolic type).
        shape_src = len(in_types) if not (reduction and shape_from is not None) else shape_from
        for ft in types[:-1]:
            res = ir.RankedTensorType(ft.results[0])
            if not reduction and res.shape != out.shape:
                self.cache[key] = None
                return None
        base = "fused_" + "_".join(b[len("fused_"):] if b.startswith("fused_") else b
                                   for b in (_kernel_base(k) for k in kernels))
        base = base[:_MAX_NAME]
        index = ir.IndexType.get()
        with ir.Location.unknown():
            scratch = ir.Module.create()
            for t, k in enumerate(kernels):
                clone = k.clone(ir.InsertionPoint(scratch.body))
                clone.attributes["sym_name"] = ir.StringAttr.get(f"__K{t}")
            with ir.InsertionPoint(scratch.body):
                f = func.FuncOp("__KERNEL__", ir.FunctionType.get(list(in_types) + [tout] + [index] * n_syms, [tout]))
            f.attributes["relax.kernel"] = ir.StringAttr.get(base)
            f.attributes["relax.fused_out"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(in_types))
            entry = f.add_entry_block()
            args = list(entry.arguments)
            ins, dest_out, syms = args[:len(in_types)], args[len(in_types)], args[len(in_types) + 1:]
            with ir.InsertionPoint(entry):
                src = args[shape_src]
                src_t = ir.RankedTensorType(src.type)
                prev = None
                for t, ((_, refs, srefs), ft) in enumerate(zip(steps, types)):
                    res = ft.results[0]
                    if t + 1 < len(steps):
                        rt = ir.RankedTensorType(res)
                        sizes = [tensor.dim(src, arith.constant(index, d)) if rt.is_dynamic_dim(d) else rt.shape[d]
                                 for d in range(rt.rank)]
                        if any(not isinstance(x, int) for x in sizes) and src_t.rank != rt.rank:
                            self.cache[key] = None
                            return None
                        dest = tensor.EmptyOp(sizes, rt.element_type).result
                    else:
                        dest = dest_out
                    operands = [prev if r is None else ins[r] for r in refs] + [dest] + [syms[k] for k in srefs]
                    prev = func.CallOp([res], f"__K{t}", operands).result
                func.ReturnOp([prev])
        try:
            _scratch_pipeline(_SCRATCH_PIPELINE, scratch.context).run(scratch.operation)
        except ir.MLIRError:
            # upstream inlining/fusion refused this combination: the kernels stay unfused (the
            # program is unchanged and correct), as for any other fusion that is not legal
            self.cache[key] = None
            return None
        f = next(o.operation for o in scratch.body.operations
                 if ir.StringAttr(o.operation.attributes["sym_name"]).value == "__KERNEL__")
        ok = (_tidy_reduction(f) and is_reduction_kernel(f)) if reduction else (_tidy(f) and is_elementwise_kernel(f))
        result = self.table.adopt(base, key, f) if ok else None
        if result is not None:
            self.note_kernel(result)
        self.cache[key] = result
        return result

    def run_function(self, f: ir.Operation) -> None:
        for b in list(_blocks(f)):
            self.run_block(b)

    def run_block(self, b: ir.Block) -> None:
        """Fuse in `b` until no candidate is left, in the order of a scan that restarts from the
        block's first op after each fusion (the first op in block order with a candidate fuses
        next), without the rescans: a worklist ordered by position holds the ops not yet
        examined and those whose candidacy a fusion may have changed (the fused op itself; the
        users of a producer that survives, and of every value the fusion reads with fewer uses
        than before). Blocks are independent: a producer must be in its consumer's block."""
        pos: dict = {}          # id_of(op) -> position in the block
        at: dict[int, ir.Operation] = {}  # position -> op (the fused op takes its consumer's)
        for i, o in enumerate(b.operations):
            o = o.operation
            pos[id_of(o)] = i
            at[i] = o
        heap = list(range(len(at)))  # already a heap
        queued = set(heap)
        retry: list[int] = []   # ops whose fusion failed: re-examined after the next fusion
        while heap:
            i = heapq.heappop(heap)
            queued.discard(i)
            c = at.get(i)
            if c is None:
                continue
            found = self.candidate(c, pos)
            if found is None:
                continue
            p, j = found
            chain = self.chain_from(p, c, j, pos)
            fused = None
            while fused is None:
                before = Counter(list(p.operands))
                for o, k in chain:
                    before.update(v for m, v in enumerate(o.operands) if m != k)
                pid, cids = id_of(p), [id_of(o) for o, _ in chain]
                if len(chain) > 1:
                    fused = self.fuse_chain(p, chain)
                    chain = [(c, j)]
                else:
                    fused = self.fuse(p, c, j)
                    break
            if fused is None:
                retry.append(i)
                continue
            new, p_alive = fused
            i = pos[cids[-1]]   # the fused call stands where the chain's last consumer stood
            for cid in cids:
                del at[pos.pop(cid)]
            pos[id_of(new)] = i
            at[i] = new
            after = Counter(new.operands)
            dirty = [i] + retry
            if p_alive:  # one use fewer (c's); an erased `p` had no other use
                after.update(p.operands)
                dirty += [pos[id_of(u.owner)] for u in p.results[0].uses if id_of(u.owner) in pos]
            else:
                del at[pos.pop(pid)]
            retry = []
            for v, n in before.items():
                if after.get(v, 0) < n:
                    dirty += [pos[id_of(u.owner)] for u in v.uses if id_of(u.owner) in pos]
            for d in dirty:
                if d not in queued and d in at:
                    queued.add(d)
                    heapq.heappush(heap, d)

    def drop_dead_kernels(self) -> None:
        used: set[str] = set()

        def visit(o: ir.Operation):
            for k in o.attributes:
                attr = o.attributes[k] if isinstance(k, str) else k.attr
                if isinstance(attr, ir.FlatSymbolRefAttr):
                    used.add(attr.value)
                elif isinstance(attr, ir.SymbolRefAttr):
                    used.add(str(attr).lstrip("@").split("::")[0].strip('"'))

        for o in self.module.regions[0].blocks[0].operations:
            o = o.operation
            if o.name == "func.func" and ir.StringAttr(o.attributes["sym_name"]).value in self.touched:
                continue
            _walk(o, visit)
        syms = module_symbols(self.module)
        for name in self.touched:
            k = syms.get(name)
            if k is not None and name not in used and "relax.kernel" in k.attributes:
                k.erase()


_FOLD_PIPELINE = "builtin.module(func.func(linalg-fuse-elementwise-ops,cse))"


def _splat_constant(v: ir.Value):
    """The splat DenseElementsAttr behind `v` (a relax.constant, through relax.reshape views),
    or None."""
    while isinstance(v, ir.OpResult):
        o = v.owner.operation if hasattr(v.owner, "operation") else v.owner
        if o.name == "relax.reshape":
            v = o.operands[0]
            continue
        if o.name == "relax.constant" and "value" in o.attributes:
            a = o.attributes["value"]
            if isinstance(a, ir.DenseElementsAttr) and a.is_splat:
                return a
        return None
    return None


def fold_constant_operands(fuser: "_Fuser", f: ir.Operation) -> None:
    """Scalar and splat constants passed to an elementwise or reduction kernel become constants
    in its body: a variant of the kernel without those arguments, where upstream's splat folding
    (in linalg-fuse-elementwise-ops) turns each into an arith.constant inside the generic. The
    gelu of the transformer block took 30 of its 36 buffers as such [1, 1] constants (over a
    Vulkan adapter's 32 storage buffers per kernel)."""
    for b in list(_blocks(f)):
        for c in [o.operation for o in b.operations]:
            if c.name != "relax_v.call_tir" or "lowered" in c.attributes or len(c.results) != 1:
                continue
            name = _callee(c)
            k = fuser.kernel(name)
            if k is None or not (fuser.is_ew(name) or fuser.is_reduction(name)):
                continue
            consts = {j: _splat_constant(v) for j, v in enumerate(c.operands)}
            consts = {j: a for j, a in consts.items() if a is not None}
            if not consts:
                continue
            key = ("fold", name, tuple(sorted(consts.items(), key=lambda item: item[0])))
            if key not in fuser.cache:
                fuser.cache[key] = _folded_kernel(fuser, k, consts)
            new_name = fuser.cache[key]
            if new_name is None:
                continue
            attrs = {"callee": ir.FlatSymbolRefAttr.get(new_name)}
            if "sym_args" in c.attributes:
                attrs["sym_args"] = c.attributes["sym_args"]
            keep = [v for j, v in enumerate(c.operands) if j not in consts]
            with ir.InsertionPoint(c), c.location:
                new = ir.Operation.create("relax_v.call_tir", results=[c.results[0].type], operands=keep,
                                          attributes=attrs)
            c.results[0].replace_all_uses_with(new.results[0])
            fuser.touched.add(name)
            c.erase()


def _n_syms(g: ir.Operation, ins) -> int:
    """Trailing `index` arguments of a kernel (its symbols)."""
    n = 0
    for t in reversed(list(ins)):
        if not isinstance(t, ir.IndexType):
            break
        n += 1
    return n


def _folded_kernel(fuser: "_Fuser", k: ir.Operation, consts: dict) -> str | None:
    """A clone of kernel `k` with the constant arguments `consts` (position -> splat attribute)
    folded into its body, in the module; None when upstream does not fold them all."""
    key = "fold:" + hashlib.sha1(repr((_kernel_id(k), sorted((j, str(a)) for j, a in consts.items()))).encode()).hexdigest()[:16]
    known = fuser.table.lookup(key)
    if known is not None:
        return known
    with ir.Location.unknown():
        scratch = ir.Module.create()
        g = k.clone(ir.InsertionPoint(scratch.body))
    block = g.regions[0].blocks[0]
    first = block.operations[0]
    for j in sorted(consts, reverse=True):
        arg = block.arguments[j]
        a = consts[j]
        t = ir.RankedTensorType(arg.type)
        value = ir.DenseElementsAttr.get_splat(t, a.get_splat_value())
        with ir.InsertionPoint(first), g.location:
            cst = ir.Operation.create("arith.constant", results=[t], attributes={"value": value}).results[0]
        arg.replace_all_uses_with(cst)
        block.erase_argument(j)
    ft = _func_type(g)
    ins = [t for j, t in enumerate(ft.inputs) if j not in consts]
    g.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(ins, ft.results))
    try:
        _scratch_pipeline(_FOLD_PIPELINE, g.context).run(scratch.operation)
    except ir.MLIRError:
        return None  # upstream refused: the kernel keeps its constant arguments
    # The fold rewrites an unread `outs` into a tensor.empty: give the kernel back its
    # destination argument (destination passing), as after a fusion.
    out_index = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(ins) - len(ft.results) - _n_syms(g, ins))
    g.attributes["relax.fused_out"] = out_index
    if is_elementwise_kernel(g):
        if not _tidy(g):
            return None
    elif is_reduction_kernel(g):
        fill, _ = _reduction_parts(g)
        dest = fill.operands[len(fill.operands) - 1]
        arg = block.arguments[out_index.value]
        if _through(dest, "tensor.collapse_shape") != arg:
            if not (isinstance(dest, ir.OpResult) and dest.owner.name == "tensor.empty" and dest.type == arg.type):
                return None
            fill.operands[len(fill.operands) - 1] = arg
        if not _tidy_reduction(g):
            return None
    else:
        return None
    if any(o.operation.name == "arith.constant" and isinstance(o.operation.results[0].type, ir.RankedTensorType)
           for o in block.operations):
        return None  # upstream did not fold it into the body: keep the argument
    result = fuser.table.adopt(_kernel_base(k), key, g)
    fuser.note_kernel(result)
    return result


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def id_of(op: ir.Operation) -> int:
    """A hashable identity for a live operation: its C++ pointer. (`hash(op)` is not one: it
    changes when the op's operands are replaced.)"""
    return _capsule_pointer(op.operation._CAPIPtr, b"mlir.ir.Operation._CAPIPtr")


@dataclass(frozen=True)
class FuseKernelsPass(ModulePass):
    """Fuse producer->consumer chains of elementwise call_tir kernels into single kernels."""

    name: ClassVar[str] = "relax-fuse-kernels"
    max_buffers: int = 0  # most tensors (inputs and result) a fused kernel may bind; 0: any number

    def validate(self) -> None:
        if self.max_buffers < 0 or self.max_buffers == 1:
            raise PipelineError(f"max_buffers must be 0 (no limit) or at least 2, got {self.max_buffers}")

    def run(self, module: ir.Operation) -> None:
        check_module(module, infer=True)
        fuser = _Fuser(module, self.max_buffers)
        for f in graph_functions(module):
            if not f.regions[0].blocks or "relax.shapes_lowered" in f.attributes:
                continue
            fuser.run_function(f)
            fold_constant_operands(fuser, f)
        fuser.drop_dead_kernels()


PASSES = (FuseKernelsPass,)
