"""`relax-multiversion`: a matmul whose best implementation depends on a symbolic row count gets
several versions, chosen at run time by predicates on that symbol, in one artifact.

Graph level, after `relax-dispatch-library`, before `relax-legalize` (CPU target). A 2-D f32
`relax.matmul` (or an untransposed 2-D `relax_v.call_library` sgemm) `[m, K] x [K, N]` with `m`
symbolic and K, N static becomes

    %r = "relax_v.call_library"(%x, %w) {callee = "sgemm", transpose_a = false, transpose_b = false,
            rows = "m", versions = [{impl = "sgemm", max_rows = 2 : i64}, {impl = "generated"}]}

when the cost table below prefers different implementations for different `m`: the versions are
tried in order, the first whose `max_rows` is >= the bound `m` runs (the last has none). `impl` is
`sgemm` (BLAS) or `generated` (backend/cpu_matmul.py's register-blocked code). A matmul for which
one implementation wins at every `m` is left alone (`relax-dispatch-library` decided it).

Design: the versions ride on the call op as data rather than as graph-level control flow
(`relax_v.if` over outlined branch functions), because the choice is inside one kernel: every
version reads the same operands and writes the same destination, so memory planning, fusion and
the shape checks must not see three calls. `relax-legalize` (`call_library_kernel`) turns the
attribute into ONE kernel whose body is an `scf.if` chain on `tensor.dim %x, 0` (the symbol's
value): each branch holds a zero fill and either the BLAS-tagged matmul generic or a
`linalg.matmul` tagged with the cpu_matmul variant that fits its row range (`gemv` at 1 row,
`small` up to 4, `medium` up to 16, `large`); the CPU backend schedules each generated branch
with its own schedule and replaces each tagged generic by an sgemm call after bufferization. So the lit test
of this pass shows the predicates, and the one of `relax-multiversion,relax-legalize` the switch.

The cost table (`versions_for`): one thread, this machine (AVX2, 2 cores shared, load 3.6-4.4),
time per call of the generated kernel (ONE compile, dynamic M) against scipy-openblas32's sgemm
called through ctypes, interleaved, the best of three 0.15 s medians, `bench/dispatch.py
--crossover`; ratios generated / BLAS:

| K x N       | M=1  | 2    | 4    | 7    | 16   | 32   | 64   | 128  | 512  |
|-------------|------|------|------|------|------|------|------|------|------|
| 256 x 256   | 1.85 | 1.72 | 1.45 | 1.31 | 0.78 | 0.91 | 0.93 | 0.90 | 0.95 |
| 256 x 1024  | 1.42 | 1.27 | 0.42 | 0.50 | 0.85 | 0.87 | 0.93 | 0.95 | 0.95 |
| 1024 x 256  | 1.51 | 1.51 | 0.49 | 0.49 | 0.75 | 1.00 | 0.99 | 0.96 | 0.65 |
| 512 x 2048  | 0.33 | 0.33 | 0.33 | 0.36 | 0.71 | 1.09 | 1.09 | 1.01 | 1.02 |
| 2048 x 512  | 0.46 | 0.45 | 0.43 | 0.43 | 0.72 | 0.98 | 1.14 | 1.56 | 1.39 |

Read as: OpenBLAS wins the matrix-vector end while the weights are small (K*N <= 2^16 up to 8
rows, <= 2^18 up to 2 rows); the generated streaming kernels win from there to 16 rows, and
reading a large weight matrix once per row block (K*N >= 2^20) from 1 row; at K >= 2048 OpenBLAS's
K blocking wins from 64 rows (1.14-1.56x). K or N below 256 was not measured: left to
`relax-dispatch-library`.

The LLM's weights (issue 17: an LLM prefill's products are [b*s, K] x [K, N] with b*s = the
prompt's tokens), measured the same way but as MEDIANS of interleaved single calls (what a call
costs under the shared machine's real load, here 10-11 on 2 cores; `bench/dispatch.py
--crossover --llm`), ratio generated / one-thread BLAS, generated on 1 thread / on 2 threads
(the multi-threaded build that a prefill runs, its arguments being over
RELAX_MLIR_PARALLEL_MIN_ELEMENTS):

| K x N        | M=16        | 17          | 32          | 64           | 128         | 512         |
|--------------|-------------|-------------|-------------|--------------|-------------|-------------|
| 1024 x 1024  | 0.85 / 6.09 | 1.36 / 7.75 | 1.23 / 8.60 | 1.15 / 10.58 | 2.56 / 2.46 | 1.41 / 1.44 |
| 1024 x 256   | 1.53 / 9.11 | 1.79 / 1.58 | 1.57 / 1.42 | 1.49 / 5.57  | 1.26 / 8.40 | 1.03 / 9.44 |
| 1024 x 2816  | 0.14 / 1.02 | 0.97 / 8.04 | 0.87 / 0.98 | 0.98 / 1.15  | 0.98 / 0.81 | 1.30 / 0.96 |
| 2816 x 1024  | 0.13 / 1.03 | 1.94 / 1.32 | 2.77 / 3.71 | 4.13 / 2.48  | 3.64 / 2.52 | 3.86 / 3.40 |
| 1024 x 32000 | 1.02 / 0.68 | 1.80 / 1.22 | 1.21 / 1.11 | 1.18 / 1.11  | 1.02 / 0.97 | 1.17 / 0.62 |

Read as: past the streaming variants (17 rows and up) one-thread OpenBLAS matches or beats the
packed generated kernel on every one of these weights, by 2-4x at K = 2816 (the generated kernel
blocks K there and reads B unpacked); the generated code on two threads is slower still in most
cells (its worker waits for a core that another process holds), and OpenBLAS on two threads was
1-250x slower than on one (the barrier of runtime/library.py). So a product with K*N >= 2^20, or
K >= 1024 and K*N >= 2^18, runs the generated streaming kernels up to 16 rows and BLAS above;
the rows <= 16 entries are the table above's. The minimum times of the same run (the machine's
quiet moments) agree within 0.7-1.4x except at M = 16, where the streaming kernel wins.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mlir import ir

from relax_mlir import knobs
from relax_mlir.dialect.types import TensorType, view
from relax_mlir.passes import ModulePass, PassError, PipelineError
from relax_mlir.runtime import library, native_rt
from relax_mlir.shape import const
from relax_mlir.transforms.infer_shapes import check_module, graph_ops_named

VERSIONS_ATTR = "versions"
ROWS_ATTR = "rows"

# cpu_matmul.MatmulConfig's streaming variants (gemv_m_max, small_m_max, medium_m_max): the
# generated versions are split at these row counts so that each branch gets the schedule made for it.
GENERATED_VARIANTS = (("gemv", 1), ("small", 4), ("medium", 16), ("large", None))


def versions_for(k: int, n: int) -> list[tuple[int | None, str]]:
    """(max rows, impl) in dispatch order for a [m, k] x [k, n] f32 matmul; the last is
    unbounded. Empty when the table has no data for (k, n). From the measured table above."""
    if k < 256 or n < 256:
        return []
    out: list[tuple[int | None, str]] = []
    if k * n <= 1 << 16:
        out.append((8, "sgemm"))
    elif k * n <= 1 << 18:
        out.append((2, "sgemm"))
    if k * n >= 1 << 20 or (k >= 1024 and k * n >= 1 << 18):
        # Past the streaming variants (16 rows), the packed generated kernel loses to one-thread
        # OpenBLAS on these weights (the LLM table above), most of all in a multi-threaded build.
        # At one row, OpenBLAS's sgemv (what relax_rt_sgemm runs there) reads the weights as fast
        # as the generated gemv on one thread, and splits them over the run-time library's pool.
        if native_rt.pooled_products() and not out:
            out.append((1, "sgemm"))
        out += [(dict(GENERATED_VARIANTS)["medium"], "generated"), (None, "sgemm")]
    else:
        out.append((None, "generated"))
    return out


def leaves(versions: list[tuple[int | None, str]]) -> list[tuple[int | None, str]]:
    """The versions with each `generated` range split into the cpu_matmul variants it covers:
    (max rows, "sgemm" | "gemv" | "small" | "medium" | "large"), in order, the last unbounded."""
    out: list[tuple[int | None, str]] = []
    lo = 0
    for hi, impl in versions:
        if impl == "sgemm":
            out.append((hi, "sgemm"))
        else:
            for name, lim in GENERATED_VARIANTS:
                if lim is not None and lim <= lo:
                    continue
                if hi is not None and (lim is None or lim >= hi):
                    out.append((hi, name))
                    break
                out.append((lim, name))
        if hi is None:
            break
        lo = hi
    return out


def read_versions(op: ir.Operation) -> list[tuple[int | None, str]] | None:
    """The `versions` attribute of a call_library op as (max rows, impl) pairs, or None."""
    if VERSIONS_ATTR not in op.attributes:
        return None
    out = []
    try:
        for d in ir.ArrayAttr(op.attributes[VERSIONS_ATTR]):
            d = ir.DictAttr(d)
            impl = ir.StringAttr(d["impl"]).value
            hi = ir.IntegerAttr(d["max_rows"]).value if "max_rows" in d else None
            out.append((hi, impl))
    except (ValueError, KeyError, TypeError):
        out = []
    ok = bool(out) and out[-1][0] is None and all(h is not None and h >= 0 for h, _ in out[:-1]) and \
        all(impl in ("sgemm", "generated") for _, impl in out) and \
        all(a[0] < b[0] for a, b in zip(out[:-2], out[1:-1]))
    if not ok:
        raise PassError(op, f"'{op.name}' op: versions must be a list of {{impl = \"sgemm\" | \"generated\", "
                            f"max_rows = N}} with increasing N, the last without max_rows; got "
                            f"{op.attributes[VERSIONS_ATTR]}")
    return out


def _reshape(x: ir.Value, t: TensorType) -> ir.Value:
    """`relax.reshape` of `x` to `t` (same elements, row-major) at the current insertion point."""
    i64 = ir.IntegerType.get_signless(64)
    shape = ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d.value) if d.is_const else ir.StringAttr.get(str(d))
                              for d in t.dims])
    return ir.Operation.create("relax.reshape", results=[t.to_mlir()], operands=[x],
                               attributes={"shape": shape}).results[0]


def _static(d) -> int | None:
    return d.value if d is not None and d.is_const else None


def _bool(op: ir.Operation, name: str) -> bool:
    return bool(library_flag(op, name))


def library_flag(op: ir.Operation, name: str) -> bool | None:
    """A `relax_v.call_library` boolean attribute (`transpose_a`/`transpose_b`; absent = false),
    None when it is there but not a bool (malformed: relax-legalize reports it)."""
    if name not in op.attributes:
        return False
    a = op.attributes[name]
    return bool(ir.BoolAttr(a).value) if isinstance(a, ir.BoolAttr) else None


def library_callee(op: ir.Operation) -> str | None:
    """The routine a `relax_v.call_library` names (its string `callee`), None when malformed."""
    a = op.attributes["callee"] if "callee" in op.attributes else None
    return ir.StringAttr(a).value if isinstance(a, ir.StringAttr) else None


LIBRARY_MODES = ("auto", "always", "never")


def check_library_mode(p) -> None:
    """The `mode` option of relax-dispatch-library and relax-multiversion: "" (RELAX_MLIR_LIBRARY)
    or one of LIBRARY_MODES; PipelineError otherwise."""
    if p.mode and p.mode not in LIBRARY_MODES:
        raise PipelineError(f"option mode of {p.name} must be auto, always or never (or empty: "
                            f"RELAX_MLIR_LIBRARY), got '{p.mode}'")


@dataclass(frozen=True)
class MultiversionPass(ModulePass):
    """Give symbolic-row matmuls run-time versions (BLAS / generated) guarded by predicates on the symbol."""

    name: ClassVar[str] = "relax-multiversion"
    mode: str = ""  # auto | always | never (library use, as relax-dispatch-library); "" reads RELAX_MLIR_LIBRARY

    def validate(self) -> None:
        check_library_mode(self)

    def run(self, module: ir.Operation) -> None:
        mode = self.mode or knobs.use_library()
        if mode not in ("auto", "always", "never"):
            raise ValueError(f"relax-multiversion: mode must be auto, always or never, not '{mode}'")
        if mode != "auto" or not library.available():
            return  # never: no BLAS version; always: every matmul is BLAS already
        check_module(module, infer=True)
        for op in graph_ops_named(module, ("relax.matmul", "relax_v.call_library")):
            self.rewrite(op)

    def rewrite(self, op: ir.Operation) -> None:
        if op.name == "relax_v.call_library":
            if (library_callee(op) != "sgemm" or VERSIONS_ATTR in op.attributes
                    or _bool(op, "transpose_a") or _bool(op, "transpose_b")):
                return
        if len(op.operands) != 2 or len(op.results) != 1:
            return
        a, b, r = view(op.operands[0].type), view(op.operands[1].type), view(op.results[0].type)
        if not all(isinstance(t, TensorType) and t.known for t in (a, b, r)):
            return
        if {a.dtype, b.dtype, r.dtype} != {"f32"} or len(a.dims) < 2 or len(b.dims) != 2 or len(r.dims) != len(a.dims):
            return
        m, k, n = const(1), _static(b.dims[0]), _static(b.dims[1])
        for d in a.dims[:-1]:  # the lhs's leading dims fold into the row count ([b, s, K]: b*s rows)
            m = m * d
        if m.is_const or k is None or n is None or _static(a.dims[-1]) != k:
            return
        versions = versions_for(k, n)
        if len({impl for _, impl in versions}) < 2:
            return  # one implementation wins at every row count
        x = op.operands[0]
        if len(a.dims) > 2:
            # One sgemm (or one generated matmul) over all b*s rows: the operand and the result
            # are row-major, so [b, s, K] -> [b*s, K] and back are views, not copies.
            with ir.InsertionPoint(op), op.location:
                x = _reshape(x, a.with_dims((m, k)))
        attrs = {"callee": ir.StringAttr.get("sgemm"), "transpose_a": ir.BoolAttr.get(False),
                 "transpose_b": ir.BoolAttr.get(False), ROWS_ATTR: ir.StringAttr.get(str(m)),
                 VERSIONS_ATTR: ir.ArrayAttr.get([ir.DictAttr.get(
                     {"impl": ir.StringAttr.get(impl),
                      **({} if hi is None else {"max_rows": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), hi)})})
                     for hi, impl in versions])}
        with ir.InsertionPoint(op), op.location:
            rt = r.with_dims((m, n))
            call = ir.Operation.create("relax_v.call_library", results=[rt.to_mlir()],
                                       operands=[x, op.operands[1]], attributes=attrs).results[0]
            if len(r.dims) > 2:
                call = _reshape(call, r)
        op.results[0].replace_all_uses_with(call)
        op.erase()


PASSES = (MultiversionPass,)
