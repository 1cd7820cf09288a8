"""The GPU kernels that the CUDA (backend/gpu.py) and SPIR-V (backend/spirv.py) backends share.

They run on the bufferized module, before each backend maps the remaining `scf.parallel` loops
onto blocks and threads its own way, and leave every piece of data work in a `gpu.launch` (or in
a linalg op that becomes one), so that the entries are host code only.

Cooperative kernels (`map_cooperative_kernels`; the options `reduce_threads`, `matmul_tile` of
`GPUOptions` and `SPIRVOptions`; 0 turns one off):

* a row reduction -- a linalg.generic / linalg.reduce whose reduction dims trail its parallel
  dims, the last one contiguous in every input, with an f32 add / mul / max / min combiner read
  from the region -- runs `reduce_threads` threads per row (fewer for a short static row) and
  256 / that rows per block; each thread strides over the row accumulating a partial, then a
  tree over workgroup memory with a `gpu.barrier` per step; thread 0 combines the result into
  the output. The block loops over rows (grid = min(ceildiv(rows, rows per block), 65535)). The
  output's init fill and an elementwise epilogue on the reduced output are fused into that
  write, as for the matmul below.
* a column reduction -- leading reduction dims, trailing parallel dims (`max(x, axis=0)`), the
  last parallel dim contiguous, fewer than 2048 static outputs or a dynamic count -- runs 32 x 8
  threads per 32 neighbouring outputs (grid-stride over them): thread (tx, ty) folds reduced
  positions ty, ty + 8, ... of output tx, then a tree over ty in workgroup memory; fill and
  epilogue fused likewise. With more static outputs each output gets a thread of its own.
* a matmul -- linalg.matmul, linalg.batch_matmul, or a generic with C[b.., m, n] += A[.., m, k] *
  B[.., k, n] indexing in f32 (broadcast batch dims allowed) -- runs a 16 x 16 block per
  `matmul_tile` x `matmul_tile` output tile (each thread r x r outputs, r = tile / 16), walking K
  in steps of 16 through an A and a B tile in workgroup memory, with bounds guards on M, N, K.
  Grid = (ceildiv(N, tile), ceildiv(M, tile), min(batch, 65535)). The fill of C right before
  the matmul and an elementwise generic right after it that reads C at its own position (bias,
  activation: `_output_neighbours`) are done in the output write: the sums start at the fill
  value, the epilogue's result is stored, and C itself only when something else reads it.

Workgroup memory is a launch workgroup attribution on CUDA (NVVM: a `.shared` global) and a
Workgroup-storage `memref.alloc` on SPIR-V (`WorkgroupMemory`). The tree is explicit rather than
`gpu.all_reduce`: that lowers on NVVM (warp shuffles) but convert-gpu-to-spirv fails to legalize it.

Any other reduction keeps `convert-linalg-to-parallel-loops`'s mapping: the reduction dims stay
an `scf.for` inside the parallel loop (one thread per output element, a sequential loop). Before
that, three rewrites keep every piece of data work in a kernel:

* `parallel_dims_first`: a generic whose reduction dims come before a parallel one and that no
  cooperative kernel took (reduction dims interleaved, `reduce_threads=0`) has its loops
  interchanged, so the reduction is a loop inside each thread rather than a host loop of one
  launch per step;
* `serial_linalg_in_one_thread`: a linalg op with no parallel loop (a rank-0 fill, a reduction
  to a scalar that no cooperative kernel took) runs as a one-thread kernel, not as host code
  loading and storing device memory;
* `copies_to_kernels` and `fold_subviews`: a copy into or out of a subview (a concat's pieces)
  becomes a linalg.copy, and every unit-stride subview is folded into the indices of the loads
  and stores that use it, so kernels take whole buffers plus offsets.

`sink_constants` clones the constants a launch uses into it before outlining (so that they do not
become kernel parameters), and `drop_unused_workspace` sizes 0 the workspace blocks no kernel uses
any more. `make_op` and `const_index` are the small IR builders both backends use.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from mlir import ir

from relax_mlir.backend.common import const_int, option_int, walk

__all__ = [
    "OUTLINE",
    "TO_LOOPS",
    "WorkgroupMemory",
    "check_cooperative",
    "const_index",
    "copies_to_kernels",
    "drop_unused_workspace",
    "finite_constant",
    "fold_subviews",
    "identity_layout",
    "in_one_thread",
    "CHUNKABLE",
    "interchange_elementwise_loops",
    "gpu_funcs",
    "make_op",
    "map_cooperative_kernels",
    "parallel_dims_first",
    "serial_linalg_in_one_thread",
    "sink_constants",
]


def make_op(name, results=(), operands=(), attrs=None, regions=0) -> ir.Operation:
    """`ir.Operation.create` at the current insertion point and location."""
    return ir.Operation.create(name, results=list(results), operands=list(operands), attributes=attrs or {},
                               regions=regions)


def check_cooperative(reduce_threads: int, matmul_tile: int) -> None:
    """Validate the cooperative-kernel options (of GPUOptions and SPIRVOptions)."""
    what = " (0: off)"
    if option_int("reduce_threads", reduce_threads, 0, 1024, what) & (reduce_threads - 1):
        raise ValueError(f"reduce_threads must be 0 or a power of two up to 1024, got {reduce_threads!r}")
    if not (0 <= option_int("matmul_tile", matmul_tile, 0, 128, what) <= 16 or matmul_tile % 16 == 0):
        raise ValueError(f"matmul_tile must be 0..16 or a multiple of 16 up to 128, got {matmul_tile!r}")


def is_inside(op: ir.Operation, ancestor: ir.Operation) -> bool:
    while True:
        parent = op.parent
        if parent is None:
            return False
        if parent == ancestor:
            return True
        if parent.name == "builtin.module":
            return False
        op = parent


def finite_constant(c: ir.Operation) -> bool:
    """False for an infinite or NaN float constant (scalar or splat): WebGPU's shader validator
    (naga) rejects such literals, so they stay kernel parameters on the SPIR-V path."""
    a = c.attributes["value"]
    try:
        if isinstance(a, ir.FloatAttr):
            v = a.value
        elif isinstance(a, ir.DenseFPElementsAttr) and a.is_splat:
            v = ir.FloatAttr(a.get_splat_value()).value
        else:
            return True
    except (TypeError, ValueError):
        return True
    return math.isfinite(v)


def sink_constants(module_op: ir.Operation, select: Callable[[ir.Operation], bool] | None = None,
                      constant: Callable[[ir.Operation], bool] | None = None) -> None:
    """Clone the `arith.constant`s a `gpu.launch` body uses into it, so that outlining does not
    turn them into kernel parameters (unlike gpu-launch-sink-index-computations, this never moves
    a `memref.dim` into a kernel). `select`: only the launches it accepts; `constant`: only the
    constants it accepts."""
    launches = []

    def visit(o):
        if o.name == "gpu.launch":
            if select is None or select(o):
                launches.append(o)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    for launch in launches:
        entry = launch.regions[0].blocks[0]
        first = entry.operations[0]
        clones = {}
        uses = []

        def collect(o):
            for i, v in enumerate(o.operands):
                owner = v.owner
                if isinstance(owner, ir.Block):
                    continue
                owner = owner.operation if hasattr(owner, "operation") else owner
                if owner.name == "arith.constant" and not is_inside(owner, launch) and \
                        (constant is None or constant(owner)):
                    uses.append((o, i, owner))
            return ir.WalkResult.ADVANCE

        for o in entry.operations:
            o.operation.walk(collect, ir.WalkOrder.PRE_ORDER)
        for o, i, c in uses:
            key = c
            if key not in clones:
                cl = c.clone(ir.InsertionPoint(first))
                clones[key] = cl
            o.operands[i] = clones[key].results[0]


# --------------------------------------------------------------------------------------------
# Cooperative kernels: row and column reductions, matmul
# --------------------------------------------------------------------------------------------
#
# These run on the bufferized module, before `convert-linalg-to-parallel-loops`: each matched
# linalg op is replaced in place by one `gpu.launch` whose grid is computed on the host from the
# op's loop sizes (`memref.dim` of its operands), so one module serves every value of the symbols.
# Everything not matched keeps the backend's generic parallel-loop mapping.

_MAX_GRID = 65535  # the smallest grid limit of the targets (Vulkan maxComputeWorkGroupCount, CUDA y/z)

# Combiner op of a reduction -> its identity; None for the idempotent ones (max, min), whose
# partials start from the output's initial value instead (wgpu rejects an infinite literal).
_COMBINERS = {"arith.addf": 0.0, "arith.mulf": 1.0, "arith.maximumf": None, "arith.maxnumf": None,
              "arith.minimumf": None, "arith.minnumf": None}
_REDUCE_BLOCK = 256  # threads of a row-reduction block: 256 // reduce_threads rows at a time
_MATMUL_THREADS = 16  # threads along each dim of a matmul block (fewer if the tile is smaller)
_COOPERATIVE = "relax.cooperative"  # discardable attribute naming the strategy of a launch
_FUSED = "relax.fused_into_launch"  # a linalg op whose work a cooperative kernel took


@dataclass(frozen=True)
class WorkgroupMemory:
    """How a target declares workgroup (shared) memory in a `gpu.launch`.

    `attribution`: as workgroup attributions of the launch (NVVM lowers them to `.shared`
    globals); otherwise as `memref.alloc` in the launch body (SPIR-V: Workgroup variables;
    convert-gpu-to-spirv crashes on workgroup attributions)."""

    space: str
    attribution: bool




@dataclass
class _View:
    """A linalg op on memrefs with one output, seen as a generic."""

    op: ir.Operation
    ins: list
    out: ir.Value
    maps: list  # ir.AffineMap of each input, then the output
    iters: list  # "parallel" / "reduction" per loop dim
    body: ir.Block


def _view(op: ir.Operation) -> _View | None:
    name = op.name
    if name not in ("linalg.generic", "linalg.matmul", "linalg.batch_matmul", "linalg.reduce"):
        return None
    operands = list(op.operands)
    if len(op.results) or not operands or not all(isinstance(v.type, ir.MemRefType) for v in operands):
        return None
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        return None
    if name == "linalg.reduce":
        if len(operands) != 2:
            return None
        rank = ir.MemRefType(operands[0].type).rank
        dims = sorted(int(d) for d in ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        keep = [d for d in range(rank) if d not in dims]
        maps = [ir.AffineMap.get_identity(rank),
                ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(d) for d in keep])]
        iters = ["reduction" if d in dims else "parallel" for d in range(rank)]
        return _View(op, operands[:1], operands[1], maps, iters, op.regions[0].blocks[0])
    segs = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    if segs[1] != 1 or "indexing_maps" not in op.attributes:
        return None
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if len(maps) != len(operands) or any(m.n_symbols for m in maps):
        return None
    n = maps[0].n_dims
    if name == "linalg.generic":
        iters = ["reduction" if "reduction" in str(a) else "parallel"
                 for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    else:  # a contraction: the dims of the output are its parallel dims
        used = {e.position for e in maps[-1].results if isinstance(e, ir.AffineDimExpr)}
        iters = ["parallel" if d in used else "reduction" for d in range(n)]
    return _View(op, operands[:-1], operands[-1], maps, iters, op.regions[0].blocks[0])


def _dims_of(amap: ir.AffineMap) -> list[int] | None:
    """Loop dim of each result (-1 for a constant); None if a result is neither."""
    out = []
    for e in amap.results:
        if isinstance(e, ir.AffineDimExpr):
            out.append(e.position)
        elif isinstance(e, ir.AffineConstantExpr):
            out.append(-1)
        else:
            return None
    return out


def _f32(t: ir.Type) -> bool:
    return str(t) == "f32"


def _body_ops(v: _View) -> list[ir.Operation] | None:
    """The ops of the region before its yield, if all are plain (no regions) ops."""
    ops = [o.operation for o in v.body.operations]
    if not ops or ops[-1].name != "linalg.yield":
        return None
    if any(len(o.regions) for o in ops[:-1]):
        return None
    return ops


@dataclass
class _RowReduction:
    n_par: int
    combiner: ir.Operation  # combiner(out_arg, x) in the region
    x: ir.Value  # the value combined into the accumulator


def _match_row_reduction(v: _View) -> _RowReduction | None:
    """Trailing reduction dims, the last one contiguous in every input, an add/mul/max/min combiner."""
    n = len(v.iters)
    red = [d for d, t in enumerate(v.iters) if t == "reduction"]
    if not red or red != list(range(n - len(red), n)):
        return None
    n_par = n - len(red)
    out_dims = _dims_of(v.maps[-1])
    if out_dims is None or sorted(out_dims) != list(range(n_par)):
        return None
    if not _f32(ir.MemRefType(v.out.type).element_type):
        return None
    for m in v.maps[:-1]:
        dims = _dims_of(m)
        if dims is None or (n - 1 in dims and dims[-1] != n - 1):
            return None  # strided: a column reduction (`_match_col_reduction`)
    return _combiner(v, n_par)


@dataclass
class _ColReduction:
    n_red: int  # the leading loop dims are the reduced ones
    combiner: ir.Operation
    x: ir.Value


def _match_col_reduction(v: _View) -> _ColReduction | None:
    """Leading reduction dims and trailing parallel dims (`max(x, axis=0)`), the output indexed by
    the parallel dims in order, the last of them contiguous in every input that uses it, an
    add/mul/max/min combiner."""
    n = len(v.iters)
    red = [d for d, t in enumerate(v.iters) if t == "reduction"]
    if not red or red != list(range(len(red))) or len(red) == n:
        return None
    if _dims_of(v.maps[-1]) != list(range(len(red), n)) or not _f32(ir.MemRefType(v.out.type).element_type):
        return None
    for m in v.maps[:-1]:
        dims = _dims_of(m)
        if dims is None or (n - 1 in dims and dims[-1] != n - 1):
            return None
    r = _combiner(v, 0)
    return None if r is None else _ColReduction(len(red), r.combiner, r.x)


def _combiner(v: _View, n_par: int) -> _RowReduction | None:
    """The region's `out = combine(out, x)` with an add/mul/max/min combiner, `out` used once."""
    ops = _body_ops(v)
    if ops is None or len(ops[-1].operands) != 1:
        return None
    out_arg = v.body.arguments[len(v.ins)]
    y = ops[-1].operands[0]
    if isinstance(y.owner, ir.Block):
        return None
    comb = y.owner.operation if hasattr(y.owner, "operation") else y.owner
    if comb.name not in _COMBINERS or not _f32(y.type):
        return None
    a, b = comb.operands
    if a == out_arg and b != out_arg:
        x = b
    elif b == out_arg and a != out_arg:
        x = a
    else:
        return None
    if sum(1 for _ in out_arg.uses) != 1:
        return None
    return _RowReduction(n_par, comb, x)


