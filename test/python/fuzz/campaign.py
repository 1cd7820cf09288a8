"""The differential fuzzer's driver: run generated JAX programs (fuzz/gen.py) through relax-mlir
and compare with jax.jit.

For each seed: the program is exported with jax.export (symbolic dims) and imported; it is
compiled ONCE with the full pipeline (relax_mlir.OPTIMIZE_PIPELINE) and once with one optional
pass removed (round robin over the seeds; `--all-variants`: once per optional pass), and each
build runs at every binding of the symbols (gen.BINDINGS: 1, primes, larger) and must equal
jax.jit: bit for bit for ints, bools and exact float chains, within a tolerance for inexact float
chains (NaN positions and the sign of every Inf must still match).  A symbol bound to 0 is
outside jax.export's assumption (every dimension variable >= 1): the executable must refuse it
with ValueError; zero-size arrays come from static 0 dims instead.

Programs run in a worker process (`--worker`), one per batch of seeds: a signal or a hang kills
only the worker, the program it was running is reported as a crash, and a new worker runs the
rest.  Vulkan programs always run in a worker (lavapipe in a process breaks later CPU-JIT calls).

    python test/python/fuzz/campaign.py --programs 5000 --first-seed 100000 --vulkan 500
    python test/python/fuzz/campaign.py --seeds 17,42 --all-variants      # replay some seeds

Known divergence, XLA's: a float cumsum across terms that cancel (seed 2421699 at n = 33: a row
holding -1e30, later +1e30, then 65504 and small values, into a softmax). jax.jit's summation
order lets 1e30 absorb the terms between before the pair cancels (ten of its partial sums come
out equal; its float64 run does the same); ours adds in sequence, as the exact sums go, and the
softmax follows different partial sums. Neither side is judged by the magnitude rule, which
bounds the sums, not the softmax after them.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # test/python: `import fuzz`

from fuzz import gen  # noqa: E402

REQUIRED = ("relax-infer-shapes", "relax-legalize", "relax-lower-shapes", "relax-to-upstream")
# Tolerance of an inexact float result, per dtype: |got - want| <= rtol * (|want| + scale), where
# scale is the largest finite |want| of that result (a sum that cancels keeps its absolute error).
RTOL = {"float64": 1e-6, "float32": 1e-3, "float16": 3e-2, "bfloat16": 1e-1}


def optional_passes(target: str) -> list[str]:
    import relax_mlir

    from relax_mlir.targets import CPU_ONLY_PASSES

    out = [p for p in relax_mlir.OPTIMIZE_PIPELINE if p not in REQUIRED]
    if target != "cpu":
        out = [p for p in out if p not in CPU_ONLY_PASSES]
    return out


def pipeline(target: str, removed: str | None) -> list[str]:
    import relax_mlir

    from relax_mlir.targets import CPU_ONLY_PASSES

    ps = [p for p in relax_mlir.OPTIMIZE_PIPELINE if p != removed]
    if target != "cpu":
        ps = [p for p in ps if p not in CPU_ONLY_PASSES]
    return ps


def variants(seed: int, target: str, all_variants: bool) -> list[str | None]:
    """None = the full pipeline; a pass name = the pipeline without it."""
    opt = optional_passes(target)
    return [None] + (opt if all_variants else [opt[seed % len(opt)]])


# -- comparison --------------------------------------------------------------------------------

def compare(got, want, exact: bool, precision: str | None = None, order_dependent: bool = False,
            unit_scale: bool = False, magnitude=None, unstable=None) -> str | None:
    """None if `got` matches the jax.jit result `want`, else a description of the mismatch.
    `precision`: the coarsest float dtype the value went through (its tolerance, when coarser).
    `order_dependent`: the value went through a float sum of many terms, whose NaN or the sign of
    whose Inf depend on summation order and FMA where the sum overflows or adds infinities of both
    signs: an element non-finite on both sides then matches (finite against non-finite never does).
    `unit_scale`: a normalized value (softmax, layer norm) whose error is measured against 1 at
    least (gen.Program.unit_scale_outputs).
    `magnitude` (order-dependent values only): the same program's jax.jit result on the inputs'
    absolute values, elementwise the size of the terms a sum added (a sum that cancels 1e30 against
    -1e30 is any value within an ulp of 1e30 of the exact one, in any summation order: seed
    2301102, a bf16 sum of 33 terms, 1.46 here and -0.14 in jax.jit, exact 65540); a finite
    element within the tolerance of that size matches.
    `unstable` (inexact values only): a boolean mask of the elements whose jax.jit value moves
    beyond the tolerance when the float inputs move by a few ulps (_perturbed_reference); a finite
    element there matches any finite value."""
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return f"shape {g.shape}, want {w.shape}"
    if g.dtype != w.dtype:
        return f"dtype {g.dtype}, want {w.dtype}"
    if w.dtype.kind == "c":  # each part as a real value
        for part in ("real", "imag"):
            m = compare(getattr(g, part), getattr(w, part), exact, precision, order_dependent, unit_scale,
                        None if magnitude is None else np.abs(np.asarray(magnitude)), unstable)
            if m is not None:
                return f"{part} part: {m}"
        return None
    if w.dtype.kind in "biu":
        bad = g != w
    else:
        gf, wf = g.astype(np.float64), w.astype(np.float64)
        if not exact:
            # XLA on CPU flushes subnormal results to zero (FTZ/DAZ), IEEE arithmetic (ours, numpy)
            # keeps them (seed 1800154: a product underflowing to -7e-316, jax -0.0): an inexact
            # value below the dtype's smallest normal compares as a zero of its sign
            tiny = float(np.finfo(w.dtype).tiny)
            gf = np.where(np.abs(gf) < tiny, np.copysign(0.0, gf), gf)
            wf = np.where(np.abs(wf) < tiny, np.copysign(0.0, wf), wf)
        gn, wn = np.isnan(gf), np.isnan(wf)
        bad = gn != wn
        if order_dependent and not exact:
            bad &= np.isfinite(gf) | np.isfinite(wf)
        both = ~gn & ~wn
        if exact:
            bad |= both & (gf != wf)
        else:
            inf = np.isinf(gf) | np.isinf(wf)
            signs = both & inf & (gf != wf)
            if order_dependent:
                signs &= np.isfinite(gf) | np.isfinite(wf)
            bad |= signs
            fin = both & ~inf
            scale = float(np.max(np.abs(wf[fin]), initial=1.0 if unit_scale else 0.0))
            tol = max(RTOL[str(w.dtype)], RTOL.get(precision, 0.0))
            with np.errstate(invalid="ignore", over="ignore"):
                off = np.abs(gf - wf) > tol * (np.abs(wf) + scale)
                if order_dependent and magnitude is not None:
                    mag = np.abs(np.asarray(magnitude).astype(np.float64))
                    if mag.shape == wf.shape:
                        off &= ~(np.abs(gf - wf) <= tol * np.where(np.isfinite(mag), mag, np.inf))
                if unstable is not None and np.shape(unstable) == wf.shape:
                    off &= ~np.asarray(unstable, bool)
                bad |= fin & off
    if not bad.any():
        return None
    idx = np.argwhere(bad) if bad.ndim else np.zeros((1, 0), int)
    first = tuple(int(i) for i in idx[0])
    how = "exact" if exact or w.dtype.kind in "biu" else f"rtol {max(RTOL[str(w.dtype)], RTOL.get(precision, 0.0))}"
    return (f"{int(bad.sum())} of {w.size} elements differ ({how}); first at {first}: "
            f"got {g[first]!r}, want {w[first]!r}")


_MXCSR_SRC = r"""
#include <xmmintrin.h>
unsigned relax_fuzz_get_csr(void) { return _mm_getcsr(); }
void relax_fuzz_set_csr(unsigned v) { _mm_setcsr(v); }
"""
_MXCSR_LIB: list = []


def _mxcsr():
    """A tiny C library reading and writing this thread's x86 MXCSR (cc at first use), or None
    where there is no x86 or no C compiler."""
    if not _MXCSR_LIB:
        import ctypes
        import platform
        import shutil

        lib = None
        cc = shutil.which("cc") or shutil.which("gcc")
        if platform.machine() in ("x86_64", "AMD64") and cc:
            d = tempfile.mkdtemp(prefix="relax-fuzz-")
            src, so = os.path.join(d, "csr.c"), os.path.join(d, "csr.so")
            with open(src, "w") as f:
                f.write(_MXCSR_SRC)
            if subprocess.run([cc, "-O1", "-shared", "-fPIC", src, "-o", so], capture_output=True).returncode == 0:
                lib = ctypes.CDLL(so)
                lib.relax_fuzz_get_csr.restype = ctypes.c_uint
                lib.relax_fuzz_set_csr.argtypes = [ctypes.c_uint]
        _MXCSR_LIB.append(lib)
    return _MXCSR_LIB[0]


_FTZ_DAZ = 0x8040  # MXCSR flush-to-zero (bit 15) and denormals-are-zero (bit 6)


def run_like_xla(fn):
    """`fn()` with subnormal floats flushed to zero as inputs and results of every SSE/AVX
    operation, as XLA's CPU runtime runs jax.jit's code (`jnp.log2` of 1e-40 is -inf under
    jax.jit, -132.9 in numpy; seed 2300826: `log2(power(a, b))` of a subnormal power). None where
    the mode cannot be set. relax-mlir itself keeps IEEE subnormals, as numpy does; a result that
    differs from jax.jit's only through them matches once the same code runs in XLA's mode."""
    lib = _mxcsr()
    if lib is None:
        return None
    old = lib.relax_fuzz_get_csr()
    lib.relax_fuzz_set_csr(old | _FTZ_DAZ)
    try:
        return fn()
    finally:
        lib.relax_fuzz_set_csr(old)


def as_list(x) -> list:
    return list(x) if isinstance(x, (tuple, list)) else [x]


# -- one program (in a worker) -----------------------------------------------------------------

def _short(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}"
    return s if len(s) < 1500 else s[:1500] + " ..."


def refused_by_target(e: Exception, target: str) -> bool:
    """A GPU target's clean refusal of an element type or op it does not support (f64 on Vulkan):
    a CompileError that names the target and is not an internal error. The CPU refuses nothing."""
    from relax_mlir.runtime.hostprog import platform_name

    msg = str(e)
    return target != "cpu" and f"not supported on {platform_name(target)}" in msg \
        and "internal error" not in msg and "failed to legalize" not in msg


_WIDER = {"float16": np.float32, "bfloat16": np.float32, "float32": np.float64}


def _reference_on(jitted, args, want, change) -> list | None:
    """jax.jit's results with each input `a` replaced by `change(a)` where that is not None; None
    when nothing changed, the program does not run on the changed inputs, or a result's shape
    or float-ness differs from `want`'s."""
    changed, any_change = [], False
    for a in args:
        c = change(np.asarray(a))
        any_change |= c is not None
        changed.append(a if c is None else c)
    if not any_change:
        return None
    try:
        out = [np.asarray(w) for w in as_list(jitted(*changed))]
    except Exception:
        return None
    if len(out) != len(want) or any(o.shape != np.asarray(w).shape
                                    or (o.dtype.kind == "f") != (np.asarray(w).dtype.kind == "f")
                                    for o, w in zip(out, want)):
        return None
    return out


