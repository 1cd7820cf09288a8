"""`relax-to-upstream`: graph functions become `func.func` on builtin tensors; no relax op is left.

Public graph functions become entry points with a caller-owned ABI (what the runtime calls):

    func.func @main(%in0: memref<?x64xf32>, ..., %out0: memref<?x32xf32>, ...,
                    %ws0: memref<?xi8>, ..., %err: memref<1xi32>)
        attributes {llvm.emit_c_interface, relax.workspace = [sizes]}

The workspace arguments are the memory plan's storage blocks (relax-plan-memory), sized by
`relax.workspace` (bytes: integers, or expressions of the signature's symbols). The runtime owns
them and reuses them from call to call, so a call does no allocation for its planned
intermediates (measured: the transformer's scores part at seq 512 took 2.4 ms with per-call
malloc, page faults and heap trimming included, 0.47 ms without).

Inputs enter as `bufferization.to_tensor ... restrict`; the shape checks of relax-lower-shapes guard
the body (`scf.if %all_ok { ... } else { store the failing check's code into %err }`); results
leave through `bufferization.materialize_in_destination` into the outputs. `call_tir` becomes
`tensor.empty` of its symbolic output dims plus `func.call` of the kernel; private graph functions
become tensor-to-tensor functions. The relax signature is kept in `relax.signature` for the runtime.

Donated parameters (`relax.donate = r` on input i, checked by relax-infer-shapes): result r is
written into input i's buffer, which the runtime passes for both %in_i and %out_r (%out_r is then
unused). Input i enters `restrict writable`, so bufferization updates it in place where its old
value is no longer read (and copies it where it is: one-shot analysis decides); a
`dynamic_update_slice` of it runs with its in-place flag set (no copy of the operand, O(update)).
At the return the other results are materialized first (they may read the old value), then each
donated result into %in_i (a self-copy, folded away, when it was computed in place). A donated
result that may share storage with ANOTHER donated input (a swap of two caches) is copied into a
fresh tensor first, before any donated buffer is written.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mlir import ir

from relax_mlir.analysis.kernel_alias import result_aliases
from relax_mlir.dialect.spec import attr_dict
from relax_mlir.dialect.types import TensorType, builtin_memref_text, builtin_tensor_text, view
from relax_mlir.ops.control_flow import CONTROL_FLOW, region_callees
from relax_mlir.passes import ModulePass, PassError
from relax_mlir.transforms.infer_shapes import donations, graph_functions
from relax_mlir.transforms.lower_shapes import ENTRY_RELATIONS, LowerShapesPass
from relax_mlir.transforms.plan_memory import ITEMSIZE, _in_place_flag
from relax_mlir.shape import parse as parse_expr

def builtin_type(t: ir.Type) -> ir.Type:
    v = view(t)
    if isinstance(v, TensorType):
        return ir.Type.parse(builtin_tensor_text(v))
    return t


class _Lowerer:
    def __init__(self, f: ir.Operation, entry: bool):
        self.f = f
        self.entry = entry
        self.map: dict = {}
        self.checks: list[tuple[ir.Value, int]] = []
        self.guard_opened = False
        self.index = ir.IndexType.get()

    def v(self, old: ir.Value) -> ir.Value:
        try:
            return self.map[old]
        except KeyError:
            raise PassError(self.f, "internal error: value used before its lowering") from None

    def create(self, name, results, operands, attrs=None, regions=0) -> ir.Operation:
        with self.ip, self.loc:
            return ir.Operation.create(name, results=results, operands=operands, attributes=attrs or {},
                                       regions=regions)

    def const_index(self, n: int) -> ir.Value:
        return self.create("arith.constant", [self.index], [], {"value": ir.IntegerAttr.get(self.index, n)}).results[0]

    def build(self) -> ir.Operation:
        f = self.f
        ft = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
        ins, outs = [view(t) for t in ft.inputs], [view(t) for t in ft.results]
        name = ir.StringAttr(f.attributes["sym_name"]).value
        for t in ins + outs:
            if not isinstance(t, TensorType):
                raise PassError(f, f"'func.func' op @{name}: the run time supports tensor parameters and results only, got {t}")
        self.workspace = self.workspace_blocks(f, ins) if self.entry else []
        if self.entry:
            arg_types = ([ir.Type.parse(builtin_memref_text(t)) for t in ins + outs]
                         + [ir.Type.parse("memref<?xi8>")] * len(self.workspace) + [ir.Type.parse("memref<1xi32>")])
            res_types = []
        else:
            arg_types = [ir.Type.parse(builtin_tensor_text(t)) for t in ins]
            res_types = [ir.Type.parse(builtin_tensor_text(t)) for t in outs]
        attrs = {"sym_name": ir.StringAttr.get(name),
                 "function_type": ir.TypeAttr.get(ir.FunctionType.get(arg_types, res_types))}
        old_attrs = attr_dict(f)
        for k in ("sym_visibility", "relax.check_messages", "relax.symbol_bounds", "relax.symbol_lower", "arg_attrs",
                  "relax.derived_symbols", ENTRY_RELATIONS):
            if k in old_attrs:
                attrs[k] = old_attrs[k]
        if self.entry:
            attrs.pop("arg_attrs", None)
            attrs["llvm.emit_c_interface"] = ir.UnitAttr.get()
            attrs["relax.signature"] = ir.ArrayAttr.get(
                [ir.ArrayAttr.get([ir.StringAttr.get(str(t)) for t in ins]),
                 ir.ArrayAttr.get([ir.StringAttr.get(str(t)) for t in outs])])
            if "arg_attrs" in old_attrs:
                attrs["relax.arg_attrs"] = old_attrs["arg_attrs"]
            if "res_attrs" in old_attrs:
                attrs["relax.res_attrs"] = old_attrs["res_attrs"]
            if self.workspace:
                plan = old_attrs["relax.memory_plan"]
                attrs["relax.workspace"] = ir.ArrayAttr.get([plan["blocks"][b] for b in self.workspace])
        self.loc = f.location
        with ir.InsertionPoint(f), f.location:
            new = ir.Operation.create("func.func", results=[], operands=[], attributes=attrs, regions=1)
        block = new.regions[0].blocks.append(*arg_types)
        self.func_args = list(block.arguments)
        self.ip = ir.InsertionPoint(block)
        self.blocks: dict[int, ir.Value] = {}
        self.direct_outs: dict = {}  # returned call_tir result -> index of the caller's buffer
        self.n_placed = 0
        self.block_start = None
        old_block = f.regions[0].blocks[0]
        self.outs = []
        self.donate = donations(f) if self.entry else {}  # input -> result written into its buffer
        self.donated_args = {old_block.arguments[i]: i for i in self.donate}
        if self.entry:
            for i, (a, t) in enumerate(zip(old_block.arguments, ins)):
                tt = ir.Type.parse(builtin_tensor_text(t))
                flags = {"restrict": ir.UnitAttr.get()}
                if i in self.donate:
                    flags["writable"] = ir.UnitAttr.get()
                self.map[a] = self.create("bufferization.to_tensor", [tt], [block.arguments[i]], flags).results[0]
            self.outs = [block.arguments[len(ins) + i] for i in range(len(outs))]
            for i, b in enumerate(self.workspace):
                self.blocks[b] = block.arguments[len(ins) + len(outs) + i]
            self.err = block.arguments[len(ins) + len(outs) + len(self.workspace)]
            donated_results = set(self.donate.values())
            self.direct_outs = {v: r for v, r in self.find_direct_outs(old_block).items() if r not in donated_results}
        else:
            for a, b in zip(old_block.arguments, block.arguments):
                self.map[a] = b
        self.block(old_block)
        return new

    @staticmethod
    def workspace_blocks(f: ir.Operation, ins: list) -> list[int]:
        """Storage blocks the caller passes in (runtime-owned, reused across calls): every block
        whose size the runtime can evaluate before the call, from the symbols the arguments bind
        and the derived ones. The rest are allocated in the body."""
        if "relax.memory_plan" not in f.attributes:
            return []
        known = {str(d) for t in ins for d in t.dims if d is not None and d.is_symbol}
        if "relax.derived_symbols" in f.attributes:
            d = f.attributes["relax.derived_symbols"]
            known |= {d[i].name for i in range(len(d))}
        out = []
        for i, size in enumerate(f.attributes["relax.memory_plan"]["blocks"]):
            if isinstance(size, ir.IntegerAttr) or parse_expr(ir.StringAttr(size).value).symbols() <= known:
                out.append(i)
        return out

    @staticmethod
    def find_direct_outs(old_block: ir.Block) -> dict:
        """call_tir results returned once, as they are: their kernel writes the caller's buffer.

        (With a tensor.empty destination and materialize_in_destination at the return,
        empty-tensor elimination misses kernels whose schedule branches on the shape, and each
        such output costs a copy.)"""
        ops = [o.operation for o in old_block.operations]
        if not ops or ops[-1].name != "func.return":
            return {}
        rets = list(ops[-1].operands)
        defined = {r for o in ops if o.name == "relax_v.call_tir" for r in o.results}
        return {v: i for i, v in enumerate(rets) if v in defined and rets.count(v) == 1}

    def mark_block_start(self):
        """Storage blocks are allocated where the guarded body starts (after the checks)."""
        with self.ip, self.loc:
            anchor = ir.Operation.create("arith.constant", results=[self.index],
                                         attributes={"value": ir.IntegerAttr.get(self.index, 0)})
        self.block_start = anchor

    def open_guard(self):
        """Wrap the rest of the body in scf.if(all checks hold)."""
        self.guard_opened = True
        if not self.entry or not self.checks:
            return
        i1 = ir.IntegerType.get_signless(1)
        i32 = ir.IntegerType.get_signless(32)
        ok = self.checks[0][0]
        for c, _ in self.checks[1:]:
            ok = self.create("arith.andi", [i1], [ok, c]).results[0]
        code = self.create("arith.constant", [i32], [], {"value": ir.IntegerAttr.get(i32, 0)}).results[0]
        for c, n in reversed(self.checks):
            k = self.create("arith.constant", [i32], [], {"value": ir.IntegerAttr.get(i32, n)}).results[0]
            code = self.create("arith.select", [i32], [c, code, k]).results[0]
        op = self.create("scf.if", [], [ok], regions=2)
        then = op.regions[0].blocks.append()
        els = op.regions[1].blocks.append()
        with ir.InsertionPoint(els), self.loc:
            zero = ir.Operation.create("arith.constant", results=[self.index], attributes={
                "value": ir.IntegerAttr.get(self.index, 0)}).results[0]
            ir.Operation.create("memref.store", results=[], operands=[code, self.err, zero])
            ir.Operation.create("scf.yield", results=[], operands=[])
        with ir.InsertionPoint(then), self.loc:
            y = ir.Operation.create("scf.yield", results=[], operands=[])
        self.after_guard = self.ip
        self.ip = ir.InsertionPoint(y)

    PROLOGUE = ("relax.dim", "relax.assert")

    def block(self, blk: ir.Block):
        for op in blk.operations:
            op = op.operation
            n = op.name
            if not self.guard_opened and not (n in self.PROLOGUE or n.startswith("arith.")):
                self.open_guard()
                self.mark_block_start()
            self.op(op)

    def op(self, op: ir.Operation):
        n = op.name
        self.loc = op.location
        if n == "relax.dim":
            axis = ir.IntegerAttr(op.attributes["axis"]).value
            c = self.const_index(axis)
            self.map[op.results[0]] = self.create("tensor.dim", [self.index], [self.v(op.operands[0]), c]).results[0]
        elif n == "relax.assert":
            if not self.entry and "relax.region" in self.f.attributes and "relax.body_check" in op.attributes:
                # A region function has no error channel: its checks would be skipped.
                msg = ir.StringAttr(op.attributes["message"]).value
                raise PassError(op, f"'relax.assert' op: the run-time check '{msg}' inside a loop or branch body "
                                    f"is not supported yet")
            self.checks.append((self.v(op.operands[0]), ir.IntegerAttr(op.attributes["code"]).value))
        elif n.startswith("arith."):
            new = self.create(n, [r.type for r in op.results], [self.v(x) for x in op.operands], attr_dict(op))
            for a, b in zip(op.results, new.results):
                self.map[a] = b
        elif n == "relax_v.call_tir":
            self.call_tir(op)
        elif n == "relax.reshape":
            self.reshape(op)
        elif n == "relax.match_cast":
            src = self.v(op.operands[0])
            t = builtin_type(op.results[0].type)
            self.map[op.results[0]] = src if src.type == t else self.create("tensor.cast", [t], [src]).results[0]
        elif n == "relax.constant":
            v = op.attributes["value"]
            self.map[op.results[0]] = self.create("arith.constant", [v.type], [], {"value": v}).results[0]
        elif n == "relax_v.dataflow":
            body = op.regions[0].blocks[0]
            for inner in body.operations:
                inner = inner.operation
                if inner.name == "gpu.yield":
                    for a, b in zip(op.results, inner.operands):
                        self.map[a] = self.v(b)
                else:
                    self.op(inner)
        elif n == "func.call":
            new = self.create("func.call", [builtin_type(r.type) for r in op.results],
                              [self.v(x) for x in op.operands], {"callee": op.attributes["callee"]})
            for a, b in zip(op.results, new.results):
                self.map[a] = b
        elif n == "func.return":
            self.ret(op)
        elif n == "relax.kill":
            pass
        elif n in CONTROL_FLOW:
            self.control_flow(op)
        elif n.startswith("relax"):
            raise PassError(op, f"'{n}' op has no upstream lowering: run relax-legalize first")
        else:
            new = self.create(n, [builtin_type(r.type) for r in op.results], [self.v(x) for x in op.operands],
                              attr_dict(op))
            for a, b in zip(op.results, new.results):
                self.map[a] = b

    # --- control flow (ops/control_flow.py): scf ops calling the region functions ------------

    def region_call(self, name: str, args: list, want: list) -> list:
        """func.call of region function @name; results cast to the builtin types `want`."""
        f = None
        for o in self.f.parent.regions[0].blocks[0].operations:
            if o.operation.name == "func.func" and ir.StringAttr(o.attributes["sym_name"]).value == name:
                f = o.operation
                break
        if f is None:
            raise PassError(self.f, f"internal error: region function @{name} not found")
        ft = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
        call = self.create("func.call", [builtin_type(t) for t in ft.results], args,
                           {"callee": ir.FlatSymbolRefAttr.get(name)})
        out = []
        for v, t in zip(call.results, want):
            out.append(v if v.type == t else self.create("tensor.cast", [t], [v]).results[0])
        return out

    def scalar(self, v: ir.Value) -> ir.Value:
        """The element of a rank-0 tensor."""
        et = ir.RankedTensorType(v.type).element_type
        return self.create("tensor.extract", [et], [v]).results[0]

    def in_block(self, block: ir.Block, build):
        saved = self.ip
        self.ip = ir.InsertionPoint(block)
        try:
            return build()
        finally:
            self.ip = saved

    def control_flow(self, op: ir.Operation):
        names = region_callees(op)
        vals = [self.v(x) for x in op.operands]
        rtypes = [builtin_type(r.type) for r in op.results]
        if op.name == "relax_v.while":
            n = ir.IntegerAttr(op.attributes["carried"]).value
            init, caps = vals[:n], vals[n:]
            w = self.create("scf.while", rtypes, init, regions=2)
            before = w.regions[0].blocks.append(*rtypes)
            after = w.regions[1].blocks.append(*rtypes)

            def cond():
                (c,) = self.region_call(names[0], list(before.arguments) + caps,
                                        [ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))])
                self.create("scf.condition", [], [self.scalar(c)] + list(before.arguments))

            def body():
                self.create("scf.yield", [], self.region_call(names[1], list(after.arguments) + caps, rtypes))

            self.in_block(before, cond)
            self.in_block(after, body)
            new = w
        elif op.name == "relax_v.if":
            pred = self.scalar(vals[0])
            new = self.create("scf.if", rtypes, [pred], regions=2)
            for region, name in zip(new.regions, names):
                blk = region.blocks.append()
                self.in_block(blk, lambda name=name: self.create("scf.yield", [], self.region_call(
                    name, vals[1:], rtypes)))
        else:
            # StableHLO: an index outside [0, N) selects the last branch, the switch's default.
            i = self.create("arith.index_cast", [self.index], [self.scalar(vals[0])]).results[0]
            k = len(names)
            new = self.create("scf.index_switch", rtypes, [i],
                              {"cases": ir.DenseI64ArrayAttr.get(list(range(k - 1)))}, regions=k)
            order = [names[-1]] + names[:-1]  # the default region comes first
            for region, name in zip(new.regions, order):
                blk = region.blocks.append()
                self.in_block(blk, lambda name=name: self.create("scf.yield", [], self.region_call(
                    name, vals[1:], rtypes)))
        new.attributes["relax.control_flow"] = ir.StringAttr.get(op.name)  # GPU targets refuse these
        for a, b in zip(op.results, new.results):
            self.map[a] = b

    def call_tir(self, op: ir.Operation):
        if "lowered" not in op.attributes:
            raise PassError(op, "'relax_v.call_tir' op: run relax-lower-shapes first")
        n_in, n_sym, n_dims = [ir.IntegerAttr(a).value for a in op.attributes["lowered"]]
        vals = [self.v(x) for x in op.operands]
        tensors, syms, dims = vals[:n_in], vals[n_in:n_in + n_sym], vals[n_in + n_sym:]
        if self.donated_args and len(op.operands) and op.operands[0] in self.donated_args:
            # An in-place kernel (dynamic_update_slice) on a donated input: it updates the input's
            # tensor (writable) instead of copying it first. The same tensor either way, so the flag
            # never changes a result; bufferization copies where the old value is still read.
            pos = _in_place_flag(op, self.kernel(ir.FlatSymbolRefAttr(op.attributes["callee"]).value))
            if pos is not None:
                syms = list(syms)
                syms[pos] = self.const_index(1)
        empties = []
        k = 0
        storage = [ir.IntegerAttr(a).value for a in op.attributes["relax.storage"]] \
            if "relax.storage" in op.attributes else [-1] * len(op.results)
        for r, blk in zip(op.results, storage):
            t = view(r.type)
            nd = sum(1 for d in t.dims if not d.is_const)
            out = self.direct_outs.get(r)
            if out is not None and self.outs[out].type == ir.Type.parse(builtin_memref_text(t)):
                empties.append(self.create("bufferization.to_tensor", [builtin_type(r.type)], [self.outs[out]],
                                           {"restrict": ir.UnitAttr.get(), "writable": ir.UnitAttr.get()}).results[0])
            elif blk >= 0:
                empties.append(self.planned_buffer(blk, r.type, dims[k:k + nd]))
            else:
                empties.append(self.create("tensor.empty", [builtin_type(r.type)], dims[k:k + nd]).results[0])
            k += nd
        new = self.create("func.call", [builtin_type(r.type) for r in op.results], tensors + empties + syms,
                          {"callee": op.attributes["callee"]})
        for a, b in zip(op.results, new.results):
            self.map[a] = b

    def kernel(self, name: str) -> ir.Operation | None:
        for o in self.f.parent.regions[0].blocks[0].operations:
            if o.operation.name == "func.func" and ir.StringAttr(o.attributes["sym_name"]).value == name:
                return o.operation
        return None

    def param_roots(self, v: ir.Value, memo: dict) -> frozenset:
        """The entry parameters (block arguments) whose storage `v` may share once bufferized:
        conservative (an op it does not know may alias every tensor it reads)."""
        if isinstance(v, ir.BlockArgument):
            return frozenset({v.arg_number}) if v.owner == self.f.regions[0].blocks[0] else frozenset()
        if v in memo:
            return memo[v]
        memo[v] = frozenset()
        op = v.owner
        srcs = list(op.operands)
        if op.name == "relax_v.call_tir":
            kernel = self.kernel(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
            n_in = ir.IntegerAttr(op.attributes["lowered"][0]).value if "lowered" in op.attributes \
                else len(srcs)
            if kernel is not None and kernel.regions[0].blocks:
                k = list(op.results).index(v)
                srcs = [srcs[j] for j in result_aliases(kernel, n_in)[k]]
        elif op.name == "relax.constant":
            srcs = []
        elif len(op.regions):  # values captured by regions: any parameter
            memo[v] = frozenset(range(len(self.f.regions[0].blocks[0].arguments)))
            return memo[v]
        out = frozenset()
        for s in srcs:
            out |= self.param_roots(s, memo)
        memo[v] = out
        return out

    def planned_buffer(self, blk: int, rtype: ir.Type, dyn: list) -> ir.Value:
        """A destination tensor placed in storage block `blk` of the memory plan."""
        t = view(rtype)
        if blk not in self.blocks:
            size = self.f.attributes["relax.memory_plan"]["blocks"][blk]
            align = {"alignment": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)}
            # Entry functions take their blocks as workspace arguments; these allocations are
            # for private graph functions and for blocks sized by symbols the runtime cannot see.
            if isinstance(size, ir.IntegerAttr):  # sized at the upper bounds: at the body's start
                mt = ir.Type.parse(f"memref<{max(size.value, 1)}xi8>")
                with ir.InsertionPoint(self.block_start), self.loc:
                    self.blocks[blk] = ir.Operation.create(
                        "memref.alloc", results=[mt], operands=[], attributes={
                            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 0]), **align}).results[0]
            else:  # sized per call: here, at the byte count of its first tensor (all share it)
                n = ITEMSIZE[t.dtype]
                for d in t.dims:
                    n *= d.value if d.is_const else 1
                nbytes = self.const_index(n)
                for d in dyn:
                    nbytes = self.create("arith.muli", [self.index], [nbytes, d]).results[0]
                self.blocks[blk] = self.create("memref.alloc", [ir.Type.parse("memref<?xi8>")], [nbytes], {
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 0]), **align}).results[0]
        mref = ir.Type.parse(builtin_memref_text(t))
        zero = self.const_index(0)
        v = self.create("memref.view", [mref], [self.blocks[blk], zero] + list(dyn)).results[0]
        # Every tensor of a block gets its own to_tensor: the tag keeps CSE from merging two of
        # them into one value, which bufferization would then copy out of place to keep the
        # first writer's data for the second (the planner has already proved their lifetimes
        # disjoint, so each writes the block in place).
        self.n_placed += 1
        return self.create("bufferization.to_tensor", [builtin_type(rtype)], [v],
                           {"restrict": ir.UnitAttr.get(), "writable": ir.UnitAttr.get(),
                            "relax.placed": ir.IntegerAttr.get(self.index, self.n_placed)}).results[0]

    def reshape(self, op: ir.Operation):
        t = view(op.results[0].type)
        dyn = [self.v(x) for x in list(op.operands)[1:]]
        if len(dyn) != sum(1 for d in t.dims if not d.is_const):
            raise PassError(op, "'relax.reshape' op: run relax-lower-shapes first")
        src = self.v(op.operands[0])
        rt = builtin_type(op.results[0].type)
        if src.type == rt and t.known and all(d.is_const for d in t.dims):
            self.map[op.results[0]] = src
            return
        it = iter(dyn)
        elems = [self.const_index(d.value) if d.is_const else next(it) for d in t.dims]
        st = ir.Type.parse(f"tensor<{len(elems)}xindex>")
        shape = self.create("tensor.from_elements", [st], elems).results[0]
        self.map[op.results[0]] = self.create("tensor.reshape", [rt], [src, shape]).results[0]

    def ret(self, op: ir.Operation):
        vals = [self.v(x) for x in op.operands]
        if not self.entry:
            self.create("func.return", [], vals)
            return
        # A kernel that wrote its caller's buffer in place leaves a self-copy here, folded away;
        # one whose result is not its destination (a view of an input) is copied.
        into = {r: i for i, r in self.donate.items()}
        for r, (v, out) in enumerate(zip(vals, self.outs)):
            if r not in into:
                self.create("bufferization.materialize_in_destination", [], [v, out],
                            {"restrict": ir.UnitAttr.get(), "writable": ir.UnitAttr.get()})
        # Donated results last (the others may read a donated input's old value). One that may
        # share storage with another donated input is copied out first: that input is
        # overwritten by its own result before or after this one is written.
        memo: dict = {}
        donated = set(self.donate)
        for r, i in sorted(into.items()):
            if self.param_roots(op.operands[r], memo) & (donated - {i}):
                vals[r] = self.create("bufferization.alloc_tensor", [vals[r].type], [vals[r]], {
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 1, 0])}).results[0]
        for r, i in sorted(into.items()):
            dest = self.func_args[i]
            self.create("bufferization.materialize_in_destination", [], [vals[r], dest],
                        {"writable": ir.UnitAttr.get()})
        if self.checks:
            self.ip = self.after_guard
        self.create("func.return", [], [])


def is_entry(f: ir.Operation) -> bool:
    return "sym_visibility" not in f.attributes or ir.StringAttr(f.attributes["sym_visibility"]).value == "public"


@dataclass(frozen=True)
class ToUpstreamPass(ModulePass):
    """Lower graph functions to func.func on builtin tensors/memrefs; call_tir becomes func.call."""

    name: ClassVar[str] = "relax-to-upstream"

    def run(self, module: ir.Operation) -> None:
        funcs = graph_functions(module)
        if any("relax.shapes_lowered" not in f.attributes for f in funcs):
            LowerShapesPass().run(module)
            funcs = graph_functions(module)
        for f in funcs:
            new = _Lowerer(f, is_entry(f)).build()
            f.erase()
            _ = new
        for op in module.regions[0].blocks[0].operations:
            op = op.operation
            if op.name == "func.func" and "relax.kernel_key" in op.attributes:
                del op.attributes["relax.kernel_key"]


PASSES = (ToUpstreamPass,)
