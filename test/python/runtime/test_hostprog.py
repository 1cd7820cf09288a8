"""The host-program interpreter on hand-written programs: the control flow and arithmetic that
the GPU models of the other tests rarely reach (a host `scf.for` with loop-carried values, an
`scf.if` with results, an early `return`, host loads and stores of a shape buffer)."""
from __future__ import annotations

import numpy as np
import pytest

from relax_mlir.runtime.hostprog import FORMAT, HostError, HostProgram


class NoDevice:
    """Every buffer of these programs lives on the host: a driver call is a test failure."""

    def __getattr__(self, name):
        if name == "sync":
            return lambda: None
        raise AssertionError(f"driver.{name} called")


def program(body):
    entry = {"n_in": 1, "n_out": 0, "args": [{"id": 0, "dtype": "f32", "shape": [None], "host": True},
                                             {"id": 1, "dtype": "i32", "shape": [1], "host": True}],
             "body": body}
    return HostProgram({"format": FORMAT, "target": "cuda", "index_dtype": "i64", "globals": {},
                        "entries": {"main": entry}})


def run(prog, n):
    err = np.zeros(1, np.int32)
    return prog.run("main", [np.zeros(n, np.float32), err], NoDevice())


# s = sum_{i < n} i; then s * 2 if s > 10 else s + 100, written to the error slot.
LOOP = [
    {"op": "const", "out": 2, "value": 0}, {"op": "const", "out": 3, "value": 1},
    {"op": "const", "out": 4, "value": 10}, {"op": "const", "out": 5, "value": 100},
    {"op": "dim", "out": 6, "src": 0, "index": 2},
    {"op": "for", "lb": 2, "ub": 6, "step": 3, "iv": 7, "init": [2], "iter": [8], "out": [9],
     "body": [{"op": "arith", "fn": "addi", "out": 10, "in": [8, 7]}, {"op": "yield", "in": [10]}]},
    {"op": "arith", "fn": "cmpi", "pred": "sgt", "out": 11, "in": [9, 4]},
    {"op": "if", "cond": 11, "out": [12],
     "then": [{"op": "affine", "fn": "apply", "out": 13, "in": [9], "n_dims": 1, "exprs": [["mul", ["d", 0], ["c", 2]]]},
              {"op": "yield", "in": [13]}],
     "else": [{"op": "arith", "fn": "addi", "out": 14, "in": [9, 5]}, {"op": "yield", "in": [14]}]},
    {"op": "error", "value": 12},
    {"op": "return"},
]


@pytest.mark.parametrize("n, want", [(0, 100), (1, 100), (5, 110), (6, 30), (100, 9900)])
def test_for_with_carried_values_and_if_with_results(n, want):
    assert run(program(LOOP), n) == want


def test_return_inside_if_stops_the_entry():
    body = [{"op": "const", "out": 2, "value": 7}, {"op": "const", "out": 3, "value": 9},
            {"op": "const", "out": 4, "value": 0},
            {"op": "dim", "out": 5, "src": 0, "index": 4},
            {"op": "arith", "fn": "cmpi", "pred": "eq", "out": 6, "in": [5, 4]},
            {"op": "if", "cond": 6, "out": [], "then": [{"op": "error", "value": 2}, {"op": "return"}],
             "else": [{"op": "yield", "in": []}]},
            {"op": "error", "value": 3}, {"op": "return"}]
    prog = program(body)
    assert run(prog, 0) == 7  # returned inside the if: the later write never ran
    assert run(prog, 4) == 9


def test_shape_buffer_stores_and_loads():
    """A host shape buffer filled by stores and read back (what a reshape's shape operand is)."""
    body = [{"op": "const", "out": 2, "value": 0}, {"op": "const", "out": 3, "value": 1},
            {"op": "const", "out": 4, "value": 3},
            {"op": "alloc", "out": 5, "dtype": "index", "shape": [2], "dyn": [], "host": True},
            {"op": "dim", "out": 6, "src": 0, "index": 2},
            {"op": "store", "value": 6, "dst": 5, "idx": [2]}, {"op": "store", "value": 4, "dst": 5, "idx": [3]},
            {"op": "load", "out": 7, "src": 5, "idx": [2]}, {"op": "load", "out": 8, "src": 5, "idx": [3]},
            {"op": "arith", "fn": "muli", "out": 9, "in": [7, 8]},
            {"op": "error", "value": 9}, {"op": "return"}]
    assert run(program(body), 5) == 15


def test_unknown_instruction_is_a_host_error():
    with pytest.raises(HostError, match="unknown host instruction 'teleport'"):
        run(program([{"op": "teleport"}]), 1)


def test_boolean_constants_keep_their_values():
    """A GPU program's constant globals travel as bytes: an i1 splat of many elements is every
    element's value (the bindings' numpy buffer of an i1 splat holds one byte and claims them all;
    a constant false read past it had stray trues on Vulkan: jnp.select, jnp.stack with
    jnp.zeros(bool)); a non-splat i1 constant keeps its elements."""
    import base64

    from mlir import ir

    from relax_mlir.runtime.hostprog import _Extractor

    bits = np.random.default_rng(0).random(37) < 0.5
    text = "\n".join([
        'memref.global "private" constant @f : memref<4x75xi1> = dense<false>',
        'memref.global "private" constant @t : memref<300xi1> = dense<true>',
        'memref.global "private" constant @m : memref<37xi1> = dense<[' + ", ".join(str(b).lower() for b in bits) + "]>",
    ])
    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = True
        ex = _Extractor(ir.Module.parse(text).operation, "vulkan")
        for name in ("f", "t", "m"):
            ex.add_global(name)
    got = {k: np.frombuffer(base64.b64decode(g["data"]), np.bool_).reshape(g["shape"]) for k, g in ex.globals.items()}
    assert got["f"].shape == (4, 75) and not got["f"].any()
    assert got["t"].shape == (300,) and got["t"].all()
    assert np.array_equal(got["m"], bits)
