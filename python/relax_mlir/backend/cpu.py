"""CPU backend: ordered IR -> IR stages from upstream linalg on tensors to the LLVM dialect, and a JIT.

Triton-style layering: a frozen `CPUOptions`, an ordered dict `STAGES` of named functions
`(module, options) -> None` that mutate the module in place, and `lower()` that runs them in order.

Input contract (produced by `relax-to-upstream`): private kernel functions on tensors in
destination-passing style (inputs, outs, then `index` symbols) returning their outs; public entry
functions on memrefs carrying `llvm.emit_c_interface`, with `bufferization.to_tensor ... restrict`
for inputs and `bufferization.materialize_in_destination ... restrict writable` for outputs, plus
a trailing `memref<1xi32>` error slot.

Stages, in order (`pipeline_strings()` gives the upstream pipelines):

* ``vectorize``  per kernel, on tensors, through `transform-interpreter` with an injected
  `@__transform_main`. First a kernel-level schedule (`_kernel_schedule`: the register-blocked
  matmul of backend/cpu_matmul.py); else named ops are generalized (matmuls excepted) and every
  linalg op tries its schedules in order (`_schedule_for`): forall over outer parallel rows for
  threads, register tiles, peeled partial tiles, vectorized full tiles (row reductions keep a
  vector of partial sums, `tile_reduction_using_for`); else tile only; else scalar. Each attempt
  runs on a scratch copy of the kernel, so a failing transform never leaves a half-transformed
  kernel behind. Partial tiles left by peeling are vectorized afterwards when they still hold
  a few lanes. Each kernel gets `relax_cpu.schedules = [label per op]`.
* ``inline``     kernels into the entries (lower-affine first: the inliner refuses affine ops
  whose symbols would stop being valid), symbol-dce, canonicalize, cse.
* ``bufferize``  empty-tensor elimination (outputs are computed in place in the caller's buffers,
  no copy), one-shot bufferization with identity layouts, forall -> parallel and loop hoisting of
  buffers, ownership-based deallocation (no temporary leaks).
* ``parallelize`` `scf.parallel` -> `async-parallel-for` on the async runtime; with one thread,
  plain `scf.for` loops (no async code at all).
* ``to-llvm``    loops, vector-to-scf (fully unrolled: no alloca in loops), affine, i1 memory as
  bytes, then the conversions to the LLVM dialect.

`JitModule` wraps `mlir.execution_engine.ExecutionEngine` and calls entries with numpy arrays in
place (see `JitModule.invoke` for the ABI).
"""
from __future__ import annotations

import ctypes
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from mlir import ir
from mlir.dialects import arith

from relax_mlir import knobs
from relax_mlir.backend.common import (INT32_MAX, LoweringError, as_op, option_bool, option_int, option_ints,
                                      require_upstream, run_pipeline, run_stages, split_pipeline, top_funcs,
                                      unshare_empty_tensors, verify, walk)
from relax_mlir.backend.cpu_blocked_sums import block_float_sums
from relax_mlir.backend.cpu_engine import SplitEngine
from relax_mlir.backend.cpu_fpmode import flush_denormals, host_supports_flush
from relax_mlir.backend.cpu_masks import row_masks_as_bounds
from relax_mlir.backend.cpu_outline import outline_host_loops
from relax_mlir.backend.cpu_profile import instrument as instrument_for_profile
from relax_mlir.passes import ModulePass, PipelineError

__all__ = [
    "CPUOptions",
    "CPU_PASSES",
    "CPUBufferizePass",
    "CPUCallsPass",
    "CPULowerPass",
    "CPUParallelizePass",
    "CPURowMasksPass",
    "CPUToLLVMPass",
    "CPUVectorizePass",
    "JitModule",
    "LinalgOpInfo",
    "LoweringError",
    "STAGES",
    "legalize_i1_memory",
    "lower",
    "pipeline_strings",
    "split_pipeline",
]

_log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------


def _default_num_threads() -> int:
    return knobs.num_threads_setting() or os.cpu_count() or 1


@dataclass(frozen=True)
class CPUOptions:
    """Options of the CPU backend; hashable, so usable as a compile-cache key."""

    # LLVM's optimization and code-generation level. 2, not 3: on an idle machine the kernels ran
    # as fast at O2 as at O3 (MLP, transformer block, the 12-layer LLM's prefill and decode, the
    # host loops of bench/scan.py: 0.95-1.07 of O3's time, within run-to-run noise) and a 12-layer
    # LLM prefill compiled 0.5 s faster (BENCHMARKS.md, "Session 13").
    opt_level: int = 2
    num_threads: int = field(default_factory=_default_num_threads)
    vectorize: bool = True
    # Bytes of one SIMD register (AVX2: 32). A vector tile is `vector_bytes // elem_bytes`
    # elements times `vector_unroll`.
    vector_bytes: int = 32
    vector_unroll: int = 2
    # A static innermost dimension up to this many elements is vectorized whole, untiled.
    max_full_vector: int = 64
    # Elements of iteration space per parallel task (scf.forall iteration); `async-parallel-for`
    # then groups at least `min_task_size` iterations into one task.
    parallel_grain: int = 16384
    min_task_size: int = 1
    # Dynamic dims are assumed this large when sizing parallel chunks.
    assumed_dynamic_size: int = 64
    # Fallback matmul schedule (backend/cpu_matmul.py provides the register-blocked one):
    # register tile (m, n, k) and rows of one parallel task.
    matmul_tile: tuple[int, int, int] = (4, 16, 1)
    matmul_parallel_rows: int = 32
    # Denormal floats flushed to zero while the code runs (XLA's CPU mode; cpu_fpmode.py); else
    # the code runs in its caller's mode (IEEE unless the caller changed it).
    flush_denormals: bool = field(default_factory=knobs.flush_denormals)

    def __post_init__(self):
        """Every field checked (type and range) and normalized (numpy ints as int, a list as a tuple)."""
        ints = {"opt_level": (0, 3, ""), "num_threads": (1, INT32_MAX, ""),
                "vector_unroll": (1, 16, " (vector registers per vector tile)"),
                "max_full_vector": (0, 4096, " (elements of a static innermost dim vectorized whole)"),
                "parallel_grain": (1, INT32_MAX, ""), "min_task_size": (1, INT32_MAX, ""),
                "assumed_dynamic_size": (1, INT32_MAX, ""), "matmul_parallel_rows": (1, INT32_MAX, "")}
        for name, (lo, hi, what) in ints.items():
            object.__setattr__(self, name, option_int(name, getattr(self, name), lo, hi, what))
        vb = self.vector_bytes
        if vb not in (4, 8, 16, 32, 64) or isinstance(vb, (bool, np.bool_, float, np.floating)):
            raise ValueError(f"vector_bytes must be a power of two in 4..64{_VECTOR_BYTES}, got {vb!r}")
        object.__setattr__(self, "vector_bytes", int(vb))
        object.__setattr__(self, "matmul_tile", option_ints("matmul_tile", self.matmul_tile, (3, 3), 1, 64,
                                                            " (the fallback matmul's register tile m, n, k)"))
        for name in ("vectorize", "flush_denormals"):
            object.__setattr__(self, name, option_bool(name, getattr(self, name)))


_VECTOR_BYTES = " (bytes of one SIMD register: 16 SSE/NEON, 32 AVX2, 64 AVX-512)"


# --------------------------------------------------------------------------------------------
# Function helpers (the errors and pipeline helpers are in backend/common.py)
# --------------------------------------------------------------------------------------------


def _sym_name(func) -> str:
    return ir.StringAttr(func.attributes["sym_name"]).value


def _is_private(func) -> bool:
    attrs = func.attributes
    return "sym_visibility" in attrs and ir.StringAttr(attrs["sym_visibility"]).value == "private"


def _is_declaration(func) -> bool:
    return len(func.regions[0].blocks) == 0


def _kernels(module_op: ir.Operation) -> list[ir.OpView]:
    """Private, defined functions: the kernels."""
    return [f for f in top_funcs(module_op) if _is_private(f) and not _is_declaration(f)]


# --------------------------------------------------------------------------------------------
# Kernel analysis
# --------------------------------------------------------------------------------------------

_MATMUL_NAMES = ("linalg.matmul", "linalg.batch_matmul")
_ELEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8}


def _elem_bytes(t: ir.Type) -> int:
    return _ELEM_BYTES.get(str(t), 4)


@dataclass(frozen=True)
class LinalgOpInfo:
    """What a schedule needs to know about one linalg op (read from its maps and operand types).

    `ranges[d]` is the static extent of loop `d` or None when dynamic; `vector_dim` the loop that
    walks the contiguous dimension of the widest operand; `kind` one of "elementwise",
    "reduction", "matmul", "other". For matmuls `matmul_dims` names the loops (batch, m, n, k),
    batch being None for a plain matmul.
    """

    name: str
    iterators: tuple[str, ...]
    ranges: tuple[int | None, ...]
    vector_dim: int | None
    elem_bytes: int
    kind: str
    has_i1: bool
    has_extract: bool
    has_index: bool = False  # the body reads a loop index (linalg.index)
    matmul_dims: tuple[int | None, int, int, int] | None = None

    @property
    def rank(self) -> int:
        return len(self.iterators)


def _affine_maps(op) -> list[ir.AffineMap] | None:
    if "indexing_maps" not in op.attributes:
        return None
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _default_named_maps(op) -> tuple[list[ir.AffineMap], list[str]] | None:
    name = op.operation.name
    ctx = op.context
    d = [ir.AffineDimExpr.get(i, ctx) for i in range(4)]
    if name == "linalg.matmul":
        m, n, k = d[0], d[1], d[2]
        maps = [ir.AffineMap.get(3, 0, e, ctx) for e in ([m, k], [k, n], [m, n])]
        return maps, ["parallel", "parallel", "reduction"]
    if name == "linalg.batch_matmul":
        b, m, n, k = d
        maps = [ir.AffineMap.get(4, 0, e, ctx) for e in ([b, m, k], [b, k, n], [b, m, n])]
        return maps, ["parallel", "parallel", "parallel", "reduction"]
    return None


def _iterators(op) -> list[str] | None:
    if "iterator_types" not in op.attributes:
        return None
    out = []
    for a in ir.ArrayAttr(op.attributes["iterator_types"]):
        s = str(a)
        out.append("reduction" if "reduction" in s else "parallel")
    return out


def _dim_position(expr) -> int | None:
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position
    return None


def _dps_operands(op) -> tuple[list[ir.Value], int]:
    """All ins+outs operands and the number of ins (from operandSegmentSizes)."""
    operands = list(op.operands)
    if "operandSegmentSizes" in op.attributes:
        seg = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])
        n_in = seg[0]
        return operands[: seg[0] + seg[1]], n_in
    return operands, len(operands) - 1


def _is_i1(t: ir.Type) -> bool:
    """Whether `t` is the 1-bit integer type (bool), by the bindings' type API."""
    return isinstance(t, ir.IntegerType) and t.width == 1


def _body_op_names(op) -> set[str]:
    """The names of the ops in `op`'s body, with "i1-extract" added when one reads an i1 tensor
    (captured from above, not an operand: vectorized, it would be a gather of bit-packed i1)."""
    names: set[str] = set()

    def add(o):
        names.add(o.name)
        if o.name == "tensor.extract" and _is_i1(o.operands[0].type.element_type):
            names.add("i1-extract")

    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                walk(inner.operation, add)
    return names


def _is_matmul_generic(maps, iterators, n_in, body_ops) -> tuple[int | None, int, int, int] | None:
    """Recognize C[.., m, n] += A[.., m, k] * B[.., k, n] (maps may be permuted) in a generic."""
    if n_in != 2 or len(maps) != 3 or iterators.count("reduction") != 1:
        return None
    allowed = {"arith.mulf", "arith.addf", "arith.muli", "arith.addi", "arith.extf", "arith.extsi",
               "arith.extui", "arith.truncf", "linalg.yield"}
    if not body_ops <= allowed or not ({"arith.mulf", "arith.muli"} & body_ops):
        return None
    dims = []
    for m in maps:
        ds = [_dim_position(e) for e in m.results]
        if any(x is None for x in ds):
            return None
        dims.append(ds)
    a, b, c = (set(x) for x in dims)
    (k,) = [i for i, it in enumerate(iterators) if it == "reduction"]
    if k not in a or k not in b or k in c:
        return None
    if len(c) < 2 or len(dims[2]) < 2:
        return None
    m_dim, n_dim = dims[2][-2], dims[2][-1]
    if m_dim not in a or m_dim in b or n_dim not in b or n_dim in a:
        return None
    batch = [x for x in dims[2][:-2]]
    if len(batch) > 1 or any(x not in a or x not in b for x in batch):
        return None
    if len(c) + 1 != len(iterators):
        return None
    return (batch[0] if batch else None, m_dim, n_dim, k)


