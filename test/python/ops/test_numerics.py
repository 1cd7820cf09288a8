"""Every op of the dialect against numpy, each compiled once and run at several shapes."""
from __future__ import annotations

import numpy as np
import pytest

import relax_mlir

SIZES = (1, 13, 257)
RNG = np.random.default_rng(0)


def T(dims, dt="f32"):
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + f"], {dt}>"


def program(params, body, result):
    """params: [(name, type)], body: lines using %names, result: ssa name and its (unknown) type."""
    sig = ", ".join(f"%{n}: {t}" for n, t in params)
    lines = "\n  ".join(body)
    return f"func.func @main({sig}) -> {result[1]} {{\n  {lines}\n  return {result[0]} : {result[1]}\n}}"


def unary(op, dt="f32", rtype=None):
    t = T(["n", 5], dt)
    rt = T(["?", "?"], rtype or dt)
    return program([("x", t)], [f'%r = "relax.{op}"(%x) : ({t}) -> {rt}'], ("%r", rt))


def rand(shape, dt=np.float32, lo=-2.0, hi=2.0):
    if np.dtype(dt) == np.bool_:
        return RNG.random(shape) > 0.5
    if np.issubdtype(dt, np.integer):
        return RNG.integers(-5, 6, size=shape).astype(dt)
    return RNG.uniform(lo, hi, size=shape).astype(dt)


def check_many(exe, make_args, ref, rtol=1e-4, atol=1e-5):
    for n in SIZES:
        args = make_args(n)
        got = exe(*args)
        want = ref(*args)
        if isinstance(want, tuple):
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            assert got.shape == want.shape, (got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def erf(x):
    import math
    return np.vectorize(math.erf, otypes=[np.float32])(x)


UNARY = {
    "exp": np.exp, "tanh": np.tanh, "negative": np.negative, "abs": np.abs, "sin": np.sin, "cos": np.cos,
    "floor": np.floor, "ceil": np.ceil, "sign": np.sign, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0), "silu": lambda x: x / (1 + np.exp(-x)), "erf": erf,
    "gelu": lambda x: x * 0.5 * (1 + erf(x / np.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3))),
}
POSITIVE = {"log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "log1p": np.log1p}


@pytest.mark.parametrize("op", sorted(UNARY) + sorted(POSITIVE))
def test_unary(op):
    exe = relax_mlir.compile(unary(op))
    lo = 0.1 if op in POSITIVE else -2.0
    check_many(exe, lambda n: [rand((n, 5), lo=lo)], {**UNARY, **POSITIVE}[op], rtol=1e-4, atol=1e-5)


def test_isfinite_and_not():
    exe = relax_mlir.compile(unary("isfinite", rtype="i1"))
    x = np.array([[1.0, np.inf, -np.inf, np.nan, 0.0]] * 3, np.float32)
    np.testing.assert_array_equal(exe(x), np.isfinite(x))
    exe = relax_mlir.compile(unary("logical_not", dt="i1"))
    check_many(exe, lambda n: [rand((n, 5), np.bool_)], np.logical_not)


BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
          "maximum": np.maximum, "minimum": np.minimum, "power": np.power}
CMP = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
       "greater": np.greater, "greater_equal": np.greater_equal}


@pytest.mark.parametrize("op", sorted(BINARY) + sorted(CMP))
def test_binary_broadcast(op):
    a, b = T(["n", 1, 5]), T([4, 1])
    rt = T(["?", "?", "?"], "i1" if op in CMP else "f32")
    exe = relax_mlir.compile(program([("a", a), ("b", b)], [f'%r = "relax.{op}"(%a, %b) : ({a}, {b}) -> {rt}'], ("%r", rt)))
    lo = 0.5 if op in ("power", "divide") else -2.0
    check_many(exe, lambda n: [rand((n, 1, 5), lo=lo), np.round(rand((4, 1), lo=lo), 1)], {**BINARY, **CMP}[op], rtol=1e-4)


