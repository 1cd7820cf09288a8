"""SPIR-V (Vulkan) backend: ordered IR -> IR stages from upstream linalg on tensors to SPIR-V binaries.

Same layering as backend/cpu.py: a frozen `SPIRVOptions`, an ordered dict `STAGES` of named
functions `(module, options) -> None` that mutate the module in place, and `lower()`.

Input contract: the module after `relax-to-upstream` (private kernels on tensors in
destination-passing style, public entries on memrefs with a trailing `memref<1xi32>` error slot).

Stages, in order:

* ``inline``     kernels into the entries, symbol-dce, canonicalize, cse (as on the CPU).
* ``bufferize``  empty-tensor elimination and one-shot bufferization with identity layouts; no
  deallocation pipeline (the Vulkan runtime owns and frees every buffer).
* ``loops``      row reductions and matmuls -> cooperative `gpu.launch`es with Workgroup-storage
  `memref.alloc` buffers and `gpu.barrier` (backend/gpu_kernels.py `map_cooperative_kernels`; options
  `reduce_threads`, `matmul_tile`); the other linalg -> `scf.parallel`; host-level sequential work (a full reduction's
  `scf.for` nest, a store into a 0-d buffer) is wrapped into a one-iteration `scf.parallel` so
  that it runs on the device too; parallel-loop tiling (`no-min-max-bounds`), canonicalize.
* ``map``        explicit GPU mapping (tile loops -> workgroups, intra-tile loops -> invocations;
  canonicalize merges the nested loops of a tiling, so the mapping is computed here instead of
  by gpu-map-parallel-loops), then `convert-parallel-loops-to-gpu`.
* ``flatten``    every buffer a launch reads or writes is passed as a 1-D `memref<?xT>`
  (`memref.collapse_shape` on the host) and its indices are linearized inside the kernel with
  dims computed on the host: SPIR-V cannot lower `memref.dim` nor dynamic strides in a kernel.
  Then `gpu-kernel-outlining` (NOT gpu-launch-sink-index-computations).
* ``to-spirv``   `spirv-attach-target`, `map-memref-spirv-storage-class{client-api=vulkan}`,
  `convert-gpu-to-spirv`, `spirv.module(spirv-lower-abi-attrs, spirv-update-vce)`.
* ``serialize``  each `spirv.module` moves into its `gpu.module`, `gpu-module-to-binary{format=bin}`.

After `to-spirv` the host side (the entries) holds only `arith`, `memref.dim/alloc/collapse_shape/
expand_shape/copy/load/store`, `scf.if/for` and `gpu.launch_func`: runtime/vulkan.py interprets it.
"""
from __future__ import annotations

import functools
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from mlir import ir

from relax_mlir.backend import loop_budget
from relax_mlir.backend.common import (LoweringError, as_op, const_int, option_ints, require_upstream, run_pipeline,
                                      run_stages, top_funcs, unshare_empty_tensors, walk)
from relax_mlir.backend.gpu_kernels import (
    INLINE,
    OUTLINE,
    TO_LOOPS,
    WorkgroupMemory,
    check_cooperative,
    const_index,
    copies_to_kernels,
    drop_unused_workspace,
    finite_constant,
    defined_outside,
    gpu_funcs,
    fold_subviews,
    fold_view_dims,
    identity_layout,
    in_one_thread,
    interchange_elementwise_loops,
    make_op,
    map_cooperative_kernels,
    parallel_dims_first,
    serial_linalg_in_one_thread,
    sink_constants,
    through_views,
)
from relax_mlir.passes import ModulePass, PipelineError

__all__ = ["PASSES", "STAGES", "SPIRVOptions", "SPIRVLowerPass", "SPIRVMapPass", "LoweringError", "lower",
           "pipeline_strings", "spirv_binaries", "kernel_abis"]


@dataclass(frozen=True)
class SPIRVOptions:
    """Options of the SPIR-V backend; hashable."""

    # Invocations per workgroup along the tiled dims: the parallel-loop tile sizes, in order of
    # the loop dims (a 1-D loop uses the first, a 2-D loop the first two, further dims 1).
    tile_sizes: tuple[int, ...] = (32, 8)
    # Float16 / Int64 (and 16-bit storage) are declared by a SPIR-V module only where it uses them
    # (spirv-update-vce); runtime/vulkan.py requests wgpu's shader-f16 / shader-int64 features.
    # No Int8 / Int16: naga has no 8- or 16-bit integers; MLIR emulates them in 32 bits.
    caps: tuple[str, ...] = ("Shader", "Float16", "StorageBuffer16BitAccess", "Int64")
    exts: tuple[str, ...] = ("SPV_KHR_storage_buffer_storage_class", "SPV_KHR_16bit_storage")
    spirv_version: str = "v1.0"
    # Cooperative kernels (backend/gpu_kernels.py `map_cooperative_kernels`): invocations striding over
    # one row of a row reduction (a power of two; a 256-invocation workgroup takes 256 / this rows;
    # 0: one invocation per row), and the output tile of a workgroup-memory matmul (0: off). 32
    # and 64 measured best on lavapipe, where each barrier costs every invocation a switch.
    reduce_threads: int = 32
    matmul_tile: int = 64

    def __post_init__(self):
        """Every field checked (type and range; capability, extension and version names as MLIR's
        SPIR-V dialect knows them) and normalized (lists as tuples)."""
        tiles = option_ints("tile_sizes", self.tile_sizes, (1, 8), 1, 1024, " (invocations along each loop dim)")
        if math.prod(tiles[:3]) > 1024:
            raise ValueError(f"a workgroup may hold at most 1024 invocations, got {self.tile_sizes!r}")
        object.__setattr__(self, "tile_sizes", tiles)
        for name in ("caps", "exts"):
            v = getattr(self, name)
            if not isinstance(v, (tuple, list)) or not all(isinstance(x, str) and x.isidentifier() for x in v):
                raise ValueError(f"{name} must be a tuple of SPIR-V {_VCE_WHAT[name]} names, got {v!r}")
            object.__setattr__(self, name, tuple(v))
        bad = _unknown_vce(self.caps, self.exts)
        if bad is not None:
            raise ValueError(bad)
        if "Shader" not in self.caps:
            raise ValueError(f"caps must include 'Shader' (every Vulkan shader declares it), got {self.caps!r}")
        if self.spirv_version not in SPIRV_VERSIONS:
            raise ValueError(f"spirv_version must be one of {', '.join(SPIRV_VERSIONS)}, got {self.spirv_version!r}")
        check_cooperative(self.reduce_threads, self.matmul_tile)


# The SPIR-V versions of MLIR's SPIR-V dialect (`#spirv.vce<v1.N, ...>`).
SPIRV_VERSIONS = ("v1.0", "v1.1", "v1.2", "v1.3", "v1.4", "v1.5", "v1.6")
_VCE_WHAT = {"caps": "capability", "exts": "extension"}


@functools.lru_cache(maxsize=64)
def _unknown_vce(caps: tuple[str, ...], exts: tuple[str, ...]) -> str | None:
    """A message naming the first capability or extension that MLIR's SPIR-V dialect does not know
    (it parses them as a `#spirv.vce` attribute, the set spirv-attach-target accepts), or None."""
    with ir.Context():
        for name, items in (("caps", caps), ("exts", exts)):
            for x in items:
                vce = f"#spirv.vce<v1.0, [{x if name == 'caps' else 'Shader'}], [{x if name == 'exts' else ''}]>"
                try:
                    ir.Attribute.parse(vce)
                except ir.MLIRError:
                    return (f"{name}: {x!r} is no SPIR-V {_VCE_WHAT[name]} that MLIR knows (names as in the SPIR-V "
                            f"spec: {'Shader, Float16, Int64' if name == 'caps' else 'SPV_KHR_16bit_storage'}, ...)")
    return None


# Workgroup memory of the cooperative kernels: `memref.alloc` in the kernel body, in the
# Workgroup storage class (convert-gpu-to-spirv turns it into a Workgroup spirv.GlobalVariable;
# it does not accept gpu.func workgroup attributions).
SPIRV_WORKGROUP = WorkgroupMemory("#spirv.storage_class<Workgroup>", False)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

# No greedy rewrite before bufferization: see cpu._BUFFERIZE_CALLS.
_BUFFERIZE = (
    "eliminate-empty-tensors,"
    "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
    "function-boundary-type-conversion=identity-layout-map "
    "unknown-type-conversion=identity-layout-map},"
    "canonicalize,cse"
)


def _loops_pipeline(options: SPIRVOptions) -> str:
    sizes = ",".join(str(t) for t in options.tile_sizes)
    return (f"func.func(scf-parallel-loop-tiling{{parallel-loop-tile-sizes={sizes} no-min-max-bounds=true}}),"
            "canonicalize,cse")


_TO_GPU = "func.func(convert-parallel-loops-to-gpu),lower-affine,canonicalize,cse"


# Capabilities a kernel with i16 buffers must not declare: with 16-bit storage MLIR keeps i16
# buffers as i16 (no Int16 capability, so no emulation), which naga cannot read.
_SIXTEEN_BIT = ("Float16", "StorageBuffer16BitAccess")


def _attach_target(options: SPIRVOptions, narrow: bool = False, modules: str | None = None) -> str:
    caps = ",".join(c for c in options.caps if not (narrow and c in _SIXTEEN_BIT))
    exts = ",".join(options.exts)
    sel = f" module={modules}" if modules is not None else ""
    return f"spirv-attach-target{{ver={options.spirv_version} caps={caps} exts={exts} client_api=Vulkan{sel}}}"


def _to_spirv_pipeline(options: SPIRVOptions, narrow_modules: tuple[str, ...] = (),
                       all_modules: tuple[str, ...] = ()) -> str:
    if narrow_modules:
        import re

        wide = [m for m in all_modules if m not in narrow_modules]
        attach = _attach_target(options, True, "^(" + "|".join(re.escape(m) for m in narrow_modules) + ")$")
        if wide:
            attach += "," + _attach_target(options, False, "^(" + "|".join(re.escape(m) for m in wide) + ")$")
    else:
        attach = _attach_target(options)
    return (f"{attach},"
            "[copy the target env to spirv.target_env],"
            "map-memref-spirv-storage-class{client-api=vulkan},"
            "gpu.module(convert-math-to-spirv),"
            "convert-gpu-to-spirv,"
            "spirv.module(spirv-lower-abi-attrs,spirv-update-vce)")


def _entries(module_op: ir.Operation):
    return [f.operation for f in top_funcs(module_op) if len(f.regions[0].blocks)
            and not ("sym_visibility" in f.attributes
                     and ir.StringAttr(f.attributes["sym_visibility"]).value == "private")]


# --------------------------------------------------------------------------------------------
# stages
# --------------------------------------------------------------------------------------------


def stage_inline(module, options: SPIRVOptions) -> None:
    """Inline the kernels into the entries."""
    run_pipeline(module, INLINE, "inline")


