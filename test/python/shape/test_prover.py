"""The shape prover: what it proves from Facts, and that it never proves a false relation."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from relax_mlir.shape import Facts, ceildiv, const, floordiv, max_, min_, mod, parse, sym

P = parse
SYMS = ("a", "b", "n")
_BUILD = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
          "min": min_, "max": max_, "floordiv": floordiv, "mod": mod, "ceildiv": ceildiv}


def build(t):
    """An Expr from a tree: an int, a symbol name, or (op, lhs, rhs)."""
    if isinstance(t, int):
        return const(t)
    if isinstance(t, str):
        return sym(t)
    return _BUILD[t[0]](build(t[1]), build(t[2]))


def tree_strategy(max_leaves: int, consts=st.integers(-3, 8)):
    return st.recursive(
        st.one_of(consts, st.sampled_from(SYMS)),
        lambda c: st.one_of(
            st.tuples(st.sampled_from(["+", "-", "*", "min", "max"]), c, c),
            st.tuples(st.sampled_from(["floordiv", "mod", "ceildiv"]), c,
                      st.one_of(st.integers(1, 5), st.sampled_from(SYMS))),
        ),
        max_leaves=max_leaves,
    )


# -- what it proves -----------------------------------------------------------------------------


def test_defaults_symbols_are_non_negative():
    f = Facts()
    assert f.prove_ge("n", 0)
    assert not f.prove_positive("n")
    assert f.prove_le("n", "n*n + n")
    assert f.prove_le("n", "2*n")
    assert not f.prove_le("2*n", "n")
    assert f.prove_lt("n", "n + 1")
    assert f.prove_gt("n + 1", "n")
    assert not f.prove_eq("n", "m")


def test_bounds():
    f = Facts(lower={"n": 1}, upper={"n": 4096, "m": 64})
    assert f.prove_positive("n")
    assert f.prove_le("n", 4096) and not f.prove_lt("n", 4096)
    assert f.prove_le("n*m", 4096 * 64)
    assert f.upper_bound("2*n + m") == 8256
    assert f.lower_bound("2*n + m") == 2
    assert f.with_lower("m", 1).upper_bound("n*m - n") == 4096 * 63  # shifting cancels terms
    assert f.upper_bound("k") is None and f.lower_bound("-k") is None
    assert f.upper_bound("floordiv(n, 2)") == 2048
    assert f.upper_bound("mod(k, 8)") == 7
    assert f.upper_bound("min(n, k)") == 4096
    assert f.upper_bound(7) == 7


def test_shift_by_lower_bound():
    f = Facts(lower={"m": 1})
    assert f.prove_ge("n*m", "n")
    assert not Facts().prove_ge("n*m", "n")


def test_equalities():
    f = Facts(lower={"n": 1}, upper={"n": 4096}, equalities=[(P("n"), P("2*m"))])
    assert f.prove_eq("n", "m + m")
    assert f.prove_le("m", "n")
    assert f.prove_positive("m")
    assert f.upper_bound("m") == 2048
    assert f.upper_bound("n") == 4096
    assert not f.prove_eq("n", "m")
    g = Facts(equalities=[("b*s", 64)])  # kept as a residual
    assert g.prove_eq("2*b*s", 128)
    h = Facts(equalities=[("2*n", "3*m")])
    assert h.prove_eq("4*n", "6*m") and not h.prove_eq("n", "m")
    chain = Facts(equalities=[("a", "b + 1"), ("b", "c + 1")])
    assert chain.prove_eq("a", "c + 2") and chain.prove_gt("a", "c")
    with pytest.raises(ValueError):
        Facts(equalities=[("n", "n + 1")])


def test_nodes():
    f = Facts(lower={"m": 1})
    assert f.prove_le("mod(n, 4)", "n")
    assert f.prove_lt("mod(n, 4)", 4)
    assert f.prove_lt("mod(n, m)", "m")
    assert f.prove_le("mod(n, m)", "n")
    assert f.prove_le("floordiv(n, m)", "n")
    assert f.prove_le("4*floordiv(n, 4)", "n")
    assert f.prove_eq("4*floordiv(n, 4) + mod(n, 4)", "n")
    assert Facts(lower={"n": 1}).prove_le("floordiv(n + 1, 2)", "n")
    assert f.prove_le("min(n, m)", "n") and f.prove_le("min(n, m)", "m")
    assert f.prove_ge("max(n, m)", "n") and f.prove_ge("max(n, m)", "m")
    assert f.prove_le("min(n, k)", "max(n, k)")
    assert f.prove_le("min(n, k) + max(n, k)", "2*n + 2*k")
    assert not f.prove_le("n", "min(n, k)")


def test_immutable_updates():
    f = Facts()
    g = f.with_lower("n", 2)
    assert g.prove_gt("n", 1) and not f.prove_gt("n", 1)
    h = g.with_upper("n", 8).with_upper("n", 16)
    assert h.upper_bound("n") == 8
    e = h.with_equality("m", "n - 2")
    assert e.prove_ge("m", 0) and e.upper_bound("m") == 6
    assert not h.prove_eq("m", "n - 2")
    assert g.with_lower("n", 1).prove_gt("n", 1)


# -- soundness -------------------------------------------------------------------------------------

# Each scenario: facts over a, b, n with small boxes, and every binding that satisfies them.
EQUALITIES = [None, ("n", "2*a"), ("n", "a + b"), ("b", "a + 1"), ("2*n", "3*a"), ("a*b", "n")]


def _scenarios():
    out = []
    for eq, (la, ua), (ln, un) in itertools.product(EQUALITIES, [(0, 4), (1, 5)], [(0, 6), (2, 9)]):
        lower, upper = {"a": la, "n": ln}, {"a": ua, "b": 5, "n": un}
        facts = Facts(lower=lower, upper=upper, equalities=[eq] if eq else [])
        lhs, rhs = (P(eq[0]), P(eq[1])) if eq else (None, None)
        envs = []
        for a, b, n in itertools.product(range(la, ua + 1), range(0, 6), range(ln, un + 1)):
            env = {"a": a, "b": b, "n": n}
            if lhs is None or lhs.evaluate(env) == rhs.evaluate(env):
                envs.append(env)
        out.append((facts, envs))
    return out


SCENARIOS = _scenarios()
BOX_TREES = tree_strategy(6)


def _values(e, envs):
    try:
        return [e.evaluate(env) for env in envs]
    except ZeroDivisionError:
        return None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(SCENARIOS))), BOX_TREES, BOX_TREES, st.integers(-2, 3))
def test_never_proves_false(k, ta, tb, shift):
    facts, envs = SCENARIOS[k]
    try:
        a = build(ta)
        b = build(tb)
    except ZeroDivisionError:
        assume(False)
    # also ask about relations that are often true: a vs a + b*b + shift, a vs min/max with b
    pairs = [(a, b), (a, a + b * b + shift), (min_(a, b), a + shift), (a, max_(a, b) + shift)]
    for x, y in pairs:
        xs, ys = _values(x, envs), _values(y, envs)
        if xs is None or ys is None:
            continue
        ok = list(zip(xs, ys))
        if facts.prove_le(x, y):
            assert all(u <= v for u, v in ok), ("le", str(x), str(y))
        if facts.prove_lt(x, y):
            assert all(u < v for u, v in ok), ("lt", str(x), str(y))
        if facts.prove_ge(x, y):
            assert all(u >= v for u, v in ok), ("ge", str(x), str(y))
        if facts.prove_eq(x, y):
            assert all(u == v for u, v in ok), ("eq", str(x), str(y))
        if facts.prove_positive(x):
            assert all(u >= 1 for u in xs), ("positive", str(x))
        hi, lo = facts.upper_bound(x), facts.lower_bound(x)
        if hi is not None:
            assert all(u <= hi for u in xs), ("upper_bound", str(x), hi)
        if lo is not None:
            assert all(u >= lo for u in xs), ("lower_bound", str(x), lo)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree_strategy(10, st.integers(-6, 12)), st.dictionaries(st.sampled_from(("a", "b", "n")), st.integers(0, 30)),
       st.lists(st.integers(0, 30), min_size=3, max_size=3))
def test_upper_bound_holds_in_box(t, upper, base):
    """upper_bound/lower_bound hold at the box corners and at a random point inside."""
    try:
        e = build(t)
    except ZeroDivisionError:
        assume(False)
    facts = Facts(upper=upper)
    hi, lo = facts.upper_bound(e), facts.lower_bound(e)
    names = ("a", "b", "n")
    corners = [dict(zip(names, c)) for c in itertools.product(*[(0, upper.get(x, 31)) for x in names])]
    inside = {x: min(v, upper.get(x, v)) for x, v in zip(names, base)}
    for env in corners + [inside]:
        try:
            v = e.evaluate(env)
        except ZeroDivisionError:
            continue
        assert hi is None or v <= hi
        assert lo is None or v >= lo


def test_trivial_relations_of_random_exprs():
    f = Facts()
    for t in [("+", "n", 3), ("floordiv", "n", 4), ("min", "a", ("*", "b", "n")), ("mod", "n", "a")]:
        e = build(t)
        assert f.prove_eq(e, e) and f.prove_le(e, e) and f.prove_lt(e, e + 1)
        assert f.prove_eq(e + e, 2 * e)
    assert const(3) == 3 and f.prove_eq(floordiv(sym("n") * 6, 3), 2 * sym("n"))
    assert f.prove_lt(mod(sym("n"), 5), 5)


def test_eq_resolves_min_max_the_facts_order():
    """jax's clamped slice sizes nest min / max over one value (seed 2351420: the size of
    `a1[:-1:3][:1]` as jax computes it, against min(1, a) from the slice's own rule); with a >= 0
    each node's order is provable, and the two are equal. Nodes the facts do not order stay."""
    f = Facts(lower={"n": 1})
    a = "floordiv(n + 1, 3)"
    jax_size = P(f"max(-min({a}, max(-{a}*min(0, {a} - min(1, {a})) + min(0, {a} - min(1, {a})), 0))"
                 f" + min({a}, min(0, {a} - min(1, {a})) + min(1, {a})), 0)")
    assert f.prove_eq(jax_size, P(f"min(1, {a})"))
    assert not f.prove_eq(jax_size, P(f"min(2, {a})"))
    assert not f.prove_eq(jax_size, P(a))
    assert not f.prove_eq(P("min(n, m)"), P("n"))
    assert not f.prove_eq(P("min(n, 2)"), P("min(n, 3)"))
    assert f.prove_eq(P("min(n + 1, n)"), P("n"))


