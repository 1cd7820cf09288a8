"""Loops and branches that update a carried or captured buffer write it in place (issue 16): a
`lax.scan` that stacks its outputs, a `fori_loop` that sets one row (`.at[i].set`, a scatter) or
writes one with `dynamic_update_slice`, a `lax.cond` / `lax.switch` inside a scan that updates the
stack, all with a symbolic length T, compiled once and compared with jax.jit at T = 1, a prime
and 1024 (and at a static T = 0: jax's dimension variables are at least 1). Where the old value is still read after the update (in the loop, after the loop, after a
branch, or because the same buffer is carried twice or also captured) a copy must remain: those
cases check the numbers and that the caller's inputs are never written.

`loop_work` reads the bufferized CPU module and lists every op inside an `scf.while` (following
calls into the kernels and region functions it calls) that touches a whole T-sized buffer: an
allocation or a copy of a buffer with a dynamic dim, a linalg op on one, a loop whose bound is
not a constant. In these programs every dim but T is static, so a per-step copy of the carried
stack (what made a 1024-step scan 100x slower than jax.jit) shows up there; it must stay empty."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import export, lax  # noqa: E402
from mlir import ir  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.backend import cpu  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402

rng = np.random.default_rng(0)
T, = export.symbolic_shape("t")
SIZES = (1, 7, 1024)
D = 8


def rnd(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def f32(*dims):
    return jax.ShapeDtypeStruct(dims, jnp.float32)


def check(fn, specs, make_args, sizes=SIZES, rtol=1e-4, atol=1e-5):
    """Compile once; at each size the results equal jax.jit's and no input array is written."""
    exe = relax_mlir.compile(from_jax(fn, *specs))
    ref = jax.jit(fn)
    for n in sizes:
        args = make_args(n)
        saved = [np.array(a, copy=True) for a in args]
        got = exe(*args)
        got = list(got) if isinstance(got, (list, tuple)) else [got]
        want = jax.tree_util.tree_leaves(ref(*saved))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert np.asarray(g).shape == np.asarray(w).shape
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)
        for a, s in zip(args, saved):
            np.testing.assert_array_equal(np.asarray(a), s)  # the caller's buffers are read only
    return exe


# --- the programs --------------------------------------------------------------------------------

def scan_stack(xs, h0, w):
    """An RNN whose scan stacks two outputs per step."""
    def cell(h, x):
        h = jnp.tanh(x + h @ w)
        return h, (h * 2.0, jnp.sin(h))
    return lax.scan(cell, h0, xs)


SCAN_SPECS = [f32(T, D), f32(D), f32(D, D)]


def scan_args(n):
    return [rnd(n, D), rnd(D), rnd(D, D, scale=0.3)]


def scan_stack_reversed(xs, h0, w):
    return lax.scan(lambda h, x: (jnp.tanh(x + h @ w),) * 2, h0, xs, reverse=True)


def gru(xs, h0, wz, uz, wh, uh):
    def cell(h, x):
        z = jax.nn.sigmoid(x @ wz + h @ uz)
        hh = jnp.tanh(x @ wh + (z * h) @ uh)
        h = (1.0 - z) * h + z * hh
        return h, h
    return lax.scan(cell, h0, xs)


GRU_SPECS = [f32(T, 3), f32(D), f32(3, D), f32(D, D), f32(3, D), f32(D, D)]


def gru_args(n):
    return [rnd(n, 3), rnd(D), rnd(3, D, scale=0.5), rnd(D, D, scale=0.3), rnd(3, D, scale=0.5),
            rnd(D, D, scale=0.3)]


def fori_set_row(x):
    """`.at[i].set` of a row that reads the previous row (a scatter on the carried buffer)."""
    return lax.fori_loop(0, x.shape[0], lambda i, s: s.at[i].set(jnp.sin(s[i]) + s[i - 1]), x * 1.0)