@dataclass
class _Matmul:
    m: int
    n: int
    k: int
    batch: list  # loop dims of the batch


def _match_matmul(v: _View) -> _Matmul | None:
    """C[b.., m, n] += A[b'.., m, k] * B[b''.., k, n] in f32 (b', b'' subsets of b)."""
    if len(v.ins) != 2:
        return None
    red = [d for d, t in enumerate(v.iters) if t == "reduction"]
    if len(red) != 1:
        return None
    k = red[0]
    dc, da, db = (_dims_of(m) for m in (v.maps[2], v.maps[0], v.maps[1]))
    if dc is None or da is None or db is None or len(dc) < 2 or len(da) < 2 or len(db) < 2:
        return None
    if len(set(dc)) != len(dc) or -1 in dc or len(dc) != len(v.iters) - 1:
        return None
    m, n, batch = dc[-2], dc[-1], dc[:-2]
    if da[-2:] != [m, k] or db[-2:] != [k, n]:
        return None
    for lead in (da[:-2], db[:-2]):
        if len(set(lead)) != len(lead) or not set(lead) <= set(batch):
            return None
    if not all(_f32(ir.MemRefType(x.type).element_type) for x in (*v.ins, v.out)):
        return None
    ops = _body_ops(v)
    if ops is None or len(ops) != 3:
        return None
    a, b, c = v.body.arguments
    mul, add, yld = ops
    if mul.name != "arith.mulf" or add.name != "arith.addf" or list(yld.operands) != [add.results[0]]:
        return None
    if not ((mul.operands[0] == a and mul.operands[1] == b) or (mul.operands[0] == b and mul.operands[1] == a)):
        return None
    p = mul.results[0]
    if not ((add.operands[0] == c and add.operands[1] == p) or (add.operands[0] == p and add.operands[1] == c)):
        return None
    return _Matmul(m, n, k, batch)


# --- small builders (ints fold on the host; Values are emitted at the current insertion point) ---

def const_index(n: int) -> ir.Value:
    idx = ir.IndexType.get()
    return make_op("arith.constant", [idx], [], {"value": ir.IntegerAttr.get(idx, n)}).results[0]


def _cf32(x: float) -> ir.Value:
    f32 = ir.F32Type.get()
    return make_op("arith.constant", [f32], [], {"value": ir.FloatAttr.get(f32, x)}).results[0]


def _val(x) -> ir.Value:
    return const_index(x) if isinstance(x, int) else x


def _bin(name: str, a, b) -> ir.Value:
    return make_op(name, [ir.IndexType.get()], [_val(a), _val(b)]).results[0]


