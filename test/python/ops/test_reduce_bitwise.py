"""Bitwise reductions (`lax.reduce_and` / `reduce_or` / `reduce_xor`, numpy's
`bitwise_*.reduce`) on signed, unsigned and boolean elements: `relax.reduce_bitwise_{and,or,xor}`
against jax.jit, over symbolic axes and empty ones (the identity: all bits set for and, 0
for or / xor), from one compile; and the op's IR-level errors."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from jaxcheck import check, spec  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.core.diagnostics import CompileError  # noqa: E402


def _all(x):
    return (lax.reduce_and(x, (1,)), lax.reduce_or(x, (1,)), lax.reduce_xor(x, (1,)), lax.reduce_xor(x, (0, 1)),
            lax.reduce_and(x, (0,)), lax.reduce_or(x, (0,)))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8, np.uint32, np.int16, bool])
def test_bitwise_reductions_match_jax(dtype):
    b, s = jax.export.symbolic_shape("b, s")
    info = np.iinfo(dtype) if dtype is not bool else None

    def make(n):
        rng = np.random.default_rng(n)
        if dtype is bool:
            return [rng.random((n % 4 + 1, n)) < 0.5]
        return [rng.integers(info.min, info.max, (n % 4 + 1, n), dtype=dtype, endpoint=True)]
    check(_all, [spec((b, s), dtype)], make, [1, 13, 1000])
    # an empty reduced axis (jax's symbols are >= 1: a static 0 here) gives the identity
    check(_all, [spec((b, 0), dtype)], lambda n: [make(n)[0][:, :0]], [1, 6])


def test_float_operand_is_a_located_error():
    text = """
    func.func @main(%x: !relax.tensor<[4], f32>) -> !relax.tensor<[], f32> {
      %r = "relax.reduce_bitwise_xor"(%x) : (!relax.tensor<[4], f32>) -> !relax.tensor<[], f32>
      return %r : !relax.tensor<[], f32>
    }"""
    with pytest.raises(CompileError, match="relax.reduce_bitwise_xor needs an integer or boolean element type"):
        relax_mlir.parse(text)


def test_variadic_reduce_of_independent_pairs():
    """lax.reduce over a tuple whose body combines each operand on its own: one reduction each; a
    body that mixes the operands is refused by name. (With a non-identity init, StableHLO leaves
    the result implementation-defined: XLA on CPU drops it here, relax-mlir combines it once.)"""
    b, s = jax.export.symbolic_shape("b, s")

    def f(x, i, u):
        body = lambda a, c: (jnp.maximum(a[0], c[0]), a[1] + c[1], a[2] ^ c[2])  # noqa: E731
        return lax.reduce((x, i, u), (np.float32(-np.inf), np.int32(0), np.uint8(0)), body, (1,))

    def make(n):
        rng = np.random.default_rng(n)
        return [rng.standard_normal((n % 3 + 1, n)).astype(np.float32), rng.integers(-9, 9, (n % 3 + 1, n), dtype=np.int32),
                rng.integers(0, 256, (n % 3 + 1, n), dtype=np.uint8)]
    check(f, [spec((b, s)), spec((b, s), jnp.int32), spec((b, s), jnp.uint8)], make, [1, 13, 200])

    from relax_mlir.frontend.jax import from_jax
    from relax_mlir.frontend.stablehlo.errors import UnsupportedOpError
    mixed = lambda x, y: lax.reduce((x, y), (np.float32(0), np.float32(0)), lambda a, c: (a[0] + c[1], a[1] * c[0]), (0,))  # noqa: E731
    with pytest.raises(UnsupportedOpError, match="stablehlo.reduce.*variadic reduce"):
        from_jax(mixed, spec((s,)), spec((s,)))