def _wider_reference(jitted, args, want) -> list | None:
    """jax.jit's results on the float inputs widened one step, cast back to `want`'s dtypes; None
    when there is no wider float input, or the program does not run on them."""
    def widen(a):
        t = _WIDER.get(str(a.dtype))
        return None if t is None else a.astype(t)
    out = _reference_on(jitted, args, want, widen)
    return None if out is None else [o.astype(np.asarray(w).dtype) for o, w in zip(out, want)]


_ULP = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}


def _perturbed_reference(jitted, args, want) -> list | None:
    """jax.jit's results with every float input scaled by 1 + 4 ulps of its dtype; None when
    there is no float input or the program does not run on them."""
    def scale(a):
        u = _ULP.get(str(a.dtype))
        return None if u is None or a.size == 0 else (a.astype(np.float64) * (1 + 4 * u)).astype(a.dtype)
    return _reference_on(jitted, args, want, scale)


def _moved_elements(moved, want, precision, unit_scale) -> np.ndarray | None:
    """Finite elements of `want` that moved beyond compare()'s tolerance under the perturbation."""
    w = np.asarray(want)
    if w.dtype.kind in "biuc":
        return None
    mf, wf = np.asarray(moved).astype(np.float64), w.astype(np.float64)
    fin = np.isfinite(mf) & np.isfinite(wf)
    scale = float(np.max(np.abs(wf[fin]), initial=1.0 if unit_scale else 0.0))
    tol = max(RTOL[str(w.dtype)], RTOL.get(precision, 0.0))
    with np.errstate(invalid="ignore", over="ignore"):
        return fin & (np.abs(mf - wf) > tol * (np.abs(wf) + scale))


