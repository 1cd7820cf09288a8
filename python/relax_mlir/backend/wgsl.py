"""WGSL (WebGPU) kernels from the GPU kernels of backend/spirv.py, emitted in-tree.

The module is lowered by the SPIR-V backend up to its `flatten` stage (`gpu.func` kernels on 1-D
buffers, host-computed dims, workgroup-memory `memref.alloc` and `gpu.barrier` in the
cooperative kernels); `emit_module(op)` then walks each kernel through the Python bindings and
writes one WGSL module per `gpu.module`. What WebGPU needs is right by construction:

* Bindings. Buffer arguments bind, in argument order, to `@group(0) @binding(0..B-1)` as
  `var<storage, read_write> array<T>` (all read_write: one buffer bound twice to a dispatch is
  then a single 'storage' usage, which WebGPU allows). Every scalar argument, and the logical
  grid, go into ONE uniform struct `Params` at `@binding(B)`: fields `a<i>` (argument i), then
  `_gx, _gy, _gz` (u32). A scalar of type index / i8 / i16 / i1 is an `i32` field (bool as
  0 / 1), f32 an `f32` field; the field order is the argument order, so the host packs them from
  the host program's launch `abi` alone (runtime/webgpu.py, runtime/web/relax_runtime.js).
* Index width. `index` is `i32` in the kernels and in device index buffers (as on Vulkan). The
  host refuses, at each launch, a scalar index argument outside [-2^31, 2^31), a buffer of 2^31
  elements or more, and a grid of 2^32 workgroups or more (ValueError), so that no index a kernel
  computes from them overflows: a buffer index is below its buffer's element count.
* Grids. Builtins are entry parameters. The host dispatches the logical grid (X, Y, Z) as is
  when each dim is at most 65535, else folded to (min(X*Y*Z, 65535), ...) over y and z; the
  kernel recomputes its logical workgroup id from the linear id
  `wid.x + nwg.x * (wid.y + nwg.y * wid.z)` and the logical grid in `Params`, and the workgroups
  past X*Y*Z return at once (a uniform return: the barriers that follow stay uniform).
* Uniformity. `workgroupBarrier()` (with `storageBarrier()`: `gpu.barrier` orders global memory
  too) may only run in control flow that WGSL's uniformity analysis proves uniform. The emitter
  runs that analysis itself (values from constants, `Params`, workgroup ids and counts are
  uniform; invocation ids and every memory load are not; so is whatever is computed under a
  non-uniform branch or loop) and refuses a barrier under a non-uniform `scf.if`, `scf.for` or
  `scf.while` with a located error, instead of shipping a kernel that Chrome rejects.
* NaN. WGSL has no `isNan`, and WGSL implementations may assume no NaN: `x != x` was folded to
  false by naga + lavapipe (maximum(1, NaN) gave 1). The NaN test is on the bits
  (`(bitcast<u32>(x) & 0x7fffffff) > 0x7f800000`): `arith.maximumf` / `minimumf` select the NaN
  operand around `max` / `min`, and every ordered / unordered `cmpf` predicate tests NaN
  explicitly before its comparison.
  WGSL has no infinite or NaN literals: backend/spirv.py already passes such constants as kernel
  arguments (they reach the kernel through `Params`); one left in a kernel is refused.
* Types. f32, i32, index (i32), i1 (bool values), i8 / i16 values (held in i32, sign-extended
  after every operation). Buffers of i1 / i8 / i16 keep numpy's layout (1, 1, 2 bytes an element:
  the host program and its workspace sizes are the same as on Vulkan): the kernel reads their
  bytes out of `array<u32>` words and writes them with `atomicAnd` / `atomicOr` on the word (two
  invocations writing two bytes of one word touch disjoint bits). bf16 arrives as i16 buffers and
  f32 arithmetic (backend/spirv.py emulates it). Refused with a located error: f16, f64 and i64
  values and buffers.

Limits: `KernelInfo` records each kernel's storage buffers, workgroup memory and invocations;
`required_limits` is what a WebGPU device must be given for all of them (the runtime requests it
from the adapter and fails with a clear error when the adapter cannot).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
from mlir import ir

from relax_mlir.backend.common import LoweringError

__all__ = ["KernelInfo", "DEFAULT_LIMITS", "emit_module", "emit_kernel", "required_limits"]

# WebGPU's default device limits (what a device gets unless it requests more).
DEFAULT_LIMITS = {
    "maxStorageBuffersPerShaderStage": 8,
    "maxComputeWorkgroupStorageSize": 16384,
    "maxComputeInvocationsPerWorkgroup": 256,
    "maxComputeWorkgroupSizeX": 256,
    "maxComputeWorkgroupSizeY": 256,
    "maxComputeWorkgroupSizeZ": 64,
    "maxComputeWorkgroupsPerDimension": 65535,
    "maxStorageBufferBindingSize": 134217728,
}


@dataclass
class KernelInfo:
    """One WGSL module: its entry point and what it needs from the device."""

    module: str
    kernel: str
    wgsl: str
    workgroup_size: tuple[int, int, int]
    storage_buffers: int
    uniform_fields: list[str] = field(default_factory=list)  # WGSL type of each Params field
    workgroup_bytes: int = 0

    def as_json(self) -> dict:
        return {"kernel": self.kernel, "workgroup_size": list(self.workgroup_size),
                "storage_buffers": self.storage_buffers, "uniform_fields": list(self.uniform_fields),
                "workgroup_bytes": self.workgroup_bytes}


def required_limits(kernels: dict[str, KernelInfo]) -> dict[str, int]:
    """The device limits all `kernels` need: WebGPU's defaults, raised where a kernel needs more."""
    need = dict(DEFAULT_LIMITS)
    for k in kernels.values():
        x, y, z = k.workgroup_size
        for key, v in (("maxStorageBuffersPerShaderStage", k.storage_buffers),
                       ("maxComputeWorkgroupStorageSize", k.workgroup_bytes),
                       ("maxComputeInvocationsPerWorkgroup", x * y * z),
                       ("maxComputeWorkgroupSizeX", x), ("maxComputeWorkgroupSizeY", y),
                       ("maxComputeWorkgroupSizeZ", z)):
            need[key] = max(need[key], v)
    return need


