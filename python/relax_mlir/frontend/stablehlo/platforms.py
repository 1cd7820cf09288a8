"""Modules exported for several platforms (`jax.export(f, platforms=("cpu", "cuda"))`).

jax lowers such a function once per platform and keeps every lowering that differs: @main takes
one more argument first, the platform index (`jax.global_constant = "_platform_index"`, an i32
scalar the caller's runtime supplies), and the ops whose lowerings differ sit in `stablehlo.case`
ops on values computed from it (a first case maps the platform to the index of its lowering, a
second picks the lowering). relax-mlir compiles one lowering for every target of its own: the
platform index becomes a constant, @main loses that argument (the executable takes the arguments
of `Exported.in_avals`, as for a one-platform export), and every `stablehlo.case` whose index is
then a constant is replaced by its chosen branch, so that the other platforms' ops (cuSOLVER
custom calls, TPU-only ops) are neither checked nor imported.

`import_exported` picks the CPU lowering where the export has one (its LAPACK custom calls are
the ones the importer converts, and they compile for every relax-mlir target), else the first.
"""
from __future__ import annotations

from relax_mlir.frontend.stablehlo.common import _string
from relax_mlir.frontend.stablehlo.errors import UnsupportedOpError

PLATFORM_INDEX = "_platform_index"
# The lowering relax-mlir imports when an export has several: the first of these it has.
PREFERRED = ("cpu", "cuda", "rocm", "tpu")


def choose_platform(platforms) -> int | None:
    """The index (into `Exported.platforms`) of the lowering to import; None for one platform."""
    platforms = [str(p).lower() for p in platforms]
    if len(platforms) <= 1:
        return None
    for p in PREFERRED:
        if p in platforms:
            return platforms.index(p)
    return 0


def _platform_args(func) -> list[int]:
    """Positions of `func`'s arguments that carry jax's platform index."""
    from jaxlib.mlir import ir as jir

    attrs = func.attributes["arg_attrs"] if "arg_attrs" in func.attributes else None
    if not isinstance(attrs, jir.ArrayAttr):
        return []
    out = []
    for i, a in enumerate(attrs):
        if isinstance(a, jir.DictAttr) and "jax.global_constant" in a \
                and isinstance(a["jax.global_constant"], jir.StringAttr) \
                and a["jax.global_constant"].value == PLATFORM_INDEX:
            out.append(i)
    return out


def _scalar_int(t):
    """The integer element type of a scalar tensor type `t`, else None."""
    from jaxlib.mlir import ir as jir

    try:
        t = jir.RankedTensorType(t)
        return jir.IntegerType(t.element_type) if t.rank == 0 else None
    except ValueError:  # not a ranked tensor of integers
        return None


def _int_constant(block, ty, value: int):
    """A `stablehlo.constant dense<value> : ty` (an integer scalar tensor) at the start of `block`."""
    from jaxlib.mlir import ir as jir

    attr = jir.DenseElementsAttr.get_splat(ty, jir.IntegerAttr.get(_scalar_int(ty), value))
    ip = jir.InsertionPoint.at_block_begin(block) if len(block.operations) else jir.InsertionPoint(block)
    return jir.Operation.create("stablehlo.constant", results=[ty], attributes={"value": attr},
                                loc=jir.Location.unknown(), ip=ip).result


