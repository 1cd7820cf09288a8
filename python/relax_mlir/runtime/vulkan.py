"""Vulkan runtime: run a module lowered by backend/spirv.py with wgpu (lavapipe on CPU-only hosts).

`relax_mlir.targets.vulkan.compile_vulkan(module)` takes a module after `relax-to-upstream`, lowers
it with the SPIR-V backend, extracts the host side of each
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

import ctypes
import glob
import json
import os
import struct
import threading

import numpy as np

__all__ = ["VulkanUnavailable", "WgpuDriver", "available", "shield_drivers"]


class VulkanUnavailable(RuntimeError):
    """wgpu or a Vulkan adapter (lavapipe, a GPU) is not available."""


_lock = threading.Lock()
_device = None

# llvm::cl::Option::addArgument(): exported to the global scope only by a library that carries
# its own LLVM and was loaded RTLD_GLOBAL (tensorflow's pywrap).
_FOREIGN_LLVM = "_ZN4llvm2cl6Option11addArgumentEv"
_ICD_DIRS = ("/usr/local/share/vulkan/icd.d", "/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d")


def shield_drivers() -> None:
    """Load the Vulkan drivers RTLD_DEEPBIND before wgpu's loader does, when an LLVM sits in the
    process's global scope: lavapipe (Mesa, linked with its own libLLVM) would otherwise bind to
    that one and crash at its first kernel (SIGSEGV after `import tensorflow`). The loader's later
    dlopen of the same file returns this handle, already relocated against its own libraries."""
    if not hasattr(ctypes.CDLL(None), _FOREIGN_LLVM) or not hasattr(os, "RTLD_DEEPBIND"):
        return
    listed = os.environ.get("VK_DRIVER_FILES") or os.environ.get("VK_ICD_FILENAMES")
    files = listed.split(os.pathsep) if listed else [f for d in _ICD_DIRS for f in sorted(glob.glob(f"{d}/*.json"))]
    for f in files:
        try:
            with open(f) as fh:
                path = json.load(fh)["ICD"]["library_path"]
            if not os.path.isabs(path):
                path = os.path.join(os.path.dirname(f), path) if os.sep in path else path
            ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL | os.RTLD_DEEPBIND)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a manifest or driver the loader will judge (and skip) itself


def _get_device():
    global _device
    with _lock:
        if _device is not None:
            return _device
        try:
            import wgpu
        except Exception as e:  # ImportError, or a missing native library
            raise VulkanUnavailable(f"wgpu is not importable: {e}") from None
        shield_drivers()
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


# Mesa's llvmpipe (gallivm lp_bld_limits.h, LP_MAX_TGSI_LOOP_ITERATIONS): one counter per shader
# invocation, shared by all its loops; when it runs out every loop exits at its next iteration.
LLVMPIPE_LOOP_ITERATIONS = 65535


def loop_limit(device) -> tuple[int | None, str]:
    """The loop iterations one shader invocation may run on `device`'s driver (None: no limit), and
    the driver's name for messages. The host program refuses a launch whose kernel may run more
    (backend/loop_budget.py): past it llvmpipe's results are silently wrong."""
    try:
        info = device.adapter.info
        name = f"{info.get('device', '')} {info.get('vendor', '')}"
    except (AttributeError, KeyError, TypeError):  # an adapter without info: nothing known of a limit
        return None, ""
    if "llvmpipe" in name.lower():
        return LLVMPIPE_LOOP_ITERATIONS, "Mesa's llvmpipe (lavapipe), this Vulkan driver,"
    return None, ""


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

    unavailable = VulkanUnavailable

    def __init__(self, binaries: dict[str, bytes]):
        import wgpu

        self.wgpu = wgpu
        self.device = _get_device()
        self.binaries = dict(binaries)
        self._shaders = {}
        self._pipelines = {}
        self.pending = []
        self._usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self.loop_limit, self.loop_limit_why = loop_limit(self.device)

    def check_program(self, program: dict) -> None:
        """Refuse, before anything runs, a kernel that binds more storage buffers (each buffer
        and each scalar argument is one) than the device allows per shader stage: wgpu would
        reject its pipeline at the launch, after the earlier kernels of the call had run."""
        limit = int(self.device.limits.get("max-storage-buffers-per-shader-stage", 0) or 0)
        if limit <= 0:
            return
        worst = {}

        def visit(x):
            if isinstance(x, dict):
                if x.get("op") == "launch" and isinstance(x.get("args"), list):
                    key = (x.get("module"), x.get("kernel"))
                    worst[key] = max(worst.get(key, 0), self.storage_bindings(x))
                for v in x.values():
                    visit(v)
            elif isinstance(x, list):
                for v in x:
                    visit(v)
        visit(program.get("entries", {}))
        over = sorted((n, k) for k, n in worst.items() if n > limit)
        if over:
            n, (m, k) = over[-1]
            raise type(self).unavailable(f"kernel @{m}::@{k} binds {n} storage buffers (its buffers and scalar "
                                    f"arguments), over this device's limit of {limit} per shader stage"
                                    + (f" ({len(over)} kernels over it)" if len(over) > 1 else ""))

    def storage_bindings(self, launch: dict) -> int:
        """The storage buffers a launch binds: one per argument (a scalar is a buffer of one)."""
        return len(launch["args"])

    def pipeline(self, module: str, kernel: str):
        key = (module, kernel)
        pipe = self._pipelines.get(key)
        if pipe is None:
            if module not in self.binaries:
                raise RuntimeError(f"no shader for gpu.module @{module}")
            shader = self._shaders.get(module)
            if shader is None:
                shader = self._shaders[module] = self.device.create_shader_module(code=self.binaries[module])
            pipe = self._pipelines[key] = self.device.create_compute_pipeline(
                layout="auto", compute={"module": shader, "entry_point": kernel})
        return pipe

    def _buffer_with(self, data: bytes):
        if len(data) % 4:
            data = bytes(data) + b"\0" * (4 - len(data) % 4)
        self._check_size(len(data))
        return self.device.create_buffer_with_data(data=data, usage=self._usage)

    def _check_size(self, nbytes: int) -> None:
        """Every buffer is bound as a storage buffer: one past the device's binding limit (128 MiB
        on lavapipe) is a ValueError here, not wgpu's validation error at the launch."""
        limit = int(self.device.limits.get("max-storage-buffer-binding-size", 0) or 0)
        if limit and nbytes > limit:
            raise ValueError(f"this call needs a Vulkan buffer of {nbytes} bytes; the device binds at most {limit} "
                             f"bytes per storage buffer (max-storage-buffer-binding-size)")

    # the protocol of runtime/hostprog.py
    def alloc(self, nbytes: int):
        self._check_size(_round4(nbytes))
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
        most = int(self.device.limits.get("max-compute-workgroups-per-dimension", 0) or 0)
        if most and any(int(g) > most for g in grid):
            # (backend/spirv.py keeps grids within 65535 a dimension, Vulkan's minimum: a safety net)
            raise ValueError(f"kernel {kernel} needs a grid of {tuple(int(g) for g in grid)} workgroups for this "
                             f"call's shapes; the Vulkan device allows at most {most} per dimension")
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
