"""A serializable host program: what a GPU backend leaves on the host side of each entry, as data.

`extract(module_op, target)` (compile time, needs MLIR) walks each public entry function after the
backend lowering (backend/spirv.py up to `to-spirv`, backend/gpu.py up to `map`) and returns a
plain JSON-able dict. `HostProgram(program).run(entry, arrays, driver)` (run time, numpy only)
executes it: index arithmetic, dims, allocations, views, copies, `scf.if` / `scf.for` /
`scf.while` / `scf.index_switch` (the graph's loops and branches: conditions read back from the
device), kernel launches through a pluggable `driver`, error-slot writes. Each entry's body is
turned into Python closures (one per instruction, its fields bound) on its first call. In-process
executables and exported artifacts run the same interpreter.

Program format ("relax-mlir-hostprog-1"):

    {"format", "target": "vulkan" | "cuda", "index_dtype": dtype of an index element in a device buffer,
     "globals": {name: {"dtype", "shape", "data": base64}},
     "entries": {name: {"n_in", "n_out", "donated"?: [input index], "args": [{"id", "dtype", "shape", "host"}],
                        "body": [instruction]}}}

A donated input (relax.donate) is uploaded like any input and, since the body writes a result
into it, read back into the caller's array after the run like an output.

Values are numbered per entry (arguments first). An instruction is a dict with an "op":

    const {out, value}                      arith {fn, out, in, pred?, bits?}
    affine {fn: apply|min|max, out, in, n_dims, exprs}   (expr: ["d"|"s"|"c", n] or [kind, lhs, rhs])
    dim {out, src, index}                   alloc {out, dtype, shape, dyn, host}     global {out, name, host}
    view {out, src, shape, dyn}             collapse {out, src, groups}   reshape {out, src, shape_buf}
    alias {out, src}   copy {src, dst}   load {out, src, idx}   store {value, dst, idx}   free {buf}
    error {value}                           (a write into the error slot)
    if {cond, then, else, out}              for {lb, ub, step, iv, init, iter, out, body}    yield {in}
    while {init, before_args, before, after_args, after, out}   condition {cond, in}  (before's last)
    switch {arg, cases, regions, default, out}   (scf.index_switch: the region of the case equal to arg)
    launch {module, kernel, grid, block, shared, args, abi, loops?}                       return {}

`shape` lists hold an int per static dim and null per dynamic dim, filled in order from `dyn`.
A buffer is `host` (a numpy array) when nothing but host loads, stores, dims and reshape shapes use
it, else a device buffer owned by the driver. Launch `abi` holds one entry per kernel argument:
vulkan `{"kind": "buffer"}` (binding i) or `{"kind": "scalar", "pack": struct format}` (its own
4-byte storage buffer, binding i); cuda `{"kind": "memref", "rank", "params": 3 + 2*rank}`
(allocated/aligned pointer, offset, sizes, strides) or `{"kind": "scalar", "ctype", "params": 1}`.
`loops`, where the kernel has loops, bounds the loop iterations of one invocation
(backend/loop_budget.py); a driver with a `loop_limit` refuses a launch over it.

Driver protocol (see runtime/vulkan.py `WgpuDriver`, runtime/cuda.py `CupyDriver`):

    alloc(nbytes) -> handle          upload(handle, data: uint8 ndarray)     download(handle, nbytes) -> bytes-like
    copy(src, dst, nbytes)           launch(module, kernel, grid, block, shared, args)    sync()    free(handle)

`launch` receives `args` as (abi, value) pairs: a `Buffer` (handle, shape, dtype) or a Python number.
"""
from __future__ import annotations

import base64
import json
from typing import Any, Sequence

import numpy as np

from relax_mlir.runtime import loop_budget

FORMAT = "relax-mlir-hostprog-1"

DTYPES = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i1": np.bool_, "i8": np.int8,
          "i16": np.int16, "i32": np.int32, "i64": np.int64, "ui8": np.uint8, "ui16": np.uint16,
          "ui32": np.uint32, "ui64": np.uint64,
          "bf16": np.uint16}  # bf16: its bytes (kernels that compute in bf16 are the backends' to refuse)

__all__ = ["FORMAT", "Buffer", "HostError", "HostProgram", "extract"]


class HostError(RuntimeError):
    """The host program cannot be extracted or run."""


# ----------------------------------------------------------------------------------------------
# extraction (compile time; the only part that imports MLIR)
# ----------------------------------------------------------------------------------------------

_ARITH = {"addi", "subi", "muli", "divsi", "divui", "remsi", "remui", "ceildivsi", "ceildivui", "floordivsi",
          "maxsi", "minsi", "maxui", "minui", "andi", "ori", "xori", "shli", "shrsi", "shrui",
          "addf", "subf", "mulf", "divf", "maximumf", "minimumf", "maxnumf", "minnumf", "negf",
          "index_cast", "index_castui", "extsi", "extui", "trunci", "sitofp", "uitofp", "fptosi", "fptoui",
          "extf", "truncf", "select", "cmpi"}
_CMPI = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
_VIEW_USES = ("memref.collapse_shape", "memref.expand_shape", "memref.reshape", "memref.cast", "memref.view",
              "builtin.unrealized_conversion_cast")