def analyze_linalg_op(op) -> LinalgOpInfo | None:
    """Read a `LinalgOpInfo` from a linalg.generic or a named matmul; None for anything else."""
    name = op.operation.name
    maps = _affine_maps(op)
    iterators = _iterators(op)
    if maps is None or iterators is None:
        named = _default_named_maps(op)
        if named is None:
            return None
        maps, iterators = named
    operands, n_in = _dps_operands(op)
    if len(operands) != len(maps):
        return None
    n_loops = maps[0].n_dims
    ranges: list[int | None | str] = ["unknown"] * n_loops
    has_i1 = False
    best = None  # (rank, is_input, operand index)
    for idx, (v, m) in enumerate(zip(operands, maps)):
        t = v.type
        if not isinstance(t, ir.ShapedType):
            if _is_i1(t):
                has_i1 = True
            continue
        st = t
        if _is_i1(st.element_type):
            has_i1 = True
        if not st.has_rank:
            continue
        shape = st.shape
        for k, e in enumerate(m.results):
            d = _dim_position(e)
            if d is None:
                continue
            s = shape[k]
            static = not ir.ShapedType.is_dynamic_size(s)
            if static:
                ranges[d] = s
            elif ranges[d] == "unknown":
                ranges[d] = None
        key = (st.rank, idx < n_in)
        if best is None or key > best[0]:
            best = (key, idx, st, m)
    fixed: tuple[int | None, ...] = tuple(None if r == "unknown" else r for r in ranges)
    vector_dim = None
    elem_bytes = 4
    if best is not None:
        _, _, st, m = best
        elem_bytes = _elem_bytes(st.element_type)
        if m.results:
            vector_dim = _dim_position(m.results[-1])
    if vector_dim is None and n_loops:
        vector_dim = n_loops - 1
    body_ops = _body_op_names(op)
    matmul_dims = None
    if name in _MATMUL_NAMES and "indexing_maps" not in op.attributes:
        matmul_dims = (None, 0, 1, 2) if name == "linalg.matmul" else (0, 1, 2, 3)
    elif name in _MATMUL_NAMES or name == "linalg.generic":
        matmul_dims = _is_matmul_generic(maps, iterators, n_in, body_ops)
    if matmul_dims is not None:
        kind = "matmul"
    elif name != "linalg.generic":
        kind = "other"
    elif all(it == "parallel" for it in iterators):
        kind = "elementwise"
    else:
        kind = "reduction"
    return LinalgOpInfo(
        name=name,
        iterators=tuple(iterators),
        ranges=fixed,
        vector_dim=vector_dim,
        elem_bytes=elem_bytes,
        kind=kind,
        has_i1=has_i1 or "i1-extract" in body_ops,
        has_extract="tensor.extract" in body_ops,
        has_index="linalg.index" in body_ops,
        matmul_dims=matmul_dims,
    )


# --------------------------------------------------------------------------------------------
# Transform-dialect schedules
# --------------------------------------------------------------------------------------------

_TAG = "relax_cpu.op"
_MAX_REWRITES = "{max_num_rewrites = 20000 : i64}"
_ANY = "!transform.any_op"


class TransformWriter:
    """Accumulates the body of a transform sequence; `fresh()` names new handles."""

    def __init__(self):
        self.lines: list[str] = []
        self._n = 0

    def fresh(self, stem: str = "h") -> str:
        self._n += 1
        return f"%{stem}{self._n}"

    def emit(self, line: str) -> None:
        self.lines.append(line)

    def match_tag(self, tag: int, root: str = "%root") -> str:
        h = self.fresh("op")
        self.emit(f"{h} = transform.structured.match attributes{{{_TAG} = {tag} : i64}} in {root}"
                  f" : ({_ANY}) -> {_ANY}")
        return h

    def tile_forall(self, target: str, sizes: Sequence[int]) -> tuple[str, str]:
        t, f = self.fresh("tiled"), self.fresh("forall")
        self.emit(f"{t}, {f} = transform.structured.tile_using_forall {target} tile_sizes "
                  f"[{', '.join(map(str, sizes))}] : ({_ANY}) -> ({_ANY}, {_ANY})")
        return t, f

    def tile_for(self, target: str, sizes: Sequence[int]) -> tuple[str, list[str]]:
        n_loops = sum(1 for s in sizes if s)
        t = self.fresh("tiled")
        loops = [self.fresh("loop") for _ in range(n_loops)]
        types = ", ".join([_ANY] * (n_loops + 1))
        self.emit(f"{', '.join([t] + loops)} = transform.structured.tile_using_for {target} "
                  f"tile_sizes [{', '.join(map(str, sizes))}] : ({_ANY}) -> ({types})")
        return t, loops

    def peel(self, loop: str) -> tuple[str, str]:
        cast = self.fresh("for")
        self.emit(f'{cast} = transform.cast {loop} : {_ANY} to !transform.op<"scf.for">')
        main, rem = self.fresh("main"), self.fresh("rem")
        self.emit(f'{main}, {rem} = transform.loop.peel {cast} : (!transform.op<"scf.for">) '
                  f"-> ({_ANY}, {_ANY})")
        return main, rem

    def vectorize(self, target: str, nd_extract: bool = False) -> None:
        attr = " {vectorize_nd_extract}" if nd_extract else ""
        self.emit(f"transform.structured.vectorize {target}{attr} : {_ANY}")

    def sequence(self) -> str:
        body = "\n    ".join(self.lines)
        return (
            "module attributes {transform.with_named_sequence} {\n"
            f"  transform.named_sequence @__transform_main(%root: {_ANY} {{transform.readonly}}) {{\n"
            f"    {body}\n"
            "    transform.yield\n"
            "  }\n"
            "}\n"
        )


# A schedule writes transform IR for the op behind handle `target`; returns a short label.
Schedule = Callable[[TransformWriter, str, LinalgOpInfo, CPUOptions], str]


