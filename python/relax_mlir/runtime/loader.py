"""Load an exported artifact; uses numpy (and ctypes, wgpu or CuPy) only, never MLIR.

The manifest's `format` says which:

* ``relax-mlir-cpu-1``: `kernels.so` (native code) + `manifest.json` (symbolic signatures, check
  messages, derived symbols), called through ctypes.
* ``relax-mlir-vulkan-1`` / ``relax-mlir-cuda-1`` / ``relax-mlir-webgpu-1``: `manifest.json` (the
  same signatures), `host.json` (the host program, runtime/hostprog.py) and
  `kernels/<gpu.module>.spv` / `.ptx` / `.wgsl`; the host program runs with a wgpu driver
  (runtime/vulkan.py, runtime/webgpu.py) or a CuPy driver (runtime/cuda.py), created on the first
  call. A webgpu manifest also holds `webgpu`: each kernel's bindings and workgroup size, and the
  device limits they need; runtime/web/relax_runtime.js runs the same artifact in a browser.

The manifest's `files` records the size and SHA-256 of every other file of the artifact; `load`
checks them all before it reads, maps or runs any (a truncated `kernels.so` would otherwise
fault inside the dynamic loader), and raises ValueError naming the file that does not match.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import threading
from typing import Callable

import numpy as np

from relax_mlir import knobs
from relax_mlir.runtime import library, machine, native_rt
from relax_mlir.runtime.executable import Executable, Function, Signature, TensorSig
from relax_mlir.shape import parse as parse_expr

MANIFEST = "manifest.json"
LIBRARY = "kernels.so"
THREADED_LIBRARY = "kernels.threaded.so"  # the multi-threaded build, where the manifest's `threaded` names it
HOST_PROGRAM = "host.json"
GPU_FORMATS = {"vulkan": ("relax-mlir-vulkan-1", "spirv", ".spv"), "cuda": ("relax-mlir-cuda-1", "ptx", ".ptx"),
               "webgpu": ("relax-mlir-webgpu-1", "wgsl", ".wgsl")}


def file_record(path: str) -> dict:
    """{"size": bytes, "sha256": hex digest} of the file at `path`."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    return {"size": size, "sha256": h.hexdigest()}


def _check_files(path: str, manifest: dict, needed: list[str]) -> None:
    """Every file the manifest records (and each of `needed`) is present, inside the artifact,
    of the recorded size and SHA-256; else ValueError naming it."""
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise ValueError(f"{path}: {MANIFEST} records no file sizes and hashes (an artifact from an older "
                         f"relax-mlir, or an edited manifest): export it again")
    for rel in needed:
        if rel not in files:
            raise ValueError(f"{path}: {MANIFEST} has no size and hash for {rel}")
    root = os.path.realpath(path)
    for rel, rec in files.items():
        full = os.path.realpath(os.path.join(root, str(rel)))
        if os.path.isabs(str(rel)) or not full.startswith(root + os.sep):
            raise ValueError(f"{path}: {MANIFEST} names a file outside the artifact: {rel!r}")
        if not isinstance(rec, dict) or not isinstance(rec.get("size"), int) or not isinstance(rec.get("sha256"), str):
            raise ValueError(f"{path}: {MANIFEST}: malformed record for {rel}")
        if not os.path.isfile(full):
            raise ValueError(f"{path}: {rel} is missing")
        size = os.path.getsize(full)
        if size != rec["size"]:
            raise ValueError(f"{path}: {rel} has {size} bytes, the manifest records {rec['size']} "
                             f"(a truncated or modified file)")
        if file_record(full)["sha256"] != rec["sha256"]:
            raise ValueError(f"{path}: {rel} does not match the SHA-256 the manifest records (a modified file)")


class _Malformed(ValueError):
    """A manifest entry that parses but does not hold together."""


def _sig(entry: dict) -> Signature:
    def tsig(t):
        return TensorSig(tuple(None if d is None else parse_expr(str(d)) for d in t["dims"]), t["dtype"])

    requires = entry.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, list) and len(r) == 3 and all(isinstance(x, str) for x in r)
                                                 for r in requires):
        raise _Malformed("'requires' must be a list of [lhs, rhs, message] strings")
    sig = Signature.make(entry["name"], [tsig(t) for t in entry["params"]], [tsig(t) for t in entry["results"]],
                         entry["arg_names"], entry["messages"], entry.get("derived", {}),
                         entry.get("upper", {}), entry.get("workspace", []),
                         entry.get("lower", {}), {int(i): r for i, r in entry.get("donate", {}).items()},
                         entry.get("complex_params", ()), entry.get("complex_results", ()),
                         [tuple(r) for r in requires])
    unbound = sig.unbound_symbols()
    if unbound:
        raise _Malformed(f"entry @{sig.name} uses symbol{'s' if len(unbound) > 1 else ''} "
                         f"{', '.join(unbound)} that no parameter binds")
    return sig


