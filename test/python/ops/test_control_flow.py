"""Control flow (relax_v.while / relax_v.if / relax_v.case): JAX `lax.fori_loop`, `lax.while_loop`,
`lax.cond`, `lax.switch` exported with symbolic dims, compiled once, run at several bindings and
compared with jax.jit; zero-trip loops; StableHLO case semantics (an out-of-range index runs the
last branch); memory planning around loops; located errors for a carried value that changes shape."""
from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import export, lax  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402
from relax_mlir.frontend.stablehlo import import_stablehlo  # noqa: E402

import jaxcheck  # noqa: E402

rng = np.random.default_rng(0)
N, = export.symbolic_shape("n")
SIZES = (1, 7, 257)


def rnd(*shape):
    return rng.standard_normal(shape).astype(np.float32)


check = functools.partial(jaxcheck.check, sizes=SIZES, rtol=1e-4, atol=1e-4)


def f32(*dims):
    return jax.ShapeDtypeStruct(dims, jnp.float32)


def i32(*dims):
    return jax.ShapeDtypeStruct(dims, jnp.int32)


# --- loops -------------------------------------------------------------------------------------

def test_fori_loop_tensor_carry():
    check(lambda x: lax.fori_loop(0, 5, lambda i, c: c * 0.5 + i.astype(jnp.float32), x),
          [f32(N, 4)], lambda n: [rnd(n, 4)])


def test_fori_loop_symbolic_trip_count_and_captures():
    """n iterations (the symbol itself), two carried tensors, a captured weight matrix."""
    def f(x, w):
        def body(i, c):
            h, acc = c
            h = jnp.tanh(h @ w + x[:1])
            return h, acc + h.sum() * i.astype(jnp.float32)
        return lax.fori_loop(0, x.shape[0], body, (x[:1] * 0.0, jnp.float32(0.0)))
    check(f, [f32(N, 8), f32(8, 8)], lambda n: [rnd(n, 8) * 0.3, rnd(8, 8) * 0.3], rtol=1e-3)


def test_fori_loop_scalar_carry_symbolic_trip_count():
    """Only a scalar is carried: the trip count n (a dimension variable) is passed into the
    condition as a value, since no parameter there binds the symbol."""
    def f(x):
        return lax.fori_loop(0, x.shape[0], lambda i, c: c * 2.0 + 1.0, jnp.float32(0.5)), \
            lax.cond(x.sum() > 0.0, lambda: jnp.int32(x.shape[0]) * 2, lambda: jnp.int32(-1))
    check(f, [f32(N, 3)], lambda n: [rnd(n, 3)], sizes=(1, 4, 7, 20))


def test_carried_dim_is_an_expression():
    """The carry has n + 1 rows (no parameter of the loop's functions has n as a whole dim) and
    the body builds ones of its shape from n: the importer passes x along to bind n there."""
    def f(x):
        c0 = jnp.concatenate([x, x[:1]])
        return lax.fori_loop(0, 3, lambda i, c: c * 2.0 + jnp.ones_like(c), c0)
    check(f, [f32(N, 4)], lambda n: [rnd(n, 4)])


def test_loop_in_a_called_function_with_no_whole_dim():
    """jax.random.gamma: threefry runs in a called function whose values are all `3*n` long, with
    a fori_loop that rebuilds shapes from n; no value there has n as a whole dim, so the importer
    makes one (arange(n)) to bind n in the loop's functions. Also beta and dirichlet on top."""
    def f(key, a):
        k1, k2, k3 = jax.random.split(jax.random.wrap_key_data(key), 3)
        return jax.random.gamma(k1, a), jax.random.beta(k2, a, a + 1.0), jax.random.dirichlet(k3, a + 0.5)
    check(f, [jax.ShapeDtypeStruct((2,), jnp.uint32), f32(N, 3)],
          lambda n: [np.array([3, n], np.uint32), np.abs(rnd(n, 3)) + 0.2])