def stage_bufferize(module, options: SPIRVOptions) -> None:
    """One-shot bufferization with identity layouts; outputs computed in the caller's buffers."""
    unshare_empty_tensors(module)
    run_pipeline(module, _BUFFERIZE, "bufferize")


def _memory_ops(op: ir.Operation) -> bool:
    found = []

    def visit(o):
        if o.name == "gpu.launch":  # a cooperative kernel already runs on the device
            return ir.WalkResult.SKIP
        if o.name in ("memref.load", "memref.store", "memref.copy") or o.name.startswith("linalg."):
            found.append(o)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return bool(found)


def _wrap_host_work(func: ir.Operation) -> None:
    """Wrap sequential host-level memory work (scf.for nests, stores of data) in one-iteration
    scf.parallel, so that it runs on the device."""
    err = func.regions[0].blocks[0].arguments[-1]
    todo = []

    def scan(block):
        for o in block.operations:
            o = o.operation
            if o.name == "scf.parallel":
                continue
            if o.name == "scf.if":
                for r in o.regions:
                    for b in r.blocks:
                        scan(b)
                continue
            if o.name == "scf.for" and _memory_ops(o):
                todo.append(o)
            elif o.name == "memref.store" and o.operands[1] != err and \
                    not isinstance(ir.MemRefType(o.operands[1].type).element_type, ir.IndexType):
                todo.append(o)  # (a store of index values fills a shape buffer: host memory)

    scan(func.regions[0].blocks[0])
    for o in todo:
        in_one_thread(o)


def stage_loops(module, options: SPIRVOptions) -> None:
    """Row reductions and matmuls -> cooperative gpu.launch (workgroup memory, barriers); the
    other linalg -> parallel loops (host-level sequential work wrapped), tiled, canonicalized."""
    op = as_op(module)
    interchange_elementwise_loops(op)
    copies_to_kernels(op)
    map_cooperative_kernels(op, reduce_threads=options.reduce_threads, matmul_tile=options.matmul_tile,
                            memory=SPIRV_WORKGROUP)
    parallel_dims_first(op)
    serial_linalg_in_one_thread(op)
    run_pipeline(op, f"{TO_LOOPS},cse", "loops")
    fold_subviews(op)
    for f in _entries(op):
        _wrap_host_work(f)
    loop_budget.chunk_serial_loops(op)
    run_pipeline(op, _loops_pipeline(options), "loops")


_PROCS = {"block": ("block_x", "block_y", "block_z"), "thread": ("thread_x", "thread_y", "thread_z")}


def _map_loop(par: ir.Operation, options: SPIRVOptions) -> None:
    """Trailing dims 0..C step 1 (the intra-tile dims of a tiled, merged loop) -> invocations
    (x fastest, at most 3 and 1024 in all); the other dims -> workgroups; the rest sequential.
    Every such mapping is valid: it only decides which dims run on which processor."""
    rank = list(ir.DenseI32ArrayAttr(par.attributes["operandSegmentSizes"]))[0]
    ops = list(par.operands)
    lbs, ubs, steps = ops[:rank], ops[rank:2 * rank], ops[2 * rank:3 * rank]
    assigned = [None] * rank
    threads, prod = 0, 1
    for i in reversed(range(rank)):
        ub = const_int(ubs[i])
        if (threads < 3 and ub is not None and ub > 0 and const_int(lbs[i]) == 0
                and const_int(steps[i]) == 1 and prod * ub <= 1024):
            assigned[i] = _PROCS["thread"][threads]
            threads += 1
            prod *= ub
        else:
            break
    blocks = 0
    for i in reversed(range(rank)):
        if assigned[i] is None:
            assigned[i] = _PROCS["block"][blocks] if blocks < 3 else "sequential"
            blocks += 1
            if blocks <= 3:
                _cap_workgroups(par, i)
    par.attributes["mapping"] = ir.ArrayAttr.get([ir.Attribute.parse(
        f"#gpu.loop_dim_map<processor = {a}, map = (d0) -> (d0), bound = (d0) -> (d0)>") for a in assigned])


# Workgroups a dispatch may have along each dimension: Vulkan's guaranteed minimum (lavapipe's
# maximum); `_cap_workgroups` keeps every grid within it.
MAX_WORKGROUPS = 65535


def _cap_workgroups(par: ir.Operation, i: int) -> None:
    """Dim `i` of `par` goes to workgroups: at most MAX_WORKGROUPS of them. Unless its trip count is a
    constant within that, its upper bound becomes min(ub, lb + MAX_WORKGROUPS * step) and the body
    runs in `scf.for k = iv to ub step MAX_WORKGROUPS * step` with k in place of iv: each workgroup
    takes every MAX_WORKGROUPS-th tile (an elementwise kernel over more than 2,097,120 elements was
    refused for its grid)."""
    rank = list(ir.DenseI32ArrayAttr(par.attributes["operandSegmentSizes"]))[0]
    lb, ub, step = par.operands[i], par.operands[rank + i], par.operands[2 * rank + i]
    lo, hi, st = const_int(lb), const_int(ub), const_int(step)
    if st is None or st <= 0 or len(par.results):
        return
    if lo is not None and hi is not None and -(-(hi - lo) // st) <= MAX_WORKGROUPS:
        return
    body = par.regions[0].blocks[0]
    iv = body.arguments[i]
    with par.context, par.location:
        with ir.InsertionPoint(par):
            span = const_index(MAX_WORKGROUPS * st)
            far = make_op("arith.addi", [lb.type], [lb, span]).results[0]
            par.operands[rank + i] = make_op("arith.minsi", [ub.type], [ub, far]).results[0]
        ops = [o.operation for o in body.operations]
        with ir.InsertionPoint.at_block_begin(body):
            loop = make_op("scf.for", [], [iv, ub, span], regions=1)
            inner = loop.regions[0].blocks.append(ir.IndexType.get())
            with ir.InsertionPoint(inner):
                end = make_op("scf.yield")
        for o in ops[:-1]:  # (the last: scf.reduce)
            o.move_before(end)
        iv.replace_all_uses_with(inner.arguments[0])
        loop.operands[0] = iv


def stage_map(module, options: SPIRVOptions) -> None:
    """Map the outermost parallel loops onto workgroups/invocations; convert them to gpu.launch."""
    op = as_op(module)
    with op.context, ir.Location.unknown():
        tops = []
        for f in _entries(op):
            def visit(o, f=f):
                if o.name == "scf.parallel":
                    p = o.parent
                    while p is not None and p != f:
                        if p.name == "scf.parallel":
                            return ir.WalkResult.ADVANCE
                        p = p.parent
                    tops.append(o)
                return ir.WalkResult.ADVANCE

            f.walk(visit, ir.WalkOrder.PRE_ORDER)
        for p in tops:
            _map_loop(p, options)
    run_pipeline(op, _TO_GPU, "map")
    leftover = []
    walk(op, lambda o: leftover.append(o) if o.name == "scf.parallel" else None)
    if leftover:
        raise LoweringError("map", "convert-parallel-loops-to-gpu",
                            f"{len(leftover)} parallel loop(s) were not mapped to the GPU")
    drop_unused_workspace(op)


def _is_workgroup(t: ir.Type) -> bool:
    return "Workgroup" in str(ir.MemRefType(t).memory_space)


def _drop_empty_buffer_accesses(accesses: list, launch: ir.Operation) -> list:
    """Accesses of a buffer with a static 0 dim (no element) never run: a load becomes a zero, a
    store goes, a dim is its constant, so the buffer is no kernel argument (SPIR-V declares no
    zero-size array: "failed to legalize operation 'gpu.func'", fuzz seed 2,371,795, the pad of
    an empty convolution result on Vulkan). Returns the other accesses."""
    kept = []
    for o in accesses:
        m = o.operands[1 if o.name == "memref.store" else 0]
        t = ir.MemRefType(m.type)
        if not (0 in [t.shape[d] for d in range(t.rank) if not t.is_dynamic_dim(d)] and defined_outside(m, launch)):
            kept.append(o)
            continue
        with ir.InsertionPoint(o), o.location:
            if o.name == "memref.dim":
                d = const_int(o.operands[1])
                if d is None or t.is_dynamic_dim(d):
                    kept.append(o)
                    continue
                o.results[0].replace_all_uses_with(const_index(t.shape[d]))
            elif o.name == "memref.load":
                et = t.element_type
                zero = ir.FloatAttr.get(et, 0.0) if not isinstance(et, ir.IntegerType) else ir.IntegerAttr.get(et, 0)
                o.results[0].replace_all_uses_with(make_op("arith.constant", [et], [], {"value": zero}).results[0])
        o.erase()
    return kept


def _flatten_launch(launch: ir.Operation) -> None:
    idx = ir.IndexType.get()
    accesses, bad = [], []

    def visit(o):
        if o.name in ("memref.load", "memref.store", "memref.dim"):
            accesses.append(o)
        elif o.name == "memref.alloc" and _is_workgroup(o.results[0].type):
            pass  # a cooperative kernel's workgroup buffer: 1-D, static, stays in the kernel
        elif o.name in ("memref.copy", "memref.subview", "memref.reinterpret_cast", "memref.alloc",
                        "memref.alloca", "memref.collapse_shape", "memref.expand_shape") or o.name.startswith("linalg."):
            bad.append(o)  # (raised after the walk: an exception inside MLIR's callback reaches the
            return ir.WalkResult.INTERRUPT  # caller as a message holding a Python traceback)
        return ir.WalkResult.ADVANCE

    launch.walk(visit, ir.WalkOrder.PRE_ORDER)
    if bad:
        raise LoweringError("flatten", "flatten buffers",
                            f"unsupported op in a GPU kernel: {bad[0].name} at {bad[0].location}")
    accesses = _drop_empty_buffer_accesses(accesses, launch)
    flat: dict = {}  # memref value -> (flat value, dims)

    def flat_of(m: ir.Value):
        for k, v in flat.items():
            if k == m:
                return v
        t = ir.MemRefType(m.type)
        if not identity_layout(t):
            raise LoweringError("flatten", "flatten buffers", f"a kernel buffer has a non-identity layout: {t}")
        if not defined_outside(m, launch):
            raise LoweringError("flatten", "flatten buffers", "a kernel buffer is defined inside the kernel")
        with ir.InsertionPoint(launch), launch.location:
            dims = []
            for d in range(t.rank):
                if t.is_dynamic_dim(d):
                    dims.append(make_op("memref.dim", [idx], [m, const_index(d)]).results[0])
                else:
                    dims.append(t.shape[d])
            if t.rank == 1:
                fv = m
            elif t.rank == 0:
                ft = ir.MemRefType.get([1], t.element_type, memory_space=t.memory_space)
                fv = make_op("memref.expand_shape", [ft], [m], {
                    "reassociation": ir.ArrayAttr.get([]),
                    "static_output_shape": ir.DenseI64ArrayAttr.get([1])}).results[0]
            else:
                size = 1
                for s in t.shape:
                    size = ir.ShapedType.get_dynamic_size() if (t.is_dynamic_dim(0) or size < 0 or s < 0) else size * s
                dyn = any(t.is_dynamic_dim(d) for d in range(t.rank))
                ft = ir.MemRefType.get([ir.ShapedType.get_dynamic_size() if dyn else size], t.element_type,
                                       memory_space=t.memory_space)
                reassoc = ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d)
                                                              for d in range(t.rank)])])
                fv = make_op("memref.collapse_shape", [ft], [m], {"reassociation": reassoc}).results[0]
        flat[m] = (fv, dims)
        return flat[m]

    for o in accesses:
        if o.name == "memref.dim":
            m = o.operands[0]
            d = const_int(o.operands[1])
            if d is None or not defined_outside(m, launch):
                raise LoweringError("flatten", "flatten buffers", "memref.dim of a non-constant dim in a kernel")
            _, dims = flat_of(m)
            v = dims[d]
            if isinstance(v, int):
                with ir.InsertionPoint(o), o.location:
                    v = const_index(v)
            o.results[0].replace_all_uses_with(v)
            o.erase()
            continue
        is_load = o.name == "memref.load"
        m = o.operands[0 if is_load else 1]
        indices = list(o.operands)[1 if is_load else 2:]
        t = ir.MemRefType(m.type)
        if t.rank == 1 and identity_layout(t):
            continue
        if not identity_layout(t):
            with ir.InsertionPoint(o), o.location:
                m, indices = through_views(m, indices, launch)
            t = ir.MemRefType(m.type)
        fv, dims = flat_of(m)
        with ir.InsertionPoint(o), o.location:
            if t.rank == 0:
                lin = const_index(0)
            else:
                lin = indices[0]
                for k in range(1, t.rank):
                    dk = dims[k] if not isinstance(dims[k], int) else const_index(dims[k])
                    lin = make_op("arith.muli", [idx], [lin, dk]).results[0]
                    lin = make_op("arith.addi", [idx], [lin, indices[k]]).results[0]
            if is_load:
                new = make_op("memref.load", [o.results[0].type], [fv, lin])
                o.results[0].replace_all_uses_with(new.results[0])
            else:
                make_op("memref.store", [], [o.operands[0], fv, lin])
        o.erase()


