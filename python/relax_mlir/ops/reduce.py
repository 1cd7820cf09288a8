"""Reductions over axes: sum, mean, max, min, prod; bitwise and / or / xor of integers."""
from __future__ import annotations

import math
from typing import ClassVar

from relax_mlir.dialect.spec import DeduceError, OpInfo, OpSpec, TENSOR, attr, operand, relax_op, result_
from relax_mlir.dialect.types import FLOAT_DTYPES, TensorType
from relax_mlir.ops.common import ONE, normalize_axes, require_rank
from relax_mlir.ops.kernel import (Kernel, Legalized, affine_map, highest_literal, identity_map, lowest_literal,
                                   one_literal, zero_literal)


class ReduceOp(OpSpec):
    """Base of the reductions: `kind` names the combining operation (and the identity the
    accumulator starts from); the result drops the reduced axes, or keeps them as 1."""

    x = operand(TENSOR)
    result = result_(TENSOR)
    axes = attr("array", doc="axes to reduce (default: all)")
    keepdims = attr("any", doc="bool: keep reduced axes as size 1 (default false)")
    kind: ClassVar[str] = ""

    @classmethod
    def reduced_axes(cls, op: OpInfo, rank: int) -> list[int]:
        axes = op.attr("axes")
        return sorted(normalize_axes(axes, rank)) if axes is not None else list(range(rank))

    @classmethod
    def deduce(cls, op: OpInfo):
        x = op.tensor(0)
        d = require_rank(x, "operand")
        if cls.kind == "mean" and x.dtype not in FLOAT_DTYPES:
            raise DeduceError(f"mean needs a floating-point element type, got {x.dtype}")
        if x.dtype == "i1" and cls.kind in ("sum", "prod"):
            raise DeduceError("cannot sum booleans; cast with relax.astype first")
        if cls.kind in _BITWISE and x.dtype in FLOAT_DTYPES:
            raise DeduceError(f"{cls.name} needs an integer or boolean element type, got {x.dtype}")
        axes = set(cls.reduced_axes(op, len(d)))
        keep = bool(op.attr("keepdims", False))
        dims = tuple(ONE if i in axes else s for i, s in enumerate(d) if keep or i not in axes)
        return [TensorType(dims, x.dtype)]

    @classmethod
    def legalize(cls, op: OpInfo) -> Legalized:
        x, r = op.tensor(0), op.result_types[0]
        axes = cls.reduced_axes(op, len(x.dims))
        keep = bool(op.attr("keepdims", False))
        k = Kernel(cls.kind, [x], [r])
        rank = len(r.dims)
        extent = [x.dims[a] for a in axes]
        short = all(d is not None and d.is_const for d in extent) and math.prod(d.value for d in extent) <= 16
        if cls.kind in ("sum", "mean", "prod") and x.dtype in ("f16", "bf16") and not short:
            # accumulated in f32 and rounded once: a 16-bit running sum stops growing once its ulp
            # passes the terms (a bias gradient over 12000 f16 values was 2048, not 5188). XLA keeps
            # 16-bit partial sums that do not stall; a short row (at most 16 terms, known at compile
            # time) it sums in order in 16 bits, as here, bit for bit.
            acc_t = TensorType(r.dims, "f32")
            acc = reduce_into(k, cls.kind, k.inp(0), x, axes, keep, k.empty(acc_t, dims_from=(k.out(0), r)), acc_t,
                              prologue=[f"%x = arith.extf %a0 : {x.dtype} to f32"])
            body = []
            if cls.kind == "mean":
                body.append(f"%s = arith.divf %a0, {count_as(k, k.inp(0), x, axes, 'f32')} : f32")
            body.append(f"%r = arith.truncf {'%s' if body else '%a0'} : f32 to {x.dtype}")
            red = k.generic([(acc, acc_t, identity_map(rank))], [(k.out(0), r, identity_map(rank))],
                            ["parallel"] * rank, body, ["%r"])[0]
            return Legalized(k, [red])
        red = reduce_into(k, cls.kind, k.inp(0), x, axes, keep, k.out(0), r)
        if cls.kind == "mean":
            cnt = count_as(k, k.inp(0), x, axes, x.dtype)
            red = k.generic([], [(red, r, identity_map(rank))], ["parallel"] * rank,
                            [f"%m = arith.divf %o0, {cnt} : {x.dtype}"], ["%m"])[0]
        return Legalized(k, [red])


