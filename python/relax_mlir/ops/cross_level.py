"""Cross-level ops: call_tir, call_library, the memory planner's storage ops, and the shape
lowering's dim/assert."""
from __future__ import annotations

from relax_mlir.dialect.spec import (ANY, I1, INDEX, STORAGE, TENSOR, OpSpec, attr, operand,
                                     relax_op, result_)


@relax_op
class CallTirOp(OpSpec):
    """Call a kernel `func.func` in destination-passing style: the callee takes the inputs, then
    one output buffer per result, then the `index` values of `sym_args`. Result types are declared
    (symbolic). Attributes: callee (symbol), sym_args (array of expression strings). After
    relax-lower-shapes the symbolic ints are `index` operands after the tensors, followed by the
    results' dynamic dims, and `lowered = [n_tensors, n_sym_args, n_out_dims]`."""

    name = "relax_v.call_tir"
    args = operand(ANY, variadic=True)
    results = result_(ANY, variadic=True)
    callee = attr("symbol", optional=False)
    sym_args = attr("array")
    lowered = attr("array")
    results_are_declared = True


@relax_op
class CallLibraryOp(OpSpec):
    """Call an external library routine with a known contract (see runtime/library.py).
    Attribute: callee (string, e.g. "cblas_sgemm"), plus routine-specific attributes."""

    name = "relax_v.call_library"
    args = operand(ANY, variadic=True)
    results = result_(ANY, variadic=True)
    callee = attr("str", optional=False)
    results_are_declared = True


@relax_op
class AllocStorageOp(OpSpec):
    """A storage block of `size` bytes (int or expression string at the symbols' upper bounds)."""

    name = "relax.alloc_storage"
    result = result_(STORAGE)
    size = attr("any", optional=False)
    results_are_declared = True
    pure = False


@relax_op
class AllocTensorOp(OpSpec):
    """A tensor placed in a storage block at a byte offset. Attribute: offset (int or expression)."""

    name = "relax.alloc_tensor"
    storage = operand(STORAGE)
    result = result_(TENSOR)
    offset = attr("any")
    results_are_declared = True
    pure = False


@relax_op
class KillOp(OpSpec):
    """End the lifetime of a tensor or storage block."""

    name = "relax.kill"
    value = operand(ANY)
    pure = False


@relax_op
class DimOp(OpSpec):
    """The run-time size of one dim of a tensor, as `index`. Attribute: axis (int)."""

    name = "relax.dim"
    x = operand(TENSOR)
    result = result_(INDEX)
    axis = attr("int", optional=False)
    results_are_declared = True


@relax_op
class AssertOp(OpSpec):
    """A run-time check of a shape relation. Attributes: message (string), code (int)."""

    name = "relax.assert"
    condition = operand(I1)
    message = attr("str", optional=False)
    code = attr("int")
    pure = False
