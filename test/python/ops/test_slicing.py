"""Slices, dynamic slices and padding of symbolic tensors, through jax: real_dynamic_slice
(jnp.split, x[..., :half] of a symbolic dim), dynamic_slice / dynamic_update_slice with run-time
offsets (in range, negative, past the end: clamped), pad (edge, interior, negative) and reverse.
Each function is exported with symbolic dims, compiled ONCE, and compared with jax.jit at several
bindings."""
from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import export, lax  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402

import jaxcheck  # noqa: E402
from jaxcheck import spec as S  # noqa: E402

SIZES = (1, 7, 131)
rng = np.random.default_rng(0)


def rnd(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# Compile once; at each size, on each argument tuple, the results equal jax.jit's exactly (slicing
# moves values).
check = functools.partial(jaxcheck.check, sizes=SIZES, cases=True)


def text(mod) -> str:
    return str(mod)


b, s, L = export.symbolic_shape("b, s, L")


# --- real_dynamic_slice ------------------------------------------------------------------------

def test_split_last_dim_is_a_symbolic_slice():
    mod = check(lambda x: jnp.split(x, 3, -1), [S((b, s, 6))], lambda n: [(rnd(n, 3, 6),), (rnd(2, n, 6),)]).module
    assert text(mod).count('"relax.strided_slice"') == 3
    assert '!relax.tensor<["b", "s", 2], f32>' in text(mod)


def test_split_of_symbolic_dim_at_symbolic_points():
    # (b + 3, 4) split at 2 and b + 2: parts of 2, b and 1 rows
    mod = check(lambda x: jnp.split(x, [2, x.shape[0] - 1], 0), [S((b + 3, 4))], lambda n: [(rnd(n + 3, 4),)]).module
    # the dim is an expression (b + 3): b is bound, and the parts are 2, b and 1 rows
    assert '!relax.tensor<[2, 4], f32>, !relax.tensor<["b", 4], f32>, !relax.tensor<[1, 4], f32>' in text(mod)


def test_rope_half_of_symbolic_last_dim():
    def f(x):
        h = x.shape[-1] // 2
        return jnp.concatenate([-x[..., h:], x[..., :h]], -1)
    check(f, [S((b, s, 8))], lambda n: [(rnd(n, 2, 8),), (rnd(3, n, 8),)])


def test_causal_mask_slice_to_sequence():
    def f(m, x):
        sl = m[:, :, 1:, :-1]
        return jnp.where(sl, x[:, None, 1:, 1:], 0.0)
    check(f, [S((1, 1, s, s), jnp.bool_), S((2, s, s))],
          lambda n: [(np.tril(np.ones((1, 1, n, n), bool)), rnd(2, n, n))])


def test_last_and_strided():
    check(lambda x: (x[:, -1], x[-1], x[:, 1::2], x[:, ::-1]), [S((b, 5))], lambda n: [(rnd(n, 5),)])


def test_strided_symbolic_dim():
    # x[::2] on a symbolic dim: jax computes (b + 1) // 2 through sign/compare/select (floor_divide);
    # the importer decides those on the symbols and the result dim is symbolic
    mod = check(lambda x: (x[::2], x[1::3]), [S((b, 3))], lambda n: [(rnd(n, 3),)], sizes=(1, 2, 7, 131)).module
    assert '!relax.tensor<["floordiv(b + 1, 2)", 3], f32>' in text(mod)


# --- dynamic_slice / dynamic_update_slice ------------------------------------------------------

OFFSETS = (-1000, -3, -1, 0, 1, 2, 5, 130, 131, 1000)


def test_dynamic_slice_clamps_run_time_offsets():
    def f(x, p, q):
        return lax.dynamic_slice(x, (p, q), (1, 3))

    def args(n):
        x = rnd(n, 5)
        return [(x, np.int32(p), np.int32(q)) for p in OFFSETS for q in (-2, 0, 1, 2, 9)]
    mod = check(f, [S((b, 5)), S((), jnp.int32), S((), jnp.int32)], args).module
    assert '"relax.dynamic_slice"' in text(mod)


def _canonical(mod) -> str:
    return str(relax_mlir.run_passes(relax_mlir.parse(str(mod)), ["relax-infer-shapes", "relax-canonicalize"]))


def test_dynamic_slice_of_a_mask_table_computes_only_the_row():
    # A causal mask built at the maximum context (T x T, a broadcast compare of two iotas,
    # reshaped) of which a decode step reads one row of its symbolic cache length L: the slice
    # moves before the compare, the broadcasts and the reshape, so no T x T tensor is computed.
    T = 131

    def f(x, i):
        t = jnp.arange(T, dtype=jnp.int32)
        mask = (t[:, None] >= t[None, :])[None, None]  # [1, 1, T, T]
        row = lax.dynamic_slice(mask, (0, 0, i, 0), (1, 1, 1, x.shape[1]))
        return jnp.where(row[0, 0], x, jnp.float32(-1.0))

    def args(n):
        x = rnd(2, n)
        return [(x, np.int32(i)) for i in (-5, 0, 1, 6, n - 1, 130, 500)]
    m, = export.symbolic_shape("m", constraints=(f"m <= {T}",))
    spec = [S((2, m)), S((), jnp.int32)]
    mod = check(f, spec, args).module
    canon = _canonical(mod)
    assert f"{T}, {T}]" not in canon
    assert canon.count('"relax.dynamic_slice"') >= 2  # sliced before the compare: one per operand



def test_dynamic_slice_of_a_deep_shared_computation():
    """A slice read from the end of a deep chain of values each used twice (fuzz seed 2430542: an
    element of a complex expm1's angle, n = 1 ... 131; the canonicalizer stopped with "failed to
    converge", an internal error). The slice is sunk through shared values once per value and
    start (reused, not copied along every path: 2^depth paths here; 32 slices are left of the
    chain's, 243 before the reuse), as far as the driver's sweeps reach; what it leaves is a valid
    program, so canonicalization keeps it."""
    def chain(x, i):
        for _ in range(16):
            x = x * x + jnp.sin(x)  # x twice: a diamond per level
        return x[i]

    def seed_2430542(a, i):
        return jnp.angle(jnp.expm1(a + 1j * a))[i]

    def args(n):
        x = rnd(n) * 0.1
        return [(x, np.int32(k)) for k in (0, n - 1, -1)]
    for f in (chain, seed_2430542):
        mod = jaxcheck.check(f, [S((b,)), S((), jnp.int32)], args, sizes=SIZES, cases=True, rtol=1e-5, atol=1e-6).module
        canon = _canonical(mod)
        assert canon.count('"relax.dynamic_slice"') <= 40, canon.count('"relax.dynamic_slice"')


def test_dynamic_slice_through_elementwise_broadcast_and_reshape_keeps_clamping():
    # x: [n, 6]; y = reshape(exp(x) * 2, [1, n, 1, 6]) broadcast to [3, 1, n, 4, 6]; a [2, 1, 2, 3, 4]
    # slice at run-time starts (clamped: past the end, negative) equals jax's.
    def f(x, p, q, r):
        y = jnp.broadcast_to(jnp.reshape(jnp.exp(x) * 2, (1, x.shape[0], 1, 6)), (3, 1, x.shape[0], 4, 6))
        return lax.dynamic_slice(y, (p, 0, q, r, p), (2, 1, 2, 3, 4))

    def args(n):
        x = rnd(max(n, 2), 6)
        return [(x, np.int32(p), np.int32(q), np.int32(r)) for p in (-4, 0, 1, 9) for q in (-1, 0, 5, 200)
                for r in (0, 3)]
    n2, = export.symbolic_shape("n", constraints=("n >= 2",))
    mod = check(f, [S((n2, 6)), S((), jnp.int32), S((), jnp.int32), S((), jnp.int32)], args).module
    canon = _canonical(mod)
    assert '"relax.exp"' in canon and '(!relax.tensor<[2, 4], f32>) -> !relax.tensor<[2, 4], f32>' in canon


def test_dynamic_slice_whole_symbolic_axis_and_i64_offsets():
    def f(x, p):
        return lax.dynamic_slice_in_dim(x, p, 2, axis=1)

    def args(n):
        return [(rnd(n, 4, 3), np.int64(p) if jax.config.jax_enable_x64 else np.int32(p)) for p in OFFSETS]
    check(f, [S((b, 4, 3)), S((), jnp.int32)], args)


def test_dynamic_update_slice_kv_cache():
    def f(cache, new, pos):
        return lax.dynamic_update_slice(cache, new, (0, pos, 0))

    def args(n):
        cache, new = rnd(2, n, 4), rnd(2, 1, 4)
        return [(cache, new, np.int32(p)) for p in OFFSETS]
    mod = check(f, [S((2, s, 4)), S((2, 1, 4)), S((), jnp.int32)], args, sizes=(1, 7, 131, 1000)).module
    assert '"relax.dynamic_update_slice"' in text(mod)


def test_dynamic_update_slice_symbolic_update():
    def f(x, u, p):
        return lax.dynamic_update_slice(x, u * 2.0, (0, p))

    def args(n):
        return [(rnd(n, 5), rnd(n, 2), np.int32(p)) for p in OFFSETS]
    check(f, [S((b, 5)), S((b, 2)), S((), jnp.int32)], args)


def test_dynamic_update_slice_integers_and_bools():
    def f(x, m, p):
        return lax.dynamic_update_slice(x, jnp.full((2,), 7, jnp.int32), (p,)), \
            lax.dynamic_update_slice(m, jnp.ones((1,), bool), (p,))

    def args(n):
        return [(np.arange(n + 2, dtype=np.int32), np.zeros(n, bool), np.int32(p)) for p in OFFSETS]
    check(f, [S((b + 2,), jnp.int32), S((b,), jnp.bool_), S((), jnp.int32)], args)


# --- pad / reverse -----------------------------------------------------------------------------

PADS = [
    [(1, 2, 0), (0, 0, 0)],
    [(0, 0, 2), (1, 1, 1)],
    [(-1, 0, 0), (2, -1, 0)],
    [(2, -1, 1), (-1, -1, 3)],
    [(-3, 4, 2), (0, -2, 0)],
]


@pytest.mark.parametrize("cfg", PADS)
def test_pad_matches_lax(cfg):
    mod = check(lambda x: lax.pad(x, jnp.float32(-7.5), cfg), [S((b, 3))], lambda n: [(rnd(n, 3),)]).module
    assert '"relax.pad"' in text(mod)


def test_jnp_pad_constant_and_symbolic_dims():
    check(lambda x: jnp.pad(x, ((2, 3), (0, 1)), constant_values=1.0), [S((b, s))],
          lambda n: [(rnd(n, 4),), (rnd(3, n),)])


def test_pad_int_and_nan():
    check(lambda x, y: (lax.pad(x, jnp.int32(-1), [(1, 1, 1)]), lax.pad(y, jnp.float32(np.nan), [(0, 2, 1)])),
          [S((b,), jnp.int32), S((b,))],
          lambda n: [(np.arange(n, dtype=np.int32), np.full(n, np.inf, np.float32))])


def test_pad_by_symbolic_amounts():
    """jnp.pad by amounts computed from symbolic dims comes as stablehlo.dynamic_pad: pad-value
    blocks concatenated before and after (an amount s - 1 is 0 at s = 1)."""
    def f(x, y):
        n, m = x.shape
        return (jnp.pad(x, ((n, 2), (m - 1, 0)), constant_values=-2.5),
                jnp.pad(y, (0, y.shape[0] // 2)), jnp.pad(y, (1, 1), constant_values=9))
    mod = check(f, [S((b, s)), S((2 * b,), jnp.int32)],
                lambda n: [(rnd(n, 4), np.arange(2 * n, dtype=np.int32)), (rnd(2, n), -np.ones(4, np.int32))],
                sizes=(1, 7, 40)).module
    t = text(mod)
    assert '!relax.tensor<["2*b + 2", "2*s - 1"], f32>' in t and '!relax.tensor<["3*b"], i32>' in t
    assert '!relax.tensor<["2*b + 2"], i32>' in t and '"relax.pad"' in t  # constant amounts: relax.pad


def test_pad_by_symbolic_amounts_interior_and_crops():
    """Constant interior padding beside symbolic edges, and edges that crop: provably negative
    (1 - x.shape[0]), or of either sign (2 - n: pads at n = 1, crops from n = 3), which pads by
    max(e, 0) and crops max(-e, 0); symbolic interior padding stays a located refusal."""
    from relax_mlir.frontend.stablehlo import UnsupportedOpError

    def f(x):
        n = x.shape[0]
        return (lax.pad(x, 0.5, [(n, 0, 1)]), lax.pad(x, -1.0, [(2 - n, 1, 2)]), lax.pad(x, 7.0, [(0, 1 - n, 0)]))
    check(f, [S((b,))], lambda n: [(rnd(n),)], sizes=(1, 2, 3, 7, 40))
    with pytest.raises(UnsupportedOpError, match=r"dynamic_pad.*symbolic interior padding"):
        from_jax(lambda x: lax.pad(x, 0.0, [(0, 0, x.shape[0])]), S((b,)))


def test_roll_and_its_gradient_over_a_symbolic_dim():
    """jnp.roll by a constant over a symbolic n slices at mod(2, n); its gradient pads the
    cotangent by n + mod(2, n) - min(1, mod(2, n))**2 * n elements, never negative but beyond
    what the folds prove: checked at run time, not refused."""
    def f(x):
        w = jnp.cos(jnp.arange(x.shape[0], dtype=x.dtype) * 0.37)[:, None]
        g = jax.grad(lambda z: (jnp.roll(z, 2, axis=0) * w).sum())(x)
        return jnp.roll(x, -3, axis=0), g
    mod = check(f, [S((b, 3))], lambda n: [(rnd(n, 3),)], sizes=(1, 2, 3, 7, 40)).module
    assert "relax.requires" in text(mod) and "stablehlo.dynamic_pad: edge padding" in text(mod)

    # a roll of the flattened n * m elements: the gradient adds two pieces whose sizes are written
    # with mod(5, n * m) two ways (match_cast to one another, checked at run time)
    def g(x):
        w = jnp.cos(jnp.arange(x.size, dtype=x.dtype).reshape(x.shape) * 0.37)
        return jax.grad(lambda z: (jnp.roll(z, 5) * w).sum())(x)
    check(g, [S((b, s))], lambda n: [(rnd(n, 3),), (rnd(2, n),)], sizes=(1, 2, 3, 7))


def test_dynamic_pad_crop_that_may_exceed_the_dim_raises_at_run_time(tmp_path):
    """A negative edge of dynamic_pad that the folds cannot bound (crop m of n elements) is a
    run-time check at entry: a ValueError naming the op and the relation when m > n, also from a
    saved artifact (the runtime allocates the result, of dim n - m < 0 here, before the entry's
    prologue runs, so it evaluates the relations itself)."""
    from relax_mlir.frontend.stablehlo import import_stablehlo

    src = """func.func @main(%x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %m = stablehlo.get_dimension_size %y, dim = 0 : (tensor<?xf32>) -> tensor<i32>
  %zero = stablehlo.constant dense<0> : tensor<1xi32>
  %neg = stablehlo.negate %m : tensor<i32>
  %lo = stablehlo.reshape %neg : (tensor<i32>) -> tensor<1xi32>
  %v = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.dynamic_pad %x, %v, %lo, %zero, %zero : (tensor<?xf32>, tensor<f32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}"""
    exe = relax_mlir.compile(import_stablehlo(src, [["n"], ["m"]]))
    for n, m in ((5, 3), (4, 4), (9, 1)):
        x = rnd(n)
        np.testing.assert_array_equal(exe(x, rnd(m)), x[m:])
    exe.export(str(tmp_path / "m"))
    art = relax_mlir.runtime.load(str(tmp_path / "m"))
    np.testing.assert_array_equal(art(np.arange(6, dtype=np.float32), rnd(4)), [4, 5])
    for f in (exe, art):
        with pytest.raises(ValueError, match=r"stablehlo.dynamic_pad: edge padding -m, 0 must crop at most the n "
                                             r"elements of dim 0 at <string>:7:8: needs m <= n \(m = 3, n = 2\)"):
            f(rnd(2), rnd(3))


def test_elementwise_operands_of_unprovably_equal_dims_are_checked_at_run_time():
    """An elementwise StableHLO op has operands of one shape by definition; where their dims are
    symbols the folds cannot prove equal (n and m here), the importer match_casts one to the
    other: a ValueError naming the op when they differ, instead of a compile-time refusal."""
    from relax_mlir.frontend.stablehlo import import_stablehlo

    src = """func.func @main(%x: tensor<?x3xf32>, %y: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %r = stablehlo.add %x, %y : tensor<?x3xf32>
  return %r : tensor<?x3xf32>
}"""
    mod = import_stablehlo(src, [["n", None], ["m", None]])
    assert '"relax.match_cast"' in text(mod)
    exe = relax_mlir.compile(mod)
    for n in (1, 4, 13):
        x, y = rnd(n, 3), rnd(n, 3)
        np.testing.assert_array_equal(exe(x, y), x + y)
    with pytest.raises(ValueError, match=r"stablehlo.add of \[n, 3\] and \[m, 3\] at <string>:2:8: the operands' "
                                         r"dims must be equal"):
        exe(rnd(4, 3), rnd(5, 3))

    # the contracting dims of a dot_general, the other dims of a concatenate's operands, likewise
    src = """func.func @main(%x: tensor<?x3xf32>, %y: tensor<?x2xf32>) -> (tensor<3x2xf32>, tensor<?x5xf32>) {
  %d = stablehlo.dot_general %x, %y, contracting_dims = [0] x [0] : (tensor<?x3xf32>, tensor<?x2xf32>) -> tensor<3x2xf32>
  %c = stablehlo.concatenate %x, %y, dim = 1 : (tensor<?x3xf32>, tensor<?x2xf32>) -> tensor<?x5xf32>
  return %d, %c : tensor<3x2xf32>, tensor<?x5xf32>
}"""
    exe = relax_mlir.compile(import_stablehlo(src, [["n", None], ["m", None]]))
    for n in (1, 6):
        x, y = rnd(n, 3), rnd(n, 2)
        d, c = exe(x, y)
        np.testing.assert_allclose(d, x.T @ y, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(c, np.concatenate([x, y], 1))
    with pytest.raises(ValueError, match=r"stablehlo.dot_general of \[n, 3\] and \[m, 2\] at <string>:2:8: the "
                                         r"operands' dims must be equal"):
        exe(rnd(4, 3), rnd(5, 2))

    # a broadcast_in_dim operand dim that is neither provably 1 nor the result's
    src = """func.func @main(%x: tensor<?xf32>, %y: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %s = stablehlo.get_dimension_size %y, dim = 0 : (tensor<?x?xf32>) -> tensor<i32>
  %t = stablehlo.get_dimension_size %y, dim = 1 : (tensor<?x?xf32>) -> tensor<i32>
  %s1 = stablehlo.reshape %s : (tensor<i32>) -> tensor<1xi32>
  %t1 = stablehlo.reshape %t : (tensor<i32>) -> tensor<1xi32>
  %shape = stablehlo.concatenate %s1, %t1, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %b = stablehlo.dynamic_broadcast_in_dim %x, %shape, dims = [1] : (tensor<?xf32>, tensor<2xi32>) -> tensor<?x?xf32>
  %r = stablehlo.add %b, %y : tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}"""
    exe = relax_mlir.compile(import_stablehlo(src, [["n"], ["m", "k"]]))
    x, y = rnd(4), rnd(3, 4)
    np.testing.assert_array_equal(exe(x, y), x + y)
    with pytest.raises(ValueError, match=r"stablehlo.dynamic_broadcast_in_dim of \[m, k\] and \[n\] at <string>:7:8"):
        exe(rnd(5), y)

    # a scatter's updates (m rows) against its indices (n of them)
    src = """func.func @main(%x: tensor<5x3xf32>, %i: tensor<?x1xi32>, %u: tensor<?x3xf32>) -> tensor<5x3xf32> {
  %r = "stablehlo.scatter"(%x, %i, %u) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<5x3xf32>, tensor<?x1xi32>, tensor<?x3xf32>) -> tensor<5x3xf32>
  return %r : tensor<5x3xf32>
}"""
    exe = relax_mlir.compile(import_stablehlo(src, [None, ["n", None], ["m", None]]))
    x, i, u = rnd(5, 3), np.array([[1], [4], [1]], np.int32), rnd(3, 3)
    want = x.copy()
    np.add.at(want, i[:, 0], u)
    np.testing.assert_allclose(exe(x, i, u), want, rtol=1e-6)
    with pytest.raises(ValueError, match=r"stablehlo.scatter of \[n, 1\] and \[m, 3\] at <string>:2:8"):
        exe(x, i, rnd(2, 3))


def test_flip():
    mod = check(lambda x: (jnp.flip(x, 0), jnp.flip(x, (0, 2)), jnp.flip(x)), [S((b, 3, s))],
                lambda n: [(rnd(n, 3, 2),), (rnd(2, 3, n),)]).module
    assert '"relax.reverse"' in text(mod)


# --- relax text: bindings to 0, run-time checks, located errors ----------------------------------

def T(dims, dt="f32") -> str:
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + f"], {dt}>"


def func(params, body, ret) -> str:
    ps = ", ".join(f"%{n}: {t}" for n, t in params)
    return f"func.func @main({ps}) -> {ret} {{\n{body}\n  return %r : {ret}\n}}\n"


def lax_pad(x, v, cfg):
    return np.asarray(lax.pad(jnp.asarray(x), jnp.asarray(v, x.dtype), cfg))


def test_pad_symbol_bound_to_zero():
    # dim n + low + high + interior * max(n - 1, 0): at n = 0 only the edges remain
    src = func([("x", T(["n", 2])), ("v", T([]))],
               f'  %r = "relax.pad"(%x, %v) {{low = [2, 0], high = [1, -1], interior = [3, 1]}} : '
               f'({T(["n", 2])}, {T([])}) -> {T(["?", "?"])}', T(["?", "?"]))
    exe = relax_mlir.compile(src)
    for n in (0, 1, 2, 9):
        x = rnd(n, 2)
        np.testing.assert_array_equal(exe(x, np.float32(5.0)), lax_pad(x, 5.0, [(2, 1, 3), (0, -1, 1)]))


def test_pad_result_that_may_be_negative_is_checked_at_run_time():
    """Cropping 2 elements of n needs n >= 2: not provable, so checked at entry (a ValueError
    naming the op before any kernel runs), like every shape relation the compiler cannot prove."""
    src = func([("x", T(["n"])), ("v", T([]))],
               f'  %r = "relax.pad"(%x, %v) {{low = [-2], high = [0], interior = [0]}} : '
               f'({T(["n"])}, {T([])}) -> {T(["?"])}', T(["?"]))
    exe = relax_mlir.compile(src)
    for n in (2, 3, 9):
        x = rnd(n)
        np.testing.assert_array_equal(exe(x, np.float32(5.0)), x[2:])
    for n in (0, 1):
        with pytest.raises(ValueError, match=r"'relax.pad' op at .*: dim 0 of the result, n - 2, is negative "
                                             r"\(operand \[n\], low -2, high 0\).*n = " + str(n)):
            exe(rnd(n), np.float32(5.0))


def test_dynamic_slice_and_update_with_zero_sizes_and_zero_dims():
    i32 = T([], "i32")
    src = func([("x", T(["n", 3])), ("u", T(["n", 0])), ("p", i32)],
               f'  %y = "relax.dynamic_update_slice"(%x, %u, %p, %p) : ({T(["n", 3])}, {T(["n", 0])}, {i32}, {i32}) '
               f'-> {T(["?", "?"])}\n'
               f'  %r = "relax.dynamic_slice"(%y, %p, %p) {{sizes = ["n", 2]}} : ({T(["?", "?"])}, {i32}, {i32}) -> '
               f'{T(["?", "?"])}', T(["?", "?"]))
    exe = relax_mlir.compile(src)
    for n in (0, 1, 5):
        x = rnd(n, 3)
        for p in (-4, 0, 1, 7):
            want = np.asarray(lax.dynamic_slice(jnp.asarray(x), (p, p), (n, 2)))
            np.testing.assert_array_equal(exe(x, np.zeros((n, 0), np.float32), np.int32(p)), want)


def test_update_larger_than_operand_raises_at_run_time():
    i32 = T([], "i32")
    src = func([("x", T(["n"])), ("u", T([2])), ("p", i32)],
               f'  %r = "relax.dynamic_update_slice"(%x, %u, %p) : ({T(["n"])}, {T([2])}, {i32}) -> {T(["?"])}',
               T(["?"]))
    exe = relax_mlir.compile(src)
    x, u = rnd(3), rnd(2)
    want = np.asarray(lax.dynamic_update_slice(jnp.asarray(x), jnp.asarray(u), (np.int32(9),)))
    np.testing.assert_array_equal(exe(x, u, np.int32(9)), want)
    with pytest.raises(ValueError, match=r"the update size 2 of dim 0 exceeds the operand's dim n"):
        exe(rnd(1), u, np.int32(0))


def test_slice_larger_than_static_dim_is_refused():
    i32 = T([], "i32")
    src = func([("x", T([3])), ("p", i32)],
               f'  %r = "relax.dynamic_slice"(%x, %p) {{sizes = [4]}} : ({T([3])}, {i32}) -> {T(["?"])}', T(["?"]))
    with pytest.raises(relax_mlir.CompileError, match=r"<string>:2:8: error: 'relax.dynamic_slice' op the slice size 4 "
                                                       r"of dim 0 exceeds the operand's dim 3"):
        relax_mlir.compile(src)


@pytest.mark.parametrize("op, attrs, operands, msg", [
    ("relax.dynamic_slice", "{sizes = [1]}", ["x"], "takes 1 start indices .*got 0"),
    ("relax.dynamic_slice", "{sizes = [-1]}", ["x", "p"], "sizes must be non-negative"),
    ("relax.pad", "{low = [0], high = [0], interior = [-1]}", ["x", "v"], "interior padding must be non-negative"),
    ("relax.pad", "{low = [0, 1], high = [0], interior = [0]}", ["x", "v"], "'low' has 2 entries, expected 1"),
    ("relax.reverse", "{dimensions = [0, 0]}", ["x"], r"dimensions \[0, 0\] repeat a dim"),
    ("relax.reverse", "{dimensions = [1]}", ["x"], "axis 1 is out of range for rank 1"),
])
def test_bad_attributes_are_located(op, attrs, operands, msg):
    types = {"x": T(["n"]), "p": T([], "i32"), "v": T([])}
    src = func([(n, types[n]) for n in ("x", "p", "v")],
               f'  %r = "{op}"({", ".join("%" + o for o in operands)}) {attrs} : '
               f'({", ".join(types[o] for o in operands)}) -> {T(["?"])}', T(["?"]))
    with pytest.raises(relax_mlir.CompileError, match=rf"<string>:2:8: error: '{op}' op .*{msg}"):
        relax_mlir.compile(src)


def test_reverse_bool_and_zero_dim():
    src = func([("x", T(["n", 3], "i1"))],
               f'  %r = "relax.reverse"(%x) {{dimensions = [0, -1]}} : ({T(["n", 3], "i1")}) -> {T(["?", "?"], "i1")}',
               T(["?", "?"], "i1"))
    exe = relax_mlir.compile(src)
    for n in (0, 1, 4):
        x = rng.random((n, 3)) > 0.5
        np.testing.assert_array_equal(exe(x), x[::-1, ::-1])


@pytest.mark.parametrize("dt", ["i8", "i16", "i64"])
def test_dynamic_slice_start_index_types(dt):
    st = T([], dt)
    src = func([("x", T(["n", 4])), ("p", st), ("q", st)],
               f'  %r = "relax.dynamic_slice"(%x, %p, %q) {{sizes = [1, 3]}} : ({T(["n", 4])}, {st}, {st}) -> '
               f'{T(["?", "?"])}', T(["?", "?"]))
    exe = relax_mlir.compile(src)
    npt = {"i8": np.int8, "i16": np.int16, "i64": np.int64}[dt]
    for n in (1, 6):
        x = rnd(n, 4)
        for p, q in ((-128 if dt == "i8" else -30000, 2), (127, -1), (3, 1), (-1, 5)):
            # StableHLO: each start clamped into [0, dim - size] (no wrapping of negative starts)
            i, j = min(max(p, 0), n - 1), min(max(q, 0), 4 - 3)
            np.testing.assert_array_equal(exe(x, npt(p), npt(q)), x[i:i + 1, j:j + 3])


def test_pad_bool():
    check(lambda m: lax.pad(m, jnp.bool_(True), [(1, -1, 1), (0, 2, 0)]), [S((b, 2), jnp.bool_)],
          lambda n: [(rng.random((n, 2)) > 0.5,)])


# --- dynamic_update_slice in place -----------------------------------------------------------------

def _dus_program(keep_operand: bool) -> str:
    """c1 = 2 * c; c2 = dus(c1, a, p); c3 = dus(c2, b, q); returns c3 + 1 (and + c1 when
    `keep_operand`: then c1 is live after the first update, which must not write it in place)."""
    t, u, i32 = T(["n", 4]), T([1, 4]), T([], "i32")
    body = [f'  %c1 = "relax.add"(%c, %c) : ({t}, {t}) -> {t}',
            f'  %c2 = "relax.dynamic_update_slice"(%c1, %a, %p, %z) : ({t}, {u}, {i32}, {i32}) -> {t}',
            f'  %c3 = "relax.dynamic_update_slice"(%c2, %b, %q, %z) : ({t}, {u}, {i32}, {i32}) -> {t}',
            f'  %o = "relax.add"(%c3, %c3) : ({t}, {t}) -> {t}']
    body.append(f'  %r = "relax.add"(%o, %c1) : ({t}, {t}) -> {t}' if keep_operand else
                f'  %r = "relax.negative"(%o) : ({t}) -> {t}')
    return func([("c", t), ("a", u), ("b", u), ("p", i32), ("q", i32), ("z", i32)], "\n".join(body), t)


def _dus_reference(c, a, b, p, q, keep_operand):
    def dus(x, v, i):
        x = x.copy()
        i = min(max(int(i), 0), x.shape[0] - 1)
        x[i:i + 1] = v
        return x
    c1 = c + c
    o = 2 * dus(dus(c1, a, p), b, q)
    return o + c1 if keep_operand else -o


@pytest.mark.parametrize("keep_operand", [False, True])
def test_dynamic_update_slice_in_place_only_when_operand_dies(keep_operand):
    src = _dus_program(keep_operand)
    m = relax_mlir.run_passes(relax_mlir.parse(src), ["relax-infer-shapes", "relax-legalize", "relax-plan-memory"])
    with m.context:
        main = [f for f in m.op.regions[0].blocks[0].operations if str(f.attributes["sym_name"]) == '"main"'][0]
        calls = [o for o in main.regions[0].blocks[0].operations
                 if o.name == "relax_v.call_tir" and "dynamic_update_slice" in str(o.attributes["callee"])]
    flags = [str(o.attributes["sym_args"]) for o in calls]
    # the second update's operand (c2) dies there: in place; the first's (c1) only when unused later
    assert flags == (['["1"]', '["1"]'] if not keep_operand else ['["0"]', '["1"]']), flags
    exe = relax_mlir.compile(src)
    for n in (1, 5, 64):
        c, a, b = rnd(n, 4), rnd(1, 4), rnd(1, 4)
        for p, q in ((0, 0), (2, -1), (n - 1, 100), (-7, 3)):
            got = exe(c, a, b, np.int32(p), np.int32(q), np.int32(0))
            np.testing.assert_array_equal(got, _dus_reference(c, a, b, p, q, keep_operand))


def test_real_dynamic_slice_with_run_time_bounds_is_refused_located():
    from relax_mlir.frontend.stablehlo import UnsupportedOpError, import_stablehlo
    text = """
func.func public @main(%x: tensor<?xf32>, %s: tensor<1xi32>, %l: tensor<1xi32>) -> tensor<?xf32> {
  %c = stablehlo.constant dense<1> : tensor<1xi32>
  %0 = stablehlo.real_dynamic_slice %x, %s, %l, %c : (tensor<?xf32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}"""
    with pytest.raises(UnsupportedOpError, match=r"'stablehlo.real_dynamic_slice': start_indices, limit_indices and "
                                                  r"strides must be shape computations") as e:
        import_stablehlo(text, source_name="in.mlir")
    assert '"in.mlir":4:' in e.value.loc


def test_kv_cache_decode_step():
    """One attention decode step: the new key/value written into the caches at `pos`, the query
    attending to the positions <= pos; jnp.split of a fused qkv projection on a symbolic batch."""
    def step(kc, vc, x, w, pos):
        q, k, v = jnp.split(x @ w, 3, -1)                                   # [b, 1, d] each
        kc = lax.dynamic_update_slice(kc, k, (0, pos, 0))
        vc = lax.dynamic_update_slice(vc, v, (0, pos, 0))
        s = jnp.einsum("bqd,bkd->bqk", q, kc) / 4.0
        mask = jnp.arange(kc.shape[1])[None, None, :] <= pos
        p = jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)
        return jnp.einsum("bqk,bkd->bqd", p, vc), kc, vc

    specs = [S((b, L, 16)), S((b, L, 16)), S((b, 1, 8)), S((8, 48)), S((), jnp.int32)]
    mod = from_jax(step, *specs)
    exe = relax_mlir.compile(mod)
    ref = jax.jit(step)
    for nb, nl in ((1, 1), (2, 7), (3, 131)):
        kc, vc, x, w = rnd(nb, nl, 16), rnd(nb, nl, 16), rnd(nb, 1, 8), rnd(8, 48)
        for pos in (0, nl - 1, nl + 5, -1):
            got, want = exe(kc, vc, x, w, np.int32(pos)), ref(kc, vc, x, w, np.int32(pos))
            for g, wv in zip(got, want):
                np.testing.assert_allclose(np.asarray(g), np.asarray(wv), rtol=1e-4, atol=1e-5)