def _expand_erf(op: ir.Operation) -> None:
    """f32 math.erf as the CPU's rational approximation in arith (ops/kernel.py expand_math),
    since convert-gpu-to-spirv has no math.erf (relax.erf, relax.gelu); f32 tanh likewise, as the
    CPU and XLA compute it (lavapipe's Tanh is exp-based: 3e-8 for tanh(1e-30)); GLSL's Exp
    serves. f32 arith.remf as the exact integer fmod (SPIR-V's OpFRem is x - y * trunc(x / y)
    on lavapipe: wrong once the quotient passes 2^24); an f16 remf computes it in f32 (exact: the
    f16 result is representable). f32 sin and cos with an integer Payne-Hanek range reduction past
    2^17 (lavapipe's built-ins return garbage from about 1e8)."""
    from relax_mlir.ops.kernel import expand_math

    f16 = []
    walk(op, lambda o: f16.append(o) if o.name == "arith.remf" and isinstance(o.results[0].type, ir.F16Type) else None)
    for o in f16:
        with op.context, ir.InsertionPoint(o), o.location:
            f32 = ir.F32Type.get()
            a, b = (make_op("arith.extf", [f32], [v]).results[0] for v in o.operands)
            r = make_op("arith.remf", [f32], [a, b]).results[0]
            t = make_op("arith.truncf", [o.results[0].type], [r]).results[0]
        o.results[0].replace_all_uses_with(t)
        o.erase()
    expand_math(op, kinds=("erf", "remf", "sin", "cos", "tanh"))


# Host-program ops that move or describe a buffer without reading its elements as numbers: on a
# bf16 buffer they work on its bytes (runtime/hostprog.py), so only kernels' bf16 is refused.
_HOST_BYTE_OPS = ("memref.dim", "memref.copy", "memref.alloc", "memref.alloca", "memref.dealloc", "memref.cast",
                  "memref.collapse_shape", "memref.expand_shape", "memref.reshape", "memref.view")


def _in_launch(o: ir.Operation) -> bool:
    p = o.parent
    while p is not None and p.name not in ("gpu.launch", "func.func"):
        p = p.parent
    return p is not None and p.name == "gpu.launch"


def _where(o: ir.Operation) -> tuple[bool, str]:
    """Whether `o` is located, and where: its location; where it has none (an op the lowering
    created), the function argument it reads or else the function it is in."""
    loc = str(o.location)
    if loc != "loc(unknown)":
        return True, loc
    fn = o.parent
    while fn is not None and fn.name != "func.func":
        fn = fn.parent
    if fn is None:
        return False, loc
    name = ir.StringAttr(fn.attributes["sym_name"]).value
    for v in o.operands:
        if isinstance(v, ir.BlockArgument) and v.owner.owner == fn:
            return False, f"argument #{v.arg_number} of @{name}"
    return False, f"a host or kernel op of @{name}"


# math ops this Vulkan lowering cannot compile: f32 `powf` on the host (in a kernel it is expanded,
# `_expand_powf`; its SPIR-V lowering puts a NaN literal in the shader, which naga rejects).
_NO_SPIRV_LOWERING = {"math.powf": "relax.power on floats"}


def _refuse_unsupported(op: ir.Operation) -> None:
    """What this Vulkan lowering cannot compile, refused at compile time (a LoweringError, so a
    CompileError) instead of failing in the driver's shader validation at the first call: f64
    (Vulkan's Shader capability has no Float64 here) and the math ops of _NO_SPIRV_LOWERING."""
    found: list[tuple[bool, str]] = []  # (located, message): the first located one is reported

    def check(o):
        if found and found[0][0]:
            return
        for v in list(o.operands) + list(o.results):
            t = v.type
            e = t.element_type if isinstance(t, ir.ShapedType) else t
            if isinstance(e, ir.F64Type):
                msg = "f64 is not supported on Vulkan (no Float64 capability): '{}' at {}"
                break
            if isinstance(e, ir.BF16Type) and not (_in_launch(o) or o.name in _HOST_BYTE_OPS + _BF16_HOST):
                # (inside kernels bf16 is emulated after outlining, constants sunk into them: _emulate_bf16)
                msg = "bf16 is not supported on Vulkan (no bfloat16 type in its shaders): '{}' at {}"
                break
        else:
            if o.name not in _NO_SPIRV_LOWERING:
                return
            msg = "'{}' (" + _NO_SPIRV_LOWERING[o.name] + ") is not supported on Vulkan yet: at {}"
        located, where = _where(o)
        if located or not found:
            found.insert(0, (located, msg.format(o.name, where)))

    # (raised after the walk: an exception inside a walk callback comes back as a RuntimeError)
    walk(op, lambda o: check(o) if o.name.startswith(("math.", "arith.", "memref.", "gpu.launch")) else None)
    if found:
        raise LoweringError("flatten", "check types and ops", found[0][1])
    launches = []
    walk(op, lambda o: launches.append(o) if o.name == "gpu.launch" else None)
    for l in launches:
        if not _touches_i16_memory(l):
            continue
        f16 = []

        def visit(o, f16=f16):
            for v in list(o.operands) + list(o.results):
                if isinstance(_elem_of(v.type), ir.F16Type):
                    f16.append(o)
                    return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        l.walk(visit, ir.WalkOrder.PRE_ORDER)
        if f16:
            raise LoweringError("flatten", "check types and ops",
                                f"i16 buffers and f16 values in one kernel are not supported on Vulkan (i16 is "
                                f"emulated in 32 bits, f16 needs 16-bit storage): '{f16[0].name}' at {l.location}")


# bf16 host ops besides _HOST_BYTE_OPS: constants (sunk into the kernels that read them) and the
# globals of constant tensors (the host program uploads their bits)
_BF16_HOST = ("arith.constant", "memref.global", "memref.get_global")
_BF16_MOVES = ("memref.load", "memref.store", "arith.extf", "arith.truncf", "arith.constant", "arith.select",
               "arith.bitcast")


def _sinkable_constant(c: ir.Operation) -> bool:
    """A finite constant, or any bf16 one (a kernel holds bf16 constants as their bits: an infinity
    is an integer literal there)."""
    return finite_constant(c) or isinstance(_elem_of(c.results[0].type), ir.BF16Type)


def _widen_bool_params(module_op: ir.Operation) -> None:
    """A kernel's i1 scalar parameters become i32 ones (0 or 1) compared with 0 at its entry, and
    each launch widens its i1 operand (arith.extui): a scalar parameter is a storage-buffer
    binding, and a bool is not host-shareable there (naga rejected the shader of a scatter whose
    update is a constant true: jnp.zeros(bool).at[i].set(True))."""
    i1, i32 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(32)
    changed = {}  # (module, kernel) -> the positions of its i1 parameters
    for m in module_op.regions[0].blocks[0].operations:
        if m.operation.name != "gpu.module":
            continue
        mname = ir.StringAttr(m.operation.attributes["sym_name"]).value
        for k in m.operation.regions[0].blocks[0].operations:
            k = k.operation
            if k.name != "gpu.func":
                continue
            entry = k.regions[0].blocks[0]
            params = [i for i, a in enumerate(entry.arguments) if a.type == i1]
            if not params:
                continue
            first = entry.operations[0]
            for i in params:
                a = entry.arguments[i]
                a.set_type(i32)
                with ir.InsertionPoint(first), k.location:
                    zero = make_op("arith.constant", [i32], [], {"value": ir.IntegerAttr.get(i32, 0)}).results[0]
                    b = make_op("arith.cmpi", [i1], [a, zero],
                                {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)}).results[0]
                a.replace_all_uses_except(b, b.owner.operation)
            ft = ir.FunctionType(ir.TypeAttr(k.attributes["function_type"]).value)
            k.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([a.type for a in entry.arguments],
                                                                                ft.results))
            changed[(mname, ir.StringAttr(k.attributes["sym_name"]).value)] = (params, len(entry.arguments))
    if not changed:
        return
    launches = []
    walk(module_op, lambda o: launches.append(o) if o.name == "gpu.launch_func" else None)
    for l in launches:
        key = tuple(ir.SymbolRefAttr(l.attributes["kernel"]).value)
        if key not in changed:
            continue
        params, nargs = changed[key]
        first = len(l.operands) - nargs  # (the kernel's operands come last)
        for i in params:
            with ir.InsertionPoint(l), l.location:
                l.operands[first + i] = make_op("arith.extui", [i32], [l.operands[first + i]]).results[0]


