"""GPU artifacts: vulkan and cuda executables exported as manifest + host program + kernels, and
run by `relax_mlir.runtime.load` without MLIR (vulkan: wgpu in a fresh process; cuda: a recording
driver, since CI has no CUDA device)."""
from __future__ import annotations

import json
import math
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import relax_mlir
import toolchecks
from recording_driver import RecordingDriver, check_launches
from relax_mlir.runtime import hostprog, load

ELEMENTWISE = '''
func.func @main(%x: !relax.tensor<["n", 8], f32>, %y: !relax.tensor<["n", 8], f32>, %b: !relax.tensor<[8], f32>) -> !relax.tensor<["n", 8], f32> {
  %m = "relax.multiply"(%x, %y) : (!relax.tensor<["n", 8], f32>, !relax.tensor<["n", 8], f32>) -> !relax.tensor<["n", 8], f32>
  %a = "relax.add"(%m, %b) : (!relax.tensor<["n", 8], f32>, !relax.tensor<[8], f32>) -> !relax.tensor<["n", 8], f32>
  %e = "relax.exp"(%a) : (!relax.tensor<["n", 8], f32>) -> !relax.tensor<["n", 8], f32>
  return %e : !relax.tensor<["n", 8], f32>
}
'''
MATMUL = '''
func.func @main(%x: !relax.tensor<["n", 4], f32>, %w: !relax.tensor<[4, "m"], f32>) -> !relax.tensor<["n", "m"], f32> {
  %m = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[4, "m"], f32>) -> !relax.tensor<["n", "m"], f32>
  return %m : !relax.tensor<["n", "m"], f32>
}
'''
REDUCTION = '''
func.func @main(%x: !relax.tensor<["n", "k"], f32>) -> !relax.tensor<["n"], f32> {
  %s = "relax.sum"(%x) {axes = [1], keepdims = false} : (!relax.tensor<["n", "k"], f32>) -> !relax.tensor<["n"], f32>
  return %s : !relax.tensor<["n"], f32>
}
'''
# examples/demo.py's MLP, relu(x @ w1) @ w2 with d = 64, h = 128, written in relax directly.
MLP = '''
func.func @main(%x: !relax.tensor<["b", 64], f32>, %w1: !relax.tensor<[64, 128], f32>, %w2: !relax.tensor<[128, 64], f32>) -> !relax.tensor<["?", "?"], f32> {
  %h = "relax.matmul"(%x, %w1) : (!relax.tensor<["b", 64], f32>, !relax.tensor<[64, 128], f32>) -> !relax.tensor<["?", "?"], f32>
  %r = "relax.relu"(%h) : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %y = "relax.matmul"(%r, %w2) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<[128, 64], f32>) -> !relax.tensor<["?", "?"], f32>
  return %y : !relax.tensor<["?", "?"], f32>
}
'''
MODELS = {"elementwise": ELEMENTWISE, "matmul": MATMUL, "reduction": REDUCTION, "mlp": MLP}

# Inputs and numpy references, shared by this process and the fresh one (numpy only).
REFERENCE = '''
import numpy as np

def case(name, n):
    rng = np.random.default_rng(n)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    if name == "elementwise":
        x, y, b = f(n, 8), f(n, 8), f(8)
        return (x, y, b), np.exp(x * y + b)
    if name == "matmul":
        x, w = f(n, 4), f(4, n + 5)
        return (x, w), x @ w
    if name == "reduction":
        x = f(n, n + 2)
        return (x,), x.sum(axis=1)
    x, w1, w2 = f(n, 64), f(64, 128) * 0.1, f(128, 64) * 0.1
    return (x, w1, w2), np.maximum(x @ w1, 0) @ w2
'''
_ref = {}
exec(REFERENCE, _ref)
case = _ref["case"]
SHAPES = (1, 13, 257)


# ----------------------------------------------------------------------------------------------
# vulkan: export here, load and run in a fresh process without MLIR
# ----------------------------------------------------------------------------------------------


