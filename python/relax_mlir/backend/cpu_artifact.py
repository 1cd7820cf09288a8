"""Export a CPU Executable as a self-contained artifact: a shared library built with the LLVM
tools the project installs (mlir-translate, llc) and the system C compiler's linker, plus a JSON
manifest that `relax_mlir.runtime.load` reads without MLIR."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from relax_mlir.backend.cpu import CPUOptions, lower
from relax_mlir.runtime.loader import manifest, write_manifest


def _tool(pkg: str, name: str) -> str:
    import importlib

    mod = importlib.import_module(pkg)
    p = os.path.join(list(mod.__path__)[0], "bin", name)
    if not os.path.exists(p):
        raise FileNotFoundError(f"{name} not found in {pkg}")
    return p


def export(upstream, signatures, main: str, path: str, cpu: str | None = "native") -> None:
    """Build the artifact from `upstream` (the upstream-level module operation, left as it is).
    `cpu`: the LLVM CPU the library is built for (`native`: this machine; None: baseline)."""
    os.makedirs(path, exist_ok=True)
    with upstream.context:
        op = upstream.clone(ip=False)
        # One thread: the artifact then needs no async runtime, only libc/libm (and the small
        # MLIR C runner utils, shipped beside it, for memref copies).
        lower(op, CPUOptions(num_threads=1))
        llvm_dialect = op.get_asm()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "kernels.mlir")
        with open(src, "w") as f:
            f.write(llvm_dialect)
        ll, bc, obj = (os.path.join(tmp, "kernels." + e) for e in ("ll", "bc", "o"))
        subprocess.run([_tool("mlir", "mlir-translate"), "--mlir-to-llvmir", src, "-o", ll], check=True,
                       capture_output=True)
        # The same split the JIT does: the O3 middle end (opt), then code generation (llc) for the
        # target CPU. Without opt, llc alone spends minutes on the unoptimized IR and its code is
        # ~4x slower; without -mcpu it targets baseline x86-64 (no AVX).
        target = [f"-mcpu={cpu}"] if cpu else []
        subprocess.run([_tool("llvm", "opt"), "-O3", *target, ll, "-o", bc], check=True, capture_output=True)
        subprocess.run([_tool("llvm", "llc"), "-O3", *target, "-filetype=obj", "-relocation-model=pic", bc,
                        "-o", obj], check=True, capture_output=True)
        import mlir

        utils = os.path.join(list(mlir.__path__)[0], "lib", "libmlir_c_runner_utils.so")
        cmd = [shutil.which("cc") or "cc", "-shared", obj, "-o", os.path.join(path, "kernels.so"), "-lm"]
        files = ["kernels.so"]
        if os.path.exists(utils):
            files.append("libmlir_c_runner_utils.so")
            shutil.copy(utils, os.path.join(path, "libmlir_c_runner_utils.so"))
            cmd += [os.path.join(path, "libmlir_c_runner_utils.so"), "-Wl,-rpath,$ORIGIN"]
        if "@scipy_cblas_" in llvm_dialect:  # relax.call_library kernels: ship the BLAS beside it
            from relax_mlir.runtime.library import library_path

            blas = library_path()
            if blas is None:
                raise RuntimeError("the module calls BLAS (relax-dispatch-library) but scipy-openblas32 is not installed")
            shutil.copy(blas, os.path.join(path, os.path.basename(blas)))
            files.append(os.path.basename(blas))
            cmd += [os.path.join(path, os.path.basename(blas)), "-Wl,-rpath,$ORIGIN"]
        subprocess.run(cmd, check=True, capture_output=True)
    write_manifest(path, manifest("relax-mlir-cpu-1", main, signatures), files)