_SCALAR_PACK = {"index": "<i", "i32": "<i", "i16": "<i", "i8": "<i", "i1": "<i", "f32": "<f", "f16": "<e",
                "i64": "<q"}
_SCALAR_CTYPE = {"index": "i64", "i64": "i64", "i32": "i32", "i16": "i16", "i8": "i8", "i1": "i8",
                 "f32": "f32", "f64": "f64", "f16": "f16"}


def _elem(t) -> str:
    s = str(t)
    if s == "index" or s in DTYPES:
        return s
    raise HostError(f"unsupported element type {s} on the host side")


def platform_name(target: str) -> str:
    """How refusals name a target's platform ("... is not supported on CUDA")."""
    return {"cuda": "CUDA", "webgpu": "WebGPU", "cpu": "CPU"}.get(target, target.capitalize())


def _bf16_bits(ir, a) -> np.ndarray:
    """The uint16 bits of a bf16 DenseElementsAttr (which has no buffer protocol and no element
    access in the bindings): the constant bitcast to i16 and folded by canonicalize, in a scratch
    module of the attribute's context."""
    from mlir.dialects import arith, func
    from mlir.passmanager import PassManager

    t = ir.RankedTensorType(a.type)
    with ir.Location.unknown():
        i16 = ir.RankedTensorType.get(t.shape, ir.IntegerType.get_signless(16))
        m = ir.Module.create()
        with ir.InsertionPoint(m.body):
            f = func.FuncOp("bits", ([], [i16]))
            with ir.InsertionPoint(f.add_entry_block()):
                func.ReturnOp([arith.BitcastOp(i16, arith.ConstantOp(t, a)).result])
        PassManager.parse("builtin.module(func.func(canonicalize))").run(m.operation)
    folded = f.entry_block.operations[0]
    if folded.operation.name != "arith.constant":
        raise HostError("a bf16 constant did not fold to its bits")
    return np.array(ir.DenseElementsAttr(folded.operation.attributes["value"])).view(np.uint16)