def _keeps_non_finite(got, want) -> bool:
    """NaN wherever want has NaN and want's infinities with their signs (got may have more: the
    caller checks those against the wider reference)."""
    g, w = np.asarray(got), np.asarray(want)
    if g.dtype.kind != "f" and str(g.dtype) != "bfloat16":
        return bool(np.array_equal(g, w))
    gf, wf = g.astype(np.float64), w.astype(np.float64)
    nan, inf = np.isnan(wf), np.isinf(wf)
    return bool(np.isnan(gf[nan]).all() and np.array_equal(gf[inf], wf[inf]))


def _phase(what: str) -> None:
    """In a worker: whose code runs next, "jax" (the reference) or "ours", so that a signal is
    blamed on the right side (run_batch)."""
    if _IN_WORKER:
        sys.stdout.write(f"@@PHASE {what}\n")
        sys.stdout.flush()


def _eager_reference(ref_fn, args, want) -> list | None:
    """XLA's own answer op by op, without its fusions' rewrites (seed 2301589: jax.jit's softmax of
    a row holding 1.6e29 is NaN; op by op, as numpy: [0, 0, 1, 0])."""
    import jax
    try:
        with jax.disable_jit():
            out = [np.asarray(w) for w in as_list(ref_fn(*args))]
    except Exception:
        return None
    return out if len(out) == len(want) else None