def _mul(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if a == 1:
        return b
    if b == 1:
        return a
    return _bin("arith.muli", a, b)


def _add(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(b, int) and b == 0:
        return a
    if isinstance(a, int) and a == 0:
        return b
    return _bin("arith.addi", a, b)


def _ceildiv(a, t: int):
    if isinstance(a, int):
        return -(-a // t)
    return a if t == 1 else _bin("arith.divui", _add(a, t - 1), t)


def _min(a, b: int):
    return min(a, b) if isinstance(a, int) else _bin("arith.minui", a, b)


def _ult(a, b) -> ir.Value:
    i1 = ir.IntegerType.get_signless(1)
    return make_op("arith.cmpi", [i1], [_val(a), _val(b)],
                   {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 6)}).results[0]


def _and(a: ir.Value | None, b: ir.Value) -> ir.Value:
    return b if a is None else make_op("arith.andi", [b.type], [a, b]).results[0]


def _delinearize(lin, sizes: list) -> list:
    """Row-major indices of linear index `lin` in a box of `sizes` (int | Value each)."""
    if not sizes:
        return []
    out = [None] * len(sizes)
    for d in range(len(sizes) - 1, 0, -1):
        out[d] = _bin("arith.remui", lin, sizes[d])
        lin = _bin("arith.divui", lin, sizes[d])
    out[0] = lin
    return out


def _indices(amap: ir.AffineMap, ivs: dict) -> list[ir.Value]:
    """Indices of one operand: `amap` (dims and constants only) applied to the loop ivs."""
    return [const_index(e.value) if isinstance(e, ir.AffineConstantExpr)
            else _val(ivs[e.position]) for e in amap.results]


def _load(m: ir.Value, idx: list) -> ir.Value:
    return make_op("memref.load", [ir.MemRefType(m.type).element_type], [m, *map(_val, idx)]).results[0]


def _store(x: ir.Value, m: ir.Value, idx: list) -> None:
    make_op("memref.store", [], [x, m, *map(_val, idx)])


def _if(cond: ir.Value, result_types: list, has_else: bool):
    from mlir.dialects import scf

    return scf.IfOp(cond, result_types, has_else=has_else)


def _for(lb, ub, step, iters: list[ir.Value]):
    from mlir.dialects import scf

    return scf.ForOp(_val(lb), _val(ub), _val(step), iters)


def _yield(values: list[ir.Value]) -> None:
    make_op("scf.yield", [], values)


def _accumulate(lb, ub, step: int, inits: list[ir.Value], body: Callable) -> list[ir.Value]:
    """`scf.for` carrying `inits` (`body(iv, values) -> values`), guarded by `lb < ub`: SCFToSPIRV
    leaves the results of a loop that runs zero times undefined (they read 0 on lavapipe)."""
    guard = _if(_ult(lb, ub), [x.type for x in inits], True)
    with ir.InsertionPoint(guard.then_block):
        loop = _for(lb, ub, step, inits)
        with ir.InsertionPoint(loop.body):
            _yield(list(body(loop.induction_variable, list(loop.inner_iter_args))))
        _yield(list(loop.results))
    with ir.InsertionPoint(guard.else_block):
        _yield(inits)
    return list(guard.results)


def _pow2ceil(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _loop_sizes(v: _View) -> list | None:
    """Host-side size (int or `memref.dim`) of each loop dim, from the first operand indexing it."""
    n = len(v.iters)
    sizes: list = [None] * n
    for x, m in zip((*v.ins, v.out), v.maps):
        t = ir.MemRefType(x.type)
        for pos, d in enumerate(_dims_of(m) or []):
            if d < 0 or sizes[d] is not None:
                continue
            if t.is_dynamic_dim(pos):
                sizes[d] = make_op("memref.dim", [ir.IndexType.get()], [x, const_index(pos)]).results[0]
            else:
                sizes[d] = t.shape[pos]
    return None if any(s is None for s in sizes) else sizes


def _prod(xs: list):
    p = 1
    for x in xs:
        p = _mul(p, x)
    return p


def _new_launch(grid: list, block: list[int], wg_sizes: list[int], memory: WorkgroupMemory, strategy: str):
    """gpu.launch with the given host grid (int | Value) and constant block; returns (launch, body, buffers)."""
    idx = ir.IndexType.get()
    launch = make_op("gpu.launch", [], [_val(g) for g in grid] + [const_index(b) for b in block],
                     {"operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0]),
                      _COOPERATIVE: ir.StringAttr.get(strategy)}, regions=1)
    body = launch.regions[0].blocks.append(*([idx] * 12))
    types = [ir.MemRefType.get([s], ir.F32Type.get(), memory_space=ir.Attribute.parse(memory.space))
             for s in wg_sizes]
    if memory.attribution:
        bufs = [body.add_argument(t, launch.location) for t in types]
        launch.attributes["workgroup_attributions"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                                         len(types))
    else:
        with ir.InsertionPoint(body):
            bufs = [make_op("memref.alloc", [t], [], {"operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 0])})
                    .results[0] for t in types]
    return launch, body, bufs


def _clone_into(ops: list[ir.Operation], env: dict) -> None:
    """Clone `ops` at the current insertion point, remapping operands through `env` (updated)."""
    for o in ops:
        new = o.clone()
        for i, x in enumerate(new.operands):
            if x in env:
                new.operands[i] = env[x]
        for r, nr in zip(o.results, new.results):
            env[r] = nr


def _combine(comb: ir.Operation, out_arg: ir.Value, acc: ir.Value, x: ir.Value) -> ir.Value:
    new = comb.clone()
    a, b = comb.operands
    new.operands[0], new.operands[1] = (acc, x) if a == out_arg else (x, acc)
    return new.results[0]


def _external_constants(v: _View, ops: list[ir.Operation], env: dict) -> None:
    """Clone the arith.constants the region uses from outside into the current block."""
    for o in ops:
        for x in o.operands:
            owner = x.owner
            if isinstance(owner, ir.Block) or x in env:
                continue
            owner = owner.operation if hasattr(owner, "operation") else owner
            if owner.name == "arith.constant" and not is_inside(owner, v.op):
                env[x] = owner.clone().results[0]


_VIEW_OPS = ("memref.view", "memref.reshape", "memref.collapse_shape", "memref.expand_shape", "memref.cast")
# Ops that neither read nor write buffer contents: a fill or an epilogue may be fused across them.
_NO_MEMORY = _VIEW_OPS + ("memref.dim", "memref.get_global", "affine.apply")


def _touches_no_memory(o: ir.Operation) -> bool:
    return o.name in _NO_MEMORY or (o.name.startswith("arith.") and not len(o.regions))


def _op_of(x) -> ir.Operation:
    return x.operation if hasattr(x, "operation") else x


@dataclass
class _Epilogue:
    """Work fused into a cooperative kernel's output write (`_output_neighbours`)."""

    fill: ir.Operation | None  # the linalg.fill of C just before: the accumulator starts at its value
    generic: ir.Operation | None  # the elementwise linalg.generic just after, reading C
    store_c: bool  # C itself must still be written


def _family(x: ir.Value) -> list[ir.Value]:
    """`x` and every view derived from it."""
    out, todo = [], [x]
    while todo:
        y = todo.pop()
        out.append(y)
        for u in y.uses:
            o = _op_of(u.owner)
            if o.name in _VIEW_OPS and o.operands[0] == y:
                todo.extend(o.results)
    return out


def _elementwise_epilogue(g: ir.Operation, c: ir.Value) -> bool:
    """A linalg.generic on memrefs with only parallel loops and one output, that reads `c` at the
    output's own (identity) position, with a plain region."""
    if g.results or "indexing_maps" not in g.attributes or len(g.regions[0].blocks) != 1:
        return False
    if any("parallel" not in str(a) for a in ir.ArrayAttr(g.attributes["iterator_types"])):
        return False
    segs = list(ir.DenseI32ArrayAttr(g.attributes["operandSegmentSizes"]))
    if segs[1] != 1:
        return False
    ins, out = list(g.operands)[:segs[0]], g.operands[segs[0]]
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(g.attributes["indexing_maps"])]
    rank = ir.MemRefType(out.type).rank
    ident = ir.AffineMap.get_identity(rank)
    if maps[-1] != ident or rank != ir.MemRefType(c.type).rank or any(m.n_symbols for m in maps):
        return False
    if not any(x == c and m == ident for x, m in zip(ins, maps)):
        return False
    if any(x == c and m != ident for x, m in zip(ins, maps)):
        return False
    if any(_dims_of(m) is None for m in maps):
        return False
    return all(not len(o.regions) for o in g.regions[0].blocks[0].operations)


def _storage(x: ir.Value) -> ir.Value:
    """The buffer `x` is a view of: through every view op, a memory-plan view included, to a
    function argument or an allocation."""
    while not isinstance(x.owner, ir.Block) and _op_of(x.owner).name in _VIEW_OPS + ("memref.subview",):
        x = _op_of(x.owner).operands[0]
    return x


def _epilogue_races(g: ir.Operation, v: _View) -> bool:
    """Whether fusing epilogue `g` into `v`'s kernel could write memory another block still reads:
    its output shares storage with an input of `v` (a block reads whole rows of those), or with
    one of its own inputs read at another position (a broadcast). The memory plan may well have
    put the epilogue's result where a dead input was."""
    segs = list(ir.DenseI32ArrayAttr(g.attributes["operandSegmentSizes"]))
    ins, out = list(g.operands)[:segs[0]], g.operands[segs[0]]
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(g.attributes["indexing_maps"])]
    where = _storage(out)
    if any(_storage(x) == where for x in v.ins):
        return True
    return any(_storage(x) == where and m != maps[-1] for x, m in zip(ins, maps))


def _output_neighbours(v: _View) -> _Epilogue:
    """The `linalg.fill` of a matmul's or row reduction's output C right before it and an
    elementwise generic that reads C right after it (`_elementwise_epilogue`) and cannot race with
    it (`_epilogue_races`), with only ops that touch no memory between.
    C is not written when the generic is fused and C is a temporary (a `memref.alloc`, or a
    memory-plan view of a workspace block) that nothing else reads."""
    op, c = v.op, v.out
    ops = [_op_of(x) for x in op.block.operations]
    at = next(i for i, x in enumerate(ops) if x == op)
    fill = None
    for x in reversed(ops[:at]):
        if x.name == "linalg.fill" and not x.results and x.operands[len(x.operands) - 1] == c:
            fill = x
            break
        if not _touches_no_memory(x):
            break
    generic = None
    for x in ops[at + 1:]:
        if x.name == "linalg.generic" and _elementwise_epilogue(x, c) and not _epilogue_races(x, v):
            generic = x
            break
        if not _touches_no_memory(x):
            break
    store_c = True
    if generic is not None and not isinstance(c.owner, ir.Block):
        root = c
        while not isinstance(root.owner, ir.Block) and _op_of(root.owner).name in _VIEW_OPS[1:]:
            root = _op_of(root.owner).operands[0]  # through reshapes and casts, not through a view
        temporary = not isinstance(root.owner, ir.Block) and _op_of(root.owner).name in ("memref.alloc",
                                                                                           "memref.view")
        if temporary:
            store_c = False
            for y in _family(root):
                for u in y.uses:
                    o = _op_of(u.owner)
                    if o.name == "memref.dealloc" or (o.name in _VIEW_OPS and o.operands[0] == y):
                        continue
                    if not any(o == a for a in (op, generic, fill) if a is not None):
                        store_c = True
    return _Epilogue(fill, generic, store_c)


def _is_positive_zero(x: ir.Value) -> bool:
    if isinstance(x.owner, ir.Block) or _op_of(x.owner).name != "arith.constant":
        return False
    a = _op_of(x.owner).attributes["value"]
    return isinstance(a, ir.FloatAttr) and ir.FloatAttr(a).value == 0.0 and \
        math.copysign(1.0, ir.FloatAttr(a).value) > 0


def _epilogue_value(g: ir.Operation, c: ir.Value, total: ir.Value, cidx: list) -> tuple[ir.Value, ir.Value, list]:
    """Clone the body of the fused generic at C's index `cidx`; returns (result, output, index)."""
    segs = list(ir.DenseI32ArrayAttr(g.attributes["operandSegmentSizes"]))
    ins, out = list(g.operands)[:segs[0]], g.operands[segs[0]]
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(g.attributes["indexing_maps"])]
    ivs = dict(enumerate(cidx))
    body = g.regions[0].blocks[0]
    env = {}
    for arg, x, m in zip(body.arguments, ins + [out], maps):
        if x == c:
            env[arg] = total
        elif _used(arg):
            env[arg] = _load(x, _indices(m, ivs))
    ops = [_op_of(o) for o in body.operations]
    _clone_region_ops(ops[:-1], env, ivs)
    res = ops[-1].operands[0]
    return env.get(res, res), out, cidx


class _ReductionRegion:
    """A reduction's region split for a cooperative kernel: the values that depend on the reduced
    dims (`inner`, recomputed at every reduced position) and the rest (`hoisted`, computed once
    per output); emits a thread's partial and the output write."""

    def __init__(self, v: _View, combiner: ir.Operation, x: ir.Value, reduced: Callable[[int], bool],
                 ep: _Epilogue):
        self.v, self.combiner, self.x, self.ep = v, combiner, x, ep
        self.ops = _body_ops(v)[:-1]
        self.args = list(v.body.arguments)
        self.out_arg = self.args[len(v.ins)]
        self.ident = _COMBINERS[combiner.name]
        varying = {self.args[i] for i, m in enumerate(v.maps[:-1]) if any(d >= 0 and reduced(d) for d in _dims_of(m))}
        self.hoisted, self.inner = [], []
        for o in self.ops:
            if o == combiner:
                continue
            if o.name == "linalg.index":
                dep = reduced(ir.IntegerAttr(o.attributes["dim"]).value)
            else:
                dep = any(y in varying for y in o.operands)
            (self.inner if dep else self.hoisted).append(o)
            if dep:
                varying.update(o.results)
        self.varying = varying
        self.env: dict = {}

    def constants(self) -> None:
        """Clone the constants the region uses into the kernel (at the insertion point)."""
        _external_constants(self.v, self.ops, self.env)

    def combine(self, acc: ir.Value, x: ir.Value) -> ir.Value:
        return _combine(self.combiner, self.out_arg, acc, x)

    def initial(self, oidx: list) -> ir.Value:
        """The output's value before the reduction: the fused fill's, or what the output holds."""
        return _load(self.v.out, oidx) if self.ep.fill is None else self.ep.fill.operands[0]

    def partial(self, out_ivs: dict, oidx: list, red_dims: list[int], red_sizes: list, lb, step: int) -> ir.Value:
        """This thread's partial over the reduced positions lb, lb + step, ... of output `oidx`."""
        v, args = self.v, self.args
        start = _cf32(self.ident) if self.ident is not None else self.initial(oidx)  # max/min: from the init
        oenv = dict(self.env)
        for i, m in enumerate(v.maps[:-1]):
            if args[i] not in self.varying and _used(args[i]):
                oenv[args[i]] = _load(v.ins[i], _indices(m, out_ivs))
        _clone_region_ops(self.hoisted, oenv, out_ivs)

        def accumulate(j, acc):
            kenv = dict(oenv)
            ivs = dict(out_ivs)
            ivs.update(zip(red_dims, _delinearize(j, red_sizes)))
            for i, m in enumerate(v.maps[:-1]):
                if args[i] in self.varying and _used(args[i]):
                    kenv[args[i]] = _load(v.ins[i], _indices(m, ivs))
            _clone_region_ops(self.inner, kenv, ivs)
            return self.combine(acc, kenv.get(self.x, self.x))

        return _accumulate(lb, _prod(red_sizes), step, [start], lambda j, acc: [accumulate(j, acc[0])])[0]

    def write(self, total: ir.Value, oidx: list) -> None:
        """Store initial (+) total, and the fused epilogue's result."""
        value = self.combine(self.initial(oidx), total)
        if self.ep.store_c:
            _store(value, self.v.out, oidx)
        if self.ep.generic is not None:
            y, out, yidx = _epilogue_value(self.ep.generic, self.v.out, value, oidx)
            _store(y, out, yidx)


def _tree(reg: _ReductionRegion, sm: ir.Value, slot, lane, width: int, stride: int) -> None:
    """Combine `width` partials sm[slot + k * stride] (this thread's `lane` = k) into sm[slot]:
    halving steps, a barrier after each."""
    half = width // 2
    while half >= 1:
        step = _if(_ult(lane, half), [], False)
        with ir.InsertionPoint(step.then_block):
            a = _load(sm, [slot])
            b = _load(sm, [_add(slot, half * stride)])
            _store(reg.combine(a, b), sm, [slot])
            _yield([])
        make_op("gpu.barrier", [], [])
        half //= 2


def _is_zero(x) -> ir.Value:
    return make_op("arith.cmpi", [ir.IntegerType.get_signless(1)], [x, const_index(0)],
                   {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)}).results[0]


def _emit_row_reduction(v: _View, r: _RowReduction, sizes: list, threads: int, block: int,
                        memory: WorkgroupMemory, fuse: bool = True) -> list[ir.Operation]:
    """A block of `block` threads: `ty_n` rows at a time, `tx_n` (at most `threads`) threads striding
    over each row, then a tree in workgroup memory. With `fuse`, the fill of the output before it
    and an elementwise epilogue after it are done in the row's write (as for the matmul); returns
    the fused ops (marked, not yet erased)."""
    op = v.op
    ep = _output_neighbours(v) if fuse else _Epilogue(None, None, True)
    with ir.InsertionPoint(ep.generic or op), op.location:
        par, red = sizes[:r.n_par], sizes[r.n_par:]
        rows, ktot = _prod(par), _prod(red)
        tx_n = min(threads, _pow2ceil(ktot)) if isinstance(ktot, int) else threads
        ty_n = max(1, block // tx_n)
        if isinstance(rows, int):
            ty_n = min(ty_n, _pow2ceil(rows))
        groups = _min(_ceildiv(rows, ty_n), _MAX_GRID)
        launch, body, bufs = _new_launch([groups, 1, 1], [tx_n, ty_n, 1], [tx_n * ty_n] if tx_n > 1 else [],
                                         memory, "row-reduce")
    # Region values that do not depend on the reduced dims are computed once per row.
    reg = _ReductionRegion(v, r.combiner, r.x, lambda d: d >= r.n_par, ep)
    with ir.InsertionPoint(body), op.location:
        reg.constants()
        bx, tx, gx = body.arguments[0], body.arguments[3], body.arguments[6]
        ty = body.arguments[4] if ty_n > 1 else 0
        rloop = _for(_mul(bx, ty_n), rows, _mul(gx, ty_n), [])
        with ir.InsertionPoint(rloop.body):
            row = _add(rloop.induction_variable, ty)
            valid = _ult(row, rows)
            pivs = dict(enumerate(_delinearize(row, par)))
            oidx = _indices(v.maps[-1], pivs)
            guard = _if(valid, [ir.F32Type.get()], True)
            with ir.InsertionPoint(guard.then_block):
                _yield([reg.partial(pivs, oidx, list(range(r.n_par, len(sizes))), red, tx, tx_n)])
            with ir.InsertionPoint(guard.else_block):
                _yield([_cf32(0.0)])  # a row past the end: never written
            acc = guard.results[0]
            if tx_n > 1:
                sm = bufs[0]
                base = _mul(ty, tx_n)
                slot = _add(base, tx)
                _store(acc, sm, [slot])
                make_op("gpu.barrier", [], [])
                _tree(reg, sm, slot, tx, tx_n, 1)
            write = _if(_and(_is_zero(tx), valid), [], False)
            with ir.InsertionPoint(write.then_block):
                reg.write(_load(bufs[0], [base]) if tx_n > 1 else acc, oidx)
                _yield([])
            _yield([])
        make_op("gpu.terminator", [], [])
    op.erase()
    return _mark_fused(ep)


_COL_X, _COL_Y = 32, 8  # a column-reduction block: 32 neighbouring columns, 8 threads along each
# From this many (static) columns on, one thread per column already fills a GPU and reads
# coalesced; the cooperative kernel is for few, long columns, and for dynamic column counts.
_COL_MANY = 2048


def _static_prod(sizes: list) -> int:
    """The product of the static sizes, 0 if any is dynamic."""
    p = 1
    for x in sizes:
        if not isinstance(x, int):
            return 0
        p *= x
    return p


def _emit_col_reduction(v: _View, r: _ColReduction, sizes: list, memory: WorkgroupMemory,
                        fuse: bool = True) -> list[ir.Operation]:
    """A block of 32 x 8 threads per 32 neighbouring outputs (grid-stride over them): thread
    (tx, ty) combines the reduced positions ty, ty + 8, ... of output column tx (neighbouring
    threads read neighbouring elements), then a tree over ty in workgroup memory; ty = 0 writes
    the result, with the output's fill and an elementwise epilogue fused as for the rows."""
    op = v.op
    ep = _output_neighbours(v) if fuse else _Epilogue(None, None, True)
    with ir.InsertionPoint(ep.generic or op), op.location:
        red, par = sizes[:r.n_red], sizes[r.n_red:]
        cols = _prod(par)
        groups = _min(_ceildiv(cols, _COL_X), _MAX_GRID)
        launch, body, bufs = _new_launch([groups, 1, 1], [_COL_X, _COL_Y, 1], [_COL_X * _COL_Y], memory,
                                         "col-reduce")
    # Region values that do not depend on the reduced dims are computed once per column.
    reg = _ReductionRegion(v, r.combiner, r.x, lambda d: d < r.n_red, ep)
    with ir.InsertionPoint(body), op.location:
        reg.constants()
        bx, tx, ty, gx = body.arguments[0], body.arguments[3], body.arguments[4], body.arguments[6]
        sm = bufs[0]
        slot = _add(_mul(ty, _COL_X), tx)
        cloop = _for(_mul(bx, _COL_X), cols, _mul(gx, _COL_X), [])
        with ir.InsertionPoint(cloop.body):
            col = _add(cloop.induction_variable, tx)
            valid = _ult(col, cols)
            pivs = {r.n_red + i: x for i, x in enumerate(_delinearize(col, par))}
            oidx = _indices(v.maps[-1], pivs)
            guard = _if(valid, [ir.F32Type.get()], True)
            with ir.InsertionPoint(guard.then_block):
                _yield([reg.partial(pivs, oidx, list(range(r.n_red)), red, ty, _COL_Y)])
            with ir.InsertionPoint(guard.else_block):
                _yield([_cf32(0.0)])  # a column past the end: never written
            _store(guard.results[0], sm, [slot])
            make_op("gpu.barrier", [], [])
            _tree(reg, sm, slot, ty, _COL_Y, _COL_X)
            write = _if(_and(_is_zero(ty), valid), [], False)
            with ir.InsertionPoint(write.then_block):
                reg.write(_load(sm, [tx]), oidx)
                _yield([])
            # Every thread is past the write's read of sm[tx] before the next tile stores into it.
            make_op("gpu.barrier", [], [])
            _yield([])
        make_op("gpu.terminator", [], [])
    op.erase()
    return _mark_fused(ep)


def _used(x: ir.Value) -> bool:
    return any(True for _ in x.uses)


def _clone_region_ops(ops: list[ir.Operation], env: dict, ivs: dict) -> None:
    """Clone region ops into the kernel; `linalg.index` becomes the loop iv of its dim."""
    for o in ops:
        if o.name == "linalg.index":
            env[o.results[0]] = _val(ivs[ir.IntegerAttr(o.attributes["dim"]).value])
        else:
            _clone_into([o], env)


def _emit_matmul(v: _View, mm: _Matmul, sizes: list, tile: int, memory: WorkgroupMemory,
                 fuse: bool = True) -> list[ir.Operation]:
    """A block of s x s threads (s = min(tile, 16)) per `tile` x `tile` output tile, each thread
    computing r x r outputs (r = tile / s, rows and columns s apart); K in steps of s through an
    A tile [tile, s] and a B tile [s, tile] in workgroup memory, loaded by all threads together.
    With `fuse`, the fill of C before it and an elementwise epilogue after it (`_output_neighbours`)
    happen in the output write: C starts at the fill value instead of being read, and the
    epilogue's result is stored where the epilogue would have stored it. Returns the fused ops
    (marked, not yet erased)."""
    op = v.op
    s = min(tile, _MATMUL_THREADS)
    r = tile // s
    ep = _output_neighbours(v) if fuse else _Epilogue(None, None, True)
    # At the epilogue when there is one: the views it reads may be made between the two (the
    # ops between touch no memory, and the matmul's operands are defined before it).
    with ir.InsertionPoint(ep.generic or op), op.location:
        m_size, n_size, k_size = sizes[mm.m], sizes[mm.n], sizes[mm.k]
        bsizes = [sizes[d] for d in mm.batch]
        nbatch = _prod(bsizes)
        grid = [_ceildiv(n_size, tile), _ceildiv(m_size, tile), _min(nbatch, _MAX_GRID)]
        launch, body, (sa, sb) = _new_launch(grid, [s, s, 1], [tile * s, s * tile], memory, "matmul")
    f32 = ir.F32Type.get()
    with ir.InsertionPoint(body), op.location:
        bx, by, bz, tx, ty, gz = (body.arguments[i] for i in (0, 1, 2, 3, 4, 8))
        row0, col0 = _mul(by, tile), _mul(bx, tile)
        rows = [_add(row0, _add(ty, s * i)) for i in range(r)]  # this thread's output rows
        cols = [_add(col0, _add(tx, s * j)) for j in range(r)]  # and columns
        rows_ok = [_ult(x, m_size) for x in rows]
        cols_ok = [_ult(x, n_size) for x in cols]
        zero = _cf32(0.0)

        def tile_product(bivs: list) -> None:
            ivs = dict(zip(mm.batch, bivs))

            def load_guarded(ok, i, at):
                guard = _if(ok, [f32], True)
                with ir.InsertionPoint(guard.then_block):
                    _yield([_load(v.ins[i], _indices(v.maps[i], {**ivs, **at}))])
                with ir.InsertionPoint(guard.else_block):
                    _yield([zero])
                return guard.results[0]

            def k_step(k0, accs):
                ka, kb = _add(k0, tx), _add(k0, ty)
                ka_ok, kb_ok = _ult(ka, k_size), _ult(kb, k_size)
                for q in range(r):  # A[rows[q], k0 + tx] -> sa[ty + s*q, tx]
                    a = load_guarded(_and(rows_ok[q], ka_ok), 0, {mm.m: rows[q], mm.k: ka})
                    _store(a, sa, [_add(_mul(_add(ty, s * q), s), tx)])
                for q in range(r):  # B[k0 + ty, cols[q]] -> sb[ty, tx + s*q]
                    b = load_guarded(_and(cols_ok[q], kb_ok), 1, {mm.k: kb, mm.n: cols[q]})
                    _store(b, sb, [_add(_mul(ty, tile), _add(tx, s * q))])
                make_op("gpu.barrier", [], [])
                accs = list(accs)
                for kk in range(s):
                    a = [_load(sa, [_add(_mul(_add(ty, s * i), s), kk)]) for i in range(r)]
                    b = [_load(sb, [_add(tx, kk * tile + s * j)]) for j in range(r)]
                    for i in range(r):
                        for j in range(r):
                            p = make_op("arith.mulf", [f32], [a[i], b[j]]).results[0]
                            accs[i * r + j] = make_op("arith.addf", [f32], [accs[i * r + j], p]).results[0]
                make_op("gpu.barrier", [], [])
                return accs

            totals = _accumulate(0, k_size, s, [zero] * (r * r), k_step)
            for i in range(r):
                for j in range(r):
                    write = _if(_and(rows_ok[i], cols_ok[j]), [], False)
                    with ir.InsertionPoint(write.then_block):
                        cidx = _indices(v.maps[2], {**ivs, mm.m: rows[i], mm.n: cols[j]})
                        if ep.fill is None:
                            c = make_op("arith.addf", [f32], [_load(v.out, cidx), totals[i * r + j]]).results[0]
                        elif _is_positive_zero(ep.fill.operands[0]):  # the sums start at +0.0 already
                            c = totals[i * r + j]
                        else:
                            c = make_op("arith.addf", [f32], [ep.fill.operands[0], totals[i * r + j]]).results[0]
                        if ep.store_c:
                            _store(c, v.out, cidx)
                        if ep.generic is not None:
                            y, out, yidx = _epilogue_value(ep.generic, v.out, c, cidx)
                            _store(y, out, yidx)
                        _yield([])

        if nbatch == 1:
            tile_product([0] * len(bsizes))
        else:  # a block-stride loop over the batch: the grid's z is capped
            bloop = _for(bz, nbatch, gz, [])
            with ir.InsertionPoint(bloop.body):
                tile_product(_delinearize(bloop.induction_variable, bsizes))
                _yield([])
        make_op("gpu.terminator", [], [])
    op.erase()
    return _mark_fused(ep)


def _mark_fused(ep: _Epilogue) -> list[ir.Operation]:
    fused = [x for x in (ep.fill, ep.generic) if x is not None]
    for x in fused:  # erased by map_cooperative_kernels, which may still hold it
        x.attributes[_FUSED] = ir.UnitAttr.get()
    return fused


def map_cooperative_kernels(module_op: ir.Operation, *, reduce_threads: int, matmul_tile: int,
                            memory: WorkgroupMemory) -> dict[str, int]:
    """Replace every matched row reduction (`reduce_threads` > 0) and matmul (`matmul_tile` > 0)
    linalg op of the public functions by a cooperative `gpu.launch`; returns counts by strategy."""
    todo = []

    def visit(o):
        if o.name in ("gpu.launch", "gpu.module"):
            return ir.WalkResult.SKIP
        if o.name.startswith("linalg."):
            todo.append(o)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    done = {"row-reduce": 0, "col-reduce": 0, "matmul": 0}
    with module_op.context, ir.Location.unknown():
        fused = []
        for o in todo:
            if any(o == x for x in fused):
                continue
            v = _view(o)
            if v is None:
                continue
            mm = _match_matmul(v) if matmul_tile else None
            rr = None if mm is not None or not reduce_threads else _match_row_reduction(v)
            cr = None if mm is not None or rr is not None or not reduce_threads else _match_col_reduction(v)
            if mm is None and rr is None and cr is None:
                continue
            with ir.InsertionPoint(o), o.location:
                sizes = _loop_sizes(v)
            if sizes is None or any(isinstance(s, int) and s == 0 for s in sizes):
                continue
            if cr is not None and _static_prod(sizes[cr.n_red:]) >= _COL_MANY:
                continue  # enough columns for a thread each (coalesced, no barriers): the generic mapping
            if mm is not None:
                fused += _emit_matmul(v, mm, sizes, matmul_tile, memory)
                done["matmul"] += 1
            elif rr is not None:
                fused += _emit_row_reduction(v, rr, sizes, reduce_threads, _REDUCE_BLOCK, memory)
                done["row-reduce"] += 1
            else:
                fused += _emit_col_reduction(v, cr, sizes, memory)
                done["col-reduce"] += 1
        for o in fused:
            o.erase()
        done["fused"] = len(fused)
    return done


# --------------------------------------------------------------------------------------------
# Rewrites that keep data work in kernels
# --------------------------------------------------------------------------------------------

TO_LOOPS = "func.func(convert-linalg-to-parallel-loops)"
OUTLINE = "gpu-kernel-outlining,canonicalize,cse"
# Every kernel inlined into its entry: the host program then becomes launches.
# Each function canonicalized on its own, then the kernels inlined with no canonicalization after:
# across kernels it would fold a slice of a concat into the concat's piece, read after the memory
# plan gave the piece's block to a later value (stack([x, -x])[1] read stack[0]: a wrong result).
INLINE = "func.func(lower-affine),canonicalize,inline{default-pipeline=},symbol-dce,cse"


def fold_subviews(module_op: ir.Operation) -> int:
    """Fold unit-stride, rank-preserving `memref.subview`s into the loads and stores that use
    them (index + offset), so that a kernel takes whole buffers and index offsets, never a strided
    view: a host program passes buffers, and a SPIR-V binding cannot start at an arbitrary
    element. (Upstream fold-memref-alias-ops also folds collapse/expand_shape, into
    `extract_strided_metadata` arithmetic that convert-gpu-to-spirv cannot legalize.) Returns the
    number of accesses rewritten; a subview left without uses is erased."""
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    todo, views = [], []

    def visit(o):
        if o.name in ("memref.load", "memref.store"):
            mem = o.operands[0 if o.name == "memref.load" else 1]
            if not isinstance(mem.owner, ir.Block) and _op_of(mem.owner).name == "memref.subview":
                todo.append((o, _op_of(mem.owner)))
        return ir.WalkResult.ADVANCE

    module_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    done = 0
    for o, view in todo:
        src = view.operands[0]
        strides = list(ir.DenseI64ArrayAttr(view.attributes["static_strides"]))
        if ir.MemRefType(src.type).rank != ir.MemRefType(view.results[0].type).rank or any(x != 1 for x in strides):
            continue
        segs = list(ir.DenseI32ArrayAttr(view.attributes["operandSegmentSizes"]))
        dyn = iter(list(view.operands)[1:1 + segs[1]])
        offsets = [next(dyn) if x == dynamic else x for x in ir.DenseI64ArrayAttr(view.attributes["static_offsets"])]
        is_load = o.name == "memref.load"
        first = 1 if is_load else 2
        with o.context, o.location, ir.InsertionPoint(o):
            for k, off in enumerate(offsets):
                if isinstance(off, int) and off == 0:
                    continue
                idx = o.operands[first + k]
                off = off if isinstance(off, ir.Value) else const_index(off)
                o.operands[first + k] = make_op("arith.addi", [ir.IndexType.get()], [idx, off]).results[0]
            o.operands[0 if is_load else 1] = src
        views.append(view)
        done += 1
    # (one op, several Python wrappers: dedupe by identity of the op, not of the wrapper, or a
    # subview used by two accesses was erased twice -- a SIGSEGV, fuzzer seed 23)
    unique: list = []
    for view in views:
        if not any(view == u for u in unique):
            unique.append(view)
    for view in unique:
        if not list(view.results[0].uses):
            view.erase()
    return done


def identity_layout(t: ir.Type) -> bool:
    if not isinstance(t, ir.MemRefType):
        return True
    layout = ir.MemRefType(t).layout
    return isinstance(layout, ir.AffineMapAttr) and \
        layout.value == ir.AffineMap.get_identity(ir.MemRefType(t).rank)


def copies_to_kernels(module_op: ir.Operation) -> int:
    """Turn each `memref.copy` from or into a strided view (a subview) into a `linalg.copy`, which
    is then mapped to a kernel like any other linalg op. A copy between whole buffers stays a copy
    (the host program's device-to-device copy); a strided one has no such copy in the drivers.
    Returns the number rewritten."""
    from mlir.dialects import linalg

    todo = []

    def visit(o):
        if o.name == "gpu.launch":
            return ir.WalkResult.SKIP
        if o.name == "memref.copy" and not all(identity_layout(v.type) for v in o.operands):
            todo.append(o)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    for o in todo:
        with o.context, o.location, ir.InsertionPoint(o):
            linalg.copy(o.operands[0], outs=[o.operands[1]])
        o.erase()
    return len(todo)


def parallel_dims_first(module_op: ir.Operation) -> int:
    """Interchange the loops of each linalg.generic on memrefs whose reduction dims come before
    a parallel one (a column reduction, `max(x, axis=0)`), so that the parallel dims lead:
    `convert-linalg-to-parallel-loops` then makes one parallel loop over the outputs with the
    reduction as a sequential loop in each thread (neighbouring threads read neighbouring
    columns). Left as it is, the reduction became a host loop of one launch per step.
    Returns the number interchanged."""
    todo = []

    def visit(o):
        if o.name == "gpu.launch":
            return ir.WalkResult.SKIP
        if o.name == "linalg.generic" and not o.results:
            iters = ["reduction" in str(a) for a in ir.ArrayAttr(o.attributes["iterator_types"])]
            if any(r and not later for i, r in enumerate(iters) for later in iters[i + 1:]):
                todo.append((o, iters))
        return ir.WalkResult.ADVANCE

    module_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    for o, iters in todo:
        order = [d for d, r in enumerate(iters) if not r] + [d for d, r in enumerate(iters) if r]
        pos = {old: new for new, old in enumerate(order)}
        with o.context:
            n = len(iters)
            to_new = ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(pos[d]) for d in range(n)])
            maps = []
            for a in ir.ArrayAttr(o.attributes["indexing_maps"]):
                m = ir.AffineMapAttr(a).value
                maps.append(ir.AffineMapAttr.get(ir.AffineMap.get(n, m.n_symbols,
                                                                   [e.compose(to_new) for e in m.results])))
            o.attributes["indexing_maps"] = ir.ArrayAttr.get(maps)
            its = list(ir.ArrayAttr(o.attributes["iterator_types"]))
            o.attributes["iterator_types"] = ir.ArrayAttr.get([its[d] for d in order])
            for b in o.regions[0].blocks:
                for inner in b.operations:
                    inner = inner.operation
                    if inner.name == "linalg.index":
                        d = ir.IntegerAttr(inner.attributes["dim"]).value
                        inner.attributes["dim"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), pos[d])
    return len(todo)


