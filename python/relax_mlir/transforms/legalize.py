"""`relax-legalize`: graph ops become `relax.call_tir` of linalg kernels, shared between call sites.

A partial lowering: `ops=` restricts it to some ops, `skip=` keeps some at graph level; every relax
pass keeps working on the mixed module. Each op's kernel comes from its class's `legalize()`
(ops/<family>.py), so an op's deduction and lowering sit side by side.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mlir import ir

from relax_mlir.dialect.spec import OPS, DeduceError, OpInfo
from relax_mlir.dialect.types import TensorType
from relax_mlir.ops.bits import unsigned_legalize_info
from relax_mlir.ops.kernel import LegalizeError
from relax_mlir.core.diagnostics import suggest
from relax_mlir.passes import ModulePass, PassError, PipelineError
from relax_mlir.transforms.dispatch_library import call_library_kernel
from relax_mlir.transforms.infer_shapes import check_module, function_facts, graph_functions

# Ops that stay at graph level: views, casts, constants, structure, and the cross-level ops.
GRAPH_LEVEL = frozenset({
    "relax.reshape", "relax.match_cast", "relax.shape_of", "relax.constant", "relax_v.dataflow",
    "relax_v.call_tir", "relax_v.call_library", "relax.alloc_storage", "relax.alloc_tensor", "relax.kill",
    "relax.dim", "relax.assert", "relax.prim_value",
})


def module_symbols(module: ir.Operation) -> dict[str, ir.Operation]:
    out = {}
    for op in module.regions[0].blocks[0].operations:
        if "sym_name" in op.attributes:
            out[ir.StringAttr(op.attributes["sym_name"]).value] = op.operation
    return out


class KernelTable:
    """Kernel key -> symbol, so identical kernels are emitted once per module. A legalized
    kernel's key hashes its template instance (parsed once per distinct kernel); a kernel built
    by a pass through the bindings brings its own key (`lookup` / `adopt`)."""

    def __init__(self, module: ir.Operation):
        self.module = module
        self.by_text: dict[str, str] = {}
        self.names = set(module_symbols(module))
        for name, op in module_symbols(module).items():
            if "relax.kernel_key" in op.attributes:
                self.by_text[ir.StringAttr(op.attributes["relax.kernel_key"]).value] = name

    def lookup(self, key: str) -> str | None:
        """The symbol of the kernel with this key, if the module has one."""
        return self.by_text.get(key)

    def fresh_name(self, base: str) -> str:
        name = base
        i = 0
        while name in self.names:
            i += 1
            name = f"{base}_{i}"
        self.names.add(name)
        return name

    def adopt(self, base: str, key: str, f: ir.Operation) -> str:
        """Move the kernel `f` (a `func.func` built elsewhere in this context) into the module as
        a private symbol named after `base`, unless one with `key` is there already."""
        name = self.by_text.get(key)
        if name is not None:
            return name
        name = self.fresh_name(base)
        self.by_text[key] = name
        f.detach_from_parent()
        f.attributes["sym_name"] = ir.StringAttr.get(name)
        f.attributes["sym_visibility"] = ir.StringAttr.get("private")
        f.attributes["relax.kernel_key"] = ir.StringAttr.get(key)
        self.module.regions[0].blocks[0].append(f)
        return name

    def get(self, base: str, text_of) -> str:
        """The kernel whose text `text_of(name)` writes (a legalizer template instance)."""
        import hashlib

        key = hashlib.sha1(text_of("__KERNEL__").encode()).hexdigest()[:16]
        name = self.by_text.get(key)
        if name is not None:
            return name
        name = self.fresh_name(base)
        self.by_text[key] = name
        try:
            parsed = ir.Module.parse(text_of(name))
        except ir.MLIRError as e:
            raise LegalizeError(f"internal error: the {base} kernel does not parse: {e}\n{text_of(name)}") from None
        f = parsed.body.operations[0].operation
        f.attributes["relax.kernel_key"] = ir.StringAttr.get(key)
        self.module.regions[0].blocks[0].append(f)
        return name


def replace_with_call_tir(op: ir.Operation, callee: str, sym_args) -> ir.Operation:
    attrs = {"callee": ir.FlatSymbolRefAttr.get(callee)}
    if sym_args:
        attrs["sym_args"] = ir.ArrayAttr.get([ir.StringAttr.get(str(e)) for e in sym_args])
    with ir.InsertionPoint(op), op.location:
        call = ir.Operation.create("relax_v.call_tir", results=[r.type for r in op.results],
                                   operands=list(op.operands), attributes=attrs)
    for old, new in zip(op.results, call.results):
        old.replace_all_uses_with(new)
    op.erase()
    return call


def legalize_op(op: ir.Operation, facts, table: KernelTable) -> ir.Operation:
    spec = OPS[op.name]
    info = OpInfo(op, facts)
    for i, t in enumerate(info.result_types):
        if not isinstance(t, TensorType) or not t.known:
            raise PassError(op, f"'{op.name}' op result #{i} has type {t}: legalization needs known dims "
                                f"(run relax-infer-shapes first)")
    for i, t in enumerate(info.operand_types):
        if isinstance(t, TensorType) and t.dims is None:
            raise PassError(op, f"'{op.name}' op operand #{i} has unknown rank; refine it with relax.match_cast")
    try:
        info = unsigned_legalize_info(spec, info)
        lz = spec.legalize(info)
    except (LegalizeError, DeduceError) as e:
        raise PassError(op, f"'{op.name}' op cannot be legalized: {e}") from None
    name = table.get(lz.kernel.op, lambda n: lz.kernel.text(n, lz.results))
    return replace_with_call_tir(op, name, lz.sym_args)


@dataclass(frozen=True)
class LegalizePass(ModulePass):
    """Replace graph ops by relax.call_tir of shared linalg-on-tensors kernels."""

    name: ClassVar[str] = "relax-legalize"
    ops: str = ""   # comma-separated op names (relax.add or add) to legalize; default all
    skip: str = ""  # comma-separated op names to keep at graph level

    def selected(self, name: str) -> bool:
        def names(s):
            return {n if n.startswith("relax.") else "relax." + n for n in s.replace(" ", "").split(",") if n}
        if name in GRAPH_LEVEL or not hasattr(OPS.get(name), "legalize"):
            return False
        if self.ops and name not in names(self.ops):
            return False
        return name not in names(self.skip)

    def validate(self) -> None:
        """Every name in ops= and skip= is a relax op (relax.add, add, call_library)."""
        known = set(OPS) | {n.split(".", 1)[1] for n in OPS}
        for option in ("ops", "skip"):
            for n in getattr(self, option).replace(" ", "").split(","):
                if n and n not in known:
                    raise PipelineError(f"{self.name}: unknown op '{n}' in {option}={suggest(n, sorted(known))}")

    def library_selected(self) -> bool:
        """`relax_v.call_library` becomes a call_tir of its library kernel unless skipped or left out."""
        def names(s):
            return {n.replace("relax_v.", "").replace("relax.", "") for n in s.replace(" ", "").split(",") if n}
        if self.ops and "call_library" not in names(self.ops):
            return False
        return "call_library" not in names(self.skip)

    def run(self, module: ir.Operation) -> None:
        check_module(module, infer=True)
        table = KernelTable(module)
        for f in graph_functions(module):
            facts = function_facts(f)
            todo: list[ir.Operation] = []

            def walk(block):
                for op in block.operations:
                    op = op.operation
                    if self.selected(op.name) or (op.name == "relax_v.call_library" and self.library_selected()):
                        todo.append(op)
                    for r in op.regions:
                        for b in r.blocks:
                            walk(b)

            for b in f.regions[0].blocks:
                walk(b)
            for op in todo:
                if op.name == "relax_v.call_library":
                    replace_with_call_tir(op, call_library_kernel(op, table), [])
                else:
                    legalize_op(op, facts, table)


PASSES = (LegalizePass,)