class _Extractor:
    def __init__(self, module_op, target: str, platform: str | None = None):
        from mlir import ir

        self.ir = ir
        self.target = target
        self.platform = platform or platform_name(target)
        self.module_op = module_op
        self.globals: dict[str, dict] = {}
        self.global_ops = {}
        for o in module_op.regions[0].blocks[0].operations:
            o = o.operation
            if o.name == "memref.global":
                self.global_ops[ir.StringAttr(o.attributes["sym_name"]).value] = o

    # values ---------------------------------------------------------------------------------
    def ref(self, v) -> int:
        try:
            return self.ids[v]
        except KeyError:
            raise HostError(f"a host op uses a value defined outside the entry: {v}") from None

    def define(self, v) -> int:
        i = len(self.ids)
        self.ids[v] = i
        return i

    # host/device placement ------------------------------------------------------------------
    def _device_use(self, v, seen: set | None = None) -> bool:
        """Whether buffer `v` reaches a kernel or a copy: through views, and through the values of
        loops and branches it becomes (an iteration's argument, a result)."""
        seen = set() if seen is None else seen
        if v in seen:
            return False
        seen.add(v)
        for use in v.uses:
            o = use.owner
            o = o.operation if hasattr(o, "operation") else o
            n = o.name
            if n in ("gpu.launch_func", "memref.copy"):
                return True
            if n in _VIEW_USES and use.operand_number == 0 and self._device_use(o.results[0], seen):
                return True
            if any(self._device_use(w, seen) for w in _carried(o, use.operand_number)):
                return True
        return False

    # the walk -------------------------------------------------------------------------------
    def entry(self, func) -> dict:
        ir = self.ir
        self.ids = {}
        block = func.regions[0].blocks[0]
        args = []
        for a in block.arguments:
            t = ir.MemRefType(a.type)
            self._identity(t)
            args.append({"id": self.define(a), "dtype": _elem(t.element_type), "shape": self._static(t),
                         "host": not self._device_use(a)})
        self.err = block.arguments[len(block.arguments) - 1]
        return {"args": args, "body": self.block(block)}

    def block(self, block) -> list:
        out = []
        for o in block.operations:
            self.op(o.operation, out)
        return out

    @staticmethod
    def _static(t) -> list:
        return [None if t.is_dynamic_dim(d) else int(t.shape[d]) for d in range(t.rank)]

    def _identity(self, t):
        text = str(t)
        if "strided" in text or "affine_map" in text:
            raise HostError(f"a host buffer has a non-identity layout: {text}")

    def op(self, o, out: list) -> None:
        ir = self.ir
        n = o.name
        R = self.ref
        ins = [R(v) for v in o.operands]
        if n == "arith.constant":
            a = o.attributes["value"]
            if isinstance(a, ir.BoolAttr):  # an i1 `true` / `false` (not an IntegerAttr in the bindings)
                val = int(ir.BoolAttr(a).value)
            elif isinstance(a, ir.IntegerAttr):
                val = ir.IntegerAttr(a).value
            elif isinstance(a, ir.FloatAttr):
                val = ir.FloatAttr(a).value
            else:
                raise HostError(f"unsupported host constant {a}")
            out.append({"op": "const", "out": self.define(o.results[0]), "value": val})
        elif n.startswith("arith.") and n[6:] in _ARITH:
            ins_ = {"op": "arith", "fn": n[6:], "out": self.define(o.results[0]), "in": ins}
            if n == "arith.cmpi":
                ins_["pred"] = _CMPI[ir.IntegerAttr(o.attributes["predicate"]).value]
            elif n == "arith.trunci":
                ins_["bits"] = ir.IntegerType(o.results[0].type).width
            out.append(ins_)
        elif n in ("affine.apply", "affine.min", "affine.max"):
            amap = ir.AffineMapAttr(o.attributes["map"]).value
            out.append({"op": "affine", "fn": n[7:], "out": self.define(o.results[0]), "in": ins,
                        "n_dims": amap.n_dims, "exprs": [self.affine(e) for e in amap.results]})
        elif n == "memref.dim":
            out.append({"op": "dim", "out": self.define(o.results[0]), "src": ins[0], "index": ins[1]})
        elif n in ("memref.alloc", "memref.alloca"):
            t = ir.MemRefType(o.results[0].type)
            self._identity(t)
            r = o.results[0]
            out.append({"op": "alloc", "out": self.define(r), "dtype": _elem(t.element_type),
                        "shape": self._static(t), "dyn": ins[:t.rank], "host": not self._device_use(r)})
        elif n == "memref.get_global":
            name = ir.FlatSymbolRefAttr(o.attributes["name"]).value
            self.add_global(name)
            r = o.results[0]
            out.append({"op": "global", "out": self.define(r), "name": name, "host": not self._device_use(r)})
        elif n == "memref.collapse_shape":
            groups = [[ir.IntegerAttr(d).value for d in g] for g in ir.ArrayAttr(o.attributes["reassociation"])]
            out.append({"op": "collapse", "out": self.define(o.results[0]), "src": ins[0], "groups": groups})
        elif n == "memref.expand_shape":
            t = ir.MemRefType(o.results[0].type)
            out.append({"op": "view", "out": self.define(o.results[0]), "src": ins[0], "shape": self._static(t),
                        "dyn": ins[1:]})
        elif n == "memref.view":  # a typed view at byte 0 of a memory-plan block (memref<?xi8>)
            t = ir.MemRefType(o.results[0].type)
            out.append({"op": "byteview", "out": self.define(o.results[0]), "src": ins[0], "shift": ins[1],
                        "dtype": _elem(t.element_type), "shape": self._static(t), "dyn": ins[2:]})
        elif n == "memref.reshape":
            out.append({"op": "reshape", "out": self.define(o.results[0]), "src": ins[0], "shape_buf": ins[1]})
        elif n in ("memref.cast", "builtin.unrealized_conversion_cast"):
            # (the second: a bf16 buffer a Vulkan kernel reads as its i16 bits, spirv.py)
            out.append({"op": "alias", "out": self.define(o.results[0]), "src": ins[0]})
        elif n == "memref.copy":
            out.append({"op": "copy", "src": ins[0], "dst": ins[1]})
        elif n == "memref.load":
            out.append({"op": "load", "out": self.define(o.results[0]), "src": ins[0], "idx": ins[1:]})
        elif n == "memref.store":
            if o.operands[1] == self.err and not self._device_use(self.err):
                out.append({"op": "error", "value": ins[0]})
            else:
                out.append({"op": "store", "value": ins[0], "dst": ins[1], "idx": ins[2:]})
        elif n == "memref.dealloc":
            out.append({"op": "free", "buf": ins[0]})
        elif n == "scf.if":
            cond = ins[0]
            then = self.block(o.regions[0].blocks[0])
            other = self.block(o.regions[1].blocks[0]) if len(o.regions[1].blocks) else []
            out.append({"op": "if", "cond": cond, "then": then, "else": other,
                        "out": [self.define(r) for r in o.results]})
        elif n == "scf.for":
            ops = ins
            body = o.regions[0].blocks[0]
            iv = self.define(body.arguments[0])
            it = [self.define(a) for a in list(body.arguments)[1:]]
            inst = {"op": "for", "lb": ops[0], "ub": ops[1], "step": ops[2], "iv": iv, "init": ops[3:],
                    "iter": it, "body": self.block(body)}
            inst["out"] = [self.define(r) for r in o.results]
            out.append(inst)
        elif n == "scf.while":
            before, after = o.regions[0].blocks[0], o.regions[1].blocks[0]
            inst = {"op": "while", "init": ins, "before_args": [self.define(a) for a in before.arguments],
                    "before": self.block(before), "after_args": [self.define(a) for a in after.arguments],
                    "after": self.block(after)}
            inst["out"] = [self.define(r) for r in o.results]
            out.append(inst)
        elif n == "scf.condition":
            out.append({"op": "condition", "cond": ins[0], "in": ins[1:]})
        elif n == "scf.index_switch":
            cases = [int(c) for c in ir.DenseI64ArrayAttr(o.attributes["cases"])]
            regions = list(o.regions)
            out.append({"op": "switch", "arg": ins[0], "cases": cases,
                        "regions": [self.block(r.blocks[0]) for r in regions[1:]],
                        "default": self.block(regions[0].blocks[0]), "out": [self.define(r) for r in o.results]})
        elif n == "scf.yield":
            out.append({"op": "yield", "in": ins})
        elif n in ("func.return", "return"):
            if ins:
                raise HostError("an entry returns values; the relax-to-upstream contract returns none")
            out.append({"op": "return"})
        elif n == "gpu.launch_func":
            out.append(self.launch(o))
        else:
            # what the backend left on the host is index arithmetic, copies and launches; an op on
            # elements here is a kernel it did not map onto the device (a sort along a dynamic axis)
            raise HostError(f"'{n}' in the host program is not supported on {self.platform} (the host program runs "
                            f"index arithmetic, copies and kernel launches only)")

    def affine(self, e) -> list:
        ir = self.ir
        if isinstance(e, ir.AffineConstantExpr):
            return ["c", e.value]
        if isinstance(e, ir.AffineDimExpr):
            return ["d", e.position]
        if isinstance(e, ir.AffineSymbolExpr):
            return ["s", e.position]
        for cls, kind in ((ir.AffineAddExpr, "add"), (ir.AffineMulExpr, "mul"), (ir.AffineModExpr, "mod"),
                          (ir.AffineFloorDivExpr, "floordiv"), (ir.AffineCeilDivExpr, "ceildiv")):
            if isinstance(e, cls):
                return [kind, self.affine(e.lhs), self.affine(e.rhs)]
        raise HostError(f"unsupported affine expression {e}")

    def add_global(self, name: str) -> None:
        ir = self.ir
        if name in self.globals:
            return
        g = self.global_ops.get(name)
        if g is None:
            raise HostError(f"memref.get_global of an unknown global @{name}")
        t = ir.MemRefType(ir.TypeAttr(g.attributes["type"]).value)
        dtype = _elem(t.element_type)
        shape = [int(s) for s in t.shape]
        np_dt = np.int64 if dtype == "index" else DTYPES[dtype]
        if "initial_value" in g.attributes and isinstance(g.attributes["initial_value"], ir.DenseElementsAttr):
            a = ir.DenseElementsAttr(g.attributes["initial_value"])
            try:
                if dtype == "i1" and a.is_splat:
                    # (the bindings' buffer of an i1 splat holds one byte but claims every element:
                    # numpy read the bytes past it, a constant false had stray trues on Vulkan)
                    data = np.full(shape, bool(a.get_splat_value().value), np_dt)
                else:
                    data = _bf16_bits(ir, a) if dtype == "bf16" else np.array(a).astype(np_dt)
            except Exception:  # index elements have no buffer protocol
                ia = ir.DenseIntElementsAttr(a)
                vals = [ia[0]] * int(np.prod(shape)) if a.is_splat else [ia[i] for i in range(len(ia))]
                data = np.array(vals, dtype=np_dt)
            if data.size == int(np.prod(shape)):  # (also an empty one: the shape of a rank-0 reshape)
                data = data.reshape(shape)
            elif data.size == 1:  # a splat
                data = np.broadcast_to(data.reshape(()), shape)
            else:
                raise HostError(f"global @{name} holds {data.size} elements for shape {shape}")
        else:
            data = np.zeros(shape, np_dt)
        self.globals[name] = {"dtype": dtype, "shape": shape,
                              "data": base64.b64encode(np.ascontiguousarray(data).tobytes()).decode("ascii")}

    def launch(self, o) -> dict:
        ir = self.ir
        from mlir.dialects import gpu as _gpu  # noqa: F401  (registers the LaunchFuncOp view)

        v = o.opview
        mname, kname = ir.SymbolRefAttr(v.kernel).value
        if len(v.asyncDependencies):
            raise HostError("async gpu.launch_func is not supported on the host")
        grid = [self.ref(x) for x in (v.gridSizeX, v.gridSizeY, v.gridSizeZ)]
        block = [self.ref(x) for x in (v.blockSizeX, v.blockSizeY, v.blockSizeZ)]
        shared = None if v.dynamicSharedMemorySize is None else self.ref(v.dynamicSharedMemorySize)
        kargs = list(v.kernelOperands)
        out = {"op": "launch", "module": mname, "kernel": kname, "grid": grid, "block": block, "shared": shared,
               "args": [self.ref(a) for a in kargs], "abi": [self.abi(a.type) for a in kargs]}
        if "relax.loop_cost" in o.attributes:  # backend/loop_budget.py
            out["loops"] = json.loads(ir.StringAttr(o.attributes["relax.loop_cost"]).value)
        return out

    def abi(self, t) -> dict:
        ir = self.ir
        if isinstance(t, ir.MemRefType) or str(t).startswith("memref<"):
            mt = ir.MemRefType(t)
            self._identity(mt)
            if self.target == "cuda":
                return {"kind": "memref", "rank": mt.rank, "dtype": _elem(mt.element_type),
                        "params": 3 + 2 * mt.rank}
            return {"kind": "buffer", "dtype": _elem(mt.element_type)}
        s = str(t)
        if self.target == "cuda":
            if s not in _SCALAR_CTYPE:
                raise HostError(f"unsupported scalar kernel argument of type {s}")
            return {"kind": "scalar", "type": s, "ctype": _SCALAR_CTYPE[s], "params": 1}
        if s not in _SCALAR_PACK:
            raise HostError(f"unsupported scalar kernel argument of type {s} (a Vulkan binding holds i1, i8, i16, i32, i64, f16 or f32)")
        return {"kind": "scalar", "type": s, "pack": _SCALAR_PACK[s]}


