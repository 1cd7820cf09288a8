"""relax.take: StableHLO gather semantics (each index clamped into [0, n - 1]) on every target; a
table with no rows and a non-empty index tensor raises ValueError at run time (jax refuses it)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import relax_mlir


def T(dims, dt="f32") -> str:
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + f"], {dt}>"


def take_src(table, idx, axis=0, idx_dtype="i32") -> str:
    rt = T(["?"] * (len(table) - 1 + len(idx)))
    return (f"func.func @main(%x: {T(table)}, %i: {T(idx, idx_dtype)}) -> {rt} {{\n"
            f'  %0 = "relax.take"(%x, %i) {{axis = {axis}}} : ({T(table)}, {T(idx, idx_dtype)}) -> {rt}\n'
            f"  return %0 : {rt}\n}}\n")


def reference(x, idx, axis=0):
    """StableHLO gather with slice size 1 on the axis: the start index is clamped into range."""
    return np.take(x, np.clip(idx, 0, x.shape[axis] - 1), axis=axis)


rng = np.random.default_rng(1)
IDX = np.array([-7, -1, 0, 1, 2, 3, 4, 100, 2**31 - 1, -2**31], np.int32)


@pytest.mark.parametrize("table", [["n", 3], ["?", 3], [5, 3]])
def test_take_clamps_like_stablehlo_gather(table):
    exe = relax_mlir.compile(take_src(table, ["k"]))
    for n in ((1, 5, 257) if table[0] != 5 else (5,)):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_array_equal(exe(x, IDX), reference(x, IDX))
        np.testing.assert_array_equal(exe(x, IDX[:0]), np.zeros((0, 3), np.float32))


def test_take_inner_axis_and_i64_indices():
    exe = relax_mlir.compile(take_src([4, "m"], ["a", "b"], axis=1, idx_dtype="i64"))
    for m in (1, 6, 131):
        x = rng.standard_normal((4, m)).astype(np.float32)
        idx = np.array([[-3, 0, m - 1], [m, m + 5, 2**40]], np.int64)
        np.testing.assert_array_equal(exe(x, idx), reference(x, idx, axis=1))


def test_take_matches_jax_indexing():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from relax_mlir.frontend.jax import from_jax

    fn = lambda x, i: x[i]  # noqa: E731  jax wraps negatives once, then its gather clamps
    spec = (jax.ShapeDtypeStruct((6, 3), jnp.float32), jax.ShapeDtypeStruct((10,), jnp.int32))
    exe = relax_mlir.compile(from_jax(fn, *spec))
    x = rng.standard_normal((6, 3)).astype(np.float32)
    np.testing.assert_array_equal(exe(x, IDX), np.asarray(jax.jit(fn)(x, IDX)))


@pytest.mark.parametrize("table", [["n", 3], ["?", 3], [0, 3]])
def test_take_from_zero_rows_raises_before_reading(table):
    # Reading a row of an empty table is out of bounds: run it in a child, expect a clean ValueError.
    code = textwrap.dedent(f"""
        import numpy as np, relax_mlir
        exe = relax_mlir.compile({take_src(table, ["k"])!r})
        x = np.zeros((0, 3), np.float32)
        assert exe(x, np.zeros(0, np.int32)).shape == (0, 3)
        try:
            exe(x, np.array([0, -1, 5], np.int32))
            print("NO ERROR")
        except ValueError as e:
            print("VALUEERROR", e)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "VALUEERROR" in r.stdout and "no rows along axis 0" in r.stdout, r.stdout


def test_take_static_rows_need_no_check():
    m = relax_mlir.parse(take_src([5, 3], ["k"]))
    assert "relax.requires" not in str(m)
    m = relax_mlir.parse(take_src(["n", 3], ["k"]))
    assert "relax.requires" in str(m)


def test_take_on_vulkan_clamps_negative_indices_to_row_0():
    from toolchecks import vulkan_adapter

    if not vulkan_adapter():
        pytest.skip("no Vulkan adapter")
    code = textwrap.dedent(f"""
        import numpy as np, relax_mlir
        exe = relax_mlir.compile({take_src(["n", 3], ["k"])!r}, target="vulkan")
        x = np.arange(12, dtype=np.float32).reshape(4, 3)
        idx = np.array({IDX.tolist()!r}, np.int32)
        print(repr(exe(x, idx).tolist()))
        try:
            exe(np.zeros((0, 3), np.float32), np.array([0], np.int32))
            print("NO ERROR")
        except ValueError as e:
            print("VALUEERROR", e)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert lines[-2] == repr(reference(x, IDX).tolist())
    assert lines[-1].startswith("VALUEERROR")