def test_eq_resolves_a_max_over_a_difference_of_min_max():
    """max(0, b - min(1, b)) == b - min(1, b) for b = max(0, n - 2) (seed 2351906: the size of
    `v[1:-1][1:]`): the outer max needs the inner min relaxed, whichever node comes first."""
    f = Facts(lower={"n": 1})
    x = P("max(0, n - 2) - min(1, max(0, n - 2))")
    assert f.prove_eq(max_(const(0), x), x)
    assert not f.prove_eq(max_(const(1), x), x)


def test_integrality_closes_a_sum_of_floordivs():
    """floordiv(h + 1, 2) + floordiv(h, 2) == h: after both floordivs are bounded the sum is only
    known to be > -1, which for an integer means >= 0 (the padding jax computes for the
    gradient of a strided SAME pooling over a symbolic image size)."""
    f = Facts(lower={"h": 1})
    h = sym("h")
    d = floordiv(h + 1, 2) + floordiv(h, 2) - h + mod(h, 2)
    assert f.prove_ge(d, 0) and f.prove_eq(d, mod(h, 2))
    assert not f.prove_ge(2 * floordiv(h + 1, 3) + floordiv(h, 3) - h, 0)  # h = 1: -1
    assert f.prove_ge(2 * floordiv(h, 2) + 2 * mod(h, 2), 1)  # mod linked to its floordiv first
    assert f.prove_ge(2 * floordiv(h, 2) + 2 * mod(h, 2), 2) and not f.prove_ge(2 * floordiv(h, 2) + 2 * mod(h, 2), 3)


