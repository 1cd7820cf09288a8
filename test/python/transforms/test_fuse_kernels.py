"""relax-fuse-kernels: fused and unfused pipelines agree, at several shapes from one compile."""
from __future__ import annotations

import numpy as np
import pytest

import relax_mlir

SIZES = (1, 13, 257)
RNG = np.random.default_rng(0)
DEFAULT = ["relax-infer-shapes", "relax-legalize", "relax-lower-shapes", "relax-to-upstream"]
FUSED = ["relax-infer-shapes", "relax-legalize", "relax-fuse-kernels", "relax-lower-shapes", "relax-to-upstream"]


def T(dims, dt="f32"):
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + f"], {dt}>"


U = T(["?", "?"])
N32 = T(["n", 32])

CHAIN = f"""
func.func @main(%x: {N32}, %y: {N32}, %b: {T([32])}) -> {U} {{
  %0 = "relax.add"(%x, %y) : ({N32}, {N32}) -> {U}
  %1 = "relax.relu"(%0) : ({U}) -> {U}
  %2 = "relax.exp"(%1) : ({U}) -> {U}
  %3 = "relax.multiply"(%2, %b) : ({U}, {T([32])}) -> {U}
  return %3 : {U}
}}"""

# matmul -> bias add -> gelu -> matmul -> tanh, with a multi-use value and a broadcast
# intermediate (exp of [32] added into ["n", 32]), and a softmax (not elementwise) in the middle.
MIXED = f"""
func.func @main(%x: {T(["n", 64])}, %w: {T([64, 32])}, %b: {T([32])}, %w2: {T([32, 32])}) -> ({U}, {U}) {{
  %0 = "relax.matmul"(%x, %w) : ({T(["n", 64])}, {T([64, 32])}) -> {U}
  %1 = "relax.add"(%0, %b) : ({U}, {T([32])}) -> {U}
  %2 = "relax.gelu"(%1) : ({U}) -> {U}
  %e = "relax.exp"(%b) : ({T([32])}) -> {T(["?"])}
  %3 = "relax.add"(%e, %2) : ({T(["?"])}, {U}) -> {U}
  %4 = "relax.softmax"(%3) {{axis = -1 : i64}} : ({U}) -> {U}
  %5 = "relax.subtract"(%4, %2) : ({U}, {U}) -> {U}
  %6 = "relax.matmul"(%5, %w2) : ({U}, {T([32, 32])}) -> {U}
  %7 = "relax.tanh"(%6) : ({U}) -> {U}
  %8 = "relax.sigmoid"(%7) : ({U}) -> {U}
  return %8, %2 : {U}, {U}
}}"""


def rand(*shape):
    return RNG.uniform(-2, 2, size=shape).astype(np.float32)


def call_tirs(text, passes):
    m = relax_mlir.run_passes(relax_mlir.parse(text), passes)
    return str(m).count('"relax_v.call_tir"')


def test_chain_becomes_one_kernel():
    assert call_tirs(CHAIN, ["relax-legalize"]) == 4
    assert call_tirs(CHAIN, ["relax-legalize", "relax-fuse-kernels"]) == 1
    text = str(relax_mlir.run_passes(relax_mlir.parse(CHAIN), ["relax-legalize", "relax-fuse-kernels"]))
    assert text.count("linalg.generic") == 1


def test_identical_fused_kernels_are_shared():
    src = f"""
func.func @main(%x: {N32}, %y: {N32}) -> ({U}, {U}) {{
  %0 = "relax.exp"(%x) : ({N32}) -> {U}
  %1 = "relax.relu"(%0) : ({U}) -> {U}
  %2 = "relax.exp"(%y) : ({N32}) -> {U}
  %3 = "relax.relu"(%2) : ({U}) -> {U}
  return %1, %3 : {U}, {U}
}}"""
    text = str(relax_mlir.run_passes(relax_mlir.parse(src), ["relax-legalize", "relax-fuse-kernels"]))
    assert text.count('"relax_v.call_tir"') == 2
    assert text.count("func.func private") == 1


def _compare(src, make_args, rtol=1e-5, atol=1e-5):
    plain = relax_mlir.compile(src, passes=DEFAULT)
    fused = relax_mlir.compile(src, passes=FUSED)
    default = relax_mlir.compile(src)  # the optimize pipeline, which includes the pass
    for n in SIZES:
        args = make_args(n)
        ref = plain(*args)
        for exe in (fused, default):
            got = exe(*args)
            refs, gots = (ref, got) if isinstance(ref, (tuple, list)) else ((ref,), (got,))
            assert len(refs) == len(gots)
            for r, g in zip(refs, gots):
                assert g.shape == r.shape
                np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)