def _chunk(size: int, tile: int) -> int:
    return max(tile, (size + tile - 1) // tile * tile)


def _needs_peel(extent: int | None, tile: int) -> bool:
    return tile > 1 and (extent is None or extent % tile != 0)


def _tile_forall(w: TransformWriter, op: str, info: LinalgOpInfo, forall_sizes):
    """Optional forall tiling; returns the tiled op and the loop extents inside one task."""
    extents = list(info.ranges)
    if forall_sizes is None or not any(forall_sizes):
        return op, extents
    op, _ = w.tile_forall(op, forall_sizes)
    for d, s in enumerate(forall_sizes):
        if s and not (extents[d] is not None and extents[d] % s == 0):
            extents[d] = None  # partial chunks make the extent dynamic inside the forall
        elif s:
            extents[d] = s
    return op, extents


def _peel_nest(w: TransformWriter, to_peel: list[tuple[int, str]], tag: int) -> str:
    """Peel loops (given outermost first) innermost first, so every remainder region still has
    its inner full tiles; returns the innermost main loop nested in all main loops,
    canonicalized so that the full tiles inside it have static shapes."""
    main_name = f"relax_cpu.peel_{tag}_main"
    scope = None
    for i, (_d, loop) in enumerate(reversed(to_peel)):
        main, _rem = w.peel(loop)  # parents' handles stay valid; nested ones do not
        if i == 0:
            w.emit(f'transform.annotate {main} "{main_name}" : {_ANY}')
        scope = main
    if len(to_peel) > 1:
        inner = w.fresh("main")
        w.emit(f"{inner} = transform.structured.match attributes{{{main_name}}} in {scope}"
               f" : ({_ANY}) -> {_ANY}")
        scope = inner
    # Peeling turns the main loop's tile sizes into constants; fold them into static shapes.
    w.emit(f"transform.apply_patterns to {scope} {{\n"
           "      transform.apply_patterns.linalg.tiling_canonicalization\n"
           "      transform.apply_patterns.canonicalization\n"
           f"    }} {_MAX_REWRITES} : {_ANY}")
    return scope


def _tile_peel_vectorize(w: TransformWriter, target: str, info: LinalgOpInfo, forall_sizes,
                         for_sizes, tag: int, vectorize: bool) -> None:
    """Shared tail: optional forall tiling, register tiling, peel partial tiles, vectorize."""
    n = info.rank
    op, extents = _tile_forall(w, target, info, forall_sizes)
    if not vectorize:
        if any(for_sizes):
            w.tile_for(op, for_sizes)
        return
    # Dims that keep their full (static) extent must be static to vectorize.
    for d in range(n):
        if for_sizes[d] == 0 and extents[d] is None:
            raise _ScheduleNotApplicable(f"loop {d} is dynamic and untiled")
    loops: list[tuple[int, str]] = []
    if any(for_sizes):
        op, handles = w.tile_for(op, for_sizes)
        loops = list(zip([d for d in range(n) if for_sizes[d]], handles))
    to_peel = [(d, loop) for d, loop in loops if _needs_peel(extents[d], for_sizes[d])]
    if not to_peel:
        w.vectorize(op, nd_extract=info.has_extract)
        return
    scope = _peel_nest(w, to_peel, tag)
    w.vectorize(w.match_tag(tag, scope), nd_extract=info.has_extract)


class _ScheduleNotApplicable(Exception):
    """A schedule declined an op before any transform IR ran."""


def _forall_sizes_generic(info: LinalgOpInfo, options: CPUOptions, vec_tile: int) -> list[int] | None:
    if options.num_threads <= 1:
        return None
    n = info.rank
    par = [d for d in range(n) if info.iterators[d] == "parallel"]
    if not par:
        return None
    outer = [d for d in par if d != info.vector_dim]
    p = outer[0] if outer else par[0]
    work = 1
    for d in range(n):
        if d != p:
            work *= info.ranges[d] if info.ranges[d] is not None else options.assumed_dynamic_size
    chunk = max(1, options.parallel_grain // max(1, work))
    if p == info.vector_dim:
        chunk = _chunk(chunk, max(1, vec_tile))
    ext = info.ranges[p]
    if ext is not None and ext <= chunk:
        return None  # a single task: nothing to parallelize
    sizes = [0] * n
    sizes[p] = chunk
    return sizes


def _register_sizes_generic(info: LinalgOpInfo, options: CPUOptions) -> tuple[list[int], int]:
    n = info.rank
    lanes = max(1, options.vector_bytes // info.elem_bytes)
    vec_tile = lanes * max(1, options.vector_unroll)
    sizes = []
    for d in range(n):
        ext = info.ranges[d]
        if d == info.vector_dim:
            if ext is not None and ext <= options.max_full_vector:
                sizes.append(0)
            elif ext is not None and ext % lanes == 0 and ext % vec_tile != 0:
                sizes.append(lanes)
            else:
                sizes.append(vec_tile)
        elif ext == 1:
            sizes.append(0)
        else:
            sizes.append(1)
    return sizes, vec_tile


def vector_schedule(w: TransformWriter, target: str, info: LinalgOpInfo, options: CPUOptions,
                    *, tag: int = -1) -> str:
    """Elementwise / broadcast / reduction generics: forall over an outer parallel loop,
    register tile [1, .., vector], peel partial tiles, vectorize the full ones."""
    if info.has_i1:
        # vector<Nxi1> is bit-packed in LLVM memory while memref<i1> holds bytes.
        raise _ScheduleNotApplicable("i1 operands are not vectorized")
    if info.rank == 0:
        raise _ScheduleNotApplicable("rank-0 op")
    sizes, vec_tile = _register_sizes_generic(info, options)
    forall = _forall_sizes_generic(info, options, sizes[info.vector_dim] or vec_tile)
    _tile_peel_vectorize(w, target, info, forall, sizes, tag, vectorize=True)
    return "vector"


def split_reduction_schedule(w: TransformWriter, target: str, info: LinalgOpInfo,
                             options: CPUOptions, *, tag: int = -1) -> str:
    """Reductions along the contiguous dim (row sum/max, dynamic or long): forall over outer
    parallel rows, one row per iteration, then `tile_reduction_using_for` keeps a vector of
    partial results in registers across the reduction loop and reduces it once at the end."""
    vd = info.vector_dim
    if info.has_i1 or info.has_extract or info.kind != "reduction" or vd is None:
        raise _ScheduleNotApplicable("not a plain reduction")
    if info.has_index:
        # upstream's partial-reduction tiling clones the body without offsetting linalg.index by
        # the tile's position: every tile of sum(x == iota(n)) saw indices 0..15 (16 for any n)
        raise _ScheduleNotApplicable("the body reads a loop index")
    if info.iterators[vd] != "reduction":
        raise _ScheduleNotApplicable("contiguous dim is parallel")
    ext = info.ranges[vd]
    if ext is not None and ext <= options.max_full_vector:
        raise _ScheduleNotApplicable("short static reduction: vectorized whole")
    lanes = max(1, options.vector_bytes // info.elem_bytes)
    vec_tile = lanes * max(1, options.vector_unroll)
    forall = _forall_sizes_generic(info, options, vec_tile)
    op, extents = _tile_forall(w, target, info, forall)
    rows = [0 if (d == vd or extents[d] == 1) else 1 for d in range(info.rank)]
    if any(rows):
        op, _ = w.tile_for(op, rows)
    red = [vec_tile if d == vd else 0 for d in range(info.rank)]
    fill, part, merge, loop = (w.fresh("fill"), w.fresh("part"), w.fresh("merge"), w.fresh("rloop"))
    w.emit(f"{fill}, {part}, {merge}, {loop} = transform.structured.tile_reduction_using_for {op} "
           f"by tile_sizes = [{', '.join(map(str, red))}] : ({_ANY}) -> ({_ANY}, {_ANY}, {_ANY}, {_ANY})")
    if _needs_peel(ext, vec_tile):
        scope = _peel_nest(w, [(vd, loop)], tag)
        part = w.fresh("part")
        w.emit(f'{part} = transform.structured.match ops{{["linalg.generic"]}} in {scope}'
               f" : ({_ANY}) -> {_ANY}")
    w.vectorize(part)
    w.vectorize(fill)
    w.vectorize(merge)
    return "vector-split-reduction"


def matmul_vector_schedule(w: TransformWriter, target: str, info: LinalgOpInfo,
                           options: CPUOptions, *, tag: int = -1) -> str:
    """Fallback matmul schedule: forall over row blocks, register tile (m, n, k), peel, vectorize
    to vector.contract (lowered to outer products). backend/cpu_matmul.py supersedes it."""
    if info.has_i1:
        raise _ScheduleNotApplicable("i1 matmul")
    b, m, n, k = info.matmul_dims
    tm, tn, tk = options.matmul_tile
    sizes = [1] * info.rank
    sizes[m], sizes[n], sizes[k] = tm, tn, tk
    for d, t in ((m, tm), (n, tn), (k, tk)):
        if info.ranges[d] is not None and info.ranges[d] < t:
            sizes[d] = 0 if info.ranges[d] <= t else t
    forall = None
    if options.num_threads > 1:
        forall = [0] * info.rank
        if b is not None:
            forall[b] = 1
        rows = _chunk(options.matmul_parallel_rows, max(1, sizes[m]))
        if info.ranges[m] is None or info.ranges[m] > rows:
            forall[m] = rows
        if not any(forall):
            forall = None
    _tile_peel_vectorize(w, target, info, forall, sizes, tag, vectorize=True)
    return "vector-matmul"


def tile_only_schedule(w: TransformWriter, target: str, info: LinalgOpInfo, options: CPUOptions,
                       *, tag: int = -1) -> str:
    """No vectorization: only the forall tiling, so that scalar code still uses all threads."""
    lanes = max(1, options.vector_bytes // info.elem_bytes)
    forall = _forall_sizes_generic(info, options, lanes) if info.rank else None
    if forall is None:
        raise _ScheduleNotApplicable("nothing to tile")
    _tile_peel_vectorize(w, target, info, forall, [0] * info.rank, tag, vectorize=False)
    return "tiled"


def _matmul_schedules(info: LinalgOpInfo, options: CPUOptions) -> list[Schedule]:
    """Per-op matmul schedules; used when no kernel-level schedule took the kernel (for
    example a matmul fused with other ops, a non-f32 matmul, or an equivalent generic)."""
    return [matmul_vector_schedule, tile_only_schedule]


def _kernel_schedule(func: ir.Operation, options: CPUOptions) -> tuple[str, str] | None:
    """A whole-kernel schedule, tried before the per-op ones: (label, transform module text),
    or None. It may rewrite `func` (a scratch copy) first.

    THE MATMUL HOOK: kernels that backend/cpu_matmul.py recognizes ([fill +] matmul or
    batch_matmul on f32) get its register-blocked, B-packing schedule, versioned on M.
    """
    if not options.vectorize:
        return None
    try:
        from relax_mlir.backend import cpu_matmul
    except ImportError:
        return None
    shape = cpu_matmul.matmul_kernel_shape(func) or cpu_matmul.matmul_kernel_variants(func)
    if shape is None:
        return None
    if shape.batch:
        # Measured (cpu_matmul's own compile_matmul too): batch_matmul with dynamic K gave
        # wrong results at M=97. Batched kernels take the per-op schedule until that is fixed.
        return None
    if shape.m is None and cpu_matmul.version_matmul_kernel(func):
        shape = cpu_matmul.matmul_kernel_variants(func)
        if shape is None:
            return None
    text = cpu_matmul.matmul_schedule_module(_sym_name(func), shape, num_threads=options.num_threads)
    return "matmul-register-blocked", text


def _schedule_for(info: LinalgOpInfo, options: CPUOptions) -> list[Schedule]:
    """The schedules to try for one op, best first; an op none applies to stays scalar."""
    if not options.vectorize:
        return [tile_only_schedule]
    if info.kind == "matmul":
        return _matmul_schedules(info, options)
    if info.kind == "reduction":
        return [split_reduction_schedule, vector_schedule, tile_only_schedule]
    if info.kind == "elementwise":
        return [vector_schedule, tile_only_schedule]
    return [tile_only_schedule]


# Post-vectorization cleanup and vector lowering, applied to each scheduled kernel. Lowering
# `vector.contract` to outer products here (on tensors) keeps accumulators in registers. Each
# pattern family gets its own block with a rewrite budget: mixed in one greedy run, the transfer
# permutation, shape_cast and unit-dim patterns can undo each other and grow the IR without
# bound (measured: >20 GB). Remaining vector ops are lowered by convert-vector-to-{scf,llvm}.
_FINISH = f"""
    %f = transform.structured.match ops{{["func.func"]}} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %f {{
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    }} {_MAX_REWRITES} : !transform.any_op
    transform.apply_cse to %f : !transform.any_op
    transform.apply_patterns to %f {{
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.lower_outerproduct
    }} {_MAX_REWRITES} : !transform.any_op
    transform.apply_patterns to %f {{
      transform.apply_patterns.vector.lower_multi_reduction lowering_strategy = "innerreduction"
    }} {_MAX_REWRITES} : !transform.any_op
    transform.apply_patterns to %f {{
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
    }} {_MAX_REWRITES} : !transform.any_op
    transform.apply_patterns to %f {{
      transform.apply_patterns.canonicalization
    }} {_MAX_REWRITES} : !transform.any_op
    transform.apply_cse to %f : !transform.any_op
"""


def _generalize_sequence(names: Iterable[str]) -> str | None:
    names = sorted(set(names))
    if not names:
        return None
    ops = ", ".join(f'"{n}"' for n in names)
    return (
        "module attributes {transform.with_named_sequence} {\n"
        f"  transform.named_sequence @__transform_main(%root: {_ANY} {{transform.readonly}}) {{\n"
        f"    %ops = transform.structured.match ops{{[{ops}]}} in %root : ({_ANY}) -> {_ANY}\n"
        f"    %g = transform.structured.generalize %ops : ({_ANY}) -> {_ANY}\n"
        "    transform.yield\n"
        "  }\n"
        "}\n"
    )


_CANONICALIZE_SEQUENCE = (
    "module attributes {transform.with_named_sequence} {\n"
    f"  transform.named_sequence @__transform_main(%root: {_ANY} {{transform.readonly}}) {{\n"
    f'    %f = transform.structured.match ops{{["func.func"]}} in %root : ({_ANY}) -> {_ANY}\n'
    "    transform.apply_patterns to %f {\n"
    "      transform.apply_patterns.linalg.tiling_canonicalization\n"
    "      transform.apply_patterns.canonicalization\n"
    f"    }} {_MAX_REWRITES} : {_ANY}\n"
    "    transform.yield\n"
    "  }\n"
    "}\n"
)


def _finish_sequence() -> str:
    return (
        "module attributes {transform.with_named_sequence} {\n"
        f"  transform.named_sequence @__transform_main(%root: {_ANY} {{transform.readonly}}) {{\n"
        f"{_FINISH}"
        "    transform.yield\n"
        "  }\n"
        "}\n"
    )


class _Scratch:
    """A kernel cloned into its own module, where transform scripts can be tried and dropped."""

    def __init__(self, func: ir.OpView | ir.Operation):
        self.context = func.context
        with self.context, ir.Location.unknown():
            self.module = ir.Module.create()
        self.module.operation.attributes["transform.with_named_sequence"] = ir.UnitAttr.get(self.context)
        func.operation.clone(ip=ir.InsertionPoint(self.module.body))

    @property
    def func(self) -> ir.Operation:
        return self.module.body.operations[0].operation

    def copy(self) -> "_Scratch":
        return _Scratch(self.func)

    def apply(self, sequence_text: str, stage: str = "vectorize") -> None:
        """Run one transform sequence on this scratch module; raise LoweringError on failure."""
        seq_module = ir.Module.parse(sequence_text, context=self.context)
        seq_ops = [op.operation for op in seq_module.body.operations]
        ip = ir.InsertionPoint(self.module.body)
        for op in seq_ops:
            op.detach_from_parent()
            ip.insert(op)
        try:
            run_pipeline(self.module, "transform-interpreter", stage)
        finally:
            for op in seq_ops:
                op.erase()

    def run(self, pipeline: str, stage: str = "vectorize") -> None:
        run_pipeline(self.module, pipeline, stage)


def _linalg_ops(func: ir.Operation) -> list[ir.OpView]:
    out = []

    def visit(o):
        if o.name.startswith("linalg.") and o.name not in ("linalg.yield", "linalg.index"):
            out.append(o.opview)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return out


def _sink_body_constants(func: ir.Operation) -> None:
    """Clone scalar constants used inside linalg bodies into those bodies (the vectorizer
    rejects values captured from above)."""
    for op in _linalg_ops(func):
        if not op.regions or not op.regions[0].blocks:
            continue
        block = op.regions[0].blocks[0]
        first = block.operations[0] if len(block.operations) else None
        clones: dict = {}
        inner_uses = []

        def visit(o):
            for i, v in enumerate(o.operands):
                owner = v.owner
                if (isinstance(owner, ir.OpView) and owner.operation.name == "arith.constant"
                        and not isinstance(v.type, ir.ShapedType)
                        and not _is_inside(owner.operation, op.operation)):
                    inner_uses.append((o, i, owner))

        for inner in block.operations:
            walk(inner.operation, visit)
        for user, i, const in inner_uses:
            key = const.operation
            if key not in clones:
                clones[key] = const.operation.clone(ip=ir.InsertionPoint(first) if first is not None
                                                    else ir.InsertionPoint(block))
            user.operands[i] = clones[key].results[0]


def _is_inside(op: ir.Operation, ancestor: ir.Operation) -> bool:
    p = op.parent
    while p is not None:
        if p == ancestor:
            return True
        p = p.parent
    return False


def _set_tag(op, tag: int) -> None:
    op.operation.attributes[_TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64, op.context), tag)


def _get_tag(op) -> int | None:
    if _TAG not in op.attributes:
        return None
    return ir.IntegerAttr(op.attributes[_TAG]).value


def _try_sequence(scratch: _Scratch, text: str, what: str) -> _Scratch | None:
    """Apply `text` to a copy of `scratch`; the copy on success, None (logged) on failure."""
    trial = scratch.copy()
    try:
        trial.apply(text)
    except LoweringError as e:
        _log.debug("%s failed: %s", what, e.diagnostics)
        return None
    return trial


_LEFTOVER_TAG0 = 1 << 20
_MIN_LEFTOVER_LANES = 4
_MAX_LEFTOVER_LANES = 4096  # never unroll a huge static tile into one vector


def _vectorize_leftovers(scratch: _Scratch, vector_tags: set[int], kname: str) -> _Scratch:
    """Vectorize the partial tiles that peeling left behind (for example the last rows of a
    matmul): tile their dynamic loops by 1 and vectorize when a tile still holds a few lanes."""
    # Fold the peeled tiles' constant sizes into static shapes first.
    scratch = _try_sequence(scratch, _CANONICALIZE_SEQUENCE, f"@{kname} canonicalize") or scratch
    todo = []
    for op in _linalg_ops(scratch.func):
        if _get_tag(op) not in vector_tags:
            continue
        info = analyze_linalg_op(op)
        if info is None or info.has_i1:
            continue
        lanes = 1
        for r in info.ranges:
            lanes *= r if r is not None else 1
        if lanes < _MIN_LEFTOVER_LANES or lanes > _MAX_LEFTOVER_LANES:
            continue
        tag = _LEFTOVER_TAG0 + len(todo)
        _set_tag(op, tag)
        todo.append((tag, info))
    for tag, info in todo:
        w = TransformWriter()
        h = w.match_tag(tag)
        sizes = [1 if r is None else 0 for r in info.ranges]
        if any(sizes):
            h, _ = w.tile_for(h, sizes)
        w.vectorize(h, nd_extract=info.has_extract)
        trial = _try_sequence(scratch, w.sequence(), f"@{kname} leftover {tag - _LEFTOVER_TAG0}")
        if trial is not None:
            scratch = trial
    return scratch


def _strip_schedule_attrs(op: ir.Operation) -> None:
    for name in list(op.attributes):
        if name == _TAG or name.startswith("relax_cpu.peel_"):
            del op.attributes[name]


def _has_static_zero_extent(kernel: ir.Operation) -> bool:
    """Some linalg op of the kernel has an operand or result with a static 0 dim: its iteration
    space is empty (or a reduction over nothing). Upstream tiling asserts on a 0 extent (an abort
    of the user's process), so such a kernel keeps the plain loop lowering, whose loops run 0
    times (a reduction then leaves its fill: sum -> 0, max -> -inf)."""
    for op in _linalg_ops(kernel.operation if hasattr(kernel, "operation") else kernel):
        for v in list(op.operation.operands) + list(op.operation.results):
            t = v.type
            if isinstance(t, ir.ShapedType) and t.has_rank and any(
                    not t.is_dynamic_dim(d) and t.shape[d] == 0 for d in range(t.rank)):
                return True
    return False


def _schedule_kernel(kernel: ir.OpView, options: CPUOptions) -> list[str]:
    """Schedule every linalg op of one kernel in place; returns one label per op."""
    kname = _sym_name(kernel)
    if _has_static_zero_extent(kernel):
        return ["empty"]
    scratch = _Scratch(kernel)
    whole = _try_kernel_schedule(scratch, options, kname)
    if whole is not None:
        scratch, label = whole
        return _adopt(kernel, scratch, [label])
    names = {op.operation.name for op in _linalg_ops(scratch.func)}
    gen = _generalize_sequence(n for n in names if n not in ("linalg.generic",) + _MATMUL_NAMES)
    if gen is not None:
        scratch = _try_sequence(scratch, gen, f"@{kname} generalization") or scratch
    _sink_body_constants(scratch.func)
    infos = []
    for i, op in enumerate(_linalg_ops(scratch.func)):
        _set_tag(op, i)
        # A library-tagged op (a relax-multiversion kernel's BLAS version) stays for cpu_library.
        infos.append(None if "relax.library" in op.operation.attributes else analyze_linalg_op(op))
    labels = []
    for i, info in enumerate(infos):
        label = "scalar"
        for schedule in (_schedule_for(info, options) if info is not None else []):
            w = TransformWriter()
            try:
                label_try = schedule(w, w.match_tag(i), info, options, tag=i)
            except _ScheduleNotApplicable as e:
                _log.debug("@%s op %d: %s declined: %s", kname, i, schedule.__name__, e)
                continue
            trial = _try_sequence(scratch, w.sequence(), f"@{kname} op {i}: {schedule.__name__}")
            if trial is not None:
                scratch, label = trial, label_try
                break
        labels.append(label)
    vector_tags = {i for i, lbl in enumerate(labels) if lbl.startswith("vector")}
    if vector_tags:
        scratch = _vectorize_leftovers(scratch, vector_tags, kname)
    if any(lbl != "scalar" for lbl in labels):
        trial = _try_sequence(scratch, _finish_sequence(), f"@{kname} cleanup")
        if trial is not None:
            try:
                if _may_hoist_subsets(trial.func):
                    trial.run("func.func(loop-invariant-subset-hoisting,canonicalize,cse)")
                scratch = trial
            except LoweringError as e:
                _log.debug("@%s: hoisting failed: %s", kname, e.diagnostics)
    return _adopt(kernel, scratch, labels)


_EXTRACTIONS = ("tensor.extract_slice", "vector.transfer_read")
_INSERTIONS = ("tensor.insert_slice", "vector.transfer_write", "tensor.parallel_insert_slice")


def _may_hoist_subsets(func: ir.Operation) -> bool:
    """Whether `loop-invariant-subset-hoisting` can change `func`: some loop carries a tensor whose
    every use along its chain of insertions is a subset extraction or insertion, one of each with
    all their position operands defined outside the loop (the pass's own preconditions). The pass
    proves subsets equal or disjoint with value-bounds constraint sets, which on the fused
    attention kernels (33 loops, ~870 ops) took 0.27 s per kernel to change nothing."""
    loops = []
    walk(func, lambda o: loops.append(o) if o.name in ("scf.for", "scf.forall") else None)

    def inside(v, loop) -> bool:
        o = v.owner.owner if isinstance(v, ir.BlockArgument) else v.owner
        while o is not None:
            o = getattr(o, "operation", o)
            if o == loop:
                return True
            if o.name == "func.func":
                return False
            o = o.parent
        return False

    def invariant(op, skip: int, loop) -> bool:
        return all(not inside(v, loop) for i, v in enumerate(op.operands) if i != skip and i != 0)

    for loop in loops:
        args = loop.regions[0].blocks[0].arguments
        for a in args:
            if not isinstance(a.type, ir.RankedTensorType):
                continue
            chain, ok, ext, ins = [a], True, False, False
            while chain and ok:
                v = chain.pop()
                for use in v.uses:
                    u = use.owner
                    u = getattr(u, "operation", u)
                    if u.name in _EXTRACTIONS and use.operand_number == 0:
                        ext = ext or invariant(u, 0, loop)
                    elif u.name in _INSERTIONS and use.operand_number == 1:
                        ins = ins or invariant(u, 1, loop)
                        chain.extend(u.results)
                    elif u.name not in ("scf.yield", "scf.forall.in_parallel"):
                        ok = False
                        break
            if ok and ext and ins:
                return True
    return False


def _adopt(kernel: ir.OpView, scratch: _Scratch, labels: list[str]) -> list[str]:
    """Replace `kernel` by the scheduled function of `scratch`, labelled with its schedules."""
    walk(scratch.func, _strip_schedule_attrs)
    scratch.func.attributes["relax_cpu.schedules"] = ir.ArrayAttr.get(
        [ir.StringAttr.get(lbl, kernel.context) for lbl in labels], kernel.context)
    scratch.func.clone(ip=ir.InsertionPoint(kernel))
    kernel.operation.erase()
    return labels


def _try_kernel_schedule(scratch: _Scratch, options: CPUOptions, kname: str):
    """(scheduled scratch, label) if a kernel-level schedule applies and succeeds, else None."""
    trial = scratch.copy()
    try:
        found = _kernel_schedule(trial.func, options)
    except Exception as e:  # a plug-in schedule must never break the compile
        _log.debug("@%s: kernel schedule raised %r", kname, e)
        return None
    if found is None:
        return None
    label, text = found
    try:
        trial.apply(text)
        trial.func.verify()
        # A schedule whose loops one-shot bufferization cannot place in place (seen: the streaming
        # matmul at static M <= 4 with N <= 64 yields a non-equivalent iter_arg) is rejected here,
        # on a copy, instead of failing the whole compile later.
        trial.copy().run(_BUFFERIZE_CHECK, "vectorize")
    except (LoweringError, ir.MLIRError) as e:
        _log.debug("@%s: kernel schedule %s failed: %s", kname, label, e)
        return None
    return trial, label


# --------------------------------------------------------------------------------------------
# Stages
# --------------------------------------------------------------------------------------------

# The CPU keeps kernels as functions that the entries call: LLVM then compiles each distinct
# kernel once, however many layers call it (inlined, a 24-layer transformer was one function
# that LLVM's code generation took 5.5 s on, 3.3x the 12-layer one). Only kernels that are views
# (their result is not an argument written in place: a slice or reshape of an input) are inlined.
_CALLS = "func.func(lower-affine),inline,symbol-dce,canonicalize,cse"
_CALLS_AGAIN = "inline,symbol-dce,canonicalize,cse"
_KERNEL_PREFIX = "__relax_kernel_"

# No `empty-tensor-to-alloc-tensor` (one-shot-bufferize turns tensor.empty into allocations
# itself): it is a greedy rewrite, which folds every op it visits, and the GPU backends reach here
# with the kernels inlined into the entry, where a fold of `extract_slice(insert_slice(x))` into x
# reads x's block after the memory plan gave it to a later value (jnp.roll by (s, 2*s) rolled
# axis 1 by s). The same holds for the SPIR-V backend's bufferize stage.
_BUFFERIZE_CALLS = (
    "eliminate-empty-tensors,"
    "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
    "function-boundary-type-conversion=identity-layout-map "
    "unknown-type-conversion=identity-layout-map},"
    # A kernel's result that is its output argument written in place is dropped: the caller
    # reads the buffer it passed.
    "canonicalize,drop-equivalent-buffer-results"
)
_BUFFERIZE_REST = (
    "canonicalize,cse,"
    # scf.forall becomes scf.parallel here so that hoisting keeps per-task buffers (packing
    # tiles) inside each task; one thread lowers scf.parallel to plain loops later.
    "func.func(scf-forall-to-parallel,buffer-loop-hoisting),"
    "buffer-deallocation-pipeline,"
    "canonicalize,cse"
)
_BUFFERIZE = f"{_BUFFERIZE_CALLS},[inline kernels that still return a buffer],{_BUFFERIZE_REST}"


# The result of these ops is their operand #i updated in place (destination-passing style).
_TIED_OPERAND = {
    "tensor.insert_slice": lambda op, r: 1,
    "tensor.insert": lambda op, r: 1,
    "vector.transfer_write": lambda op, r: 1,
    "bufferization.materialize_in_destination": lambda op, r: 1,
    "tensor.cast": lambda op, r: 0,
    # Reshapes are views of their source: a reduction kernel keeping its reduced dim of 1 writes
    # the collapsed view of its output and returns it expanded back (the unfused attention branch
    # of relax_v.if); without these, such a kernel was inlined at every call site.
    "tensor.collapse_shape": lambda op, r: 0,
    "tensor.expand_shape": lambda op, r: 0,
    "scf.for": lambda op, r: 3 + r,
    "scf.forall": lambda op, r: len(op.operands) - len(op.results) + r,
}
_RESHAPES = ("tensor.collapse_shape", "tensor.expand_shape")


def _written_in_place(value: ir.Value, args: ir.Block) -> bool:
    """True if `value` is an argument of the function block `args` updated in place through a
    chain of destination-passing ops (linalg ops on their outs, insert_slice, transfer_write,
    loops on their inits, both branches of an scf.if: a kernel choosing its serial or threaded
    variant at run time). A reshape counts only below a write: a kernel returning a reshape of
    an argument that nothing wrote is a view, inlined."""
    reshaped = wrote = False
    while True:
        if isinstance(value, ir.BlockArgument):
            return value.owner == args and (wrote or not reshaped)
        op = value.owner
        name = op.name
        tied = _TIED_OPERAND.get(name)
        if tied is not None:
            if name in _RESHAPES:
                reshaped = True
            elif name != "tensor.cast":
                wrote = True
            value = op.operands[tied(op, value.result_number)]
        elif name.startswith("linalg.") and len(op.results) > 0:  # outs are the last operands
            wrote = True
            value = op.operands[len(op.operands) - len(op.results) + value.result_number]
        elif name == "scf.if" and len(op.regions[1].blocks) > 0:
            r = value.result_number
            sources = []
            for region in op.regions:
                yld = region.blocks[0].operations[len(region.blocks[0].operations) - 1]
                sources.append(yld.operands[r])
            # the same argument on both sides (not merely some argument on each)
            if not all(_written_in_place(v, args) for v in sources):
                return False
            roots = {_root_argument(v).arg_number for v in sources}
            return len(roots) == 1
        else:
            return False


def _root_argument(value: ir.Value) -> ir.BlockArgument:
    """The function argument a value `_written_in_place` found is written into."""
    while not isinstance(value, ir.BlockArgument):
        op = value.owner
        tied = _TIED_OPERAND.get(op.name)
        if tied is not None:
            value = op.operands[tied(op, value.result_number)]
        elif op.name == "scf.if":
            yld = op.regions[0].blocks[0].operations[len(op.regions[0].blocks[0].operations) - 1]
            value = yld.operands[value.result_number]
        else:
            value = op.operands[len(op.operands) - len(op.results) + value.result_number]
    return value


def _writes_its_outputs(f: ir.OpView) -> bool:
    """True if every value kernel `f` returns is one of its arguments written in place."""
    block = f.regions[0].blocks[0]
    ret = block.operations[len(block.operations) - 1]
    return all(_written_in_place(v, block) for v in ret.operands)


def _calls(op: ir.Operation) -> dict[str, list[ir.Operation]]:
    """The func.call ops of the module, by callee."""
    calls: dict[str, list[ir.Operation]] = {}

    def visit(o):
        if o.name == "func.call":
            calls.setdefault(ir.FlatSymbolRefAttr(o.attributes["callee"]).value, []).append(o)

    for f in top_funcs(op):
        walk(f.operation, visit)
    return calls


_BUFFERIZE_CHECK = ("func.func(lower-affine),canonicalize,one-shot-bufferize{bufferize-function-boundaries "
                    "allow-return-allocs-from-loops "
                    "function-boundary-type-conversion=identity-layout-map "
                    "unknown-type-conversion=identity-layout-map}")


def _parallelize_pipeline(options: CPUOptions) -> str:
    if options.num_threads <= 1:
        return "func.func(scf-forall-to-for,scf-parallel-for-to-nested-fors),canonicalize"
    # Recursive work splitting (async-dispatch) adds an `async_dispatch_fn` per parallel loop:
    # with a few workers, launching the tasks from the caller runs as fast (measured, 2 threads:
    # add + softmax on 64x4096 and 1024x4096, equal times, equal bits) and the threaded build of a
    # 12-layer Llama decode step compiles in 10.4 s of CPU instead of 13.2.
    dispatch = "true" if options.num_threads > 4 else "false"
    return (
        "func.func(scf-forall-to-parallel),"
        f"async-parallel-for{{async-dispatch={dispatch} num-workers={options.num_threads} "
        f"min-task-size={options.min_task_size}}},"
        "async-to-async-runtime,"
        "func.func(async-runtime-ref-counting,async-runtime-ref-counting-opt),"
        "canonicalize,cse"
    )


_TO_LLVM_LOOPS = (
    "func.func(convert-linalg-to-loops),"
    "func.func(convert-vector-to-scf{full-unroll=true}),"
    "func.func(lower-affine),"
    "canonicalize,cse,"
    "expand-strided-metadata,"
    "lower-affine"
)
_TO_LLVM_CONVERT = (
    "convert-async-to-llvm,"
    "func.func(convert-scf-to-cf),"
    "func.func(arith-expand),"
    "convert-math-to-llvm,"
    "convert-math-to-libm,"
    "convert-vector-to-llvm{reassociate-fp-reductions=true},"
    "finalize-memref-to-llvm,"
    "convert-arith-to-llvm,"
    "convert-index-to-llvm,"
    "convert-cf-to-llvm,"
    "convert-func-to-llvm,"
    "convert-ub-to-llvm,"
    "reconcile-unrealized-casts"
)
_TO_LLVM = f"{_TO_LLVM_LOOPS},[IEEE min / max as LLVM intrinsics],[bf16 moves through f32],[legalize i1 memory],{_TO_LLVM_CONVERT},[bf16 vector memory as i16]"


def _ops_where(module_op: ir.Operation, pred) -> list[ir.Operation]:
    """Every op nested in `module_op` for which `pred(op)` holds, in pre-order."""
    found = []

    def visit(o):
        if pred(o):
            found.append(o)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


_IEEE_MIN_MAX = {"arith.maximumf": "llvm.intr.maximum", "arith.minimumf": "llvm.intr.minimum"}


def ieee_min_max_as_llvm(module_op: ir.Operation) -> int:
    """f16 / f32 / f64 `arith.maximumf` / `minimumf` (scalar or vector; bf16 is computed in f32 by
    then) as LLVM's `maximum` / `minimum`
    intrinsics, before `arith-expand`: its expansion (a compare and a select) keeps whichever
    operand comes first of -0.0 and +0.0, where IEEE 754's maximum (StableHLO's, jax's) orders
    -0.0 below +0.0 (a column max of {-0.0, +0.0} was -0.0 or +0.0 by row order). LLVM lowers the
    intrinsics with both the NaN and the signed-zero rules. Returns how many ops were replaced."""
    def wanted(o):
        if o.name not in _IEEE_MIN_MAX:
            return False
        t = o.results[0].type
        et = t.element_type if isinstance(t, ir.VectorType) else t
        return isinstance(et, (ir.F16Type, ir.F32Type, ir.F64Type))

    ops = _ops_where(module_op, wanted)
    for o in ops:
        with ir.InsertionPoint(o), o.location:
            new = ir.Operation.create(_IEEE_MIN_MAX[o.name], results=[o.results[0].type], operands=list(o.operands))
        o.results[0].replace_all_uses_with(new.results[0])
        o.erase()
    return len(ops)


def move_bf16_through_f32(module_op: ir.Operation) -> int:
    """Ops that only move bf16 values (`vector.broadcast`, `vector.splat`, `arith.select`, scalar
    or vector) on the values widened to f32, rounded back (exact: every bf16 value is an f32 one;
    a NaN stays NaN): x86 LLVM cannot legalize the `scalar_to_vector` that a bf16 broadcast, or the
    widening of an odd-length bf16 select, becomes and aborts the process ("Do not know how to soft
    promote this operator's operand"; fuzz seed 2,361,236: a clip of a bf16 tensor reads its bound
    broadcast from a [1, 1] tensor), and LLVM's own vectorizers make such vectors of a loop of
    scalar selects. Moving the bits as i16 does not last: InstCombine moves the bitcasts back out
    of selects and shuffles. Runs before the bf16 conversions become integer operations (arith-expand),
    which LLVM does not fold back. Returns the number of ops rewritten."""
    def moves(o) -> bool:
        if o.name not in ("vector.broadcast", "vector.splat", "arith.select"):
            return False
        t = o.results[0].type
        et = t.element_type if isinstance(t, ir.VectorType) else t
        return isinstance(et, ir.BF16Type) and (o.name == "arith.select" or isinstance(t, ir.VectorType))

    todo = _ops_where(module_op, moves)
    if not todo:
        return 0
    with module_op.context, ir.Location.unknown():
        f32 = ir.F32Type.get()

        def wide(t: ir.Type) -> ir.Type:
            return ir.VectorType.get(t.shape, f32) if isinstance(t, ir.VectorType) else f32

        def ext(v: ir.Value) -> ir.Value:
            return ir.Operation.create("arith.extf", results=[wide(v.type)], operands=[v]).results[0]

        for o in todo:
            rt = o.results[0].type
            with ir.InsertionPoint(o), o.location:
                if o.name == "arith.select":
                    c, x, y = o.operands
                    moved = ir.Operation.create("arith.select", results=[wide(rt)], operands=[c, ext(x), ext(y)])
                else:
                    moved = ir.Operation.create("vector.broadcast", results=[wide(rt)], operands=[ext(o.operands[0])])
                back = ir.Operation.create("arith.truncf", results=[rt], operands=[moved.results[0]]).results[0]
            o.results[0].replace_all_uses_with(back)
            o.erase()
    return len(todo)


def bf16_rounding_keeps_nan_sign(module_op: ir.Operation) -> int:
    """f32 -> bf16 `arith.truncf` as integer operations that keep a NaN's sign, as XLA converts:
    round to nearest even, (bits + 0x7fff + (bits >> 16 & 1)) >> 16, and a NaN the quiet NaN of its
    sign (0x7fc0 or 0xffc0, its payload dropped). arith-expand (which would lower it otherwise)
    makes every NaN +NaN 0x7fc0: bf16(-NaN), bf16 inf - inf (x86's NaN is negative) had signbit
    False where jax has True (helper probe). Returns the number of conversions rewritten."""
    def wanted(o) -> bool:
        if o.name != "arith.truncf":
            return False
        src, dst = o.operands[0].type, o.results[0].type
        es = src.element_type if isinstance(src, ir.VectorType) else src
        ed = dst.element_type if isinstance(dst, ir.VectorType) else dst
        return isinstance(es, ir.F32Type) and isinstance(ed, ir.BF16Type)

    todo = _ops_where(module_op, wanted)
    with module_op.context:
        i32, i16 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(16)
        for o in todo:
            x, rt = o.operands[0], o.results[0].type
            shaped = isinstance(rt, ir.VectorType)

            def like(et, shape=rt.shape if shaped else None):
                return ir.VectorType.get(shape, et) if shaped else et

            def const(v, et=i32):
                t = like(et)
                a = ir.IntegerAttr.get(et, v)
                return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, a) if shaped else a).result

            with ir.InsertionPoint(o), o.location:
                bits = arith.BitcastOp(like(i32), x).result
                hi = arith.ShRUIOp(bits, const(16)).result
                odd = arith.AndIOp(hi, const(1)).result
                rounded = arith.ShRUIOp(arith.AddIOp(arith.AddIOp(bits, const(0x7FFF)).result, odd).result,
                                        const(16)).result
                quiet = arith.OrIOp(arith.AndIOp(hi, const(0x8000)).result, const(0x7FC0)).result
                nan = arith.CmpFOp(arith.CmpFPredicate.UNO, x, x).result
                word = arith.TruncIOp(like(i16), arith.SelectOp(nan, quiet, rounded).result).result
                back = arith.BitcastOp(rt, word).result
            o.results[0].replace_all_uses_with(back)
            o.erase()
    return len(todo)


def bf16_vector_memory_as_i16(module_op: ir.Operation) -> int:
    """`llvm.load` / `llvm.store` of bf16 vectors as i16 vectors (bitcasts around them, which
    LLVM folds away where the value is only moved): on an x86 CPU with AVX-512 the selection DAG
    splits an odd-length bf16 vector (a copy kernel's vector<25xbf16>) into pieces it cannot
    legalize and aborts the process ("Do not know how to soft promote this operator's operand").
    Returns the number of accesses rewritten."""
    def bf16_vector(t) -> bool:
        return isinstance(t, ir.VectorType) and isinstance(t.element_type, ir.BF16Type)

    todo = _ops_where(module_op, lambda o: (o.name == "llvm.load" and bf16_vector(o.results[0].type))
                      or (o.name == "llvm.store" and bf16_vector(o.operands[0].type)))
    if not todo:
        return 0
    with module_op.context, ir.Location.unknown():
        i16 = ir.IntegerType.get_signless(16)
        for o in todo:
            attrs = {name: o.attributes[name] for name in o.attributes}
            with ir.InsertionPoint(o), o.location:
                if o.name == "llvm.load":
                    t = o.results[0].type
                    wide = ir.VectorType.get(t.shape, i16)
                    load = ir.Operation.create("llvm.load", results=[wide], operands=list(o.operands), attributes=attrs)
                    back = ir.Operation.create("llvm.bitcast", results=[t], operands=[load.results[0]])
                    o.results[0].replace_all_uses_with(back.results[0])
                else:
                    v, ptr = o.operands[0], o.operands[1]
                    bits = ir.Operation.create("llvm.bitcast", results=[ir.VectorType.get(v.type.shape, i16)],
                                               operands=[v])
                    ir.Operation.create("llvm.store", results=[], operands=[bits.results[0], ptr], attributes=attrs)
            o.erase()
    return len(todo)


def legalize_i1_memory(module_op: ir.Operation) -> None:
    """Rewrite loads and stores of i1 memrefs as byte accesses (`llvm.load/store i8`).

    memref<i1> holds one byte per element (numpy bool), but this build's MemRefToLLVM asserts
    (aborting the process) on sub-byte loads and stores. Vector accesses to i1 memrefs are
    never produced: the vectorize stage skips i1 ops (vector<Nxi1> would be bit-packed).
    """
    todo = []

    def visit(o):
        if o.name in ("memref.load", "memref.store"):
            mem = o.operands[0 if o.name == "memref.load" else 1]
            if _is_i1(mem.type.element_type):
                todo.append(o)
        elif o.name.startswith("vector.") and any(
                isinstance(v.type, ir.MemRefType) and _is_i1(v.type.element_type)
                for v in o.operands):
            raise LoweringError("to-llvm", "legalize i1 memory",
                                f"vector access to an i1 memref is not supported: {o}")
        return ir.WalkResult.ADVANCE

    module_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    if not todo:
        return
    ctx = module_op.context
    with ctx, ir.Location.unknown():
        idx = ir.IndexType.get()
        i1, i8, i64 = (ir.IntegerType.get_signless(w) for w in (1, 8, 64))
        ptr = ir.Type.parse("!llvm.ptr")

        def make(name, results, operands):
            return ir.Operation.create(name, results=results, operands=operands).results

        for o in todo:
            is_load = o.name == "memref.load"
            mem = o.operands[0 if is_load else 1]
            indices = list(o.operands)[1 if is_load else 2:]
            rank = mem.type.rank
            with ir.InsertionPoint(o), o.location:
                base = make("memref.extract_aligned_pointer_as_index", [idx], [mem])[0]
                md = make("memref.extract_strided_metadata",
                          [ir.MemRefType.get([], i1), idx] + [idx] * (2 * rank), [mem])
                lin = md[1]
                for k, iv in enumerate(indices):
                    term = make("arith.muli", [idx], [iv, md[2 + rank + k]])[0]
                    lin = make("arith.addi", [idx], [lin, term])[0]
                addr = make("arith.addi", [idx], [base, lin])[0]
                p = make("llvm.inttoptr", [ptr], [make("arith.index_cast", [i64], [addr])[0]])[0]
                if is_load:  # any nonzero byte is true (numpy's and XLA's reading of a bool buffer)
                    byte = make("llvm.load", [i8], [p])[0]
                    zero = ir.Operation.create("arith.constant", results=[i8],
                                               attributes={"value": ir.IntegerAttr.get(i8, 0)}).results[0]
                    o.results[0].replace_all_uses_with(
                        ir.Operation.create("arith.cmpi", results=[i1], operands=[byte, zero], attributes={
                            "predicate": ir.IntegerAttr.get(i64, 1)}).results[0])
                else:
                    byte = make("arith.extui", [i8], [o.operands[0]])[0]
                    make("llvm.store", [], [byte, p])
            o.erase()


_SIGNATURES_ATTR = "relax_cpu.entry_signatures"


def _expand_math(op: ir.Operation) -> None:
    """f32 exp/tanh/erf as vectorizable arith (ops/kernel.py: expand_math); LLVM would otherwise
    scalarize them into libm calls."""
    from relax_mlir.ops.kernel import expand_math

    expand_math(op)


def _has_bf16(op: ir.Operation) -> bool:
    found = []

    def visit(o):
        for v in list(o.results) + list(o.operands):
            t = v.type
            et = t.element_type if isinstance(t, ir.ShapedType) else t
            if isinstance(et, ir.BF16Type):
                found.append(o)
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return bool(found)


# bf16 arithmetic computes in f32, rounded back to bf16 after each op, as XLA's CPU backend does
# (its HLO keeps a convert pair between any two bf16 ops of a fusion): x86 LLVM has no bf16 vector
# arithmetic and aborts the process on some of it ("Do not know how to soft promote this operator's
# operand"). The emulation marks the conversions it inserts `fastmath<contract>`, which would let
# any `extf(truncf(x))` fold to `x`; `_round_like_xla` keeps exactly XLA's excess precision
# instead. At to-llvm the remaining bf16 <-> f32 conversions become integer bit operations.
_BF16_ARITH = ("func.func(math-extend-to-supported-types{target-type=f32},"
               "arith-emulate-unsupported-floats{source-types=bf16 target-type=f32})")
_BF16_CONVERT = "func.func(arith-expand{include-bf16=true})"


_CONVERSIONS = frozenset(("arith.uitofp", "arith.sitofp", "arith.extf", "arith.truncf", "arith.bitcast"))


def _is_conversion(v: ir.Value) -> bool:
    """`v` is the f32 result of an emulated conversion to bf16 (`u.astype(bf16)`): that rounding
    is the program's own."""
    d = v.owner
    d = d.operation if isinstance(d, ir.OpView) else d
    return isinstance(d, ir.Operation) and d.name in _CONVERSIONS


def _narrows(v: ir.Value) -> bool:
    """`v` (the f32 of a program's own conversion of a bf16 value) is truncated again: the
    conversion goes on to f16 (bf16 -> f16 is an extf to f32 and a truncf), for which XLA rounds
    the bf16 result first (`(x_bf16 * 1000).astype(f16)`: 63232, not 63264 from the f32 product)."""
    for u in v.uses:
        o = u.owner
        o = o.operation if isinstance(o, ir.OpView) else o
        if o.name == "arith.truncf":
            return True
    return False


def _round_like_xla(op: ir.Operation) -> tuple[int, int]:
    """After the bf16 emulation: a bf16 arithmetic op (not a conversion) whose result the program
    itself converts to f32 (an `extf` that the emulation did not insert: no fast-math flags) is
    computed in f32 without the rounding in between, as XLA's algebraic simplifier does with excess precision (its default):
    `extf(truncf(y))` -> `y`. Every other conversion loses its `contract` flag, so each bf16 op
    rounds its result. Returns (roundings dropped, conversions made strict)."""
    folds, strict = [], []

    def visit(o):
        if o.name in ("arith.extf", "arith.truncf"):
            if "fastmath" in o.attributes:
                strict.append(o)
            elif o.name == "arith.extf":
                d = o.operands[0].owner
                d = d.operation if isinstance(d, ir.OpView) else d
                if (isinstance(d, ir.Operation) and d.name == "arith.truncf" and "fastmath" in d.attributes
                        and d.operands[0].type == o.results[0].type and not _is_conversion(d.operands[0])
                        and not _narrows(o.results[0])):
                    folds.append((o, d))
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    for ext, trunc in folds:
        ext.results[0].replace_all_uses_with(trunc.operands[0])
        ext.erase()
    for o in strict:
        if o.name == "arith.truncf" and not list(o.results[0].uses):
            o.erase()
        else:
            del o.attributes["fastmath"]
    return len(folds), len(strict)


def _strict_conversions(op: ir.Operation) -> int:
    """Drop the `contract` flag of the widenings the compiler marked internal (f16 -> f32 of a
    dot's operands; bf16 ones `_round_like_xla` has read already): it means nothing past here, and
    it reached LLVM IR as `llvm.fpext {fastmath = #arith.fastmath<contract>}`, an attribute of the
    arith dialect that the standalone mlir-translate of `exe.export` cannot parse (every f16 model
    failed to export). Returns how many flags were dropped."""
    found = []

    def visit(o):
        if o.name in ("arith.extf", "arith.truncf") and "fastmath" in o.attributes:
            found.append(o)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    for o in found:
        del o.attributes["fastmath"]
    return len(found)


def _run_module(module, pipeline: str, stage: str) -> None:
    """Run a pipeline on the whole module without MLIR's verification after every pass: the
    stages verify the module once at their end (`verify`). Verifying a 12-layer LLM after each of
    the to-llvm stage's 13 passes took more CPU than the passes themselves (0.35 of 0.64 s).
    RELAX_MLIR_DEBUG=1 verifies after every pass again, to name the pass that broke the IR."""
    run_pipeline(module, pipeline, stage, verify_each=knobs.debug())


# Module attribute: an entry runs a loop of the program itself (relax control flow, a scan),
# which its host code repeats per iteration (backend/cpu_engine.py then keeps that code optimized).
HOST_LOOPS_ATTR = "relax_cpu.host_loops"
_LOOPS = frozenset(("scf.for", "scf.while", "scf.forall", "scf.parallel", "cf.br", "cf.cond_br"))


def _mark_host_loops(op: ir.Operation) -> None:
    """Set HOST_LOOPS_ATTR if an entry (before any kernel is inlined into it) holds a loop."""
    found = []

    def visit(o):
        if o.name in _LOOPS:
            found.append(o)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    for f in top_funcs(op):
        if not _is_private(f) and not _is_declaration(f):
            f.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
            if found:
                op.attributes[HOST_LOOPS_ATTR] = ir.UnitAttr.get(op.context)
                return


def stage_vectorize(module, options: CPUOptions) -> None:
    """Tile (and, if `options.vectorize`, vectorize) every kernel with per-op fallbacks."""
    op = as_op(module)
    _mark_host_loops(op)
    if _has_bf16(op):
        _run_module(op, _BF16_ARITH, "vectorize")
        _round_like_xla(op)
        verify(op, "vectorize", _BF16_ARITH)
    _strict_conversions(op)
    _expand_math(op)
    for kernel in _kernels(op):
        if "relax.library" in kernel.attributes:  # a library call (backend/cpu_library.py)
            continue
        labels = _schedule_kernel(kernel, options)
        _log.debug("scheduled: %s", labels)
    if sum(block_float_sums(k.operation) for k in _kernels(op)):  # long sums in blocks (see the module)
        verify(op, "vectorize", "block-float-sums")


def stage_calls(module, options: CPUOptions) -> None:
    """Kernels that write their outputs in place stay private functions called by the entries
    (`no_inline` calls, `noinline` for LLVM, whose inliner would otherwise fold single-call kernels
    back into one huge entry); view kernels (a slice or reshape of an input) are inlined."""
    op = as_op(module)
    calls = _calls(op)
    noinline = ir.ArrayAttr.get([ir.StringAttr.get("noinline", op.context)], op.context)
    for f in _kernels(op):
        if _writes_its_outputs(f):
            # Renamed: a kernel named `log` would collide with the libm function `log` that
            # convert-math-to-libm declares for an f64 log.
            name = _KERNEL_PREFIX + _sym_name(f)
            f.attributes["sym_name"] = ir.StringAttr.get(name, op.context)
            f.attributes["passthrough"] = noinline
            callee = ir.FlatSymbolRefAttr.get(name, op.context)
            for call in calls.get(_sym_name(f)[len(_KERNEL_PREFIX):], ()):
                call.attributes["callee"] = callee
                call.attributes["no_inline"] = ir.UnitAttr.get(op.context)
    _run_module(op, _CALLS, "calls")
    # Canonicalization can turn a kernel into a view: a slice copied into its output whole
    # becomes the slice itself (the copy folds away). Such a kernel returns a strided view, which
    # one-shot bufferization's identity-layout function boundary casts to a contiguous memref, a
    # cast that is false at run time: the caller then read wrong elements (fuzz seed 2342267,
    # `(a1 != a0)[:, 0]`). Those kernels are inlined like every other view.
    views = {_sym_name(f) for f in _kernels(op)
             if _sym_name(f).startswith(_KERNEL_PREFIX) and not _writes_its_outputs(f)}
    if views:
        for name, calls in _calls(op).items():
            if name in views:
                for call in calls:
                    del call.attributes["no_inline"]
        _run_module(op, _CALLS_AGAIN, "calls")
    verify(op, "calls", _CALLS)


def stage_bufferize(module, options: CPUOptions) -> None:
    """One-shot bufferization, outputs in place in the caller's buffers, no leaked temporaries."""
    op = as_op(module)
    unshare_empty_tensors(op)
    _run_module(op, _BUFFERIZE_CALLS, "bufferize")
    _copy_inexact_layout_casts(op)
    # A kernel that still returns a buffer (its analysis found no argument to write in place)
    # is inlined: a returned buffer would be cloned on every call. Only those: bufferization
    # rebuilt every call without its `no_inline`, which is set again on the others (else every
    # kernel would be inlined at every call site: measured, a 12-layer LLM's compile time grew
    # by 2.5 s per layer).
    returning = {_sym_name(f) for f in _kernels(op)
                 if ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value).results}
    if returning:
        keep = ir.UnitAttr.get(op.context)
        for name, calls in _calls(op).items():
            for call in calls:
                if name in returning:
                    if "no_inline" in call.attributes:
                        del call.attributes["no_inline"]
                elif name.startswith(_KERNEL_PREFIX):
                    call.attributes["no_inline"] = keep
        _run_module(op, "inline,symbol-dce", "bufferize")
    _run_module(op, _BUFFERIZE_REST, "bufferize")
    verify(op, "bufferize", _BUFFERIZE)
    from relax_mlir.backend.cpu_library import lower_library_ops

    lower_library_ops(as_op(module))
    if knobs.profile():
        instrument_for_profile(as_op(module))


def _identity_layout(t: ir.MemRefType) -> bool:
    layout = t.layout
    return (isinstance(layout, ir.AffineMapAttr)
            and layout.value == ir.AffineMap.get_identity(layout.value.n_dims, t.context))


def _cast_is_exact(src: ir.MemRefType, dst: ir.MemRefType) -> bool:
    """Whether a view of type `src` is certainly laid out as the contiguous `dst` says: offset 0
    and every stride (of a dim that is not 1) the product of the static sizes inside it."""
    strides, offset = src.get_strides_and_offset()
    if offset != 0:
        return False
    expected = 1
    for size, stride in zip(reversed(dst.shape), reversed(strides)):
        if size == 1:
            continue
        if expected is None or stride != expected:
            return False
        expected = None if ir.ShapedType.is_dynamic_size(size) else expected * size
    return True


# Ops through which a function argument is only read, or viewed (the views' uses are followed).
_READS = {"memref.load": (0,), "vector.transfer_read": (0,), "vector.load": (0,), "memref.dim": (0,),
          "memref.copy": (0,), "vector.maskedload": (0,), "vector.gather": (0,),
          "memref.extract_strided_metadata": ()}
_VIEWS = ("memref.subview", "memref.cast", "memref.reinterpret_cast", "memref.collapse_shape",
          "memref.expand_shape", "memref.reshape", "memref.transpose")


def _only_read(value: ir.Value, funcs: dict, seen: set) -> bool:
    """True if nothing writes through `value` (an argument or a view of one), following views and
    calls; anything not known to only read counts as a write."""
    for use in value.uses:
        user, idx = use.owner, use.operand_number
        name = user.name
        if name in _READS and (not _READS[name] or idx in _READS[name]):
            if name == "memref.extract_strided_metadata" and len(list(user.results[0].uses)) > 0:
                return False  # its base buffer escapes
            continue
        if name in _VIEWS and idx == 0:
            if not all(_only_read(r, funcs, seen) for r in user.results):
                return False
            continue
        if name.startswith("linalg.") and "operandSegmentSizes" in user.attributes:
            n_in = ir.DenseI32ArrayAttr(user.attributes["operandSegmentSizes"])[0]
            if idx < n_in:
                continue
            return False
        if name == "func.call":
            callee = funcs.get(ir.FlatSymbolRefAttr(user.attributes["callee"]).value)
            if callee is None or len(callee.regions[0].blocks) == 0:
                return False
            key = (ir.FlatSymbolRefAttr(user.attributes["callee"]).value, idx)
            if key not in seen:
                seen.add(key)
                if not _only_read(callee.regions[0].blocks[0].arguments[idx], funcs, seen):
                    return False
            continue
        return False
    return True


def _copy_inexact_layout_casts(op: ir.Operation) -> None:
    """One-shot bufferization passes a strided view to a function taking a contiguous
    (identity-layout) memref through a `memref.cast` when the view's static strides are merely
    compatible with the parameter's (upstream takes the identity layout's dynamic strides as any
    strides): a `[:n, :n]` slice of a 128 x 128 mask, with row stride 128, became a contiguous
    n x n buffer, right only while the callee happens to read each row through the descriptor's
    strides (a reshape, a copy by memcpy or a flattened read of it would take the wrong
    elements). Such a cast is replaced by a copy into a contiguous buffer (what bufferization
    itself does for an incompatible layout) when the callee only reads that argument; a cast that
    is exact (offset 0, strides those of the static sizes) stays; any other is refused."""
    funcs = {_sym_name(f): f for f in top_funcs(op)}
    bad = []
    todo = []

    def visit(o):
        if o.name == "memref.cast":
            src, dst = o.operands[0].type, o.results[0].type
            if (isinstance(src, ir.MemRefType) and isinstance(dst, ir.MemRefType)
                    and not _identity_layout(src) and _identity_layout(dst) and not _cast_is_exact(src, dst)):
                todo.append(o)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    for cast in todo:
        uses = list(cast.results[0].uses)
        if not all(u.owner.name == "func.call" for u in uses) or not _only_read(cast.results[0], funcs, set()):
            bad.append(cast)
            continue
        src, dst = cast.operands[0], cast.results[0].type
        with ir.InsertionPoint(cast), cast.location:
            idx = ir.IndexType.get()
            sizes = []
            for i, size in enumerate(dst.shape):
                if ir.ShapedType.is_dynamic_size(size):
                    c = ir.Operation.create("arith.constant", [idx],
                                            attributes={"value": ir.IntegerAttr.get(idx, i)}).results[0]
                    sizes.append(ir.Operation.create("memref.dim", [idx], [src, c]).results[0])
            seg = ir.DenseI32ArrayAttr.get([len(sizes), 0])
            buf = ir.Operation.create("memref.alloc", [dst], sizes, attributes={
                "operandSegmentSizes": seg, "alignment": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)}
            ).results[0]
            ir.Operation.create("memref.copy", [], [src, buf])
        cast.results[0].replace_all_uses_with(buf)
        cast.erase()
    if bad:
        raise LoweringError("bufferize", "one-shot-bufferize",
                            f"a strided view is cast to a contiguous buffer where it cannot be copied ({len(bad)} "
                            f"such casts; the first: {bad[0]}); refusing code that would compute wrong elements")