@relax_op
class SumOp(ReduceOp):
    """Sum over axes. Attributes: axes (array, default all), keepdims (bool)."""

    name = "relax.sum"
    kind = "sum"


@relax_op
class MeanOp(ReduceOp):
    """Mean over axes. Attributes: axes (array, default all), keepdims (bool)."""

    name = "relax.mean"
    kind = "mean"


@relax_op
class MaxOp(ReduceOp):
    """Maximum over axes. Attributes: axes (array, default all), keepdims (bool)."""

    name = "relax.max"
    kind = "max"


@relax_op
class MinOp(ReduceOp):
    """Minimum over axes. Attributes: axes (array, default all), keepdims (bool)."""

    name = "relax.min"
    kind = "min"


@relax_op
class ProdOp(ReduceOp):
    """Product over axes. Attributes: axes (array, default all), keepdims (bool)."""

    name = "relax.prod"
    kind = "prod"


@relax_op
class ReduceBitwiseAndOp(ReduceOp):
    """Bitwise and over axes (integers, booleans; the identity: all bits set). Attributes: axes
    (array, default all), keepdims (bool)."""

    name = "relax.reduce_bitwise_and"
    kind = "and"


@relax_op
class ReduceBitwiseOrOp(ReduceOp):
    """Bitwise or over axes (integers, booleans). Attributes: axes (array, default all), keepdims
    (bool)."""

    name = "relax.reduce_bitwise_or"
    kind = "or"


@relax_op
class ReduceBitwiseXorOp(ReduceOp):
    """Bitwise xor over axes (integers, booleans: parity). Attributes: axes (array, default all),
    keepdims (bool)."""

    name = "relax.reduce_bitwise_xor"
    kind = "xor"


# --- the reduction kernels (also used by ops/nn.py) -------------------------------------------

_BITWISE = {"and": "arith.andi", "or": "arith.ori", "xor": "arith.xori"}


def _all_bits(dtype: str) -> str:
    return "true" if dtype == "i1" else "-1"


_INIT = {"sum": zero_literal, "mean": zero_literal, "prod": one_literal, "max": lowest_literal, "min": highest_literal,
         "logaddexp": lowest_literal, "and": _all_bits, "or": zero_literal, "xor": zero_literal}


def combine(kind: str, dtype: str, a: str, b: str, r: str) -> list[str]:
    """Lines computing r = a <kind> b. i1: max is or, min is and (false < true); integer max/min are
    a compare and a select (`arith.maxsi` reaches Vulkan as a signedness-dependent SMax)."""
    if kind == "logaddexp":  # jax's: select(isnan(a - b), a + b, max(a, b) + log1p(exp(-|a - b|)))
        return [f"{r}_m = arith.maximumf {a}, {b} : {dtype}", f"{r}_d = arith.subf {a}, {b} : {dtype}",
                f"{r}_n = arith.cmpf uno, {r}_d, {r}_d : {dtype}", f"{r}_s = arith.addf {a}, {b} : {dtype}",
                f"{r}_a = math.absf {r}_d : {dtype}", f"{r}_g = arith.negf {r}_a : {dtype}",
                f"{r}_e = math.exp {r}_g : {dtype}", f"{r}_l = math.log1p {r}_e : {dtype}",
                f"{r}_v = arith.addf {r}_m, {r}_l : {dtype}", f"{r} = arith.select {r}_n, {r}_s, {r}_v : {dtype}"]
    if kind in _BITWISE:
        return [f"{r} = {_BITWISE[kind]} {a}, {b} : {dtype}"]
    if dtype in FLOAT_DTYPES:
        op = {"sum": "arith.addf", "mean": "arith.addf", "prod": "arith.mulf", "max": "arith.maximumf",
              "min": "arith.minimumf"}[kind]
        return [f"{r} = {op} {a}, {b} : {dtype}"]
    if dtype == "i1" and kind in ("max", "min"):
        return [f"{r} = {'arith.ori' if kind == 'max' else 'arith.andi'} {a}, {b} : i1"]
    if kind in ("max", "min"):
        c = f"{r}_c"
        return [f"{c} = arith.cmpi {'sgt' if kind == 'max' else 'slt'}, {a}, {b} : {dtype}",
                f"{r} = arith.select {c}, {a}, {b} : {dtype}"]
    return [f"{r} = {'arith.muli' if kind == 'prod' else 'arith.addi'} {a}, {b} : {dtype}"]