def test_chain_numerics():
    def args(n):
        return [rand(n, 32), rand(n, 32), rand(32)]

    _compare(CHAIN, args)
    x, y, b = args(5)
    np.testing.assert_allclose(relax_mlir.compile(CHAIN, passes=FUSED)(x, y, b),
                               np.exp(np.maximum(x + y, 0)) * b, rtol=1e-5)


def test_mixed_numerics():
    w, b, w2 = rand(64, 32) * 0.1, rand(32), rand(32, 32) * 0.1
    _compare(MIXED, lambda n: [rand(n, 64), w, b, w2], rtol=1e-4, atol=1e-5)


def test_matmul_kernels_keep_their_fast_schedule():
    from relax_mlir.backend import cpu_matmul

    m = relax_mlir.run_passes(relax_mlir.parse(MIXED), ["relax-legalize", "relax-fuse-kernels"])
    with m.context:
        mms = [op.operation for op in m.op.regions[0].blocks[0].operations
               if "relax.kernel" in op.attributes and "matmul" in str(op.attributes["relax.kernel"])]
        assert mms and all(cpu_matmul.is_matmul_kernel(f) for f in mms)


@pytest.mark.parametrize("n", SIZES)
def test_no_op_without_call_tir(n):
    # Before legalization there is nothing to fuse; the pass leaves the module as it was.
    m = relax_mlir.parse(CHAIN)
    before = str(m)
    assert str(relax_mlir.run_passes(m, ["relax-fuse-kernels"])) == before


# Decomposed softmax and layer norm (as JAX exports them): the reductions take their elementwise
# prologues (exp(x - max), the masked scores, the squared deviation).
NM = T(["n", "m"])
N1 = T(["n", 1])
ROWS = f"""
func.func @main(%x: {NM}, %g: {T(["m"])}) -> ({NM}, {NM}) {{
  %c = "relax.constant"() {{value = dense<2.0> : tensor<f32>}} : () -> {T([])}
  %s = "relax.multiply"(%x, %c) : ({NM}, {T([])}) -> {NM}
  %mx = "relax.max"(%s) {{axes = [1], keepdims = true}} : ({NM}) -> {N1}
  %d = "relax.subtract"(%s, %mx) : ({NM}, {N1}) -> {NM}
  %e = "relax.exp"(%d) : ({NM}) -> {NM}
  %sum = "relax.sum"(%e) {{axes = [1], keepdims = true}} : ({NM}) -> {N1}
  %p = "relax.divide"(%e, %sum) : ({NM}, {N1}) -> {NM}
  %mu = "relax.mean"(%x) {{axes = [1], keepdims = true}} : ({NM}) -> {N1}
  %xc = "relax.subtract"(%x, %mu) : ({NM}, {N1}) -> {NM}
  %sq = "relax.multiply"(%xc, %xc) : ({NM}, {NM}) -> {NM}
  %var = "relax.mean"(%sq) {{axes = [1], keepdims = true}} : ({NM}) -> {N1}
  %r = "relax.rsqrt"(%var) : ({N1}) -> {N1}
  %y = "relax.multiply"(%xc, %r) : ({NM}, {N1}) -> {NM}
  %z = "relax.multiply"(%y, %g) : ({NM}, {T(["m"])}) -> {NM}
  return %p, %z : {NM}, {NM}
}}"""


def test_reduction_prologues_fuse_and_keep_numerics():
    m = relax_mlir.run_passes(relax_mlir.parse(ROWS), ["relax-legalize", "relax-fuse-kernels"])
    text = str(m)
    # the scaled x is computed inside the max's loop nest; exp(x - max) is materialized once and
    # read by the sum and the divide (a transcendental is too costly to recompute in both)
    assert "fused_multiply_max" in text, text
    assert text.count("math.exp") == 1, text
    assert call_tirs(ROWS, ["relax-legalize", "relax-fuse-kernels"]) <= call_tirs(ROWS, ["relax-legalize"]) - 4
    rng = np.random.default_rng(3)

    def args(n):
        m_ = {1: 1, 13: 29, 257: 131}[n]
        return [rand(n, m_), rng.uniform(0.5, 1.5, m_).astype(np.float32)]

    _compare(ROWS, args, rtol=1e-4, atol=1e-5)
    x, g = args(13)
    s = 2 * x
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    xc = x - x.mean(1, keepdims=True)
    z = xc / np.sqrt((xc * xc).mean(1, keepdims=True)) * g
    got = relax_mlir.compile(ROWS)(x, g)
    np.testing.assert_allclose(got[0], p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], z, rtol=1e-4, atol=1e-4)