def judge(got, want, flags, jitted, args, ours_like_xla=None, references=()) -> tuple[list, str | None]:
    """Compare our results `got` with jax.jit's `want` (`flags`: per result, compare()'s exact,
    precision, order_dependent, unit_scale), then give each mismatch the benefit of the doubts
    that are XLA's, not ours. Returns (per result: None or the mismatch, the name of the doubt
    that cleared the mismatches or None). In order:
    - subnormal_only: `ours_like_xla()` (our run again) under XLA's flush-to-zero matches;
    - sums that cancel (order_dependent results) judged against the size of their terms;
    - `references`: (name, callable returning other reference results or None), each in turn: a
      reference every mismatch matches clears them (jax op by op, jax.jit per batch element);
    - more_accurate_than_xla: the program on inputs one float width wider, keeping jax.jit's NaN
      and Inf (seed 2352569: a float16 reverse cumsum of 33 sorted terms that cancels, accumulated
      in float16 by XLA: erf of it -0.309, ours -0.3608, the exact value -0.36084; an Inf or NaN
      jax.jit does not have must be the wider result's too: seed 2342893, a float16 reverse cumsum
      whose exact value 65526.3 rounds to inf in float16, XLA stays at 65504);
    - ill_conditioned_only (inexact results): elements jax.jit's own answer does not pin down, its
      value moving beyond the tolerance when the float inputs move by a few ulps (seed 2353059:
      sin of a row's variance, 1.26e8 in float32 where one ulp is 8: jax -0.995, ours -0.332, sin
      of the exact variance 0.990; both variances within 2 ulps of the exact one)."""
    def against(reference, **kw):
        return [compare(g, w, *f, **kw) for g, w, f in zip(got, reference, flags)]

    def cleared_by(reference, ours=None) -> bool:
        ours = got if ours is None else ours
        return reference is not None and len(reference) == len(want) and all(
            m is None or compare(o, r, *f) is None for m, o, r, f in zip(msgs, ours, reference, flags))

    msgs = against(want)
    if not any(msgs):
        return msgs, None
    none = [None] * len(msgs)
    if ours_like_xla is not None and any(np.asarray(w).dtype.kind == "f" for w in want):
        _phase("ours")
        try:
            ftz = run_like_xla(ours_like_xla)
        except Exception:
            ftz = None
        if ftz is not None and len(ftz) == len(want) and all(
                compare(g, w, *f) is None for g, w, f in zip(ftz, want, flags)):
            return none, "subnormal_only"
    _phase("jax")
    if any(m is not None and f[2] for m, f in zip(msgs, flags)):
        mags = _reference_on(jitted, args, want, lambda a: np.abs(a) if a.dtype.kind == "f"
                             or str(a.dtype) == "bfloat16" else None)
        if mags is not None:
            msgs = [m if m is None or not f[2] else compare(g, w, *f, magnitude=mg)
                    for m, g, w, mg, f in zip(msgs, got, want, mags, flags)]
            if not any(msgs):
                return msgs, None
    for name, reference in references:
        if cleared_by(reference()):
            return none, name
    wide = _wider_reference(jitted, args, want)
    if wide is not None and all(m is None or (_keeps_non_finite(g, w) and compare(g, r, *f) is None)
                                for m, g, w, r, f in zip(msgs, got, want, wide, flags)):
        return none, "more_accurate_than_xla"
    if any(m is not None and not f[0] for m, f in zip(msgs, flags)):
        moved = _perturbed_reference(jitted, args, want)
        if moved is not None:
            msgs = [m if m is None or f[0] else
                    compare(g, w, *f, unstable=_moved_elements(mv, w, f[1], f[3]))
                    for m, g, w, mv, f in zip(msgs, got, want, moved, flags)]
            if not any(msgs):
                return msgs, "ill_conditioned_only"
    return msgs, None


