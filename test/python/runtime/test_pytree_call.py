"""A compiled `jax.export.Exported` takes the exported function's arguments as jax does (pytrees:
a params dict, a tuple of arrays, keyword arguments) and returns its result structure; the flat
call (`exe(*leaves)`, a tuple of results) stays. Before, `exe(params, x)` was a ValueError
("@main takes 3 arguments, got 2") and a dict result came back as a flat tuple in key order."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relax_mlir


def _layer(params, x, *, scale):
    h = jnp.tanh(x @ params["dense"]["w"] + params["dense"]["b"])
    return {"out": h * scale, "stats": (jnp.sum(h), jnp.max(h, axis=-1))}


def _compile(target="cpu"):
    rng = np.random.default_rng(0)
    params = {"dense": {"w": rng.standard_normal((5, 3)).astype(np.float32),
                        "b": rng.standard_normal(3).astype(np.float32)}}
    n = jax.export.symbolic_shape("n")[0]
    spec = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params)
    exported = jax.export.export(jax.jit(_layer))(spec, jax.ShapeDtypeStruct((n, 5), jnp.float32),
                                                  scale=jax.ShapeDtypeStruct((), jnp.float32))
    return relax_mlir.compile(exported, target=target), params


def test_pytree_arguments_and_results_like_jax():
    exe, params = _compile()
    rng = np.random.default_rng(1)
    for n in (1, 7, 257, 2):
        x = rng.standard_normal((n, 5)).astype(np.float32)
        got = exe(params, x, scale=np.float32(0.5))
        want = jax.jit(_layer)(params, x, scale=np.float32(0.5))
        assert jax.tree.structure(got) == jax.tree.structure(want)
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # the flat call: leaves in jax's order, results a flat tuple
    leaves = jax.tree.leaves(((params, x), {"scale": np.float32(0.5)}))
    flat = exe(*leaves)
    assert isinstance(flat, tuple) and len(flat) == 3
    np.testing.assert_allclose(flat[0], got["out"], rtol=1e-6)


def test_a_wrong_structure_is_a_value_error():
    exe, params = _compile()
    x = np.ones((3, 5), np.float32)
    with pytest.raises(ValueError, match=r"exported for arguments structured as .*got"):
        exe({"dense": {"w": params["dense"]["w"]}}, x, scale=np.float32(1))
    with pytest.raises(ValueError, match="structured as"):
        exe(params, x)  # the keyword argument missing
