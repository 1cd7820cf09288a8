"""CUDA (NVIDIA, PTX) backend: ordered IR -> IR stages from upstream linalg on tensors to `gpu.binary`.

Triton-style layering like backend/cpu.py: a frozen `GPUOptions`, an ordered dict `STAGES` of named
functions `(module_op, options) -> None` that mutate the module in place, and `lower()` that runs
them in order. Input: the `relax-to-upstream` contract (private kernels on tensors, public entries
on memrefs with an error slot; see transforms/to_upstream.py).

Stages, in order:

* ``bufferize``  the CPU backend's inline + one-shot bufferization (function boundaries, identity
  layouts, outputs computed in place in the caller's buffers, ownership-based deallocation).
* ``map``        first the cooperative kernels (`map_cooperative_kernels`, gpu_kernels.py): every row
  reduction and every matmul becomes its own `gpu.launch` using workgroup memory and
  `gpu.barrier`. Then `convert-linalg-to-parallel-loops` for the rest; every outermost
  `scf.parallel` is tiled here in Python (`_tile_parallel`, the same IR as
  `scf-parallel-loop-tiling{no-min-max-bounds}`: an outer loop over tiles, an inner loop over a
  constant tile, an `scf.if` bounds guard) with a tile chosen by its rank, and given its own
  `mapping` (innermost loop dim -> `block_x` / `thread_x`, so that neighbouring threads touch
  neighbouring elements; dims beyond three run sequentially); then `convert-parallel-loops-to-gpu`
  and `gpu-kernel-outlining`.
  The upstream tiling pass is not used: it takes one tile-size list for every loop (a 1-D loop
  would get the first entry only), and the canonicalize it needs afterwards merges the tile loop
  into the point loop, which leaves nothing to map to threads.
  Grid sizes are computed on the host from the dynamic dims (`ceildiv(dim, tile)`), so one
  compiled module serves every value of the symbols.
* ``to-ptx``     `nvvm-attach-target{chip features O}` and `gpu-lower-to-nvvm-pipeline{cubin-format=isa}`:
  every `gpu.module` becomes a `gpu.binary` holding PTX text (`ptx_of` reads it). No CUDA toolkit
  is needed; `ptxas -arch=<chip>` accepts the result. The stage runs in a child process by default
  (`GPUOptions.isolate`): a bad chip / PTX-version pair is a fatal LLVM error that would kill the
  calling process.

Before `convert-linalg-to-parallel-loops`, the `map` stage runs the kernels it shares with
backend/spirv.py (backend/gpu_kernels.py): cooperative row / column reductions and tiled matmuls
with fused fills and epilogues (`GPUOptions.reduce_threads`, `matmul_tile`; 0 turns one off; here
workgroup memory is a launch workgroup attribution, `NVVM_WORKGROUP`), and the rewrites that keep
every piece of data work in a kernel.

The entry functions that remain are host code only (shape arithmetic, views, launches, whole
buffer copies, index-valued shape buffers); runtime/hostprog.py extracts them, and its drivers
place every buffer in device memory.
"""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from mlir import ir
from mlir.dialects import arith

from relax_mlir.backend.common import (LoweringError, as_op, const_int, option_bool, option_int, option_ints,
                                      require_upstream, run_pipeline, run_stages)
from relax_mlir.backend.cpu import (
    CPUOptions,
    legalize_i1_memory,
    stage_bufferize as _cpu_stage_bufferize,
)
from relax_mlir.backend.gpu_kernels import (
    INLINE,
    OUTLINE,
    TO_LOOPS,
    WorkgroupMemory,
    check_cooperative,
    copies_to_kernels,
    drop_unused_workspace,
    fold_subviews,
    interchange_elementwise_loops,
    make_op,
    map_cooperative_kernels,
    parallel_dims_first,
    resolve_kernel_views,
    serial_linalg_in_one_thread,
    sink_constants,
)
from relax_mlir.passes import ModulePass, PipelineError

__all__ = [
    "GPUOptions",
    "GPUMapPass",
    "GPUToPTXPass",
    "NVVM_WORKGROUP",
    "GPUBufferizePass",
    "LoweringError",
    "PASSES",
    "STAGES",
    "lower",
    "pipeline_strings",
    "ptx_of",
    "tile_for_rank",
]

# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------