def _parallel_loop_count(o: ir.Operation) -> int | None:
    """How many parallel loops a linalg op on memrefs has (None: not such an op)."""
    if not o.name.startswith("linalg.") or o.results or "indexing_maps" not in o.attributes and \
            o.name not in ("linalg.fill", "linalg.copy", "linalg.reduce"):
        return None
    if "iterator_types" in o.attributes:
        return sum("parallel" in str(a) for a in ir.ArrayAttr(o.attributes["iterator_types"]))
    if o.name == "linalg.reduce":
        return ir.MemRefType(o.operands[0].type).rank - len(ir.DenseI64ArrayAttr(o.attributes["dimensions"]))
    outs = [v for v in o.operands if isinstance(v.type, ir.MemRefType)]
    return ir.MemRefType(outs[-1].type).rank if outs else None


def serial_linalg_in_one_thread(module_op: ir.Operation) -> int:
    """Put each linalg op without a parallel loop -- a rank-0 fill or elementwise op, a reduction
    to a scalar that no cooperative kernel took -- in a one-iteration `scf.parallel`, so that it
    becomes a one-thread kernel. Lowered as it is it would be host code: loads and stores of device
    memory in the host program. Returns the number wrapped."""
    todo = []

    def visit(o):
        if o.name == "gpu.launch":
            return ir.WalkResult.SKIP
        if _parallel_loop_count(o) == 0:
            todo.append(o)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    for o in todo:
        in_one_thread(o)
    return len(todo)