def test_fori_loop_data_dependent_trip_count_zero_iterations():
    def f(k, x):
        return lax.fori_loop(0, k, lambda i, c: c * 2.0 + 1.0, x)
    exe = relax_mlir.compile(from_jax(f, i32(), f32(N)))
    for n in SIZES:
        for k in (0, 1, 3, -2):
            x = rnd(n)
            got = exe(np.int32(k) * np.ones((), np.int32), x)
            np.testing.assert_allclose(got, jax.jit(f)(np.int32(k), x), rtol=1e-5)


def test_while_loop_data_dependent_condition():
    def f(x):
        return lax.while_loop(lambda c: jnp.abs(c[0]).sum() < 1000.0,
                              lambda c: (c[0] * 2.0 + 0.5, c[1] + 1), (x, jnp.int32(0)))
    check(f, [f32(N)], lambda n: [np.abs(rnd(n)) + 0.1])
    # the condition is false on entry: zero iterations, the initial values come back
    exe = relax_mlir.compile(from_jax(f, f32(N)))
    x = np.full((5,), 500.0, np.float32)
    got = exe(x)
    np.testing.assert_array_equal(got[0], x)
    assert int(got[1]) == 0


def test_while_loop_carried_int_and_bool():
    def f(x):
        def body(c):
            v, k, flag = c
            return v + jnp.where(flag, 1, -1), k + 1, jnp.logical_not(flag)
        return lax.while_loop(lambda c: c[1] < 7, body, (x, jnp.int32(0), jnp.bool_(True)))
    check(f, [i32(N, 3)], lambda n: [rng.integers(-50, 50, (n, 3)).astype(np.int32)])


def test_nested_loops_and_cond_in_body():
    def f(x):
        def outer(i, c):
            c = lax.fori_loop(0, 3, lambda j, d: d + j.astype(jnp.float32), c)
            return lax.cond(i % 2 == 0, lambda a: a * 0.5, lambda a: a - 1.0, c)
        return lax.fori_loop(0, 4, outer, x)
    check(f, [f32(N, 2)], lambda n: [rnd(n, 2)])


@pytest.mark.parametrize("kind", ["cond", "loop"])
def test_result_sharing_an_operand_buffer_is_not_overwritten(kind):
    """`a` is a planned intermediate; the if/while result may be `a`'s own buffer (a branch that
    returns its operand, a loop that runs zero times), so memory planning must not reuse `a`'s
    block for `b` or `c` while the result is live (measured: without the rule, 246.5 off)."""
    def f(k, x, w):
        a = jnp.exp(x) @ w
        if kind == "cond":
            r = lax.cond(k > 0, lambda a: a, lambda a: a + 1.0, a)
        else:
            r = lax.fori_loop(0, k, lambda i, c: c + 1.0, a)
        b = jnp.sin(x) @ w
        c = jnp.cos(b) @ w
        return r * 10.0 + c
    exe = relax_mlir.compile(from_jax(f, i32(), f32(N, 16), f32(16, 16)))
    for n in SIZES:
        x, w = rnd(n, 16), rnd(16, 16) * 0.2
        for k in (0, 1, 2):
            np.testing.assert_allclose(exe(np.int32(k) * np.ones((), np.int32), x, w), jax.jit(f)(np.int32(k), x, w),
                                       rtol=1e-4, atol=1e-4)


# --- scan (stablehlo.while with dynamic_slice / dynamic_update_slice on the stacked values) ------

def rnn(xs, h0, w, u):
    def cell(h, x):
        h = jnp.tanh(x @ w + h @ u)
        return h, h * 2.0
    return lax.scan(cell, h0, xs)


def gru(xs, h0, wz, uz, wr, ur, wh, uh, reverse=False):
    def cell(h, x):
        z = jax.nn.sigmoid(x @ wz + h @ uz)
        r = jax.nn.sigmoid(x @ wr + h @ ur)
        hh = jnp.tanh(x @ wh + (r * h) @ uh)
        h = (1.0 - z) * h + z * hh
        return h, h
    return lax.scan(cell, h0, xs, reverse=reverse)