# The lowest PTX ISA version that supports each SM (PTX ISA docs, "Target ISA notes"); the SMs
# accepted as `chip`. sm_50 (Maxwell) is the oldest that CUDA 12 (CuPy's runtime) supports; LLVM
# writes PTX for any sm_NN, also one that does not exist (sm_95), which ptxas then refuses.
_MIN_PTX = {50: 40, 52: 41, 53: 42, 60: 50, 61: 50, 62: 50, 70: 60, 72: 61, 75: 63, 80: 70,
            86: 71, 87: 74, 88: 90, 89: 78, 90: 78, 100: 86, 101: 86, 103: 88, 110: 90, 120: 87, 121: 88}
# The PTX ISA versions LLVM 22 writes (`+ptxNN`); it ignores any other and writes its default.
_PTX_VERSIONS = (40, 41, 42, 43, 50, 60, 61, 62, 63, 64, 65, *range(70, 79), *range(80, 89), 90)


@dataclass(frozen=True)
class GPUOptions:
    """Options of the GPU backend; hashable, so usable as a compile-cache key.

    `block` is the thread block (x, y, z) of a 2-D or 3-D loop nest, x along the innermost
    (contiguous) loop dim; a 1-D loop gets `prod(block)` threads along x.
    """

    chip: str = "sm_90"
    features: str = "+ptx80"
    opt_level: int = 3
    block: tuple[int, ...] = (32, 8)
    isolate: bool = True  # run to-ptx in a child process (an LLVM fatal error cannot kill us)
    reduce_threads: int = 256  # threads striding over one row of a row reduction (a power of two); 0: off
    matmul_tile: int = 64  # output tile of a shared-memory matmul block (0..16, or 16k up to 128); 0: off

    def __post_init__(self):
        """Every field checked (type and range) and normalized (a list `block` as a tuple)."""
        m = re.fullmatch(r"sm_(\d+)a?", self.chip) if isinstance(self.chip, str) else None
        chips = ", ".join(f"sm_{k}" for k in _MIN_PTX)
        if not m or int(m.group(1)) not in _MIN_PTX:
            raise ValueError(f"chip must be an NVIDIA SM such as 'sm_90' (or 'sm_90a'), one of {chips}; "
                             f"got {self.chip!r}")
        f = re.fullmatch(r"\+ptx(\d+)", self.features) if isinstance(self.features, str) else None
        if not f:
            raise ValueError(f"features must look like '+ptx80' (the PTX ISA version), got {self.features!r}")
        sm, ptx = int(m.group(1)), int(f.group(1))
        need = _MIN_PTX[sm]
        if ptx < need:
            raise ValueError(f"{self.chip} needs PTX ISA {need // 10}.{need % 10} or newer "
                             f"(features=+ptx{need}), got {self.features}")
        if ptx not in _PTX_VERSIONS:
            raise ValueError(f"features={self.features} is no PTX ISA version that LLVM writes "
                             f"(+ptx40 .. +ptx90: {', '.join(map(str, _PTX_VERSIONS))})")
        object.__setattr__(self, "opt_level", option_int("opt_level", self.opt_level, 0, 3))
        block = option_ints("block", self.block, (1, 3), 1, 1024, " (threads along x, y, z)")
        if len(block) == 3 and block[2] > 64:
            raise ValueError(f"block: a CUDA block has at most 64 threads along z, got {self.block!r}")
        if math.prod(block) > 1024:
            raise ValueError(f"a block holds at most 1024 threads, got {self.block!r}")
        object.__setattr__(self, "block", block)
        object.__setattr__(self, "isolate", option_bool("isolate", self.isolate))
        check_cooperative(self.reduce_threads, self.matmul_tile)


def tile_for_rank(rank: int, options: GPUOptions) -> list[int]:
    """Tile sizes (outermost loop dim first) of a `rank`-D parallel loop."""
    if rank == 1:
        return [math.prod(options.block)]
    xyz = list(options.block) + [1] * (3 - len(options.block))
    inner = list(reversed(xyz[:min(rank, 3)]))  # ..., y, x
    return [1] * (rank - len(inner)) + inner


# Workgroup memory of the cooperative kernels (gpu_kernels.py): launch workgroup attributions,
# which NVVM lowers to `.shared` globals.
NVVM_WORKGROUP = WorkgroupMemory("#gpu.address_space<workgroup>", True)