def fori_add_element(x):
    return lax.fori_loop(0, x.shape[0], lambda i, s: s.at[i, i % D].add(i.astype(jnp.float32)), x + 1.0)


def fori_dus(x, v):
    def body(i, s):
        return lax.dynamic_update_slice(s, (v * i.astype(jnp.float32))[None], (i, 0))
    return lax.fori_loop(0, x.shape[0], body, x * 0.5)


def fori_over_input(x):
    """The input itself is the carried buffer: it is copied once, never written."""
    return lax.fori_loop(0, x.shape[0], lambda i, s: s.at[i].set(s[i] * 2.0 + s[i - 1]), x)


def scan_cond(xs):
    """The step updates the stack in one branch and passes it through in the other."""
    def step(c, x):
        i, s = c
        s = lax.cond(x[0] > 0, lambda s: s.at[i].set(x), lambda s: s, s)
        return (i + 1, s), None
    return lax.scan(step, (jnp.int32(0), jnp.zeros_like(xs)), xs)[0][1]


def scan_switch(xs):
    def step(c, x):
        i, s = c
        s = lax.switch(i % 3, [lambda s: s.at[i].set(x),
                               lambda s: s,
                               lambda s: lax.dynamic_update_slice(s, (x * 3.0)[None], (i, 0))], s)
        return (i + 1, s), None
    return lax.scan(step, (jnp.int32(0), jnp.zeros_like(xs)), xs)[0][1]


def nested(x):
    def outer(i, s):
        return lax.fori_loop(0, 4, lambda j, s: s.at[i, j].set(s[i, j] + j.astype(jnp.float32)), s)
    return lax.fori_loop(0, x.shape[0], outer, x * 1.0)


def old_value_read_in_loop(x):
    """The step reads the old buffer after writing the new one: one copy per step must stay."""
    def body(i, c):
        s, acc = c
        s2 = s.at[i].set(1.0)
        return s2, acc + s.sum()
    return lax.fori_loop(0, x.shape[0], body, (x * 1.0, jnp.float32(0.0)))


IN_PLACE = [
    ("scan_stack", scan_stack, SCAN_SPECS),
    ("scan_stack_reversed", scan_stack_reversed, SCAN_SPECS),
    ("gru", gru, GRU_SPECS),
    ("fori_set_row", fori_set_row, [f32(T, D)]),
    ("fori_add_element", fori_add_element, [f32(T, D)]),
    ("fori_dus", fori_dus, [f32(T, D), f32(D)]),
    ("fori_over_input", fori_over_input, [f32(T, D)]),
    ("scan_cond", scan_cond, [f32(T, D)]),
    ("scan_switch", scan_switch, [f32(T, D)]),
    ("nested", nested, [f32(T, D)]),
]


# --- numerics ------------------------------------------------------------------------------------

def test_scan_stacking_outputs():
    check(scan_stack, SCAN_SPECS, scan_args, rtol=1e-3)


def test_scan_stacking_outputs_reversed():
    check(scan_stack_reversed, SCAN_SPECS, scan_args, rtol=1e-3)


def test_gru_in_scan():
    check(gru, GRU_SPECS, gru_args, rtol=1e-3, atol=1e-4)


def test_fori_loop_sets_rows():
    check(fori_set_row, [f32(T, D)], lambda n: [rnd(n, D)])


def test_fori_loop_adds_elements():
    check(fori_add_element, [f32(T, D)], lambda n: [rnd(n, D)])


def test_fori_loop_dynamic_update_slice():
    check(fori_dus, [f32(T, D), f32(D)], lambda n: [rnd(n, D), rnd(D)])


def test_fori_loop_over_the_input_leaves_it_unchanged():
    check(fori_over_input, [f32(T, D)], lambda n: [rnd(n, D)])


def test_cond_in_scan_updates_or_passes_the_stack():
    check(scan_cond, [f32(T, D)], lambda n: [rnd(n, D)])