def test_scan_rnn_over_symbolic_sequence():
    check(rnn, [f32(N, 2, 3), f32(2, 4), f32(3, 4), f32(4, 4)],
          lambda n: [rnd(n, 2, 3), rnd(2, 4), rnd(3, 4) * 0.5, rnd(4, 4) * 0.5], rtol=1e-3)


GRU_SPECS = [f32(N, 3), f32(4)] + [f32(3, 4), f32(4, 4)] * 3


def gru_args(n):
    return [rnd(n, 3), rnd(4)] + [rnd(3, 4) * 0.5, rnd(4, 4) * 0.5] * 3


def test_scan_gru_over_symbolic_sequence():
    check(gru, GRU_SPECS, gru_args, rtol=1e-3)


def test_scan_gru_reversed():
    check(lambda *args: gru(*args, reverse=True), GRU_SPECS, gru_args, rtol=1e-3)


def test_scan_reverse_and_empty_sequence():
    def f(xs, c0):
        return lax.scan(lambda c, x: (c * 0.9 + x, c.sum() + x[0]), c0, xs, reverse=True)
    check(f, [f32(N, 5), f32(5)], lambda n: [rnd(n, 5), rnd(5)])
    exe = relax_mlir.compile(from_jax(f, f32(0, 5), f32(5)))  # a static empty sequence
    c0 = rnd(5)
    c, ys = exe(np.zeros((0, 5), np.float32), c0)
    np.testing.assert_array_equal(c, c0)
    assert np.asarray(ys).shape == (0,)


def test_flax_rnn_lstm_over_symbolic_sequence():
    import flax.linen as nn

    rnn = nn.RNN(nn.LSTMCell(features=8))
    params = rnn.init(jax.random.PRNGKey(0), jnp.zeros((2, 5, 3), jnp.float32))

    def f(x):
        z = jnp.zeros((x.shape[0], 8), x.dtype)  # an explicit carry (the default one draws a PRNG key)
        return rnn.apply(params, x, initial_carry=(z, z))
    check(f, [f32(2, N, 3)], lambda n: [rnd(2, n, 3)], rtol=1e-3)


def test_flax_nn_scan_layer_stack():
    """nn.scan over 4 residual layers with stacked parameters (the loop slices layer i's weights)."""
    import flax.linen as nn

    class Block(nn.Module):
        @nn.compact
        def __call__(self, h, _):
            return nn.tanh(nn.Dense(8)(h)) + h, None

    stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=4)()
    params = stack.init(jax.random.PRNGKey(0), jnp.zeros((3, 8)), None)
    check(lambda x: stack.apply(params, x, None)[0], [f32(N, 8)], lambda n: [rnd(n, 8)], rtol=1e-3)


def test_equinox_gru_cell_in_scan():
    import equinox as eqx

    cell = eqx.nn.GRUCell(3, 8, key=jax.random.PRNGKey(1))

    def f(xs, h0):
        return lax.scan(lambda h, x: (cell(x, h),) * 2, h0, xs)
    check(f, [f32(N, 3), f32(8)], lambda n: [rnd(n, 3), rnd(8)], rtol=1e-3)


def test_dynamic_slice_and_update_clamp_start_indices():
    """StableHLO clamps each start into [0, dim - size] (jax relies on it)."""
    def f(i, j, x, u):
        s = lax.dynamic_slice(x, (i, j), (1, 3))
        y = lax.dynamic_update_slice(x, u, (j, i))
        return s, y
    exe = relax_mlir.compile(from_jax(f, i32(), i32(), f32(N, 4), f32(1, 2)))
    for n in (2, 7, 40):
        x, u = rnd(n, 4), rnd(1, 2)
        for i, j in ((0, 0), (1, 1), (-3, 2), (100, -1), (n - 1, 3), (5, 100)):
            got = exe(np.int32(i) * np.ones((), np.int32), np.int32(j) * np.ones((), np.int32), x, u)
            want = jax.jit(f)(np.int32(i), np.int32(j), x, u)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)


