"""Minimized programs the differential fuzzer (test/python/fuzz) found, each compared with jax.jit
at several sizes from one compile, on the CPU and (in a child process) on Vulkan."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from toolchecks import vulkan_adapter  # noqa: E402

CASES = textwrap.dedent("""
    import numpy as np, jax, jax.numpy as jnp
    from relax_mlir.frontend.jax import from_jax
    n = jax.export.symbolic_shape("n")[0]
    S = jax.ShapeDtypeStruct
    CASES = {
        # dot_general on bools is an or of ands (linalg.matmul would add with xor)
        "bool_einsum": (lambda a: jnp.einsum("bij,bij->bi", a, a), [S((n, n, 3), jnp.bool_)]),
        "bool_matmul": (lambda a, b: a @ b, [S((n, 5), jnp.bool_), S((5, 4), jnp.bool_)]),
        "bool_outer": (lambda v: jnp.einsum("i,j->ij", v, v), [S((n,), jnp.bool_)]),
        # concat with a static 0 dim: an empty result, empty pieces first and last
        "stack_of_empty": (lambda a, b, m: jnp.stack([jnp.where(m, a.astype(jnp.float32), b).reshape(-1)] * 4),
                           [S((0, 4), jnp.int8), S((0, 4), jnp.float32), S((0, 1), jnp.bool_)]),
        "concat_empty_last": (lambda a, b: jnp.concatenate([a, b], axis=1), [S((n, 3), jnp.float32), S((n, 0), jnp.float32)]),
        "concat_empty_around": (lambda a, b: jnp.concatenate([b, a, b], axis=1),
                                [S((n, 3), jnp.float32), S((n, 0), jnp.float32)]),
    }

    def check(target):
        import relax_mlir
        for name, (f, specs) in CASES.items():
            exe = relax_mlir.compile(from_jax(f, *specs), target=target)
            for k in (1, 3, 17):
                rng = np.random.default_rng(k)
                args = [(rng.random(tuple(k if not isinstance(d, int) else d for d in s.shape)) * 10).astype(s.dtype)
                        if s.dtype != jnp.bool_ else rng.random(tuple(k if not isinstance(d, int) else d for d in s.shape)) < 0.3
                        for s in specs]
                got, want = exe(*args), np.asarray(jax.jit(f)(*args))
                assert got.shape == want.shape, (name, k, got.shape, want.shape)
                np.testing.assert_array_equal(got, want, err_msg=f"{name} at n = {k}")
""")


def test_cpu():
    scope: dict = {}
    exec(CASES, scope)
    scope["check"]("cpu")


def test_vulkan():
    if not vulkan_adapter():
        pytest.skip("no Vulkan adapter (Debian mesa-vulkan-drivers provides lavapipe)")
    r = subprocess.run([sys.executable, "-c", CASES + "\ncheck('vulkan')\nprint('ok')"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]