def stage_parallelize(module, options: CPUOptions) -> None:
    """Parallel loops onto the async runtime's thread pool (or plain loops for one thread); first,
    the loop nests that inlined kernels left in the entries become one shared kernel per distinct
    nest (backend/cpu_outline.py: a KV-cache update otherwise compiles once per layer). Before
    anything, masks that are bounds checks become bounds checks (backend/cpu_masks.py), while the
    sizes they are checked against are still visible beside them (parallel bodies take them as
    arguments once outlined)."""
    row_masks_as_bounds(as_op(module))
    outline_host_loops(as_op(module), lambda f: not _is_private(f) and not _is_declaration(f))
    pipeline = _parallelize_pipeline(options)
    _run_module(module, pipeline, "parallelize")
    verify(module, "parallelize", pipeline)


def _record_entry_signatures(op: ir.Operation) -> None:
    sigs = {}
    for f in top_funcs(op):
        if _is_private(f) or _is_declaration(f):
            continue
        ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
        sigs[_sym_name(f)] = ir.ArrayAttr.get([ir.TypeAttr.get(t) for t in ftype.inputs], op.context)
        if "llvm.emit_c_interface" not in f.attributes:
            f.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get(op.context)
    op.attributes[_SIGNATURES_ATTR] = ir.DictAttr.get(sigs, op.context)