# --- branches ----------------------------------------------------------------------------------

def test_cond_tensor_operands():
    def f(x, y):
        return lax.cond(x.sum() > 0, lambda a, b: (a + b, a * b), lambda a, b: (a - b, b), x, y)
    exe = check(f, [f32(N, 3), f32(N, 3)], lambda n: [rnd(n, 3), rnd(n, 3)]).exe
    for sign in (1.0, -1.0):  # both branches, whatever the random data
        x, y = np.abs(rnd(4, 3)) * sign, rnd(4, 3)
        for g, w in zip(exe(x, y), jax.jit(f)(x, y)):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_switch_every_branch_and_clamped_index():
    def f(i, x):
        return lax.switch(i, [lambda a: a + 1.0, lambda a: a * 2.0, lambda a: -a], x)
    exe = relax_mlir.compile(from_jax(f, i32(), f32(N)))
    for n in SIZES:
        x = rnd(n)
        for i in (-5, 0, 1, 2, 3, 100):  # jax clamps the index into range
            got = exe(np.int32(i) * np.ones((), np.int32), x)
            np.testing.assert_allclose(got, jax.jit(f)(np.int32(i), x), rtol=1e-6)


def test_cond_on_integer_and_bool_results():
    def f(p, x):
        return lax.cond(p, lambda a: (a + 1, a > 0), lambda a: (a * 3, a < 0), x)
    exe = relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((), jnp.bool_), i32(N)))
    for n in SIZES:
        x = rng.integers(-9, 9, (n,)).astype(np.int32)
        for p in (True, False):
            for g, w in zip(exe(np.array(p), x), jax.jit(f)(p, x)):
                np.testing.assert_array_equal(g, w)


CASE = """
func.func @main(%i: tensor<i32>, %x: tensor<?xf32>) -> tensor<?xf32> {
  %c = stablehlo.constant dense<2.0> : tensor<f32>
  %0 = "stablehlo.case"(%i) ({
    %1 = stablehlo.negate %x : tensor<?xf32>
    stablehlo.return %1 : tensor<?xf32>
  }, {
    %1 = stablehlo.add %x, %x : tensor<?xf32>
    stablehlo.return %1 : tensor<?xf32>
  }, {
    stablehlo.return %x : tensor<?xf32>
  }) : (tensor<i32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
"""


def test_stablehlo_case_out_of_range_runs_last_branch():
    exe = relax_mlir.compile(import_stablehlo(CASE, [[], ["n"]]))
    x = rnd(6)
    for i, want in ((0, -x), (1, x + x), (2, x), (3, x), (-1, x), (2 ** 31 - 1, x), (-2 ** 31, x)):
        np.testing.assert_array_equal(exe(np.int32(i) * np.ones((), np.int32), x), want)


IF = """
func.func @main(%p: tensor<i1>, %x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %0 = "stablehlo.if"(%p) ({
    %1 = stablehlo.exponential %x : tensor<?x2xf32>
    stablehlo.return %1 : tensor<?x2xf32>
  }, {
    stablehlo.return %x : tensor<?x2xf32>
  }) : (tensor<i1>) -> tensor<?x2xf32>
  return %0 : tensor<?x2xf32>
}
"""


def test_stablehlo_if():
    exe = relax_mlir.compile(import_stablehlo(IF, [[], ["n", None]]))
    for n in (1, 5):
        x = rnd(n, 2)
        np.testing.assert_allclose(exe(np.array(True), x), np.exp(x), rtol=1e-6)
        np.testing.assert_array_equal(exe(np.array(False), x), x)


GROWING = """
func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%a = %c0, %v = %x) : tensor<i32>, tensor<?xf32>
  cond {
    %c3 = stablehlo.constant dense<3> : tensor<i32>
    %1 = stablehlo.compare LT, %a, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %1 = stablehlo.add %a, %c1 : tensor<i32>
    %2 = stablehlo.concatenate %v, %v, dim = 0 : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    stablehlo.return %1, %2 : tensor<i32>, tensor<?xf32>
  }
  return %0#1 : tensor<?xf32>
}
"""


