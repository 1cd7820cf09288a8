"""Slicing converters: slice and real_dynamic_slice (relax.strided_slice with symbolic positions
traced from shape computations), dynamic_slice, dynamic_update_slice, pad, reverse
(ops/manipulate.py, ops/slicing.py).
"""
from __future__ import annotations

from relax_mlir.frontend.stablehlo.common import Val, _dtype_attr, _ints, _known_ok, _merge_dims, _res
from relax_mlir.frontend.stablehlo.unsigned import signed_index
from relax_mlir.frontend.stablehlo.registry import register_converters
from relax_mlir.shape import ceildiv, const, max_, min_


def _slice(im, op, ins):
    (x,) = ins
    rdims, dt = _res(op)
    start = _ints(op.attributes["start_indices"])
    limit = _ints(op.attributes["limit_indices"])
    strides = _ints(op.attributes["strides"])
    if x.known is not None and len(x.dims) == 1:
        return Val(None, dt, rdims, x.known[start[0]:limit[0]:strides[0]])
    axes = list(range(len(x.dims)))
    return im.emit("relax.strided_slice", [x], len(rdims), dt,
                   {"axes": axes, "begin": start, "end": limit, "strides": strides},
                   dims=_merge_dims(rdims))


def _real_dynamic_slice(im, op, ins):
    """A slice whose start/limit/strides are shape computations (what jax emits for a static
    slice of a symbolic dim): relax.strided_slice with symbolic positions. StableHLO requires
    0 <= start <= limit <= dim; positions outside are clamped into [0, dim] (XLA's behaviour),
    never counted from the end."""
    x, start, limit, strides = ins
    rdims, dt = _res(op)
    if not _known_ok([start, limit]) and strides.known is not None:
        sizes = _slice_sizes_of(im, op)
        if sizes is not None and all(v.is_const and v.value == 1 for v in strides.known):
            return _run_time_slice(im, x, start, sizes, dt, rdims)
    if not _known_ok([start, limit, strides]):
        raise ValueError("start_indices, limit_indices and strides must be shape computations of symbols "
                         "and constants (run-time slice bounds give a result of unknown shape)")
    r = len(x.dims)
    if not (len(start.known) == len(limit.known) == len(strides.known) == r):
        raise ValueError(f"index operands must have {r} entries (the operand's rank)")
    facts = im.int_facts()
    steps = []
    for s in strides.known:
        if not s.is_const or s.value < 1:
            raise ValueError(f"strides must be positive constants, got {s}")
        steps.append(s.value)
    begin, end, dims = [], [], []
    for i in range(r):
        b, e, d = start.known[i], limit.known[i], x.dims[i]
        b = b if facts.prove_ge(b, 0) else max_(b, const(0))
        e = e if facts.prove_ge(e, 0) else max_(e, const(0))
        if d is not None:
            b = b if facts.prove_le(b, d) else min_(b, d)
            e = e if facts.prove_le(e, d) else min_(e, d)
        ext = e - b
        if not facts.prove_ge(ext, 0):
            ext = max_(ext, const(0))
        dims.append(ext if steps[i] == 1 else ceildiv(ext, steps[i]))
        begin.append(b)
        end.append(e)
    if x.known is not None and r == 1 and all(v.is_const for v in begin + end):
        return Val(None, dt, _merge_dims(rdims, dims), x.known[begin[0].value:end[0].value:steps[0]])
    return im.emit("relax.strided_slice", [x], r, dt,
                   {"axes": list(range(r)), "begin": begin, "end": end, "strides": steps},
                   dims=_merge_dims(rdims, dims))


def _slice_sizes_of(im, op) -> list | None:
    """limit - start of a real_dynamic_slice whose limit is `add(start, sizes)` with known sizes
    (jax's lax.dynamic_slice of an operand with symbolic dims), else None."""
    start, limit = op.operands[1], op.operands[2]
    owner = limit.owner
    if getattr(owner, "name", None) != "stablehlo.add":
        return None
    a, b = owner.operands[0], owner.operands[1]
    other = b if a == start else a if b == start else None
    v = im.env.get(other) if other is not None else None
    return list(v.known) if v is not None and v.known is not None else None


