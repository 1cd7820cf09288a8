"""`Function.partial`: parameters (weights) bound once by index or `relax.name`, checked then, their
symbols fixed; the returned callable takes the remaining parameters in order, and a call costs the
same work however many arrays are bound (counted with a profiler, not timed)."""
from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relax_mlir
from relax_mlir.frontend.jax import from_jax

T = lambda *d: "!relax.tensor<[" + ", ".join(f'"{x}"' if isinstance(x, str) else str(x) for x in d) + "], f32>"  # noqa: E731

# y = relu(x @ w + b) @ v: x [n, k], w [k, h], b [h], v [h, 3]
SRC = f"""
func.func @main(%x: {T("n", "k")}, %w: {T("k", "h")}, %b: {T("h")}, %v: {T("h", 3)})
    -> {T("n", 3)} attributes {{arg_attrs = [{{relax.name = "x"}}, {{relax.name = "w"}}, {{relax.name = "b"}}, {{relax.name = "v"}}]}} {{
  %m = "relax.matmul"(%x, %w) : ({T("n", "k")}, {T("k", "h")}) -> {T("n", "h")}
  %a = "relax.add"(%m, %b) : ({T("n", "h")}, {T("h")}) -> {T("n", "h")}
  %r = "relax.relu"(%a) : ({T("n", "h")}) -> {T("n", "h")}
  %y = "relax.matmul"(%r, %v) : ({T("n", "h")}, {T("h", 3)}) -> {T("n", 3)}
  return %y : {T("n", 3)}
}}
"""


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def ref(x, w, b, v):
    return np.maximum(x @ w + b, 0) @ v


@pytest.fixture(scope="module")
def exe():
    return relax_mlir.compile(SRC)