def check_program(prog: gen.Program, target: str, var_list, stop_early=False, reference=True) -> dict:
    """Export, import, compile each variant once, run every binding, compare. Returns
    {"status": ok|fail|unsupported|refused|generator, "failures": [...], ...}; "refused": the
    target refused the program cleanly at compile time (refused_by_target). Without `reference`
    (jax.jit itself crashed on this program: XLA's bug) every variant still runs every binding,
    uncompared: status "reference-crash" when nothing of ours failed."""
    import jax

    import relax_mlir
    from relax_mlir.frontend.jax import UnsupportedOpError, from_jax

    res = {"seed": prog.seed, "target": target, "failures": [], "families": prog.families}
    try:
        fn = prog.function()
        specs = prog.specs()
        exported = jax.export.export(jax.jit(fn))(*specs)
    except Exception as e:  # the generator wrote a program jax cannot export: a fuzzer bug
        res.update(status="generator", detail=_short(e))
        return res
    from relax_mlir.frontend.jax import import_exported
    try:
        text = import_exported(exported)
    except UnsupportedOpError as e:
        res.update(status="unsupported", detail=_short(e))
        return res
    except Exception as e:
        res["failures"].append({"variant": "import", "binding": None, "kind": "import-error", "detail": _short(e)})
        res["status"] = "fail"
        return res
    del from_jax
    ref_fn = prog.function(reference=True)
    jitted = jax.jit(ref_fn)
    exact = prog.exact_outputs()
    precision = prog.output_precisions()
    summed = prog.order_dependent_outputs()
    unit = prog.unit_scale_outputs()
    refs = []
    _phase("jax")
    for env in prog.bindings():
        args = gen.make_inputs(prog, env)
        if not reference:
            refs.append((env, args, None))
            continue
        try:
            want = [np.asarray(w) for w in as_list(jitted(*args))]
        except Exception as e:
            res.update(status="generator", detail=f"jax.jit failed at {env}: {_short(e)}")
            return res
        refs.append((env, args, want))
    for var in var_list:
        vname = "full" if var is None else f"-{var}"
        if _IN_WORKER:  # a crash in this variant is then reported with its pipeline
            sys.stdout.write(f"@@VARIANT {vname}\n")
            sys.stdout.flush()
        try:
            exe = relax_mlir.compile(text, target=target, passes=pipeline(target, var))
        except relax_mlir.CompileError as e:
            if var is None and refused_by_target(e, target):
                res.update(status="refused", detail=_short(e))  # a clean, documented refusal
                return res
            if var is not None and refused_by_target(e, target):
                # a pipeline without one pass may leave what the target cannot hold, which the full
                # one fuses away (seed 2450892, Vulkan without relax-fuse-kernels: f16 nextafter's
                # i16 bits in a buffer of their own, read beside f16 values); a clean refusal
                res.setdefault("variants_refused", []).append({"variant": vname, "detail": _short(e)})
                continue
            res["failures"].append({"variant": vname, "binding": None, "kind": "compile-error",
                                    "detail": _short(e)})
            if stop_early:
                break
            continue
        except Exception as e:
            res["failures"].append({"variant": vname, "binding": None, "kind": "compile-error",
                                    "detail": _short(e)})
            if stop_early:
                break
            continue
        for env, args, want in refs:
            _phase("ours")
            try:
                got = as_list(exe(*args))
            except Exception as e:
                res["failures"].append({"variant": vname, "binding": env, "kind": "run-error", "detail": _short(e)})
                continue
            if want is None:
                continue
            if len(got) != len(want):
                res["failures"].append({"variant": vname, "binding": env, "kind": "mismatch",
                                        "detail": f"{len(got)} results, want {len(want)}"})
                continue
            flags = list(zip(exact, precision, summed, unit))
            eager = ("xla_fusion_only", lambda: _eager_reference(ref_fn, args, want))
            msgs, why = judge(got, want, flags, jitted, args, ours_like_xla=lambda: as_list(exe(*args)),
                              references=[eager])
            if why is not None:
                res.setdefault(why, []).append({"variant": vname, "binding": env})
            for i, msg in enumerate(msgs):
                if msg is not None:
                    res["failures"].append({"variant": vname, "binding": env, "kind": "mismatch",
                                            "detail": f"result #{i}: {msg}"})
        if prog.symbols and var is None:
            # a symbol bound to 0 is outside jax.export's assumption (>= 1): must be refused
            env0 = {s: 0 for s in prog.symbols}
            _phase("ours")
            try:
                exe(*gen.make_inputs(prog, env0))
                res["failures"].append({"variant": vname, "binding": env0, "kind": "not-refused",
                                        "detail": "a symbol bound to 0 (below its lower bound 1) was not refused"})
            except ValueError:
                pass
            except Exception as e:
                res["failures"].append({"variant": vname, "binding": env0, "kind": "run-error",
                                        "detail": f"want ValueError, got {_short(e)}"})
        if stop_early and res["failures"]:
            break
    res["status"] = "fail" if res["failures"] else ("ok" if reference else "reference-crash")
    return res


