"""relax.strided_slice: numpy-exact results for every legal slice (negative and static ends, static
0 dims, symbolic positions that are negative at run time), valid IR through the default pipeline,
and a located CompileError for bad attributes."""
from __future__ import annotations

import numpy as np
import pytest

import relax_mlir


def T(dims, dt="f32") -> str:
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + f"], {dt}>"


def src(dims, axes, begin, end, strides, fattrs="") -> str:
    q = lambda v: f'"{v}"' if isinstance(v, str) else str(v)  # noqa: E731
    rt = T(["?"] * len(dims))
    attrs = (f"{{axes = [{', '.join(map(str, axes))}], begin = [{', '.join(map(q, begin))}], "
             f"end = [{', '.join(map(q, end))}], strides = [{', '.join(map(str, strides))}]}}")
    return (f"func.func @main(%x: {T(dims)}) -> {rt} {fattrs} {{\n"
            f'  %0 = "relax.strided_slice"(%x) {attrs} : ({T(dims)}) -> {rt}\n'
            f"  return %0 : {rt}\n}}\n")


def position(v, n):
    return v if isinstance(v, int) else eval(v, {"n": n})


# (dims, axes, begin, end, strides, values of n): each compiled once, run at every n.
CASES = [
    (["n"], [0], [0], [-1], [1], (1, 2, 13, 1000)),
    (["n"], [0], [1], [-1], [2], (1, 2, 13, 1000)),
    (["n"], [0], [-3], [5], [1], (1, 4, 9)),
    (["n"], [0], [-2], [-5], [1], (1, 6)),
    (["n"], [0], [5], [2], [1], (1, 6)),
    (["n"], [0], [2], [3], [1], (1, 3, 5)),
    (["n"], [0], ["n - 5"], ["n - 1"], [1], (1, 3, 8, 11)),
    (["n"], [0], ["n - 1"], ["n"], [1], (1, 4)),
    (["n", 1], [1], [0], [-1], [1], (1, 7)),           # jax x[:, :-1] on (n, 1): a static 0 dim
    (["n", 3], [0, 1], [-100, 1], [100, 3], [4, 1], (1, 9, 10)),
    ([5], [0], [0], [-1], [1], (None,)),
    ([0], [0], [0], [-1], [1], (None,)),
    ([0], [0], [0], [3], [1], (None,)),
    ([0, 4], [1], [1], [3], [1], (None,)),
    ([7], [0], [-2], [2], [1], (None,)),
    ([7], [0], [6], [100], [2], (None,)),
    ([7], [-1], [-7], [7], [3], (None,)),
]


@pytest.mark.parametrize("dims, axes, begin, end, strides, ns", CASES)
def test_strided_slice_matches_numpy(dims, axes, begin, end, strides, ns):
    exe = relax_mlir.compile(src(dims, axes, begin, end, strides))
    for n in ns:
        shape = tuple(n if isinstance(d, str) else d for d in dims)
        x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        index = [slice(None)] * len(shape)
        for a, b, e, s in zip(axes, begin, end, strides):
            index[a] = slice(position(b, n), position(e, n), s)
        want = x[tuple(index)]
        got = exe(x)
        assert got.shape == want.shape, (n, got.shape, want.shape)
        np.testing.assert_array_equal(got, want)


def test_strided_slice_symbol_with_upper_bound_0():
    exe = relax_mlir.compile(src(["n"], [0], [0], [4], [3], "attributes {relax.symbol_bounds = {n = 0}}"))
    assert exe(np.zeros(0, np.float32)).shape == (0,)


@pytest.mark.parametrize("attrs, msg", [
    (([0], [0], [2], [0]), "strides must be positive integers, got 0"),
    (([0], [0], [2], [-1]), "strides must be positive integers, got -1"),
    (([3], [0], [2], [1]), "axis 3 is out of range for rank 1"),
    (([0, 0], [0, 1], [2, 3], [1, 1]), r"axes \[0, 0\] repeat axis 0"),
    (([0], ["q"], [2], [1]), "symbol 'q', which is not bound"),
])
def test_strided_slice_bad_attributes_are_located(attrs, msg):
    with pytest.raises(relax_mlir.CompileError, match=r"<string>:2:8: error: 'relax.strided_slice' op .*" + msg):
        relax_mlir.compile(src(["n"], *attrs))


def test_slice_with_a_symbolic_stride_from_jax():
    """x.reshape(-1)[::m] of an [n, m] array (the first column): a stride that is a symbol, whose
    element count n + floordiv(-1, m) + 1 the prover shows non-negative (was refused)."""
    jax = pytest.importorskip("jax")
    from relax_mlir.frontend.jax import from_jax

    n, m = jax.export.symbolic_shape("n, m")
    fn = lambda x: x.reshape(-1)[::x.shape[1]] * 2  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((n, m), jax.numpy.float32)))
    for shape in ((1, 1), (3, 4), (7, 1), (1, 13), (40, 7)):
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        np.testing.assert_array_equal(exe(x), np.asarray(jax.jit(fn)(x)))