def test_switch_in_scan_updates_or_passes_the_stack():
    check(scan_switch, [f32(T, D)], lambda n: [rnd(n, D)])


def test_nested_loops_update_one_buffer():
    check(nested, [f32(T, D)], lambda n: [rnd(n, D)])


EMPTY_OK = IN_PLACE[:3]  # the others index row i, which jax refuses to trace at T = 0


@pytest.mark.parametrize("name,fn,specs", EMPTY_OK, ids=[c[0] for c in EMPTY_OK])
def test_empty_sequence(name, fn, specs):
    """T = 0 (a static export): no step runs, the initial values come back."""
    specs = [f32(*[0 if not isinstance(d, int) else d for d in s.shape]) for s in specs]
    check(fn, specs, lambda n: [rnd(*s.shape) for s in specs], sizes=(0,))


def test_data_dependent_trip_count():
    """The trip count is a run-time value (0, past the end, negative): the updates clamp."""
    def f(k, x):
        return lax.fori_loop(0, k, lambda i, s: lax.dynamic_update_slice(s, jnp.full((1, D), i, jnp.float32),
                                                                           (i, 0)), x * 1.0)
    exe = relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((), jnp.int32), f32(T, D)))
    for n in (1, 7, 1024):
        x = rnd(n, D)
        for k in (0, 1, n, n + 5, -3):
            np.testing.assert_array_equal(exe(np.int32(k) * np.ones((), np.int32), x), jax.jit(f)(np.int32(k), x))


# --- the old value is still read: a copy must remain --------------------------------------------

def test_old_value_read_after_the_update_in_the_step():
    check(old_value_read_in_loop, [f32(T, D)], lambda n: [rnd(n, D)], rtol=1e-3, atol=1e-3)


def test_old_value_read_after_a_dynamic_update_slice():
    def f(x):
        def body(i, s):
            new = lax.dynamic_update_slice(s, jnp.ones((1, D)) * i.astype(jnp.float32), (i, 0))
            return new * 0.5 + s
        return lax.fori_loop(0, 3, body, x)
    check(f, [f32(T, D)], lambda n: [rnd(n, D)])


def test_buffer_read_after_the_loop():
    def f(x):
        y = x * 2.0
        z = lax.fori_loop(0, x.shape[0], lambda i, s: s.at[i].set(i.astype(jnp.float32)), y)
        return z + y
    check(f, [f32(T, D)], lambda n: [rnd(n, D)])


def test_same_buffer_carried_twice():
    def f(x):
        y = x * 2.0
        return lax.fori_loop(0, x.shape[0], lambda i, c: (c[0].at[i].set(1.0), c[1].at[i].add(3.0)), (y, y))
    check(f, [f32(T, D)], lambda n: [rnd(n, D)])


def test_carried_buffers_updated_or_swapped_in_branches():
    """Two carried copies of one buffer: a step updates both in place or swaps them."""
    def f(x):
        def body(i, c):
            a, b = c
            return lax.cond(i % 2 == 0, lambda a, b: (a.at[i].set(1.0), b.at[i].add(2.0)), lambda a, b: (b, a), a, b)
        y = x * 2.0
        return lax.fori_loop(0, x.shape[0], body, (y, y))
    check(f, [f32(T, D)], lambda n: [rnd(n, D)])


def test_carried_buffer_also_captured():
    """The loop writes row i of its carried copy of y while reading row t-1-i of y itself."""
    def f(x):
        y = x * 2.0
        return lax.fori_loop(0, x.shape[0], lambda i, s: s.at[i].set(y[x.shape[0] - 1 - i]), y)
    check(f, [f32(T, D)], lambda n: [rnd(n, D)])


def test_input_carried_and_captured():
    def f(x):
        return lax.fori_loop(0, x.shape[0], lambda i, s: s.at[i].set(x[x.shape[0] - 1 - i] + s[i - 1]), x)
    check(f, [f32(T, D)], lambda n: [rnd(n, D)])


