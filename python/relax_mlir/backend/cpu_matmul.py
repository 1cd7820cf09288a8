"""A register-blocked matmul schedule for dynamic M, as transform-dialect IR.

Kernels handled: a ``func.func`` whose body is an optional ``linalg.fill`` followed by one
``linalg.matmul`` (``tensor<?xKxf32> x tensor<KxNxf32> -> tensor<?xNxf32>``) or
``linalg.batch_matmul``, f32; M, N, K each static or dynamic (M dynamic is the fast path).

``version_matmul_kernel`` first splits a dynamic-M kernel into nested ``scf.if (M <= limit)``
over copies of the matmul tagged ``relax_mlir.matmul_variant``; ``matmul_schedule`` then gives
each copy its own schedule (one compile serves every M):

* ``gemv`` (M = 1, the decode step's matrix-vector products), ``small`` (M <= 4) and
  ``medium`` (M <= 16): *streaming*, no packing. Loop order M tile, K step, N step; per step a
  ``kr x nr`` block of B rows (contiguous row segments, so the hardware prefetcher streams B:
  each K step reads kr rows of B from end to end) is multiplied into an ``mr x nr`` tile of C
  kept in cache. Tiles (mr, nr, kr) = (1, 64, 16), (4, 64, 8) and (8, 32, 8): the gemv tile
  computes no padded rows (the small tile at M = 1 did 4x the multiply-adds and reached 8-9
  GB/s of B against OpenBLAS sgemv's 10-11; the gemv tile 10.5-12, bench/gemv.py). Partial
  tiles are zero padded (A packed per K step, masked reads/writes of C). An optional N chunk
  (``stream_nc``) keeps C's slice in L1 but cuts B's rows into short streams: measured slower
  (6 vs 11 GB/s at 1024 x 2816), off by default. gemv and small split N over threads only
  from ``stream_parallel_min`` weights (see MatmulConfig).
* ``large``: *packed*, per thread::

    forall t < T                                      # scf.forall over N (only when T > 1)
      [for pc < K step kc]                            # only for dynamic K or K > kc_max
       for jo < N_t step nc                           # N block (nc = 256)
         Bp[nc/nr][kc][nr] = pack(B[pc.., jo..])      # pad nofold + hoist_pad by 2 loops
         for i < M step mr                            # M register tile, partial tile padded
           Ap[mr][kc] = pack(A[i.., pc..])            # pad nofold + hoist_pad by 1 loop
           for ji < nc step nr
             acc<mr x nr> = 0 | C[i.., jo+ji..]       # fill fused into the tile
             for k < kc: acc += Ap[:, k] (x) Bp[ji][k] # vector.contract -> outerproduct -> FMA
             C[i.., jo+ji..] = acc                    # out-of-bounds-masked transfer_write

  The register tile is 8 x 32 f32: sixteen 512-bit accumulators (AVX-512; 32 ymm halves on
  AVX2), per k step 2 vector loads of packed B, 8 broadcasts of packed A and 16 FMAs. Packing
  is tensor.pad ``nofold`` copies hoisted by ``hoist_pad``, tiled (B by 16 rows, A by 32
  columns) and vectorized with masks; the "empty tile" branch of a tiled pad cannot occur
  without K blocking and is dropped (``take_assumed_branch``). With K blocking (dynamic K)
  ``hoist_pad`` cannot hoist B, which is then read in place (correct, slower).

Common to all: accumulators stay in registers across the k loop
(``transform.loop.hoist_loop_invariant_subsets`` on tensors); vector.contract is lowered to
outer products / ``vector.fma``; masked transfers are lowered inside the schedule, in their own
``apply_patterns`` block. Threads: ``scf.forall`` over N chunks, lowered by
``async-parallel-for`` (min-task-size 1) onto the MLIR async runtime; ``num_threads=1`` emits
no forall.

``compile_matmul`` builds such a kernel, applies the schedule, bufferizes (caller-owned C),
lowers to LLVM and returns a numpy callable; ``bench/matmul.py`` measures it.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = [
    "MatmulConfig",
    "MatmulShape",
    "matmul_schedule",
    "matmul_schedule_module",
    "is_matmul_kernel",
    "matmul_kernel_shape",
    "matmul_kernel_text",
    "version_matmul_kernel",
    "matmul_kernel_variants",
    "lower_to_llvm_pipeline",
    "compile_matmul",
]

DYN = None  # a dynamic dimension in a MatmulShape


@dataclass(frozen=True)
class MatmulConfig:
    """Tile sizes of the schedule. Defaults are tuned for AVX-512/AVX2 with FMA."""

    mr: int = 8  # rows of the register tile (large-M path)
    nr: int = 32  # columns of the register tile (2 x 16 f32 lanes)
    nc: int = 256  # N block whose B panel is packed at once
    kc: int = 512  # K block when K is dynamic or larger than kc_max
    kc_max: int = 1024  # static K up to this is not blocked
    b_pack_rows: int = 16  # rows copied per vector step when packing B
    # Streaming paths (no packing) for small M: M <= gemv_m_max takes "gemv" tiles (the
    # matrix-vector product of a decode step), M <= small_m_max "small" tiles, M <= medium_m_max
    # "medium" tiles; larger M the packed path. 0 disables a path.
    gemv_m_max: int = 1
    gemv_tile: tuple[int, int, int] = (1, 64, 16)  # mr, nr, kr: rows, columns, B rows per step
    small_m_max: int = 4
    small_tile: tuple[int, int, int] = (4, 64, 8)
    medium_m_max: int = 16
    medium_tile: tuple[int, int, int] = (8, 32, 8)
    # N chunk of the streaming paths: the mr x chunk slice of C stays in L1 while the K steps
    # stream B's row segments into it (0: no chunking, C's whole row block per K step).
    stream_nc: int = 0
    # A task handoff of the async runtime costs ~50-100 us (thread wake-up), and a barrier waits
    # for a scheduler tick when the other core is busy: the memory-bound streaming variants (at
    # most small_m_max rows) split N over threads only when K * N (static) is at least this (0:
    # always; dynamic K or N: never). Measured (bench/gemv.py, load 6-10): one thread reads the
    # decode step's weights at 10-12 GB/s, two threads at 2-11; 1024 x 32000: 3-4 GB/s either way.
    stream_parallel_min: int = 1 << 24
    parallel_min_m: int = 0

    def variants(self) -> list[tuple[str, int | None]]:
        """(name, largest M) of each variant, in dispatch order; the last one is unbounded."""
        out: list[tuple[str, int | None]] = []
        for name, lim in (("gemv", self.gemv_m_max), ("small", self.small_m_max), ("medium", self.medium_m_max)):
            if lim > (out[-1][1] if out else 0):
                out.append((name, lim))
        return out + [("large", None)]

    def streaming_tile(self, variant: str) -> tuple[int, int, int]:
        return {"gemv": self.gemv_tile, "small": self.small_tile, "medium": self.medium_tile}[variant]


@dataclass(frozen=True)
class MatmulShape:
    """Static facts of one matmul kernel; None means dynamic."""

    m: int | None
    k: int | None
    n: int | None
    batch: bool = False
    has_fill: bool = True
    versioned: bool = False  # the kernel holds a small and a large variant (version_matmul_kernel)
    # With `versioned`: the variants the kernel holds (empty: all of MatmulConfig.variants()). A
    # relax-multiversion kernel may hold only some, its other row ranges going to BLAS.
    variants: tuple[str, ...] = ()


VARIANT_ATTR = "relax_mlir.matmul_variant"


class _Emitter:
    """Emits transform IR lines with fresh SSA names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._n = 0

    def op(self, text: str, results: int = 1, hint: str = "h") -> list[str]:
        names = []
        for _ in range(results):
            self._n += 1
            names.append(f"%{hint}{self._n}")
        lhs = ", ".join(names) + " = " if names else ""
        self.lines.append(lhs + text)
        return names

    def do(self, text: str) -> None:
        self.lines.append(text)

    def match(self, what: str, target: str, attrs: str = "", hint: str = "m") -> str:
        attrs = f" attributes {{{attrs}}}" if attrs else ""
        return self.op(f'transform.structured.match ops{{["{what}"]}}{attrs} in {target} : {_fn_type(1, 1)}',
                       hint=hint)[0]

    def patterns(self, target: str, *names: str) -> None:
        body = "".join(f"\n  transform.apply_patterns.{n}" for n in names)
        self.do(f"transform.apply_patterns to {target} {{{body}\n}} : {_ANY}")


