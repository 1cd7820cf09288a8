"""WebGPU runtime in Python: the WGSL kernels of target="webgpu" (backend/wgsl.py) on wgpu-py.

The same host program as the Vulkan artifacts (runtime/hostprog.py) runs with `WebGPUDriver`:
a launch binds its buffer arguments, in order, to bindings 0..B-1 and packs its scalar
arguments, then the logical grid, into ONE uniform buffer at binding B (backend/wgsl.py
documents the layout); grids over 65535 workgroups a dimension are folded over y and z (the
kernel recomputes its logical workgroup id). The device is created with WebGPU's default limits,
raised to what the kernels need (`required_limits`, recorded in the artifact), and refused with
`WebGPUUnavailable` naming the limit when the adapter cannot give it: the same contract as the
browser runtime (runtime/web/relax_runtime.js), so that a test here catches a kernel the browser
would refuse for its limits.

Index arithmetic is 32-bit in the kernels: each launch refuses (ValueError) a scalar index
argument outside [-2^31, 2^31), a buffer of 2^31 elements or more, or a grid of 2^32 workgroups.
"""
from __future__ import annotations

import struct
import threading

import numpy as np

from relax_mlir.runtime.vulkan import VulkanUnavailable, WgpuDriver, _round4, loop_limit, shield_drivers

__all__ = ["WebGPUDriver", "WebGPUUnavailable", "fold_grid", "pack_params"]

MAX_DIM = 65535


class WebGPUUnavailable(VulkanUnavailable):
    """wgpu, an adapter, or the device limits the kernels need are not available."""


_lock = threading.Lock()
_devices: dict = {}


def _dash(name: str) -> str:
    return "".join("-" + c.lower() if c.isupper() else c for c in name)


def _get_device(limits: dict[str, int]):
    key = tuple(sorted(limits.items()))
    with _lock:
        if key in _devices:
            return _devices[key]
        try:
            import wgpu
        except (ImportError, OSError) as e:  # not installed, or its native library missing
            raise WebGPUUnavailable(f"wgpu is not importable: {e}") from None
        # what wgpu raises when no driver or device is there (anything else is a bug, not caught)
        unavailable = (RuntimeError, OSError, wgpu.GPUError)
        shield_drivers()
        try:
            adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except unavailable as e:
            raise WebGPUUnavailable(f"no WebGPU adapter: {e}") from None
        if adapter is None:
            raise WebGPUUnavailable("no WebGPU adapter")
        have = adapter.limits
        req = {}
        for k, v in limits.items():
            d = _dash(k)
            if d in have and have[d] < v and not k.startswith("min"):
                raise WebGPUUnavailable(f"the kernels need {k} = {v}, the adapter gives {have[d]}")
            req[d] = v
        try:
            dev = adapter.request_device_sync(required_limits=req)
        except unavailable as e:
            raise WebGPUUnavailable(f"cannot create a device with limits {limits}: {e}") from None
        _devices[key] = dev
        return dev