def _launch_bf16_as_i16(op: ir.Operation, changed: dict) -> None:
    """The host's bf16 buffers passed to a kernel whose parameters became i16 buffers: the same
    bytes, cast (builtin.unrealized_conversion_cast, an alias in the host program)."""
    launches = []
    walk(op, lambda o: launches.append(o) if o.name == "gpu.launch_func" else None)
    for l in launches:
        key = tuple(ir.SymbolRefAttr(l.attributes["kernel"]).value)  # (module, kernel)
        if key not in changed:
            continue
        params, nargs = changed[key]
        first = len(l.operands) - nargs  # (the kernel's operands come last)
        for i in params:
            v = l.operands[first + i]
            t = ir.MemRefType(v.type)
            with ir.InsertionPoint(l), l.location:
                cast = make_op("builtin.unrealized_conversion_cast",
                               [ir.MemRefType.get(t.shape, ir.IntegerType.get_signless(16), t.layout, t.memory_space)],
                               [v])
            l.operands[first + i] = cast.results[0]


def _emulate_bf16(kernel: ir.Operation) -> tuple[list[int], int] | None:
    """bf16 in an outlined kernel (no bfloat16 in Vulkan shaders; MLIR's SPIR-V type conversion
    would silently make bf16 buffers f32 ones): every op on bf16 values computes in f32 and rounds
    its result to bf16 (extf / truncf around it, as the CPU computes bf16); then bf16 values are
    their bits in i16: buffers i16 (MLIR emulates i16 storage in 32-bit words), a load's bits
    widened to f32 by a shift, f32 rounded to bf16 bits to nearest even (NaN kept quiet) for a
    store, constants and selects on the bits. A bf16 value anything else carries (a loop's) is
    refused by name, and so is a kernel that also computes in f16 (16-bit storage and i16
    emulation exclude each other). Returns (the parameters that became i16 buffers, the number of
    parameters), or None where the kernel has no bf16."""
    bf16, f32 = ir.BF16Type.get(), ir.F32Type.get()
    i1, i16, i32, i64 = (ir.IntegerType.get_signless(w) for w in (1, 16, 32, 64))

    def is_bf16(t):
        return isinstance(_elem_of(t), ir.BF16Type)

    body = kernel.regions[0].blocks[0]
    ops: list = []
    walk(kernel, lambda o: ops.append(o) if o is not kernel else None)
    if not any(is_bf16(v.type) for o in ops for v in list(o.operands) + list(o.results)) \
            and not any(is_bf16(a.type) for a in body.arguments):
        return None

    def refuse(o, why):
        raise LoweringError("flatten", "emulate bf16", f"bf16 {why} is not supported on Vulkan yet: '{o.name}' at "
                                                      f"{_where(o)[1]}")
    for o in ops:
        if any(isinstance(_elem_of(v.type), ir.F16Type) for v in list(o.operands) + list(o.results)):
            refuse(o, "and f16 in one kernel (i16 storage is emulated in 32 bits, f16 needs 16-bit storage)")
    # 1. ops on bf16 values compute in f32, their results rounded to bf16
    for o in ops:
        if o.name in _BF16_MOVES or not any(is_bf16(v.type) for v in list(o.operands) + list(o.results)):
            continue
        if len(o.regions) or any(isinstance(v.type, ir.ShapedType) for v in list(o.operands) + list(o.results)):
            refuse(o, "in an op with regions or shaped values")
        with ir.InsertionPoint(o), o.location:
            args = [make_op("arith.extf", [f32], [v]).results[0] if is_bf16(v.type) else v for v in o.operands]
            attrs = {o.attributes[i].name: o.attributes[i].attr for i in range(len(o.attributes))}
            new = make_op(o.name, [f32 if is_bf16(r.type) else r.type for r in o.results], args, attrs)
            for r, nr in zip(o.results, new.results):
                r.replace_all_uses_with(make_op("arith.truncf", [bf16], [nr]).results[0] if is_bf16(r.type) else nr)
        o.erase()
    # 2. bf16 values as their bits
    params = []
    for i, a in enumerate(body.arguments):
        if is_bf16(a.type):
            if not isinstance(a.type, ir.MemRefType):
                raise LoweringError("flatten", "emulate bf16", f"a bf16 scalar kernel parameter (#{i}) is not "
                                                                f"supported on Vulkan yet: at {_where(kernel)[1]}")
            t = ir.MemRefType(a.type)
            a.set_type(ir.MemRefType.get(t.shape, i16, t.layout, t.memory_space))
            params.append(i)
    ft = ir.FunctionType(ir.TypeAttr(kernel.attributes["function_type"]).value)
    kernel.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([a.type for a in body.arguments],
                                                                               ft.results))
    ops = []
    walk(kernel, lambda o: ops.append(o) if o is not kernel else None)
    bits: dict = {}  # bf16 value -> its i16 bits

    def c(t, v):
        return make_op("arith.constant", [t], [], {"value": ir.IntegerAttr.get(t, v)}).results[0]

    def bits_of(o, v):
        for k, b in bits.items():
            if k == v:
                return b
        refuse(o, "carried by an op other than a load, a conversion, a constant or a select")

    dead = []
    for o in ops:
        if not any(is_bf16(v.type) for v in list(o.operands) + list(o.results)) and o.name != "memref.load":
            continue
        with ir.InsertionPoint(o), o.location:
            if o.name == "memref.load":
                if not is_bf16(o.results[0].type):
                    continue
                bits[o.results[0]] = make_op("memref.load", [i16], list(o.operands)).results[0]
            elif o.name == "memref.store":
                make_op("memref.store", [], [bits_of(o, o.operands[0])] + list(o.operands)[1:])
            elif o.name == "arith.constant":  # a bf16 value is an f32 whose low 16 bits are 0
                if not isinstance(o.attributes["value"], ir.FloatAttr):
                    refuse(o, "constant of a shaped type")
                raw = struct.unpack("<I", struct.pack("<f", ir.FloatAttr(o.attributes["value"]).value))[0] >> 16
                bits[o.results[0]] = c(i16, raw - (1 << 16) if raw >= 1 << 15 else raw)
            elif o.name == "arith.select":
                cond = o.operands[0]
                bits[o.results[0]] = make_op("arith.select", [i16], [cond, bits_of(o, o.operands[1]),
                                                                     bits_of(o, o.operands[2])]).results[0]
            elif o.name == "arith.bitcast":  # bf16 <-> a 16-bit integer: the bits themselves
                if is_bf16(o.results[0].type):
                    x = o.operands[0]
                    if not isinstance(x.type, ir.IntegerType) or ir.IntegerType(x.type).width != 16:
                        refuse(o, "bitcast from a type other than a 16-bit integer")
                    bits[o.results[0]] = x
                else:
                    o.results[0].replace_all_uses_with(bits_of(o, o.operands[0]))
            elif o.name == "arith.extf":  # the bits in the high half of an f32
                w = make_op("arith.extui", [i32], [bits_of(o, o.operands[0])]).results[0]
                w = make_op("arith.shli", [i32], [w, c(i32, 16)]).results[0]
                o.results[0].replace_all_uses_with(make_op("arith.bitcast", [f32], [w]).results[0])
            elif o.name == "arith.truncf":  # round to nearest even; a NaN stays a (quiet) NaN
                x = o.operands[0]
                u = make_op("arith.bitcast", [i32], [x]).results[0]
                hi = make_op("arith.shrui", [i32], [u, c(i32, 16)]).results[0]
                odd = make_op("arith.andi", [i32], [hi, c(i32, 1)]).results[0]
                r = make_op("arith.addi", [i32], [u, make_op("arith.addi", [i32], [odd, c(i32, 0x7FFF)]).results[0]]).results[0]
                r = make_op("arith.shrui", [i32], [r, c(i32, 16)]).results[0]
                nan = make_op("arith.cmpf", [i1], [x, x], {"predicate": ir.IntegerAttr.get(i64, 14)}).results[0]  # uno
                q = make_op("arith.ori", [i32], [hi, c(i32, 0x40)]).results[0]
                r = make_op("arith.select", [i32], [nan, q, r]).results[0]
                bits[o.results[0]] = make_op("arith.trunci", [i16], [r]).results[0]
            else:
                refuse(o, "used by an op other than a store, a conversion or a select")
        dead.append(o)
    for o in reversed(dead):
        o.erase()
    _expand_copysign(kernel)  # (a bf16 copysign, skipped before, is an f32 one now)
    left = []
    walk(kernel, lambda o: left.append(o) if any(is_bf16(v.type) for v in list(o.operands) + list(o.results)) else None)
    if left:
        refuse(left[0], "left in the kernel")
    return params, len(body.arguments)


def _expand_atan2_cbrt(op: ir.Operation) -> None:
    """math.atan2 and math.cbrt, which convert-gpu-to-spirv does not convert, in arith and
    GLSL-convertible math (f32; f16 through f32). atan2(y, x): a = atan(min(|x|, |y|) / max(|x|,
    |y|)) by Cephes' atanf (a range split at tan(pi/8) and a degree-9 odd polynomial, about 1 ulp),
    pi/2 - a where |y| > |x|, pi - a where x's sign bit is set, with y's sign: IEEE's zeros and
    infinities (0/0 is 0, inf/inf is 1; a NaN operand gives NaN). cbrt(x): exp(log(|x|) / 3) and a
    Newton step (the driver's exp / log are not correctly rounded), x's sign; 0, inf, NaN as they are."""
    todo = []
    walk(op, lambda o: todo.append(o) if o.name in ("math.atan2", "math.cbrt") else None)
    for o in todo:
        t = o.results[0].type
        if not isinstance(t, (ir.F32Type, ir.F16Type)):
            continue  # refused elsewhere (f64)
        with ir.InsertionPoint(o), o.location:
            f32, i1 = ir.F32Type.get(), ir.IntegerType.get_signless(1)
            i64 = ir.IntegerType.get_signless(64)

            def c(v):
                return make_op("arith.constant", [f32], [], {"value": ir.FloatAttr.get(f32, v)}).results[0]

            def b(name, *xs):
                return make_op(name, [f32], list(xs)).results[0]

            def cmp(pred, a, bb):  # arith.cmpf predicates: 1 oeq, 2 ogt, 4 olt
                return make_op("arith.cmpf", [i1], [a, bb], {"predicate": ir.IntegerAttr.get(i64, pred)}).results[0]

            def sel(p, a, bb):
                return make_op("arith.select", [f32], [p, a, bb]).results[0]

            ops = [v if isinstance(t, ir.F32Type) else make_op("arith.extf", [f32], [v]).results[0] for v in o.operands]
            big = c(3.4028234663852886e38)  # (no infinite literal: naga rejects them)
            if o.name == "math.atan2":
                y, x = ops
                ax, ay = b("math.absf", x), b("math.absf", y)
                lo, hi = b("arith.minimumf", ax, ay), b("arith.maximumf", ax, ay)
                q = b("arith.divf", lo, hi)
                q = sel(cmp(1, hi, c(0.0)), c(0.0), q)  # 0 / 0
                both_inf = make_op("arith.andi", [i1], [cmp(2, ax, big), cmp(2, ay, big)]).results[0]
                q = sel(both_inf, c(1.0), q)
                split = cmp(2, q, c(0.41421356237309503))
                u = sel(split, b("arith.divf", b("arith.subf", q, c(1.0)), b("arith.addf", q, c(1.0))), q)
                y0 = sel(split, c(0.7853981633974483), c(0.0))
                z = b("arith.mulf", u, u)
                pz = c(8.05374449538e-2)
                for k in (-1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1):
                    pz = b("arith.addf", b("arith.mulf", pz, z), c(k))
                a = b("arith.addf", y0, b("arith.addf", b("arith.mulf", b("arith.mulf", pz, z), u), u))
                a = sel(cmp(2, ay, ax), b("arith.subf", c(1.5707963267948966), a), a)
                xbits = make_op("arith.bitcast", [ir.IntegerType.get_signless(32)], [x]).results[0]
                zero = make_op("arith.constant", [xbits.type], [], {"value": ir.IntegerAttr.get(xbits.type, 0)}).results[0]
                xneg = make_op("arith.cmpi", [i1], [xbits, zero], {"predicate": ir.IntegerAttr.get(i64, 2)}).results[0]
                a = sel(xneg, b("arith.subf", c(3.141592653589793), a), a)
                new = b("math.copysign", a, y)
            else:
                (x,) = ops
                ax = b("math.absf", x)
                r = b("math.exp", b("arith.mulf", b("math.log", ax), c(1.0 / 3.0)))
                nr = b("arith.mulf", b("arith.addf", b("arith.addf", r, r),
                                       b("arith.divf", ax, b("arith.mulf", r, r))), c(1.0 / 3.0))
                ok = make_op("arith.andi", [i1], [cmp(2, r, c(0.0)), cmp(4, r, big)]).results[0]
                new = b("math.copysign", sel(ok, nr, ax), x)  # (0, inf and NaN: |x| itself)
            if not isinstance(t, ir.F32Type):
                new = make_op("arith.truncf", [t], [new]).results[0]
        o.results[0].replace_all_uses_with(new)
        o.erase()