# Marks an scf.parallel whose iterations are independent and whose body is one scf.for that may run
# in consecutive chunks, one launch each (backend/loop_budget.py `chunk_serial_loops`): the
# one-iteration parallel of `in_one_thread`, and the parallel of `interchange_elementwise_loops`.
CHUNKABLE = "relax.chunkable"


def in_one_thread(o: ir.Operation) -> None:
    """Move `o` into a new one-iteration `scf.parallel` in its place (a one-thread kernel once
    the loop is mapped), marked `relax.chunkable`."""
    with o.context, o.location, ir.InsertionPoint(o):
        c0, c1 = const_index(0), const_index(1)
        par = make_op("scf.parallel", [], [c0, c1, c1],
                      {"operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1, 1, 0]),
                       CHUNKABLE: ir.UnitAttr.get()}, regions=1)
        body = par.regions[0].blocks.append(ir.IndexType.get())
        with ir.InsertionPoint(body):
            make_op("scf.reduce", [], [])
        o.move_before(body.operations[0])


def gpu_funcs(module_op: ir.Operation):
    """(gpu.module name, gpu.func name, gpu.func op) of every outlined kernel of a module."""
    for m in module_op.regions[0].blocks[0].operations:
        m = m.operation
        if m.name != "gpu.module":
            continue
        mname = ir.StringAttr(m.attributes["sym_name"]).value
        for k in m.regions[0].blocks[0].operations:
            k = k.operation
            if k.name == "gpu.func":
                yield mname, ir.StringAttr(k.attributes["sym_name"]).value, k


