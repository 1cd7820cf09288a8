"""`to_script`: a module as short Python-like text for humans (TVMScript's look), one line per op.

    from relax_mlir.core.script import to_script
    print(to_script(module))          # a relax_mlir.Module, an ir.Module or an ir.Operation

    # symbols: s >= 1
    def main(arg0: Tensor[(s, 64), "f32"], arg1: Tensor[(64, 64), "f32"]) -> Tensor[(s, 64), "f32"]:
        lv0: Tensor[(s, 64), "f32"] = relax.matmul(arg0, arg1)
        lv1: Tensor[(), "f32"] = relax.constant(value=0.5)
        lv2: Tensor[(s, 64), "f32"] = relax.call_tir(fused_multiply, (lv0, lv1), sym_args=[s])
        return lv2

    # kernel fused_multiply(f32[?x64], f32[], f32[?x64]) -> f32[?x64]: 7 ops (arith, linalg, tensor)

The text is written from the IR through the bindings (never from printed MLIR): every binding is
annotated with its type, symbolic dims print as expressions (`2*n + 1`), attributes as keyword
arguments (`axes=[1, 0]`, `shape=[s, 1]`, large constants as `<f32[128x64]>`), discardable
(dotted) attributes are not shown. Parameters are `argN` unless `arg_attrs` names them
(`relax.name`); values are `lvN`. A `relax_v.dataflow` region is a `with dataflow():` block
ending in `output(...)`, whose results take the names of the values it outputs (as in TVMScript).
A kernel (`func.func` with `relax.kernel`) is one comment line: its signature and op count. Other
ops print as `ns.op(operands, attr=...)`; `relax_v.*` ops print as `relax.*`. It is a view: it
does not parse back."""
from __future__ import annotations

import re
from typing import Iterable

from mlir import ir

from relax_mlir.dialect.types import OtherType, PrimType, ShapeType, StorageType, TensorType, view
from relax_mlir.shape import parse as parse_expr

__all__ = ["to_script"]

INDENT = "    "
ELIDE_ABOVE = 8  # dense constants with more elements print as <f32[128x64]>
_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_STRUCTURAL = frozenset({"operandSegmentSizes", "resultSegmentSizes"})  # implied by the operands


def to_script(op) -> str:
    """The script form of a module (or of one function): one line per op."""
    op = _as_operation(op)
    with op.context:
        if op.name == "func.func":
            return "\n".join(_function(op)) + "\n"
        parts: list[list[str]] = []
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    parts.append(_top_level(child.operation))
        out: list[str] = []
        for i, p in enumerate(parts):  # a blank line around each function; one-line items stay together
            if i and not (len(p) == 1 and len(parts[i - 1]) == 1):
                out.append("")
            out.extend(p)
        return "\n".join(out) + ("\n" if out else "")


def _as_operation(op) -> ir.Operation:
    if hasattr(op, "session") and hasattr(op, "op"):  # relax_mlir.Module
        op = op.op
    if isinstance(op, ir.Module):
        return op.operation
    return op.operation


def _top_level(op: ir.Operation) -> list[str]:
    if op.name == "func.func":
        if "relax.kernel" in op.attributes:
            return [_kernel_line(op)]
        return _function(op)
    sym = f" {_symbol(op)}" if "sym_name" in op.attributes else ""
    has_body = any(len(r.blocks) for r in op.regions)
    return [f"# {op.name}{sym}: {_count_ops(op)} ops inside" if has_body else f"# {op.name}{sym}"]