def minimize(prog: gen.Program, target: str, res: dict) -> tuple[gen.Program, dict]:
    """The shortest prefix of the program (one output: the first statement whose value is
    wrong) that still fails with the same kind in the same variant, and its first failure."""
    f0 = res["failures"][0]
    var = None if f0["variant"] in ("full", "import") else f0["variant"][1:]
    for name, _ in prog.stmts:
        sub = prog.restricted([name])
        if len(sub.stmts) >= len(prog.stmts) and sub.outputs == prog.outputs:
            break
        r = check_program(sub, target, [var], stop_early=True)
        if r.get("status") == "fail":
            same = [f for f in r["failures"] if f["kind"] == f0["kind"]]
            if same:
                return sub, same[0]
    return prog, f0


def repro(prog: gen.Program, target: str, failure: dict) -> str:
    """A self-contained script reproducing one failure."""
    var = failure["variant"]
    removed = None if var in ("full", "import") else var[1:]
    env = failure.get("binding") or (prog.bindings()[0] if prog.bindings() else {})
    lines = [f"# relax-mlir differential fuzzer: seed {prog.seed}, target {target}, "
             f"{'full pipeline' if removed is None else 'pipeline without ' + removed}",
             f"# {failure['kind']} at {env or 'static shapes'}: " + failure["detail"][:600].replace("\n", "\n# "),
             "import jax, jax.numpy as jnp, numpy as np, ml_dtypes", "from jax import lax",
             "import relax_mlir", "from relax_mlir.frontend.jax import from_jax",
             "jax.config.update('jax_enable_x64', True)", "nan, inf = np.nan, np.inf", ""]
    lines.append(prog.source().rstrip())
    lines.append(prog.specs_source().rstrip())
    if failure["kind"] == "import-error":
        lines.append("print(from_jax(f, *specs))")
        return "\n".join(lines) + "\n"
    lines.append(f"exe = relax_mlir.compile(from_jax(f, *specs), target={target!r}, "
                 f"passes={pipeline(target, removed)!r})")
    if failure["kind"] == "compile-error":
        return "\n".join(lines) + "\n"
    args = gen.make_inputs(prog, env)
    if sum(a.size for a in args) <= 600:
        for a in args:
            dt = "ml_dtypes.bfloat16" if str(a.dtype) == "bfloat16" else f"np.{a.dtype}"
            vals = a.astype(np.float64).tolist() if str(a.dtype) == "bfloat16" else a.tolist()
            lines.append(f"args.append(np.array({vals!r}, dtype={dt}).reshape({a.shape}))"
                         if lines[-1].startswith("args") else
                         f"args = [np.array({vals!r}, dtype={dt}).reshape({a.shape})]")
        if not args:
            lines.append("args = []")
    else:
        lines.append("import sys; sys.path.insert(0, 'test/python')  # run from the repository root")
        lines.append(f"from fuzz import gen; p = gen.generate({prog.seed}); "
                     f"args = [a for a, s in zip(gen.make_inputs(p, {env!r}), p.args) "
                     f"if s.name in {[a.name for a in prog.args]!r}]")
    ref = "f"
    if "jnp.min(" in prog.source() or "jnp.max(" in prog.source():
        # the comparison's reference: min/max reductions that propagate NaN (gen.SpecJnp)
        if not lines[-1].startswith("from fuzz"):
            lines.append("import sys; sys.path.insert(0, 'test/python')  # run from the repository root")
        lines.append("import types; from fuzz.gen import SpecJnp; "
                     "f_ref = types.FunctionType(f.__code__, dict(globals(), jnp=SpecJnp(jnp)))")
        ref = "f_ref"
    lines.append(f"got, want = exe(*args), jax.jit({ref})(*args)")
    lines.append("print('relax-mlir:', got); print('jax.jit:   ', want)")
    return "\n".join(lines) + "\n"