def test_eq_resolves_min_max_under_floordiv():
    """min / max nodes inside a floordiv's operand are resolved too (the pooled size of a
    max_pool gradient, SAME padding, stride 2: both forms are ceil(h / 2))."""
    f = Facts(lower={"h": 1})
    t2 = P("2*floordiv(h, 2) + 2*mod(h, 2)")
    m = min_(const(1), t2)
    h = sym("h")
    jax_form = floordiv(min_(t2 + 1, max_(-t2 * m + 4 * floordiv(h, 2) + 4 * mod(h, 2) - m, const(0))) + 1, 2)
    assert f.prove_eq(jax_form, floordiv(max_(const(0), t2 - 1) + 1, 2))
    assert not f.prove_eq(jax_form, floordiv(h, 2))


def test_proof_by_residue_classes():
    """Relations that hold in every residue class of a symbol modulo the constants it is divided
    by, and that no bound on the nodes shows."""
    h = sym("h")
    f = Facts(lower={"h": 4})
    m = max_(const(0), 3 * floordiv(h, 3) - h + 3 * min_(const(1), mod(h, 3)) - 1)
    pad = -3 * floordiv(h + m + 1, 3) + floordiv(m, 2) + h + 2  # avg_pool (2, 2) stride 3 SAME, grad
    assert f.prove_ge(pad, 0) and not f.prove_le(pad, 0) and f.prove_eq(pad, mod(h + 2, 3))
    assert not f.prove_ge(pad, 1)
    assert Facts().prove_eq(floordiv(h + 2, 3) + floordiv(h + 1, 3) + floordiv(h, 3), h)
    assert Facts().prove_ge(mod(h, 4) - mod(h, 2), 0) and not Facts().prove_ge(mod(h, 2) - mod(h, 4), 0)
    assert not Facts(upper={"h": 2}).prove_ge(mod(h, 4) - 3, 0)  # residues beyond the bound skipped
    assert Facts(lower={"h": 3}, upper={"h": 3}).prove_eq(mod(h, 4), 3)