def test_swap_rows_in_place():
    def f(x):
        n = x.shape[0]

        def body(i, s):
            a, b = s[i], s[n - 1 - i]
            return s.at[i].set(b).at[n - 1 - i].set(a)
        return lax.fori_loop(0, n // 2, body, x * 1.0)
    check(f, [f32(T, D)], lambda n: [rnd(n, D)])


@pytest.mark.parametrize("kind", ["slice", "dynamic_slice", "scatter"])
def test_update_read_from_an_overlapping_part_of_the_same_buffer(kind):
    """Each step shifts rows down by one: the update is a slice of the buffer it is written into,
    overlapping the destination rows (static shapes: jax cannot slice 3 rows of a symbolic T)."""
    def f(x):
        def body(i, s):
            if kind == "slice":
                return lax.dynamic_update_slice(s, s[0:3], (1, 0))
            if kind == "dynamic_slice":
                return lax.dynamic_update_slice(s, lax.dynamic_slice(s, (i, 0), (3, D)), (i + 1, 0))
            return s.at[1:4].set(s[0:3])
        return lax.fori_loop(0, 3, body, x * 1.0)
    check(f, [f32(9, D)], lambda n: [rnd(9, D)], sizes=(9,))


def test_cond_updates_a_tensor_the_caller_reads_afterwards():
    def f(p, x):
        y = x * 2.0
        z = lax.cond(p, lambda y: y.at[0].set(5.0), lambda y: y, y)
        return z + y
    exe = check(f, [jax.ShapeDtypeStruct((), jnp.bool_), f32(T, D)], lambda n: [np.array(True), rnd(n, D)],
                sizes=(1, 7, 1024))
    x = rnd(5, D)
    np.testing.assert_allclose(exe(np.array(False), x), jax.jit(f)(False, x), rtol=1e-6)


def test_branches_update_the_input_without_writing_it():
    def f(i, x):
        return lax.switch(i, [lambda a: a.at[0].set(5.0), lambda a: a,
                              lambda a: lax.dynamic_update_slice(a, jnp.zeros((1, D)), (2, 0))], x)
    exe = relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((), jnp.int32), f32(T, D)))
    for n in (1, 7, 1024):
        for i in (-1, 0, 1, 2, 3):
            x = rnd(n, D)
            saved = x.copy()
            np.testing.assert_array_equal(exe(np.int32(i) * np.ones((), np.int32), x), jax.jit(f)(np.int32(i), saved))
            np.testing.assert_array_equal(x, saved)


def test_case_branch_updates_a_capture_read_afterwards():
    def f(i, x):
        y = jnp.exp(x)
        z = lax.switch(i, [lambda y: y.at[1].set(0.0), lambda y: y,
                           lambda y: lax.dynamic_update_slice(y, jnp.zeros((1, D)), (2, 0))], y)
        return z, y.sum(axis=0)
    exe = relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((), jnp.int32), f32(T, D)))
    for n in (1, 7, 1024):
        x = rnd(n, D)
        for i in (0, 1, 2, 5):
            for g, w in zip(exe(np.int32(i) * np.ones((), np.int32), x), jax.jit(f)(np.int32(i), x)):
                np.testing.assert_allclose(g, w, rtol=1e-5)


# --- no per-step copy of the carried buffer ---------------------------------------------------

def _has_dynamic_dim(t: ir.Type) -> bool:
    return isinstance(t, ir.MemRefType) and any(t.is_dynamic_dim(i) for i in range(t.rank))