def _fail(what: str, loc) -> None:
    raise LoweringError("wgsl", "emit WGSL", f"{what} (at {loc})")


def _int_width(t: ir.Type) -> int | None:
    if isinstance(t, ir.IndexType):
        return 32
    if isinstance(t, ir.IntegerType):
        return ir.IntegerType(t).width
    return None


def _scalar(t: ir.Type, loc) -> str:
    """The WGSL type of an MLIR scalar value."""
    if isinstance(t, ir.IndexType):
        return "i32"
    if isinstance(t, ir.F32Type):
        return "f32"
    if isinstance(t, ir.IntegerType):
        w = ir.IntegerType(t).width
        if w == 1:
            return "bool"
        if w in (8, 16, 32):
            return "i32"
        _fail(f"i{w} values are not supported on WebGPU (WGSL has 32-bit integers only)", loc)
    _fail(f"{t} values are not supported on WebGPU", loc)


def _storage_elem(t: ir.Type, loc) -> str:
    if isinstance(t, (ir.IndexType,)):
        return "i32"
    if isinstance(t, ir.F32Type):
        return "f32"
    if isinstance(t, ir.IntegerType) and ir.IntegerType(t).width == 32:
        return "i32"
    _fail(f"a device buffer of {t} is not supported on WebGPU (WGSL storage holds 32-bit scalars)", loc)


_F32_MAX = float(np.finfo(np.float32).max)


def _f32_literal(v: float, loc) -> str:
    f = np.float32(v)
    if not np.isfinite(f):
        _fail(f"a non-finite f32 constant ({v}) in a kernel: WGSL has no infinite or NaN literals", loc)
    if f == 0:
        return "-0.0f" if np.signbit(f) else "0.0f"
    a = abs(float(f))
    s = (np.format_float_positional(f, unique=True) if 1e-4 <= a < 1e7
         else np.format_float_scientific(f, unique=True))
    if abs(float(s)) > _F32_MAX:  # the shortest digits of +-FLT_MAX round up past it: Tint refuses those
        s = np.format_float_scientific(np.float64(f), unique=True)  # the exact value's (double) digits
    mant, _, exp = s.partition("e")
    if mant.endswith("."):
        mant += "0"
    if "." not in mant:
        mant += ".0"
    return mant + ("e" + exp if exp else "") + "f"


def _i32_literal(v: int, loc) -> str:
    if not -(1 << 31) <= v < (1 << 31):
        _fail(f"the integer constant {v} does not fit in 32 bits", loc)
    if v == -(1 << 31):
        return "(-2147483647i - 1i)"
    return f"{v}i" if v >= 0 else f"({v}i)"