@pytest.mark.parametrize("dt,np_dt", [("i32", np.int32), ("i64", np.int64)])
def test_integer_arith(dt, np_dt):
    a = T(["n", 3], dt)
    rt = T(["?", "?"], dt)
    body = [f'%s = "relax.add"(%a, %b) : ({a}, {a}) -> {rt}', f'%r = "relax.multiply"(%s, %a) : ({rt}, {a}) -> {rt}']
    exe = relax_mlir.compile(program([("a", a), ("b", a)], body, ("%r", rt)))
    check_many(exe, lambda n: [rand((n, 3), np_dt), rand((n, 3), np_dt)], lambda a, b: (a + b) * a)


def test_f16_elementwise():
    t = T(["n", 8], "f16")
    exe = relax_mlir.compile(program([("a", t), ("b", t)], [f'%r = "relax.add"(%a, %b) : ({t}, {t}) -> {t}'], ("%r", t)))
    check_many(exe, lambda n: [rand((n, 8), np.float16), rand((n, 8), np.float16)], np.add, rtol=1e-3, atol=1e-3)


def test_logical_and_or_where():
    b, f = T(["n", 4], "i1"), T(["n", 4])
    body = [f'%c = "relax.logical_and"(%p, %q) : ({b}, {b}) -> {b}', f'%d = "relax.logical_or"(%c, %p) : ({b}, {b}) -> {b}',
            f'%r = "relax.where"(%d, %x, %y) : ({b}, {f}, {f}) -> {f}']
    exe = relax_mlir.compile(program([("p", b), ("q", b), ("x", f), ("y", f)], body, ("%r", f)))
    check_many(exe, lambda n: [rand((n, 4), np.bool_), rand((n, 4), np.bool_), rand((n, 4)), rand((n, 4))],
               lambda p, q, x, y: np.where((p & q) | p, x, y))


@pytest.mark.parametrize("src,dst,np_src,np_dst", [("f32", "i32", np.float32, np.int32), ("i32", "f32", np.int32, np.float32),
                                                    ("f32", "f16", np.float32, np.float16), ("i64", "i32", np.int64, np.int32)])
def test_astype(src, dst, np_src, np_dst):
    t, rt = T(["n", 3], src), T(["?", "?"], dst)
    exe = relax_mlir.compile(program([("x", t)], [f'%r = "relax.astype"(%x) {{dtype = {dst}}} : ({t}) -> {rt}'], ("%r", rt)))
    check_many(exe, lambda n: [rand((n, 3), np_src) * (3 if np_src == np.float32 else 1)], lambda x: x.astype(np_dst), atol=1e-2)


@pytest.mark.parametrize("lhs,rhs,mk", [
    (["n", 16], [16, 8], lambda n: [(n, 16), (16, 8)]),
    (["b", "n", 16], [16, 8], lambda n: [(2, n, 16), (16, 8)]),
    (["b", "n", 16], ["b", 16, "n"], lambda n: [(3, n, 16), (3, 16, n)]),
    (["n", 16], [16], lambda n: [(n, 16), (16,)]),
    ([1, "n", 4], [2, 4, 3], lambda n: [(1, n, 4), (2, 4, 3)]),
])
def test_matmul(lhs, rhs, mk):
    a, b = T(lhs), T(rhs)
    rt = T(["?"] * max(len(lhs), len(rhs), 1) if len(rhs) > 1 else ["?"] * (len(lhs) - 1))
    exe = relax_mlir.compile(program([("a", a), ("b", b)], [f'%r = "relax.matmul"(%a, %b) : ({a}, {b}) -> {rt}'], ("%r", rt)))
    check_many(exe, lambda n: [rand(s) for s in mk(n)], np.matmul, rtol=1e-4, atol=1e-4)