@pytest.mark.skipif(not toolchecks.vulkan_adapter(), reason="wgpu or a Vulkan adapter (lavapipe) is not available")
def test_vulkan_artifacts_run_without_mlir(tmp_path):
    for name, src in MODELS.items():
        exe = relax_mlir.compile(src, target="vulkan")  # lowering needs no adapter
        exe.export(str(tmp_path / name))
        manifest = json.loads((tmp_path / name / "manifest.json").read_text())
        assert manifest["format"] == "relax-mlir-vulkan-1"
        for rel in manifest["kernels"].values():
            assert (tmp_path / name / rel).read_bytes()[:4] == b"\x03\x02\x23\x07"  # SPIR-V magic
    script = REFERENCE + textwrap.dedent(f"""
        import sys
        from relax_mlir.runtime import load
        for name in {sorted(MODELS)!r}:
            exe = load({str(tmp_path)!r} + "/" + name)
            for n in {SHAPES!r}:
                args, want = case(name, n)
                np.testing.assert_allclose(exe(*args), want, rtol=1e-4, atol=1e-4, err_msg=f"{{name}} n={{n}}")
        exe = load({str(tmp_path)!r} + "/elementwise")
        x = np.zeros((3, 8), np.float32)
        try:
            exe(x, np.zeros((4, 8), np.float32), np.zeros(8, np.float32))
            raise SystemExit("no error")
        except ValueError as err:
            assert "dim 0 must be n" in str(err) and "argument #1" in str(err), err
        assert not any(m == "mlir" or m.startswith("mlir.") for m in sys.modules), "mlir was imported"
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.strip().endswith("ok")


# ----------------------------------------------------------------------------------------------
# cuda: export, load with a recording driver (no device), check what would be launched
# ----------------------------------------------------------------------------------------------


def _export_cuda(src, path):
    exe = relax_mlir.compile(src, target="cuda")
    assert isinstance(exe, relax_mlir.CudaModule) and exe.ptx
    exe.export(str(path))
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["format"] == "relax-mlir-cuda-1"
    assert manifest["entries"][0]["params"][0]["dims"][0] in ("n", "b", "s")  # symbolic, as on the CPU
    ptx = {m: (path / rel).read_text() for m, rel in manifest["kernels"].items()}
    assert ptx == exe.ptx
    return exe, ptx


@pytest.mark.parametrize("name", ["elementwise", "matmul", "reduction", "mlp"])
def test_cuda_artifact_launch_sequence(name, tmp_path):
    _, ptx = _export_cuda(MODELS[name], tmp_path / name)
    drv = RecordingDriver()
    exe = load(str(tmp_path / name), driver=drv)
    for n in SHAPES:
        drv.launches.clear()
        args, _ = case(name, n)
        out = exe(*args)
        assert out.shape == case(name, n)[1].shape
        check_launches(drv, ptx)
        for ln in drv.launches:
            (gx, gy, gz), (bx, by, bz) = ln["grid"], ln["block"]
            tile = 64  # GPUOptions.matmul_tile: a 16x16 block computes a 64x64 output tile
            if name == "reduction":  # the init over [n] rows, then a block of threads per row (by rows a block)
                assert (gx, gy, gz) in ((math.ceil(n / bx), 1, 1), (min(math.ceil(n / by), 65535), 1, 1)), ln
            elif name == "matmul":  # the zero fill over [n, n + 5], then shared-memory tiles
                assert (gx, gy, gz) in ((math.ceil((n + 5) / bx), math.ceil(n / by), 1),
                                        (math.ceil((n + 5) / tile), math.ceil(n / tile), 1)), ln
            elif name == "elementwise":  # 2-D over [n, 8]
                assert (gx, gy, gz) == (math.ceil(8 / bx), math.ceil(n / by), 1), ln
            else:  # mlp: tiled matmuls [b, 128] / [b, 64] and elementwise kernels over them
                assert (gy == math.ceil(n / tile) and gx in (math.ceil(128 / tile), math.ceil(64 / tile))) or \
                    (gy == math.ceil(n / by) and gx in (math.ceil(128 / bx), math.ceil(64 / bx))), ln
            # memref descriptors carry the run-time sizes: n appears among the parameters
            assert n in [int(p) for p in ln["params"]], ln


def test_cuda_wrong_shape_raises_before_any_launch(tmp_path):
    _export_cuda(ELEMENTWISE, tmp_path / "e")
    drv = RecordingDriver()
    exe = load(str(tmp_path / "e"), driver=drv)
    x = np.zeros((3, 8), np.float32)
    with pytest.raises(ValueError, match=r"@main: argument #1 has shape \(4, 8\), but dim 0 must be n "
                                         r"\(n = 3 from argument #0 dim 0\)"):
        exe(x, np.zeros((4, 8), np.float32), np.zeros(8, np.float32))
    with pytest.raises(ValueError, match=r"argument #2 .* dim 0 must be 8"):
        exe(x, x, np.zeros(7, np.float32))
    assert drv.allocs == [] and drv.launches == [] and drv.uploads == 0


def test_cuda_without_cupy_raises_after_shape_checks():
    exe = relax_mlir.compile(REDUCTION, target="cuda")
    with pytest.raises(ValueError, match="rank"):
        exe(np.zeros(3, np.float32))
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed: the driver would run")
    except ImportError:
        pass
    with pytest.raises(RuntimeError, match="needs a CUDA device and CuPy"):
        exe(np.zeros((3, 4), np.float32))


def test_cuda_transformer_block_host_program(tmp_path):
    """examples/demo.py's transformer block: globals, reshapes through host shape buffers,
    temporaries and their deallocation, 29 launches, all run by the host program."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from relax_mlir.frontend.jax import from_jax

    sys.path.insert(0, str(pathlib.Path(__file__).parents[3] / "examples"))
    d, h = 64, 128

    from models import transformer_block as block

    (s,) = jax.export.symbolic_shape("s")
    S = jax.ShapeDtypeStruct
    f = jnp.float32
    text = from_jax(block, S((s, d), f), S((d,), f), S((d, d), f), S((d, d), f), S((d, d), f), S((d, h), f),
                    S((h, d), f))
    _, ptx = _export_cuda(text, tmp_path / "block")
    program = json.loads((tmp_path / "block" / "host.json").read_text())
    ops = json.dumps(program)
    assert '"op": "reshape"' in ops and '"op": "global"' in ops and '"op": "free"' in ops
    drv = RecordingDriver()
    exe = load(str(tmp_path / "block"), driver=drv)
    ws = [np.zeros(sh, np.float32) for sh in ((d,), (d, d), (d, d), (d, d), (d, h), (h, d))]
    counts = []
    for n in (1, 31):
        drv.launches.clear()
        exe(np.zeros((n, d), np.float32), *ws)
        check_launches(drv, ptx)
        counts.append(len(drv.launches))
        shapes = [sh for ln in drv.launches for sh in ln["shapes"] if sh is not None]
        assert (n, n) in shapes  # the attention scores
    assert counts[0] == counts[1]
    assert hostprog.FORMAT == program["format"]


@pytest.mark.skipif(not toolchecks.vulkan_adapter(), reason="wgpu or a Vulkan adapter (lavapipe) is not available")
def test_vulkan_transformer_block_runs_without_mlir(tmp_path):
    """examples/demo.py's transformer block on Vulkan (lavapipe), from its artifact in a fresh
    process without MLIR, against jax.jit computed here, at seq 1, 13 and 130 from one compile.
    (It needed the scalar constants folded into its kernels: the gelu kernel had taken 36 storage
    buffers, over the adapter's 32.)"""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from relax_mlir.frontend.jax import from_jax

    sys.path.insert(0, str(pathlib.Path(__file__).parents[3] / "examples"))
    from models import transformer_block as block

    d, h = 64, 128
    (s,) = jax.export.symbolic_shape("s")
    S, f = jax.ShapeDtypeStruct, jnp.float32
    text = from_jax(block, S((s, d), f), S((d,), f), S((d, d), f), S((d, d), f), S((d, d), f), S((d, h), f),
                    S((h, d), f))
    relax_mlir.compile(text, target="vulkan").export(str(tmp_path / "block"))
    rng = np.random.default_rng(0)
    ws = [np.ones(d, np.float32)] + [rng.standard_normal(sh, dtype=np.float32) * 0.1
                                     for sh in ((d, d), (d, d), (d, d), (d, h), (h, d))]
    data = {}
    for n in (1, 13, 130):
        x = rng.standard_normal((n, d), dtype=np.float32)
        data[f"x{n}"], data[f"y{n}"] = x, np.asarray(jax.jit(block)(x, *ws))
    np.savez(tmp_path / "ref.npz", *ws, **data)
    script = textwrap.dedent(f"""
        import sys, numpy as np
        from relax_mlir.runtime import load
        ref = np.load({str(tmp_path / "ref.npz")!r})
        ws = [ref[f"arr_{{i}}"] for i in range(6)]
        exe = load({str(tmp_path / "block")!r})
        for n in (1, 13, 130):
            np.testing.assert_allclose(exe(ref[f"x{{n}}"], *ws), ref[f"y{{n}}"], rtol=1e-4, atol=1e-4, err_msg=f"n={{n}}")
        assert not any(m == "mlir" or m.startswith("mlir.") for m in sys.modules), "mlir was imported"
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.strip().endswith("ok")