_CMPI = {0: "==", 1: "!=", 2: "<", 3: "<=", 4: ">", 5: ">=", 6: "<", 7: "<=", 8: ">", 9: ">="}
_MATH1 = {"math.exp": "exp", "math.log": "log", "math.sqrt": "sqrt", "math.rsqrt": "inverseSqrt",
          "math.tanh": "tanh", "math.sin": "sin", "math.cos": "cos", "math.tan": "tan", "math.absf": "abs",
          "math.floor": "floor", "math.ceil": "ceil", "math.trunc": "trunc", "math.roundeven": "round",
          "math.exp2": "exp2", "math.log2": "log2", "math.atan": "atan", "math.asin": "asin",
          "math.acos": "acos", "math.sinh": "sinh", "math.cosh": "cosh", "math.absi": "abs",
          "math.ctpop": "countOneBits", "math.ctlz": "countLeadingZeros", "math.cttz": "countTrailingZeros",
          "math.asinh": "asinh", "math.acosh": "acosh", "math.atanh": "atanh"}
_BIN = {"arith.addf": "+", "arith.subf": "-", "arith.mulf": "*", "arith.divf": "/",
        "arith.addi": "+", "arith.subi": "-", "arith.muli": "*", "arith.divsi": "/", "arith.remsi": "%"}
_GPU_IDS = ("gpu.thread_id", "gpu.block_id", "gpu.block_dim", "gpu.grid_dim")


def _isnan(x: str) -> str:
    """A NaN test on the bits: WGSL has no isNan, and `x != x` is folded to false by shader
    compilers that assume no NaN (measured: naga + lavapipe, maximum(1, NaN) gave 1)."""
    return f"((bitcast<u32>({x}) & 0x7fffffffu) > 0x7f800000u)"


def _stores_into(body, buf) -> bool:
    found = []

    def visit(o):
        if o.name == "memref.store" and o.operands[1] == buf:
            found.append(o)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    for op in body.operations:
        op.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
        if found:
            break
    return bool(found)


class _Uniformity:
    """WGSL's uniformity analysis, conservatively, over a kernel's MLIR: which values may differ
    between the invocations of a workgroup; refuses a barrier under non-uniform control flow."""

    def __init__(self, params: set):
        self.nonuni: set = set()
        self.params = params

    def _nu(self, v) -> bool:
        return v in self.nonuni

    def _mark(self, vs) -> bool:
        changed = False
        for v in vs:
            if v not in self.nonuni:
                self.nonuni.add(v)
                changed = True
        return changed

    def block(self, block, uniform_ctl: bool) -> None:
        for o in block.operations:
            self.op(o.operation, uniform_ctl)

    def op(self, o, uniform_ctl: bool) -> None:
        n = o.name
        if n == "gpu.barrier":
            if not uniform_ctl:
                _fail("a gpu.barrier under control flow that differs between the invocations of a workgroup: "
                      "WGSL's workgroupBarrier must be in uniform control flow", o.location)
            return
        if n == "scf.if":
            ctl = uniform_ctl and not self._nu(o.operands[0])
            for r in o.regions:
                for b in r.blocks:
                    self.block(b, ctl)
            res = not ctl
            for r in o.regions:
                for b in r.blocks:
                    y = list(b.operations)[-1].operation
                    res = res or any(self._nu(v) for v in y.operands)
            if res or not uniform_ctl:
                self._mark(o.results)
            return
        if n == "scf.for":
            lb, ub, step = list(o.operands)[:3]
            inits = list(o.operands)[3:]
            body = o.regions[0].blocks[0]
            ctl = uniform_ctl and not any(self._nu(v) for v in (lb, ub, step))
            args = list(body.arguments)
            if not ctl or self._nu(lb) or self._nu(step):
                self._mark(args[:1])
            self._mark([a for a, i in zip(args[1:], inits) if self._nu(i) or not ctl])
            while True:  # iter args: to a fixed point
                self.block(body, ctl)
                y = list(body.operations)[-1].operation
                if not self._mark([a for a, v in zip(args[1:], y.operands) if self._nu(v)]):
                    break
            self._mark([r for r, a in zip(o.results, args[1:]) if self._nu(a) or not ctl])
            return
        if n == "scf.while":
            before, after = o.regions[0].blocks[0], o.regions[1].blocks[0]
            self._mark([a for a, i in zip(before.arguments, o.operands) if self._nu(i) or not uniform_ctl])
            while True:
                self.block(before, uniform_ctl)
                cond = list(before.operations)[-1].operation
                ctl = uniform_ctl and not self._nu(cond.operands[0])
                self._mark([a for a, v in zip(after.arguments, list(cond.operands)[1:]) if self._nu(v) or not ctl])
                self.block(after, ctl)
                y = list(after.operations)[-1].operation
                changed = self._mark([a for a, v in zip(before.arguments, y.operands) if self._nu(v) or not ctl])
                if not ctl:  # a non-uniform exit: the loop is non-uniform from its first test on
                    uniform_ctl = False
                    changed = self._mark(list(before.arguments)) or changed
                if not changed:
                    break
            self._mark([r for r, v in zip(o.results, list(cond.operands)[1:]) if self._nu(v) or not ctl])
            return
        if n in ("scf.yield", "scf.condition", "gpu.return", "memref.store"):
            return
        if n == "gpu.thread_id" or n == "memref.load":
            self._mark(o.results)
            return
        if n in _GPU_IDS or n == "arith.constant" or n == "memref.alloc":
            return
        if not uniform_ctl or any(self._nu(v) for v in o.operands):
            self._mark(o.results)


