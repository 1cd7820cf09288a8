"""compile() raises CompileError (located, naming what is wrong) for what a target cannot
compile, and never defers an error to the first call: a public function on builtin tensors, and
on Vulkan f64 and float power (refused); erf and gelu compile and run on Vulkan (probed in a
child process: a lavapipe device breaks later CPU-JIT calls in the same process)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import relax_mlir
import toolchecks
from relax_mlir.backend.cpu import LoweringError


def T(dims, dt="f32"):
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + f"], {dt}>"


def unary(op, dt="f32", rdt=None):
    t, r = T(["n", 4], dt), T(["n", 4], rdt or dt)
    return f'func.func @main(%a: {t}) -> {r} {{\n  %0 = "relax.{op}"(%a) : ({t}) -> {r}\n  return %0 : {r}\n}}'


def binary(op, dt):
    t = T(["n", 4], dt)
    return (f'func.func @main(%a: {t}, %b: {t}) -> {t} {{\n  %0 = "relax.{op}"(%a, %b) : ({t}, {t}) -> {t}\n'
            f'  return %0 : {t}\n}}')


def test_lowering_error_is_a_compile_error():
    assert issubclass(LoweringError, relax_mlir.CompileError)


@pytest.mark.parametrize("target", ["cpu", "vulkan"])
def test_public_function_on_builtin_tensors(target):
    src = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}"
    with pytest.raises(relax_mlir.CompileError) as info:
        relax_mlir.compile(src, target=target)
    msg = str(info.value)
    assert "<string>:1:1: error" in msg and "@f" in msg and "argument #0 has type tensor<4xf32>" in msg


def test_private_kernel_function_is_not_an_entry():
    src = ("func.func private @k(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n"
           + unary("relu"))
    relax_mlir.compile(src)  # compiles: @k is not an entry point


@pytest.mark.parametrize("src, what", [
    (unary("exp", "f64"), "f64 is not supported on Vulkan"),
])
def test_vulkan_refuses_at_compile_time(src, what):
    with pytest.raises(relax_mlir.CompileError, match=what):
        relax_mlir.compile(src, target="vulkan")


def test_vulkan_float_power_compiles():
    """f32 power was refused (MLIR's SPIR-V lowering of powf puts a NaN literal in the shader, which
    naga rejects); the kernels expand it (numerics: test_vulkan_exact.py)."""
    exe = relax_mlir.compile(binary("power", "f32"), target="vulkan")
    assert exe.artifacts["spirv"]


@pytest.mark.parametrize("op", ["erf", "gelu"])
def test_vulkan_erf_gelu_compile(op):
    exe = relax_mlir.compile(unary(op), target="vulkan")
    assert exe.artifacts["spirv"]


def test_vulkan_erf_gelu_run():
    if not toolchecks.vulkan_adapter():
        pytest.skip("no Vulkan adapter")
    script = textwrap.dedent(f"""
        import math
        import numpy as np
        import relax_mlir
        erf = relax_mlir.compile({unary("erf")!r}, target="vulkan")
        gelu = relax_mlir.compile({unary("gelu")!r}, target="vulkan")
        verf = np.vectorize(math.erf)
        for n in (1, 13, 300):
            x = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32) * 3
            np.testing.assert_allclose(erf(x), verf(x), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(gelu(x), 0.5 * x * (1 + verf(x / math.sqrt(2))), rtol=1e-5, atol=1e-6)
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def test_compile_takes_a_jax_export_and_names_what_it_cannot_take():
    """compile(exported) of a `jax.export.Exported` imports it first (was an AttributeError:
    "'Exported' object has no attribute 'context'"); anything but a module, its text or an
    Exported is a CompileError naming what it got."""
    import numpy as np

    jax = pytest.importorskip("jax")
    (n,) = jax.export.symbolic_shape("n")
    fn = lambda x: jax.numpy.sin(x) * 2  # noqa: E731
    exe = relax_mlir.compile(jax.export.export(jax.jit(fn))(jax.ShapeDtypeStruct((n,), jax.numpy.float32)))
    for m in (1, 7, 40):
        x = np.linspace(-3, 3, m, dtype=np.float32)
        np.testing.assert_allclose(exe(x), np.asarray(jax.jit(fn)(x)), rtol=1e-6, atol=1e-7)
    for bad in (None, 3, [1], fn):
        with pytest.raises(relax_mlir.CompileError, match=f"takes a relax module .* got {type(bad).__name__}"):
            relax_mlir.compile(bad)
