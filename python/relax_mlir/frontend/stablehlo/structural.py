"""Structural converters: get_dimension_size (a known dim), optimization_barrier,
custom_call (dispatched through `registry.CUSTOM_CALL_TARGETS`), composite (chlo.top_k as a sort,
any other inlined), and the custom_call targets of no op family (ops/structural.py).
"""
from __future__ import annotations

from relax_mlir.frontend.stablehlo.common import Val, _FLOATS, _emit_multi, _ints, _merge_dims, _res, _string
from relax_mlir.frontend.stablehlo.create import _iota_impl
from relax_mlir.frontend.stablehlo.errors import UnsupportedOpError
from relax_mlir.frontend.stablehlo.registry import CUSTOM_CALL_TARGETS, register_converters, register_custom_calls
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


def _composite(im, op, ins):
    """stablehlo.composite: chlo.top_k as a descending IEEE-total-order stable sort and a slice (its
    decomposition's semantics); any other composite runs its decomposition function."""
    from jax._src.lib.mlir import ir as jir

    name = _string(op.attributes["name"])
    if name == "chlo.top_k" and len(ins) == 1:
        x = ins[0]
        k = jir.IntegerAttr(jir.DictAttr(op.attributes["composite_attributes"])["k"]).value
        axis = len(x.dims) - 1
        (vd, vdt), (idims, idt) = _res(op, 0), _res(op, 1)
        if x.dims[axis] is None:
            raise ValueError("top_k along an unknown dim")
        iota = _iota_impl(im, x.dims, idt, axis)
        vals, idx = _emit_multi(im, "relax_v.sort", [x, iota], [(x.dims, x.dtype), (x.dims, idt)],
                                {"axis": axis, "num_keys": 1, "descending": [1],
                                 "total_order": [int(x.dtype in _FLOATS)]})
        out = []
        for v, (d, dt) in ((vals, (vd, vdt)), (idx, (idims, idt))):
            out.append(im.emit("relax.strided_slice", [v], len(d), dt,
                               {"axes": [axis], "begin": [0], "end": [k], "strides": [1]},
                               dims=_merge_dims(d, x.dims[:axis] + [const(k)])))
        return out
    callee = _string(op.attributes["decomposition"])
    f = im.funcs.get(callee)
    if f is None:
        raise ValueError(f"composite {name}: unknown decomposition @{callee}")
    outs, _ = im.run_func(f, list(ins))
    return outs


CONVERTERS = register_converters({
    "stablehlo.get_dimension_size": _get_dimension_size,
    "stablehlo.custom_call": _custom_call,
    "stablehlo.optimization_barrier": _optimization_barrier,
    "stablehlo.composite": _composite,
})

CUSTOM_CALLS = register_custom_calls({
    "shape_assertion": lambda im, op, ins: [],  # the executable checks the signature's symbols itself
    "cu_threefry2x32": "GPU random bits (jax.random on a GPU export); export for the CPU platform",
})