def _symbol(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


# --- types ------------------------------------------------------------------------------------


def _dim(d) -> str:
    return "?" if d is None else str(d)


def _dims(dims) -> str:
    inner = ", ".join(_dim(d) for d in dims)
    return f"({inner},)" if len(dims) == 1 else f"({inner})"


def type_text(t: ir.Type) -> str:
    """`Tensor[(n, 4), "f32"]`, `Shape[(n, 4)]`, `Prim[n]`, `Storage`; builtin tensors and memrefs
    as `f32[?x64]` / `memref f32[?x64]`; anything else as its MLIR text."""
    try:
        v = view(t)
    except ValueError:
        return str(t)
    if isinstance(v, TensorType):
        if v.dims is None:
            return f'Tensor["{v.dtype}"]'
        return f'Tensor[{_dims(v.dims)}, "{v.dtype}"]'
    if isinstance(v, ShapeType):
        return f"Shape[{_dims(v.dims)}]"
    if isinstance(v, PrimType):
        return f"Prim[{_dim(v.value)}]"
    if isinstance(v, StorageType):
        return "Storage"
    assert isinstance(v, OtherType)
    return _builtin_type(t)


def _builtin_type(t: ir.Type) -> str:
    for cls, prefix in ((ir.RankedTensorType, ""), (ir.MemRefType, "memref ")):
        s = t.maybe_downcast() if hasattr(t, "maybe_downcast") else t
        if isinstance(s, cls):
            dims = "x".join("?" if s.is_dynamic_dim(i) else str(s.get_dim_size(i)) for i in range(s.rank))
            return f"{prefix}{s.element_type}[{dims}]"
    return str(t)


# --- attributes -------------------------------------------------------------------------------


class _Printer:
    """Names and prints the values and ops of one function."""

    def __init__(self, symbols: frozenset[str]):
        self.symbols = symbols
        self.names: dict[ir.Value, str] = {}
        self.next_lv = 0
        self.next_bb = 0

    # values

    def new_name(self, v: ir.Value) -> str:
        name = f"lv{self.next_lv}"
        self.next_lv += 1
        self.names[v] = name
        return name

    def name(self, v: ir.Value) -> str:
        return self.names.get(v, "<?>")

    def operands(self, vs: Iterable[ir.Value]) -> str:
        return ", ".join(self.name(v) for v in vs)

    # attributes

    def attr(self, a: ir.Attribute) -> str:
        if isinstance(a, ir.BoolAttr):
            return str(bool(a.value))
        if isinstance(a, ir.IntegerAttr):
            return str(a.value)
        if isinstance(a, ir.FloatAttr):
            return _float(a.value, str(a.type))
        if isinstance(a, ir.StringAttr):
            return self.string(a.value)
        if isinstance(a, ir.FlatSymbolRefAttr):
            return a.value
        if isinstance(a, ir.TypeAttr):
            return f'"{a.value}"'
        if isinstance(a, ir.UnitAttr):
            return "True"
        if isinstance(a, ir.ArrayAttr):
            return "[" + ", ".join(self.attr(x) for x in a) + "]"
        if isinstance(a, (ir.DenseIntElementsAttr, ir.DenseFPElementsAttr)):
            return _dense(a)
        if isinstance(a, ir.DictAttr):
            return "{" + ", ".join(f"{x.name}: {self.attr(x.attr)}" for x in (a[i] for i in range(len(a)))) + "}"
        return str(a)

    def string(self, s: str) -> str:
        """A symbolic expression over this function's symbols prints bare (`s`, `2*n + 1`), any
        other string quoted."""
        try:
            e = parse_expr(s)
        except ValueError:
            return _quote(s)
        if not e.is_const and e.symbols() <= self.symbols:
            return str(e)
        return _quote(s)

    def attrs(self, op: ir.Operation, skip: tuple[str, ...] = ()) -> list[str]:
        out = []
        for i in range(len(op.attributes)):
            na = op.attributes[i]
            if "." in na.name or na.name in skip or na.name in _STRUCTURAL:
                continue
            key = na.name if _IDENT.match(na.name) else _quote(na.name)
            out.append(f"{key}={self.attr(na.attr)}")
        return out


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _float(x: float, dtype: str) -> str:
    import numpy as np

    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    if dtype == "f32":
        return str(np.float32(x))
    if dtype == "f16":
        return str(np.float16(x))
    if dtype == "bf16":
        return f"{x:.4g}"
    return repr(x)


def _dense(a) -> str:
    st = ir.ShapedType(a.type)
    et = str(st.element_type)
    shape = list(st.shape)
    size = 1
    for d in shape:
        size *= d
    if a.is_splat:
        v = _scalar(a.get_splat_value(), et)
        if not shape:
            return v
        return f"<{et}[{'x'.join(map(str, shape))}] splat {v}>"
    if size <= ELIDE_ABOVE and et != "bf16":
        import numpy as np

        return _nested(np.array(a).tolist(), et)
    return f"<{et}[{'x'.join(map(str, shape))}]>"


def _scalar(a: ir.Attribute, et: str) -> str:
    if isinstance(a, ir.BoolAttr):
        return str(bool(a.value))
    if isinstance(a, ir.IntegerAttr):
        return str(a.value)
    if isinstance(a, ir.FloatAttr):
        return _float(a.value, et)
    return str(a)


def _nested(x, et: str) -> str:
    if isinstance(x, list):
        return "[" + ", ".join(_nested(y, et) for y in x) + "]"
    if isinstance(x, float):
        return _float(x, et)
    return str(x)


# --- functions ------------------------------------------------------------------------------


def _function_symbols(f: ir.Operation) -> frozenset[str]:
    out: set[str] = set()

    def add(t: ir.Type) -> None:
        try:
            v = view(t)
        except ValueError:
            return
        if isinstance(v, TensorType):
            out.update(v.symbols())
        elif isinstance(v, (ShapeType,)):
            for d in v.dims:
                if d is not None:
                    out.update(d.symbols())
        elif isinstance(v, PrimType) and v.value is not None:
            out.update(v.value.symbols())

    ft = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
    for t in list(ft.inputs) + list(ft.results):
        add(t)

    def walk(region_holder: ir.Operation) -> None:
        for region in region_holder.regions:
            for block in region.blocks:
                for a in block.arguments:
                    add(a.type)
                for op in block.operations:
                    for r in op.results:
                        add(r.type)
                    walk(op.operation)

    walk(f)
    for key in ("relax.symbol_bounds", "relax.symbol_lower"):
        if key in f.attributes:
            d = ir.DictAttr(f.attributes[key])
            out.update(d[i].name for i in range(len(d)))
    return frozenset(out)


def _arg_names(f: ir.Operation, n: int) -> list[str]:
    names = [f"arg{i}" for i in range(n)]
    if "arg_attrs" in f.attributes:
        for i, d in enumerate(ir.ArrayAttr(f.attributes["arg_attrs"])):
            d = ir.DictAttr(d)
            if i < n and "relax.name" in d:
                name = ir.StringAttr(d["relax.name"]).value
                if _IDENT.match(name) and name not in names:
                    names[i] = name
    return names


def _symbol_facts(f: ir.Operation) -> str | None:
    lower: dict[str, str] = {}
    upper: dict[str, str] = {}
    for key, into in (("relax.symbol_lower", lower), ("relax.symbol_bounds", upper)):
        if key in f.attributes:
            d = ir.DictAttr(f.attributes[key])
            for i in range(len(d)):
                na = d[i]
                into[na.name] = str(ir.IntegerAttr(na.attr).value) if isinstance(na.attr, ir.IntegerAttr) \
                    else str(na.attr)
    facts = []
    for s in sorted(set(lower) | set(upper)):
        if s in lower and s in upper:
            facts.append(f"{lower[s]} <= {s} <= {upper[s]}")
        elif s in lower:
            facts.append(f"{s} >= {lower[s]}")
        else:
            facts.append(f"{s} <= {upper[s]}")
    return "# symbols: " + ", ".join(facts) if facts else None


def _function(f: ir.Operation) -> list[str]:
    p = _Printer(_function_symbols(f))
    ft = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
    name = _symbol(f)
    entry = f.regions[0].blocks[0] if len(f.regions[0].blocks) else None
    n = len(ft.inputs)
    names = _arg_names(f, n)
    if entry is not None:
        for a, nm in zip(entry.arguments, names):
            p.names[a] = nm
    params = ", ".join(f"{nm}: {type_text(t)}" for nm, t in zip(names, ft.inputs))
    results = [type_text(t) for t in ft.results]
    ret = "None" if not results else results[0] if len(results) == 1 else "(" + ", ".join(results) + ")"
    lines = []
    facts = _symbol_facts(f)
    if facts:
        lines.append(facts)
    private = "  # private" if "sym_visibility" in f.attributes else ""
    lines.append(f"def {name}({params}) -> {ret}:{private}")
    if entry is None:
        lines.append(INDENT + "...  # external")
        return lines
    _block(p, entry, 1, lines)
    return lines


def _block(p: _Printer, block: ir.Block, depth: int, lines: list[str]) -> None:
    for op in block.operations:
        _op(p, op.operation, depth, lines)


def _op(p: _Printer, op: ir.Operation, depth: int, lines: list[str]) -> None:
    ind = INDENT * depth
    name = op.name
    if name in ("func.return", "relax.return"):
        lines.append(ind + ("return " + p.operands(op.operands) if len(op.operands) else "return"))
        return
    if name == "relax_v.dataflow" and len(op.regions) == 1 and len(op.regions[0].blocks) == 1:
        _dataflow(p, op, depth, lines)
        return
    if name == "func.call":
        call = f"{ir.FlatSymbolRefAttr(op.attributes['callee']).value}({p.operands(op.operands)})"
    else:
        call = f"{_short_name(name)}({', '.join(_args(p, op))})"
    lines.append(ind + _bind(p, op) + call + (":" if op.regions else "") + _bind_comment(op))
    for k, region in enumerate(op.regions):
        if k and len(region.blocks):  # regions after the first: scf.if's else, or numbered
            lines.append(ind + ("else:" if name == "scf.if" else f"# region {k}:"))
        for block in region.blocks:
            if len(block.arguments):
                args = []
                for a in block.arguments:
                    args.append(f"b{p.next_bb}: {type_text(a.type)}")
                    p.names[a] = f"b{p.next_bb}"
                    p.next_bb += 1
                lines.append(ind + INDENT + "# block(" + ", ".join(args) + ")")
            _block(p, block, depth + 1, lines)


def _short_name(name: str) -> str:
    return "relax." + name[len("relax_v."):] if name.startswith("relax_v.") else name


def _args(p: _Printer, op: ir.Operation) -> list[str]:
    name = op.name
    if name in ("relax_v.call_tir", "relax_v.call_library"):
        callee = p.attr(op.attributes["callee"]) if "callee" in op.attributes else "<?>"
        if name == "relax_v.call_library":
            callee = _quote(ir.StringAttr(op.attributes["callee"]).value) if "callee" in op.attributes else callee
        ops = list(op.operands)
        tup = "(" + p.operands(ops) + ("," if len(ops) == 1 else "") + ")"
        return [callee, tup] + p.attrs(op, skip=("callee",))
    return ([p.operands(op.operands)] if len(op.operands) else []) + p.attrs(op)


def _bind(p: _Printer, op: ir.Operation) -> str:
    rs = list(op.results)
    if not rs:
        return ""
    if len(rs) == 1:
        return f"{p.new_name(rs[0])}: {type_text(rs[0].type)} = "
    names = [p.new_name(r) for r in rs]
    return f"{', '.join(names)} = "


def _bind_comment(op: ir.Operation) -> str:
    rs = list(op.results)
    return "  # " + ", ".join(type_text(r.type) for r in rs) if len(rs) > 1 else ""


def _dataflow(p: _Printer, op: ir.Operation, depth: int, lines: list[str]) -> None:
    ind = INDENT * depth
    lines.append(ind + "with dataflow():")
    block = op.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    for inner in ops[:-1]:
        _op(p, inner, depth + 1, lines)
    term = ops[-1] if ops else None
    if term is not None and term.name in ("gpu.yield", "scf.yield"):
        outs = list(term.operands)
        lines.append(ind + INDENT + f"output({p.operands(outs)})")
        for r, v in zip(op.results, outs):  # the region's results are the values it outputs
            p.names[r] = p.name(v)
    elif term is not None:
        _op(p, term, depth + 1, lines)
        for r in op.results:
            p.new_name(r)


# --- kernels ------------------------------------------------------------------------------------


def _count_ops(op: ir.Operation) -> int:
    """The ops nested in `op` (not `op` itself, nor func ops such as `func.return`)."""
    n = 0
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                n += (not child.name.startswith("func.")) + _count_ops(child)
    return n


def _dialects(op: ir.Operation, out: set[str]) -> set[str]:
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                ns = child.operation.name.split(".", 1)[0]
                if ns != "func":
                    out.add(ns)
                _dialects(child.operation, out)
    return out


def _kernel_line(f: ir.Operation) -> str:
    ft = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
    params = ", ".join(type_text(t) for t in ft.inputs)
    results = [type_text(t) for t in ft.results]
    ret = "None" if not results else results[0] if len(results) == 1 else "(" + ", ".join(results) + ")"
    n = _count_ops(f)
    dialects = sorted(_dialects(f, set()))
    what = f"{n} op{'s' if n != 1 else ''}" + (f" ({', '.join(dialects)})" if dialects else "")
    return f"# kernel {_symbol(f)}({params}) -> {ret}: {what}"