def _clone_mapped(o: ir.Operation, mapping: dict) -> None:
    """Clone `o` (region-free) at the insertion point with its operands looked up in `mapping`,
    recording its results' clones there."""
    c = o.clone()
    for i, v in enumerate(c.operands):
        c.operands[i] = mapping.get(v, v)
    for old, new in zip(o.results, c.results):
        mapping[old] = new


def _slice_view(o: ir.Operation, loop: ir.Operation) -> bool:
    """A memref.subview of a buffer defined outside `loop` that picks a position along dims of size
    1 only: strides 1, and every other dim's offset a static 0 (its element p is the source's p)."""
    v = o.opview
    if not defined_outside(o.operands[0], loop) or any(s != 1 for s in v.static_strides):
        return False
    sizes, offsets = list(v.static_sizes), list(v.static_offsets)
    return all(size == 1 or off == 0 for size, off in zip(sizes, offsets))


def _elementwise(o: ir.Operation, rank: int) -> bool:
    """A linalg.generic whose loops are all parallel, its maps all identities of `rank` dims, and its
    body region-free ops: iteration p touches element p of every operand, nothing else."""
    if o.name != "linalg.generic":
        return False
    its = [str(a) for a in ir.ArrayAttr(o.attributes["iterator_types"])]
    if any("parallel" not in a for a in its) or len(its) != rank:
        return False
    ident = ir.AffineMap.get_identity(rank)
    if any(ir.AffineMapAttr(m).value != ident for m in ir.ArrayAttr(o.attributes["indexing_maps"])):
        return False
    return all(not len(b.regions) for b in o.regions[0].blocks[0].operations)


