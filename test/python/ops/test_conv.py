"""relax.conv through jax: lax.conv_general_dilated with several dimension_numbers, strides,
padding ('SAME' / 'VALID' / explicit, negative), lhs dilation (transposed conv), rhs dilation,
feature groups (grouped, depthwise) and batch groups, 1-D / 2-D / 3-D, symbolic batch and spatial
dims: each compiled ONCE and compared with jax.jit at several bindings."""
from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.jax import from_jax  # noqa: E402

import jaxcheck  # noqa: E402
from jaxcheck import spec as S  # noqa: E402

B, N = jax.export.symbolic_shape("b, n")
rng = np.random.default_rng(61)
rnd = functools.partial(jaxcheck.rand, rng, ints=(-8, 8))


check = functools.partial(jaxcheck.check, sizes=(1, 7, 19), rtol=1e-4, atol=1e-4)


def conv(strides, padding, dn, lhs_dil=None, rhs_dil=None, groups=1, batch_groups=1):
    return lambda x, w: lax.conv_general_dilated(x, w, strides, padding, lhs_dil, rhs_dil, dn,
                                                 feature_group_count=groups, batch_group_count=batch_groups,
                                                 precision=lax.Precision.HIGHEST)


# (name, fn, lhs spec, lhs shape of n, rhs shape)
CASES = [
    ("nhwc_same_s2_grouped_dilated", conv((2, 1), "SAME", ("NHWC", "HWIO", "NHWC"), rhs_dil=(1, 2), groups=2),
     (B, N, N, 4), lambda n: (2, n, n, 4), (3, 3, 2, 6)),
    ("nchw_valid", conv((1, 1), "VALID", ("NCHW", "OIHW", "NCHW")),
     (B, 3, N, 6), lambda n: (2, 3, n + 2, 6), (5, 3, 3, 2)),
    ("nchw_explicit_negative_padding", conv((1, 2), [(2, -1), (-1, 3)], ("NCHW", "OIHW", "NCHW")),
     (B, 2, N, 5), lambda n: (2, 2, n + 1, 5), (3, 2, 2, 3)),
    ("nhwc_depthwise_same", conv((1, 1), "SAME", ("NHWC", "HWIO", "NHWC"), groups=4),
     (B, N, 6, 4), lambda n: (3, n, 6, 4), (3, 3, 1, 8)),
    ("odd_layout_c_first_output", conv((1, 1), [(1, 1), (0, 0)], ("HWCN", "OHWI", "CNHW")),
     (N, 5, 3, B), lambda n: (n, 5, 3, 2), (4, 3, 2, 3)),
    ("transposed_lhs_dilation", conv((1,), [(2, 2)], ("NCH", "OIH", "NCH"), lhs_dil=(2,)),
     (B, 3, N), lambda n: (2, 3, n), (5, 3, 3)),
    ("conv1d_nwc_same_stride3", conv((3,), "SAME", ("NWC", "WIO", "NWC")),
     (B, N, 2), lambda n: (2, n, 2), (4, 2, 3)),
    ("conv3d_ndhwc", conv((1, 2, 1), "SAME", ("NDHWC", "DHWIO", "NDHWC"), rhs_dil=(2, 1, 1)),
     (B, N, 4, 3, 2), lambda n: (1, n, 4, 3, 2), (2, 3, 2, 2, 3)),
    ("batch_groups", conv((1, 1), "VALID", ("NCHW", "OIHW", "NCHW"), batch_groups=2),
     (4, 3, N, 5), lambda n: (4, 3, n + 1, 5), (6, 3, 2, 2)),
    ("kernel_larger_than_input", conv((1,), "VALID", ("NCH", "OIH", "NCH")),
     (B, 2, N), lambda n: (2, 2, n), (3, 2, 5)),   # n = 1: an empty result
]


@pytest.mark.parametrize("name, fn, spec, shape, wshape", CASES, ids=[c[0] for c in CASES])
def test_conv_matches_jax(name, fn, spec, shape, wshape):
    check(fn, [S(spec), S(wshape)], lambda n: [rnd(shape(n)), rnd(wshape)])