def test_carried_value_that_changes_shape_is_refused():
    with pytest.raises(relax_mlir.CompileError, match=r"carried value #1 changes type in the body"):
        import_stablehlo(GROWING, [["n"]])


def test_cuda_refuses_control_flow():
    mod = from_jax(lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2.0, x), f32(N, 4))
    with pytest.raises(relax_mlir.CompileError, match=r"control flow \('relax_v.while' at .* is not supported on "
                                                      r"CUDA yet"):
        relax_mlir.compile(mod, target="cuda")


def _nested(x, k):
    """A while loop inside a scan step, a zero-trip while loop where k <= 0, a switch whose index
    is out of range (StableHLO: the last branch), a cond inside a fori_loop."""
    def step(c, row):
        r, _ = lax.while_loop(lambda t: (jnp.abs(t[0]).max() > 1.0) & (t[1] < 50),
                              lambda t: (t[0] * 0.5, t[1] + 1), (row + c, 0))
        return c * 0.9 + r.sum(), r
    c, rows = lax.scan(step, jnp.float32(0), x)
    z, _ = lax.while_loop(lambda t: t[1] < k[0], lambda t: (t[0] + 1.0, t[1] + 1), (rows, 0))
    w = lax.switch(k[0] + 5, [lambda v: v + 1, lambda v: v * 3], z)
    u = lax.fori_loop(0, 4, lambda i, a: lax.cond(a.sum() > 0, lambda v: v - 1.0, lambda v: v * 2.0, a), w)
    return c, u


@pytest.mark.parametrize("target", ["vulkan", "webgpu"])
def test_gpu_targets_run_control_flow(target):
    """The host program runs the graph's loops and branches, reading each decision back from the
    device: one compile, compared with jax.jit at several sizes and trip counts."""
    import toolchecks
    if not toolchecks.vulkan_adapter():
        pytest.skip("no Vulkan adapter (wgpu with lavapipe or a GPU driver)")
    exe = relax_mlir.compile(from_jax(_nested, f32(N, 3), i32(1)), target=target)
    for n, k in ((1, 0), (7, 3), (40, -2)):
        x, kk = rnd(n, 3) * 4, np.array([k], np.int32)
        for g, w in zip(exe(x, kk), jax.jit(_nested)(x, kk)):
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=2e-4, err_msg=f"n = {n}, k = {k}")


def test_shape_relation_of_a_branch_is_checked_at_entry():
    """A branch slices 4 elements from a dim of n + 1, which n >= 1 does not bound: the relation
    moves from the region function (no error channel) to @main's entry, named in @main's symbols;
    both branches run where it holds (dynamic_slice clamps the start into [0, n + 1 - 4])."""
    import pathlib
    text = (pathlib.Path(__file__).parents[2] / "transforms" / "infer-shapes-region-requirements.mlir").read_text()
    exe = relax_mlir.compile(text)
    for n in (3, 4, 9, 100):
        x = rnd(n)
        y = np.concatenate([x, x])[: n + 1]
        start = min(1, n + 1 - 4)
        for p in (True, False):
            got = exe(np.array(p), x, np.array(1, np.int32))
            want = y[start:start + 4] if p else np.exp(y[start:start + 4])
            np.testing.assert_allclose(got, want, rtol=1e-6)
    for n in (1, 2):
        with pytest.raises(ValueError, match=r"slice size 4 of dim 0 exceeds the operand's dim t_s0 "
                                             r"\(checked at the caller's entry: 4 <= n \+ 1\)"):
            exe(np.array(True), rnd(n), np.array(1, np.int32))