def _expand_powf(op: ir.Operation) -> None:
    """f32 / f16 / bf16 `math.powf` in the kernels as exp(y * log|x|) (in f32) with C's (and StableHLO's) special
    cases by selects: pow(x, 0) = 1 and pow(1, y) = 1 (even for a NaN), a negative x to an integer
    power takes the sign of x^odd (-0 too), a negative finite x to a non-integer power is NaN,
    |x| = 1 to an infinite power is 1, zeros and infinities (of x or y) by their rules.
    y = 1, 2, -1 are exact (x, x*x, 1/x). MLIR's SPIR-V lowering of powf puts a NaN literal in the
    shader, which naga rejects, so the op was refused (optax's Adam bias correction, Gemma's RoPE).
    Precision: the driver's log / exp (a few ulps), the error of y log|x| growing with it: within
    1e-5 relative for results within f32's range (no exp2 lowering in MLIR's math-to-SPIR-V)."""
    todo = []
    walk(op, lambda o: todo.append(o) if o.name == "math.powf" and _in_launch(o) else None)
    f32, i1, i32, i64 = (ir.F32Type.get(), ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(32),
                         ir.IntegerType.get_signless(64))

    def c(v):
        return make_op("arith.constant", [f32], [], {"value": ir.FloatAttr.get(f32, v)}).results[0]

    def b(name, *xs):
        return make_op(name, [f32], list(xs)).results[0]

    def cmp(pred, a, bb):  # arith.cmpf predicates: 1 oeq, 2 ogt, 4 olt, 6 one
        return make_op("arith.cmpf", [i1], [a, bb], {"predicate": ir.IntegerAttr.get(i64, pred)}).results[0]

    def sel(p, a, bb):
        return make_op("arith.select", [a.type], [p, a, bb]).results[0]

    def both(p, q):
        return make_op("arith.andi", [i1], [p, q]).results[0]

    for o in todo:
        t = o.results[0].type
        if not isinstance(t, (ir.F32Type, ir.F16Type, ir.BF16Type)):
            continue  # refused elsewhere (f64)
        with ir.InsertionPoint(o), o.location:
            x, y = (v if isinstance(t, ir.F32Type) else make_op("arith.extf", [f32], [v]).results[0]
                    for v in o.operands)
            ax = b("math.absf", x)
            inf = make_op("arith.bitcast", [f32], [make_op("arith.constant", [i32], [], {
                "value": ir.IntegerAttr.get(i32, 0x7F800000)}).results[0]]).results[0]  # (no inf literal)
            up = cmp(2, y, c(0.0))
            # zeros and infinities by selects (the driver rewrites exp(c log|x|) for a constant c,
            # and its rewrite gave 0 for pow(0, -0.5)); the rest through exp and log
            r = b("math.exp", b("arith.mulf", y, b("math.log", ax)))
            r = sel(cmp(1, b("math.absf", y), inf), sel(make_op("arith.xori", [i1], [cmp(2, ax, c(1.0)), up]).results[0],
                                                          c(0.0), inf), r)
            r = sel(cmp(1, ax, inf), sel(up, inf, c(0.0)), r)
            r = sel(cmp(1, ax, c(0.0)), sel(up, c(0.0), inf), r)
            whole = cmp(1, b("math.floor", y), y)  # (true for infinities too: even)
            half = b("arith.mulf", y, c(0.5))
            odd = both(both(whole, cmp(6, b("math.floor", half), half)), cmp(4, b("math.absf", y), c(16777216.0)))
            xbits = make_op("arith.bitcast", [i32], [x]).results[0]
            zero_i = make_op("arith.constant", [i32], [], {"value": ir.IntegerAttr.get(i32, 0)}).results[0]
            xneg = make_op("arith.cmpi", [i1], [xbits, zero_i], {"predicate": ir.IntegerAttr.get(i64, 2)}).results[0]
            r = sel(both(xneg, odd), b("arith.negf", r), r)
            nan_bits = make_op("arith.constant", [i32], [], {"value": ir.IntegerAttr.get(i32, 0x7FC00000)}).results[0]
            nan = make_op("arith.bitcast", [f32], [nan_bits]).results[0]  # (no NaN literal: naga rejects them)
            finite_neg = both(cmp(4, x, c(0.0)), cmp(5, ax, c(3.4028234663852886e38)))  # olt 0, ole max
            r = sel(both(finite_neg, make_op("arith.xori", [i1], [whole, make_op(
                "arith.constant", [i1], [], {"value": ir.IntegerAttr.get(i1, 1)}).results[0]]).results[0]), nan, r)
            r = sel(both(cmp(1, ax, c(1.0)), cmp(2, b("math.absf", y), c(3.4028234663852886e38))), c(1.0), r)
            # a NaN operand gives NaN (Mesa's rewrite of exp(c log|x|) for a constant c lost it)
            r = sel(cmp(14, x, x), x, sel(cmp(14, y, y), y, r))  # uno: 14
            r = sel(cmp(1, y, c(1.0)), x, r)
            r = sel(cmp(1, y, c(2.0)), b("arith.mulf", x, x), r)
            r = sel(cmp(1, y, c(-1.0)), b("arith.divf", c(1.0), x), r)
            r = sel(cmp(1, x, c(1.0)), c(1.0), r)
            new = sel(cmp(1, y, c(0.0)), c(1.0), r)
            if not isinstance(t, ir.F32Type):
                new = make_op("arith.truncf", [t], [new]).results[0]
        o.results[0].replace_all_uses_with(new)
        o.erase()


def _expand_copysign(op: ir.Operation) -> None:
    """math.copysign (no SPIR-V lowering) as select(sign bit of y, -|x|, |x|), f16 via f32."""
    todo = []
    walk(op, lambda o: todo.append(o) if o.name == "math.copysign" else None)
    for o in todo:
        t = o.results[0].type
        if not isinstance(t, (ir.F32Type, ir.F16Type)):
            continue  # refused elsewhere (f64) or left to the conversion
        with ir.InsertionPoint(o), o.location:
            x, y = o.operands
            f32, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)
            y32 = y if isinstance(t, ir.F32Type) else make_op("arith.extf", [f32], [y]).results[0]
            bits = make_op("arith.bitcast", [i32], [y32]).results[0]
            zero = make_op("arith.constant", [i32], [], {"value": ir.IntegerAttr.get(i32, 0)}).results[0]
            neg = make_op("arith.cmpi", [ir.IntegerType.get_signless(1)], [bits, zero],
                          {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 2)}).results[0]
            ax = make_op("math.absf", [t], [x]).results[0]
            nax = make_op("arith.negf", [t], [ax]).results[0]
            new = make_op("arith.select", [t], [neg, nax, ax]).results[0]
        o.results[0].replace_all_uses_with(new)
        o.erase()