def stage_to_llvm(module, options: CPUOptions) -> None:
    """Lower everything to the LLVM dialect; entry signatures are kept as a module attribute."""
    op = as_op(module)
    _record_entry_signatures(op)
    _run_module(op, _TO_LLVM_LOOPS, "to-llvm")
    ieee_min_max_as_llvm(op)
    if _has_bf16(op):  # after linalg became loops (an expansion inside a linalg body breaks it)
        move_bf16_through_f32(op)
        bf16_rounding_keeps_nan_sign(op)
        _run_module(op, _BF16_CONVERT, "to-llvm")
    legalize_i1_memory(op)
    _run_module(op, _TO_LLVM_CONVERT, "to-llvm")
    if _has_bf16(op):
        bf16_vector_memory_as_i16(op)
    _internal_linkage(op)
    bodies = _keep_parallel_bodies_outlined(op)
    _inline_entries_into_wrappers(op)
    if options.flush_denormals and host_supports_flush():
        flush_denormals(op, [w for _e, w in entry_wrapper_pairs(op)], bodies)
    verify(op, "to-llvm", _TO_LLVM)


def _internal_linkage(op: ir.Operation) -> None:
    """Private functions get internal linkage (func-to-llvm leaves them external): a kernel named
    `tanh` in a shared library would otherwise be interposed by libm's `tanh` at load time."""
    internal = ir.Attribute.parse("#llvm.linkage<internal>", op.context)
    for f in op.regions[0].blocks[0].operations:
        if (f.operation.name == "llvm.func" and len(f.regions[0].blocks) > 0
                and "sym_visibility" in f.attributes
                and ir.StringAttr(f.attributes["sym_visibility"]).value == "private"):
            f.attributes["linkage"] = internal


