"""Zero-size tensors on the CPU backend (numpy semantics): a static 0 dim used to abort the
process (an LLVM assertion in linalg tiling), reached by plain JAX `x[:, :-1]` on an (n, 1)
array. Each case runs in a child process, so an abort fails the test instead of killing it."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CASES = {
    # jax programs: (fn, specs); compared with jax.jit at n = 1, 7, 64
    "slice_to_empty": "lambda x: jnp.exp(x[:, :-1]), [spec(('n', 1))]",
    "sum_over_empty_axis": "lambda x: jnp.sum(x, axis=1), [spec(('n', 0))]",
    "max_over_empty_axis": "lambda x: jnp.max(x, axis=1, initial=-jnp.inf), [spec(('n', 0))]",
    "matmul_k0": "lambda x, w: x @ w, [spec(('n', 0)), spec((0, 5))]",
    "empty_rows_static": "lambda x: jnp.tanh(x) * 2, [spec((0, 3))]",
}

_SCRIPT = """
import numpy as np, jax, jax.numpy as jnp
import relax_mlir
from relax_mlir.frontend.jax import from_jax
def spec(shape):
    return jax.ShapeDtypeStruct(tuple(jax.export.symbolic_shape(d)[0] if isinstance(d, str) else d
                                      for d in shape), jnp.float32)
fn, specs = {case}
exe = relax_mlir.compile(from_jax(fn, *specs))
for n in (1, 7, 64):
    args = [np.random.default_rng(n).standard_normal(tuple(n if not isinstance(d, int) else d
                                                           for d in s.shape)).astype(np.float32) for s in specs]
    got, want = exe(*args), np.asarray(jax.jit(fn)(*args))
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
print("ok")
"""


@pytest.mark.parametrize("case", sorted(CASES))
def test_zero_size_cpu(case):
    script = textwrap.dedent(_SCRIPT).format(case=CASES[case])
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, (r.returncode, r.stdout, r.stderr[-3000:])


def test_symbol_bound_to_zero_cpu():
    """A symbolic dim bound to 0 at run time (no relax.symbol_lower): elementwise, a reduction
    over it (sum -> 0, max -> -inf) and a matmul with K = n = 0."""
    script = textwrap.dedent('''
        import numpy as np, relax_mlir
        A = '!relax.tensor<[3, "n"], f32>'
        B = '!relax.tensor<["n", 4], f32>'
        R = '!relax.tensor<[3], f32>'
        M = '!relax.tensor<[3, 4], f32>'
        src = f"""
        func.func @main(%a: {A}, %b: {B}) -> ({A}, {R}, {R}, {M}) {{
          %e = "relax.exp"(%a) : ({A}) -> {A}
          %s = "relax.sum"(%a) {{axes = [1], keepdims = false}} : ({A}) -> {R}
          %m = "relax.max"(%a) {{axes = [1], keepdims = false}} : ({A}) -> {R}
          %p = "relax.matmul"(%a, %b) : ({A}, {B}) -> {M}
          return %e, %s, %m, %p : {A}, {R}, {R}, {M}
        }}"""
        exe = relax_mlir.compile(src)
        for n in (0, 1, 13):
            a = np.random.default_rng(n).standard_normal((3, n)).astype(np.float32)
            b = np.random.default_rng(n + 1).standard_normal((n, 4)).astype(np.float32)
            e, s, m, p = exe(a, b)
            np.testing.assert_allclose(e, np.exp(a), rtol=1e-5)
            np.testing.assert_allclose(s, a.sum(1), rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(m, a.max(1, initial=-np.inf))
            np.testing.assert_allclose(p, a @ b, rtol=1e-5, atol=1e-5)
        print("ok")
    ''')
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, (r.returncode, r.stdout, r.stderr[-3000:])