class _Emitter:
    def __init__(self, module: str, func: ir.Operation):
        self.module = module
        self.func = func
        self.lines: list[str] = []
        self.names: dict = {}
        self.count = 0
        self.globals: list[str] = []
        self.workgroup_bytes = 0
        self.packed: dict[str, tuple[int, bool, bool]] = {}  # buffer -> (bits, stored, bool)

    # names -----------------------------------------------------------------------------------
    def fresh(self, prefix="v") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def name(self, v) -> str:
        try:
            return self.names[v]
        except KeyError:
            raise LoweringError("wgsl", "emit WGSL", f"a kernel value used before its definition: {v}") from None

    def out(self, indent: int, text: str) -> None:
        self.lines.append("  " * indent + text)

    def let(self, indent: int, v, expr: str, loc) -> None:
        t = v.type
        w = _int_width(t)
        if w in (8, 16) and not isinstance(t, ir.IndexType):
            s = 32 - w
            expr = f"(({expr}) << {s}u) >> {s}u"  # i8 / i16 held sign-extended in an i32
        nm = self.fresh()
        self.out(indent, f"let {nm}: {_scalar(t, loc)} = {expr};")
        self.names[v] = nm

    # the kernel --------------------------------------------------------------------------------
    def emit(self) -> KernelInfo:
        f = self.func
        kname = ir.StringAttr(f.attributes["sym_name"]).value
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", kname) or kname.startswith("__"):
            _fail(f"kernel name {kname!r} is not a WGSL identifier", f.location)
        size = (1, 1, 1)
        if "known_block_size" in f.attributes:
            size = tuple(ir.DenseI32ArrayAttr(f.attributes["known_block_size"]))
        self.size = size
        body = f.regions[0].blocks[0]
        bindings, fields, params = [], [], set()
        for i, a in enumerate(body.arguments):
            t = a.type
            if isinstance(t, ir.MemRefType):
                mt = ir.MemRefType(t)
                if mt.rank != 1 or mt.memory_space is not None:
                    _fail(f"kernel argument {i} is not a 1-D global buffer: {t}", f.location)
                nm = f"b{i}"
                w = _int_width(mt.element_type)
                if w in (1, 8, 16) and not isinstance(mt.element_type, ir.IndexType):
                    # bytes (numpy's bool, int8, int16) packed in u32 words; a kernel that stores
                    # into the buffer writes its bytes with atomicAnd / atomicOr on their word
                    stored = _stores_into(body, a)
                    elem = "atomic<u32>" if stored else "u32"
                    self.packed[nm] = (8 if w == 1 else w, stored, w == 1)
                else:
                    elem = _storage_elem(mt.element_type, f.location)
                bindings.append(f"@group(0) @binding({len(bindings)}) var<storage, read_write> {nm}: array<{elem}>;")
                self.names[a] = nm
            else:
                st = _scalar(t, f.location)
                ft = "i32" if st == "bool" else st
                fields.append((f"a{i}", ft))
                self.names[a] = f"(_p.a{i} != 0i)" if st == "bool" else f"_p.a{i}"
                params.add(a)
        fields += [("_gx", "u32"), ("_gy", "u32"), ("_gz", "u32")]
        Uni = _Uniformity(params)
        Uni.block(body, True)
        self.uni = Uni
        self.out(1, "let _lin = _wid.x + _nwg.x * (_wid.y + _nwg.y * _wid.z);")
        self.out(1, "if (_lin >= _p._gx * _p._gy * _p._gz) { return; }")
        self.block(body, 1, top=True)
        head = []
        head.append("struct Params {")
        head += [f"  {n}: {t}," for n, t in fields]
        head.append("}")
        head += bindings
        head.append(f"@group(0) @binding({len(bindings)}) var<uniform> _p: Params;")
        head += self.globals
        head.append("")
        head.append(f"@compute @workgroup_size({size[0]}, {size[1]}, {size[2]})")
        head.append(f"fn {kname}(@builtin(local_invocation_id) _lid: vec3<u32>, "
                    "@builtin(workgroup_id) _wid: vec3<u32>, @builtin(num_workgroups) _nwg: vec3<u32>) {")
        text = "\n".join(head + self.lines + ["}", ""])
        return KernelInfo(self.module, kname, text, size, len(bindings), [t for _, t in fields],
                          self.workgroup_bytes)

    def block(self, block, indent: int, top: bool = False, term=None) -> None:
        for o in block.operations:
            o = o.operation
            n = o.name
            if n in ("scf.yield", "scf.condition"):
                term(o, indent)
            elif n == "gpu.return":
                if not top:
                    self.out(indent, "return;")
            else:
                self.op(o, indent)

    def assign(self, indent: int, targets: list[str], values) -> None:
        """targets[i] = values[i], all at once (the values may read the targets)."""
        srcs = [self.name(v) for v in values]
        if len(targets) > 1:
            tmps = []
            for s, v in zip(srcs, values):
                t = self.fresh("t")
                self.out(indent, f"let {t} = {s};")
                tmps.append(t)
            srcs = tmps
        for t, s in zip(targets, srcs):
            self.out(indent, f"{t} = {s};")

    def op(self, o: ir.Operation, ind: int) -> None:  # noqa: C901 (one case an op)
        n, loc = o.name, o.location
        ops = list(o.operands)
        nm = [self.names.get(v) for v in ops]
        if n == "arith.constant":
            a = o.attributes["value"]
            t = o.results[0].type
            if isinstance(a, ir.FloatAttr) and isinstance(t, ir.F32Type):
                self.names[o.results[0]] = _f32_literal(ir.FloatAttr(a).value, loc)
            elif isinstance(a, ir.BoolAttr):
                self.names[o.results[0]] = "true" if ir.BoolAttr(a).value else "false"
            elif isinstance(a, ir.IntegerAttr) and _int_width(t) == 1:
                self.names[o.results[0]] = "true" if ir.IntegerAttr(a).value & 1 else "false"
            elif isinstance(a, ir.IntegerAttr):
                _scalar(t, loc)
                self.names[o.results[0]] = _i32_literal(ir.IntegerAttr(a).value, loc)
            else:
                _fail(f"unsupported constant {a} in a WebGPU kernel", loc)
            return
        if n in _GPU_IDS:
            dim = str(o.attributes["dimension"]).split("<")[-1].rstrip(">").strip()
            k = "xyz".index(dim[-1])
            if n == "gpu.thread_id":
                e = f"i32(_lid.{dim[-1]})"
            elif n == "gpu.block_dim":
                e = _i32_literal(self.size[k], loc)
            elif n == "gpu.grid_dim":
                e = f"i32(_p._g{dim[-1]})"
            else:
                e = ("i32(_lin % _p._gx)", "i32((_lin / _p._gx) % _p._gy)", "i32(_lin / (_p._gx * _p._gy))")[k]
            self.let(ind, o.results[0], e, loc)
            return
        if n == "gpu.barrier":
            self.out(ind, "storageBarrier();")
            self.out(ind, "workgroupBarrier();")
            return
        if n == "memref.alloc":
            mt = ir.MemRefType(o.results[0].type)
            if "Workgroup" not in str(mt.memory_space) or mt.rank != 1 or not mt.has_static_shape:
                _fail(f"a memref.alloc in a kernel that is not static 1-D workgroup memory: {mt}", loc)
            elem = _scalar(mt.element_type, loc)
            g = self.fresh("wg")
            self.globals.append(f"var<workgroup> {g}: array<{elem}, {mt.shape[0]}>;")
            self.workgroup_bytes += 4 * mt.shape[0]
            self.names[o.results[0]] = g
            return
        if n == "memref.load":
            mt = ir.MemRefType(ops[0].type)
            if mt.rank != 1:
                _fail("a load of a buffer that is not 1-D", loc)
            if nm[0] in self.packed:
                bits, stored, is_bool = self.packed[nm[0]]
                per = 32 // bits
                w, sh = self.fresh("q"), self.fresh("q")
                word = f"{nm[0]}[u32({nm[1]}) / {per}u]"
                self.out(ind, f"let {sh} = (u32({nm[1]}) % {per}u) * {bits}u;")
                self.out(ind, f"let {w} = {'atomicLoad(&' + word + ')' if stored else word};")
                if is_bool:
                    self.let(ind, o.results[0], f"(({w} >> {sh}) & 255u) != 0u", loc)
                else:  # sign-extended from the top of the word
                    self.let(ind, o.results[0], f"bitcast<i32>({w} << ({32 - bits}u - {sh})) >> {32 - bits}u", loc)
                return
            self.let(ind, o.results[0], f"{nm[0]}[{nm[1]}]", loc)
            return
        if n == "memref.store":
            mt = ir.MemRefType(ops[1].type)
            if mt.rank != 1:
                _fail("a store into a buffer that is not 1-D", loc)
            if nm[1] in self.packed:
                bits, _, is_bool = self.packed[nm[1]]
                per = 32 // bits
                mask = (1 << bits) - 1
                sh, wd = self.fresh("q"), self.fresh("q")
                val = f"select(0u, 1u, {nm[0]})" if is_bool else f"(bitcast<u32>({nm[0]}) & {mask}u)"
                self.out(ind, f"let {sh} = (u32({nm[2]}) % {per}u) * {bits}u;")
                self.out(ind, f"let {wd} = u32({nm[2]}) / {per}u;")
                self.out(ind, f"atomicAnd(&{nm[1]}[{wd}], ~({mask}u << {sh}));")
                self.out(ind, f"atomicOr(&{nm[1]}[{wd}], {val} << {sh});")
                return
            self.out(ind, f"{nm[1]}[{nm[2]}] = {nm[0]};")
            return
        if n == "scf.if":
            res = []
            for r in o.results:
                v = self.fresh("r")
                self.out(ind, f"var {v}: {_scalar(r.type, loc)};")
                res.append(v)

            def yld(y, i, res=res):
                self.assign(i, res, list(y.operands))

            self.out(ind, f"if ({nm[0]}) {{")
            self.block(o.regions[0].blocks[0], ind + 1, term=yld)
            if len(o.regions[1].blocks) and len(list(o.regions[1].blocks[0].operations)) > (0 if res else 1):
                self.out(ind, "} else {")
                self.block(o.regions[1].blocks[0], ind + 1, term=yld)
            self.out(ind, "}")
            for r, v in zip(o.results, res):
                self.names[r] = v
            return
        if n == "scf.for":
            body = o.regions[0].blocks[0]
            args = list(body.arguments)
            if not isinstance(args[0].type, ir.IndexType) and _int_width(args[0].type) != 32:
                _fail(f"an scf.for over {args[0].type}", loc)
            iv = self.fresh("i")
            carried = []
            for a, init in zip(args[1:], ops[3:]):
                v = self.fresh("c")
                self.out(ind, f"var {v}: {_scalar(a.type, loc)} = {self.name(init)};")
                carried.append(v)
                self.names[a] = v
            self.names[args[0]] = iv
            self.out(ind, f"for (var {iv}: i32 = {nm[0]}; {iv} < {nm[1]}; {iv} = {iv} + {nm[2]}) {{")
            self.block(body, ind + 1, term=lambda y, i: self.assign(i, carried, list(y.operands)))
            # the last iteration ends here, so that `iv + step` never wraps past 2^31 - 1: the
            # distance to the bound, ub - iv in (0, 2^32), is exact as a u32
            self.out(ind + 1, f"if (u32({nm[2]}) >= u32({nm[1]} - {iv})) {{ break; }}")
            self.out(ind, "}")
            for r, v in zip(o.results, carried):
                self.names[r] = v
            return
        if n == "scf.while":
            before, after = o.regions[0].blocks[0], o.regions[1].blocks[0]
            state = []
            for a, init in zip(before.arguments, ops):
                v = self.fresh("w")
                self.out(ind, f"var {v}: {_scalar(a.type, loc)} = {self.name(init)};")
                state.append(v)
                self.names[a] = v
            res = []
            for r in o.results:
                v = self.fresh("r")
                self.out(ind, f"var {v}: {_scalar(r.type, loc)};")
                res.append(v)

            def cond(c, i):
                vals = list(c.operands)
                self.out(i, f"if (!{self.name(vals[0])}) {{")
                self.assign(i + 1, res, vals[1:])
                self.out(i + 1, "break;")
                self.out(i, "}")
                for a, v in zip(after.arguments, vals[1:]):
                    self.names[a] = self.name(v)

            self.out(ind, "loop {")
            self.block(before, ind + 1, term=cond)
            self.block(after, ind + 1, term=lambda y, i: self.assign(i, state, list(y.operands)))
            self.out(ind, "}")
            for r, v in zip(o.results, res):
                self.names[r] = v
            return
        if len(o.results) != 1:
            _fail(f"unsupported op '{n}' in a WebGPU kernel", loc)
        r = o.results[0]
        self.let(ind, r, self.expr(o, ops, nm, ind), loc)

    def expr(self, o, ops, nm, ind) -> str:  # noqa: C901 (one case an op)
        n, loc = o.name, o.location
        rt = o.results[0].type
        st = _scalar(rt, loc)
        in_t = ops[0].type if ops else rt
        in_w = _int_width(in_t)
        in_bool = in_w == 1
        for v in ops:
            _scalar(v.type, loc)
        if n in _BIN:
            if in_bool:
                _fail(f"'{n}' on i1 values", loc)
            return f"({nm[0]} {_BIN[n]} {nm[1]})"
        if n == "arith.remf":
            # WGSL's f32 % is x - y * trunc(x / y), not fmod: the SPIR-V stage expands f32 remf
            # into the exact integer fmod before this emitter; anything else is refused
            _fail("'arith.remf' (relax.remainder on floats) is not supported on WebGPU yet", loc)
        if n == "arith.negf":
            return f"(-{nm[0]})"
        if n in ("arith.andi", "arith.ori", "arith.xori"):
            if in_bool:
                return f"({nm[0]} {dict(andi='&', ori='|', xori='!=')[n[6:]]} {nm[1]})"
            return f"({nm[0]} {dict(andi='&', ori='|', xori='^')[n[6:]]} {nm[1]})"
        if n in ("arith.maximumf", "arith.minimumf"):
            f = "max" if n == "arith.maximumf" else "min"
            a, b = nm
            return f"select(select({f}({a}, {b}), {b}, {_isnan(b)}), {a}, {_isnan(a)})"
        if n in ("arith.maxnumf", "arith.minnumf"):
            f = "max" if n == "arith.maxnumf" else "min"
            a, b = nm
            return f"select(select({f}({a}, {b}), {a}, {_isnan(b)}), {b}, {_isnan(a)})"
        if n in ("arith.maxsi", "arith.minsi"):
            return f"{n[6:9]}({nm[0]}, {nm[1]})"
        if n in ("arith.maxui", "arith.minui"):
            return f"i32({n[6:9]}(u32({nm[0]}), u32({nm[1]})))"
        if n in ("arith.divui", "arith.remui"):
            return f"i32(u32({nm[0]}) {'/' if n == 'arith.divui' else '%'} u32({nm[1]}))"
        if n in ("arith.floordivsi", "arith.ceildivsi"):
            a, b = nm
            q, r = self.fresh("q"), self.fresh("q")
            self.out(ind, f"let {q} = {a} / {b};")
            self.out(ind, f"let {r} = {a} % {b};")
            if n == "arith.floordivsi":
                return f"select({q}, {q} - 1i, {r} != 0i && (({r} < 0i) != ({b} < 0i)))"
            return f"select({q}, {q} + 1i, {r} != 0i && (({r} < 0i) == ({b} < 0i)))"
        if n == "arith.ceildivui":
            a, b = nm
            return f"i32(u32({a}) / u32({b}) + select(0u, 1u, u32({a}) % u32({b}) != 0u))"
        if n == "arith.shli":
            return f"({nm[0]} << u32({nm[1]}))"
        if n == "arith.shrsi":
            return f"({nm[0]} >> u32({nm[1]}))"
        if n == "arith.shrui":
            return f"i32(u32({nm[0]}) >> u32({nm[1]}))"
        if n == "arith.cmpi":
            p = ir.IntegerAttr(o.attributes["predicate"]).value
            if in_bool:
                if p <= 1:
                    return f"({nm[0]} {_CMPI[p]} {nm[1]})"
                # ordered: i1 true is -1 signed (slt..sge), 1 unsigned (ult..uge)
                t = "-1i" if p < 6 else "1i"
                a, b = (f"select(0i, {t}, {x})" for x in nm)
                return f"({a} {_CMPI[p]} {b})"
            if p >= 6:
                return f"(u32({nm[0]}) {_CMPI[p]} u32({nm[1]}))"
            return f"({nm[0]} {_CMPI[p]} {nm[1]})"
        if n == "arith.cmpf":
            p = ir.IntegerAttr(o.attributes["predicate"]).value
            a, b = nm
            if p in (0, 15):
                return "false" if p == 0 else "true"
            uno = self.fresh("q")
            self.out(ind, f"let {uno} = {_isnan(a)} || {_isnan(b)};")
            rel = {1: "==", 2: ">", 3: ">=", 4: "<", 5: "<=", 6: "!=", 8: "==", 9: ">", 10: ">=", 11: "<",
                   12: "<=", 13: "!="}
            if p == 7:
                return f"!{uno}"
            if p == 14:
                return uno
            if p <= 6:  # ordered: false on NaN
                return f"(!{uno} && ({a} {rel[p]} {b}))"
            return f"({uno} || ({a} {rel[p]} {b}))"  # unordered: true on NaN
        if n == "arith.select":
            return f"select({nm[2]}, {nm[1]}, {nm[0]})"
        if n in ("arith.index_cast", "arith.index_castui"):
            w = _int_width(rt)
            if w == 1 or in_w == 1:
                _fail(f"'{n}' to or from i1", loc)
            return nm[0]  # index, i8, i16, i32: all i32 here (i8 / i16 renormalized by let)
        if n in ("arith.extsi", "arith.extui"):
            if in_bool:
                return f"select(0i, {'-1i' if n == 'arith.extsi' else '1i'}, {nm[0]})"
            if n == "arith.extui" and in_w < 32:
                return f"({nm[0]} & {_i32_literal((1 << in_w) - 1, loc)})"
            return nm[0]
        if n == "arith.trunci":
            if _int_width(rt) == 1:
                return f"(({nm[0]} & 1i) != 0i)"
            return nm[0]  # renormalized by let
        if n == "arith.sitofp":
            return f"f32({nm[0]})" if not in_bool else f"select(0.0f, -1.0f, {nm[0]})"
        if n == "arith.uitofp":
            if in_bool:
                return f"select(0.0f, 1.0f, {nm[0]})"
            return f"f32(u32({nm[0]}))" if in_w == 32 else f"f32({nm[0]} & {_i32_literal((1 << in_w) - 1, loc)})"
        if n == "arith.fptosi":
            if _int_width(rt) == 1:
                _fail("'arith.fptosi' to i1", loc)
            return f"i32({nm[0]})"
        if n == "arith.fptoui":
            if _int_width(rt) == 1:
                _fail("'arith.fptoui' to i1", loc)
            return f"i32(u32({nm[0]}))"
        if n == "arith.bitcast":
            if in_bool:
                return nm[0]
            return f"bitcast<{st}>({nm[0]})"
        if n in _MATH1:
            return f"{_MATH1[n]}({nm[0]})"
        if n == "math.round":  # half away from zero, exactly (x - trunc(x) is exact)
            t = self.fresh("q")
            self.out(ind, f"let {t} = trunc({nm[0]});")
            return f"select({t}, {t} + sign({nm[0]}), abs({nm[0]} - {t}) >= 0.5f)"
        if n == "math.log1p":
            u = self.fresh("q")
            self.out(ind, f"let {u} = 1.0f + {nm[0]};")
            return f"select(log({u}) * ({nm[0]} / ({u} - 1.0f)), {nm[0]}, {u} == 1.0f)"
        if n == "math.expm1":
            u = self.fresh("q")
            self.out(ind, f"let {u} = exp({nm[0]});")
            return (f"select(select(({u} - 1.0f) * ({nm[0]} / log({u})), -1.0f, {u} - 1.0f == -1.0f), "
                    f"{nm[0]}, {u} == 1.0f)")
        if n == "math.log10":
            return f"(log({nm[0]}) * 0.4342944819032518f)"
        if n == "math.atan2":
            return f"atan2({nm[0]}, {nm[1]})"
        if n == "math.fma":
            return f"fma({nm[0]}, {nm[1]}, {nm[2]})"
        if n == "math.isnan":
            return _isnan(nm[0])
        if n == "math.isinf":
            return f"((bitcast<u32>({nm[0]}) & 0x7fffffffu) == 0x7f800000u)"
        if n == "math.isfinite":
            return f"((bitcast<u32>({nm[0]}) & 0x7fffffffu) < 0x7f800000u)"
        _fail(f"unsupported op '{n}' in a WebGPU kernel", loc)


def emit_kernel(module: str, func: ir.Operation) -> KernelInfo:
    """One `gpu.func` kernel (of gpu.module `module`) as a WGSL module."""
    return _Emitter(module, func).emit()


def emit_module(module_op: ir.Operation) -> dict[str, KernelInfo]:
    """After backend/spirv.py's `flatten` stage: {gpu.module name: its kernel as WGSL}."""
    out = {}
    for o in module_op.regions[0].blocks[0].operations:
        o = o.operation
        if o.name != "gpu.module":
            continue
        mname = ir.StringAttr(o.attributes["sym_name"]).value
        funcs = [k.operation for k in o.regions[0].blocks[0].operations if k.operation.name == "gpu.func"]
        if len(funcs) != 1:
            raise LoweringError("wgsl", "emit WGSL", f"gpu.module @{mname} holds {len(funcs)} kernels, expected one")
        out[mname] = emit_kernel(mname, funcs[0])
    return out
