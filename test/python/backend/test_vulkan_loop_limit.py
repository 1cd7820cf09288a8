"""Mesa's llvmpipe (lavapipe) stops every loop of a shader invocation after 65535 iterations in
all, silently: a one-thread scatter applied only its first 65535 updates, an argmax whose answer
lay past index 65534 returned 0, and a row sum over 3M elements (32 invocations a row) returned
2,097,120 (probe s22/vk V3, V4). Serial kernels now run in chunks of at most 60000 iterations, one
launch each (backend/loop_budget.py), and a launch whose invocations may run more than the driver
allows is a ValueError naming the kernel and the limit, before the launch; the executable keeps
working at smaller shapes. The loop-cost formulas are checked without a device too."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relax_mlir
import toolchecks
from relax_mlir.runtime import loop_budget as rt_budget


def _vulkan():
    if not toolchecks.vulkan_adapter():
        pytest.skip("no Vulkan adapter (wgpu with lavapipe or a GPU driver)")


def _export(fn, *specs):
    return jax.export.export(jax.jit(fn))(*specs)


def test_scatter_and_argmax_past_65535_serial_iterations():
    _vulkan()
    n = jax.export.symbolic_shape("n")[0]
    f32, i32 = jnp.float32, jnp.int32
    scatter = relax_mlir.compile(_export(lambda i, u: jnp.zeros(8, f32).at[i].add(u),
                                         jax.ShapeDtypeStruct((n,), i32), jax.ShapeDtypeStruct((n,), f32)),
                                 target="vulkan")
    arg = relax_mlir.compile(_export(lambda x: (jnp.argmax(x), jnp.argmin(x)), jax.ShapeDtypeStruct((n,), f32)),
                             target="vulkan")
    rng = np.random.default_rng(0)
    for size in (1, 7, 200003, 60001, 120000, 65537):  # (jax.export symbols are >= 1)
        idx = rng.integers(-9, 9, size).astype(np.int32)  # out of range: dropped (jax's mode)
        upd = rng.integers(-3, 4, size).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(scatter(idx, upd)), np.asarray(jax.jit(
            lambda i, u: jnp.zeros(8, f32).at[i].add(u))(idx, upd)), err_msg=f"scatter of {size} updates")
        x = rng.standard_normal(size).astype(np.float32)
        x[size - 2 if size > 1 else 0] = 50.0
        x[size // 3] = -50.0 if size > 1 else 50.0
        got = [int(v) for v in arg(x)]
        assert got == [int(np.argmax(x)), int(np.argmin(x))], (size, got)


def test_a_launch_over_the_loop_limit_is_a_value_error():
    _vulkan()
    from relax_mlir.runtime.vulkan import _get_device, loop_limit

    limit, _ = loop_limit(_get_device())
    if limit is None:
        pytest.skip("this Vulkan driver has no loop limit (not Mesa's llvmpipe)")
    k = jax.export.symbolic_shape("k")[0]
    exe = relax_mlir.compile(_export(lambda x: x.sum(axis=1), jax.ShapeDtypeStruct((2, k), jnp.float32)),
                             target="vulkan")
    ok = np.ones((2, 32 * 60000), np.float32)
    np.testing.assert_allclose(np.asarray(exe(ok)), [32 * 60000] * 2)
    with pytest.raises(ValueError, match=r"may run \d+ loop iterations in one invocation.*llvmpipe.*65535"):
        exe(np.ones((2, 32 * 70000), np.float32))
    np.testing.assert_allclose(np.asarray(exe(np.ones((2, 5), np.float32))), [5, 5])


def test_loop_cost_formulas():
    """The runtime's interval evaluation of the formulas backend/loop_budget.py writes."""
    row = ["sum", ["loop", ["tid", 0], ["p", 1], ["c", 32], 0, ["sum"]]]
    assert rt_budget.iterations(row, [5, 3200], (4, 1, 1), (32, 1, 1)) == 100  # tid 0 runs the most
    assert rt_budget.iterations(row, [5, 3201], (4, 1, 1), (32, 1, 1)) == 101
    nested = ["sum", ["loop", ["c", 0], ["p", 0], ["c", 1], 0,
                      ["sum", ["loop", ["c", 0], ["iv", 0], ["c", 1], 1, ["sum"]]]]]
    assert rt_budget.iterations(nested, [10], (1, 1, 1), (1, 1, 1)) == 10 * (1 + 9)  # triangle, bounded above
    branches = ["sum", ["max", ["sum", ["loop", ["c", 0], ["c", 7], ["c", 1], 0, ["sum"]]], ["sum"]]]
    assert rt_budget.iterations(branches, [], (1, 1, 1), (1, 1, 1)) == 7
    chunk = ["sum", ["loop", ["p", 0], ["min", ["add", ["p", 0], ["c", 60000]], ["p", 1]], ["c", 1], 0, ["sum"]]]
    assert rt_budget.iterations(chunk, [120000, 130000], (1, 1, 1), (1, 1, 1)) == 10000
    assert rt_budget.iterations(["sum", ["loop", ["c", 0], ["?"], ["c", 1], 0, ["sum"]]], [], (1, 1, 1),
                                (1, 1, 1)) == float("inf")  # a bound loaded from memory: unbounded
    grid_stride = ["sum", ["loop", ["mul", ["bid", 0], ["c", 8]], ["p", 0], ["mul", ["gdim", 0], ["c", 8]], 0,
                           ["sum"]]]
    assert rt_budget.iterations(grid_stride, [800], (100, 1, 1), (32, 8, 1)) == 1
    assert rt_budget.iterations(["sum", ["loop", ["c", 0], ["p", 0], ["c", 0], 0, ["sum"]]], [4], (1, 1, 1),
                                (1, 1, 1)) == float("inf")  # a step that is not positive: no bound