def _interchangeable(loop: ir.Operation) -> list[ir.Value] | None:
    """The buffers of `loop`'s elementwise body when it can run as `parallel p { for it { body at p } }`
    (see interchange_elementwise_loops); else None."""
    if len(loop.results) or len(loop.regions[0].blocks[0].arguments) != 1:
        return None
    shaped, has_linalg = [], False
    for o in loop.regions[0].blocks[0].operations:
        o = o.operation
        n = o.name
        if n == "scf.yield":
            continue
        if n == "memref.subview":
            if not _slice_view(o, loop):
                return None
            shaped.append(o.results[0])
        elif n in ("linalg.generic", "linalg.fill", "memref.copy"):
            has_linalg = True
            shaped.extend(v for v in o.operands if isinstance(v.type, ir.MemRefType))
        elif n.startswith("arith.") and not len(o.regions):
            continue
        else:
            return None
    if not has_linalg or not shaped:
        return None
    shapes = {tuple(ir.MemRefType(v.type).shape) for v in shaped}
    if len(shapes) != 1:
        return None
    rank = len(next(iter(shapes)))
    for o in loop.regions[0].blocks[0].operations:
        o = o.operation
        if o.name == "linalg.generic" and not _elementwise(o, rank):
            return None
        if o.name in ("linalg.fill", "linalg.generic") and len(o.results):
            return None  # (on tensors: not bufferized)
    for v in shaped:  # every buffer is a slice view made in the loop or a buffer from outside it
        if not defined_outside(v, loop) and v.owner.operation.name != "memref.subview":
            return None
    return shaped


def interchange_elementwise_loops(module_op: ir.Operation) -> int:
    """A host-level `scf.for` whose body is elementwise linalg ops and copies on slices of one shape
    S (views that pick a position along dims of size 1, buffers from outside the loop) becomes
    `scf.parallel p over S { scf.for it { the body at element p } }`, marked `relax.chunkable`.
    Iteration p of the body touches element p of every buffer and nothing else, so the iterations
    of p are independent and each keeps the loop's order. A cumulative scan (ops/window.py
    `_scan_kernel`: one elementwise step per position along the axis) was a host loop of two
    launches per position (2n launches for a cumsum of n, and host memory that grew with them);
    it is one kernel now, each invocation scanning one row. Returns the number interchanged."""
    loops = []

    def visit(o):
        if o.name in ("gpu.launch", "scf.parallel"):
            return ir.WalkResult.SKIP
        if o.name == "scf.for":
            loops.append(o)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    n = 0
    for loop in loops:
        shaped = _interchangeable(loop)
        if shaped is None:
            continue
        with loop.context, loop.location, ir.InsertionPoint(loop):
            _interchange(loop, shaped)
        loop.erase()
        n += 1
    return n


def _interchange(loop: ir.Operation, shaped: list[ir.Value]) -> None:
    idx = ir.IndexType.get()
    t = ir.MemRefType(shaped[0].type)
    dims = [d for d in range(t.rank) if ir.ShapedType(t).is_dynamic_dim(d) or t.shape[d] != 1]
    ubs = []
    for d in dims:  # (a dim of size 1, the scanned one, is index 0 in every slice)
        if not ir.ShapedType(t).is_dynamic_dim(d):
            ubs.append(const_index(t.shape[d]))
            continue
        outside = next((v for v in shaped if defined_outside(v, loop)), None)
        if outside is not None:
            ubs.append(make_op("memref.dim", [idx], [outside, const_index(d)]).results[0])
        else:  # a slice view's size operand (defined outside the loop: `_slice_view`'s source is)
            view = shaped[0].owner.operation.opview
            dyn = [i for i, s in enumerate(view.static_sizes) if ir.ShapedType.is_dynamic_size(s)]
            ubs.append(list(view.sizes)[dyn.index(d)])
    c0, c1 = const_index(0), const_index(1)
    if not dims:  # one element a slice: one thread
        dims, ubs = [None], [c1]
    rank = len(dims)
    par = make_op("scf.parallel", [], [c0] * rank + ubs + [c1] * rank,
                  {"operandSegmentSizes": ir.DenseI32ArrayAttr.get([rank, rank, rank, 0]),
                   CHUNKABLE: ir.UnitAttr.get()}, regions=1)
    pbody = par.regions[0].blocks.append(*([idx] * rank))
    with ir.InsertionPoint(pbody):
        zero = const_index(0)
        at = {d: a for d, a in zip(dims, pbody.arguments)}
        p = [at.get(d, zero) for d in range(t.rank)]
        lb, ub, step = (loop.operands[i] for i in range(3))
        inner = make_op("scf.for", [], [lb, ub, step], regions=1)
        ibody = inner.regions[0].blocks.append(idx)
        make_op("scf.reduce")
    mapping = {loop.regions[0].blocks[0].arguments[0]: ibody.arguments[0]}

    def get(v):
        return mapping.get(v, v)

    def load(buf):
        return make_op("memref.load", [ir.MemRefType(buf.type).element_type], [get(buf)] + p).results[0]

    def store(value, buf):
        make_op("memref.store", [], [value, get(buf)] + p)

    with ir.InsertionPoint(ibody):
        for o in loop.regions[0].blocks[0].operations:
            o = o.operation
            if o.name == "scf.yield":
                continue
            if o.name == "memref.copy":
                store(load(o.operands[0]), o.operands[1])
            elif o.name == "linalg.fill":
                store(get(o.operands[0]), o.operands[1])
            elif o.name == "linalg.generic":
                block = o.regions[0].blocks[0]
                nin = list(ir.DenseI32ArrayAttr(o.attributes["operandSegmentSizes"]))[0]
                outs = list(o.operands)[nin:]
                for arg, buf in zip(block.arguments, o.operands):
                    if any(True for _ in arg.uses):
                        mapping[arg] = load(buf)
                for b in block.operations:
                    b = b.operation
                    if b.name == "linalg.yield":
                        for v, buf in zip(b.operands, outs):
                            store(get(v), buf)
                    elif b.name == "linalg.index":
                        mapping[b.results[0]] = p[ir.IntegerAttr(b.attributes["dim"]).value]
                    else:
                        _clone_mapped(b, mapping)
            else:
                _clone_mapped(o, mapping)
        make_op("scf.yield")