def test_eq_by_small_values_then_raised_bound():
    """jax's sizes of x[:, 1:-3] and x[:, 2:-2] over a length k are both max(0, k - 4), written
    with min(1, max(0, k - 1)) and min(1, max(0, k - 2)) (BigBird's block-sparse attention
    concatenates them): equal from k >= 0, proved by evaluation at k = 0 .. 3 and under k >= 4,
    which decides every min / max node. A relation false at a small value or beyond is refused."""
    a = P("max(-min(2, k) + min(k, max(-k*min(1, max(0, k - 1)) + 2*k - 2, 0)), 0)")
    b = P("max(0, min(k, max(-k*min(1, max(0, k - 2)) + 2*k - 3, 0)) - 1)")
    for lo in (0, 1, 3, 8):
        assert Facts(lower={"k": lo}).prove_eq(a, b)
        assert not Facts(lower={"k": lo}).prove_eq(a, b + 1)
    k = sym("k")
    assert not Facts().prove_eq(max_(const(0), k - 4), k - 4)  # k = 0: 0 vs -4
    assert Facts(lower={"k": 4}).prove_eq(max_(const(0), k - 4), k - 4)
    assert not Facts().prove_eq(min_(k, const(6)), k)  # equal at 0 .. 5, not at 7
    assert Facts(upper={"k": 2}).prove_eq(min_(k, const(6)), k)  # every allowed value evaluated


def test_eq_over_a_bounded_range_by_every_value():
    """A relation over one symbol bounded above is proved by evaluation at every value of its range
    (fewer than prover.EXHAUSTIVE): min(64, s + 2) == s + 2 exactly while s <= 62, written as jax's
    clamped slice size; refused once the range reaches 63, and with equalities among the facts
    (an argument dim a = s + 2) as without."""
    a = P("-max(-64*max(0, min(-s + 62, 0) + 1) + min(-s + 62, 0) + 64, 0) + min(-s + 62, 0) + s + 2")
    s = sym("s")
    assert Facts(lower={"s": 1}, upper={"s": 62}).prove_eq(a, s + 2)
    assert not Facts(lower={"s": 1}, upper={"s": 63}).prove_eq(a, s + 2)
    assert not Facts(lower={"s": 1}).prove_eq(a, s + 2)
    assert Facts(lower={"s": 1}, upper={"s": 62}, equalities=[(sym("a"), s + 2)]).prove_eq(a, s + 2)


def test_floordiv_by_a_positive_symbol_keeps_the_sign_and_at_most_the_magnitude():
    """For y >= 1, floordiv(x, y) lies in [min(x, 0), max(x, 0)]: a stride-m slice of n elements
    has n + floordiv(-1, m) + 1 >= 0 of them (x.reshape(-1)[::m] was refused: "broadcast
    dimensions differ: floordiv(-1, m) + n + 1 vs max(0, floordiv(-1, m) + n + 1)")."""
    n, m, x = sym("n"), sym("m"), sym("x")
    f = Facts(lower={"n": 1, "m": 1})
    assert f.prove_ge(n + floordiv(const(-1), m) + 1, 0)
    assert f.prove_eq(max_(const(0), n + floordiv(const(-1), m) + 1), n + floordiv(const(-1), m) + 1)
    assert f.prove_le(floordiv(n - 3, m), max_(n - 3, const(0)))
    assert f.prove_ge(floordiv(x, m), min_(x, const(0)))
    assert not f.prove_ge(n + floordiv(const(-1), m), 1)  # n = 1: 0
    assert not Facts(lower={"n": 1}).prove_ge(n + floordiv(const(-1), m) + 1, 0)  # m may be 0 or negative


def test_small_values_proof_with_equalities_among_the_facts():
    """The proof by evaluation over one symbol holds with equalities among the facts (they only
    narrow the values it takes): a jax constraint n >= m (n == m + t) or an argument dim 2*n kept
    it from the gradient of a VALID max pool, floordiv(max(0, 2*floordiv(m, 2) - 1) + 1, 2) ==
    floordiv(m, 2) for m >= 1 (helper probe). A false relation stays unproved."""
    m, n, t = sym("m"), sym("n"), sym("t")
    a = P("floordiv(max(-m*min(1, 2*floordiv(m, 2)) + 2*floordiv(m, 2) + m - 1, 0) + 1, 2)")
    b = P("floordiv(max(0, 2*floordiv(m, 2) - 1) + 1, 2)")
    for eqs in ([], [(sym("a"), 2 * n)], [(n, m + t)], [(m, 2 * t)]):
        f = Facts(lower={"m": 1, "n": 1, "t": 0}, equalities=eqs)
        assert f.prove_eq(a, floordiv(m, 2)) and f.prove_eq(b, floordiv(m, 2)), eqs
        assert not f.prove_eq(a, floordiv(m, 2) + 1) and not f.prove_eq(b, m), eqs
