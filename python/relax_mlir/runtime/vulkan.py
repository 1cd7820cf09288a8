"""Vulkan runtime: run a module lowered by backend/spirv.py with wgpu (lavapipe on CPU-only hosts).

`compile_vulkan(module)` takes a module after `relax-to-upstream` (a `relax_mlir.Module` or its
`builtin.module` Operation), lowers it with the SPIR-V backend, extracts the host side of each
entry as a host program (runtime/hostprog.py) and returns an `Executable`: `exe(*arrays)` checks
the arguments against the relax signature (runtime/executable.py), binds the symbols, allocates
the outputs, and runs the host program with `WgpuDriver`. An exported artifact
(`exe.export(path)`, `relax_mlir.runtime.load(path)`) runs the same host program with the same
driver, without MLIR.

`WgpuDriver` dispatches each kernel with the grid the host program computed: kernel arguments bind
in order to descriptor set 0, bindings 0..n-1; a buffer is bound as is, a scalar (index as i32, or
an f32) becomes its own small storage buffer. Commands are batched and submitted before a host
read or write. Importing this module needs numpy only (wgpu on first use, MLIR only to compile).
"""
from __future__ import annotations

import json
import struct
import threading

import numpy as np

__all__ = ["VulkanUnavailable", "WgpuDriver", "available", "compile_vulkan", "spirv_binaries"]


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
            # f16 and i64 kernels (backend/spirv.py declares Float16 / Int64 where used)
            wanted = [f for f in ("shader-f16", "shader-int64") if f in adapter.features]
            _device = adapter.request_device_sync(required_features=wanted)
        except Exception as e:
            raise VulkanUnavailable(f"cannot create a device: {e}") from None
        return _device


def available() -> bool:
    try:
        _get_device()
        return True
    except VulkanUnavailable:
        return False


# --------------------------------------------------------------------------------------------
# the driver (numpy + wgpu)
# --------------------------------------------------------------------------------------------


def _round4(n: int) -> int:
    return max(4, (n + 3) // 4 * 4)


class WgpuDriver:
    """The host-program driver for SPIR-V kernels on a wgpu device; `binaries` maps each
    gpu.module name to its SPIR-V."""

    def __init__(self, binaries: dict[str, bytes]):
        import wgpu

        self.wgpu = wgpu
        self.device = _get_device()
        self.binaries = dict(binaries)
        self._shaders = {}
        self._pipelines = {}
        self.pending = []
        self._usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST

    def pipeline(self, module: str, kernel: str):
        key = (module, kernel)
        pipe = self._pipelines.get(key)
        if pipe is None:
            if module not in self.binaries:
                raise RuntimeError(f"no SPIR-V binary for gpu.module @{module}")
            shader = self._shaders.get(module)
            if shader is None:
                shader = self._shaders[module] = self.device.create_shader_module(code=self.binaries[module])
            pipe = self._pipelines[key] = self.device.create_compute_pipeline(
                layout="auto", compute={"module": shader, "entry_point": kernel})
        return pipe

    def _buffer_with(self, data: bytes):
        if len(data) % 4:
            data = bytes(data) + b"\0" * (4 - len(data) % 4)
        return self.device.create_buffer_with_data(data=data, usage=self._usage)

    # the protocol of runtime/hostprog.py
    def alloc(self, nbytes: int):
        return self.device.create_buffer(size=_round4(nbytes), usage=self._usage)

    def upload(self, handle, data: np.ndarray) -> None:
        self.sync()  # queue writes are ordered against submitted work only
        raw = data.tobytes()
        if len(raw) % 4:
            raw += b"\0" * (4 - len(raw) % 4)
        self.device.queue.write_buffer(handle, 0, raw)

    def download(self, handle, nbytes: int):
        self.sync()
        return bytes(self.device.queue.read_buffer(handle, 0, _round4(nbytes)))[:nbytes]

    def copy(self, src, dst, nbytes: int) -> None:
        enc = self.device.create_command_encoder()
        enc.copy_buffer_to_buffer(src, 0, dst, 0, _round4(nbytes))
        self.pending.append(enc.finish())

    def launch(self, module: str, kernel: str, grid, block, shared: int, args) -> None:
        pipe = self.pipeline(module, kernel)
        entries = []
        for i, (abi, v) in enumerate(args):
            if abi["kind"] == "buffer":
                buf, size = v.handle, _round4(v.nbytes)
            else:
                fmt = abi["pack"]
                data = struct.pack(fmt, float(v) if fmt in ("<f", "<e") else int(v))
                buf, size = self._buffer_with(data), _round4(len(data))
            entries.append({"binding": i, "resource": {"buffer": buf, "offset": 0, "size": size}})
        bg = self.device.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=entries)
        enc = self.device.create_command_encoder()
        p = enc.begin_compute_pass()
        p.set_pipeline(pipe)
        p.set_bind_group(0, bg)
        p.dispatch_workgroups(int(grid[0]), int(grid[1]), int(grid[2]))
        p.end()
        self.pending.append(enc.finish())

    def sync(self) -> None:
        if self.pending:
            self.device.queue.submit(self.pending)
            self.pending = []

    def free(self, handle) -> None:
        pass  # released when the last reference goes (a pending command may still use it)


# --------------------------------------------------------------------------------------------
# compiling (needs MLIR)
# --------------------------------------------------------------------------------------------


def _module_op(module):
    if hasattr(module, "op") and hasattr(module, "context"):
        return module.op, module.context
    op = module.operation if hasattr(module, "operation") else module
    return op, op.context


def _lower(module):
    """Lower in place; returns (op, ctx, host program, {gpu.module name: SPIR-V})."""
    from relax_mlir.backend import spirv
    from relax_mlir.runtime.hostprog import extract

    op, ctx = _module_op(module)
    with ctx:
        spirv.lower(op, spirv.SPIRVOptions(), until="to-spirv")
        program = extract(op, "vulkan")
        spirv.stage_serialize(op, spirv.SPIRVOptions())
        bins = spirv.spirv_binaries(op)
    return op, ctx, program, bins


def spirv_binaries(module) -> dict[str, bytes]:
    """Lower a module after relax-to-upstream (in place) and return {kernel module name: SPIR-V}."""
    return _lower(module)[3]


def compile_vulkan(module):
    """A module after relax-to-upstream -> an Executable running on Vulkan through wgpu.

    Lowering needs no adapter; calling raises VulkanUnavailable when there is none. Raises
    LoweringError when the lowering fails."""
    from relax_mlir.backend.cpu_runtime import entry_signatures
    from relax_mlir.runtime.loader import gpu_executable

    op, ctx = _module_op(module)
    with ctx:
        if not entry_signatures(op):
            raise ValueError("the module has no public graph function to call")
    _, _, program, bins = _lower(module)
    with ctx:
        sigs = entry_signatures(op)  # after mapping: workspace blocks no kernel uses are dropped
    program = json.loads(json.dumps(program))  # exactly what an artifact holds
    return gpu_executable("vulkan", sigs, program, {"spirv": bins}, lambda: WgpuDriver(bins))