def drop_unused_workspace(module_op: ir.Operation) -> int:
    """Size 0 for each workspace block (`relax.workspace`) an entry no longer uses after mapping: a
    block that held a matmul's or reduction's output, when the kernel fused into its epilogue
    never writes it. The blocks are the entry's arguments after its inputs and outputs, before
    the error slot. Returns the number of blocks dropped."""
    dropped = 0
    for f in module_op.regions[0].blocks[0].operations:
        f = f.operation
        if f.name != "func.func" or "relax.workspace" not in f.attributes or not len(f.regions[0].blocks):
            continue
        sizes = list(ir.ArrayAttr(f.attributes["relax.workspace"]))
        args = list(f.regions[0].blocks[0].arguments)
        first = len(args) - 1 - len(sizes)
        new = []
        for k, size in enumerate(sizes):
            unused = not any(True for _ in args[first + k].uses)
            if unused and not (isinstance(size, ir.IntegerAttr) and ir.IntegerAttr(size).value == 0):
                dropped += 1
                size = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)
            new.append(size)
        with f.context:
            f.attributes["relax.workspace"] = ir.ArrayAttr.get(new)
    return dropped


def defined_outside(v: ir.Value, region_op: ir.Operation) -> bool:
    owner = v.owner
    if isinstance(owner, ir.Block):
        owner = owner.owner
    else:
        owner = owner.operation if hasattr(owner, "operation") else owner
    return not (owner == region_op or is_inside(owner, region_op))


def view_sizes(view: ir.Operation) -> list | None:
    """The result sizes of a `memref.expand_shape` or rank-preserving `memref.subview` (ints and
    index values), None for another op."""
    dynamic = ir.ShapedType.get_dynamic_size()
    if view.name == "memref.expand_shape":
        dyn, attr = iter(list(view.operands)[1:]), "static_output_shape"
    elif view.name == "memref.subview" and \
            ir.MemRefType(view.operands[0].type).rank == ir.MemRefType(view.results[0].type).rank:
        seg = list(ir.DenseI32ArrayAttr(view.attributes["operandSegmentSizes"]))
        dyn, attr = iter(list(view.operands)[1 + seg[1]:1 + seg[1] + seg[2]]), "static_sizes"
    else:
        return None
    return [next(dyn) if v == dynamic else v for v in ir.DenseI64ArrayAttr(view.attributes[attr])]


def fold_view_dims(op: ir.Operation) -> None:
    """`memref.dim` of an expand_shape or subview result as the size the view op states, so that
    neither the host program (which has no subview) nor a kernel (whose buffers must have identity
    layouts) keeps the view for its dims alone: a strided convolution's weight gradient asked the
    dims of an expanded window of its input."""
    dims = []
    walk(op, lambda o: dims.append(o) if o.name == "memref.dim" else None)
    for o in dims:
        owner = o.operands[0].owner
        d = const_int(o.operands[1])
        if not isinstance(owner, ir.OpView) or d is None:
            continue
        sizes = view_sizes(owner.operation)
        if sizes is None or not 0 <= d < len(sizes):
            continue
        with ir.InsertionPoint(o), o.location:
            v = const_index(sizes[d]) if isinstance(sizes[d], int) else sizes[d]
        o.results[0].replace_all_uses_with(v)
        o.erase()


def _through_expand_shape(ex: ir.Operation, indices: list) -> tuple[ir.Value, list]:
    """An access of `memref.expand_shape`'s result as one of its source: the indices of each
    reassociation group linearized over the group's sizes (row-major, as expand_shape splits a
    dim). Builds at the caller's insertion point."""
    idx = ir.IndexType.get()
    sizes = view_sizes(ex)
    new = []
    for group in ir.ArrayAttr(ex.attributes["reassociation"]):
        dims = [ir.IntegerAttr(d).value for d in ir.ArrayAttr(group)]
        lin = indices[dims[0]]
        for d in dims[1:]:
            size = sizes[d]
            if not (isinstance(size, int) and size == 1):
                size = const_index(size) if isinstance(size, int) else size
                lin = make_op("arith.muli", [idx], [lin, size]).results[0]
            lin = make_op("arith.addi", [idx], [lin, indices[d]]).results[0]
        new.append(lin)
    return ex.operands[0], new


def through_views(m: ir.Value, indices: list, launch: ir.Operation):
    """A load or store through `memref.subview`s (and `memref.expand_shape`s of them) defined
    outside the kernel (the O(n) scan of cumsum walks one row of a strided view; a strided
    convolution's weight gradient reads an expanded window of its input), as one of their
    identity-layout source: index offset + i * stride in each kept dim, the offset in each dim
    the subview drops. Builds at the caller's insertion point (the access)."""
    idx = ir.IndexType.get()
    while True:
        t = ir.MemRefType(m.type)
        if identity_layout(t) or not defined_outside(m, launch):
            return m, indices
        owner = m.owner
        if isinstance(owner, ir.OpView) and owner.operation.name == "memref.expand_shape":
            m, indices = _through_expand_shape(owner.operation, indices)
            continue
        if not isinstance(owner, ir.OpView) or owner.operation.name != "memref.subview":
            return m, indices
        sv = owner.operation
        src = sv.operands[0]
        st = ir.MemRefType(src.type)
        seg = list(ir.DenseI32ArrayAttr(sv.attributes["operandSegmentSizes"]))
        dyn = list(sv.operands)
        offs_dyn = iter(dyn[1:1 + seg[1]])
        strides_dyn = iter(dyn[1 + seg[1] + seg[2]:])
        dynamic = ir.ShapedType.get_dynamic_size()

        def values(name, dyn_iter):
            out = []
            for v in ir.DenseI64ArrayAttr(sv.attributes[name]):
                out.append(next(dyn_iter) if v == dynamic else v)
            return out

        offsets, strides = values("static_offsets", offs_dyn), values("static_strides", strides_dyn)
        sizes = list(ir.DenseI64ArrayAttr(sv.attributes["static_sizes"]))
        # which source dims the result keeps (a rank-reducing subview drops unit dims)
        kept, r = [], t.rank
        for d in range(st.rank):
            if len(kept) < r and not (sizes[d] == 1 and st.rank - d > r - len(kept)):
                kept.append(d)
        if len(kept) != r:
            return m, indices
        new = []
        it = iter(indices)
        for d in range(st.rank):
            off = offsets[d] if not isinstance(offsets[d], int) else const_index(offsets[d])
            if d in kept:
                i = next(it)
                stv = strides[d]
                if not (isinstance(stv, int) and stv == 1):
                    stv = stv if not isinstance(stv, int) else const_index(stv)
                    i = make_op("arith.muli", [idx], [i, stv]).results[0]
                new.append(make_op("arith.addi", [idx], [off, i]).results[0])
            else:
                new.append(off)
        m, indices = src, new


def resolve_kernel_views(module_op: ir.Operation) -> int:
    """Loads and stores in a `gpu.launch` through views defined outside it (subviews and their
    expand_shapes) as accesses of the views' identity-layout sources (`through_views`), and their
    dims as the sizes the views state: the kernels then take whole buffers, and the host program,
    which has no subview, keeps no view for them (CUDA; the Vulkan backend does the same while it
    flattens the buffers). Returns the number of accesses rewritten."""
    fold_view_dims(module_op)
    done = 0
    launches = []
    walk(module_op, lambda o: launches.append(o) if o.name == "gpu.launch" else None)
    for launch in launches:
        accesses = []
        walk(launch, lambda o: accesses.append(o) if o.name in ("memref.load", "memref.store") else None)
        for o in accesses:
            is_load = o.name == "memref.load"
            m = o.operands[0 if is_load else 1]
            if identity_layout(ir.MemRefType(m.type)) or not defined_outside(m, launch):
                continue
            with ir.InsertionPoint(o), o.location:
                src, indices = through_views(m, list(o.operands)[1 if is_load else 2:], launch)
                if src == m:
                    continue
                if is_load:
                    new = make_op("memref.load", [o.results[0].type], [src, *indices])
                    o.results[0].replace_all_uses_with(new.results[0])
                else:
                    make_op("memref.store", [], [o.operands[0], src, *indices])
            o.erase()
            done += 1
    return done
