"""A compiled LLM saved as a package (`Generator.save`) and loaded in a fresh process
(`relax_mlir.llm.load`) generates the same tokens as jax, and the same seeded samples as the
in-process Generator, without importing jax, transformers or MLIR's Python bindings; damaged
packages, packages for another target or a newer format, and cache overflow are ValueErrors."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import relax_mlir  # noqa: F401

os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

jax = pytest.importorskip("jax")
transformers = pytest.importorskip("transformers")

from relax_mlir.llm import Generator, from_hf_flax, load  # noqa: E402
from relax_mlir.llm import package  # noqa: E402

MAX_CONTEXT = 96
PROMPTS = [[5], [1, 2, 3, 4, 5, 6, 7], [(7 * i + 3) % 96 for i in range(50)]]  # lengths 1, 7, 50
NEW = 24
SAMPLING = dict(sampling="sample", top_k=20, top_p=0.95, temperature=0.9, seed=7)

# What the serving process runs: load, generate greedy and sampled, report the modules it imported.
CHILD = r"""
import json, sys
from relax_mlir.llm import load
gen = load(sys.argv[1])
greedy = gen.generate(json.loads(sys.argv[2]), int(sys.argv[3]))
sampled = gen.generate(json.loads(sys.argv[2]), int(sys.argv[3]), **json.loads(sys.argv[4]))
try:
    gen.generate([[1] * 90], 10)
    overflow = None
except ValueError as e:
    overflow = str(e)
mods = sorted({m.split(".")[0] for m in sys.modules} & {"jax", "jaxlib", "mlir", "transformers", "flax"})
# shared libraries mapped: none of MLIR's or LLVM's (an artifact finds its dependencies from its own folder)
# (a file name, "(deleted)" dropped: the runtime maps its private copy of each library, then unlinks it)
files = {l.split(None, 5)[5].strip().removesuffix(" (deleted)").rsplit("/", 1)[-1]
         for l in open("/proc/self/maps") if len(l.split(None, 5)) == 6}
native = sorted(f for f in files if ".so" in f and any(k in f for k in ("MLIR", "LLVM", "mlir", "xla", "jaxlib")))
threaded = [getattr(e[e.main]._native, "threaded", None) for e in (gen.prefill_exe, gen.decode_exe)]
print(json.dumps({"greedy": greedy, "sampled": sampled, "overflow": overflow, "modules": mods,
                  "threaded": threaded, "eos": gen.eos_token_id, "native": native}))