def test_scan_over_a_dim_bound_from_an_argument_expression():
    """x has 2*s rows (jax names the dim by an expression; the module binds s inside @main) and a
    stride-2 conv gives s positions that a scan walks: s >= 1 must reach the loop's functions (it
    did not: each step's slice of 1 needed a check inside the body, a compile error)."""
    (b, s) = export.symbolic_shape("b, s")

    def f(x):
        y = lax.conv_general_dilated(x, jnp.ones((3, 3, 4)), (2,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"))
        return lax.scan(lambda c, v: (c * 0.5 + v, c), jnp.zeros((y.shape[0], 4)), jnp.swapaxes(y, 0, 1))
    check(f, [f32(b, 2 * s, 3)], lambda n: [rnd(2, 2 * n, 3)])


def test_branch_holds_the_callers_symbol_facts():
    """A cond branch that concatenates one element with a[1:] of an n-vector: its length is
    1 + n - min(1, n), n only given jax's n >= 1, which the branch now holds as its caller does
    (the import's verification refused it: "broadcast dimensions differ: -min(1, n) + n + 1 vs n";
    jax.scipy.stats.rankdata of a symbolic length is such a program)."""
    def body(a):
        return jnp.concatenate([jnp.array([True]), a[1:] != a[:-1]]).cumsum().astype(jnp.float32) + a

    check(lambda a: lax.cond(a[0] > 0, body, lambda a: a, a), (f32(N),),
          lambda n: (np.round(rnd(n)),))
    check(lambda a: jax.scipy.stats.rankdata(a), (f32(N),), lambda n: (np.round(rnd(n)),))


def test_branch_returning_an_in_place_result_keeps_its_storage():
    """A scatter written in place (into its dying input's storage), passed through a lax.switch
    branch that returns it as it is, and returned: its storage must outlive the function, yet
    memory planning lost the switch's alias of it (the scatter's interval was merged into its
    input's) and gave its block to a later concat, whose values then came back as the switch's
    result (fuzz seed 2,390,232: [1.861, 1.861, 1.861, 0.755] for [nan, 1.024, 0.0508, 0.755])."""
    def f(x, i, u, s):
        v = (x * 2.0).at[i].multiply(u, mode="clip")
        r = lax.switch(s, [lambda a: a, lambda a: -a, lambda a: a * 2], v)
        return r, jnp.sqrt(jnp.abs(jnp.concatenate([u[-1]] * 3, axis=0)))

    exe = relax_mlir.compile(from_jax(f, f32(4, 1), i32(N), f32(N, 1), jax.ShapeDtypeStruct((), jnp.int16)))
    for n in SIZES:
        for s in (0, 1, 2, 5):
            args = (rnd(4, 1), rng.integers(-5, 5, n).astype(np.int32), rnd(n, 1), np.array(s, np.int16))
            for got, want in zip(exe(*args), jax.jit(f)(*args)):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"n={n} s={s}")


def test_switch_result_read_by_a_kernel_whose_output_was_its_destination_too():
    """Fuzz seed 2440695, compiled without relax-plan-memory (a pipeline relax-opt users may
    write): CSE had merged the tensor.empty destinations of a switch branch's kernel and of the
    sgemm after the switch, and one-shot bufferization gave sgemm the branch's buffer as input B
    and as output (it zeroes its output first: the product read 0). Each use of a tensor.empty
    now has its own (backend/common.unshare_empty_tensors). Every branch, 1x1 and 3x3, with and
    without the memory plan."""
    def f(x, i):
        v = lax.switch(i, [lambda a: a, lambda a: -a, lambda a: a * 2], lax.integer_pow(x, -3))
        return jnp.matmul(jnp.sum(v, axis=1), v)
    unplanned = [p for p in relax_mlir.OPTIMIZE_PIPELINE if p != "relax-plan-memory"]
    for shape in ((1, 1), (3, 3)):
        mod = from_jax(f, f32(*shape), jax.ShapeDtypeStruct((), jnp.int16))
        for exe in (relax_mlir.compile(mod), relax_mlir.compile(mod, passes=unplanned)):
            for i in (0, 1, 2, 4):
                x = (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) * 0.1 - 1.626)
                jaxcheck.compare(jax.jit(f)(x, np.int16(i)), exe(x, np.int16(i)), 1e-5, 1e-6, err_msg=f"{shape} {i}")
