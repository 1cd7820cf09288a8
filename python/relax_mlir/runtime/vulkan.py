"""Vulkan runtime: run a module lowered by backend/spirv.py with wgpu (lavapipe on CPU-only hosts).

`compile_vulkan(module)` takes a module after `relax-to-upstream` (a `relax_mlir.Module` or its
`builtin.module` Operation), lowers it with the SPIR-V backend and returns an `Executable`:
`exe(*arrays)` checks the arguments against the relax signature (runtime/executable.py), binds
the symbols, allocates the outputs, and calls the host driver below.

The host driver interprets what the SPIR-V lowering leaves on the host side of each entry:
index arithmetic (`arith`), `memref.dim`, `memref.alloc` (a fresh storage buffer),
`memref.collapse_shape/expand_shape` (the same buffer), `memref.copy`, `scf.if`, and
`gpu.launch_func`, which dispatches one compiled SPIR-V kernel with the grid computed from the
dims. Kernel arguments bind in order to descriptor set 0, bindings 0..n-1: a buffer is bound as is;
a scalar (index as i32, or a float/int) becomes its own small storage buffer. The error slot stays
on the host.
"""
from __future__ import annotations

import functools
import struct
import threading

import numpy as np
from mlir import ir

__all__ = ["VulkanUnavailable", "available", "compile_vulkan", "spirv_binaries"]


class VulkanUnavailable(RuntimeError):
    """wgpu or a Vulkan adapter (lavapipe, a GPU) is not available."""


_lock = threading.Lock()
_device = None


def _get_device():
    global _device
    with _lock:
        if _device is not None:
            return _device
        try:
            import wgpu
        except Exception as e:  # ImportError, or a missing native library
            raise VulkanUnavailable(f"wgpu is not importable: {e}") from None
        try:
            adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except Exception as e:
            raise VulkanUnavailable(f"no Vulkan adapter: {e}") from None
        if adapter is None:
            raise VulkanUnavailable("no Vulkan adapter")
        try:
            _device = adapter.request_device_sync()
        except Exception as e:
            raise VulkanUnavailable(f"cannot create a device: {e}") from None
        return _device


def available() -> bool:
    try:
        _get_device()
        return True
    except VulkanUnavailable:
        return False


def _module_op(module):
    if hasattr(module, "op") and hasattr(module, "context"):
        return module.op, module.context
    op = module.operation if hasattr(module, "operation") else module
    return op, op.context


def _lower(module):
    from relax_mlir.backend import spirv

    op, ctx = _module_op(module)
    with ctx:
        spirv.lower(op, spirv.SPIRVOptions(), until="to-spirv")
        abis = spirv.kernel_abis(op)
        spirv.stage_serialize(op, spirv.SPIRVOptions())
        bins = spirv.spirv_binaries(op)
    return op, ctx, abis, bins


def spirv_binaries(module) -> dict[str, bytes]:
    """Lower a module after relax-to-upstream (in place) and return {kernel module name: SPIR-V}."""
    _, _, _, bins = _lower(module)
    return bins


# --------------------------------------------------------------------------------------------
# host driver
# --------------------------------------------------------------------------------------------

_NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64, "i8": np.int8,
       "i16": np.int16, "f64": np.float64, "i1": np.bool_}


class _Buf:
    """A storage buffer (or a view of one: collapse/expand keep the buffer)."""

    def __init__(self, gpu, shape, dtype, host=None):
        self.gpu = gpu  # wgpu buffer, or None for host-only (the error slot)
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.host = host

    @property
    def nbytes(self):
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


class HostError(RuntimeError):
    pass


def _elem_of(t: ir.Type):
    s = str(t)
    if s == "index":
        return np.int32
    if s in _NP:
        return _NP[s]
    raise HostError(f"unsupported element type {s}")