"""


def _child(path, prompts=PROMPTS, new=NEW):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", CHILD, path, json.dumps(prompts), str(new), json.dumps(SAMPLING)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    from transformers import FlaxLlamaForCausalLM, LlamaConfig

    cfg = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    lm = from_hf_flax(FlaxLlamaForCausalLM(cfg, seed=0))
    gen = Generator(lm, MAX_CONTEXT, cache_chunk=16, options={"num_threads": 2})
    path = str(tmp_path_factory.mktemp("pkg") / "llama")
    gen.save(path, eos_token_id=95)
    ref = Generator(lm, MAX_CONTEXT, target="jax", cache_chunk=16)
    return gen, ref, path


def test_loaded_package_generates_without_the_compiler(saved):
    gen, ref, path = saved
    got = _child(path)
    assert got["modules"] == [], got["modules"]  # no jax, transformers, flax or MLIR in the serving process
    assert got["native"] == [], got["native"]  # nor their shared libraries
    assert got["greedy"] == ref.generate(PROMPTS, NEW)
    assert got["sampled"] == gen.generate(PROMPTS, NEW, **SAMPLING)
    assert "KV cache overflow" in got["overflow"]
    assert got["eos"] == 95
    # the compile used two threads and the weights reach the threshold: both entries run the
    # artifact's multi-threaded build
    assert got["threaded"] == [True, True]
    index = json.load(open(os.path.join(path, package.INDEX)))
    for name in package.ENTRIES:
        manifest = json.load(open(os.path.join(path, name, "manifest.json")))
        assert manifest["threaded"]["library"] in manifest["files"]
    assert len(index["weights"]) == len(gen.lm.weights)
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o777 & ~umask  # not the temporary directory's 0700


def test_loaded_in_process_maps_the_weights(saved):
    gen, _, path = saved
    loaded = load(path)
    for w, orig in zip(loaded.lm.weights, gen.lm.weights):
        assert type(w) is np.ndarray and not w.flags.writeable and w.ctypes.data % 64 == 0
        assert isinstance(w.base, np.memmap) or isinstance(getattr(w.base, "base", None), np.memmap)
        np.testing.assert_array_equal(w, orig)
    assert loaded.generate(PROMPTS, 8) == gen.generate(PROMPTS, 8)
    # overflow is refused before native code runs (the decode step is never called)
    calls = []
    for step in ("prefill_step", "decode_step"):
        real = getattr(loaded, step)
        setattr(loaded, step, (lambda real, step: lambda *a: calls.append(step) or real(*a))(real, step))
    with pytest.raises(ValueError, match="KV cache overflow"):
        loaded.generate([[1] * 90], 10)
    assert calls == []
    loaded.generate([[1] * 87], 10)  # 96 positions: fits
    assert calls == ["prefill_step"] + ["decode_step"] * 9


def test_threaded_build_runs_and_one_thread_on_request(saved):
    """Every call on the multi-threaded build (threshold 1 element) gives the in-process tokens,
    and its library starts its own pool; RELAX_MLIR_NUM_THREADS=1 at load keeps to one thread."""
    from relax_mlir import knobs

    gen, _, path = saved
    want = gen.generate(PROMPTS, 8, **SAMPLING)
    with knobs.overridden(RELAX_MLIR_PARALLEL_MIN_ELEMENTS="1"):
        threaded = load(path, verify=False)
    chosen = []
    for exe in (threaded.prefill_exe, threaded.decode_exe):
        native = exe[exe.main]._native
        native.function = (lambda f, n: lambda k: chosen.append((n, f(k) is n.fn_threaded)) or f(k))(
            native.function, native)
    assert threaded.generate(PROMPTS, 8, **SAMPLING) == want
    assert len(chosen) == 8 and all(t for _, t in chosen)  # one prefill, 7 decode steps: all threaded
    # the artifact's multi-threaded library carries its own pool (relax_rt's async runtime): with
    # two threads it starts them (whether a loop splits into tasks depends on its blocks and on
    # the machine's load, which the back-off watches: 0 tasks in one CI run under load)
    lib = threaded.prefill_exe._keepalive[1]
    lib.relax_rt_configure(2, -1, -1, -1, 1)
    assert lib.relax_rt_start() >= 2
    with knobs.overridden(RELAX_MLIR_NUM_THREADS="1"):
        one = load(path, verify=False)
    assert [e[e.main]._native.threaded for e in (one.prefill_exe, one.decode_exe)] == [False, False]
    assert one.generate(PROMPTS, 8, **SAMPLING) == want


def _copy(path, tmp_path, name="copy"):
    dst = str(tmp_path / name)
    shutil.copytree(path, dst)
    return dst


@pytest.mark.parametrize("damage", ["missing_weight", "truncated_weight", "modified_weight", "modified_library",
                                    "missing_manifest", "truncated_index"])
def test_damaged_package_names_the_file(saved, tmp_path, damage):
    _, _, path = saved
    p = _copy(path, tmp_path)
    weight = os.path.join(p, "weights", "0003.npy")
    if damage == "missing_weight":
        os.remove(weight)
        want = r"weights/0003\.npy is missing"
    elif damage == "truncated_weight":
        with open(weight, "r+b") as f:
            f.truncate(os.path.getsize(weight) - 4)
        want = r"weights/0003\.npy has \d+ bytes"
    elif damage == "modified_weight":
        with open(weight, "r+b") as f:
            f.seek(-4, 2)
            f.write(b"\x00\x00\xc0\x7f")
        want = r"weights/0003\.npy does not match the SHA-256"
    elif damage == "modified_library":
        lib = os.path.join(p, "decode", "kernels.so")
        with open(lib, "r+b") as f:
            f.seek(200)
            f.write(b"\xff")
        want = r"decode: kernels\.so does not match the SHA-256"
    elif damage == "missing_manifest":
        os.remove(os.path.join(p, "prefill", "manifest.json"))
        want = r"prefill/manifest\.json is missing"
    else:
        index = os.path.join(p, package.INDEX)
        with open(index, "r+b") as f:
            f.truncate(os.path.getsize(index) // 2)
        want = r"llm\.json is not valid JSON"
    with pytest.raises(ValueError, match=want):
        load(p)


def _edit_index(path, tmp_path, edit):
    p = _copy(path, tmp_path)
    f = os.path.join(p, package.INDEX)
    index = json.load(open(f))
    edit(index)
    json.dump(index, open(f, "w"))
    return p


def test_other_target_newer_format_other_machine(saved, tmp_path):
    _, _, path = saved
    p = _edit_index(path, tmp_path / "a", lambda ix: ix.update(target="cuda"))
    with pytest.raises(ValueError, match="a package for target 'cuda'; this relax-mlir loads CPU packages only"):
        load(p)
    p = _edit_index(path, tmp_path / "b", lambda ix: ix.update(format="relax-mlir-llm-2"))
    with pytest.raises(ValueError, match="'relax-mlir-llm-2' is newer than this relax-mlir reads"):
        load(p)
    p = _edit_index(path, tmp_path / "c", lambda ix: ix["built_for"].update(machine="riscv64"))
    with pytest.raises(ValueError, match="built for machine 'riscv64'"):
        load(p)
    if package._isa_features():
        p = _edit_index(path, tmp_path / "d", lambda ix: ix["built_for"]["isa"].append("avx_future9"))
        with pytest.raises(ValueError, match="built for a CPU with avx_future9, which this CPU lacks"):
            load(p)
    p = _edit_index(path, tmp_path / "e", lambda ix: ix["config"].update(layers=3))
    with pytest.raises(ValueError, match="decode/ takes .* arguments"):
        load(p)
    with pytest.raises(ValueError, match="no llm.json: not a relax-mlir LLM package"):
        load(str(tmp_path))


def test_save_refuses(saved, tmp_path):
    gen, ref, path = saved
    with pytest.raises(ValueError, match="exists and is not an empty directory"):
        gen.save(path)
    with pytest.raises(ValueError, match="this generator's target is 'jax'"):
        ref.save(str(tmp_path / "j"))
    with pytest.raises(ValueError, match="eos_token_id must be a token"):
        gen.save(str(tmp_path / "e"), eos_token_id=96)
    assert not os.path.exists(tmp_path / "j") and not os.path.exists(tmp_path / "e")
    # a loaded package saves again (its artifacts are copied), and loads to the same tokens
    again = str(tmp_path / "again")
    load(path).save(again)
    assert load(again).generate(PROMPTS, 4) == gen.generate(PROMPTS, 4)