def fold_grid(grid) -> tuple[int, int, int]:
    """The workgroups to dispatch for the logical `grid`: the grid itself when each dim is at most
    65535, else its X*Y*Z workgroups folded over x, y, z (the kernel skips those past X*Y*Z)."""
    gx, gy, gz = (int(g) for g in grid)
    total = gx * gy * gz
    if total >= 1 << 32 or max(gx, gy, gz) >= 1 << 31:
        raise ValueError(f"a grid of {gx}x{gy}x{gz} workgroups is too large for WebGPU (2^32 or more, or a "
                         f"dim of 2^31: kernels read the grid as i32)")
    if max(gx, gy, gz) <= MAX_DIM:
        return gx, gy, gz
    dx = min(total, MAX_DIM)
    dy = min(-(-total // dx), MAX_DIM)
    dz = -(-total // (dx * dy))
    if dz > MAX_DIM:
        raise ValueError(f"a grid of {total} workgroups does not fold into 65535^3")
    return dx, dy, dz


_FIELD_PACK = {"i32": "<i", "u32": "<I", "f32": "<f"}


def pack_params(fields: list[str], scalars: list, grid) -> bytes:
    """The uniform buffer of one launch: `scalars` (as the kernel's `uniform_fields` types), then
    the logical grid; padded to 16 bytes."""
    vals = list(scalars) + [int(g) for g in grid]
    if len(vals) != len(fields):
        raise RuntimeError(f"a launch has {len(vals)} uniform values for {len(fields)} fields")
    out = bytearray()
    for t, v in zip(fields, vals):
        if t == "f32":
            out += struct.pack("<f", float(v))
            continue
        v = int(v)
        lo, hi = (0, 1 << 32) if t == "u32" else (-(1 << 31), 1 << 31)
        if not lo <= v < hi:
            raise ValueError(f"a kernel index argument {v} does not fit in 32 bits (WebGPU kernels index "
                             f"with i32: sizes must stay below 2^31)")
        out += struct.pack(_FIELD_PACK[t], v)
    out += b"\0" * (-len(out) % 16)
    return bytes(out)


class WebGPUDriver(WgpuDriver):
    """The host-program driver for WGSL kernels on a wgpu device: Vulkan's wgpu driver (buffers,
    copies, submission) with WGSL shaders, the device limits the kernels need, and the launch of
    runtime/hostprog.py's protocol that packs every scalar and the grid into one uniform buffer.
    `kernels` is the artifact's {"limits": {...}, "kernels": {module: KernelInfo.as_json()}};
    `wgsl` maps module -> source."""

    unavailable = WebGPUUnavailable

    def __init__(self, wgsl: dict[str, str], kernels: dict):
        import wgpu

        self.wgpu = wgpu
        self.limits = dict(kernels["limits"])
        self.device = _get_device(self.limits)
        self.binaries = dict(wgsl)  # create_shader_module takes WGSL source as it takes SPIR-V
        self.info = kernels["kernels"]
        self._shaders = {}
        self._pipelines = {}
        self.pending = []
        self._usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self._max_binding = int(self.limits.get("maxStorageBufferBindingSize", 1 << 27))
        self.loop_limit, self.loop_limit_why = loop_limit(self.device)  # WGSL on lavapipe: its limiter too

    def storage_bindings(self, launch: dict) -> int:
        # scalars travel in the launch's uniform buffer
        return sum(1 for a in launch.get("abi", []) if a.get("kind") == "buffer")

    def alloc(self, nbytes: int):
        if nbytes > self._max_binding:
            raise ValueError(f"a device buffer of {nbytes} bytes is over WebGPU's storage binding limit "
                             f"({self._max_binding} bytes)")
        return super().alloc(nbytes)

    def launch(self, module: str, kernel: str, grid, block, shared: int, args) -> None:
        info = self.info[module]
        if tuple(int(b) for b in block) != tuple(info["workgroup_size"]):
            raise RuntimeError(f"@{module} launched with workgroup {tuple(block)}, compiled for "
                               f"{tuple(info['workgroup_size'])}")
        pipe = self.pipeline(module, kernel)
        entries, scalars = [], []
        for abi, v in args:
            if abi["kind"] == "buffer":
                if v.size >= 1 << 31:
                    raise ValueError(f"a buffer of {v.size} elements is too large for WebGPU kernels "
                                     f"(32-bit indices: below 2^31)")
                entries.append({"binding": len(entries),
                                "resource": {"buffer": v.handle, "offset": 0, "size": _round4(v.nbytes)}})
            else:
                scalars.append(v)
        params = pack_params(info["uniform_fields"], scalars, grid)
        ubuf = self.device.create_buffer_with_data(data=params, usage=self.wgpu.BufferUsage.UNIFORM)
        entries.append({"binding": len(entries), "resource": {"buffer": ubuf, "offset": 0, "size": len(params)}})
        dx, dy, dz = fold_grid(grid)
        bg = self.device.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=entries)
        enc = self.device.create_command_encoder()
        p = enc.begin_compute_pass()
        p.set_pipeline(pipe)
        p.set_bind_group(0, bg)
        p.dispatch_workgroups(dx, dy, dz)
        p.end()
        self.pending.append(enc.finish())