def test_bound_by_name_and_index(exe):
    rng = np.random.default_rng(0)
    w, b, v = f32(rng, 5, 7), f32(rng, 7), f32(rng, 7, 3)
    f = exe["main"]
    by_name = f.partial({"w": w, "b": b, "v": v})
    by_index = f.partial({1: w, 2: b, 3: v})
    mixed = f.partial({"v": v, 1: w})
    assert by_name.params == (0,) and mixed.params == (0, 2)
    for n in (1, 13, 200):
        x = f32(rng, n, 5)
        want = ref(x, w, b, v)
        np.testing.assert_allclose(by_name(x), want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(by_index(x), want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(mixed(x, b), want, rtol=1e-4, atol=1e-4)
    assert by_name(f32(rng, 0, 5)).shape == (0, 3)
    # unchanged: exe(...) and exe["main"](...)
    x = f32(rng, 4, 5)
    np.testing.assert_allclose(exe(x, w, b, v), ref(x, w, b, v), rtol=1e-4, atol=1e-4)


def test_bound_arrays_are_kept_and_made_contiguous(exe):
    rng = np.random.default_rng(1)
    wide = f32(rng, 5, 14)
    w, b, v = wide[:, ::2], f32(rng, 7), f32(rng, 7, 3)  # w is a strided view
    g = exe["main"].partial({"w": w, "b": b, "v": v})
    want_w = w.copy()
    x = f32(rng, 3, 5)
    np.testing.assert_allclose(g(x), ref(x, want_w, b, v), rtol=1e-4, atol=1e-4)
    # exact dtypes, as for calls: a list (float64) is refused, not silently cast
    with pytest.raises(ValueError, match=r"argument 'b' must have dtype float32 \(f32\); a list converts to float64"):
        exe["main"].partial({"b": b.tolist(), "w": want_w, "v": v})


def test_errors_name_what_is_wrong(exe):
    rng = np.random.default_rng(2)
    w, b, v = f32(rng, 5, 7), f32(rng, 7), f32(rng, 7, 3)
    f = exe["main"]
    with pytest.raises(ValueError, match=r"@main has no parameter named 'q'; names: 'x', 'w', 'b', 'v'"):
        f.partial({"q": w})
    with pytest.raises(ValueError, match=r"@main has 4 parameters; there is no parameter #4"):
        f.partial({4: w})
    with pytest.raises(ValueError, match=r"argument 'w' is bound twice"):
        f.partial({"w": w, 1: w})
    with pytest.raises(ValueError, match=r"argument 'w' has dtype float64, expected float32"):
        f.partial({"w": w.astype(np.float64)})
    with pytest.raises(ValueError, match=r"argument 'v' has shape \(7, 4\), but dim 1 must be 3"):
        f.partial({"v": f32(rng, 7, 4)})
    with pytest.raises(ValueError, match=r"argument 'b' has shape \(8,\), but dim 0 must be h \(h = 7 from "
                                         r"argument 'w' dim 1, bound by partial\)"):
        f.partial({"w": w, "b": f32(rng, 8)})
    g = f.partial({"w": w, "b": b, "v": v})
    with pytest.raises(ValueError, match=r"@main \(partial\) takes 1 arguments \(argument 'x'\), got 2"):
        g(f32(rng, 2, 5), b)
    # a later call that disagrees with a fixed symbol names both arguments
    with pytest.raises(ValueError, match=r"argument 'x' has shape \(2, 6\), but dim 1 must be k \(k = 5 from "
                                         r"argument 'w' dim 0, bound by partial\)"):
        g(f32(rng, 2, 6))
    with pytest.raises(ValueError, match=r"argument 'x' has rank 1"):
        g(f32(rng, 5))
    # only v bound: it fixes h, which the call's w and b must match
    gv = f.partial({"v": v})
    with pytest.raises(ValueError, match=r"argument 'w' has shape \(5, 6\), but dim 1 must be h \(h = 7 from "
                                         r"argument 'v' dim 0, bound by partial\)"):
        gv(f32(rng, 2, 5), f32(rng, 5, 6), f32(rng, 6))
    x = f32(rng, 2, 5)
    np.testing.assert_allclose(gv(x, w, b), ref(x, w, b, v), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r"takes a dict"):
        f.partial([w])


def test_symbol_bounds_checked_at_partial_time():
    src = f"""func.func @main(%x: {T("n", "k")}, %w: {T("k", 2)}) -> {T("n", 2)} attributes {{relax.symbol_bounds = {{k = 8}}}} {{
  %m = "relax.matmul"(%x, %w) : ({T("n", "k")}, {T("k", 2)}) -> {T("n", 2)}
  return %m : {T("n", 2)}
}}"""
    exe = relax_mlir.compile(src)
    with pytest.raises(ValueError, match=r"symbol k = 9 \(from argument #1 dim 0, bound by partial\) exceeds its upper "
                                         r"bound 8"):
        exe["main"].partial({1: np.ones((9, 2), np.float32)})


def test_bound_expression_dim_checked_per_call():
    """A bound array whose dim is an expression of symbols that only the call binds (y: [2 * n])
    is checked at each call, against the call's n."""
    src = f"""func.func @main(%x: {T("n")}, %y: {T("2 * n")}) -> {T("n")} {{
  %r = "relax.reshape"(%y) {{shape = ["n", 2]}} : ({T("2 * n")}) -> {T("n", 2)}
  %s = "relax.sum"(%r) {{axes = [1]}} : ({T("n", 2)}) -> {T("n")}
  %a = "relax.add"(%x, %s) : ({T("n")}, {T("n")}) -> {T("n")}
  return %a : {T("n")}
}}"""
    exe = relax_mlir.compile(src)
    y = np.arange(6, dtype=np.float32)
    g = exe["main"].partial({1: y})
    x = np.ones(3, np.float32)
    np.testing.assert_allclose(g(x), x + y.reshape(3, 2).sum(1))
    with pytest.raises(ValueError, match=r"argument #1 has shape \(6,\), but dim 0 must be 2\*n \(n = 4 from "
                                         r"argument #0 dim 0\)"):
        g(np.ones(4, np.float32))


def _profile_events(fn) -> int:
    """Python and C function calls made while `fn()` runs (the work of one call, not its time)."""
    count = [0]

    def prof(frame, event, arg):
        count[0] += 1

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count[0]


def _layers_src(n_layers: int) -> str:
    """x [n, 8] through n_layers of relu(x @ w_i + b_i): 2 * n_layers weights, one activation."""
    params = [f"%x: {T('n', 8)}"] + [f"%w{i}: {T(8, 8)}, %b{i}: {T(8)}" for i in range(n_layers)]
    body, cur = [], "%x"
    for i in range(n_layers):
        body += [f'  %m{i} = "relax.matmul"({cur}, %w{i}) : ({T("n", 8)}, {T(8, 8)}) -> {T("n", 8)}',
                 f'  %a{i} = "relax.add"(%m{i}, %b{i}) : ({T("n", 8)}, {T(8)}) -> {T("n", 8)}',
                 f'  %r{i} = "relax.relu"(%a{i}) : ({T("n", 8)}) -> {T("n", 8)}']
        cur = f"%r{i}"
    return (f"func.func @main({', '.join(params)}) -> {T('n', 8)} {{\n" + "\n".join(body)
            + f"\n  return {cur} : {T('n', 8)}\n}}\n")


def test_call_work_does_not_grow_with_bound_weights():
    """200 bound weights cost a call no more work than 2 do: bound arrays are not re-validated,
    re-converted or re-described per call."""
    rng = np.random.default_rng(3)
    calls = {}
    for layers in (1, 100):
        exe = relax_mlir.compile(_layers_src(layers))
        weights = {}
        for i in range(layers):
            weights[1 + 2 * i] = f32(rng, 8, 8) * 0.3
            weights[2 + 2 * i] = f32(rng, 8)
        g = exe["main"].partial(weights)
        x = f32(rng, 3, 8)
        want = x
        for i in range(layers):
            want = np.maximum(want @ weights[1 + 2 * i] + weights[2 + 2 * i], 0)
        np.testing.assert_allclose(g(x), want, rtol=1e-3, atol=1e-4)
        g(x)  # warm: per-thread buffers exist
        calls[layers] = _profile_events(lambda: g(x))
        full = _profile_events(lambda: exe(x, *[weights[k] for k in sorted(weights)]))
        assert full > calls[layers] or layers == 1
    assert calls[100] <= calls[1], calls


def test_bound_donated_cache_is_updated_each_call():
    """A donated KV cache bound once: each call writes it in place and returns the bound array."""
    def step(cache, w, kv, pos):
        return jax.lax.dynamic_update_slice(cache, kv @ w, (pos, 0)), (cache @ w.T).sum()

    m = jax.export.symbolic_shape("m")[0]
    mod = from_jax(jax.jit(step, donate_argnums=(0,)), jax.ShapeDtypeStruct((m, 4), jnp.float32),
                   jax.ShapeDtypeStruct((4, 4), jnp.float32), jax.ShapeDtypeStruct((1, 4), jnp.float32),
                   jax.ShapeDtypeStruct((), jnp.int32))
    exe = relax_mlir.compile(mod)
    rng = np.random.default_rng(4)
    cache, w = np.zeros((6, 4), np.float32), f32(rng, 4, 4)
    g = exe["main"].partial({0: cache, 1: w})
    mirror = cache.copy()
    for pos in range(8):  # past the end: clamped into the last row
        kv = f32(rng, 1, 4)
        want = [np.asarray(a) for a in jax.jit(step)(mirror, w, kv, np.int32(pos))]
        new, s = g(kv, np.int32(pos))
        assert new is cache
        np.testing.assert_allclose(new, want[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(s, want[1], rtol=1e-4, atol=1e-4)
        mirror = want[0]
    with pytest.raises(ValueError, match=r"argument #0 is donated .* shares memory with argument #2"):
        g(cache[2:3], np.int32(0))
    ro = np.zeros((6, 4), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument #0 is donated .* must be writable"):
        exe["main"].partial({0: ro})
