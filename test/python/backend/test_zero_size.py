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


def test_empty_buffers_in_vulkan_kernels():
    """A kernel reading or writing a buffer with a static 0 dim (the pad of an empty convolution
    result, a pad of an empty array, a sum over an empty axis) on Vulkan: the buffer's accesses
    never run, so they go and the buffer is no kernel argument (SPIR-V has no zero-size arrays:
    "failed to legalize operation 'gpu.func'", fuzz seed 2,371,795). Equal to jax.jit."""
    import toolchecks

    if not toolchecks.vulkan_adapter():
        pytest.skip("wgpu or a Vulkan adapter (lavapipe) is not available")
    script = textwrap.dedent('''
        import numpy as np, jax, jax.numpy as jnp
        from jax import lax
        import relax_mlir
        from relax_mlir.frontend.jax import from_jax
        def f(a, w):
            c = lax.conv_general_dilated(jnp.broadcast_to(a, (3,) + a.shape), w, (1,), ((0, 0),),
                                         dimension_numbers=("NCW", "WIO", "NCW"))  # width 1 - 3 + 1: empty
            return (jnp.pad(c, ((1, 0), (0, 0), (2, 1))),
                    jnp.pad(a[:0].astype(jnp.int32), ((1, 1), (0, 0)), constant_values=7),
                    jnp.sum(a[:, :0], axis=1))
        specs = [jax.ShapeDtypeStruct((6, 1), jnp.float32), jax.ShapeDtypeStruct((3, 6, 2), jnp.float32)]
        exe = relax_mlir.compile(from_jax(f, *specs), target="vulkan")
        args = [np.random.default_rng(i).standard_normal(s.shape).astype(np.float32) for i, s in enumerate(specs)]
        for got, want in zip(exe(*args), jax.jit(f)(*args)):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
        print("ok")
    ''')
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, (r.returncode, r.stdout, r.stderr[-3000:])
