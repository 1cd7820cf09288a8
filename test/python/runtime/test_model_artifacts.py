"""Every test model (model_zoo.py: the JAX test models and the demo's MLP, transformer block and
KV-cache decoder) on every target, each compiled ONCE and exported as an artifact:

* cpu: the shared-library artifact runs in a fresh process that never imports mlir and matches
  jax.jit at each of the model's sizes;
* vulkan: every SPIR-V binary passes spirv-val; the artifact runs in a fresh process that never
  imports mlir (wgpu on lavapipe) and matches jax.jit at each size;
* cuda: every PTX module assembles with ptxas for sm_90; the artifact's host program runs at
  each size with a recording driver (no GPU here): every launch names an `.entry` with the
  packed parameter count and sizes and a grid CUDA accepts, and the results have jax.jit's
  shapes; then the CuPy driver runs it against a strict fake of CuPy (fake_cupy.py).
"""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import fake_cupy  # noqa: E402
import model_zoo as zoo  # noqa: E402
import toolchecks  # noqa: E402
from recording_driver import RecordingDriver, check_launches  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.runtime import load  # noqa: E402

NAMES = sorted(zoo.MODELS)

# Runs in a fresh process: numpy (and wgpu for vulkan) only. (A lavapipe device made in the test
# process would also share it with the CPU JIT of later tests.)
_RUN = textwrap.dedent("""
    import json, sys
    import numpy as np
    from relax_mlir.runtime import load
    art, ref = sys.argv[1], np.load(sys.argv[2])
    exe = load(art)
    report = []
    for n in json.loads(sys.argv[3]):
        args = [ref[f"n{n}_arg{i}"] for i in range(int(ref[f"n{n}_nargs"]))]
        got = exe(*args)
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        np.savez(f"{art}/got_{n}.npz", *got)
        report.append(n)
    print(json.dumps({"ran": report, "mlir": any(m == "mlir" or m.startswith("mlir.") for m in sys.modules)}))
""")


def _save_references(name, path):
    data = {}
    for n, (args, _) in zip(zoo.MODELS[name].sizes, zoo.references(name)):
        data[f"n{n}_nargs"] = np.int64(len(args))
        data.update({f"n{n}_arg{i}": a for i, a in enumerate(args)})
    np.savez(path, **data)