_ANY = "!transform.any_op"


def _fn_type(n_in: int, n_out: int) -> str:
    ins = ", ".join([_ANY] * n_in)
    outs = ", ".join([_ANY] * n_out)
    return f"({ins}) -> {outs}" if n_out == 1 else f"({ins}) -> ({outs})"


class _Plan:
    """Shared state of one schedule: the emitter, shapes and index helpers."""

    def __init__(self, e: _Emitter, shp: MatmulShape, cfg: MatmulConfig, num_threads: int):
        self.e, self.shp, self.cfg, self.num_threads = e, shp, cfg, num_threads
        self.d = 1 if shp.batch else 0  # index of the M dimension in the iteration space

    def sizes(self, *per_dim: int, batch: int = 0) -> str:
        return "[" + ", ".join(str(x) for x in ([batch] * self.d + list(per_dim))) + "]"

    def tile_for(self, target: str, tiles: str, n_loops: int, interchange: str = "") -> list[str]:
        inter = f" interchange = {interchange}" if interchange else ""
        return self.e.op(
            f"transform.structured.tile_using_for {target} tile_sizes {tiles}{inter} : {_fn_type(1, 1 + n_loops)}",
            results=1 + n_loops, hint="t",
        )

    def fuse(self, target: str, tiles: str, n_loops: int, interchange: str = "") -> list[str]:
        inter = f" interchange {interchange}" if interchange else ""
        return self.e.op(
            f"transform.structured.fuse {target} tile_sizes {tiles}{inter} {{apply_cleanup}} "
            f": {_fn_type(1, 1 + n_loops)}",
            results=1 + n_loops, hint="f",
        )

    def pad(self, target: str, nofold: str) -> str:
        d = self.d
        dims = "[" + ", ".join(str(d + i) for i in range(3)) + "]"
        return self.e.op(
            f"transform.structured.pad {target} {{padding_values = [0.0 : f32, 0.0 : f32, 0.0 : f32], "
            f'padding_dimensions = {dims}, nofold_flags = {nofold}, copy_back_op = "none"}} : {_fn_type(1, 3)}',
            results=3, hint="pad",
        )[0]

    def producer(self, target: str, i: int) -> str:
        return self.e.op(f"transform.get_producer_of_operand {target}[{i}] : {_fn_type(1, 1)}", hint="p")[0]

    def vectorize(self, target: str, vsizes: str = "") -> None:
        vs = f" vector_sizes {vsizes}" if vsizes else ""
        self.e.do(f"transform.structured.vectorize {target}{vs} : {_ANY}")

    def parallel(self, mm: str, fill: str | None) -> tuple[str, str | None]:
        """Splits N over threads with scf.forall (and fuses the fill into it)."""
        if self.num_threads <= 1:
            return mm, fill
        tiles = [0] * (self.d + 2)
        tiles[self.d + 1] = self.num_threads
        mm, forall = self.e.op(
            f"transform.structured.tile_using_forall {mm} num_threads {tiles} : {_fn_type(1, 2)}",
            results=2, hint="par",
        )
        if fill is not None:
            fill, _ = self.e.op(
                f"transform.structured.fuse_into_containing_op {fill} into {forall} : {_fn_type(2, 2)}",
                results=2, hint="pf",
            )
        return mm, fill

    def even(self, dim: str, tile: int, outer: int | None = None) -> bool:
        """True if every tile of ``dim`` (per thread, for N) is a full static ``tile``."""
        if tile == 1 and outer is None:
            return True  # a unit tile is never partial, even of a dynamic dim
        size = getattr(self.shp, dim)
        if size is None:
            return False
        if dim == "n" and self.num_threads > 1:
            if size % self.num_threads:
                return False
            size //= self.num_threads
        if outer is not None and (size % outer or outer % tile):
            return False
        return size % tile == 0

    def thread_n(self) -> int | None:
        n = self.shp.n
        return None if n is None else -(-n // max(1, self.num_threads))


def _emit_large(p: _Plan, func: str, mm: str, fill: str | None) -> tuple[str, str | None, bool]:
    """Packed path. Returns (micro-kernel op, its k loop or None, whether the fill was fused)."""
    e, shp, cfg = p.e, p.shp, p.cfg
    mr, nr, nc = cfg.mr, cfg.nr, cfg.nc
    mm, fill = p.parallel(mm, fill)
    # K blocking only for dynamic or large K; the fill then stays a separate op (fusing it
    # into the K loop would re-zero C for every K block).
    block_k = shp.k is None or shp.k > cfg.kc_max
    fuse_fill = fill is not None and not block_k
    if block_k:
        mm = p.tile_for(mm, p.sizes(0, 0, cfg.kc), 1)[0]
        if fill is not None:
            _vectorize_fill(p, fill, mr, nr)
    n_t = p.thread_n()
    n_nc = nc if (n_t is None or n_t > nc) else 0
    n_loops = 1 + (1 if n_nc else 0) + p.d
    inter = ""
    if n_nc:
        inter = str(([0] if p.d else []) + [p.d + 1, p.d + 0, p.d + 2])
    tiles = p.sizes(mr, n_nc, 0, batch=1)
    if fuse_fill:
        mm = p.fuse(mm, tiles, n_loops, inter)[0]
        mm = p.fuse(mm, p.sizes(0, nr, 0), 1)[0]
    else:
        mm = p.tile_for(mm, tiles, n_loops, inter)[0]
        mm = p.tile_for(mm, p.sizes(0, nr, 0), 1)[0]
    # Pad the micro tile to static mr x nr x kc; A and B become nofold copies (packing),
    # hoisted out of the N register loop (A) and also out of the M loop (B). hoist_pad
    # cannot hoist B out of a K-blocked nest: there B is read in place (padded at edges).
    pack_b = not block_k
    padded = p.pad(mm, "[1, 1, 0]" if pack_b else "[1, 0, 0]")
    pad_a = p.producer(padded, 0)
    if pack_b:
        pad_b = p.producer(padded, 1)
        (hb,) = e.op(f"transform.structured.hoist_pad {pad_b} by 2 loops : {_fn_type(1, 1)}", hint="hb")
    elif not (p.even("k", cfg.kc) and p.even("n", nr, nc if n_nc else None)):
        p.vectorize(p.producer(padded, 1), p.sizes(cfg.kc, nr, batch=1))
    (ha,) = e.op(f"transform.structured.hoist_pad {pad_a} by 1 loops : {_fn_type(1, 1)}", hint="ha")
    rows = cfg.b_pack_rows
    packs = [(p.tile_for(ha, p.sizes(0, nr), 1)[1], p.sizes(mr, nr, batch=1))]
    if pack_b:
        packs.append((p.tile_for(hb, p.sizes(rows, 0), 1)[1], p.sizes(rows, nr, batch=1)))
    for loop, vsizes in packs:
        # Without K blocking no tile of a tiled pad reads an empty slice: drop that branch.
        # (With K blocking the tail tiles beyond K are empty and keep it.)
        if not block_k:
            ifs = e.match("scf.if", loop)
            e.do(f"transform.foreach {ifs} : {_ANY} {{\n^bb0(%it: {_ANY}):\n"
                 f"  transform.scf.take_assumed_branch %it take_else_branch : ({_ANY}) -> ()\n}}")
        p.vectorize(e.match("tensor.pad", loop), vsizes)
    e.patterns(func, "tensor.fold_tensor_subset_ops_into_vector_transfers")
    for loop, vsizes in packs:
        ins = e.match("tensor.insert_slice", loop)
        (cps,) = e.op(f"transform.structured.insert_slice_to_copy {ins} : {_fn_type(1, 1)}", hint="cp")
        p.vectorize(cps, vsizes)
    # C: a pad of a fused fill folds to a fill of the padded tile (vectorized later); a pad
    # of C data is a masked copy.
    if not fuse_fill and not (p.even("m", mr) and p.even("n", nr, nc if n_nc else None)):
        p.vectorize(p.producer(padded, 2), p.sizes(mr, nr, batch=1))
    tk, lk = _tile_k(p, padded, 1)
    return tk, lk, fuse_fill


def _emit_streaming(p: _Plan, func: str, mm: str, fill: str | None,
                    tile: tuple[int, int, int]) -> tuple[str, str | None]:
    """Small-M path: no packing of B; per step a kr x nr block of B rows is streamed into an
    mr x nr accumulator kept in C (loop order M tile, [N chunk,] K step, N step)."""
    mr, nr, kr = tile
    mm, fill = p.parallel(mm, fill)
    n_t = p.thread_n()
    nc = p.cfg.stream_nc if p.cfg.stream_nc and (n_t is None or n_t > p.cfg.stream_nc) else 0
    outer = p.sizes(mr, nc, 0, batch=1)
    n_outer = 1 + p.d + (1 if nc else 0)
    if fill is not None:
        mm = p.fuse(mm, outer, n_outer)[0]
        fill = p.producer(mm, 2)
        _vectorize_fill(p, fill, mr, nr)
    else:
        mm = p.tile_for(mm, outer, n_outer)[0]
    inter = str(list(range(p.d)) + [p.d, p.d + 2, p.d + 1])
    mm = p.tile_for(mm, p.sizes(0, nr, kr), 2, inter)[0]
    padded = p.pad(mm, "[1, 0, 0]")
    (ha,) = p.e.op(f"transform.structured.hoist_pad {p.producer(padded, 0)} by 1 loops : {_fn_type(1, 1)}",
                   hint="ha")
    p.vectorize(ha, p.sizes(mr, kr, batch=1))
    # B and C tiles are padded only at a partial edge; a pad exists iff the tile is dynamic.
    even_n = p.even("n", nr, nc or None)
    if not (p.even("k", kr) and even_n):
        p.vectorize(p.producer(padded, 1), p.sizes(kr, nr, batch=1))
    if not (p.even("m", mr) and even_n):
        p.vectorize(p.producer(padded, 2), p.sizes(mr, nr, batch=1))
    return _tile_k(p, padded, 1)


def _stream_tile(p: _Plan, variant: str) -> tuple[int, int, int]:
    """The tile of a streaming variant. A one-row tile over a static N (per thread) of at most
    one column tile leaves a loop result that one-shot bufferization cannot place in place
    (measured: K = 64, N <= 64); such a gemv takes the small tile (rows padded) instead."""
    tile = p.cfg.streaming_tile(variant)
    n_t = p.thread_n()
    if tile[0] == 1 and n_t is not None and n_t <= tile[1]:
        return p.cfg.small_tile
    return tile


def _streams_threaded(shp: MatmulShape, cfg: MatmulConfig, limit: int) -> bool:
    """Whether a streaming variant (largest M ``limit``) splits N over the threads."""
    if limit < cfg.parallel_min_m:
        return False
    if cfg.stream_parallel_min <= 0 or limit > max(cfg.gemv_m_max, cfg.small_m_max):
        return True
    return shp.k is not None and shp.n is not None and shp.k * shp.n >= cfg.stream_parallel_min


def _tile_k(p: _Plan, op: str, kr: int) -> tuple[str, str | None]:
    if p.shp.k is not None and p.shp.k <= 1:
        return op, None
    tk, lk = p.tile_for(op, p.sizes(0, 0, kr), 1)
    return tk, lk


def _vectorize_fill(p: _Plan, fill: str, mr: int, nr: int) -> None:
    """Vectorizes a fill of C by mr x nr (masked) tiles."""
    tiles = "[" + ", ".join(["0"] * p.d + [str(mr), str(nr)]) + "]"
    tiled = p.tile_for(fill, tiles, 2)[0]
    p.vectorize(tiled, p.sizes(mr, nr, batch=1))


def matmul_schedule(
    func_name: str,
    shape: MatmulShape | None = None,
    *,
    num_threads: int = 1,
    config: MatmulConfig | None = None,
    sequence_name: str = "__transform_main",
) -> str:
    """Returns a ``transform.named_sequence @sequence_name(%root)`` that schedules the matmul
    in ``func.func @func_name`` (anywhere under ``%root``).

    ``shape`` gives the kernel's static sizes (``matmul_kernel_shape`` reads them from IR);
    by default M, K, N are dynamic and a fill is present. With ``shape.versioned`` the kernel
    must come from ``version_matmul_kernel``: both its variants are scheduled.
    """
    cfg = config or MatmulConfig()
    shp = shape or MatmulShape(None, None, None)
    e = _Emitter()
    p = _Plan(e, shp, cfg, num_threads)
    name = "linalg.batch_matmul" if shp.batch else "linalg.matmul"
    func = e.op(
        f'transform.structured.match ops{{["func.func"]}} attributes {{sym_name = "{func_name}"}} '
        f"in %root : {_fn_type(1, 1)}", hint="func",
    )[0]

    def find(variant: str | None) -> tuple[str, str | None]:
        mm = e.match(name, func, f'{VARIANT_ATTR} = "{variant}"' if variant else "", hint="mm")
        return mm, (p.producer(mm, 2) if shp.has_fill else None)

    all_variants = cfg.variants()
    if shp.versioned:
        variants = [v for v, _ in all_variants if not shp.variants or v in shp.variants]
    else:
        variants = [next(v for v, lim in all_variants if lim is None or (shp.m is not None and shp.m <= lim))]
    # The packed path first: it must run its tiling before any canonicalization.
    variants.sort(key=lambda v: v != "large")
    micro: list[tuple[str, str | None]] = []
    fused_fill = False
    for v in variants:
        mm, fill = find(v if shp.versioned else None)
        if v == "large":
            tk, lk, fused = _emit_large(p, func, mm, fill)
            fused_fill = fused_fill or fused
        else:
            vp = p if _streams_threaded(shp, cfg, dict(all_variants)[v]) else _Plan(e, shp, cfg, 1)
            tk, lk = _emit_streaming(vp, func, mm, fill, _stream_tile(vp, v))
        micro.append((tk, lk))
    for tk, _ in micro:
        p.vectorize(tk)
    e.patterns(func, "tensor.fold_tensor_subset_ops_into_vector_transfers", "vector.reduction_to_contract",
               "vector.transfer_permutation_patterns", "canonicalization")
    if fused_fill:
        # The zero accumulators: static mr x nr fills left by pad(fill) folding.
        p.vectorize(e.match("linalg.fill", func))
    e.patterns(func, "vector.cast_away_vector_leading_one_dim", "vector.drop_unit_dims_with_shape_cast",
               "canonicalization")
    for _, lk in micro:
        if lk is not None:
            e.do(f"transform.loop.hoist_loop_invariant_subsets {lk} : {_ANY}")
    e.patterns(func, 'vector.lower_contraction lowering_strategy = "outerproduct"', "vector.lower_outerproduct")
    e.do(f"transform.apply_cse to {func} : {_ANY}")
    # vector.mask regions do not survive generic passes: lower them here, in their own block.
    e.patterns(func, "vector.lower_masked_transfers")
    body = "\n".join("  " + line.replace("\n", "\n  ") for line in e.lines)
    return (
        f"transform.named_sequence @{sequence_name}(%root: {_ANY} {{transform.readonly}}) {{\n"
        f"{body}\n  transform.yield\n}}"
    )


def matmul_schedule_module(func_name: str, shape: MatmulShape | None = None, **kwargs) -> str:
    """``matmul_schedule`` wrapped in a ``module attributes {transform.with_named_sequence}``."""
    seq = matmul_schedule(func_name, shape, **kwargs)
    return "module attributes {transform.with_named_sequence} {\n" + seq + "\n}\n"


# --------------------------------------------------------------------------------------
# Recognizing kernels


def _static(dim: int) -> int | None:
    from mlir import ir

    return None if ir.ShapedType.is_dynamic_size(dim) else dim


def _body_ops(func_op) -> list:
    func_op = getattr(func_op, "operation", func_op)
    if not func_op.regions or not func_op.regions[0].blocks:
        return []
    return [op.operation if hasattr(op, "operation") else op for op in func_op.regions[0].blocks[0].operations]


def matmul_kernel_shape(func_op) -> MatmulShape | None:
    """The MatmulShape of a matmul kernel function, or None if ``func_op`` is not one."""
    from mlir import ir

    ops = [op for op in _body_ops(func_op) if op.name != "arith.constant"]
    names = [op.name for op in ops]
    if names not in (
        ["linalg.matmul", "func.return"],
        ["linalg.batch_matmul", "func.return"],
        ["linalg.fill", "linalg.matmul", "func.return"],
        ["linalg.fill", "linalg.batch_matmul", "func.return"],
    ):
        return None
    mm = ops[-2]
    batch = mm.name == "linalg.batch_matmul"
    # Only the plain named form: no transposing/broadcasting indexing_maps, no casts.
    if "indexing_maps" in mm.attributes and not _default_maps(mm, batch):
        return None
    if len(mm.operands) != 3 or len(mm.results) != 1:
        return None
    types = [v.type for v in mm.operands]
    if not all(isinstance(t, ir.RankedTensorType) for t in types):
        return None
    if any(not isinstance(t.element_type, ir.F32Type) for t in types):
        return None
    rank = 3 if batch else 2
    if any(t.rank != rank for t in types):
        return None
    has_fill = names[0] == "linalg.fill"
    if has_fill:
        fill = ops[0]
        if mm.operands[2] != fill.results[0] or len(list(fill.results[0].uses)) != 1:
            return None
    if ops[-1].operands[0] != mm.results[0] if ops[-1].operands else True:
        return None
    a, b, _ = types
    off = 1 if batch else 0
    return MatmulShape(
        m=_static(a.shape[off]), k=_static(a.shape[off + 1]), n=_static(b.shape[off + 1]),
        batch=batch, has_fill=has_fill,
    )


def _default_maps(mm, batch: bool) -> bool:
    text = str(mm.attributes["indexing_maps"])
    if batch:
        want = ["(d0, d1, d2, d3) -> (d0, d1, d3)", "(d0, d1, d2, d3) -> (d0, d3, d2)",
                "(d0, d1, d2, d3) -> (d0, d1, d2)"]
    else:
        want = ["(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)"]
    return all(w in text for w in want)


def is_matmul_kernel(func_op) -> bool:
    """True if ``func_op`` is [fill +] matmul/batch_matmul on f32 tensors, returning its result."""
    return matmul_kernel_shape(func_op) is not None


def version_matmul_kernel(func_op, config: MatmulConfig | None = None) -> bool:
    """Rewrites a matmul kernel with dynamic M into nested ``scf.if (M <= limit)`` over copies
    of its [fill +] matmul, one per variant of ``config.variants()``, each tagged
    ``relax_mlir.matmul_variant = "<name>"``, so that ``matmul_schedule`` with
    ``MatmulShape(versioned=True)`` gives each its own schedule. Returns False (and changes
    nothing) if the kernel does not qualify or there is one variant only."""
    from mlir import ir
    from mlir.dialects import arith, scf, tensor

    cfg = config or MatmulConfig()
    shape = matmul_kernel_shape(func_op)
    variants = cfg.variants()
    if shape is None or shape.m is not None or len(variants) < 2:
        return False
    ops = [op for op in _body_ops(func_op) if op.name != "arith.constant"]
    mm, ret = ops[-2], ops[-1]
    fill = ops[0] if shape.has_fill else None
    result_type = mm.results[0].type
    first = fill if fill is not None else mm
    loc = first.location
    with ir.InsertionPoint(first), loc:
        idx = arith.constant(ir.IndexType.get(), 1 if shape.batch else 0)
        m = tensor.dim(mm.operands[0], idx)

    def emit_copy(variant: str):
        new_fill = fill.clone() if fill is not None else None
        new_mm = mm.clone()
        if new_fill is not None:
            new_mm.operands[2] = new_fill.results[0]
        new_mm.attributes[VARIANT_ATTR] = ir.StringAttr.get(variant)
        return new_mm.results[0]

    def emit(rest: list[tuple[str, int | None]]):
        name, limit = rest[0]
        if limit is None:
            return emit_copy(name)
        lim = arith.constant(ir.IndexType.get(), limit)
        cond = arith.cmpi(arith.CmpIPredicate.ule, m, lim)
        if_op = scf.IfOp(cond, [result_type], has_else=True)
        with ir.InsertionPoint(if_op.then_block):
            scf.YieldOp([emit_copy(name)])
        with ir.InsertionPoint(if_op.else_block):
            scf.YieldOp([emit(rest[1:])])
        return if_op.results[0]

    with ir.InsertionPoint(first), loc:
        result = emit(variants)
    ret.operands[0] = result
    mm.erase()
    if fill is not None:
        fill.erase()
    return True


def matmul_kernel_variants(func_op) -> MatmulShape | None:
    """The MatmulShape of a kernel rewritten by ``version_matmul_kernel`` (versioned=True)."""
    from mlir import ir

    mms: list = []
    fills: list = []

    def walk(op):
        op = op.operation
        if op.name in ("linalg.matmul", "linalg.batch_matmul"):
            mms.append(op)
        elif op.name == "linalg.fill":
            fills.append(op)
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    walk(inner)

    walk(func_op)
    if not mms or any(VARIANT_ATTR not in op.attributes for op in mms):
        return None
    mm = mms[0]
    a, b = (ir.RankedTensorType(v.type) for v in mm.operands[:2])
    off = 1 if mm.name == "linalg.batch_matmul" else 0
    names = [ir.StringAttr(op.attributes[VARIANT_ATTR]).value for op in mms]
    known = [v for v, _ in MatmulConfig().variants()]
    if len(set(names)) != len(names) or not set(names) <= set(known):
        return None  # one copy per variant, each one the schedule knows
    return MatmulShape(m=None, k=_static(a.shape[off + 1]), n=_static(b.shape[off + 1]), batch=bool(off),
                       has_fill=bool(fills), versioned=True, variants=tuple(v for v in known if v in names))


# --------------------------------------------------------------------------------------
# A self-contained compile path (used by bench/matmul.py and the tests)


def _dim(x: int | None) -> str:
    return "?" if x is None else str(x)


def matmul_kernel_text(
    m: int | None, k: int | None, n: int | None, *, batch: int | None | bool = False,
    name: str = "matmul_kernel", entry: str = "matmul",
) -> str:
    """The kernel ``@name(%a, %b, %c) -> tensor`` (fill + matmul) and a c-interface entry
    ``@entry(%A, %B, %C)`` on caller-owned memrefs that calls it."""
    pre = "" if batch is False else _dim(None if batch is True else batch) + "x"
    ta = f"tensor<{pre}{_dim(m)}x{_dim(k)}xf32>"
    tb = f"tensor<{pre}{_dim(k)}x{_dim(n)}xf32>"
    tc = f"tensor<{pre}{_dim(m)}x{_dim(n)}xf32>"
    mm = "linalg.batch_matmul" if batch is not False else "linalg.matmul"

    def mem(t: str) -> str:
        return "memref" + t[len("tensor"):]

    return f"""
func.func private @{name}(%a: {ta}, %b: {tb}, %c: {tc}) -> {tc} {{
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%c : {tc}) -> {tc}
  %r = {mm} ins(%a, %b : {ta}, {tb}) outs(%f : {tc}) -> {tc}
  return %r : {tc}
}}
func.func @{entry}(%A: {mem(ta)}, %B: {mem(tb)}, %C: {mem(tc)}) attributes {{llvm.emit_c_interface}} {{
  %a = bufferization.to_tensor %A restrict : {mem(ta)} to {ta}
  %b = bufferization.to_tensor %B restrict : {mem(tb)} to {tb}
  %c = bufferization.to_tensor %C restrict writable : {mem(tc)} to {tc}
  %r = func.call @{name}(%a, %b, %c) : ({ta}, {tb}, {tc}) -> {tc}
  bufferization.materialize_in_destination %r in restrict writable %C : ({tc}, {mem(tc)}) -> ()
  return
}}
"""


def lower_to_llvm_pipeline(num_threads: int = 1) -> list[str]:
    """Pass pipelines (run in order) from scheduled tensor IR to the LLVM dialect."""
    stages = [
        "builtin.module(inline,symbol-dce,canonicalize,cse)",
        "builtin.module(eliminate-empty-tensors,one-shot-bufferize,canonicalize,cse)",
        # buffer-loop-hoisting stops at scf.parallel: each task keeps its own packing buffers.
        "builtin.module(func.func(scf-forall-to-parallel,buffer-loop-hoisting),"
        "buffer-deallocation-pipeline,convert-bufferization-to-memref,canonicalize,cse)",
    ]
    if num_threads > 1:
        stages.append(
            f"builtin.module(async-parallel-for{{async-dispatch=false num-workers={num_threads} "
            "min-task-size=1},canonicalize,async-to-async-runtime,async-runtime-ref-counting,"
            "async-runtime-ref-counting-opt,convert-async-to-llvm)"
        )
    stages.append(
        "builtin.module(convert-linalg-to-loops,func.func(convert-vector-to-scf{full-unroll=true}),"
        "lower-affine,canonicalize,cse,convert-scf-to-cf,expand-strided-metadata,lower-affine,"
        "convert-vector-to-llvm,finalize-memref-to-llvm,convert-math-to-llvm,convert-arith-to-llvm,"
        "convert-index-to-llvm,convert-ub-to-llvm,convert-func-to-llvm,convert-cf-to-llvm,"
        "reconcile-unrealized-casts,canonicalize,cse)"
    )
    return stages


def runtime_libraries(num_threads: int = 1) -> list[str]:
    """Paths of the MLIR runtime libraries the JIT needs; raises if one is missing (a missing
    symbol would abort the process inside ExecutionEngine)."""
    import mlir

    names = ["libmlir_c_runner_utils.so"]
    if num_threads > 1:
        names.append("libmlir_async_runtime.so")
    found = []
    for name in names:
        for root in mlir.__path__:
            cand = os.path.join(root, "lib", name)
            if os.path.exists(cand):
                found.append(cand)
                break
        else:
            raise FileNotFoundError(f"MLIR runtime library {name} not found under {list(mlir.__path__)}")
    return found


# Destroying an ExecutionEngine that loaded libmlir_async_runtime.so breaks the async runtime
# for every later engine in the process (the next parallel call segfaults): such engines
# are kept alive until exit.
_ASYNC_ENGINES: list = []


class _MemRef2D(ctypes.Structure):
    _fields_ = [
        ("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64),
        ("sizes", ctypes.c_int64 * 2), ("strides", ctypes.c_int64 * 2),
    ]


class _MemRef3D(ctypes.Structure):
    _fields_ = [
        ("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64),
        ("sizes", ctypes.c_int64 * 3), ("strides", ctypes.c_int64 * 3),
    ]


class CompiledMatmul:
    """``c = f(a, b)`` for float32 C-contiguous numpy arrays; checks shapes before calling."""

    def __init__(self, engine, keep, entry: str, k: int | None, n: int | None, batch: bool, num_threads: int):
        self._engine = engine
        self._keep = keep
        self.k, self.n, self.batch, self.num_threads = k, n, batch, num_threads
        rank = 3 if batch else 2
        self._desc_t = _MemRef3D if batch else _MemRef2D
        self._descs = [self._desc_t() for _ in range(3)]
        self._ptrs = [ctypes.pointer(ctypes.pointer(dsc)) for dsc in self._descs]
        self._packed = (ctypes.c_void_p * 3)(*[ctypes.cast(p, ctypes.c_void_p) for p in self._ptrs])
        self._fn = engine.lookup(entry)
        self._rank = rank

    def _bind(self, i: int, x: np.ndarray) -> None:
        dsc = self._descs[i]
        ptr = x.ctypes.data
        dsc.allocated = ptr
        dsc.aligned = ptr
        dsc.offset = 0
        for j, (s, st) in enumerate(zip(x.shape, x.strides)):
            dsc.sizes[j] = s
            dsc.strides[j] = st // 4

    def __call__(self, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        r = self._rank
        if a.dtype != np.float32 or b.dtype != np.float32 or a.ndim != r or b.ndim != r:
            raise ValueError(f"expected float32 arrays of rank {r}")
        if a.shape[-1] != b.shape[-2] or (self.batch and a.shape[0] != b.shape[0]):
            raise ValueError(f"shape mismatch {a.shape} x {b.shape}")
        if self.k is not None and a.shape[-1] != self.k:
            raise ValueError(f"K must be {self.k}, got {a.shape[-1]}")
        if self.n is not None and b.shape[-1] != self.n:
            raise ValueError(f"N must be {self.n}, got {b.shape[-1]}")
        a = np.ascontiguousarray(a)
        b = np.ascontiguousarray(b)
        shape = a.shape[:-1] + (b.shape[-1],)
        if out is None:
            out = np.empty(shape, np.float32)
        elif out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous:
            raise ValueError("bad output array")
        self._bind(0, a)
        self._bind(1, b)
        self._bind(2, out)
        self._fn(self._packed)
        return out


def compile_matmul(
    m: int | None, k: int | None, n: int | None, num_threads: int = 1, *,
    batch: int | None | bool = False, config: MatmulConfig | None = None, opt_level: int = 3,
) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Compiles ``C = A @ B`` (f32; None = dynamic size) with the matmul schedule and the
    LLVM JIT. ``batch``: False for 2-D, else the batch size (None/True = dynamic)."""
    from mlir import execution_engine, ir, passmanager
    from mlir.dialects.transform import interpreter

    libs = runtime_libraries(num_threads)
    ctx = ir.Context()
    with ctx, ir.Location.unknown():
        module = ir.Module.parse(matmul_kernel_text(m, k, n, batch=batch))
        kernel = next(op for op in module.body.operations
                      if "sym_name" in op.attributes and str(op.attributes["sym_name"]) == '"matmul_kernel"')
        cfg = config or MatmulConfig()
        if m is None and version_matmul_kernel(kernel, cfg):
            shape = matmul_kernel_variants(kernel)
        else:
            shape = matmul_kernel_shape(kernel)
        assert shape is not None
        tmod = ir.Module.parse(matmul_schedule_module("matmul_kernel", shape, num_threads=num_threads, config=cfg))
        seq = next(op for op in tmod.body.operations if op.operation.name == "transform.named_sequence")
        interpreter.apply_named_sequence(module, seq, tmod)
        for stage in lower_to_llvm_pipeline(num_threads):
            passmanager.PassManager.parse(stage).run(module.operation)
        engine = execution_engine.ExecutionEngine(module, opt_level=opt_level, shared_libs=libs)
        engine.initialize()
    if num_threads > 1:
        _ASYNC_ENGINES.append((engine, ctx, module))
    return CompiledMatmul(engine, (ctx, module), "matmul", k, n, batch is not False, num_threads)