def test_conv_integer():
    fn = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))  # noqa: E731
    check(fn, [S((B, N, 4, 2), jnp.int32), S((3, 3, 2, 3), jnp.int32)],
          lambda n: [rnd((2, n, 4, 2), np.int32), rnd((3, 3, 2, 3), np.int32)], rtol=0, atol=0)


def test_conv_mixed_element_types():
    """preferred_element_type: i8 x i8 -> i32 (a quantized conv: exact, wrapping as XLA) and
    bf16 x bf16 -> f32, the operands converted to the result type first, as a dot_general's."""
    fn = lambda x, w, t: lax.conv_general_dilated(x, w, (2,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"),  # noqa: E731
                                                  preferred_element_type=t)
    i8 = functools.partial(fn, t=jnp.int32)
    check(i8, [S((B, N, 4), jnp.int8), S((3, 4, 5), jnp.int8)],
          lambda n: [rng.integers(-128, 128, (2, n, 4)).astype(np.int8), rng.integers(-128, 128, (3, 4, 5)).astype(np.int8)],
          rtol=0, atol=0)
    bf = functools.partial(fn, t=jnp.float32)
    check(bf, [S((B, N, 4), jnp.bfloat16), S((3, 4, 5), jnp.bfloat16)],
          lambda n: [np.asarray(jnp.asarray(rnd((2, n, 4)), jnp.bfloat16)), np.asarray(jnp.asarray(rnd((3, 4, 5)), jnp.bfloat16))],
          rtol=1e-6, atol=1e-6)


def test_conv_nan_and_inf_propagate():
    fn = conv((1,), "SAME", ("NCH", "OIH", "NCH"))

    def args(n):
        x = rnd((1, 2, n))
        x[0, 0, 0] = np.nan
        x[0, 1, n - 1] = np.inf
        return [x, rnd((2, 2, 3))]
    check(fn, [S((1, 2, N)), S((2, 2, 3))], args)


def test_same_padding_deduces_ceildiv():
    """SAME padding at a symbolic dim comes as stablehlo.dynamic_conv whose padding jax computes
    with floor_divide of -n: the importer folds it, and the output dim is ceil(n / 2)."""
    text = check(conv((2,), "SAME", ("NCH", "OIH", "NCH")), [S((B, 2, N)), S((3, 2, 3))],
                 lambda n: [rnd((2, 2, n)), rnd((3, 2, 3))]).text
    assert '!relax.tensor<["b", 3, "floordiv(n, 2) + mod(n, 2)"], f32>' in text


def test_conv_and_pool_model():
    """A small CNN block: conv (SAME) -> relu -> max pool (SAME) -> conv -> mean, symbolic batch
    and image size."""
    w1, w2 = rnd((3, 3, 3, 8)), rnd((3, 3, 8, 4))

    def net(x):
        y = lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jnp.maximum(y, 0.0)
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "SAME")
        y = lax.conv_general_dilated(y, w2, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.mean(y, axis=(1, 2))
    check(net, [S((B, N, N, 3))], lambda n: [rnd((2, n, n, 3))], sizes=(1, 7, 16), rtol=1e-3, atol=1e-3)


def T(dims, dt="f32") -> str:
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + f"], {dt}>"


def conv_src(attrs: str, lhs=("b", 4, "n"), rhs=(6, 2, 3)) -> str:
    rt = T(["?"] * len(lhs))
    return (f"func.func @main(%x: {T(lhs)}, %w: {T(rhs)}) -> {rt} {{\n"
            f'  %0 = "relax.conv"(%x, %w) {{{attrs}}} : ({T(lhs)}, {T(rhs)}) -> {rt}\n'
            f"  return %0 : {rt}\n}}\n")


@pytest.mark.parametrize("attrs, rhs, msg", [
    ("", (6, 2, 3), "lhs features 4 must equal rhs input features 2 times feature_group_count 1"),
    ("feature_group_count = 2", (5, 2, 3), "rhs output features 5 must be divisible by the group count 2"),
    ("feature_group_count = 2, batch_group_count = 2", (6, 2, 3), "cannot both exceed 1"),
    ("batch_group_count = 2", (6, 4, 3), r"lhs batch b must be divisible by batch_group_count 2"),
    ("feature_group_count = 2, strides = [0]", (6, 2, 3), "'strides' must hold integers >= 1"),
    ("feature_group_count = 2, pad_lo = [1, 1]", (6, 2, 3), "'pad_lo' has 2 elements, expected 1"),
    ("feature_group_count = 0", (6, 2, 3), "group counts must be >= 1"),
])
def test_conv_bad_attributes_are_located(attrs, rhs, msg):
    with pytest.raises(relax_mlir.CompileError, match=r"<string>:2:8: error: 'relax.conv' op .*" + msg):
        relax_mlir.compile(conv_src(attrs, rhs=rhs))


def test_conv_builds_from_relax_text():
    """relax.conv written by hand (canonical layout, symbolic batch and length) against numpy."""
    exe = relax_mlir.compile(conv_src("feature_group_count = 2, pad_lo = [1], pad_hi = [0], strides = [2]"))
    for b, n in ((1, 1), (3, 8), (2, 13)):
        x, w = rnd((b, 4, n)), rnd((6, 2, 3))
        xp = np.pad(x, [(0, 0), (0, 0), (1, 0)])
        out = (xp.shape[2] - 3) // 2 + 1
        want = np.zeros((b, 6, out), np.float32)
        for o in range(6):
            g = o // 3
            for q in range(out):
                want[:, o, q] = np.einsum("bck,ck->b", xp[:, 2 * g:2 * g + 2, 2 * q:2 * q + 3], w[o])
        np.testing.assert_allclose(exe(x, w), want, rtol=1e-4, atol=1e-4)


def test_gradient_of_a_convolution_with_an_empty_output():
    """A window wider than the input (VALID, stride 2) gives an output with a 0 dim; its gradient
    dilates that empty cotangent (lhs dilation 2), which the kernels built as a strided
    insert_slice of nothing (the MLIR verifier refused it: 'offset 1 is out-of-bounds')."""
    def f(x, w):
        y = lax.conv_general_dilated(x, w, (2,), ((0, 0),), dimension_numbers=("NCW", "WIO", "NCW"))
        return jax.grad(lambda x, w: lax.conv_general_dilated(
            x, w, (2,), ((0, 0),), dimension_numbers=("NCW", "WIO", "NCW")).sum(), argnums=(0, 1))(x, w) + (y,)
    check(f, [S((B, 5, 1)), S((2, 5, 1))], lambda n: [rnd((n, 5, 1)), rnd((2, 5, 1))])


def test_conv_transpose_same():
    """lax.conv_transpose: lhs dilation 2 with the padding jax derives, at symbolic dims."""
    w = rnd((3, 3, 4, 2))
    fn = lambda x: lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))  # noqa: E731
    check(fn, [S((B, N, N, 4))], lambda n: [rnd((2, n, n, 4))], sizes=(1, 5, 8))


