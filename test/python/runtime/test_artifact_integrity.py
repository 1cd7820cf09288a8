"""Artifact integrity: the manifest records each file's size and SHA-256, and `runtime.load`
checks them before it maps or reads anything. A truncated or edited `kernels.so` (which used to
fault inside the dynamic loader: SIGBUS/SIGSEGV) or kernel file raises ValueError naming the
file, in a fresh process that exits cleanly."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import relax_mlir

SRC = """
func.func @main(%x: !relax.tensor<["n", 4], f32>, %y: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %a = "relax.add"(%x, %y) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %e = "relax.exp"(%a) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %e : !relax.tensor<["n", 4], f32>
}
"""

_LOAD = """
import sys
import numpy as np
from relax_mlir.runtime import load
try:
    exe = load({path!r})
except ValueError as e:
    print("ValueError:", e)
    sys.exit(3)
x = np.ones((5, 4), np.float32)
assert np.allclose(exe(x, x), np.exp(2.0)), "wrong result"
print("ran")
"""


def _load_in_child(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(_LOAD.format(path=str(path)))],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def cpu_artifact(tmp_path_factory):
    path = tmp_path_factory.mktemp("cpu") / "art"
    relax_mlir.compile(SRC).export(str(path))
    return path


def _copy(src, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    return dst


def test_manifest_records_sizes_and_hashes(cpu_artifact):
    files = json.loads((cpu_artifact / "manifest.json").read_text())["files"]
    assert "kernels.so" in files
    for rel, rec in files.items():
        assert rec["size"] == (cpu_artifact / rel).stat().st_size
        assert len(rec["sha256"]) == 64
    r = _load_in_child(cpu_artifact)
    assert r.returncode == 0 and "ran" in r.stdout, r.stderr


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete"])
def test_damaged_kernels_so_is_refused(cpu_artifact, tmp_path, damage):
    art = _copy(cpu_artifact, tmp_path)
    lib = art / "kernels.so"
    data = bytearray(lib.read_bytes())
    if damage == "truncate":
        lib.write_bytes(bytes(data[: len(data) // 2]))
    elif damage == "flip":
        data[len(data) // 2] ^= 0xFF
        lib.write_bytes(bytes(data))
    else:
        lib.unlink()
    r = _load_in_child(art)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)   # not a signal (negative)
    assert "ValueError" in r.stdout and "kernels.so" in r.stdout


def test_manifest_without_records_or_escaping_path_is_refused(cpu_artifact, tmp_path):
    art = _copy(cpu_artifact, tmp_path)
    m = json.loads((art / "manifest.json").read_text())
    files = m.pop("files")
    (art / "manifest.json").write_text(json.dumps(m))
    r = _load_in_child(art)
    assert r.returncode == 3 and "records no file sizes" in r.stdout, r.stdout + r.stderr
    m["files"] = dict(files, **{"../x.so": files["kernels.so"]})
    (art / "manifest.json").write_text(json.dumps(m))
    r = _load_in_child(art)
    assert r.returncode == 3 and "outside the artifact" in r.stdout, r.stdout + r.stderr
    (art / "manifest.json").write_text('{"format": "relax-mlir-cpu-1", "entr')
    r = _load_in_child(art)
    assert r.returncode == 3 and "not valid JSON" in r.stdout, r.stdout + r.stderr


def test_a_malformed_manifest_is_a_value_error(cpu_artifact, tmp_path):
    """A manifest that parses but is not one export writes (fields missing, of the wrong type, an
    unknown main entry or symbol, another format's): a ValueError naming the artifact (was a
    KeyError / TypeError / AttributeError traceback)."""
    from relax_mlir.runtime import load

    edits = {"entries": lambda m: m.pop("entries"), "NoneType": lambda m: m.__setitem__("entries", None),
             "'main'": lambda m: m.pop("main"), "main entry 'zzz'": lambda m: m.__setitem__("main", "zzz"),
             "undefined symbol": lambda m: m["entries"][0].__setitem__("name", "zzz"),
             "'kernels'": lambda m: m.__setitem__("format", "relax-mlir-vulkan-1"),
             # a renamed symbol: the result dims' "n" is bound by nothing (was a KeyError at the
             # first call)
             "uses symbol n that no parameter binds": lambda m: [p.__setitem__("dims", ["q", 4])
                                                                 for p in m["entries"][0]["params"]],
             # the entry's shape relations (Signature.requires): [lhs, rhs, message] strings
             "'requires' must be a list": lambda m: m["entries"][0].__setitem__("requires", ["n <= 4"])}
    for i, (what, edit) in enumerate(edits.items()):
        art = tmp_path / f"a{i}"
        shutil.copytree(cpu_artifact, art)
        m = json.loads((art / "manifest.json").read_text())
        edit(m)
        (art / "manifest.json").write_text(json.dumps(m))
        with pytest.raises(ValueError, match="manifest.json is malformed") as e:
            load(str(art))
        assert what in str(e.value) and str(art) in str(e.value)


@pytest.mark.parametrize("target", ["vulkan", "cuda"])
def test_damaged_gpu_artifact_is_refused(tmp_path, target):
    exe = relax_mlir.compile(SRC, target=target)
    art = tmp_path / target
    exe.export(str(art))
    m = json.loads((art / "manifest.json").read_text())
    assert set(m["files"]) == {"host.json", *m["kernels"].values()}
    from relax_mlir.runtime import load

    load(str(art))  # intact: loads (the driver is created on the first call)
    kernel = art / next(iter(m["kernels"].values()))
    good = kernel.read_bytes()
    kernel.write_bytes(good[:-4])
    with pytest.raises(ValueError, match=kernel.name):
        load(str(art))
    kernel.write_bytes(good)
    host = art / "host.json"
    host.write_text(host.read_text().replace('"', "'", 1))
    with pytest.raises(ValueError, match="host.json"):
        load(str(art))


def test_an_artifact_for_a_cpu_this_machine_lacks_is_refused_at_load(cpu_artifact, tmp_path):
    """The manifest records the CPU the library was built for and the instruction-set flags it may
    use: a flag this CPU lacks, or a named CPU whose flags cannot be checked here, is a ValueError
    at load (was SIGILL at the first call: probe s22/rt F1). A native build and a build for a
    level this machine has load and run."""
    from relax_mlir.runtime import load, machine

    built = json.loads((cpu_artifact / "manifest.json").read_text())["built_for"]
    assert built["cpu"] == "native" and built["isa"] == machine.isa_features()
    assert _load_in_child(cpu_artifact).stdout.strip() == "ran"

    art = _copy(cpu_artifact, tmp_path)
    m = json.loads((art / "manifest.json").read_text())
    m["built_for"]["isa"] = m["built_for"]["isa"] + ["avx_from_the_future"]
    (art / "manifest.json").write_text(json.dumps(m))
    if machine.isa_features():
        with pytest.raises(ValueError, match="built for a CPU with avx_from_the_future, which this CPU lacks"):
            load(str(art))

    other = tmp_path / "other"
    relax_mlir.compile(SRC).export(str(other), cpu="diamondrapids")  # APX / AVX10.2
    r = _load_in_child(other)
    assert r.returncode == 3 and "built for CPU 'diamondrapids'" in r.stdout, (r.returncode, r.stdout, r.stderr)