def test_permute_reshape_broadcast():
    x = T(["b", "s", 4])
    body = [f'%p = "relax.permute_dims"(%x) {{axes = [1, 0, 2]}} : ({x}) -> {T(["?", "?", "?"])}',
            f'%r = "relax.reshape"(%x) {{shape = ["b*s", 4]}} : ({x}) -> {T(["?", "?"])}',
            f'%q = "relax.reshape"(%r) {{shape = [-1]}} : ({T(["?", "?"])}) -> {T(["?"])}',
            f'%e = "relax.reshape"(%q) {{shape = ["b", 1, "s", 4]}} : ({T(["?"])}) -> {T(["?", "?", "?", "?"])}',
            f'%g = "relax.broadcast_to"(%e) {{shape = ["b", 3, "s", 4]}} : ({T(["?", "?", "?", "?"])}) -> {T(["?", "?", "?", "?"])}',
            f'%s = "relax.sum"(%g) {{axes = [1]}} : ({T(["?", "?", "?", "?"])}) -> {T(["?", "?", "?"])}',
            f'%t = "relax.permute_dims"(%s) {{axes = [1, 0, 2]}} : ({T(["?", "?", "?"])}) -> {T(["?", "?", "?"])}',
            f'%o = "relax.add"(%t, %p) : ({T(["?", "?", "?"])}, {T(["?", "?", "?"])}) -> {T(["?", "?", "?"])}']
    exe = relax_mlir.compile(program([("x", x)], body, ("%o", T(["?", "?", "?"]))))
    check_many(exe, lambda n: [rand((2, n, 4))], lambda x: 4 * np.transpose(x, (1, 0, 2)))


def test_concat_and_split():
    a, b = T(["m", 3]), T(["n", 3])
    u = T(["?", "?"])
    body = [f'%c = "relax_v.concat"(%a, %b) {{axis = 0}} : ({a}, {b}) -> {u}',
            f'%s:2 = "relax_v.split"(%c) {{axis = 1, indices = [1]}} : ({u}) -> ({u}, {u})',
            f'%l = "relax.strided_slice"(%s#1) {{axes = [0], begin = [1], end = ["m + n"], strides = [2]}} : ({u}) -> {u}']
    exe = relax_mlir.compile(program([("a", a), ("b", b)], body, ("%l", u)))
    for n in SIZES:
        av, bv = rand((n, 3)), rand((n + 2, 3))
        np.testing.assert_allclose(exe(av, bv), np.concatenate([av, bv], 0)[1::2, 1:])


def test_take():
    x, i = T(["v", 8]), T(["k"], "i32")
    u = T(["?", "?"])
    exe = relax_mlir.compile(program([("x", x), ("i", i)], [f'%t = "relax.take"(%x, %i) {{axis = 0}} : ({x}, {i}) -> {u}'], ("%t", u)))
    for n in SIZES:
        xv = rand((n + 3, 8))
        iv = RNG.integers(0, n + 3, size=(n,)).astype(np.int32)
        np.testing.assert_allclose(exe(xv, iv), xv[iv])