@pytest.mark.parametrize("dt", [jnp.float16, jnp.bfloat16], ids=["f16", "bf16"])
def test_conv_half_accumulates_in_f32(dt):
    """f16/bf16: products and sums in f32, rounded once, as XLA: jax.jit's result within an ulp (the
    summation order differs); an f16 / bf16 accumulator is off by ~10x more over 192-term sums."""
    fn = lambda x, w: lax.conv_general_dilated(x, w, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"))  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, S((B, N, 64), dt), S((3, 64, 8), dt)))
    for n in (1, 17):
        x, w = np.asarray(jnp.asarray(rnd((2, n, 64)), dt)), np.asarray(jnp.asarray(rnd((3, 64, 8)), dt))
        got, want = np.asarray(exe(x, w)), np.asarray(jax.jit(fn)(x, w))
        assert got.dtype == want.dtype
        tol = (1e-3, 1e-3) if dt == jnp.float16 else (8e-3, 1e-2)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol[0], atol=tol[1])


def _patches_reference(x, window, strides, ldil, rdil, lo, hi):
    """numpy im2col of x [B, S..., C]: the lhs-dilated, padded (negative: cut) input's windows."""
    ns = len(window)
    for j in range(ns):
        if ldil[j] > 1:
            n = x.shape[1 + j]
            shape = list(x.shape)
            shape[1 + j] = max((n - 1) * ldil[j] + 1, 0)
            d = np.zeros(shape, x.dtype)
            idx = [slice(None)] * x.ndim
            idx[1 + j] = slice(None, None, ldil[j])
            d[tuple(idx)] = x
            x = d
        pad = [(0, 0)] * x.ndim
        pad[1 + j] = (max(lo[j], 0), max(hi[j], 0))
        x = np.pad(x, pad)
        idx = [slice(None)] * x.ndim
        idx[1 + j] = slice(max(-lo[j], 0), x.shape[1 + j] - max(-hi[j], 0))
        x = x[tuple(idx)]
    q = [max((x.shape[1 + j] - ((window[j] - 1) * rdil[j] + 1)) // strides[j] + 1, 0) for j in range(ns)]
    out = np.zeros((x.shape[0], *q, *window, x.shape[-1]), x.dtype)
    for pos in np.ndindex(*q):
        for k in np.ndindex(*window):
            src = tuple(pos[j] * strides[j] + k[j] * rdil[j] for j in range(ns))
            out[(slice(None), *pos, *k, slice(None))] = x[(slice(None), *src, slice(None))]
    return out


@pytest.mark.parametrize("window, strides, ldil, rdil, lo, hi", [
    ((3,), (2,), (1,), (1,), (1,), (1,)),
    ((2,), (1,), (2,), (3,), (2,), (-1,)),
    ((2, 3), (1, 2), (1, 1), (2, 1), (0, -1), (1, 2)),
])
def test_window_patches_from_relax_text(window, strides, ldil, rdil, lo, hi):
    """relax.window_patches (the im2col of relax-conv-to-matmul) written by hand, symbolic batch
    and spatial dims, against numpy at sizes 1, 7 and 19 from one compile (a window wider than
    the input gives an empty result)."""
    ns = len(window)
    xdims = ["b", "n"] + [5] * (ns - 1) + [3]
    rt = T(["?"] * (2 * ns + 2))
    attrs = (f"window = {list(window)}, strides = {list(strides)}, lhs_dilation = {list(ldil)}, "
             f"rhs_dilation = {list(rdil)}, pad_lo = {list(lo)}, pad_hi = {list(hi)}")
    src = (f"func.func @main(%x: {T(xdims)}) -> {rt} {{\n"
           f'  %0 = "relax.window_patches"(%x) {{{attrs}}} : ({T(xdims)}) -> {rt}\n'
           f"  return %0 : {rt}\n}}\n")
    exe = relax_mlir.compile(src)
    for b, n in ((1, 1), (2, 7), (3, 19)):
        x = rnd((b, n, *[5] * (ns - 1), 3))
        want = _patches_reference(x, window, strides, ldil, rdil, lo, hi)
        got = exe(x)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_cpu_convolutions_run_as_patches_and_a_matmul():
    """The CPU pipeline makes a one-group f32 convolution a window_patches and a matmul (one
    sgemm-shaped product); the direct kernel (optimize=False) and the rewritten form both equal
    jax.jit, at batch 1, 7 and 19 from one compile each."""
    fn = conv((2, 1), "SAME", ("NHWC", "HWIO", "NHWC"), rhs_dil=(1, 2))
    specs = [S((B, N, 6, 4)), S((3, 3, 4, 8))]
    text = str(relax_mlir.run_passes(from_jax(fn, *specs), ["relax-infer-shapes", "relax-conv-to-matmul",
                                                              "relax-canonicalize"]))
    assert "relax.window_patches" in text and "relax.matmul" in text and '"relax.conv"' not in text
    for optimize in (True, False):
        exe = relax_mlir.compile(from_jax(fn, *specs), optimize=optimize)
        for n in (1, 7, 19):
            x, w = rnd((2, n, 6, 4)), rnd((3, 3, 4, 8))
            np.testing.assert_allclose(exe(x, w), jax.jit(fn)(x, w), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_result_dims_are_known_to_later_ops(groups):
    """StableHLO types a convolution over a symbolic length with '?': the importer deduces the
    result's symbolic dims itself, so a dot_general after it (a conv feature extractor before
    attention) imports (it was refused: 'shape has an unknown dim'). Equal to jax.jit at n = 1,
    7, 19 from one compile."""
    def fn(x, w):
        y = lax.conv_general_dilated(x, w, (1,), ((2, 0),), rhs_dilation=(2,), dimension_numbers=("NWC", "WIO", "NWC"),
                                     feature_group_count=groups)
        return jnp.einsum("...ij,...kj->...ik", y, y)
    check(fn, [S((B, N, 2)), S((2, 2 // groups, 4))], lambda n: [rnd((2, n, 2)), rnd((2, 2 // groups, 4))])


_STRIDED_WEIGHT_GRAD = """
import jax, jax.numpy as jnp, numpy as np
import relax_mlir
from relax_mlir.frontend.jax import from_jax
n, = jax.export.symbolic_shape('n')
def grads(x, w):  # a stride-2 VALID convolution whose stride leaves the last row and column unread
    def loss(w, x):
        y = jax.lax.conv_general_dilated(x, w, (2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                         precision=jax.lax.Precision.HIGHEST)
        return jnp.sum(jnp.sin(y))
    return jax.grad(loss, argnums=(0, 1))(w, x)
specs = (jax.ShapeDtypeStruct((n, 6, 6, 2), jnp.float32), jax.ShapeDtypeStruct((3, 3, 2, 4), jnp.float32))
exe = relax_mlir.compile(from_jax(grads, *specs), target="vulkan")
rng = np.random.default_rng(3)
for k in (1, 5, 16):
    x = rng.standard_normal((k, 6, 6, 2)).astype(np.float32)
    w = rng.standard_normal((3, 3, 2, 4)).astype(np.float32)
    want = jax.jit(grads)(x, w)
    got = exe(x, w)
    ok = all(np.allclose(np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-4) for g, r in zip(got, want))
    print("grad", k, "OK" if ok else "BAD")
"""


def test_strided_weight_gradient_on_gpu_targets():
    """The weight gradient of a stride-2 VALID convolution reads an expanded window (an
    expand_shape of a subview) of its input. The GPU kernels now read the view's source
    through index arithmetic and the view's dims are the sizes it states (Vulkan refused it: "a
    kernel buffer has a non-identity layout"; CUDA: "'memref.subview' in the host program").
    Vulkan runs it against jax at three batch sizes; CUDA compiles it (no device here)."""
    import os
    import subprocess
    import sys

    import toolchecks

    n = jax.export.symbolic_shape("n")[0]
    ns = {}
    exec(_STRIDED_WEIGHT_GRAD.split("specs = ")[0], ns)
    specs = (jax.ShapeDtypeStruct((n, 6, 6, 2), jnp.float32), jax.ShapeDtypeStruct((3, 3, 2, 4), jnp.float32))
    cuda = relax_mlir.compile(from_jax(ns["grads"], *specs), target="cuda")
    assert cuda.ptx and "memref.subview" not in str(cuda.artifacts["hostprog"])
    if not toolchecks.vulkan_adapter():
        pytest.skip("no Vulkan adapter (wgpu with lavapipe or a GPU driver)")
    r = subprocess.run([sys.executable, "-c", _STRIDED_WEIGHT_GRAD], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")})
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("grad ")]
    assert lines == [f"grad {k} OK" for k in (1, 5, 16)], r.stdout + r.stderr[-2000:]