def specialize_platform(module, platform_index: int | None, count: int | None = None) -> None:
    """Make the platform index of a several-platform module the constant `platform_index` and fold
    the cases that selects (see the module docstring); nothing for a one-platform module. Without
    `platform_index` such a module is refused (its first argument would be the caller's to pass)."""
    from jaxlib.mlir import ir as jir

    funcs = [op for op in module.body.operations if op.operation.name == "func.func"]
    main = next((f for f in funcs if _string(f.attributes["sym_name"]) == "main"), None)
    if main is None or not _platform_args(main):
        return
    if platform_index is None:
        raise UnsupportedOpError("func.func", str(main.location),
                                 "@main's argument #0 is jax's platform index: the module was exported for several "
                                 "platforms (jax.export(..., platforms=[...])); import the Exported with "
                                 "relax_mlir.frontend.jax.import_exported (or relax_mlir.compile(exported)), which "
                                 "imports its CPU lowering, or give the index of the lowering to import "
                                 "(platform_index=, relax-import-stablehlo --platform-index)")
    bodies = {}  # function -> (its block, the positions of its platform-index arguments)
    for f in funcs:
        positions = _platform_args(f)
        if not positions or not len(f.regions) or not len(f.regions[0].blocks):
            continue
        block = f.regions[0].blocks[0]
        for i in positions:
            if i >= len(block.arguments) or _scalar_int(block.arguments[i].type) is None:
                raise UnsupportedOpError("func.func", str(f.location), f"argument #{i} is jax's platform index "
                                         "but not an integer scalar (tensor<i32>, or tensor<i64> under x64)")
        bodies[f] = (block, positions)
    if count is None:  # jax's first case on the index has one branch per platform
        count = min((len(u.owner.regions) for block, positions in bodies.values() for i in positions
                     for u in block.arguments[i].uses
                     if u.owner.name == "stablehlo.case" and u.operand_number == 0), default=None)
    if platform_index < 0 or (count is not None and platform_index >= count):
        raise UnsupportedOpError("func.func", str(main.location),
                                 f"platform_index {platform_index} selects none of the {count} lowerings")
    for f, (block, positions) in bodies.items():
        for i in positions:
            block.arguments[i].replace_all_uses_with(_int_constant(block, block.arguments[i].type, platform_index))
        if f is main:  # the executable's arguments are the export's in_avals
            for i in reversed(positions):
                block.erase_argument(i)
            ftype = jir.FunctionType(jir.TypeAttr(f.attributes["function_type"]).value)
            inputs = [t for i, t in enumerate(ftype.inputs) if i not in positions]
            f.attributes["function_type"] = jir.TypeAttr.get(jir.FunctionType.get(inputs, list(ftype.results)))
            attrs = jir.ArrayAttr(f.attributes["arg_attrs"])
            f.attributes["arg_attrs"] = jir.ArrayAttr.get([a for i, a in enumerate(attrs) if i not in positions])
    while _fold_one_case(module):
        pass


def _ops(block):
    for op in block.operations:
        op = op.operation
        yield op
        for region in op.regions:
            for b in region.blocks:
                yield from _ops(b)


def _constant_index(value) -> int | None:
    from jaxlib.mlir import ir as jir

    owner = value.owner
    if isinstance(owner, jir.Block):
        return None
    owner = owner.operation
    if owner.name == "stablehlo.convert" and _scalar_int(owner.results[0].type) is not None \
            and _scalar_int(owner.operands[0].type) is not None:  # (the x64 index, i64, converted to i32)
        v = _constant_index(owner.operands[0])
        w = _scalar_int(owner.results[0].type).width
        return None if v is None else (v + (1 << (w - 1))) % (1 << w) - (1 << (w - 1))
    if owner.name != "stablehlo.constant":
        return None
    attr = owner.attributes["value"]
    if not isinstance(attr, jir.DenseIntElementsAttr):
        return None
    return int(attr[0])


def _fold_one_case(module) -> bool:
    """Replace the first `stablehlo.case` with a constant index by the ops of its chosen branch
    (an index out of range picks the last branch, as StableHLO says); whether one was folded."""
    for op in _ops(module.body):
        if op.name != "stablehlo.case":
            continue
        index = _constant_index(op.operands[0])
        if index is None:
            continue
        regions = list(op.regions)
        chosen = regions[index] if 0 <= index < len(regions) else regions[-1]
        if len(chosen.blocks) != 1:
            continue
        ops = list(chosen.blocks[0].operations)
        term = ops[-1]
        for o in ops[:-1]:
            o.move_before(op)
        for r, v in zip(op.results, list(term.operands)):
            r.replace_all_uses_with(v)
        op.erase()
        return True
    return False
