"""Export a CPU Executable as a self-contained artifact: a shared library built with the LLVM
tools the project installs (mlir-translate, llc) and the system C compiler's linker, plus a JSON
manifest that `relax_mlir.runtime.load` reads without MLIR."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import replace

from relax_mlir.backend.common import LoweringError
from relax_mlir.backend.cpu import CPUOptions, lower
from relax_mlir.runtime import machine, native_rt
from relax_mlir.runtime.loader import LIBRARY, THREADED_LIBRARY, manifest, write_manifest

# What kernels may call that neither libc, libm nor libgcc define: MLIR's strided copy (its C
# runner utils' ABI: rank, then {allocated, aligned, offset, sizes[rank], strides[rank]}) and the
# f32/f64 -> bf16 conversions LLVM emits as library calls (returned in xmm0 like _Float16), with
# the same results as the JIT's.
# MLIR's own libraries define them too, but link libMLIR and libLLVM (hundreds of MiB, and not
# found from the artifact's folder); these are compiled into kernels.so instead.
SUPPORT = {
    "memrefCopy": r"""
typedef struct { int64_t rank; int64_t *desc; } relax_unranked;
void memrefCopy(int64_t elem, relax_unranked *src, relax_unranked *dst) {
  int64_t rank = src->rank, *s = src->desc, *d = dst->desc;
  char *sp = (char *)s[1] + s[2] * elem, *dp = (char *)d[1] + d[2] * elem;
  int64_t *size = s + 3, *ss = s + 3 + rank, *ds = d + 3 + rank, idx[rank > 0 ? rank : 1];
  for (int64_t k = 0; k < rank; ++k) {
    if (size[k] == 0) return;
    idx[k] = 0;
  }
  for (;;) {
    memcpy(dp, sp, (size_t)elem);
    int64_t k = rank - 1;
    for (; k >= 0; --k) {
      if (++idx[k] < size[k]) { sp += ss[k] * elem; dp += ds[k] * elem; break; }
      sp -= (size[k] - 1) * ss[k] * elem; dp -= (size[k] - 1) * ds[k] * elem; idx[k] = 0;
    }
    if (k < 0) return;
  }
}
""",
    "__truncsfbf2": r"""
_Float16 __truncsfbf2(float f) {
  uint32_t u; uint16_t b; _Float16 r;
  memcpy(&u, &f, 4);
  b = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u)  /* NaN: quiet, sign kept */
                                        : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  memcpy(&r, &b, 2);
  return r;
}
""",
    # through f32, as MLIR's runtime (the JIT's) and XLA do: the JIT, the artifact and jax.jit
    # round alike (twice: 1 + 2^-8 + 2^-40 becomes 1, not the nearest 1 + 2^-7)
    "__truncdfbf2": r"""
_Float16 __truncsfbf2(float f);
_Float16 __truncdfbf2(double x) { return __truncsfbf2((float)x); }
""",
    # RELAX_MLIR_PROFILE=1 times kernel calls with MLIR's C runner utils' clock (seconds, f64);
    # the artifact's counters count as the JIT's do
    "rtclock": r"""