def _series_near_zero(op: ir.Operation) -> None:
    """log1p and expm1 of small |x| as series, on Vulkan. Their compensated formulas (log1p: log(u)
    * x / (u - 1) for u = 1 + x; expm1: (u - 1) * x / log(u) for u = exp(x), jax's) need log(u)
    accurate relative to its value near u = 1, and Vulkan allows log an absolute error of 2^-21
    there (lavapipe: log1p(-3e-7) 3% off). For |x| < 0.5: log1p(x) = 2 atanh(s), s = x / (2 + x),
    as 2 s (1 + s^2/3 + ... + s^16/17); expm1(x) = x + x^2/2! + ... + x^10/10!. Found by the
    formulas' ops (`ops/elementwise.py` Log1pOp, the importer's expm1) inside one kernel."""
    f32 = ir.F32Type.get()
    i1 = ir.IntegerType.get_signless(1)
    pred = lambda v: ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)  # noqa: E731

    def owner(v, name):
        o = v.owner if isinstance(v, ir.OpResult) else None
        return o if o is not None and o.name == name else None

    def is_one(v):
        o = owner(v, "arith.constant")
        v = o.attributes["value"] if o is not None else None
        return isinstance(v, ir.FloatAttr) and ir.FloatAttr(v).value == 1.0

    def other(add):  # the operand of `add` that is not the constant 1
        a, b = add.operands
        return b if is_one(a) else a if is_one(b) else None

    found = []

    def visit(k):
        if k.name != "arith.mulf" or not isinstance(k.results[0].type, (ir.F32Type, ir.F16Type)):
            return
        for l, q in (k.operands, reversed(list(k.operands))):
            div = owner(q, "arith.divf")
            if div is None:
                continue
            x, den = div.operands
            log = owner(l, "math.log")
            sub = owner(den, "arith.subf")
            if log is not None and sub is not None and is_one(sub.operands[1]):  # log(u) * (x / (u - 1))
                add = owner(log.operands[0], "arith.addf")
                if add is not None and sub.operands[0] == log.operands[0] and other(add) == x:
                    found.append((k, x, "log1p"))
                    return
            sub = owner(l, "arith.subf")
            log = owner(den, "math.log")
            if sub is not None and log is not None and is_one(sub.operands[1]):  # (u - 1) * (x / log(u))
                exp = owner(log.operands[0], "math.exp")
                if exp is not None and sub.operands[0] == log.operands[0] and exp.operands[0] == x:
                    found.append((k, x, "expm1"))
                    return
    walk(op, visit)
    for k, x, kind in found:
        t = k.results[0].type
        with ir.InsertionPoint.after(k), k.location:
            def c(v):
                return make_op("arith.constant", [f32], [], {"value": ir.FloatAttr.get(f32, v)}).results[0]

            def b(name, *xs):
                return make_op(name, [f32], list(xs)).results[0]
            x32 = x if isinstance(t, ir.F32Type) else make_op("arith.extf", [f32], [x]).results[0]
            if kind == "log1p":
                sv = b("arith.divf", x32, b("arith.addf", c(2.0), x32))
                w = b("arith.mulf", sv, sv)
                poly = c(1.0 / 17)
                for d in (15, 13, 11, 9, 7, 5, 3, 1):
                    poly = b("arith.addf", b("arith.mulf", poly, w), c(1.0 / d))
                series = b("arith.mulf", b("arith.mulf", c(2.0), sv), poly)
            else:
                poly = c(1.0 / math.factorial(10))
                for d in range(9, 0, -1):
                    poly = b("arith.addf", b("arith.mulf", poly, x32), c(1.0 / math.factorial(d)))
                series = b("arith.mulf", x32, poly)
            if not isinstance(t, ir.F32Type):
                series = make_op("arith.truncf", [t], [series]).results[0]
            small = make_op("arith.cmpf", [i1], [make_op("math.absf", [f32], [x32]).results[0], c(0.5)],
                            {"predicate": pred(4)}).results[0]  # olt: false for NaN
            new = make_op("arith.select", [t], [small, series, k.results[0]])
        k.results[0].replace_all_uses_with(new.results[0])
        new.operands[2] = k.results[0]


def _ieee_min_max(op: ir.Operation) -> None:
    """f32 / f16 / bf16 `arith.maximumf` / `minimumf` with IEEE 754's order of zeros (-0.0 below +0.0, as
    StableHLO and jax): the SPIR-V lowering (GLSL FMax / FMin with NaN selects) and WGSL's max / min
    leave the sign of equal zeros unspecified (lavapipe returned the first operand: a max
    reduction of {-0.0, +0.0} was -0.0). Equal operands pick by the sign bit of `a`."""
    todo = []
    walk(op, lambda o: todo.append(o) if o.name in ("arith.maximumf", "arith.minimumf") else None)
    i1, i32, f32 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(32), ir.F32Type.get()
    for o in todo:
        t = o.results[0].type
        if not isinstance(t, (ir.F32Type, ir.F16Type, ir.BF16Type)):
            continue
        with ir.InsertionPoint.after(o), o.location:
            a, b = o.operands
            a32 = a if isinstance(t, ir.F32Type) else make_op("arith.extf", [f32], [a]).results[0]
            bits = make_op("arith.bitcast", [i32], [a32]).results[0]
            zero = make_op("arith.constant", [i32], [], {"value": ir.IntegerAttr.get(i32, 0)}).results[0]
            neg = make_op("arith.cmpi", [i1], [bits, zero],
                          {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 2)}).results[0]
            eq = make_op("arith.cmpf", [i1], [a, b],
                         {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)}).results[0]
            pick = [b, a] if o.name == "arith.maximumf" else [a, b]
            tie = make_op("arith.select", [t], [neg, *pick]).results[0]
            new = make_op("arith.select", [t], [eq, tie, o.results[0]])
        o.results[0].replace_all_uses_with(new.results[0])
        new.operands[2] = o.results[0]


def _zero_constant(v: ir.Value) -> int | None:
    """0 or 1, the sign bit of `v` when it is a float constant zero (scalar or splat); else None."""
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return None
    a = owner.operation.attributes["value"]
    try:
        if isinstance(a, ir.DenseFPElementsAttr) and a.is_splat:
            a = a.get_splat_value()
        x = ir.FloatAttr(a).value if isinstance(a, ir.FloatAttr) else None
    except (TypeError, ValueError):
        return None
    return None if x is None or x != 0.0 else int(math.copysign(1.0, x) < 0)


def _same_negated(a: ir.Value, b: ir.Value) -> bool:
    """`b` is `arith.negf a`."""
    owner = b.owner
    return not isinstance(owner, ir.Block) and owner.operation.name == "arith.negf" and owner.operation.operands[0] == a


def _exact_zero_identities(op: ir.Operation) -> None:
    """In the kernels, `x * ±0`, `x - x`, `x + -x` and `+0 - x` computed on the bits. Mesa (lavapipe)
    applies its inexact rewrites to every float op it gets through naga, which drops the
    `NoContraction` decoration that would mark them exact: it folded `x * 0` and `x - x` to +0.0
    where StableHLO gives NaN for an infinite or NaN x and -0.0 for a negative x, and `0 - x` to
    `-x` (-0.0 for x = +0.0). The integer forms below hold no float op for it to rewrite."""
    todo = []

    def visit(o):
        if o.name == "func.func":
            return ir.WalkResult.SKIP  # host code (the kernels are gpu.func in gpu.module)
        if o.name in ("arith.mulf", "arith.subf", "arith.addf"):
            todo.append(o)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    i1, i32, f32 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(32), ir.F32Type.get()
    i64 = ir.IntegerType.get_signless(64)

    def c32(v: int) -> ir.Value:
        v &= 0xFFFFFFFF
        return make_op("arith.constant", [i32], [], {"value": ir.IntegerAttr.get(i32, v - (1 << 32) if v >> 31 else v)}).results[0]

    def binop(name, a, b):
        return make_op(f"arith.{name}", [a.type], [a, b]).results[0]

    def cmp(pred: int, a, b):
        return make_op("arith.cmpi", [i1], [a, b], {"predicate": ir.IntegerAttr.get(i64, pred)}).results[0]

    def finite(bits):  # |x| below the infinity's bits (ult: 6)
        return cmp(6, binop("andi", bits, c32(0x7FFFFFFF)), c32(0x7F800000))

    for o in todo:
        t = o.results[0].type
        if not isinstance(t, (ir.F32Type, ir.F16Type, ir.BF16Type)):
            continue
        a, b = o.operands
        form = None
        if o.name == "arith.mulf":
            for x, c in ((a, b), (b, a)):
                sign = _zero_constant(c)
                if sign is not None:
                    form = ("times_zero", x, sign)
                    break
        elif o.name == "arith.subf" and a == b or o.name == "arith.addf" and (_same_negated(a, b) or _same_negated(b, a)):
            form = ("minus_self", a if o.name == "arith.subf" or _same_negated(a, b) else b, 0)
        elif o.name == "arith.subf" and _zero_constant(a) == 0:
            form = ("zero_minus", b, 0)
        if form is None:
            continue
        kind, x, sign = form
        with ir.InsertionPoint(o), o.location:
            x32 = x if isinstance(t, ir.F32Type) else make_op("arith.extf", [f32], [x]).results[0]
            bits = make_op("arith.bitcast", [i32], [x32]).results[0]
            nan = c32(0x7FC00000)
            if kind == "times_zero":  # ±0 with the product's sign, NaN for inf / NaN
                zero = binop("xori", binop("andi", bits, c32(0x80000000)), c32(sign << 31))
                out = make_op("arith.select", [i32], [finite(bits), zero, nan]).results[0]
            elif kind == "minus_self":  # +0, NaN for inf / NaN
                out = make_op("arith.select", [i32], [finite(bits), c32(0), nan]).results[0]
            else:  # the sign bit flipped, but +0 - +0 = +0 (eq: 0)
                out = make_op("arith.select", [i32], [cmp(0, bits, c32(0)), bits,
                                                      binop("xori", bits, c32(0x80000000))]).results[0]
            res = make_op("arith.bitcast", [f32], [out]).results[0]
            if not isinstance(t, ir.F32Type):
                res = make_op("arith.truncf", [t], [res]).results[0]
        o.results[0].replace_all_uses_with(res)
        o.erase()


def _f16_bitcasts(op: ir.Operation) -> None:
    """f16 <-> i16 `arith.bitcast` in the kernels as integer arithmetic on the f32 of the value.
    MLIR emulates i16 in 32 bits on Vulkan (no Int16 capability), so a 16-bit bitcast became an
    f16 -> i32 spirv.Bitcast that fails to verify (`jnp.signbit` of f16, `bitcast_convert_type`);
    naga cannot cast a `vec2<f16>` to a 32-bit word either. Every f16 is exact in f32, so its
    fields move between the formats exactly (subnormals through value * 2^24). A NaN keeps its sign but
    not its payload bits: lavapipe's f16 <-> f32 conversions quiet a signaling NaN and an f32 -> f16
    conversion gives the canonical NaN."""
    todo = []
    walk(op, lambda o: todo.append(o) if o.name == "arith.bitcast" and _in_launch(o) else None)
    f16, f32 = ir.F16Type.get(), ir.F32Type.get()
    i1, i16, i32, i64 = (ir.IntegerType.get_signless(w) for w in (1, 16, 32, 64))

    def c(v: int) -> ir.Value:
        return make_op("arith.constant", [i32], [], {"value": ir.IntegerAttr.get(i32, v)}).results[0]

    def b(name, x, y):
        return make_op(f"arith.{name}", [x.type], [x, y]).results[0]

    def cmp(pred: int, x, y):
        return make_op("arith.cmpi", [i1], [x, y], {"predicate": ir.IntegerAttr.get(i64, pred)}).results[0]

    def sel(cond, x, y):
        return make_op("arith.select", [x.type], [cond, x, y]).results[0]

    def fconst(v: float):
        return make_op("arith.constant", [f32], [], {"value": ir.FloatAttr.get(f32, v)}).results[0]

    for o in todo:
        src, dst = o.operands[0].type, o.results[0].type
        with ir.InsertionPoint(o), o.location:
            if isinstance(src, ir.F16Type) and _is_int(dst, (16,)):
                x = make_op("arith.extf", [f32], [o.operands[0]]).results[0]
                w = make_op("arith.bitcast", [i32], [x]).results[0]
                sign = b("andi", b("shrui", w, c(16)), c(0x8000))
                e = b("andi", b("shrui", w, c(23)), c(0xFF))
                top = b("shrui", b("andi", w, c(0x7FFFFF)), c(13))  # the f16 mantissa of a normal / inf / NaN
                normal = b("ori", b("shli", b("subi", e, c(112)), c(10)), top)
                special = b("ori", c(0x7C00), top)
                mag = make_op("arith.bitcast", [f32], [b("andi", w, c(0x7FFFFFFF))]).results[0]
                scaled = make_op("arith.mulf", [f32], [mag, fconst(16777216.0)]).results[0]  # 2^24: exact
                small = make_op("arith.fptoui", [i32], [scaled]).results[0]
                bits = sel(cmp(0, e, c(255)), special, sel(cmp(9, e, c(113)), normal, small))  # eq: 0, uge: 9
                new = make_op("arith.trunci", [i16], [b("ori", sign, bits)]).results[0]
            elif _is_int(src, (16,)) and isinstance(dst, ir.F16Type):
                h = b("andi", make_op("arith.extui", [i32], [o.operands[0]]).results[0], c(0xFFFF))
                sign = b("shli", b("andi", h, c(0x8000)), c(16))
                e = b("andi", b("shrui", h, c(10)), c(0x1F))
                m = b("andi", h, c(0x3FF))
                normal = b("ori", b("shli", b("addi", e, c(112)), c(23)), b("shli", m, c(13)))
                special = b("ori", c(0x7F800000), b("shli", m, c(13)))
                value = make_op("arith.mulf", [f32], [make_op("arith.uitofp", [f32], [m]).results[0],
                                                      fconst(2.0 ** -24)]).results[0]
                small = make_op("arith.bitcast", [i32], [value]).results[0]
                bits = sel(cmp(0, e, c(31)), special, sel(cmp(0, e, c(0)), small, normal))
                x = make_op("arith.bitcast", [f32], [b("ori", sign, bits)]).results[0]
                new = make_op("arith.truncf", [f16], [x]).results[0]
            else:
                continue
        o.results[0].replace_all_uses_with(new)
        o.erase()