def test_cumulative_scans_run_as_one_kernel_per_row():
    """A cumulative scan was a host loop of two launches per position (jnp.cumsum over 65535
    elements: 131070 launches, and the process killed for memory, probe s22/vk V7); it runs as one
    kernel whose invocations each scan a row, in chunks under llvmpipe's loop limit."""
    _vulkan()
    n = jax.export.symbolic_shape("n")[0]
    f32 = jnp.float32

    def f(x, y):
        return jnp.cumsum(x), jax.lax.cummax(y, axis=0), jax.lax.cumsum(y, axis=0, reverse=True)

    exe = relax_mlir.compile(_export(f, jax.ShapeDtypeStruct((n,), f32), jax.ShapeDtypeStruct((n, 3), f32)),
                             target="vulkan")
    rng = np.random.default_rng(2)
    for size in (1, 7, 130001, 5):
        x = rng.integers(-4, 5, size).astype(np.float32)  # integers: every order of summing is exact
        y = rng.integers(-4, 5, (size, 3)).astype(np.float32)
        a, b, c = (np.asarray(v) for v in exe(x, y))
        np.testing.assert_array_equal(a, np.cumsum(x), err_msg=f"cumsum at n = {size}")
        np.testing.assert_array_equal(b, np.maximum.accumulate(y, axis=0), err_msg=f"cummax at n = {size}")
        np.testing.assert_array_equal(c, np.flip(np.cumsum(np.flip(y, 0), 0), 0), err_msg=f"reverse at n = {size}")


def test_loop_cost_takes_numpy_integers():
    """A scalar the host program loaded from a shape buffer is a numpy integer: a bound like any int."""
    row = ["sum", ["loop", ["c", 0], ["p", 0], ["c", 1], 0, ["sum"]]]
    assert rt_budget.iterations(row, [np.int64(70000)], (1, 1, 1), (1, 1, 1)) == 70000
    assert rt_budget.iterations(row, [np.int32(5)], (1, 1, 1), (1, 1, 1)) == 5
    assert rt_budget.iterations(row, [2.5], (1, 1, 1), (1, 1, 1)) == float("inf")
