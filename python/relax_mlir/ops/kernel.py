"""KernelBuilder: writes a destination-passing kernel `func.func` in linalg on tensors.

A kernel takes its inputs, then one output tensor per result, then `index` scalars (the values
of the call's `sym_args`), and returns the outputs. Op classes build kernels in `legalize()`; the
text is the key by which `relax-legalize` shares identical kernels between call sites.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from relax_mlir.dialect.types import FLOAT_DTYPES, TensorType, builtin_tensor_text
from relax_mlir.shape import Expr


class LegalizeError(Exception):
    """The op cannot be legalized with these types (reported at the op)."""


def zero_literal(dtype: str) -> str:
    if dtype == "i1":
        return "false"
    return "0.0" if dtype in FLOAT_DTYPES else "0"


def one_literal(dtype: str) -> str:
    if dtype == "i1":
        return "true"
    return "1.0" if dtype in FLOAT_DTYPES else "1"


def lowest_literal(dtype: str) -> str:
    return {"f32": "0xFF800000", "f16": "0xFC00", "bf16": "0xFF80", "f64": "0xFFF0000000000000",
            "i1": "false", "i8": "-128", "i16": "-32768", "i32": "-2147483648",
            "i64": "-9223372036854775808"}[dtype]


def highest_literal(dtype: str) -> str:
    return {"f32": "0x7F800000", "f16": "0x7C00", "bf16": "0x7F80", "f64": "0x7FF0000000000000",
            "i1": "true", "i8": "127", "i16": "32767", "i32": "2147483647",
            "i64": "9223372036854775807"}[dtype]


def affine_map(ndims: int, results: Sequence[str]) -> str:
    ds = ", ".join(f"d{i}" for i in range(ndims))
    return f"affine_map<({ds}) -> ({', '.join(results)})>"


def identity_map(rank: int) -> str:
    return affine_map(rank, [f"d{i}" for i in range(rank)])


def broadcast_map(operand: TensorType, out_rank: int, out: TensorType) -> str:
    """The indexing map of a right-aligned numpy-broadcast operand."""
    r = len(operand.dims)
    res = []
    for j, d in enumerate(operand.dims):
        i = out_rank - r + j
        od = out.dims[i]
        if d is not None and d.is_const and d.value == 1 and not (od is not None and od.is_const and od.value == 1):
            res.append("0")
        else:
            res.append(f"d{i}")
    return affine_map(out_rank, res)


@dataclass
class Kernel:
    """A kernel under construction. Values are SSA names in the kernel body."""

    op: str  # the op's short name, used to name the kernel
    inputs: list[TensorType]
    outputs: list[TensorType]
    n_syms: int = 0
    lines: list[str] = field(default_factory=list)
    _n: int = 0

    # names of the arguments
    def inp(self, i: int) -> str:
        return f"%in{i}"

    def out(self, i: int) -> str:
        return f"%out{i}"

    def sym(self, i: int) -> str:
        return f"%s{i}"

    @staticmethod
    def ty(t: TensorType) -> str:
        return builtin_tensor_text(t)

    def fresh(self, base: str = "v") -> str:
        self._n += 1
        return f"%{base}{self._n}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def const_index(self, v: int) -> str:
        name = f"%c{v}".replace("-", "m")
        decl = f"  {name} = arith.constant {v} : index"
        if decl not in self.lines:
            self.lines.insert(0, decl)
        return name

    def dim(self, value: str, t: TensorType, i: int) -> str:
        """The size of dim i of `value` (a constant if static)."""
        d = t.dims[i]
        if d is not None and d.is_const:
            return self.const_index(d.value)
        r = self.fresh("d")
        self.emit(f"{r} = tensor.dim {value}, {self.const_index(i)} : {self.ty(t)}")
        return r

    def empty(self, t: TensorType, dims_from: tuple[str, TensorType] | None = None,
              dyn: Sequence[str] | None = None) -> str:
        """tensor.empty of type t; dynamic sizes from `dyn`, or from a same-shaped value."""
        if dyn is None:
            dyn = []
            for i, d in enumerate(t.dims):
                if d is None or not d.is_const:
                    assert dims_from is not None, "dynamic empty needs its sizes"
                    dyn.append(self.dim(dims_from[0], dims_from[1], i))
        r = self.fresh("e")
        self.emit(f"{r} = tensor.empty({', '.join(dyn)}) : {self.ty(t)}")
        return r

    def fill(self, value_literal: str, dest: str, t: TensorType) -> str:
        c = self.fresh("cst")
        self.emit(f"{c} = arith.constant {value_literal} : {t.dtype}")
        r = self.fresh("f")
        self.emit(f"{r} = linalg.fill ins({c} : {t.dtype}) outs({dest} : {self.ty(t)}) -> {self.ty(t)}")
        return r

    def generic(self, ins: Sequence[tuple[str, TensorType, str]], outs: Sequence[tuple[str, TensorType, str]],
                iterators: Sequence[str], body: Sequence[str], results: Sequence[str]) -> list[str]:
        """linalg.generic. Block args are %a0.. (inputs) and %o0.. (outputs); `body` lines compute
        the yielded `results` (scalar SSA names)."""
        maps = [m for _, _, m in ins] + [m for _, _, m in outs]
        its = ", ".join(f'"{i}"' for i in iterators)
        g = self.fresh("g")
        rs = [g] if len(outs) == 1 else [f"{g}#{i}" for i in range(len(outs))]
        res_names = g if len(outs) == 1 else f"{g}:{len(outs)}"
        ins_t = f"ins({', '.join(v for v, _, _ in ins)} : {', '.join(self.ty(t) for _, t, _ in ins)}) " if ins else ""
        outs_t = f"outs({', '.join(v for v, _, _ in outs)} : {', '.join(self.ty(t) for _, t, _ in outs)})"
        self.emit(f"{res_names} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{its}]}} "
                  f"{ins_t}{outs_t} {{")
        bargs = [f"%a{i}: {t.dtype}" for i, (_, t, _) in enumerate(ins)] + \
                [f"%o{i}: {t.dtype}" for i, (_, t, _) in enumerate(outs)]
        self.lines.append(f"  ^bb0({', '.join(bargs)}):")
        for b in body:
            self.lines.append("    " + b)
        self.lines.append(f"    linalg.yield {', '.join(results)} : {', '.join(t.dtype for _, t, _ in outs)}")
        self.lines.append(f"  }} -> {', '.join(self.ty(t) for _, t, _ in outs)}")
        return rs

    def text(self, name: str, results: Sequence[str]) -> str:
        args = [f"%in{i}: {self.ty(t)}" for i, t in enumerate(self.inputs)] + \
               [f"%out{i}: {self.ty(t)}" for i, t in enumerate(self.outputs)] + \
               [f"%s{i}: index" for i in range(self.n_syms)]
        rts = ", ".join(self.ty(t) for t in self.outputs)
        body = "\n".join(self.lines)
        return (f"func.func private @{name}({', '.join(args)}) -> ({rts}) attributes {{relax.kernel = \"{self.op}\"}} {{\n"
                f"{body}\n  return {', '.join(results)} : {rts}\n}}")


@dataclass
class Legalized:
    """What an op's `legalize()` returns: the kernel, its results, and the symbolic int args."""

    kernel: Kernel
    results: list[str]
    sym_args: list[Expr] = field(default_factory=list)


def scalar_body(template: Sequence[str], dtype: str, renames: dict[str, str], out: str = "%r") -> tuple[list[str], str]:
    """Instantiate a scalar template ('%r = arith.addf %a, %b : {t}') with fresh names."""
    import re

    uniq = {}

    def sub(m):
        n = m.group(0)
        if n in renames:
            return renames[n]
        if n not in uniq:
            uniq[n] = f"%t{len(uniq)}_{n[1:]}"
        return uniq[n]

    lines = [re.sub(r"%[A-Za-z_][A-Za-z0-9_]*", sub, l.replace("{t}", dtype)) for l in template]
    return lines, sub(re.match(r"%[A-Za-z_][A-Za-z0-9_]*", out))