def _elem_of(t: ir.Type) -> ir.Type:
    return ir.ShapedType(t).element_type if isinstance(t, ir.ShapedType) else t


def _is_int(t: ir.Type, widths) -> bool:
    return isinstance(t, ir.IntegerType) and ir.IntegerType(t).width in widths


def _touches_i16_memory(op: ir.Operation) -> bool:
    found = []

    def visit(o):
        for v in list(o.operands) + list(o.results):
            if isinstance(v.type, ir.MemRefType) and _is_int(_elem_of(v.type), (16,)):
                found.append(o)
                return ir.WalkResult.INTERRUPT
        if o.name == "gpu.func":
            ft = ir.FunctionType(ir.TypeAttr(o.attributes["function_type"]).value)
            if any(isinstance(t, ir.MemRefType) and _is_int(_elem_of(t), (16,)) for t in ft.inputs):
                found.append(o)
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return bool(found)


# arith ops whose result on i8 / i16 depends on the bits above the width in MLIR's 32-bit
# emulation of those types (or which the emulation does not implement: divui, remui)
_WIDEN_SIGNED = {"arith.divsi", "arith.remsi", "arith.maxsi", "arith.minsi", "arith.shrsi", "arith.sitofp",
                 "arith.ceildivsi", "arith.floordivsi"}
_WIDEN_UNSIGNED = {"arith.divui", "arith.remui", "arith.maxui", "arith.minui", "arith.shrui", "arith.uitofp",
                   "arith.ceildivui"}
_SIGNED_PRED = {2, 3, 4, 5}  # cmpi slt, sle, sgt, sge (eq 0, ne 1, ult 6, ule 7, ugt 8, uge 9)


def _widen_narrow_ints(op: ir.Operation) -> None:
    """In the GPU kernels, the i8 / i16 ops whose value depends on the sign or on the bits above
    the width compute on i32 operands (sign- or zero-extended as the op reads them) and truncate
    back: MLIR emulates i8 / i16 in 32 bits (no Int8 / Int16 capability) and keeps wrapped
    results unnormalized (127 + 1 compared as 128), and has no emulation of divui / remui."""
    todo = []

    def visit(o):
        if o.name == "gpu.launch":
            def inner(k):
                if (k.name in _WIDEN_SIGNED or k.name in _WIDEN_UNSIGNED or k.name == "arith.cmpi") \
                        and len(k.operands) and _is_int(k.operands[0].type, (8, 16)):
                    todo.append(k)

                return ir.WalkResult.ADVANCE

            o.walk(inner, ir.WalkOrder.PRE_ORDER)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    i32 = ir.IntegerType.get_signless(32)
    for k in todo:
        if k.name == "arith.cmpi":
            signed = ir.IntegerAttr(k.attributes["predicate"]).value in _SIGNED_PRED
        else:
            signed = k.name in _WIDEN_SIGNED
        with ir.InsertionPoint(k), k.location:
            ops = [make_op("arith.extsi" if signed else "arith.extui", [i32], [v]).results[0] for v in k.operands]
            rt = k.results[0].type
            narrow_result = _is_int(rt, (8, 16))
            attrs = {k.attributes[i].name: k.attributes[i].attr for i in range(len(k.attributes))}
            new = make_op(k.name, [i32 if narrow_result else rt], ops, attrs).results[0]
            if narrow_result:
                new = make_op("arith.trunci", [rt], [new]).results[0]
        k.results[0].replace_all_uses_with(new)
        k.erase()


def stage_flatten(module, options: SPIRVOptions) -> None:
    """Pass 1-D buffers and host-computed dims to every launch; outline the kernels."""
    op = as_op(module)
    _expand_erf(op)
    with op.context, ir.Location.unknown():
        _expand_powf(op)
    _refuse_unsupported(op)
    with op.context, ir.Location.unknown():
        _expand_atan2_cbrt(op)
        _expand_copysign(op)
        _ieee_min_max(op)
        _series_near_zero(op)
        _f16_bitcasts(op)
        _widen_narrow_ints(op)
        fold_view_dims(op)
        launches = []
        walk(op, lambda o: launches.append(o) if o.name == "gpu.launch" else None)
        for l in launches:
            _flatten_launch(l)
        op.attributes["gpu.container_module"] = ir.UnitAttr.get()
    run_pipeline(op, "canonicalize,cse", "flatten")
    # canonicalize hoists constants out of launches; every kernel gets them back, so that they do
    # not each become a storage-buffer binding (the erf polynomial of gelu is 30 f32 constants:
    # 36 bindings, over a Vulkan adapter's 32 per stage). Infinities stay parameters (naga
    # rejects infinite literals).
    sink_constants(op, constant=_sinkable_constant)
    run_pipeline(op, OUTLINE, "flatten")
    with op.context, ir.Location.unknown():
        _exact_zero_identities(op)  # after the last cse, which could make `x - x` of two products
        changed = {}  # (module, kernel) -> the parameters that became i16 buffers
        for m in op.regions[0].blocks[0].operations:
            if m.operation.name == "gpu.module":
                mname = ir.StringAttr(m.operation.attributes["sym_name"]).value
                for k in m.operation.regions[0].blocks[0].operations:
                    if k.operation.name == "gpu.func":
                        params = _emulate_bf16(k.operation)
                        if params:
                            changed[(mname, ir.StringAttr(k.operation.attributes["sym_name"]).value)] = params
        if changed:
            _launch_bf16_as_i16(op, changed)
        _widen_bool_params(op)
    with op.context:
        # convert-gpu-to-spirv needs the workgroup size of each kernel.
        for o in op.regions[0].blocks[0].operations:
            if o.operation.name != "gpu.module":
                continue
            for k in o.regions[0].blocks[0].operations:
                k = k.operation
                if k.name != "gpu.func" or "spirv.entry_point_abi" in k.attributes:
                    continue
                size = [1, 1, 1]
                if "known_block_size" in k.attributes:
                    size = list(ir.DenseI32ArrayAttr(k.attributes["known_block_size"]))
                k.attributes["spirv.entry_point_abi"] = ir.Attribute.parse(
                    f"#spirv.entry_point_abi<workgroup_size = [{size[0]}, {size[1]}, {size[2]}]>")
        loop_budget.annotate(op)  # the loop iterations of each launch, for llvmpipe's limit


def _spv_const(t: ir.Type, v: int) -> ir.Value:
    w = ir.IntegerType(t).width
    v &= (1 << w) - 1
    if v >= 1 << (w - 1):
        v -= 1 << w
    return make_op("spirv.Constant", [t], [], {"value": ir.IntegerAttr.get(t, v)}).results[0]


def _signless_fixups(module_op: ir.Operation) -> None:
    """Rewrite the SPIR-V integer ops whose sign comes from the opcode into ops whose meaning does
    not depend on the signedness of the operand type. MLIR emits signless ints as `OpTypeInt w 0`,
    which wgpu's shader translator (naga) reads as unsigned and then translates OpSConvert and
    OpShiftRightArithmetic as a zero extension and a logical shift (MLIR's sub-32-bit emulation
    sign-extends with shifts: int8 -7 became 249). Sign extension is spelled as
    ((x zero-extended) ^ m) - m with m the sign bit, which reads alike either way."""
    todo = []

    def visit(o):
        if o.name in ("spirv.SConvert", "spirv.ShiftRightArithmetic"):
            todo.append(o)
        return ir.WalkResult.ADVANCE

    as_op(module_op).walk(visit, ir.WalkOrder.PRE_ORDER)
    for o in todo:
        rt = o.results[0].type
        if not isinstance(rt, ir.IntegerType):
            raise LoweringError("to-spirv", "signless fixups", f"unsupported vector operand of {o.name}")
        with ir.InsertionPoint(o), o.location:
            x = o.operands[0]
            w = ir.IntegerType(rt).width
            if o.name == "spirv.SConvert":
                src_w = ir.IntegerType(x.type).width
                if src_w >= w:  # a truncation: the low bits, either way
                    new = make_op("spirv.UConvert", [rt], [x]).results[0]
                else:
                    u = make_op("spirv.UConvert", [rt], [x]).results[0]
                    m = _spv_const(rt, 1 << (src_w - 1))
                    new = make_op("spirv.ISub", [rt], [make_op("spirv.BitwiseXor", [rt], [u, m]).results[0], m]).results[0]
            else:
                s = o.operands[1]
                u = make_op("spirv.ShiftRightLogical", [rt], [x, s]).results[0]
                sign = _spv_const(rt, 1 << (w - 1))
                if s.type != rt:
                    s = make_op("spirv.UConvert" if ir.IntegerType(s.type).width != w else "spirv.Bitcast", [rt], [s]).results[0]
                m = make_op("spirv.ShiftRightLogical", [rt], [sign, s]).results[0]
                new = make_op("spirv.ISub", [rt], [make_op("spirv.BitwiseXor", [rt], [u, m]).results[0], m]).results[0]
        o.results[0].replace_all_uses_with(new)
        o.erase()