class _Program:
    def __init__(self, op, abis, bins):
        import wgpu

        self.wgpu = wgpu
        self.device = _get_device()
        self.op = op
        self.abis = abis
        self.pipelines = {}
        for (mname, kname), abi in abis.items():
            if mname not in bins:
                raise HostError(f"no SPIR-V binary for gpu.module @{mname}")
            shader = self.device.create_shader_module(code=bins[mname])
            pipe = self.device.create_compute_pipeline(layout="auto",
                                                       compute={"module": shader, "entry_point": kname})
            self.pipelines[(mname, kname)] = pipe
        self.funcs = {}
        for f in op.regions[0].blocks[0].operations:
            f = f.operation
            if f.name == "func.func" and len(f.regions[0].blocks):
                self.funcs[ir.StringAttr(f.attributes["sym_name"]).value] = f

    # buffers
    def new_buffer(self, nbytes: int, data: bytes | None = None):
        wgpu = self.wgpu
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        size = max(4, (nbytes + 3) // 4 * 4)
        if data is not None and len(data):
            if len(data) < size:
                data = bytes(data) + b"\0" * (size - len(data))
            return self.device.create_buffer_with_data(data=data, usage=usage)
        return self.device.create_buffer(size=size, usage=usage)

    def run(self, name: str, arrays):
        f = self.funcs[name]
        block = f.regions[0].blocks[0]
        env = {}
        args = list(block.arguments)
        for i, (a, arr) in enumerate(zip(args, arrays)):
            if i == len(args) - 1:
                env[a] = _Buf(None, arr.shape, arr.dtype, host=arr)
                continue
            env[a] = _Buf(self.new_buffer(arr.nbytes, arr.tobytes()), arr.shape, arr.dtype)
        self.pending = []
        self.block(block, env)
        self.flush()
        return env

    def flush(self):
        if self.pending:
            self.device.queue.submit(self.pending)
            self.pending = []

    def read(self, buf: _Buf) -> np.ndarray:
        self.flush()
        if buf.gpu is None:
            return buf.host
        n = buf.nbytes
        if n == 0:
            return np.zeros(buf.shape, buf.dtype)
        data = self.device.queue.read_buffer(buf.gpu, 0, (n + 3) // 4 * 4)
        return np.frombuffer(bytes(data)[:n], dtype=buf.dtype).reshape(buf.shape)

    # interpretation
    def block(self, block, env):
        for o in block.operations:
            o = o.operation
            r = self.op_(o, env)
            if r is not None:
                return r
        return None

    def op_(self, o, env):
        n = o.name
        V = lambda v: env[v]  # noqa: E731
        if n == "arith.constant":
            a = o.attributes["value"]
            if isinstance(a, ir.IntegerAttr):
                env[o.results[0]] = ir.IntegerAttr(a).value
            elif isinstance(a, ir.FloatAttr):
                env[o.results[0]] = ir.FloatAttr(a).value
            else:
                raise HostError(f"unsupported constant {a}")
        elif n in _INT_BIN:
            env[o.results[0]] = _INT_BIN[n](V(o.operands[0]), V(o.operands[1]))
        elif n == "arith.cmpi":
            pred = ir.IntegerAttr(o.attributes["predicate"]).value
            env[o.results[0]] = _CMPI[pred](V(o.operands[0]), V(o.operands[1]))
        elif n == "arith.select":
            env[o.results[0]] = V(o.operands[1]) if V(o.operands[0]) else V(o.operands[2])
        elif n in ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci"):
            env[o.results[0]] = int(V(o.operands[0]))
        elif n == "memref.dim":
            env[o.results[0]] = V(o.operands[0]).shape[V(o.operands[1])]
        elif n == "memref.alloc":
            t = ir.MemRefType(o.results[0].type)
            dyn = iter(V(x) for x in o.operands)
            shape = [next(dyn) if t.is_dynamic_dim(d) else t.shape[d] for d in range(t.rank)]
            dt = _elem_of(t.element_type)
            b = _Buf(None, shape, dt)
            b.gpu = self.new_buffer(b.nbytes)
            env[o.results[0]] = b
        elif n in ("memref.dealloc",):
            pass
        elif n in ("memref.collapse_shape", "memref.expand_shape", "memref.cast"):
            src = V(o.operands[0])
            t = ir.MemRefType(o.results[0].type)
            total = int(np.prod(src.shape, dtype=np.int64))
            shape = [t.shape[d] if not t.is_dynamic_dim(d) else -1 for d in range(t.rank)]
            if -1 in shape:
                known = int(np.prod([s for s in shape if s != -1], dtype=np.int64)) or 1
                if shape.count(-1) == 1:
                    shape[shape.index(-1)] = total // known if known else 0
                else:
                    dyn = [V(x) for x in list(o.operands)[1:]]
                    it = iter(dyn)
                    shape = [next(it) if s == -1 else s for s in shape]
            env[o.results[0]] = _Buf(src.gpu, shape, src.dtype, host=src.host)
        elif n == "memref.copy":
            src, dst = V(o.operands[0]), V(o.operands[1])
            if src.nbytes:
                enc = self.device.create_command_encoder()
                enc.copy_buffer_to_buffer(src.gpu, 0, dst.gpu, 0, (src.nbytes + 3) // 4 * 4)
                self.pending.append(enc.finish())
        elif n == "memref.store":
            dst = V(o.operands[1])
            if dst.gpu is not None:
                raise HostError("a host store into a device buffer")
            idx = tuple(V(x) for x in list(o.operands)[2:])
            dst.host[idx] = V(o.operands[0])
        elif n == "memref.load":
            src = V(o.operands[0])
            idx = tuple(V(x) for x in list(o.operands)[1:])
            env[o.results[0]] = self.read(src)[idx].item()
        elif n == "scf.if":
            c = V(o.operands[0])
            region = o.regions[0] if c else o.regions[1]
            res = None
            if len(region.blocks):
                res = self.block(region.blocks[0], env)
            if len(o.results):
                if res is None:
                    raise HostError("scf.if without yield")
                for r, v in zip(o.results, res):
                    env[r] = v
        elif n == "scf.yield":
            return [V(x) for x in o.operands]
        elif n in ("func.return", "return"):
            return []
        elif n == "gpu.launch_func":
            self.launch(o, env)
        else:
            raise HostError(f"the Vulkan host driver cannot run '{n}'")
        return None

    def launch(self, o, env):
        kernel = o.attributes["kernel"]
        text = str(kernel)  # @mod::@name
        mname, kname = [p.strip().lstrip("@") for p in text.split("::")]
        seg = list(ir.DenseI32ArrayAttr(o.attributes["operandSegmentSizes"]))
        ops = list(o.operands)
        # segments: asyncDependencies, gridSize xyz, blockSize xyz, clusterSize?, dynamicSharedMemorySize?, kernelOperands, asyncObject?
        grid = [env[v] for v in ops[seg[0]:seg[0] + 3]]
        kargs = ops[len(ops) - seg[-2] - seg[-1]: len(ops) - seg[-1]]
        if any(g <= 0 for g in grid):
            return
        pipe = self.pipelines[(mname, kname)]
        entries = []
        for i, a in enumerate(kargs):
            v = env[a]
            if isinstance(v, _Buf):
                buf = v.gpu
                size = max(4, (v.nbytes + 3) // 4 * 4)
            else:
                t = str(a.type)
                if t == "index" or t.startswith("i"):
                    data = struct.pack("<i", int(v))
                elif t == "f32":
                    data = struct.pack("<f", float(v))
                else:
                    raise HostError(f"unsupported scalar kernel argument of type {t}")
                buf = self.new_buffer(4, data)
                size = 4
            entries.append({"binding": i, "resource": {"buffer": buf, "offset": 0, "size": size}})
        bg = self.device.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=entries)
        enc = self.device.create_command_encoder()
        p = enc.begin_compute_pass()
        p.set_pipeline(pipe)
        p.set_bind_group(0, bg)
        p.dispatch_workgroups(int(grid[0]), int(grid[1]), int(grid[2]))
        p.end()
        self.pending.append(enc.finish())


def _divsi(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _remsi(a, b):
    return a - b * _divsi(a, b)


def _ceildivsi(a, b):
    return -((-a) // b)


_INT_BIN = {
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b, "arith.muli": lambda a, b: a * b,
    "arith.divsi": _divsi, "arith.divui": lambda a, b: a // b, "arith.remsi": _remsi,
    "arith.remui": lambda a, b: a % b, "arith.ceildivsi": _ceildivsi, "arith.ceildivui": lambda a, b: -((-a) // b),
    "arith.floordivsi": lambda a, b: a // b, "arith.maxsi": max, "arith.minsi": min, "arith.maxui": max,
    "arith.minui": min, "arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b,
}
_CMPI = [lambda a, b: a == b, lambda a, b: a != b, lambda a, b: a < b, lambda a, b: a <= b,
         lambda a, b: a > b, lambda a, b: a >= b, lambda a, b: a < b, lambda a, b: a <= b,
         lambda a, b: a > b, lambda a, b: a >= b]


def compile_vulkan(module):
    """A module after relax-to-upstream -> an Executable running on Vulkan through wgpu.

    Raises VulkanUnavailable when no adapter exists, LoweringError when the lowering fails."""
    from relax_mlir.backend.cpu_runtime import entry_signatures
    from relax_mlir.runtime.executable import Executable, Function

    op, ctx = _module_op(module)
    with ctx:
        sigs = entry_signatures(op)
    if not sigs:
        raise ValueError("the module has no public graph function to call")
    _get_device()
    op, ctx, abis, bins = _lower(module)
    with ctx:
        prog = _Program(op, abis, bins)
    lock = threading.Lock()

    def invoke(name, n_in, *arrays):
        with lock, ctx:
            env = prog.run(name, arrays)
            f = prog.funcs[name]
            args = list(f.regions[0].blocks[0].arguments)
            for a, arr in list(zip(args, arrays))[n_in:-1]:
                arr[...] = prog.read(env[a]).reshape(arr.shape)

    funcs = {s.name: Function(s, functools.partial(invoke, s.name, len(s.params))) for s in sigs}
    main = "main" if "main" in funcs else sigs[0].name
    return Executable(funcs, main, keepalive=(module, prog), artifacts={"spirv": bins})