# --------------------------------------------------------------------------------------------
# IR helpers
# --------------------------------------------------------------------------------------------


def _outermost_parallel_loops(module_op: ir.Operation) -> list[ir.Operation]:
    found = []

    def visit(o):
        if o.name == "scf.parallel":
            found.append(o)
            return ir.WalkResult.SKIP
        if o.name == "gpu.launch" or o.name == "gpu.module":
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _mapping_attr(rank: int, level: str) -> ir.Attribute:
    """Innermost dim -> x, then y, z; further (outer) dims sequential."""
    procs = []
    for d in range(rank):
        k = rank - 1 - d  # 0 for the innermost dim
        procs.append(f"{level}_{'xyz'[k]}" if k < 3 else "sequential")
    text = ", ".join(f"#gpu.loop_dim_map<processor = {p}, map = (d0) -> (d0), bound = (d0) -> (d0)>"
                     for p in procs)
    return ir.Attribute.parse(f"[{text}]")


def _tile_parallel(ploop: ir.Operation, sizes: list[int]) -> None:
    """Tile one `scf.parallel` (no reductions) as scf-parallel-loop-tiling{no-min-max-bounds}
    does, and set the block / thread mapping of both loops."""
    from mlir.dialects import scf

    n = len(sizes)
    operands = list(ploop.operands)
    lbs, ubs, steps = operands[:n], operands[n:2 * n], operands[2 * n:3 * n]
    idx = ir.IndexType.get()
    old_block = ploop.regions[0].blocks[0]
    with ir.InsertionPoint(ploop), ploop.location:
        def const(c):
            return make_op("arith.constant", [idx], [], {"value": ir.IntegerAttr.get(idx, c)}).results[0]

        zero = const(0)
        tile_steps = []
        for s, t in zip(steps, sizes):
            sc = const_int(s)
            tile_steps.append(const(sc * t) if sc is not None else
                              make_op("arith.muli", [idx], [s, const(t)]).results[0])
        outer = scf.ParallelOp([], lbs, ubs, tile_steps, [])
        ob = outer.region.blocks.append(*([idx] * n))
        with ir.InsertionPoint(ob):
            inner = scf.ParallelOp([], [zero] * n, tile_steps, steps, [])
            ib = inner.region.blocks.append(*([idx] * n))
            make_op("scf.reduce", [], [])
        with ir.InsertionPoint(ib):
            ivs, cond = [], None
            for k in range(n):
                iv = make_op("arith.addi", [idx], [ib.arguments[k], ob.arguments[k]]).results[0]
                ivs.append(iv)
                if sizes[k] == 1 and const_int(steps[k]) == 1:
                    continue  # the tile loop alone covers this dim exactly
                c = make_op("arith.cmpi", [ir.IntegerType.get_signless(1)], [iv, ubs[k]],
                            {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 6)}).results[0]  # ult
                cond = c if cond is None else make_op("arith.andi", [c.type], [cond, c]).results[0]
            if cond is not None:
                ifop = make_op("scf.if", [], [cond], regions=2)
                then = ifop.regions[0].blocks.append()
                with ir.InsertionPoint(then):
                    yld = make_op("scf.yield", [], [])
                dest = (yld, True)
            else:
                dest = (None, False)
            red = make_op("scf.reduce", [], [])
        for k in range(n):
            old_block.arguments[k].replace_all_uses_with(ivs[k])
        body = list(old_block.operations)
        for o in body[:-1]:  # the old scf.reduce terminator stays behind
            if dest[1]:
                o.move_before(dest[0])
            else:
                o.move_before(red)
        outer.attributes["mapping"] = _mapping_attr(n, "block")
        inner.attributes["mapping"] = _mapping_attr(n, "thread")
    ploop.erase()


def _map_parallel_loops(module_op: ir.Operation, options: GPUOptions) -> int:
    loops = _outermost_parallel_loops(module_op)
    with module_op.context, ir.Location.unknown():
        for p in loops:
            if len(p.results) or len(p.regions[0].blocks[0].operations) == 0:
                continue
            n = (len(p.operands)) // 3
            if len(p.operands) != 3 * n:  # has init values (reductions): leave on the host
                continue
            _tile_parallel(p, tile_for_rank(n, options))
    return len(loops)