def _run_artifact_without_mlir(name, exe, tmp_path):
    """Export `exe`, run the artifact at each of the model's sizes in a fresh process, compare."""
    art = tmp_path / "artifact"
    exe.export(str(art))
    _save_references(name, tmp_path / "ref.npz")
    sizes = list(zoo.MODELS[name].sizes)
    r = subprocess.run([sys.executable, "-c", _RUN, str(art), str(tmp_path / "ref.npz"), json.dumps(sizes)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report == {"ran": sizes, "mlir": False}
    for n, (_, want) in zip(sizes, zoo.references(name)):
        got = np.load(art / f"got_{n}.npz")
        zoo.assert_matches(name, [got[f"arr_{i}"] for i in range(len(got.files))], want, n)


def _host_memory_ops_stay_on_the_host(program) -> None:
    """The host program loads and stores only host buffers (shape buffers of reshapes): a read of
    device memory would be a synchronizing download in the middle of the launches. The exception
    is the graph's loops and branches (while, switch), which sync at every iteration anyway: what
    they decide on (a load whose value, through index arithmetic, is a while condition, an if
    condition or a switch's case) and, inside them, what the iteration reads of its carried
    scalars (a scan's index, for the slice offsets of its step)."""
    host, ops, control, arith = set(), [], set(), {}

    def walk(x, looped=False):
        if isinstance(x, dict):
            op = x.get("op")
            if op == "alloc" and x.get("host"):
                host.add(x["out"])
            if op in ("load", "store") and not (op == "load" and looped):
                ops.append(x)
            if op in ("condition", "if"):
                control.add(x["cond"])
            if op == "switch":
                control.add(x["arg"])
            if op == "arith":
                arith[x["out"]] = x["in"]
            for v in x.values():
                walk(v, looped or op in ("while", "switch"))
        elif isinstance(x, list):
            for v in x:
                walk(v, looped)

    walk(program)
    work = list(control)
    while work:
        for i in arith.get(work.pop(), ()):
            if i not in control:
                control.add(i)
                work.append(i)
    for o in ops:
        if o["op"] == "load" and o["out"] in control:
            continue
        assert o["src" if o["op"] == "load" else "dst"] in host, f"host {o['op']} of device memory: {o}"


@pytest.mark.parametrize("name", NAMES)
def test_vulkan(name, tmp_path):
    exe = relax_mlir.compile(zoo.relax_text(name), target="vulkan")
    bins = exe.artifacts["spirv"]
    assert bins, "no SPIR-V kernels"
    _host_memory_ops_stay_on_the_host(exe.artifacts["hostprog"])
    if not toolchecks.spirv_val(bins, tmp_path, name):
        pytest.skip("spirv-val (Debian spirv-tools) is not installed")
    if not toolchecks.vulkan_adapter():
        pytest.skip("wgpu or a Vulkan adapter (lavapipe) is not available")
    _run_artifact_without_mlir(name, exe, tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_cpu(name, tmp_path):
    _run_artifact_without_mlir(name, relax_mlir.compile(zoo.relax_text(name)), tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_cuda(name, tmp_path, monkeypatch):
    if name == "control_flow":  # the graph's loops and branches: Vulkan and WebGPU only so far
        with pytest.raises(relax_mlir.CompileError, match=r"control flow .* is not supported on CUDA yet"):
            relax_mlir.compile(zoo.relax_text(name), target="cuda")
        return
    exe = relax_mlir.compile(zoo.relax_text(name), target="cuda")
    ptx = exe.ptx
    assert ptx and all(".entry" in text for text in ptx.values())
    _host_memory_ops_stay_on_the_host(exe.artifacts["hostprog"])
    assembled = toolchecks.ptxas(ptx, tmp_path, name)
    exe.export(str(tmp_path / "artifact"))
    drv = RecordingDriver()
    loaded = load(str(tmp_path / "artifact"), driver=drv)
    counts = []
    for n, (args, want) in zip(zoo.MODELS[name].sizes, zoo.references(name)):
        drv.launches.clear()
        got = zoo.as_list(loaded(*args))
        assert [g.shape for g in got] == [w.shape for w in want], f"{name} n={n}"
        assert [g.dtype for g in got] == [w.dtype for w in want], f"{name} n={n}"
        check_launches(drv, ptx)
        counts.append(len(drv.launches))
    assert len(set(counts)) == 1, f"{name}: the launch sequence changed with the size: {counts}"
    # The CuPy driver itself, against a strict fake of CuPy (no kernel runs): the same launches.
    fake_cupy.install(monkeypatch)
    with_cupy = load(str(tmp_path / "artifact"))
    for n, (args, want) in zip(zoo.MODELS[name].sizes, zoo.references(name)):
        fake_cupy.LAUNCHES.clear()
        got = zoo.as_list(with_cupy(*args))
        assert [g.shape for g in got] == [w.shape for w in want], f"{name} n={n}"
        assert len(fake_cupy.LAUNCHES) == counts[0]
    if not assembled:
        pytest.skip("ptxas is not installed: the PTX was not assembled")


_BARE = textwrap.dedent("""
    # What the GPU machine has: numpy and CuPy (here the strict fake), no MLIR, no LLVM, no BLAS
    # wheel, no wgpu, no JAX.
    import importlib.abc, json, sys
    BLOCKED = ("mlir", "scipy_openblas32", "scipy", "wgpu", "jax", "jaxlib", "hypothesis")

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is not on the GPU machine")

    sys.meta_path.insert(0, Block())
    sys.path.insert(0, sys.argv[3])
    import numpy as np
    import fake_cupy

    class Patch:
        def setitem(self, d, k, v):
            d[k] = v

    fake_cupy.install(Patch())
    from relax_mlir.runtime import load
    ref = np.load(sys.argv[2])
    exe = load(sys.argv[1])
    out = exe(*[ref[f"n{n}_arg{i}"] for n in [int(ref["n"])] for i in range(int(ref["nargs"]))])
    out = out if isinstance(out, (tuple, list)) else [out]
    print(json.dumps({"shapes": [list(o.shape) for o in out], "launches": len(fake_cupy.LAUNCHES)}))
""")


def test_cuda_artifact_needs_only_numpy_and_cupy(tmp_path):
    """The demo transformer's cuda artifact loads and runs its whole host program (through the
    CuPy driver, against the fake) in a process where MLIR, the BLAS wheel, wgpu and JAX cannot
    be imported: what the GPU machine of bench/gpu_check.sh provides."""
    name = "demo_transformer"
    exe = relax_mlir.compile(zoo.relax_text(name), target="cuda")
    exe.export(str(tmp_path / "artifact"))
    n = zoo.MODELS[name].sizes[1]
    args = zoo.MODELS[name].args(n)
    np.savez(tmp_path / "ref.npz", n=n, nargs=len(args), **{f"n{n}_arg{i}": a for i, a in enumerate(args)})
    helpers = str(pathlib.Path(__file__).parents[1])
    r = subprocess.run([sys.executable, "-c", _BARE, str(tmp_path / "artifact"), str(tmp_path / "ref.npz"), helpers],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["shapes"] == [[n, 64]] and report["launches"] > 10
