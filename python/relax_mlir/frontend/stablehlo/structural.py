"""Structural converters: get_dimension_size (a known dim), optimization_barrier,
custom_call (dispatched through `registry.CUSTOM_CALL_TARGETS`), composite (chlo.top_k as a sort,
any other inlined), and the custom_call targets of no op family (ops/structural.py).
"""
from __future__ import annotations

from relax_mlir.frontend.stablehlo.common import Val, _FLOATS, _emit_multi, _ints, _merge_dims, _res, _string
from relax_mlir.frontend.stablehlo.create import _iota_impl
from relax_mlir.frontend.stablehlo.errors import UnsupportedOpError
from relax_mlir.frontend.stablehlo.registry import CUSTOM_CALL_TARGETS, register_converters, register_custom_calls
from relax_mlir.frontend.stablehlo.unsigned import signed_order, unsigned_from_order
from relax_mlir.shape import const


def _get_dimension_size(im, op, ins):
    (x,) = ins
    d = _ints(op.attributes["dimension"])[0]
    _, dt = _res(op)
    e = x.dims[d]
    if e is None:
        raise ValueError(f"dim {d} of the operand is unknown")
    return Val(None, dt, [], [e])


def _optimization_barrier(im, op, ins):
    return list(ins)


def _custom_call(im, op, ins):
    target = _string(op.attributes["call_target_name"])
    handler = CUSTOM_CALL_TARGETS.get(target)
    if handler is None or isinstance(handler, str):
        why = f"call target @{target}" + (f": {handler}" if handler else "")
        raise UnsupportedOpError("stablehlo.custom_call", str(op.location), why)
    return handler(im, op, ins)


def _top_k(im, op, x, k, descending: bool = True):
    """The `k` (an int or a shape expression) largest (smallest) along the last axis, as jax's
    top_k: a descending (ascending) IEEE-total-order stable sort and a slice (the composite's
    decomposition)."""
    axis = len(x.dims) - 1
    (vd, vdt), (idims, idt) = _res(op, 0), _res(op, 1)
    if x.dims[axis] is None:
        raise ValueError("top_k along an unknown dim")
    kk = const(k) if isinstance(k, int) else k
    iota = _iota_impl(im, x.dims, idt, axis)
    unsigned = x.dtype.startswith("ui")  # sorted on the signed order, mapped back (as stablehlo.sort)
    key = signed_order(im, x) if unsigned else x
    vals, idx = _emit_multi(im, "relax_v.sort", [key, iota], [(x.dims, key.dtype), (x.dims, idt)],
                            {"axis": axis, "num_keys": 1, "descending": [int(descending)],
                             "total_order": [int(x.dtype in _FLOATS)]})
    if unsigned:
        vals = unsigned_from_order(im, vals, x.dtype)
    out = []
    for v, (d, dt) in ((vals, (vd, vdt)), (idx, (idims, idt))):
        out.append(im.emit("relax.strided_slice", [v], len(d), dt,
                           {"axes": [axis], "begin": [0], "end": [kk], "strides": [1]},
                           dims=_merge_dims(d, x.dims[:axis] + [kk])))
    return out


def _composite(im, op, ins):
    """stablehlo.composite: chlo.top_k as a descending IEEE-total-order stable sort and a slice (its
    decomposition's semantics); any other composite runs its decomposition function."""
    from jaxlib.mlir import ir as jir

    name = _string(op.attributes["name"])
    if name == "chlo.top_k" and len(ins) == 1:
        return _top_k(im, op, ins[0], jir.IntegerAttr(jir.DictAttr(op.attributes["composite_attributes"])["k"]).value)
    callee = _string(op.attributes["decomposition"])
    f = im.funcs.get(callee)
    if f is None:
        raise ValueError(f"composite {name}: unknown decomposition @{callee}")
    outs, _ = im.run_func(f, list(ins))
    return outs


def _dynamic_top_k(im, op, ins):
    """jax's top_k with a k computed from symbolic dims (`jnp.partition` over a symbolic axis): k
    must be a known shape computation; the slice's end is checked against the dim as any slice's."""
    x, k = ins
    if k.known is None or len(k.known) != 1:
        raise ValueError("dynamic_top_k: k is not a known shape computation")
    return _top_k(im, op, x, k.known[0])


def _approx_top_k(im, op, ins):
    """`custom_call @ApproxTopK` (`lax.approx_max_k` / `approx_min_k`) as the CPU computes it: its
    fallback (`aggregate_to_topk`) is exact, a sort by the comparator (`a > b`: the largest first,
    `a < b`: the smallest) and the first top_k. Ours sorts in IEEE total order, stably; with NaN
    among the values XLA's sort by a plain `<` has no defined order (jax's approx_min_k of
    [1, NaN, 3, ...] is not sorted), ours puts NaN last (first for the largest)."""
    from jaxlib.mlir import ir as jir
    from jaxlib.mlir.dialects import stablehlo as hlo

    cfg = op.attributes["mhlo.backend_config"]
    if not isinstance(cfg, jir.DictAttr):
        raise ValueError("ApproxTopK without its backend_config")

    def get(name):
        return cfg[name] if name in cfg else None
    x = ins[0]
    r = len(x.dims)
    k, dim = jir.IntegerAttr(get("top_k")).value, jir.IntegerAttr(get("reduction_dim")).value
    override = get("reduction_input_size_override")
    if not jir.BoolAttr(get("aggregate_to_topk")).value or (override is not None and jir.IntegerAttr(override).value != -1):
        raise ValueError("ApproxTopK without aggregate_to_topk (an approximate candidate set) is not supported")
    if len(op.results) != 2 or dim % r != r - 1:
        raise ValueError("ApproxTopK over an axis other than the last is not supported")
    comp = im.funcs.get(_string(op.attributes["called_computations"][0]))
    body = list(comp.regions[0].blocks[0].operations) if comp is not None else []
    if len(body) != 2 or body[0].operation.name != "stablehlo.compare":
        raise ValueError("ApproxTopK with a comparator other than one compare")
    direction = hlo.ComparisonDirectionAttr(body[0].attributes["comparison_direction"]).value
    args = list(comp.regions[0].blocks[0].arguments)
    if list(body[0].operands) != args[:2] or direction not in ("GT", "LT"):
        raise ValueError("ApproxTopK with a comparator other than a > b or a < b on the values")
    return _top_k(im, op, x, k, descending=direction == "GT")


CONVERTERS = register_converters({
    "stablehlo.get_dimension_size": _get_dimension_size,
    "stablehlo.custom_call": _custom_call,
    "stablehlo.optimization_barrier": _optimization_barrier,
    "stablehlo.composite": _composite,
})

CUSTOM_CALLS = register_custom_calls({
    "shape_assertion": lambda im, op, ins: [],  # the executable checks the signature's symbols itself
    "cu_threefry2x32": "GPU random bits (jax.random on a GPU export); export for the CPU platform",
    "stablehlo.dynamic_top_k": _dynamic_top_k,
    "ApproxTopK": _approx_top_k,
})