# The function `async-parallel-for` outlines each parallel loop's body into (the name is the
# upstream pass's; numbered suffixes follow it).
_PARALLEL_BODY = "parallel_compute_fn"


def _keep_parallel_bodies_outlined(op: ir.Operation) -> list[ir.OpView]:
    """`async-parallel-for` outlines each parallel loop's body into a `parallel_compute_fn`, called
    twice: by the kernel for the first block of iterations and by the coroutine that launches the
    others. LLVM's inliner copied the body into both (65 of the 79 bodies of a 12-layer Llama decode
    step) and coroutine splitting then cloned the copy again. Marked `noinline`, each body is
    compiled once, at the cost of one call per block of iterations (measured, that 12-layer decode
    step's threaded build: `opt -O3` 2.43 -> 1.98 s, `llc -O3` 1.43 -> 1.26 s). Returns every
    defined parallel body (also those marked `alwaysinline`)."""
    bodies = []
    noinline = ir.StringAttr.get("noinline", op.context)
    for f in op.regions[0].blocks[0].operations:
        if f.operation.name != "llvm.func" or len(f.regions[0].blocks) == 0:
            continue
        name = ir.StringAttr(f.attributes["sym_name"]).value
        if not name.startswith(_PARALLEL_BODY):
            continue
        bodies.append(f)
        flags = list(ir.ArrayAttr(f.attributes["passthrough"])) if "passthrough" in f.attributes else []
        if any(str(a) == '"alwaysinline"' for a in flags):
            continue
        if not any(str(a) == '"noinline"' for a in flags):
            f.attributes["passthrough"] = ir.ArrayAttr.get(flags + [noinline], op.context)
    return bodies