@pytest.mark.parametrize("op,ref", [("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min), ("prod", np.prod)])
def test_reductions(op, ref):
    x = T(["n", 6, 3])
    body = [f'%r = "relax.{op}"(%x) {{axes = [0, 2], keepdims = false}} : ({x}) -> {T(["?"])}',
            f'%k = "relax.{op}"(%x) {{axes = [-1], keepdims = true}} : ({x}) -> {T(["?", "?", "?"])}']
    src = program([("x", x)], body, ("%r", T(["?"])))
    exe = relax_mlir.compile(src)
    lo = 0.5 if op == "prod" else -2.0
    check_many(exe, lambda n: [rand((n, 6, 3), lo=lo, hi=1.5 if op == "prod" else 2.0)],
               lambda x: ref(x, axis=(0, 2)), rtol=1e-3, atol=1e-3)


def test_softmax_layer_norm_rms_norm():
    x, g = T(["n", 32]), T([32])
    u = T(["?", "?"])
    body = [f'%s = "relax.softmax"(%x) {{axis = -1}} : ({x}) -> {u}',
            f'%l = "relax.layer_norm"(%x, %g, %b) {{axes = [-1], epsilon = 1.0e-05 : f32}} : ({x}, {g}, {g}) -> {u}',
            f'%q = "relax.rms_norm"(%x, %g) {{axes = [-1], epsilon = 1.0e-05 : f32}} : ({x}, {g}) -> {u}',
            f'%y = "relax.log_softmax"(%x) {{axis = 1}} : ({x}) -> {u}',
            f'%a = "relax.add"(%s, %l) : ({u}, {u}) -> {u}', f'%c = "relax.add"(%a, %q) : ({u}, {u}) -> {u}',
            f'%r = "relax.add"(%c, %y) : ({u}, {u}) -> {u}']
    exe = relax_mlir.compile(program([("x", x), ("g", g), ("b", g)], body, ("%r", u)))

    def ref(x, g, b):
        e = np.exp(x - x.max(-1, keepdims=True))
        sm = e / e.sum(-1, keepdims=True)
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        ln = (x - mu) / np.sqrt(var + 1e-5) * g + b
        rms = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * g
        return sm + ln + rms + np.log(sm)
    check_many(exe, lambda n: [rand((n, 32)), rand((32,)), rand((32,))], ref, rtol=1e-3, atol=1e-4)


def test_creation_ops():
    x = T(["n", 4])
    u = T(["?", "?"])
    s = T([], "f32")
    body = [f'%z = "relax.zeros"() {{shape = ["n", 4], dtype = f32}} : () -> {u}',
            f'%o = "relax.ones"() {{shape = ["n", 4], dtype = f32}} : () -> {u}',
            f'%f = "relax.full"(%v) {{shape = ["n", 4]}} : ({s}) -> {u}',
            f'%a = "relax.arange"() {{end = "n", dtype = f32}} : () -> {T(["?"])}',
            f'%ar = "relax.reshape"(%a) {{shape = ["n", 1]}} : ({T(["?"])}) -> {u}',
            f'%c = "relax.constant"() {{value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>}} : () -> {T([4])}',
            f'%1 = "relax.add"(%x, %z) : ({x}, {u}) -> {u}', f'%2 = "relax.add"(%1, %o) : ({u}, {u}) -> {u}',
            f'%3 = "relax.multiply"(%2, %f) : ({u}, {u}) -> {u}', f'%4 = "relax.add"(%3, %ar) : ({u}, {u}) -> {u}',
            f'%5 = "relax.add"(%4, %c) : ({u}, {T([4])}) -> {u}']
    exe = relax_mlir.compile(program([("x", x), ("v", s)], body, ("%5", u)))
    check_many(exe, lambda n: [rand((n, 4)), np.array(3.0, np.float32)],
               lambda x, v: (x + 1) * v + np.arange(len(x), dtype=np.float32)[:, None] + np.array([1, 2, 3, 4], np.float32))


def test_match_cast_and_dataflow():
    x = T(["n", 8])
    u = T(["?", "?"])
    m = T(["k", 8])
    body = [f'%d = "relax_v.dataflow"() ({{\n    %e = "relax.exp"(%x) : ({x}) -> {u}\n    gpu.yield %e : {u}\n  }}) : () -> {u}',
            f'%c = "relax.match_cast"(%d) : ({u}) -> {m}',
            f'%r = "relax.add"(%c, %x) : ({m}, {x}) -> {m}']
    exe = relax_mlir.compile(program([("x", x)], body, ("%r", m)))
    check_many(exe, lambda n: [rand((n, 8))], lambda x: np.exp(x) + x)


@pytest.mark.parametrize("op", ["erf", "tanh", "exp"])
def test_transcendentals_over_their_whole_range(op):
    """The vectorizable f32 expansions (ops/kernel.py) on a dense grid past their clamps and on
    special values: within 4e-7 absolute (and relative, for exp) of float64, saturating to +-1 and
    keeping NaN."""
    import math

    src = program([("x", T(["n"]))], [f'%r = "relax.{op}"(%x) : ({T(["n"])}) -> {T(["n"])}'], ("%r", T(["n"])))
    exe = relax_mlir.compile(src)
    lim = 80.0 if op == "exp" else 12.0
    x = np.concatenate([np.linspace(-lim, lim, 400_001), [0.0, -0.0, 1e-30, -1e-30, 1e-8, np.inf, -np.inf]])
    x = x.astype(np.float32)
    got = exe(x).astype(np.float64)
    x64 = x.astype(np.float64)
    want = {"erf": np.vectorize(math.erf), "tanh": np.tanh, "exp": np.exp}[op](x64)
    if op == "exp":
        fin = x64 < 88
        np.testing.assert_allclose(got[fin], want[fin], rtol=4e-7, atol=1e-37)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=4e-7)
        assert got[-2] == 1.0 and got[-1] == -1.0
    nan = exe(np.array([np.nan], np.float32))
    assert np.isnan(nan[0])
