"""CPU artifacts: exported, loaded in a fresh Python process that never imports mlir."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np

import relax_mlir

SRC = """
func.func @main(%x: !relax.tensor<["n", 16], f32>, %w: !relax.tensor<[16, 8], f32>, %b: !relax.tensor<[8], f32>) -> !relax.tensor<["?", "?"], f32> {
  %m = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 16], f32>, !relax.tensor<[16, 8], f32>) -> !relax.tensor<["?", "?"], f32>
  %a = "relax.add"(%m, %b) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<[8], f32>) -> !relax.tensor<["?", "?"], f32>
  %s = "relax.softmax"(%a) {axis = -1} : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  return %s : !relax.tensor<["?", "?"], f32>
}
"""


def test_export_and_load_without_mlir(tmp_path):
    exe = relax_mlir.compile(SRC, optimize=False)
    art = tmp_path / "mlp"
    exe.export(str(art))
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "b.npy", b)
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        from relax_mlir.runtime import load
        exe = load({str(art)!r})
        w, b = np.load({str(tmp_path / 'w.npy')!r}), np.load({str(tmp_path / 'b.npy')!r})
        for n in (1, 13, 300):
            x = np.random.default_rng(n).standard_normal((n, 16)).astype(np.float32)
            a = x @ w + b
            e = np.exp(a - a.max(-1, keepdims=True))
            np.testing.assert_allclose(exe(x, w, b), e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-5)
        try:
            exe(np.zeros((3, 15), np.float32), w, b)
            raise SystemExit("no error")
        except ValueError as err:
            assert "dim 1 must be 16" in str(err), err
        assert not any(m == "mlir" or m.startswith("mlir.") for m in sys.modules), "mlir was imported"
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_artifact_needs_no_mlir_library_and_converts_like_the_jit(tmp_path):
    """f32/f64 -> bf16 conversions are library calls LLVM emits (`__truncsfbf2`, `__truncdfbf2`);
    the artifact carries its own (backend/cpu_artifact.py SUPPORT) instead of MLIR's libraries,
    which need libMLIR and libLLVM, and rounds bit for bit as the JIT does."""
    import json

    import jax
    import jax.numpy as jnp
    import ml_dtypes

    from relax_mlir.frontend.jax import from_jax

    n = jax.export.symbolic_shape("n")[0]
    with jax.enable_x64(True):
        exe = relax_mlir.compile(from_jax(lambda x, y: (x.astype(jnp.bfloat16), y.astype(jnp.bfloat16)),
                                          jax.ShapeDtypeStruct((n,), jnp.float32), jax.ShapeDtypeStruct((n,), jnp.float64)))
    art = tmp_path / "bf16"
    exe.export(str(art))
    assert not any("mlir" in f for f in json.loads((art / "manifest.json").read_text())["files"])
    rng = np.random.default_rng(3)
    edge = np.array([1 + 2**-8 + 2**-40, -(1 + 2**-8), 1 + 3 * 2**-8, 3.4e38, 3.3961e38, 1e300, -1e300, 1e-40,
                     2**-134, np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0], np.float64)
    for m, y in ((1, edge[:1]), (15, edge), (997, rng.standard_normal(997) * 10.0 ** rng.integers(-45, 45, 997))):
        x = y.astype(np.float32)
        np.save(tmp_path / f"x{m}.npy", x)
        np.save(tmp_path / f"y{m}.npy", y)
        for i, g in enumerate(exe(x, y)):
            np.save(tmp_path / f"jit{m}_{i}.npy", g.view(np.uint16))
    script = textwrap.dedent(f"""
        import sys, numpy as np
        from relax_mlir.runtime import load
        exe = load({str(art)!r})
        for m in (1, 15, 997):
            x, y = np.load({str(tmp_path)!r} + f"/x{{m}}.npy"), np.load({str(tmp_path)!r} + f"/y{{m}}.npy")
            for i, g in enumerate(exe(x, y)):
                np.testing.assert_array_equal(g.view(np.uint16), np.load({str(tmp_path)!r} + f"/jit{{m}}_{{i}}.npy"))
        assert not any(m == "mlir" or m.startswith("mlir.") for m in sys.modules)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    # the JIT itself: f32 -> bf16 rounds to nearest even, as ml_dtypes does
    x = (rng.standard_normal(4096) * 10.0 ** rng.integers(-30, 30, 4096)).astype(np.float32)
    np.testing.assert_array_equal(exe(x, x.astype(np.float64))[0].view(np.uint16),
                                  x.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_artifact_memref_copy_support(tmp_path):
    """The artifact's own `memrefCopy` (MLIR's strided-copy ABI) copies strided views of every
    rank, negative strides and empty ones included."""
    import ctypes
    import shutil

    from relax_mlir.backend.cpu_artifact import _support_source

    src, lib = tmp_path / "s.c", tmp_path / "libs.so"
    src.write_text(_support_source(["memrefCopy"]))
    subprocess.run([shutil.which("cc") or "cc", "-O2", "-shared", "-fPIC", str(src), "-o", str(lib), "-lm"], check=True)
    copy = ctypes.CDLL(str(lib)).memrefCopy

    class Unranked(ctypes.Structure):
        _fields_ = [("rank", ctypes.c_int64), ("desc", ctypes.c_void_p)]

    def unranked(a: np.ndarray, keep: list) -> Unranked:
        base = a.base if a.base is not None else a
        off = (a.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // a.itemsize
        words = [base.ctypes.data, base.ctypes.data, off, *a.shape, *(s // a.itemsize for s in a.strides)]
        desc = (ctypes.c_int64 * len(words))(*words)
        keep.append(desc)
        return Unranked(a.ndim, ctypes.cast(desc, ctypes.c_void_p))

    rng = np.random.default_rng(0)
    full = rng.standard_normal((6, 7, 8)).astype(np.float32)
    for view in (full[1, 2, 3:4].reshape(()), full[:, 1, ::-2], full[1:5, ::3, 2:7:2], full[::-1, :, ::-1],
                 full[:, 0:0, :], full[2]):
        assert view.base is full or view.base is not None
        dst = np.full(view.shape, -1.0, np.float32)
        keep: list = []
        s, d = unranked(view, keep), unranked(dst, keep)
        copy(ctypes.c_int64(4), ctypes.byref(s), ctypes.byref(d))
        np.testing.assert_array_equal(dst, view)


_SCALE = """
func.func @main(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %c = "relax.constant"() {value = dense<SCALE> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %y = "relax.multiply"(%x, %c) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[], f32>) -> !relax.tensor<["n", 4], f32>
  return %y : !relax.tensor<["n", 4], f32>
}
"""

_SUM = """
func.func @main(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n"], f32> {
  %y = "relax.sum"(%x) {axes = [1]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n"], f32>
  return %y : !relax.tensor<["n"], f32>
}
"""


def test_an_artifact_replaced_at_the_same_path_loads_its_own_code(tmp_path):
    """The dynamic loader hands back the library it mapped for a path name: an artifact deleted
    and exported again at the same path (or exported over it) in one process ran the first one's
    code under the new signature (2.0 for 100.0; with another result shape, writes past the
    output). load() maps a copy named by the library's hash."""
    import shutil

    from relax_mlir.runtime import load

    art = str(tmp_path / "art")
    x = np.ones((3, 4), np.float32)
    relax_mlir.compile(_SCALE.replace("SCALE", "2.0")).export(art)
    a = load(art)
    assert a(x)[0, 0] == 2.0
    shutil.rmtree(art)
    relax_mlir.compile(_SCALE.replace("SCALE", "100.0")).export(art)
    b = load(art)
    assert b(x)[0, 0] == 100.0 and a(x)[0, 0] == 2.0  # the first executable keeps its own code
    relax_mlir.compile(_SUM).export(art)  # over it, another result shape
    c = load(art)
    np.testing.assert_array_equal(c(x), np.full(3, 4.0, np.float32))
    assert load(art)(x).shape == (3,) and b(x)[0, 0] == 100.0


def test_f16_products_export(tmp_path):
    """An f16 product (its operands widened to f32 by the compiler, `relax.astype internal`)
    exports and loads: the widenings' internal `contract` flag reached LLVM IR as an arith
    attribute that the standalone mlir-translate could not parse, so every f16 model failed to
    export (`Generator.save`, out-of-process compiles; helper probe)."""
    import pytest

    jax = pytest.importorskip("jax")
    from relax_mlir.frontend.jax import from_jax
    from relax_mlir.runtime import load

    (n,) = jax.export.symbolic_shape("n")
    f16 = jax.numpy.float16
    fn = lambda a, b: jax.numpy.tanh(a @ b)  # noqa: E731
    exe = relax_mlir.compile(from_jax(fn, jax.ShapeDtypeStruct((n, 16), f16), jax.ShapeDtypeStruct((16, 8), f16)))
    exe.export(str(tmp_path / "art"))
    again = load(str(tmp_path / "art"))
    rng = np.random.default_rng(0)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    for m in (1, 7, 40):
        a = rng.standard_normal((m, 16)).astype(np.float16)
        np.testing.assert_array_equal(again(a, b), exe(a, b))
        np.testing.assert_allclose(again(a, b).astype(np.float32), np.asarray(jax.jit(fn)(a, b)).astype(np.float32),
                                   rtol=4e-3, atol=4e-3)