def _descriptor(a: np.ndarray) -> np.ndarray:
    """A ranked memref descriptor {allocated, aligned, offset, sizes..., strides...} (int64)."""
    ptr = a.ctypes.data
    strides = [s // a.itemsize for s in a.strides] if a.ndim else []
    return np.array([ptr, ptr, 0, *a.shape, *strides], dtype=np.int64)


class NativeEntry:
    """`_mlir_ciface_<name>` of the shared library: called with one descriptor address per memref
    (`Function`'s fast path: `packed = False`), or with numpy arrays (`__call__`). With a
    multi-threaded build (`threaded_lib`), calls touching at least `min_elements` elements run
    its entry instead (`Function` counts them when `threaded` is set)."""

    packed = False

    def __init__(self, lib: ctypes.CDLL, name: str, nargs: int, threaded_lib: ctypes.CDLL | None = None,
                 min_elements: int = 0):
        self.fn = self._entry(lib, name, nargs)
        self.fn_threaded = None if threaded_lib is None else self._entry(threaded_lib, name, nargs)
        self.threaded = self.fn_threaded is not None
        self.min_elements = min_elements

    @staticmethod
    def _entry(lib: ctypes.CDLL, name: str, nargs: int):
        fn = getattr(lib, "_mlir_ciface_" + name)
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p] * nargs
        return fn

    def function(self, n_elements: int):
        if self.fn_threaded is not None and n_elements >= self.min_elements:
            return self.fn_threaded
        return self.fn

    def __call__(self, *arrays: np.ndarray) -> None:
        descs = [_descriptor(a) for a in arrays]
        self.fn(*[d.ctypes.data for d in descs])


# --------------------------------------------------------------------------------------------
# GPU executables (shared by compile_vulkan / compile_cuda and by load)
# --------------------------------------------------------------------------------------------


class _LazyDriver:
    """Creates the driver on first use, so that loading and shape checks need no device."""

    def __init__(self, factory: Callable[[], object]):
        self.factory = factory
        self.driver = None
        self.lock = threading.Lock()

    def get(self, program: dict | None = None):
        if self.driver is None:
            driver = self.factory()
            if program is not None and hasattr(driver, "check_program"):
                driver.check_program(program)  # before anything runs: the device's limits
            self.driver = driver
        return self.driver


def gpu_executable(target: str, signatures, program: dict, kernels: dict, driver_factory, main: str | None = None):
    """An Executable whose entries run `program` (runtime/hostprog.py) with the driver that
    `driver_factory()` returns. `kernels` is {"spirv": {module: bytes}} or {"ptx": {module: text}}."""
    from relax_mlir.runtime.hostprog import HostProgram

    prog = HostProgram(program)
    lazy = _LazyDriver(driver_factory)

    def invoke(name, *arrays):
        with lazy.lock:
            prog.run(name, arrays, lazy.get(program))

    funcs = {}
    for s in signatures:
        if s.name not in prog.entries:
            raise ValueError(f"the host program has no entry @{s.name}")
        funcs[s.name] = Function(s, lambda *a, _n=s.name: invoke(_n, *a))
    if main is None:
        main = "main" if "main" in funcs else signatures[0].name
    artifacts = {"target": target, "hostprog": program, **kernels,
                 "exporter": lambda exe, path, cpu: write_gpu_artifact(path, exe.artifacts, signatures, exe.main)}
    if target == "cuda":
        from relax_mlir.runtime.cuda import CudaExecutable

        return CudaExecutable(funcs, main, keepalive=(prog, lazy), artifacts=artifacts)
    return Executable(funcs, main, keepalive=(prog, lazy), artifacts=artifacts)


def _dim(d):
    if d is None:
        return None
    return d.value if d.is_const else str(d)


def manifest(fmt: str, main: str, signatures, **extra) -> dict:
    """The manifest of an artifact: its format, main entry and symbolic signatures (read back by
    `_sig`), plus `extra` keys."""
    return {
        "format": fmt,
        "main": main,
        "entries": [{
            "name": sig.name,
            "params": [{"dims": [_dim(d) for d in p.dims], "dtype": p.dtype} for p in sig.params],
            "results": [{"dims": [_dim(d) for d in r.dims], "dtype": r.dtype} for r in sig.results],
            "arg_names": list(sig.arg_names),
            "messages": list(sig.messages),
            "derived": {k: str(e) for k, e in sig.derived},
            "upper": dict(sig.upper),
            "workspace": [str(w) for w in sig.workspace],
            "lower": dict(sig.lower),
            "donate": {str(i): r for i, r in sig.donate},
            "complex_params": list(sig.complex_params),
            "complex_results": list(sig.complex_results),
            "requires": [[str(l), str(r), m] for l, r, m in sig.requires],
        } for sig in signatures],
        **extra,
    }


