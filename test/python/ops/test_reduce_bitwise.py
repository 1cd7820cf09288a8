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