def _carried(o, k: int) -> list:
    """The values operand k of `o` becomes when `o` is a loop, a branch or their terminator: the
    iteration's argument, a result (scf.while / scf.for / scf.if / scf.index_switch)."""
    n = o.name
    if n == "scf.while":
        return [o.regions[0].blocks[0].arguments[k]]
    if n == "scf.for":
        return [o.regions[0].blocks[0].arguments[k - 2], o.results[k - 3]] if k >= 3 else []
    if n not in ("scf.condition", "scf.yield"):
        return []
    parent = o.parent
    parent = parent.operation if hasattr(parent, "operation") else parent
    p = parent.name
    if n == "scf.condition":
        return [parent.regions[1].blocks[0].arguments[k - 1], parent.results[k - 1]] if k >= 1 else []
    if p == "scf.while":
        return [parent.regions[0].blocks[0].arguments[k]]
    if p == "scf.for":
        return [parent.regions[0].blocks[0].arguments[k + 1], parent.results[k]]
    if p in ("scf.if", "scf.index_switch"):
        return [parent.results[k]]
    return []


def extract(module_op, target: str, platform: str | None = None) -> dict:
    """The host side of every public entry of a lowered module, as a JSON-able program.

    `target` is "vulkan" (after backend/spirv.py's `to-spirv` stage) or "cuda" (after
    backend/gpu.py's `map` stage): it decides the kernel-argument ABI and the index width.
    `platform` names the platform in errors (WebGPU runs the Vulkan ABI); default: the target's."""
    from mlir import ir

    if target not in ("vulkan", "cuda"):
        raise ValueError(f"unknown host-program target {target!r}")
    op = module_op.operation if hasattr(module_op, "operation") else module_op
    ex = _Extractor(op, target, platform)
    entries = {}
    with op.context:
        for f in op.regions[0].blocks[0].operations:
            f = f.operation
            if f.name != "func.func" or not len(f.regions[0].blocks):
                continue
            if "sym_visibility" in f.attributes and ir.StringAttr(f.attributes["sym_visibility"]).value == "private":
                continue
            name = ir.StringAttr(f.attributes["sym_name"]).value
            sig = [list(a) for a in f.attributes["relax.signature"]] if "relax.signature" in f.attributes else None
            e = ex.entry(f)
            e["n_in"] = len(sig[0]) if sig is not None else len(e["args"]) - 1
            # inputs, outputs, workspace blocks (nothing to copy back), the error slot
            e["n_out"] = len(sig[1]) if sig is not None else 0
            # donated inputs (relax.donate): the body writes a result into their buffers
            donated = []
            if "relax.arg_attrs" in f.attributes:
                for i, d in enumerate(f.attributes["relax.arg_attrs"]):
                    if "relax.donate" in d:
                        donated.append(i)
            if donated:
                e["donated"] = donated
            entries[name] = e
    return {"format": FORMAT, "target": target, "index_dtype": "i32" if target == "vulkan" else "i64",
            "globals": ex.globals, "entries": entries}