def _run_time_slice(im, x: Val, start: Val, sizes: list, dt: str, rdims) -> Val:
    """relax.dynamic_slice at the run-time positions of the 1-D `start` (StableHLO clamps them)."""
    r = len(x.dims)
    if len(sizes) != r:
        raise ValueError(f"index operands must have {r} entries (the operand's rank)")
    starts = []
    for i in range(r):
        if start.known is not None:
            starts.append(Val(None, start.dtype, [], [start.known[i]]))
            continue
        e = im.emit("relax.strided_slice", [start], 1, start.dtype, {"axes": [0], "begin": [i], "end": [i + 1]},
                    dims=[const(1)])
        starts.append(im.reshape(e, []))
    return im.emit("relax.dynamic_slice", [x] + starts, r, dt, {"sizes": sizes}, dims=_merge_dims(rdims, sizes))


def _start_operands(im, starts: list[Val]) -> list[Val]:
    """Scalar start indices of one signed integer type (i64 when they differ or are unsigned)."""
    starts = [signed_index(im, s) for s in starts]
    if len({s.dtype for s in starts}) <= 1:
        return starts
    return [s if s.dtype == "i64" else im.emit("relax.astype", [s], 0, "i64", {"dtype": _dtype_attr("i64")}, dims=[])
            for s in starts]


def _dynamic_slice(im, op, ins):
    x, starts = ins[0], ins[1:]
    rdims, dt = _res(op)
    sizes = _ints(op.attributes["slice_sizes"])
    return im.emit("relax.dynamic_slice", [x] + _start_operands(im, starts), len(sizes), dt, {"sizes": sizes},
                   dims=[const(s) for s in sizes])


def _dynamic_update_slice(im, op, ins):
    x, upd, starts = ins[0], ins[1], ins[2:]
    rdims, dt = _res(op)
    return im.emit("relax.dynamic_update_slice", [x, upd] + _start_operands(im, starts), len(x.dims), dt,
                   dims=_merge_dims(rdims, x.dims))


def _pad(im, op, ins):
    x, pv = ins
    rdims, dt = _res(op)
    lo = _ints(op.attributes["edge_padding_low"])
    hi = _ints(op.attributes["edge_padding_high"])
    it = _ints(op.attributes["interior_padding"])
    return _pad_impl(im, x, pv, lo, hi, it, rdims, dt)


def _pad_impl(im, x, pv, lo: list[int], hi: list[int], it: list[int], rdims, dt):
    facts = im.int_facts()
    dims = []
    for n, a, b, c in zip(x.dims, lo, hi, it):
        if n is None:
            dims.append(None)
            continue
        gaps = const(0) if c == 0 else (n - 1 if facts.prove_ge(n, 1) else max_(n - 1, const(0)))
        dims.append(n + gaps * c + a + b)
    return im.emit("relax.pad", [x, pv], len(x.dims), dt, {"low": lo, "high": hi, "interior": it},
                   dims=_merge_dims(rdims, dims))