_IN_WORKER = False


def worker(seeds, target, all_variants, do_minimize, no_reference=()):
    import jax

    global _IN_WORKER
    _IN_WORKER = True

    jax.config.update("jax_enable_x64", True)
    out = sys.stdout
    for seed in seeds:
        out.write(f"@@START {seed}\n")
        out.flush()
        t0 = time.time()
        try:
            prog = gen.generate(seed)
            res = check_program(prog, target, variants(seed, target, all_variants),
                                reference=seed not in no_reference)
            if res["status"] == "fail":
                small, first = prog, res["failures"][0]
                if do_minimize and first["kind"] != "import-error":
                    small, first = minimize(prog, target, res)
                res["repro"] = repro(small, target, first)
        except Exception:
            res = {"seed": seed, "target": target, "status": "generator", "detail": traceback.format_exc()[-2000:],
                   "failures": []}
        res["seconds"] = round(time.time() - t0, 2)
        out.write("@@RESULT " + json.dumps(res, default=str) + "\n")
        out.flush()


# -- batches in worker processes ---------------------------------------------------------------

def _signal_name(rc: int) -> str:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def run_batch(seeds, target="cpu", all_variants=False, do_minimize=True, hang_s=300.0) -> list[dict]:
    """Run the seeds in worker processes (a new one after each crash); a result per seed. A program
    on which jax.jit itself dies (a signal while the reference ran: seed 2360773, XLA's SIGFPE on
    an integer remainder by zero it folds) is run again without the reference, so that ours still
    runs every variant and binding."""
    results: dict[int, dict] = {}
    todo = list(seeds)
    jax_died: dict[int, str] = {}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(HERE) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("RELAX_MLIR_NUM_THREADS", "1")
    env.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    while todo:
        with tempfile.TemporaryFile("w+") as outf, tempfile.TemporaryFile("w+") as errf:
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--target", target,
                   "--seeds", ",".join(map(str, todo))]
            if all_variants:
                cmd.append("--all-variants")
            if not do_minimize:
                cmd.append("--no-minimize")
            if jax_died:
                cmd += ["--no-reference", ",".join(map(str, jax_died))]
            p = subprocess.Popen(cmd, stdout=outf, stderr=errf, env=env)
            last_size, last_change = 0, time.time()
            while p.poll() is None:
                time.sleep(0.2)
                size = os.fstat(outf.fileno()).st_size
                if size != last_size:
                    last_size, last_change = size, time.time()
                elif time.time() - last_change > hang_s:
                    p.kill()
                    p.wait()
                    break
            rc = p.returncode
            outf.seek(0)
            started, variant, phase = None, "full", "ours"
            for line in outf:
                if line.startswith("@@START "):
                    started, variant, phase = int(line.split()[1]), "full", "ours"
                elif line.startswith("@@VARIANT "):
                    variant, phase = line.split()[1], "ours"
                elif line.startswith("@@PHASE "):
                    phase = line.split()[1]
                elif line.startswith("@@RESULT "):
                    r = json.loads(line[len("@@RESULT "):])
                    results[r["seed"]] = r
                    started = None
            todo = [s for s in todo if s not in results]
            if not todo:
                break
            errf.seek(0)
            err = errf.read()[-3000:]
            if started is None:  # died before starting a program: report every remaining seed
                for s in todo:
                    results[s] = {"seed": s, "target": target, "status": "fail", "failures": [
                        {"variant": "?", "binding": None, "kind": "worker-died",
                         "detail": f"worker {_signal_name(rc)} before any program: {err}"}]}
                break
            hung = rc == -signal.SIGKILL
            if phase == "jax" and not hung and started not in jax_died:
                jax_died[started] = f"jax.jit died: {_signal_name(rc)}"
                continue
            kind = "hang" if hung else "crash"
            detail = (f"no progress for {hang_s:.0f} s" if hung else f"worker died: {_signal_name(rc)}") + \
                f"; stderr tail:\n{err}"
            prog = gen.generate(started)
            fail = {"variant": variant, "binding": None, "kind": kind, "detail": detail}
            results[started] = {"seed": started, "target": target, "status": "fail", "failures": [fail],
                                "families": prog.families,
                                "repro": repro(prog, target, dict(fail, kind="crash"))}
            todo = [s for s in todo if s != started]
    for s, why in jax_died.items():
        if results[s]["status"] == "reference-crash":
            results[s]["detail"] = why
    return [results[s] for s in seeds]


