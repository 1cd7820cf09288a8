"""Symbols that jax recovers by division: an argument dim given as `2*b`, `5*k + 15` or `3*s`.

jax.export gives @main an argument of unknown dim D and recovers b = D // 2 (k = (D - 15) // 5)
with its floor_divide / remainder arithmetic; dims of intermediate values are then b. The importer
binds the symbol from D (relax.arange of (D - b0) floordiv a elements, match_cast to [b]) and
checks D = a*b + b0 at run time. Each function is compiled ONCE and compared with jax.jit at several
bindings; a length that is not of the form raises ValueError naming the argument and the
expression, one below the form's least value names the bound."""
import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import jaxcheck  # noqa: E402
from jaxcheck import spec  # noqa: E402

rng = np.random.default_rng(2)
check = functools.partial(jaxcheck.check, rtol=1e-5, atol=1e-5)
(B,) = jax.export.symbolic_shape("b")
(K,) = jax.export.symbolic_shape("k")
BS = jax.export.symbolic_shape("b, s")


def rnd(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _symbol_lower(mod) -> str:
    with mod.context:
        main = mod.op.regions[0].blocks[0].operations[0]
        return str(main.attributes["relax.symbol_lower"])


# --- 2*b -----------------------------------------------------------------------------------------

TWO_B = {
    "sum_halves": lambda x: x.reshape(2, -1, 8).sum(0),
    "first_half": lambda x: x[: x.shape[0] // 2] * 2.0,
    "split": lambda x: jnp.split(x, 2)[1] - jnp.split(x, 2)[0],
    "mean_pairs": lambda x: x.reshape(x.shape[0] // 2, 2, 8).mean(1),
    "every_other": lambda x: x[::2] + x[1::2],
    "half_iota": lambda x: x[: x.shape[0] // 2] + jnp.arange(x.shape[0] // 2, dtype=jnp.float32)[:, None],
    "dynamic_slice_at_half": lambda x: lax.dynamic_slice_in_dim(x, x.shape[0] // 2, x.shape[0] // 2, 0),
    "roll_half": lambda x: jnp.roll(x, x.shape[0] // 2, axis=0),
}


@pytest.mark.parametrize("name", sorted(TWO_B))
def test_two_b(name):
    """[2*b, 8] -> results with dim b, at b = 1, 7, 37 from one compile."""
    mod = check(TWO_B[name], [spec((2 * B, 8))], lambda b: [rnd(2 * b, 8)], sizes=(1, 7, 37)).module
    text = str(mod)
    assert '!relax.tensor<["2*b", 8], f32>' in text  # the argument as the body sees it
    if name != "roll_half":
        assert '!relax.tensor<["b", 8], f32>' in text  # an intermediate (or result) dim b = (2*b) // 2


@pytest.mark.parametrize("b_first", [False, True])
def test_two_b_with_a_b_argument(b_first):
    """x: [2*b, 8] beside y: [b, 8]: the signature keeps 2*b (no symbol of its own), so the runtime
    binds b from y and checks x's dim in Python, before native code runs."""
    def f(x, y):
        return x.reshape(2, -1, 8) + y

    g = (lambda y, x: f(x, y)) if b_first else f
    specs = [spec((2 * B, 8)), spec((B, 8))]
    order = (lambda a: a[::-1]) if b_first else (lambda a: a)
    c = check(g, order(specs), lambda b: order([rnd(2 * b, 8), rnd(b, 8)]), sizes=(1, 7, 37))
    x_arg, y_arg = (1, 0) if b_first else (0, 1)
    assert f'%arg{x_arg}: !relax.tensor<["2*b", 8], f32>' in c.text and "arg0_dim0" not in c.text
    for n in (7, 6, 0):
        with pytest.raises(ValueError, match=rf"argument #{x_arg} has shape \({n}, 8\), but dim 0 must be 2\*b "
                                             rf"\(b = 4 from argument #{y_arg} dim 0\)"):
            c.exe(*order([rnd(n, 8), rnd(4, 8)]))


def test_two_b_odd_and_short_lengths_are_refused():
    c = check(TWO_B["sum_halves"], [spec((2 * B, 8))], lambda b: [rnd(2 * b, 8)], sizes=(2,))
    assert _symbol_lower(c.module) == "{arg0_dim0 = 2 : i64, b = 1 : i64}"  # b >= 1, and b itself (bound inside)
    for n in (3, 9, 75):
        with pytest.raises(ValueError, match=r"argument #0 \(dim 0 = 2\*b\).*dim 0 is the argument's size, the pattern "
                                             rf"requires 2\*b \(given: argument #0 \({n}, 8\)\)"):
            c.exe(rnd(n, 8))
    for n in (0, 1):
        with pytest.raises(ValueError, match=rf"symbol arg0_dim0 = {n} \(from argument #0 dim 0\) is below its "
                                             r"lower bound 2"):
            c.exe(rnd(n, 8))
    np.testing.assert_array_equal(c.exe(np.ones((4, 8), np.float32)), np.full((2, 8), 2.0, np.float32))


# --- 5*k + 15 ------------------------------------------------------------------------------------

FIVE_K = {
    "head": lambda x: x[: (x.shape[0] - 15) // 5] * 2.0,
    "tail_reshaped": lambda x: x[15:].reshape(5, -1).sum(0),
    "rows": lambda x: x.reshape(5, -1).T + 1.0,
    "head_and_tail": lambda x: (x[: (x.shape[0] - 15) // 5], x[(x.shape[0] - 15) // 5 * 4 + 15:]),
}


@pytest.mark.parametrize("name", sorted(FIVE_K))
def test_five_k_plus_15(name):
    """[5*k + 15] at k = 1, 7, 41 from one compile."""
    mod = check(FIVE_K[name], [spec((5 * K + 15,))], lambda k: [rnd(5 * k + 15)], sizes=(1, 7, 41)).module
    assert '!relax.tensor<["5*k + 15"], f32>' in str(mod)


def test_five_k_plus_15_bad_lengths_are_refused():
    c = check(FIVE_K["head"], [spec((5 * K + 15,))], lambda k: [rnd(5 * k + 15)], sizes=(3,))
    assert '!relax.tensor<["k"], f32>' in str(c.module)
    assert _symbol_lower(c.module) == "{arg0_dim0 = 20 : i64, k = 1 : i64}"  # k >= 1, and k itself (bound inside)
    for n in (21, 24, 26, 101):
        with pytest.raises(ValueError, match=r"argument #0 \(dim 0 = 5\*k \+ 15\)"):
            c.exe(rnd(n))
    for n in (0, 15, 19):
        with pytest.raises(ValueError, match=rf"symbol arg0_dim0 = {n} .* below its lower bound 20"):
            c.exe(rnd(n))


# --- (b, 3*s) -> (b, s, 3) --------------------------------------------------------------------------

B_3S = {
    "reshape": lambda x: x.reshape(x.shape[0], -1, 3),
    "reshape_sum": lambda x: x.reshape(x.shape[0], -1, 3).sum(-1) + 1.0,
    "reshape_swap": lambda x: jnp.swapaxes(x.reshape(x.shape[0], x.shape[1] // 3, 3), 1, 2).reshape(x.shape[0], -1),
}


@pytest.mark.parametrize("name", sorted(B_3S))
def test_b_3s_reshaped(name):
    """[b, 3*s] at (b, s) = (1, 1), (7, 13), (3, 40) from one compile."""
    mod = check(B_3S[name], [spec((BS[0], 3 * BS[1]))], lambda bs: [rnd(bs[0], 3 * bs[1])],
                sizes=((1, 1), (7, 13), (3, 40))).module
    text = str(mod)
    assert '!relax.tensor<["b", "3*s"], f32>' in text
    assert '!relax.tensor<["b", "s", 3], f32>' in text


def test_b_3s_matmul_and_bad_lengths():
    c = check(lambda x, w: x.reshape(x.shape[0], -1, 3) @ w, [spec((BS[0], 3 * BS[1])), spec((3, 4))],
              lambda bs: [rnd(bs[0], 3 * bs[1]), rnd(3, 4)], sizes=((1, 1), (7, 13), (3, 40)))
    with pytest.raises(ValueError, match=r"argument #0 \(dim 1 = 3\*s\)"):
        c.exe(rnd(2, 7), rnd(3, 4))
    with pytest.raises(ValueError, match=r"symbol arg0_dim1 = 0 .* below its lower bound 3"):
        c.exe(rnd(2, 0), rnd(3, 4))


def test_roll_over_an_even_dim():
    """jnp.roll by 3 over a dim 2*s: jax computes -3 mod 2s at run time; proving the slice sizes
    splits s's dim by residue mod 2, and the odd class contradicts dim == 2*s: a case with nothing
    to prove, which was a 'contradictory shape facts' CompileError."""
    b, s = jax.export.symbolic_shape("b, s")
    check(lambda x: (jnp.roll(x, 3, axis=1), jnp.roll(x, -5, axis=1)), [spec((b, 2 * s))],
          lambda n: [rnd(2, 2 * n)], [1, 2, 7])


@pytest.mark.parametrize("name", ["avg_pool_valid", "floor_divide_neg", "remainder_neg"])
def test_sizes_divided_across_zero(name):
    """jax computes a size from a symbol that may be below a constant with its floor_divide and
    remainder (VALID pooling over n >= 1 positions: (n - 3) // 2 + 1, the floor of a negative
    number for n < 3): the truncating divide of a dividend of either sign is folded exactly
    (floor plus one where a negative dividend leaves a remainder), so the size is known (the
    pooled mean's divisor was refused: 'output_dimensions is not a known shape computation').
    Equal to jax.jit at every n from 1 to 9 and 33, from one compile."""
    (n,) = jax.export.symbolic_shape("n")
    fns = {
        "avg_pool_valid": (lambda x: lax.reduce_window(x, 0., lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "VALID") / 9.,
                           lambda k: (1, k, k, 2)),
        "floor_divide_neg": (lambda x: jnp.zeros(((x.shape[0] - 5) // 3 + 2,)) + x.sum(), lambda k: (k,)),
        "remainder_neg": (lambda x: jnp.zeros(((x.shape[0] - 5) % 3 + 1,)) + x.sum(), lambda k: (k,)),
    }
    fn, shape = fns[name]
    check(fn, [spec(shape(n))], lambda k: [rnd(*shape(k))], sizes=(1, 2, 3, 4, 5, 6, 7, 8, 9, 33))


# --- reshapes whose element count jax trusts --------------------------------------------------

TRUSTED = {
    "split_heads": (lambda x: x.reshape(x.shape[0], 2, x.shape[1] // 2) * 2.0, lambda n: (3, 2 * n), r"\[s, k\]",
                    r"\[s, 2, floordiv\(k, 2\)\]"),
    "merge_pairs": (lambda x: x.reshape(x.shape[0], x.shape[1] // 2, 2 * x.shape[2]).sum(1),
                    lambda n: (2, 2 * n, 3), r"\[s, k, 3\]", r"\[s, floordiv\(k, 2\), 6\]"),
}


@pytest.mark.parametrize("name", sorted(TRUSTED))
def test_reshape_trusting_divisibility_checks_it_at_run_time(name):
    """x.reshape(s, 2, k // 2) over a symbolic k: jax exports it without asserting k even (an odd
    k is not a program jax runs correctly). relax cannot prove the element counts equal and
    refused it at compile time ('cannot reshape'); now the count is checked at run time, so the
    program compiles once, runs at every even k, and an odd k raises ValueError naming the
    reshape, its dims and where it is."""
    fn, shape, src, dst = TRUSTED[name]
    s, k = jax.export.symbolic_shape("s, k")
    c = check(fn, [spec((s, k) + tuple(shape(1)[2:]))], lambda n: [rnd(*shape(n))], sizes=(1, 4, 31))
    for n in (3, 5):
        bad = rnd(*shape(1)[:1], n, *shape(1)[2:])
        with pytest.raises(ValueError, match=rf"reshape of {src} to {dst} at .*test_dim_division.py:\d+:\d+: "
                                             r"the element counts .* must be equal"):
            c.exe(bad)