# --------------------------------------------------------------------------------------------
# Stages
# --------------------------------------------------------------------------------------------

_TO_LAUNCH = "func.func(convert-parallel-loops-to-gpu)"
_TO_GPU = f"{_TO_LAUNCH},[sink constants],{OUTLINE}"


# bf16 arithmetic in kernels computes in f32, rounded back to bf16 after each op, as on the CPU
# (backend/cpu.py) and as XLA does: NVVM has no bf16 `frem` or math library calls (fuzz seed
# 2,309,355: "failed to legalize operation 'llvm.frem'").
_BF16_ARITH = ("gpu.module(gpu.func(math-extend-to-supported-types{target-type=f32},"
               "arith-emulate-unsupported-floats{source-types=bf16 target-type=f32}))")


def widen_half_remf(op: ir.Operation) -> int:
    """f16 `arith.remf` (scalar or vector) -> the f32 remainder of the widened operands, rounded
    back: exact (the remainder of two f16 values is one), and NVVM lowers no f16 frem (a jnp.fmod
    of f16 failed to compile for cuda). Returns how many."""
    todo = []

    def visit(o):
        if o.name == "arith.remf":
            t = o.results[0].type
            et = t.element_type if isinstance(t, ir.ShapedType) else t
            if isinstance(et, ir.F16Type):
                todo.append(o)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    for o in todo:
        t = o.results[0].type
        f32 = ir.F32Type.get(t.context)
        wide = ir.VectorType.get(ir.VectorType(t).shape, f32) if isinstance(t, ir.VectorType) else f32
        with ir.InsertionPoint(o), o.location:
            a, b = (arith.ExtFOp(wide, v).result for v in o.operands)
            r = arith.TruncFOp(t, arith.RemFOp(a, b).result).result
        o.results[0].replace_all_uses_with(r)
        o.erase()
    return len(todo)


def _attach_pipeline(options: GPUOptions) -> str:
    return (f"nvvm-attach-target{{chip={options.chip} features={options.features} "
            f"O={options.opt_level}}}")


def _nvvm_pipeline(options: GPUOptions) -> str:
    return (f"gpu-lower-to-nvvm-pipeline{{cubin-format=isa cubin-chip={options.chip} "
            f"cubin-features={options.features} opt-level={options.opt_level}}}")


def stage_bufferize(module, options: GPUOptions) -> None:
    """Inline kernels into the entries and bufferize (the CPU backend's stages)."""
    cpu_opts = CPUOptions(num_threads=1)
    run_pipeline(module, INLINE, "bufferize")
    _cpu_stage_bufferize(module, cpu_opts)


def stage_map(module, options: GPUOptions) -> None:
    """Row reductions and matmuls -> cooperative gpu.launch; the other linalg -> scf.parallel ->
    tiled and mapped -> gpu.launch; then outlined gpu.func kernels."""
    op = as_op(module)
    interchange_elementwise_loops(op)  # a scan: one kernel, not two launches per position
    copies_to_kernels(op)
    map_cooperative_kernels(op, reduce_threads=options.reduce_threads, matmul_tile=options.matmul_tile,
                            memory=NVVM_WORKGROUP)
    parallel_dims_first(op)
    serial_linalg_in_one_thread(op)
    run_pipeline(op, TO_LOOPS, "map")
    fold_subviews(op)
    _map_parallel_loops(op, options)
    run_pipeline(op, _TO_LAUNCH, "map")
    with op.context, ir.Location.unknown():
        resolve_kernel_views(op)
    sink_constants(op)
    run_pipeline(op, OUTLINE, "map")
    drop_unused_workspace(op)


def _gpu_modules(module_op: ir.Operation) -> list[ir.Operation]:
    return [o.operation for o in module_op.regions[0].blocks[0].operations if o.operation.name == "gpu.module"]


def _to_ptx_inprocess(op: ir.Operation, options: GPUOptions) -> None:
    from relax_mlir.ops.kernel import expand_math

    # (in the isolated child: a pipeline on a module it cannot lower may abort the process)
    if any(True for _ in _gpu_modules(op)):
        run_pipeline(op, _BF16_ARITH, "to-ptx")
    widen_half_remf(op)
    expand_math(op, kinds=("remf",))
    # memref<i1> (a mask) holds a byte per element; this build's MemRefToLLVM aborts the process
    # on sub-byte loads and stores, in kernels as on the CPU: access the bytes (cpu.py).
    for g in _gpu_modules(op):
        legalize_i1_memory(g)
    run_pipeline(op, _attach_pipeline(options), "to-ptx")
    run_pipeline(op, _nvvm_pipeline(options), "to-ptx")


