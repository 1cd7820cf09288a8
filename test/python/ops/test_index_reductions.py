"""Reductions whose body reads the reduced loop's index (a compare with an iota fused into a sum:
jnp.linalg.slogdet's pivot parity, count_nonzero(p != arange(n))). The CPU backend's split
reduction (upstream's partial-reduction tiling) cloned such a body without offsetting the index
by the tile's position: every 16-lane tile saw indices 0..15, so sum(p == arange(n)) was 16 for
any n > 16 and det / slogdet of a symbolic n x n matrix had a wrong sign from n = 17 on. Each
function compiled ONCE and compared with jax.jit at n = 1, 16, 17, 33, 100."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402

SIZES = (1, 16, 17, 33, 100)
FNS = {
    "sum_eq_iota": (lambda p: jnp.sum(p == jnp.arange(p.shape[0], dtype=p.dtype), dtype=jnp.int32), "i"),
    "count_ne_iota": (lambda p: jnp.count_nonzero(p != jnp.arange(p.shape[0], dtype=p.dtype)), "i"),
    "weighted_by_position": (lambda x: jnp.sum(x * jnp.arange(x.shape[-1], dtype=x.dtype), axis=-1), "f"),
    "first_index_above": (lambda x: jnp.min(jnp.where(x > 0.5, jnp.arange(x.shape[-1]), x.shape[-1]), axis=-1), "f"),
}


@pytest.mark.parametrize("name", sorted(FNS))
def test_reduction_reading_its_index(name):
    fn, kind = FNS[name]
    (n,) = jax.export.symbolic_shape("n")
    shape = (n,) if kind == "i" else (3, n)
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct(shape, jnp.int32 if kind == "i" else jnp.float32)))
    rng = np.random.default_rng(0)
    for s in SIZES:
        if kind == "i":  # half the positions hold their own index
            x = np.where(rng.random(s) < 0.5, np.arange(s), rng.integers(0, s, s)).astype(np.int32)
        else:
            x = rng.random((3, s)).astype(np.float32)
        got, want = np.asarray(exe(x)), np.asarray(jax.jit(fn)(x))
        if kind == "i":
            np.testing.assert_array_equal(got, want, err_msg=f"n={s}")
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4, err_msg=f"n={s}")


def test_det_and_slogdet_signs_of_a_symbolic_matrix():
    (n,) = jax.export.symbolic_shape("n")
    fn = lambda a: (jnp.linalg.det(a), *jnp.linalg.slogdet(a))  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((n, n), jnp.float32)))
    rng = np.random.default_rng(1)
    for s in SIZES[:-1]:
        for _ in range(4):
            a = rng.standard_normal((s, s)).astype(np.float32)
            det, sign, logabs = exe(a)
            want = np.linalg.slogdet(a.astype(np.float64))
            assert sign == want[0] and np.sign(det) == want[0], f"n={s}"
            np.testing.assert_allclose(logabs, want[1], rtol=1e-4, atol=1e-3)