def describe(r: dict) -> str:
    """A failed result, for a test's failure message: every failure line and the repro."""
    lines = [f"seed {r['seed']} ({r['target']}):"]
    for f in r["failures"][:6]:
        lines.append(f"  [{f['variant']}] {f['kind']} at {f['binding']}: {f['detail'][:800]}")
    if len(r["failures"]) > 6:
        lines.append(f"  ... {len(r['failures']) - 6} more")
    if r.get("repro"):
        lines.append("  repro:\n    " + r["repro"].rstrip().replace("\n", "\n    "))
    return "\n".join(lines)


def in_process_main(run_seed, description: str, modes: tuple[str, ...] = ()) -> int:
    """The command line of the in-process campaigns over generated programs (grad_campaign,
    vmap_campaign): `run_seed(seed)` -> {"seed", "status", "detail"}; a "wrong" or "error"
    status is printed and makes the exit status 1. With `modes`, a `--mode` option (the first
    by default) and `run_seed(seed, mode)`."""
    import jax

    jax.config.update("jax_enable_x64", True)  # the programs' float64 and int64 values
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--programs", type=int, default=200)
    p.add_argument("--first-seed", type=int, default=gen.V9_FIRST_SEED)
    p.add_argument("--seeds", default="", help="comma-separated seeds (instead of a range)")
    p.add_argument("--out", default="")
    if modes:
        p.add_argument("--mode", choices=modes, default=modes[0])
    a = p.parse_args()
    seeds = [int(s) for s in a.seeds.split(",") if s] or range(a.first_seed, a.first_seed + a.programs)
    counts: dict[str, int] = {}
    out = open(a.out, "a") if a.out else None
    for seed in seeds:
        print(f"seed {seed}", file=sys.stderr, flush=True)
        r = run_seed(seed, a.mode) if modes else run_seed(seed)
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        if r["status"] in ("wrong", "error"):
            print(f"{seed}: {r['status'].upper()} {r['detail'][:500]}", flush=True)
        if out:
            out.write(json.dumps(r) + "\n")
            out.flush()
    print(counts, flush=True)
    return 1 if counts.get("wrong") or counts.get("error") else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=5000, help="CPU programs (seeds first-seed ...)")
    ap.add_argument("--first-seed", type=int, default=100000)
    ap.add_argument("--seeds", help="comma-separated seeds instead of a range")
    ap.add_argument("--vulkan", type=int, default=500, help="how many of the programs also run on Vulkan")
    ap.add_argument("--all-variants", action="store_true", help="compile each program once per removed pass")
    ap.add_argument("--batch", type=int, default=50, help="programs per worker process")
    ap.add_argument("--no-minimize", action="store_true")
    ap.add_argument("--out", default="fuzz-results.jsonl", help="every result, one JSON line each")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--target", default="cpu", help=argparse.SUPPRESS)
    ap.add_argument("--no-reference", default="", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")] if a.seeds else list(range(a.first_seed, a.first_seed + a.programs))
    if a.worker:
        worker(seeds, a.target, a.all_variants, not a.no_minimize,
               {int(s) for s in a.no_reference.split(",") if s})
        return 0
    jobs = [("cpu", seeds)]
    if a.vulkan:
        jobs.append(("vulkan", seeds[:a.vulkan]))
    counts: dict[str, dict[str, int]] = {}
    failed = []
    t0 = time.time()
    with open(a.out, "w") as out:
        for target, ss in jobs:
            c = counts.setdefault(target, {})
            for i in range(0, len(ss), a.batch):
                for r in run_batch(ss[i:i + a.batch], target, a.all_variants, not a.no_minimize):
                    c[r["status"]] = c.get(r["status"], 0) + 1
                    out.write(json.dumps(r, default=str) + "\n")
                    if r["status"] in ("fail", "generator"):
                        failed.append(r)
                        print(describe(r) if r["status"] == "fail" else f"seed {r['seed']}: GENERATOR {r['detail']}",
                              flush=True)
                print(f"[{time.time() - t0:7.0f} s] {target}: {min(i + a.batch, len(ss))}/{len(ss)} {c}", flush=True)
    print(f"done in {time.time() - t0:.0f} s: {counts}; results in {a.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