# ----------------------------------------------------------------------------------------------
# interpretation (run time; numpy only)
# ----------------------------------------------------------------------------------------------


class Buffer:
    """A buffer or a view of one (views share the handle; every layout is the identity)."""

    __slots__ = ("handle", "shape", "dtype", "host")

    def __init__(self, handle, shape, dtype, host: bool):
        self.handle = handle  # a numpy array when host, else the driver's handle
        self.shape = tuple(map(int, shape))
        self.dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        self.host = host

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def view(self, shape) -> "Buffer":
        shape = tuple(int(s) for s in shape)
        n = 1
        for s in shape:
            n *= s
        if n != self.size:
            raise HostError(f"a view of shape {shape} over a buffer of shape {self.shape}")
        h = self.handle.reshape(shape) if self.host else self.handle
        return Buffer(h, shape, self.dtype, self.host)

    def __repr__(self):
        return f"Buffer({self.shape}, {self.dtype}, {'host' if self.host else 'device'})"


def _divsi(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _trunc(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if bits > 1 and v >> (bits - 1) else v


_FN = {
    "addi": lambda a, b: a + b, "subi": lambda a, b: a - b, "muli": lambda a, b: a * b,
    "divsi": _divsi, "divui": lambda a, b: a // b, "remsi": lambda a, b: a - b * _divsi(a, b),
    "remui": lambda a, b: a % b, "ceildivsi": lambda a, b: -((-a) // b), "ceildivui": lambda a, b: -((-a) // b),
    "floordivsi": lambda a, b: a // b, "maxsi": max, "minsi": min, "maxui": max, "minui": min,
    "andi": lambda a, b: a & b, "ori": lambda a, b: a | b, "xori": lambda a, b: a ^ b,
    "shli": lambda a, b: a << b, "shrsi": lambda a, b: a >> b, "shrui": lambda a, b: a >> b,
    "addf": lambda a, b: a + b, "subf": lambda a, b: a - b, "mulf": lambda a, b: a * b,
    "divf": lambda a, b: a / b, "maximumf": max, "minimumf": min, "maxnumf": max, "minnumf": min,
    "negf": lambda a: -a, "index_cast": int, "index_castui": int, "extsi": int, "extui": int,
    "sitofp": float, "uitofp": float, "fptosi": int, "fptoui": int, "extf": float, "truncf": float,
    "select": lambda c, a, b: a if c else b,
}
_PRED = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b,
         "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
         "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b,
         "uge": lambda a, b: a >= b}


def _affine(e, vals, n_dims):
    k = e[0]
    if k == "c":
        return e[1]
    if k == "d":
        return vals[e[1]]
    if k == "s":
        return vals[n_dims + e[1]]
    a, b = _affine(e[1], vals, n_dims), _affine(e[2], vals, n_dims)
    if k == "add":
        return a + b
    if k == "mul":
        return a * b
    if k == "mod":
        return a % b
    if k == "floordiv":
        return a // b
    if k == "ceildiv":
        return -((-a) // b)
    raise HostError(f"unknown affine expression kind {k!r}")


_RETURN = object()  # what a block that ran `return` gives back


class HostProgram:
    """Runs an extracted host program with numpy and a driver (no MLIR)."""

    def __init__(self, program: dict):
        if program.get("format") != FORMAT:
            raise HostError(f"not a relax-mlir host program (format {program.get('format')!r})")
        self.program = program
        self.target = program["target"]
        self.entries = program["entries"]
        self._index_dtype = np.dtype(DTYPES[program["index_dtype"]])
        self._globals = {}
        for name, g in program["globals"].items():
            dt = self._np_dtype(g["dtype"], True)
            self._globals[name] = np.frombuffer(base64.b64decode(g["data"]), dtype=dt).reshape(g["shape"])
        self._uploaded: dict = {}  # (id(driver), name) -> (driver, Buffer)
        self._compiled: dict = {}  # entry -> its body as closures (`_compile_block`)

    def _np_dtype(self, dtype: str, host: bool) -> np.dtype:
        if dtype == "index":
            return np.dtype(np.int64) if host else self._index_dtype
        return np.dtype(DTYPES[dtype])

    # running -----------------------------------------------------------------------------
    def run(self, entry: str, arrays: Sequence[np.ndarray], driver) -> int:
        """Run `entry` on `arrays` (its inputs, its outputs, its workspace blocks, then the int32 error slot, as the
        Function of runtime/executable.py passes them). Outputs and the error slot are written in
        place; returns the error code (0: no check failed)."""
        e = self.entries[entry]
        if len(arrays) != len(e["args"]):
            raise HostError(f"@{entry} takes {len(e['args'])} buffers, got {len(arrays)}")
        env: dict[int, Any] = {}
        err = arrays[-1]
        down = []
        donated = e.get("donated", ())
        for i, (spec, a) in enumerate(zip(e["args"], arrays)):
            if spec["host"]:
                env[spec["id"]] = Buffer(a, a.shape, a.dtype, True)
                continue
            b = Buffer(driver.alloc(a.nbytes), a.shape, a.dtype, False)
            if i < e["n_in"] or i == len(arrays) - 1:
                if a.nbytes:
                    driver.upload(b.handle, np.ascontiguousarray(a).reshape(-1).view(np.uint8))
            if e["n_in"] <= i < e["n_in"] + e.get("n_out", len(arrays) - 1 - e["n_in"]) or i == len(arrays) - 1 \
                    or i in donated:  # a donated input holds a result: read back into the caller's array
                down.append((b, a))
            env[spec["id"]] = b
        self._body(entry)(env, driver, err)
        for b, a in down:
            if a.nbytes:
                data = driver.download(b.handle, b.nbytes)
                a.reshape(-1).view(np.uint8)[...] = np.frombuffer(data, np.uint8, count=b.nbytes)
        driver.sync()
        return int(err.reshape(-1)[0]) if err.size else 0

    # compiling: each instruction becomes a closure over its fields, run as f(env, driver, err);
    # a block returns None, the values of its `yield`, or _RETURN.
    def _body(self, entry: str):
        f = self._compiled.get(entry)
        if f is None:
            f = self._compiled[entry] = self._compile_block(self.entries[entry]["body"])
        return f

    def _compile_block(self, body):
        steps = [self._compile(ins) for ins in body]
        final = steps[-1] if steps and body[-1]["op"] in ("yield", "return", "condition") else None
        if final is not None:
            steps = steps[:-1]

        def run(env, driver, err):
            for step in steps:
                if step(env, driver, err) is _RETURN:
                    return _RETURN
            return final(env, driver, err) if final is not None else None
        return run

    def _compile(self, ins):  # noqa: C901 (one case an instruction)
        op = ins["op"]
        out = ins.get("out")
        if op == "launch":
            launch = self._launch
            return lambda env, driver, err: launch(ins, env, driver)
        if op == "const":
            value = ins["value"]

            def const(env, driver, err):
                env[out] = value
            return const
        if op == "arith":
            fn, ids = ins["fn"], ins["in"]
            if fn == "cmpi":
                f = _PRED[ins["pred"]]
            elif fn == "trunci":
                bits = ins["bits"]

                def f(a):
                    return _trunc(int(a), bits)
            else:
                f = _FN[fn]
            if len(ids) == 2:
                i0, i1 = ids

                def arith2(env, driver, err):
                    env[out] = f(env[i0], env[i1])
                return arith2

            def arith(env, driver, err):
                env[out] = f(*[env[i] for i in ids])
            return arith
        if op == "affine":
            ids, exprs, n_dims, kind = ins["in"], ins["exprs"], ins["n_dims"], ins["fn"]
            pick = {"apply": lambda r: r[0], "min": min, "max": max}[kind]

            def affine(env, driver, err):
                vals = [env[i] for i in ids]
                env[out] = pick([_affine(x, vals, n_dims) for x in exprs])
            return affine
        if op == "dim":
            src, index = ins["src"], ins["index"]

            def dim(env, driver, err):
                env[out] = env[src].shape[env[index]]
            return dim
        if op == "alloc":
            static, dyn, host = ins["shape"], ins["dyn"], ins["host"]
            dt = self._np_dtype(ins["dtype"], host)
            shape_of = self._shape

            def alloc(env, driver, err):
                shape = shape_of(static, dyn, env)
                if host:
                    env[out] = Buffer(np.zeros(shape, dt), shape, dt, True)
                else:
                    b = Buffer(None, shape, dt, False)
                    b.handle = driver.alloc(b.nbytes)
                    env[out] = b
            return alloc
        if op == "global":
            name, host, get = ins["name"], ins["host"], self._global

            def global_(env, driver, err):
                env[out] = get(name, host, driver)
            return global_
        if op == "view":
            src, static, dyn, shape_of = ins["src"], ins["shape"], ins["dyn"], self._shape

            def view(env, driver, err):
                env[out] = env[src].view(shape_of(static, dyn, env))
            return view
        if op == "byteview":
            src, shift, byteview = ins["src"], ins["shift"], self._byteview

            def byteview_(env, driver, err):
                env[out] = byteview(env[src], int(env[shift]), ins, env)
            return byteview_
        if op == "collapse":
            src, groups = ins["src"], ins["groups"]

            def collapse(env, driver, err):
                b = env[src]
                shape = []
                for g in groups:
                    n = 1
                    for d in g:
                        n *= b.shape[d]
                    shape.append(n)
                env[out] = b.view(shape)
            return collapse
        if op == "reshape":
            src, shape_buf, read = ins["src"], ins["shape_buf"], self._read

            def reshape(env, driver, err):
                shape = [int(x) for x in read(env[shape_buf], driver).reshape(-1)]
                env[out] = env[src].view(shape)
            return reshape
        if op == "alias":
            src = ins["src"]

            def alias(env, driver, err):
                env[out] = env[src]
            return alias
        if op == "copy":
            src, dst, copy = ins["src"], ins["dst"], self._copy
            return lambda env, driver, err: copy(env[src], env[dst], driver)
        if op == "load":
            src, idx, read = ins["src"], ins["idx"], self._read

            def load(env, driver, err):
                b = env[src]
                at = tuple(env[i] for i in idx)
                env[out] = (b.handle if b.host else read(b, driver))[at].item()
            return load
        if op == "store":
            dst, idx, value, read = ins["dst"], ins["idx"], ins["value"], self._read

            def store(env, driver, err):
                b = env[dst]
                at = tuple(env[i] for i in idx)
                if b.host:
                    b.handle[at] = env[value]
                else:
                    data = read(b, driver).copy()
                    data[at] = env[value]
                    driver.upload(b.handle, data.reshape(-1).view(np.uint8))
            return store
        if op == "error":
            value = ins["value"]

            def error(env, driver, err):
                err.reshape(-1)[0] = env[value]
            return error
        if op == "free":
            buf = ins["buf"]

            def free(env, driver, err):
                b = env[buf]
                if not b.host:
                    driver.free(b.handle)
            return free
        if op == "if":
            cond, outs = ins["cond"], ins["out"]
            then, else_ = self._compile_block(ins["then"]), self._compile_block(ins["else"])

            def if_(env, driver, err):
                res = (then if env[cond] else else_)(env, driver, err)
                if res is _RETURN:
                    return _RETURN
                for o, v in zip(outs, res or ()):
                    env[o] = v
            return if_
        if op == "for":
            init, lb, ub, step, iv, iters, outs = (ins[k] for k in ("init", "lb", "ub", "step", "iv", "iter", "out"))
            body = self._compile_block(ins["body"])

            def for_(env, driver, err):
                vals = [env[i] for i in init]
                i, end, inc = env[lb], env[ub], env[step]
                while i < end:
                    env[iv] = i
                    for k, v in zip(iters, vals):
                        env[k] = v
                    res = body(env, driver, err)
                    if res is _RETURN:
                        return _RETURN
                    vals = res or []
                    i += inc
                for o, v in zip(outs, vals):
                    env[o] = v
            return for_
        if op == "while":
            init, bargs, aargs, outs = ins["init"], ins["before_args"], ins["after_args"], ins["out"]
            before, after = self._compile_block(ins["before"]), self._compile_block(ins["after"])

            def while_(env, driver, err):
                vals = [env[i] for i in init]
                while True:
                    for k, v in zip(bargs, vals):
                        env[k] = v
                    res = before(env, driver, err)
                    if res is _RETURN:
                        return _RETURN
                    go, vals = res
                    if not go:
                        break
                    for k, v in zip(aargs, vals):
                        env[k] = v
                    res = after(env, driver, err)
                    if res is _RETURN:
                        return _RETURN
                    vals = res or []
                for o, v in zip(outs, vals):
                    env[o] = v
            return while_
        if op == "condition":
            cond, ids = ins["cond"], ins["in"]
            return lambda env, driver, err: (bool(env[cond]), [env[i] for i in ids])
        if op == "switch":
            arg, outs = ins["arg"], ins["out"]
            table = {c: self._compile_block(b) for c, b in zip(ins["cases"], ins["regions"])}
            default = self._compile_block(ins["default"])

            def switch(env, driver, err):
                res = table.get(int(env[arg]), default)(env, driver, err)
                if res is _RETURN:
                    return _RETURN
                for o, v in zip(outs, res or ()):
                    env[o] = v
            return switch
        if op == "yield":
            ids = ins["in"]
            return lambda env, driver, err: [env[i] for i in ids]
        if op == "return":
            return lambda env, driver, err: _RETURN
        raise HostError(f"unknown host instruction {op!r}")

    @staticmethod
    def _shape(static, dyn, env):
        it = iter(env[i] for i in dyn)
        return [next(it) if s is None else s for s in static]

    def _global(self, name, host, driver) -> Buffer:
        data = self._globals[name]
        if host:
            return Buffer(data.copy(), data.shape, data.dtype, True)
        key = (id(driver), name)
        hit = self._uploaded.get(key)
        if hit is None or hit[0] is not driver:
            dt = self._np_dtype(self.program["globals"][name]["dtype"], False)
            dev = np.ascontiguousarray(data.astype(dt))
            b = Buffer(driver.alloc(dev.nbytes), dev.shape, dt, False)
            if dev.nbytes:
                driver.upload(b.handle, dev.reshape(-1).view(np.uint8))
            hit = self._uploaded[key] = (driver, b)
        return hit[1]

    def _byteview(self, block: Buffer, shift: int, ins: dict, env) -> Buffer:
        shape = self._shape(ins["shape"], ins["dyn"], env)
        dt = self._np_dtype(ins["dtype"], block.host)
        view = Buffer(None, shape, dt, block.host)
        if shift != 0 or view.nbytes > block.nbytes:
            raise HostError(f"a view of {view.nbytes} bytes at byte {shift} over a block of {block.nbytes}")
        # Device views share the block's handle (offset 0); host views reinterpret its bytes.
        view.handle = block.handle.reshape(-1)[:view.nbytes].view(dt).reshape(shape) if block.host else block.handle
        return view

    @staticmethod
    def _read(b: Buffer, driver) -> np.ndarray:
        if b.host:
            return b.handle
        if not b.nbytes:
            return np.zeros(b.shape, b.dtype)
        data = driver.download(b.handle, b.nbytes)
        return np.frombuffer(data, np.uint8, count=b.nbytes).view(b.dtype).reshape(b.shape)

    def _copy(self, src: Buffer, dst: Buffer, driver) -> None:
        if src.nbytes != dst.nbytes:
            raise HostError(f"memref.copy between buffers of {src.nbytes} and {dst.nbytes} bytes")
        if not src.nbytes:
            return
        if not src.host and not dst.host and src.handle is dst.handle:
            return  # a buffer onto itself (views start at byte 0): a branch's result copied where it is
        if src.host and dst.host:
            dst.handle[...] = src.handle.reshape(dst.shape)
        elif dst.host:
            dst.handle[...] = self._read(src, driver).reshape(dst.shape)
        elif src.host:
            driver.upload(dst.handle, np.ascontiguousarray(src.handle).reshape(-1).view(np.uint8))
        else:
            driver.copy(src.handle, dst.handle, src.nbytes)

    @staticmethod
    def _launch(ins, env, driver) -> None:
        gx, gy, gz = ins["grid"]
        grid = (int(env[gx]), int(env[gy]), int(env[gz]))
        bx, by, bz = ins["block"]
        block = (int(env[bx]), int(env[by]), int(env[bz]))
        if min(grid) <= 0 or min(block) <= 0:
            return  # an empty iteration space
        shared = 0 if ins["shared"] is None else int(env[ins["shared"]])
        args = [(abi, env[i]) for abi, i in zip(ins["abi"], ins["args"])]
        for abi, v in args:
            if abi["kind"] in ("buffer", "memref") and (type(v) is not Buffer or v.host):
                raise HostError(f"kernel @{ins['module']}::@{ins['kernel']} got a host value for a buffer")
        limit = getattr(driver, "loop_limit", None)
        if limit is not None and "loops" in ins:
            n = loop_budget.iterations(ins["loops"], [v for _, v in args], grid, block)
            if n > limit:
                raise ValueError(
                    f"kernel @{ins['module']}::@{ins['kernel']} may run "
                    + ("an unbounded number of" if n == float("inf") else f"{n}")
                    + f" loop iterations in one invocation for this call's shapes; {driver.loop_limit_why} "
                    f"stops every loop of an invocation after {limit} (the result would be wrong)")
        driver.launch(ins["module"], ins["kernel"], grid, block, shared, args)