_CHILD = r"""
import sys
from mlir import ir
from relax_mlir.backend import gpu
from relax_mlir.backend.common import LoweringError
text = sys.stdin.read()
chip, features, opt = sys.argv[1], sys.argv[2], int(sys.argv[3])
ctx = ir.Context()
ctx.allow_unregistered_dialects = True
with ctx:
    m = ir.Module.parse(text)
    try:
        gpu._to_ptx_inprocess(m.operation, gpu.GPUOptions(chip=chip, features=features, opt_level=opt,
                                                           isolate=False))
    except LoweringError as e:
        sys.stderr.write("\x00PIPELINE\x00" + e.pipeline + "\x00" + e.diagnostics)
        sys.exit(3)
    sys.stdout.write(m.operation.get_asm(enable_debug_info=False))
"""


def _replace_body(op: ir.Operation, text: str) -> None:
    """Replace the ops of module `op` with those of the module in `text` (same context)."""
    with op.context:
        new = ir.Module.parse(text)
        block = op.regions[0].blocks[0]
        for o in list(block.operations):
            o.erase()
        for o in list(new.body.operations):
            o.detach_from_parent()
            block.append(o)
        attrs = new.operation.attributes
        for a in list(attrs):
            name = a if isinstance(a, str) else a.name
            op.attributes[name] = attrs[name]


def stage_to_ptx(module, options: GPUOptions) -> None:
    """NVVM target, GPU-to-NVVM and host lowering; each gpu.module becomes a gpu.binary of PTX.
    bf16 arithmetic is computed in f32 first, and arith.remf becomes an exact fmod in f32 arith
    (NVVM cannot lower frem)."""
    op = as_op(module)
    if not options.isolate:
        _to_ptx_inprocess(op, options)
        return
    text = op.get_asm(enable_debug_info=False)
    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([src] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, options.chip, options.features,
                            str(options.opt_level)], input=text, capture_output=True, text=True,
                           env=env, timeout=600)
    except subprocess.TimeoutExpired:
        raise LoweringError("to-ptx", _nvvm_pipeline(options), "timed out") from None
    if r.returncode != 0:
        err = r.stderr
        if err.startswith("\x00PIPELINE\x00"):
            _, _, step, diags = err.split("\x00", 3)
            raise LoweringError("to-ptx", step, diags)
        raise LoweringError("to-ptx", _nvvm_pipeline(options),
                            f"the lowering process failed (exit code {r.returncode}):\n{err[-4000:]}")
    _replace_body(op, r.stdout)


STAGES: dict[str, Callable[[ir.Operation, GPUOptions], None]] = {
    "bufferize": stage_bufferize,
    "map": stage_map,
    "to-ptx": stage_to_ptx,
}


def pipeline_strings(options: GPUOptions | None = None) -> dict[str, str]:
    """The upstream passes of each stage (the tiling and mapping step is Python, `_tile_parallel`)."""
    options = options or GPUOptions()
    return {
        "bufferize": "relax-cpu-inline, relax-cpu-bufferize (backend/cpu.py)",
        "map": (f"[interchange elementwise loops],[strided copies -> linalg.copy],[cooperative gpu.launch: "
                f"reduce_threads={options.reduce_threads} matmul_tile={options.matmul_tile}],"
                f"[parallel dims first],[serial linalg in one thread],{TO_LOOPS},"
                "[fold subviews into loads and stores],"
                f"[tile + map scf.parallel: block={options.block}],{_TO_GPU},[drop unused workspace]"),
        "to-ptx": f"{_attach_pipeline(options)},{_nvvm_pipeline(options)}",
    }


def lower(module, options: GPUOptions | None = None, until: str | None = None) -> None:
    """Run the stages in order on `module` (in place); stop after stage `until` if given."""
    run_stages(STAGES, module, options or GPUOptions(), until, "GPU")


# --------------------------------------------------------------------------------------------
# PTX extraction
# --------------------------------------------------------------------------------------------