def reduce_into(k: Kernel, kind: str, src: str, src_t: TensorType, axes: list[int], keep: bool,
                dest: str, dest_t: TensorType, prologue: list[str] | None = None, extra_ins=()) -> str:
    """One linalg.generic reducing `src` over `axes` into `dest` (filled with the identity first).
    `prologue` lines may transform %a0 into %x before combining (e.g. exp(x - max))."""
    rank = len(src_t.dims)
    if keep and axes:
        # Reduce into the dest collapsed to the kept dims, then expand back: an output map with
        # constant 0 results (d0, d1) -> (d0, 0) aborts upstream vectorization (an assertion,
        # not a diagnostic), so it is never emitted.
        kept = [i for i in range(rank) if i not in axes]
        groups: list[list[int]] = [[] for _ in kept]
        for i in range(rank):
            if groups:
                owner = max([g for g, a in enumerate(kept) if a <= i], default=0)
                groups[owner].append(i)
        red_t = TensorType(tuple(dest_t.dims[i] for i in kept), dest_t.dtype)
        reassoc = "[" + ", ".join("[" + ", ".join(str(i) for i in g) + "]" for g in groups) + "]"
        c = k.fresh("col")
        k.emit(f"{c} = tensor.collapse_shape {dest} {reassoc} : {k.ty(dest_t)} into {k.ty(red_t)}")
        r = reduce_into(k, kind, src, src_t, axes, False, c, red_t, prologue, extra_ins)
        sizes = [k.dim(dest, dest_t, i) if not (d is not None and d.is_const) else str(d.value)
                 for i, d in enumerate(dest_t.dims)]
        e = k.fresh("exp")
        k.emit(f"{e} = tensor.expand_shape {r} {reassoc} output_shape [{', '.join(sizes)}] : "
               f"{k.ty(red_t)} into {k.ty(dest_t)}")
        return e
    f = k.fill(_INIT[kind](dest_t.dtype), dest, dest_t)  # (the accumulator's type: f32 for f16 sums)
    omap = [("0" if i in axes else f"d{i}") for i in range(rank) if keep or i not in axes]
    its = ["reduction" if i in axes else "parallel" for i in range(rank)]
    body = list(prologue or [])
    o = "%o0"
    body += combine(kind, dest_t.dtype, "%x" if prologue else "%a0", o, "%y")
    ins = [(src, src_t, identity_map(rank))] + list(extra_ins)
    return k.generic(ins, [(f, dest_t, affine_map(rank, omap))], its, body, ["%y"])[0]


def count_as(k: Kernel, value: str, t: TensorType, axes: list[int], dtype: str) -> str:
    """The number of elements over `axes`, as a scalar of `dtype`."""
    n = None
    for a in axes:
        d = k.dim(value, t, a)
        if n is None:
            n = d
        else:
            m = k.fresh("n")
            k.emit(f"{m} = arith.muli {n}, {d} : index")
            n = m
    n = n or k.const_index(1)
    i = k.fresh("ni")
    wide = "i64" if dtype == "f64" else "i32"  # no i64 in f32 kernels (SPIR-V without Int64)
    k.emit(f"{i} = arith.index_cast {n} : index to {wide}")
    c = k.fresh("nf")
    k.emit(f"{c} = arith.sitofp {i} : {wide} to {dtype}")
    return c