def _dynamic_pad(im, op, ins):
    """stablehlo.dynamic_pad (jnp.pad by an amount computed from a symbolic dim): relax.pad where
    the amounts are constants; symbolic edge amounts (each provably >= 0; constant interior
    amounts padded first) pad by concatenating pad-value blocks before and after the operand along
    each dim."""
    x, pv, lo_v, hi_v, it_v = ins
    rdims, dt = _res(op)
    if not _known_ok([lo_v, hi_v, it_v]):
        raise ValueError("edge_padding_low, edge_padding_high and interior_padding must be shape computations of "
                         "symbols and constants")
    r = len(x.dims)
    lo, hi, it = list(lo_v.known), list(hi_v.known), list(it_v.known)
    if not len(lo) == len(hi) == len(it) == r:
        raise ValueError(f"padding operands must have {r} entries (the operand's rank)")
    if all(e.is_const for e in lo + hi + it):
        return _pad_impl(im, x, pv, [e.value for e in lo], [e.value for e in hi], [e.value for e in it], rdims, dt)
    if not all(e.is_const for e in it):
        raise ValueError(f"symbolic interior padding {[str(e) for e in it]} is not supported")
    facts = im.int_facts()
    # each edge as (pad, crop) amounts, both >= 0: e itself where its sign is provable, else
    # max(e, 0) and max(-e, 0) (e = mod(h, 3) - 1: jax.grad of an avg_pool whose stride exceeds
    # its window); the result's dim is n + lo + hi either way
    edges = {}
    for a in range(r):
        for e, after in ((lo[a], False), (hi[a], True)):
            if e == const(0) or facts.prove_ge(e, 0):
                edges[a, after] = (e, const(0))
            elif facts.prove_le(e, 0):
                edges[a, after] = (const(0), -e)
            else:
                edges[a, after] = (max_(e, const(0)), max_(-e, const(0)))
    cur = x
    if any(e.value for e in it):  # interior first (constant amounts), then the symbolic edges
        # (jax.grad of a strided avg_pool with SAME padding over a symbolic image size)
        cur = _pad_impl(im, x, pv, [0] * r, [0] * r, [e.value for e in it], [None] * r, dt)
    for a in range(r):
        if lo[a] == const(0) and hi[a] == const(0):
            continue
        if any(d is None for d in cur.dims):
            raise ValueError("symbolic padding of an operand with an unknown dim")
        n = cur.dims[a]
        pads = [(edges[a, after][0], after) for after in (False, True) if edges[a, after][0] != const(0)]
        if pads:
            block = im.reshape(pv, [const(1)] * r)
            parts = []
            for amount, after in pads:
                dims = list(cur.dims)
                dims[a] = amount
                parts.append((after, im.broadcast(block, dims)))
            pieces = [p for after, p in parts if not after] + [cur] + [p for after, p in parts if after]
            dims = list(cur.dims)
            dims[a] = n + sum((amount for amount, _ in pads), const(0))
            cur = im.emit("relax_v.concat", pieces, r, dt, {"axis": a}, dims=dims)
        crop_lo, crop_hi = edges[a, False][1], edges[a, True][1]
        if crop_lo != const(0) or crop_hi != const(0):  # negative padding crops: a slice
            begin, end = crop_lo, cur.dims[a] - crop_hi
            provable = facts.prove_le(begin, end)
            if not provable:
                # jax's transpose of a slice whose bounds it computed (jnp.roll over a symbolic
                # dim: an amount n + mod(2, n) - min(1, mod(2, n))**2 * n, never negative):
                # checked at run time
                why = f"edge padding {lo[a]}, {hi[a]} must crop at most the {n} elements of dim {a}"
                im.require(begin, end, f"stablehlo.dynamic_pad: {why}")
            dims = list(cur.dims)
            dims[a] = n + lo[a] + hi[a]
            cur = im.emit("relax.strided_slice", [cur], r, dt,
                          {"axes": [a], "begin": [begin], "end": [end], "strides": [1]}, dims=dims)
            if not provable:  # the slice's dim is end - begin clamped at 0: n + lo + hi where it holds
                cur = im.match_dims(cur, dims, "stablehlo.dynamic_pad", why)
    return cur


def _reverse(im, op, ins):
    (x,) = ins
    rdims, dt = _res(op)
    axes = _ints(op.attributes["dimensions"])
    if not axes:
        return x
    return im.emit("relax.reverse", [x], len(x.dims), dt, {"dimensions": axes}, dims=_merge_dims(rdims, x.dims))


CONVERTERS = register_converters({
    "stablehlo.slice": _slice,
    "stablehlo.real_dynamic_slice": _real_dynamic_slice,
    "stablehlo.dynamic_slice": _dynamic_slice,
    "stablehlo.dynamic_update_slice": _dynamic_update_slice,
    "stablehlo.pad": _pad,
    "stablehlo.dynamic_pad": _dynamic_pad,
    "stablehlo.reverse": _reverse,
})