_CIFACE = "_mlir_ciface_"


def entry_wrapper_pairs(op: ir.Operation) -> list[tuple[ir.OpView, ir.OpView]]:
    """(entry, its `_mlir_ciface_` wrapper) for each defined `llvm.func` entry with a C interface."""
    funcs = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in op.regions[0].blocks[0].operations
             if f.operation.name == "llvm.func" and len(f.regions[0].blocks) > 0}
    return [(f, funcs[_CIFACE + name]) for name, f in funcs.items()
            if not name.startswith(_CIFACE) and _CIFACE + name in funcs]


def _inline_entries_into_wrappers(op: ir.Operation) -> None:
    """An entry is only ever called through its `_mlir_ciface_` wrapper (the JIT and the artifact
    look up nothing else): it becomes internal and always inlined there. Left external, the entry
    takes every memref field as a scalar argument (an LLM decode step: 7-11 per weight, over a
    thousand), and both the wrapper's call of it and the ExecutionEngine's packed `_mlir_<entry>`
    wrapper are calls with that many arguments, on which LLVM's instruction selection is
    quadratic (measured: a 12-layer Llama decode step's wrapper took 15.8 s in `llc`, the entry
    itself 0.6 s). Inlined, the entry's body reads the descriptors the wrapper receives."""
    internal = ir.Attribute.parse("#llvm.linkage<internal>", op.context)
    for entry, _wrapper in entry_wrapper_pairs(op):
        entry.attributes["linkage"] = internal
        flags = list(ir.ArrayAttr(entry.attributes["passthrough"])) if "passthrough" in entry.attributes else []
        flags = [a for a in flags if str(a) not in ('"noinline"', '"alwaysinline"')]
        entry.attributes["passthrough"] = ir.ArrayAttr.get(
            flags + [ir.StringAttr.get("alwaysinline", op.context)], op.context)


STAGES: dict[str, Callable[[ir.Module, CPUOptions], None]] = {
    "vectorize": stage_vectorize,
    "calls": stage_calls,
    "bufferize": stage_bufferize,
    "parallelize": stage_parallelize,
    "to-llvm": stage_to_llvm,
}


def pipeline_strings(options: CPUOptions | None = None) -> dict[str, str]:
    """The upstream pass pipeline of each stage (the vectorize stage is transform IR, built per op)."""
    options = options or CPUOptions()
    return {
        "vectorize": "transform-interpreter, per kernel (_kernel_schedule) or per op (_schedule_for)",
        "calls": _CALLS + ", kernels marked noinline",
        "bufferize": _BUFFERIZE,
        "parallelize": _parallelize_pipeline(options),
        "to-llvm": _TO_LLVM,
    }


def lower(module, options: CPUOptions | None = None, *, until: str | None = None) -> None:
    """Run the stages in order on `module` (in place); stop after stage `until` if given."""
    run_stages(STAGES, module, options or CPUOptions(), until, "CPU")


# --------------------------------------------------------------------------------------------
# Passes for the driver
# --------------------------------------------------------------------------------------------


def _options_from(p) -> CPUOptions:
    return CPUOptions(num_threads=p.num_threads if p.num_threads > 0 else _default_num_threads(),
                      vectorize=p.vectorize)


@dataclass(frozen=True)
class _CPUStagePass(ModulePass):
    """Base of the per-stage passes: options mirror the CPUOptions that matter to the stage."""

    stage: ClassVar[str] = ""
    num_threads: int = 0  # 0: RELAX_MLIR_NUM_THREADS or the number of CPUs
    vectorize: bool = True

    def validate(self) -> None:
        if not 0 <= self.num_threads <= INT32_MAX:
            raise PipelineError(f"option num_threads of {self.name} must be 0 (RELAX_MLIR_NUM_THREADS or the number "
                                f"of CPUs) or a thread count up to {INT32_MAX}, got {self.num_threads}")

    def run(self, module: ir.Operation) -> None:
        require_upstream(module, self.name)
        STAGES[self.stage](module, _options_from(self))


@dataclass(frozen=True)
class CPUVectorizePass(_CPUStagePass):
    """Tile and vectorize kernels with the transform dialect, falling back per op."""

    name: ClassVar[str] = "relax-cpu-vectorize"
    stage: ClassVar[str] = "vectorize"


@dataclass(frozen=True)
class CPUCallsPass(_CPUStagePass):
    """Kernels stay functions called by the entries (noinline): LLVM compiles each once."""

    name: ClassVar[str] = "relax-cpu-calls"
    stage: ClassVar[str] = "calls"


@dataclass(frozen=True)
class CPUBufferizePass(_CPUStagePass):
    """One-shot bufferize with in-place outputs and ownership-based deallocation."""

    name: ClassVar[str] = "relax-cpu-bufferize"
    stage: ClassVar[str] = "bufferize"


@dataclass(frozen=True)
class CPUParallelizePass(_CPUStagePass):
    """Parallel loops onto the async runtime (sequential loops when num_threads=1)."""

    name: ClassVar[str] = "relax-cpu-parallelize"
    stage: ClassVar[str] = "parallelize"


@dataclass(frozen=True)
class CPURowMasksPass(ModulePass):
    """Masks of partial tiles that only bound an access by its buffer's size become bounds checks
    (cpu_masks.py; the first step of relax-cpu-parallelize)."""

    name: ClassVar[str] = "relax-cpu-row-masks"

    def run(self, module: ir.Operation) -> None:
        require_upstream(module, self.name)
        row_masks_as_bounds(module)


@dataclass(frozen=True)
class CPUToLLVMPass(_CPUStagePass):
    """Lower to the LLVM dialect."""

    name: ClassVar[str] = "relax-cpu-to-llvm"
    stage: ClassVar[str] = "to-llvm"