double rtclock(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
""",
}
_NEEDS = {"__truncdfbf2": ("__truncsfbf2",)}


def _support_source(symbols) -> str:
    """C source of the SUPPORT functions `symbols` need (in dependency order)."""
    want: list[str] = []
    for s in symbols:
        for t in (*_NEEDS.get(s, ()), s):
            if t in SUPPORT and t not in want:
                want.append(t)
    if not want:
        return ""
    return ("#include <math.h>\n#include <stdint.h>\n#include <string.h>\n#include <time.h>\n"
            + "".join(SUPPORT[t] for t in want))


def _tool(pkg: str, name: str) -> str:
    import importlib

    mod = importlib.import_module(pkg)
    p = os.path.join(list(mod.__path__)[0], "bin", name)
    if not os.path.exists(p):
        raise LoweringError("export", name, f"{name} not found in the {pkg} package ({p})")
    return p


def _llvm_host_cpu() -> str | None:
    """LLVM's name for this machine's CPU (`llc --version`: "Host CPU: rocketlake"), or None."""
    try:
        out = subprocess.run([_tool("llvm", "llc"), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError, LoweringError):
        return None
    for line in out.splitlines():
        if line.strip().startswith("Host CPU:"):
            return line.split(":", 1)[1].strip()
    return None


def _run_tool(cmd: list[str], what: str, text: bool = False) -> str | bytes:
    """Run one build step of the artifact; its failure (a non-zero exit, or a tool that cannot be
    started) is the package's CompileError naming the step and carrying the tool's stderr."""
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=text).stdout
    except subprocess.CalledProcessError as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise LoweringError("export", what, f"{os.path.basename(cmd[0])} exited with status {e.returncode}:\n"
                            + (err.strip() or "(no output on stderr)")) from None
    except OSError as e:
        raise LoweringError("export", what, f"cannot run {cmd[0]}: {e}") from None


def export(upstream, signatures, main: str, path: str, cpu: str | None = "native", options=None,
           min_elements: int | None = None) -> None:
    """Build the artifact from `upstream` (the upstream-level module operation, left as it is).
    `cpu`: the LLVM CPU the library is built for (`native`: this machine; None: baseline).

    `kernels.so` is the one-thread build. With `options` (CPUOptions) of more than one thread and
    `min_elements`, `kernels.threaded.so` is the multi-threaded build too (its parallel loops run
    on the run-time library's pool: relax_rt.c, compiled in, implements MLIR's async runtime
    API), and the manifest's `threaded` records that calls touching at least `min_elements`
    elements take it, as the JIT's dispatch does (backend/cpu_runtime.py)."""
    os.makedirs(path, exist_ok=True)
    options = options or CPUOptions(num_threads=1)
    files = _library(upstream, path, cpu, replace(options, num_threads=1), LIBRARY)
    extra = {}
    if options.num_threads > 1 and min_elements is not None:
        files += [f for f in _library(upstream, path, cpu, options, THREADED_LIBRARY) if f not in files]
        extra["threaded"] = {"library": THREADED_LIBRARY, "threads": options.num_threads,
                             "min_elements": int(min_elements)}
    extra["built_for"] = machine.built_for(cpu, _llvm_host_cpu() if cpu not in (None, "native") else None)
    write_manifest(path, manifest("relax-mlir-cpu-1", main, signatures, **extra), files)


def _library(upstream, path: str, cpu: str | None, options, name: str) -> list[str]:
    """Build `upstream` lowered with `options` into the shared library `path/name`; the files it
    ships (the library, and the BLAS it links beside it)."""
    with upstream.context:
        op = upstream.clone(ip=False)
        # One thread: the library needs no async runtime, only libc/libm/libgcc (and SUPPORT,
        # compiled in); threaded, relax_rt.c provides MLIR's async runtime API.
        lower(op, options)
        llvm_dialect = op.get_asm()
    uses_rt = "@relax_rt_" in llvm_dialect or "@" + native_rt.ASYNC_PREFIX in llvm_dialect
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "kernels.mlir")
        with open(src, "w") as f:
            f.write(llvm_dialect)
        ll, bc, obj = (os.path.join(tmp, "kernels." + e) for e in ("ll", "bc", "o"))
        _run_tool([_tool("mlir", "mlir-translate"), "--mlir-to-llvmir", src, "-o", ll], "mlir-translate")
        # The same split the JIT does: the middle end (opt) at the options' level, then code
        # generation (llc) for the target CPU. Without opt, llc alone spends minutes on the
        # unoptimized IR and its code is ~4x slower; without -mcpu it targets baseline x86-64 (no AVX).
        target = [f"-mcpu={cpu}"] if cpu else []
        level = f"-O{options.opt_level}"
        _run_tool([_tool("llvm", "opt"), level, *target, ll, "-o", bc], "opt")
        _run_tool([_tool("llvm", "llc"), level, *target, "-filetype=obj", "-relocation-model=pic", bc, "-o", obj],
                  "llc")
        cc = shutil.which("cc") or "cc"
        undefined = _undefined(obj)
        inputs = [obj]
        support = _support_source(undefined)
        if support:
            csrc, cobj = os.path.join(tmp, "support.c"), os.path.join(tmp, "support.o")
            with open(csrc, "w") as f:
                f.write(support)
            _run_tool([cc, "-O2", "-fPIC", "-c", csrc, "-o", cobj], "cc (support functions)")
            inputs.append(cobj)
        if uses_rt:  # pooled BLAS products, parallel loops: the run-time library, compiled in
            robj = os.path.join(tmp, "relax_rt.o")
            with open(os.path.join(tmp, "relax_rt.c"), "w") as f:
                f.write(native_rt.source())
            _run_tool([cc, "-O2", "-fPIC", "-pthread", "-c", os.path.join(tmp, "relax_rt.c"), "-o", robj],
                      "cc (run-time library)")
            inputs.append(robj)
        cmd = [cc, "-shared", "-pthread", *inputs, "-o", os.path.join(path, name), "-lm"]
        files = [name]
        if "@scipy_cblas_" in llvm_dialect or uses_rt:
            # relax.call_library kernels: ship the BLAS beside it
            from relax_mlir.runtime.library import library_path

            blas = library_path()
            if blas is None:
                raise RuntimeError("the module calls BLAS (relax-dispatch-library) but scipy-openblas32 is not installed")
            shutil.copy(blas, os.path.join(path, os.path.basename(blas)))
            files.append(os.path.basename(blas))
            cmd += [os.path.join(path, os.path.basename(blas)), "-Wl,-rpath,$ORIGIN"]
        _run_tool(cmd, "cc (link)")
    return files


def _undefined(obj: str) -> list[str]:
    """The symbols the object file calls but does not define (`nm -u`; empty without nm)."""
    nm = shutil.which("nm")
    if nm is None:
        return list(SUPPORT)  # compile them all in: unused functions cost nothing at load
    out = _run_tool([nm, "-u", obj], "nm", text=True)
    return [line.split()[-1] for line in out.splitlines() if line.strip()]