def write_manifest(path: str, data: dict, files: list[str]) -> None:
    """Write manifest.json with a size and SHA-256 record of each of `files` (paths relative to
    the artifact), which `load` checks before it reads or maps any of them."""
    data = dict(data, files={rel: file_record(os.path.join(path, rel)) for rel in files})
    with open(os.path.join(path, "manifest.json"), "w") as f:
        json.dump(data, f, indent=1)


def write_gpu_artifact(path: str, artifacts: dict, signatures, main: str) -> None:
    """Write manifest.json, host.json and kernels/* for a vulkan or cuda Executable."""
    target = artifacts["target"]
    fmt, key, ext = GPU_FORMATS[target]
    os.makedirs(os.path.join(path, "kernels"), exist_ok=True)
    files = {}
    for module, data in artifacts[key].items():
        rel = f"kernels/{module}{ext}"
        with open(os.path.join(path, rel), "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        files[module] = rel
    with open(os.path.join(path, HOST_PROGRAM), "w") as f:
        json.dump(artifacts["hostprog"], f)
    extra = {"webgpu": artifacts["webgpu"]} if target == "webgpu" else {}  # WGSL bindings and device limits
    write_manifest(path, manifest(fmt, main, signatures, host_program=HOST_PROGRAM, kernels=files, **extra),
                   [HOST_PROGRAM, *files.values()])


def _load_gpu(path: str, target: str, manifest: dict, driver=None) -> Executable:
    _check_files(path, manifest, [manifest.get("host_program", HOST_PROGRAM), *manifest["kernels"].values()])
    with open(os.path.join(path, manifest.get("host_program", HOST_PROGRAM)), encoding="utf-8") as f:
        program = json.load(f)
    files = {m: os.path.join(path, rel) for m, rel in manifest["kernels"].items()}
    sigs = [_sig(e) for e in manifest["entries"]]
    if target == "vulkan":
        bins = {}
        for m, p in files.items():
            with open(p, "rb") as f:
                bins[m] = f.read()

        def factory():
            from relax_mlir.runtime.vulkan import WgpuDriver

            return WgpuDriver(bins)

        kernels = {"spirv": bins}
    elif target == "webgpu":
        wgsl = {}
        for m, p in files.items():
            with open(p, encoding="utf-8") as f:
                wgsl[m] = f.read()
        table = manifest["webgpu"]

        def factory():
            from relax_mlir.runtime.webgpu import WebGPUDriver

            return WebGPUDriver(wgsl, table)

        kernels = {"wgsl": wgsl, "webgpu": table}
    else:
        ptx = {}
        for m, p in files.items():
            with open(p, encoding="utf-8") as f:
                ptx[m] = f.read()

        def factory():
            from relax_mlir.runtime.cuda import CupyDriver

            return CupyDriver(files)

        kernels = {"ptx": ptx}
    if driver is not None:
        factory = lambda: driver  # noqa: E731
    return gpu_executable(target, sigs, program, kernels, factory, manifest["main"])


def load(path: str, *, driver=None) -> Executable:
    """Load an artifact written by `Executable.export`. `driver` replaces the GPU driver of a
    vulkan or cuda artifact (any object with the runtime/hostprog.py driver protocol). A missing,
    corrupt or malformed artifact is a ValueError naming it."""
    try:
        exe = _load(path, driver)
    except (KeyError, TypeError, AttributeError, IndexError) as e:  # a manifest that parses but is not ours
        raise ValueError(f"{path}: {MANIFEST} is malformed ({type(e).__name__}: {e}); export the artifact "
                         f"again") from None
    except _Malformed as e:
        raise ValueError(f"{path}: {MANIFEST} is malformed: {e}; export the artifact again") from None
    if exe.main not in exe.functions:
        raise ValueError(f"{path}: {MANIFEST} is malformed: main entry {exe.main!r} is not among its entries "
                         f"({', '.join(exe.functions) or 'none'})")
    return exe


def _load(path: str, driver) -> Executable:
    try:
        with open(os.path.join(path, MANIFEST), encoding="utf-8") as f:
            manifest = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: {MANIFEST} is not valid JSON ({e})") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{path}: {MANIFEST} is not a relax-mlir manifest")
    fmt = manifest.get("format")
    for target, (name, _, _) in GPU_FORMATS.items():
        if fmt == name:
            return _load_gpu(path, target, manifest, driver)
    if fmt != "relax-mlir-cpu-1":
        raise ValueError(f"{path}: not a relax-mlir artifact (format {fmt!r}; known: relax-mlir-cpu-1, "
                         + ", ".join(n for n, _, _ in GPU_FORMATS.values()) + ")")
    if "built_for" in manifest:  # (artifacts from before it was recorded carry no record)
        machine.check(path, manifest["built_for"], "export the artifact on this machine (cpu='native'), or for a "
                                                   "CPU it has: cpu=None (baseline) or an x86-64 level "
                                                   "('x86-64-v3')")
    threaded = _threaded_build(path, manifest)
    _check_files(path, manifest, [LIBRARY] + ([threaded["library"]] if threaded else []))
    libs = [_open_library(path, manifest, LIBRARY)]
    if threaded and (knobs.num_threads_setting() or 2) > 1:  # RELAX_MLIR_NUM_THREADS=1: one thread
        libs.append(_open_library(path, manifest, threaded["library"]))
    for lib in libs:
        if hasattr(lib, "relax_rt_configure"):  # pooled BLAS products: the RELAX_MLIR_BLAS_* settings
            native_rt.configure(lib)
            native_rt.start(lib)  # the pool's workers now, not in the first call that splits
        # OpenBLAS itself on one thread, as in the compiling process (runtime/library.py): found
        # through the library's dependencies
        set_threads = getattr(lib, library.SET_THREADS_SYMBOL, None)
        if set_threads is not None:
            set_threads.argtypes = [ctypes.c_int]
            set_threads(1)
    min_elements = knobs.parallel_min_elements(threaded["min_elements"]) if threaded else 0
    funcs = {}
    for entry in manifest["entries"]:
        sig = _sig(entry)
        native = NativeEntry(libs[0], sig.name, len(sig.params) + len(sig.results) + len(sig.workspace) + 1,
                             libs[1] if len(libs) > 1 else None, min_elements)
        funcs[sig.name] = Function(sig, native, native)
    return Executable(funcs, manifest["main"], keepalive=tuple(libs))