def _normalize_narrow_extensions(module_op: ir.Operation) -> None:
    """An extension of an i8 / i16 value to a width other than 32 goes through i32: MLIR emulates
    i8 / i16 in 32 bits and keeps wrapped results unnormalized (int8 17 * 17 held as 289), and only
    its extension to i32 normalizes; i8 -> i64 or i8 -> i16 would widen the unnormalized bits.
    Done right before the conversion to SPIR-V, since canonicalization folds ext(ext(x))."""
    todo = []

    def visit(o):
        if o.name in ("arith.extsi", "arith.extui") and _is_int(o.operands[0].type, (8, 16)) \
                and ir.IntegerType(o.results[0].type).width != 32:
            todo.append(o)
        return ir.WalkResult.ADVANCE

    for m in module_op.regions[0].blocks[0].operations:
        if m.operation.name == "gpu.module":
            m.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    i32 = ir.IntegerType.get_signless(32)
    for o in todo:
        rt = o.results[0].type
        with ir.InsertionPoint(o), o.location:
            wide = make_op(o.name, [i32], [o.operands[0]]).results[0]
            if ir.IntegerType(rt).width < 32:
                new = make_op("arith.trunci", [rt], [wide]).results[0]
            elif o.name == "arith.extui":  # (the conversion folds extui(extui(x)): mask the width)
                u = make_op("arith.extui", [rt], [wide]).results[0]
                w = ir.IntegerType(o.operands[0].type).width
                m = make_op("arith.constant", [rt], [], {"value": ir.IntegerAttr.get(rt, (1 << w) - 1)}).results[0]
                new = make_op("arith.andi", [rt], [u, m]).results[0]
            else:  # sign-extend as ((zext w) ^ m) - m: the conversion would fold extsi(extsi(x))
                u = make_op("arith.extui", [rt], [wide]).results[0]
                m = make_op("arith.constant", [rt], [], {"value": ir.IntegerAttr.get(rt, 1 << 31)}).results[0]
                new = make_op("arith.subi", [rt], [make_op("arith.xori", [rt], [u, m]).results[0], m]).results[0]
        o.results[0].replace_all_uses_with(new)
        o.erase()


def stage_to_spirv(module, options: SPIRVOptions) -> None:
    """gpu.func -> spirv.func in spirv.module, ABI lowered, VCE triple deduced; signed integer
    extensions and shifts spelled so that naga reads them as meant (`_signless_fixups`)."""
    op = as_op(module)
    names, narrow = [], []
    for o in op.regions[0].blocks[0].operations:
        o = o.operation
        if o.name == "gpu.module":
            name = ir.StringAttr(o.attributes["sym_name"]).value
            names.append(name)
            if _touches_i16_memory(o):
                narrow.append(name)
    with op.context, ir.Location.unknown():
        _normalize_narrow_extensions(op)
    attach, rest = _to_spirv_pipeline(options, tuple(narrow), tuple(names)).split(
        ",[copy the target env to spirv.target_env],")
    run_pipeline(module, attach, "to-spirv")
    with op.context:
        # convert-math-to-spirv reads the target env from a `spirv.target_env` attribute (not from
        # the gpu.module's `targets`); without it, it takes a default env without Float16 and
        # leaves unrealized f16 -> f32 casts behind (math.absf on f16).
        for o in op.regions[0].blocks[0].operations:
            o = o.operation
            if o.name == "gpu.module" and "targets" in o.attributes:
                o.attributes["spirv.target_env"] = ir.ArrayAttr(o.attributes["targets"])[0]
    run_pipeline(module, rest, "to-spirv")
    with as_op(module).context, ir.Location.unknown():
        _signless_fixups(as_op(module))
        _no_contraction(as_op(module))


# Float arithmetic whose rounding a driver may not merge: lavapipe (Mesa 22) contracts a * b - a
# into one fma, which rounds once where StableHLO, jax and our CPU round twice (f16: 8 ulps apart).
_FLOAT_ARITH = ("spirv.FMul", "spirv.FAdd", "spirv.FSub")


def _no_contraction(op: ir.Operation) -> None:
    """Decorate float multiplies, adds and subtracts `NoContraction` (the serializer turns the
    `no_contraction` attribute into the decoration)."""
    unit = ir.UnitAttr.get()

    def visit(o):
        if o.name in _FLOAT_ARITH:
            o.attributes["no_contraction"] = unit

    walk(op, visit)


def stage_serialize(module, options: SPIRVOptions) -> None:
    """Move each spirv.module into its gpu.module and serialize it (`gpu.binary`)."""
    op = as_op(module)
    top = op.regions[0].blocks[0]
    with op.context:
        gmods = {}
        for o in top.operations:
            o = o.operation
            if o.name == "gpu.module":
                gmods[ir.StringAttr(o.attributes["sym_name"]).value] = o
        for o in list(top.operations):
            o = o.operation
            if o.name != "spirv.module":
                continue
            name = ir.StringAttr(o.attributes["sym_name"]).value if "sym_name" in o.attributes else ""
            base = name[len("__spv__"):] if name.startswith("__spv__") else name
            g = gmods.get(base)
            if g is None:
                raise LoweringError("serialize", "move spirv.module", f"no gpu.module for spirv.module @{name}")
            gb = g.regions[0].blocks[0]
            old = [inner.operation for inner in gb.operations]
            if old:
                o.move_before(old[0])
            else:
                ir.InsertionPoint(gb).insert(o)
            for inner in old:
                if inner.name != "gpu.module_end":
                    inner.erase()
    run_pipeline(op, "gpu-module-to-binary{format=bin}", "serialize")


STAGES: dict[str, Callable[[ir.Module, SPIRVOptions], None]] = {
    "inline": stage_inline,
    "bufferize": stage_bufferize,
    "loops": stage_loops,
    "map": stage_map,
    "flatten": stage_flatten,
    "to-spirv": stage_to_spirv,
    "serialize": stage_serialize,
}


def pipeline_strings(options: SPIRVOptions | None = None) -> dict[str, str]:
    options = options or SPIRVOptions()
    return {
        "inline": INLINE,
        "bufferize": _BUFFERIZE,
        "loops": (f"[interchange elementwise loops],[strided copies -> linalg.copy],[cooperative gpu.launch: "
                  f"reduce_threads={options.reduce_threads} matmul_tile={options.matmul_tile}],"
                  "[parallel dims first],[serial linalg in one thread],convert-linalg-to-parallel-loops,cse,"
                  "[fold subviews],[wrap host work],[chunk serial loops],"
                  + _loops_pipeline(options)),
        "map": "[map loops]," + _TO_GPU + ",[drop unused workspace]",
        "flatten": ("[flatten buffers],canonicalize,cse,[sink constants of cooperative launches]," + OUTLINE
                    + ",[exact zero identities],[loop cost of each launch]"),
        "to-spirv": _to_spirv_pipeline(options),
        "serialize": "[move spirv.module],gpu-module-to-binary{format=bin}",
    }


def lower(module, options: SPIRVOptions | None = None, *, until: str | None = None) -> None:
    """Run the stages in order on `module` (in place); stop after stage `until` if given."""
    run_stages(STAGES, module, options or SPIRVOptions(), until, "SPIR-V")


# --------------------------------------------------------------------------------------------
# results of the lowering
# --------------------------------------------------------------------------------------------


def spirv_binaries(module_op: ir.Operation) -> dict[str, bytes]:
    """After `serialize`: {gpu.module name: SPIR-V words as bytes}."""
    out = {}
    for o in as_op(module_op).regions[0].blocks[0].operations:
        o = o.operation
        if o.name != "gpu.binary":
            continue
        name = ir.StringAttr(o.attributes["sym_name"]).value
        objs = o.attributes["objects"]
        obj = objs[0]
        text = str(obj)
        # #gpu.object<#spirv.target_env<...>, "...">: the bytes are the string attribute
        out[name] = _object_bytes(obj, text)
    return out


def _object_bytes(obj, text: str) -> bytes:
    try:
        from mlir.dialects import gpu as _gpu  # noqa: F401

        o = _gpu.ObjectAttr(obj)
        return bytes(o.object)
    except Exception:
        pass
    # fall back: parse the escaped string literal at the end of the attribute text
    start = text.index('"')
    s = text[start + 1:text.rindex('"')]
    data = bytearray()
    i = 0
    while i < len(s):
        if s[i] == "\\":
            if s[i + 1] == "\\":
                data.append(92)
                i += 2
            else:
                data.append(int(s[i + 1:i + 3], 16))
                i += 3
        else:
            data.append(ord(s[i]))
            i += 1
    return bytes(data)


@dataclass(frozen=True)
class KernelABI:
    """What the host needs to dispatch one kernel: its bindings and workgroup size."""

    module: str
    kernel: str
    workgroup_size: tuple[int, int, int]
    args: tuple[str, ...]  # MLIR type text of each gpu.launch_func argument (binding i)


def kernel_abis(module_op: ir.Operation) -> dict[tuple[str, str], KernelABI]:
    """After `to-spirv` (before `serialize`): workgroup size of each kernel, from its spirv.func."""
    res = {}
    for mname, kname, k in gpu_funcs(as_op(module_op)):
        wg = (1, 1, 1)
        if "spirv.entry_point_abi" in k.attributes:
            text = str(k.attributes["spirv.entry_point_abi"])
            nums = text[text.index("[") + 1:text.index("]")].split(",")
            wg = tuple(int(x) for x in nums) + (1,) * (3 - len(nums))
        ft = ir.FunctionType(ir.TypeAttr(k.attributes["function_type"]).value)
        res[(mname, kname)] = KernelABI(mname, kname, wg, tuple(str(t) for t in ft.inputs))
    return res


# --------------------------------------------------------------------------------------------
# passes
# --------------------------------------------------------------------------------------------


def _check_pass_options(p) -> None:
    try:
        check_cooperative(p.reduce_threads, p.matmul_tile)
    except ValueError as e:
        raise PipelineError(f"invalid option of {p.name}: {e}") from None


@dataclass(frozen=True)
class SPIRVMapPass(ModulePass):
    """Lower to gpu.launch and outline the kernels (stages inline .. flatten)."""

    name: ClassVar[str] = "relax-spirv-map"
    reduce_threads: int = 32
    matmul_tile: int = 64

    def validate(self) -> None:
        _check_pass_options(self)

    def run(self, module: ir.Operation) -> None:
        require_upstream(module, self.name)
        lower(module, SPIRVOptions(reduce_threads=self.reduce_threads, matmul_tile=self.matmul_tile),
              until="flatten")


@dataclass(frozen=True)
class SPIRVLowerPass(ModulePass):
    """Lower to SPIR-V (stages inline .. to-spirv); `serialize=true` also emits gpu.binary."""

    name: ClassVar[str] = "relax-to-spirv"
    serialize: bool = False
    reduce_threads: int = 32
    matmul_tile: int = 64

    def validate(self) -> None:
        _check_pass_options(self)

    def run(self, module: ir.Operation) -> None:
        require_upstream(module, self.name)
        lower(module, SPIRVOptions(reduce_threads=self.reduce_threads, matmul_tile=self.matmul_tile),
              until="serialize" if self.serialize else "to-spirv")


PASSES = (SPIRVMapPass, SPIRVLowerPass)