@dataclass(frozen=True)
class CPULowerPass(_CPUStagePass):
    """The whole CPU pipeline: vectorize, calls, bufferize, parallelize, to-llvm."""

    name: ClassVar[str] = "relax-cpu-lower"

    def run(self, module: ir.Operation) -> None:
        require_upstream(module, self.name)
        lower(module, _options_from(self))


CPU_PASSES = (CPUVectorizePass, CPUCallsPass, CPUBufferizePass, CPURowMasksPass, CPUParallelizePass,
              CPUToLLVMPass, CPULowerPass)


# --------------------------------------------------------------------------------------------
# JIT
# --------------------------------------------------------------------------------------------

def _mlir_lib_dir() -> str:
    import mlir

    for p in mlir.__path__:
        d = os.path.join(p, "lib")
        if os.path.exists(os.path.join(d, "libmlir_c_runner_utils.so")):
            return d
    raise RuntimeError("cannot find libmlir_c_runner_utils.so under mlir.__path__")


_LOCAL_LIBS: dict[str, ctypes.CDLL] = {}
_LOCAL_LIBS_LOCK = threading.Lock()


def _load_local(path: str) -> ctypes.CDLL:
    """dlopen a runtime library RTLD_LOCAL, once per process (never unloaded: jitted code keeps
    its addresses)."""
    with _LOCAL_LIBS_LOCK:
        lib = _LOCAL_LIBS.get(path)
        if lib is None:
            lib = _LOCAL_LIBS[path] = ctypes.CDLL(path)
        return lib


_PROCESS = ctypes.CDLL(None)

# Library calls LLVM's code generation emits by itself (not declared in the MLIR module): 128-bit
# integer division and conversions, f16 conversions, powi, ... live in libgcc_s, which carries no
# LLVM and is made global (the engine searches the process); bf16 conversions live in MLIR's
# float16 utils, which link libLLVM: opened RTLD_LOCAL, their two symbols are registered.
_BF16_LIBCALLS = ("__truncsfbf2", "__truncdfbf2")
_LIBCALL_ADDRS: dict[str, ctypes.c_void_p] | None = None
_LIBCALL_LOCK = threading.Lock()


def _libcalls() -> dict[str, ctypes.c_void_p]:
    """The addresses of the library calls to register with every engine, found once per process
    (under a lock: two threads' first compiles or calls would otherwise both load them, and one
    could read the dict while the other builds it)."""
    global _LIBCALL_ADDRS
    found = _LIBCALL_ADDRS
    if found is not None:
        return found
    with _LIBCALL_LOCK:
        if _LIBCALL_ADDRS is None:
            try:
                ctypes.CDLL("libgcc_s.so.1", mode=ctypes.RTLD_GLOBAL)
            except OSError:
                pass  # a libc without it: LLVM's lookup reports what it misses
            lib = _load_local(os.path.join(_mlir_lib_dir(), "libmlir_float16_utils.so"))
            _LIBCALL_ADDRS = {s: ctypes.cast(getattr(lib, s), ctypes.c_void_p)
                              for s in _BF16_LIBCALLS if not hasattr(_PROCESS, s) and hasattr(lib, s)}
        return _LIBCALL_ADDRS


def _external_symbols(module_op: ir.Operation) -> list[str]:
    out = []
    for op in module_op.regions[0].blocks[0].operations:
        if op.operation.name == "llvm.func" and len(op.regions[0].blocks) == 0:
            out.append(ir.StringAttr(op.attributes["sym_name"]).value)
    return out


_NP_OF = {
    "f16": np.float16, "f32": np.float32, "f64": np.float64, "i1": np.bool_, "i8": np.int8,
    "i16": np.int16, "i32": np.int32, "i64": np.int64, "ui8": np.uint8,
}


@dataclass(frozen=True)
class _ArgSpec:
    dtype: np.dtype
    shape: tuple[int | None, ...]

    @property
    def static_dims(self) -> tuple[tuple[int, int], ...]:
        return tuple((k, s) for k, s in enumerate(self.shape) if s is not None)


def _parse_signatures(module_op: ir.Operation) -> dict[str, list[_ArgSpec]]:
    if _SIGNATURES_ATTR not in module_op.attributes:
        return {}
    out = {}
    d = ir.DictAttr(module_op.attributes[_SIGNATURES_ATTR])
    for i in range(len(d)):
        named = d[i]
        specs = []
        for a in ir.ArrayAttr(named.attr):
            t = ir.TypeAttr(a).value
            if not isinstance(t, ir.MemRefType):
                specs = None
                break
            mt = t
            np_t = _NP_OF.get(str(mt.element_type))
            if np_t is None:
                specs = None
                break
            shape = tuple(None if ir.ShapedType.is_dynamic_size(s) else s for s in mt.shape)
            specs.append(_ArgSpec(np.dtype(np_t), shape))
        if specs is not None:
            out[named.name] = specs
    return out


class JitModule:
    """A module lowered to the LLVM dialect, compiled by MLIR's ExecutionEngine.

    ABI of an entry `@f(%a0: memref<...>, ..., %err: memref<1xi32>)` carrying
    `llvm.emit_c_interface`: `invoke("f", *arrays)` passes one numpy array per memref argument,
    in order, each as a pointer to a pointer to its ranked memref descriptor
    `{allocated, aligned, offset, sizes[rank], strides[rank]}` (all 64-bit; rank 0 has only the
    first three). Arrays must be C-contiguous (identity layout) and are used in place: outputs
    and the error slot are written through. Arguments are checked against the entry signature
    recorded by the to-llvm stage (dtype, rank, static dims) before native code runs.
    Calls may come from several Python threads at once (the GIL is released during the call).
    """

    def __init__(self, module: ir.Module, opt_level: int = 3, shared_libs: Sequence[str] = ()):
        op = as_op(module)
        self._signatures = _parse_signatures(op)
        externals = _external_symbols(op)
        libs = [os.path.join(_mlir_lib_dir(), "libmlir_c_runner_utils.so")]
        libs += list(shared_libs)
        from relax_mlir.runtime import native_rt

        # The pooled products, BLAS, and the async runtime API of parallel loops: relax-mlir's
        # run-time library implements it (runtime/relax_rt.c) unless RELAX_MLIR_ASYNC_RUNTIME=mlir.
        rt_libs = native_rt.libraries_for(externals)
        libs += rt_libs
        # MLIR's async runtime is not given to the engine either: an engine calls the library's
        # `__mlir_execution_engine_destroy` when it dies, which deletes the process-wide default
        # runtime and leaves every later async call a null dereference.
        if any(s.startswith("mlirAsyncRuntime") for s in externals) and not native_rt.runs_async_tasks():
            libs.append(os.path.join(_mlir_lib_dir(), "libmlir_async_runtime.so"))
        # Resolve every external symbol before creating the engine (a missing one aborts), in
        # libraries opened RTLD_LOCAL, and hand the addresses to the engine before its first
        # lookup (which is when it links). Given as `shared_libs`, the engine would dlopen them
        # RTLD_GLOBAL, and with them libLLVM/libMLIR, their dependencies: every library loaded
        # later (tensorflow's, with its own LLVM) would then bind to this LLVM and abort.
        loaded = [_load_local(p) for p in libs]
        resolved: dict[str, ctypes.c_void_p] = {}
        missing = []
        for s in externals:
            # The libraries chosen above first, then the process: once any engine has loaded
            # MLIR's async runtime globally (`cpu_matmul.compile_matmul` hands it `shared_libs`),
            # the process defines `mlirAsyncRuntime*` too, and the parallel loops would run there
            # instead of on the run-time library's pool (test_native_rt failed by test order).
            lib = next((lib for lib in loaded if hasattr(lib, s)), None)
            if lib is not None:
                resolved[s] = ctypes.cast(getattr(lib, s), ctypes.c_void_p)
            elif not hasattr(_PROCESS, s):
                missing.append(s)
        if missing:
            raise LoweringError("jit", "ExecutionEngine", "unresolved external symbols: "
                                + ", ".join(missing))
        resolved.update(_libcalls())
        if rt_libs and native_rt.library_path() in rt_libs:
            native_rt.start()  # the pool's workers now, not in the first call that reaches the pool
        self.module = module
        pairs = entry_wrapper_pairs(op)
        hosts = {_sym_name(f) for pair in pairs for f in pair}
        wrappers = {_sym_name(w) for _e, w in pairs}
        symbols = {s: (a.value or 0) for s, a in resolved.items()}
        # the kernels and the host program compiled on several cores (backend/cpu_engine.py)
        self.engine = SplitEngine(module, opt_level, symbols, hosts, wrappers,
                                  host_loops=HOST_LOOPS_ATTR in op.attributes)
        self._funcs: dict[str, tuple] = {}
        self._lock = threading.Lock()

    def _lookup(self, name: str):
        f = self._funcs.get(name)
        if f is None:
            with self._lock:
                f = self._funcs.get(name)
                if f is None:
                    addr = self.engine.lookup_packed("_mlir_ciface_" + name)
                    if not addr:
                        raise KeyError(f"no entry @{name} with llvm.emit_c_interface in the module")
                    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(addr)
                    sig = self._signatures.get(name)
                    specs = None if sig is None else tuple(
                        (sp.dtype, len(sp.shape), sp.static_dims) for sp in sig)
                    f = (fn, specs)
                    self._funcs[name] = f
        return f

    def invoke(self, name: str, *arrays: np.ndarray) -> None:
        """Call entry `name` with numpy arrays as its memref arguments (in place, no copies)."""
        entry = self._funcs.get(name) or self._lookup(name)
        fn, specs = entry
        if specs is not None and len(arrays) != len(specs):
            raise TypeError(f"@{name} takes {len(specs)} memref arguments, got {len(arrays)}")
        # One int64 buffer: the descriptors {allocated, aligned, offset, sizes, strides} back
        # to back, then the pointers to them, then the packed array of pointers to those.
        words: list[int] = []
        ndims = []
        for i, a in enumerate(arrays):
            if type(a) is not np.ndarray:
                raise TypeError(f"argument {i} of @{name} is {type(a).__name__}, not numpy.ndarray")
            shape = a.shape
            if specs is not None:
                dtype, rank, static = specs[i]
                if a.dtype != dtype or len(shape) != rank:
                    self._bad_argument(name, i, a, self._signatures[name][i])
                for k, size in static:
                    if shape[k] != size:
                        self._bad_argument(name, i, a, self._signatures[name][i])
            if not a.flags.c_contiguous:
                raise ValueError(f"argument {i} of @{name} is not C-contiguous")
            ptr = _data_pointer(a)
            words += (ptr, ptr, 0)
            if shape:
                words += shape
                words += _contiguous_strides(shape)
            ndims.append(len(shape))
        key = tuple(ndims)
        buf_type, desc_offsets, slot_offsets = _LAYOUTS.get(key) or _layout(key)
        buf = buf_type()
        base = _addressof(buf)
        words += [base + o for o in desc_offsets]
        words += [base + o for o in slot_offsets]
        buf[:] = words
        fn(base + 8 * len(words) - 8 * len(arrays))
        # `arrays` and `buf` stay referenced until here: native code never sees freed memory.

    @staticmethod
    def _bad_argument(name, i, a, sp):
        if type(a) is not np.ndarray:
            raise TypeError(f"argument {i} of @{name} is {type(a).__name__}, not numpy.ndarray")
        expected = tuple("?" if s is None else s for s in sp.shape)
        if a.dtype != sp.dtype:
            raise TypeError(f"argument {i} of @{name}: dtype {a.dtype}, expected {sp.dtype}")
        raise ValueError(f"argument {i} of @{name}: shape {a.shape}, expected {expected}")


_addressof = ctypes.addressof
_char_from_buffer = ctypes.c_char.from_buffer


def _data_pointer(a: np.ndarray) -> int:
    """Address of a C-contiguous array's first element (from_buffer is 4x faster than .ctypes)."""
    if a.flags.writeable and a.size:
        return _addressof(_char_from_buffer(a))
    return a.ctypes.data


_LAYOUTS: dict[tuple[int, ...], tuple] = {}


def _layout(ndims: tuple[int, ...]) -> tuple:
    """Call-buffer type and the byte offsets of each descriptor and of each pointer slot."""
    offsets, pos = [], 0
    for r in ndims:
        offsets.append(8 * pos)
        pos += 3 + 2 * r
    slots = [8 * (pos + i) for i in range(len(ndims))]
    layout = (ctypes.c_int64 * (pos + 2 * len(ndims)), tuple(offsets), tuple(slots))
    _LAYOUTS[ndims] = layout
    return layout


@functools.lru_cache(maxsize=4096)
def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Identity-layout strides in elements (numpy may give size-1 dims any stride)."""
    out, stride = [], 1
    for d in reversed(shape):
        out.append(stride)
        stride *= d
    return tuple(reversed(out))