_LIB_DIR: list[str] = []  # this process's directory of library copies (made at the first load)
_LIB_LOCK = threading.Lock()


def _open_library(path: str, manifest: dict, rel: str) -> ctypes.CDLL:
    """dlopen a private copy of the artifact's library `rel`, named by its SHA-256. The dynamic
    loader hands back the library it already mapped for a path name, so opening the artifact's
    own file would run the old code of an artifact replaced at the same path in this process
    (under the new signatures: buffers overrun). The copy is hashed as written and checked against
    the manifest (the file may have changed since _check_files read it), and unlinked once mapped;
    the same content loaded again is the same library. (Where the temporary directory is mounted
    noexec, the artifact's own file is opened.)"""
    want = manifest["files"][rel]["sha256"]
    with _LIB_LOCK:
        if not _LIB_DIR:
            import atexit
            import shutil
            import tempfile

            _LIB_DIR.append(tempfile.mkdtemp(prefix="relax-mlir-libs-"))
            atexit.register(shutil.rmtree, _LIB_DIR[0], True)
        copy = os.path.join(_LIB_DIR[0], f"{want}-{rel}")
        h = hashlib.sha256()
        tmp = copy + ".part"
        with open(os.path.join(path, rel), "rb") as src, open(tmp, "wb") as dst:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                h.update(chunk)
                dst.write(chunk)
        if h.hexdigest() != want:
            os.unlink(tmp)
            raise ValueError(f"{path}: {rel} does not match the SHA-256 the manifest records (a modified file)")
        os.replace(tmp, copy)
        try:
            return ctypes.CDLL(copy)
        except OSError:  # a temporary directory mounted noexec: the artifact's own file
            return ctypes.CDLL(os.path.join(os.path.abspath(path), rel))
        finally:
            os.unlink(copy)


def _threaded_build(path: str, manifest: dict) -> dict | None:
    """The manifest's `threaded` record (library, threads, min_elements), checked; None if absent."""
    t = manifest.get("threaded")
    if t is None:
        return None
    if (not isinstance(t, dict) or t.get("library") != THREADED_LIBRARY or not isinstance(t.get("min_elements"), int)
            or t["min_elements"] < 0):
        raise ValueError(f"{path}: {MANIFEST}: malformed `threaded` record {t!r}")
    return t