def loop_work(fn, specs) -> list[str]:
    """Ops inside an scf.while (and inside the functions called there) of the bufferized CPU
    module that work on a whole buffer with a dynamic dim (see the module docstring)."""
    exe = relax_mlir.compile(from_jax(fn, *specs))
    upstream = exe.artifacts["upstream"]
    with upstream.context:
        module = ir.Module.parse(str(upstream))
        cpu.lower(module, cpu.CPUOptions(num_threads=1), until="bufferize")
        funcs = {ir.StringAttr(f.attributes["sym_name"]).value: f.operation
                 for f in module.body.operations if f.operation.name == "func.func"}
        found: list[str] = []
        followed: set[str] = set()

        def visit(op: ir.Operation, in_loop: bool):
            name = op.name
            if in_loop:
                values = list(op.results) + list(op.operands)
                if (name in ("memref.alloc", "memref.copy") or name.startswith("linalg.")) and \
                        any(_has_dynamic_dim(v.type) for v in values):
                    found.append(name)
                if name in ("scf.for", "scf.parallel", "scf.forall") and any(
                        isinstance(v.type, ir.IndexType) and not (isinstance(v, ir.OpResult)
                                                                  and v.owner.name == "arith.constant")
                        for v in op.operands):
                    found.append(name)
                if name == "func.call":
                    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
                    if callee in funcs and callee not in followed and len(funcs[callee].regions[0].blocks):
                        followed.add(callee)
                        visit(funcs[callee], True)
            for region in op.regions:
                for block in region.blocks:
                    for inner in block.operations:
                        visit(inner.operation, in_loop or name == "scf.while")

        for f in funcs.values():
            if "sym_visibility" not in f.attributes:  # the entry
                visit(f, False)
        return found


@pytest.mark.parametrize("name,fn,specs", IN_PLACE, ids=[c[0] for c in IN_PLACE])
def test_no_per_step_copy_of_the_carried_buffer(name, fn, specs):
    assert loop_work(fn, specs) == []


def test_a_per_step_copy_is_detected():
    """The detector sees the copy that must stay when the step reads the old buffer."""
    work = loop_work(old_value_read_in_loop, [f32(T, D)])
    assert "memref.alloc" in work and "memref.copy" in work


CALLEE_UPDATES_ITS_ARGUMENT = """
func.func @main(%x: !relax.tensor<["n", 4], f32>, %u: !relax.tensor<[1, 4], f32>, %i: !relax.tensor<[], i32>,
                %w: !relax.tensor<[4, 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %a = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %b = func.call @update(%a, %u, %i) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[1, 4], f32>, !relax.tensor<[], i32>) -> !relax.tensor<["n", 4], f32>
  %c = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[4, 4], f32>) -> !relax.tensor<["n", 4], f32>
  %d = "relax.matmul"(%c, %w) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[4, 4], f32>) -> !relax.tensor<["n", 4], f32>
  %e = "relax.subtract"(%b, %d) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %e : !relax.tensor<["n", 4], f32>
}
func.func private @update(%v: !relax.tensor<["n", 4], f32>, %u: !relax.tensor<[1, 4], f32>, %i: !relax.tensor<[], i32>) -> !relax.tensor<["n", 4], f32> {
  %s = "relax.dynamic_update_slice"(%v, %u, %i, %i) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[1, 4], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<["n", 4], f32>
  return %s : !relax.tensor<["n", 4], f32>
}
"""


def test_called_function_updates_its_argument_in_place():
    """@update writes the caller's buffer `a` in place and returns it: the memory plan keeps `a`'s
    storage for `b` (a func.call result may be its argument's buffer) instead of reusing it for
    the products (measured without that rule: 5.6 off)."""
    exe = relax_mlir.compile(CALLEE_UPDATES_ITS_ARGUMENT)
    for n in (1, 7, 130):
        x, u, w = rnd(n, 4), rnd(1, 4), rnd(4, 4)
        for i in (0, n - 1, n + 3):
            want = np.exp(x)
            want[min(i, n - 1)] = u[0]
            got = exe(x, u, np.int32(i) * np.ones((), np.int32), w)
            np.testing.assert_allclose(got, want - (x @ w) @ w, rtol=1e-4, atol=1e-4)