def _binaries(module_op: ir.Operation) -> list[ir.Operation]:
    return [o.operation for o in module_op.regions[0].blocks[0].operations
            if o.operation.name == "gpu.binary"]


def ptx_of(module_op) -> dict[str, str]:
    """PTX text of each `gpu.binary` (by symbol name) of a module lowered by the to-ptx stage.

    A module still holding `gpu.module`s (mapped, not yet lowered) is lowered on a copy first.
    """
    from mlir.dialects import gpu as gpu_d

    op = as_op(module_op)
    bins = _binaries(op)
    if not bins and any(o.operation.name == "gpu.module" for o in op.regions[0].blocks[0].operations):
        with op.context:
            copy = op.clone(ip=False)
            try:
                stage_to_ptx(copy, GPUOptions())
                return ptx_of(copy)
            finally:
                copy.erase()
    out = {}
    for b in bins:
        name = ir.StringAttr(b.attributes["sym_name"]).value
        for obj in ir.ArrayAttr(b.attributes["objects"]):
            data = gpu_d.ObjectAttr(obj).object
            out[name] = data.decode() if isinstance(data, bytes) else str(data)
            break
    return out


# --------------------------------------------------------------------------------------------
# Passes for the driver
# --------------------------------------------------------------------------------------------


def _options_from(p) -> GPUOptions:
    """The GPUOptions of a pass's options (`block=32,8` or `32x8`); PipelineError naming the pass
    and the option for a bad value."""
    try:
        block = tuple(int(b) for b in p.block.replace("x", ",").split(","))
    except ValueError:
        raise PipelineError(f"option block of {p.name} takes 1 to 3 thread counts such as 32,8 or 32x8, "
                            f"got '{p.block}'") from None
    try:
        return GPUOptions(chip=p.chip, features=p.features, block=block, reduce_threads=p.reduce_threads,
                          matmul_tile=p.matmul_tile)
    except ValueError as e:
        raise PipelineError(f"invalid option of {p.name}: {e}") from None


@dataclass(frozen=True)
class _GPUPass(ModulePass):
    chip: str = "sm_90"
    features: str = "+ptx80"
    block: str = "32,8"
    reduce_threads: int = 256
    matmul_tile: int = 64

    def validate(self) -> None:
        _options_from(self)


@dataclass(frozen=True)
class GPUBufferizePass(_GPUPass):
    """Inline kernels and bufferize for the GPU backend."""

    name: ClassVar[str] = "relax-gpu-bufferize"

    def run(self, module: ir.Operation) -> None:
        require_upstream(module, self.name)
        stage_bufferize(module, _options_from(self))


@dataclass(frozen=True)
class GPUMapPass(_GPUPass):
    """Bufferize and map linalg onto GPU blocks and threads: outlined gpu.func kernels."""

    name: ClassVar[str] = "relax-gpu-map"

    def run(self, module: ir.Operation) -> None:
        require_upstream(module, self.name)
        o = _options_from(self)
        stage_bufferize(module, o)
        stage_map(module, o)


@dataclass(frozen=True)
class GPUToPTXPass(_GPUPass):
    """Lower mapped GPU code to NVVM; every gpu.module becomes a gpu.binary of PTX text."""

    name: ClassVar[str] = "relax-gpu-to-ptx"

    def run(self, module: ir.Operation) -> None:
        require_upstream(module, self.name)
        stage_to_ptx(module, _options_from(self))


@dataclass(frozen=True)
class TestGPUPTXPass(_GPUPass):
    """Test pass: lower to PTX, empty the module, and print each kernel's PTX to stdout as
    comment lines (`// ptx @name`, then `// <line>`), ahead of the (empty) module."""

    name: ClassVar[str] = "test-relax-gpu-ptx"

    def run(self, module: ir.Operation) -> None:
        require_upstream(module, self.name)
        o = _options_from(self)
        stage_to_ptx(module, o)
        ptx = ptx_of(module)
        for o_ in list(module.regions[0].blocks[0].operations):
            o_.erase()
        for name, text in ptx.items():
            sys.stdout.write(f"// ptx @{name}\n")
            for line in text.splitlines():
                sys.stdout.write(f"// {line}\n")
        sys.stdout.flush()


PASSES = (GPUBufferizePass, GPUMapPass, GPUToPTXPass, TestGPUPTXPass)
