"""A compiled LLM as one directory that generates without the compiler: `Generator.save(path)`
writes it, `relax_mlir.llm.load(path)` (or `Generator.load`) serves from it with numpy and ctypes
only: neither jax, transformers nor MLIR's Python bindings are imported (MLC-LLM's split: compile
once, ship the library and the weights, serve from a small runtime). `read` is the loading half.

    path/llm.json        format, target, the machine it was built for, the generator's config,
                         each weight's file, shape and dtype, and the size and SHA-256 of every
                         weight file and of both artifacts' manifests
    path/prefill/        CPU artifacts (`Executable.export`: kernels.so, and kernels.threaded.so
    path/decode/         where the compile used threads; manifest.json records their hashes)
    path/weights/NNNN.npy  one per weight, in the order the functions take them; memory-mapped
                         read-only at load (np.save aligns the data to 64 bytes)

`load` checks the format, the target and the machine, then every recorded file (size, then
SHA-256), before it maps or runs anything: a missing, truncated or modified file is a ValueError
naming it. The hashes pin the artifacts' manifests, which pin their libraries
(runtime/loader.py checks those).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile

import numpy as np

from relax_mlir.llm.model import CausalLM
from relax_mlir.runtime.executable import NUMPY_DTYPES
from relax_mlir.runtime import machine
from relax_mlir.runtime.loader import MANIFEST, file_record

__all__ = ["FORMAT", "INDEX", "read", "save"]

FORMAT = "relax-mlir-llm-1"
_FORMAT_PREFIX = "relax-mlir-llm-"
_VERSION = 1
INDEX = "llm.json"
ENTRIES = ("prefill", "decode")
_ALIGN = 64  # bytes: the weights' alignment (a cache line; what the runtime's own buffers get)
_DTYPE_NAMES = {np.dtype(t).name if n != "bf16" else "bfloat16": n for n, t in NUMPY_DTYPES.items()}


_isa_features = machine.isa_features
_machine = machine.this_machine


def _relax_dtype(dtype: np.dtype) -> str:
    name = _DTYPE_NAMES.get(np.dtype(dtype).name)
    if name is None:
        raise ValueError(f"a weight of dtype {dtype} cannot be saved (the runtime has no such element type)")
    return name


# --------------------------------------------------------------------------------------------
# save
# --------------------------------------------------------------------------------------------


def save(gen, path: str, *, eos_token_id: int | None = None) -> None:
    """Write `gen` (a CPU `Generator`) to the new directory `path` (see the module docstring);
    written in a temporary sibling directory and renamed, so `path` is whole or absent."""
    if gen.target != "cpu":
        raise ValueError(f"save writes CPU packages; this generator's target is {gen.target!r}")
    if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
        raise ValueError(f"{path} exists and is not an empty directory")
    if eos_token_id is not None and (not isinstance(eos_token_id, (int, np.integer)) or isinstance(eos_token_id, bool)
                                     or not 0 <= eos_token_id < gen.lm.vocab):
        raise ValueError(f"eos_token_id must be a token of the vocabulary (0..{gen.lm.vocab - 1}), got {eos_token_id!r}")
    sources = [_artifact_source(gen, k, name) for k, name in enumerate(ENTRIES)]  # refuse before writing
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".relax-mlir-llm-", dir=parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 would stay on the package
        for name, (exe, src) in zip(ENTRIES, sources):
            if src is None:
                exe.export(os.path.join(tmp, name))
            else:
                shutil.copytree(src, os.path.join(tmp, name))
        weights = _save_weights(gen.lm.weights, tmp)
        lm = gen.lm
        index = {
            "format": FORMAT,
            "target": "cpu",
            "built_for": _machine(),
            "config": {"name": lm.name, "layers": lm.layers, "kv_heads": lm.kv_heads, "head_dim": lm.head_dim,
                       "vocab": lm.vocab, "max_positions": lm.max_positions,
                       "cache_dtype": _relax_dtype(lm.cache_dtype),
                       **({} if lm.value_dtype is None else {"value_dtype": _relax_dtype(lm.value_dtype)}),
                       "max_context": gen.max_context,
                       "cache_chunk": gen.cache_chunk, "pad_token_id": gen.pad_token_id,
                       "eos_token_id": None if eos_token_id is None else int(eos_token_id)},
            "weights": weights,
        }
        recorded = [w["file"] for w in weights] + [f"{name}/{MANIFEST}" for name in ENTRIES]
        index["files"] = {rel: file_record(os.path.join(tmp, rel)) for rel in recorded}
        with open(os.path.join(tmp, INDEX), "w") as f:
            json.dump(index, f, indent=1)
        if os.path.isdir(path):
            os.rmdir(path)  # empty (checked above)
        os.rename(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _artifact_source(gen, k: int, name: str):
    """(executable, None) when it can export itself, or (executable, directory) of the artifact it
    was loaded from (a generator compiled out of process, or loaded from a package)."""
    exe = getattr(gen, f"{name}_exe", None)
    if exe is None:
        raise ValueError("this generator has no compiled executables to save")
    if "exporter" in (exe.artifacts or {}) and "upstream" in exe.artifacts:
        return exe, None
    if getattr(gen, "_artifacts", None) is not None:  # out_of_process: the child's artifacts
        return exe, os.path.join(gen._artifacts.name, str(k))
    if getattr(gen, "package_path", None) is not None:
        return exe, os.path.join(gen.package_path, name)
    raise ValueError(f"the {name} executable was loaded elsewhere (executables=) and is not a CPU compile: "
                     "save the package where it was compiled")


def _save_weights(weights, root: str) -> list[dict]:
    os.makedirs(os.path.join(root, "weights"))
    out = []
    for i, w in enumerate(weights):
        w = np.asarray(w)
        dtype = _relax_dtype(w.dtype)
        rel = f"weights/{i:04d}.npy"
        raw = w.view(np.uint16) if dtype == "bf16" else w  # .npy has no bfloat16: its bits as uint16
        np.save(os.path.join(root, rel), np.ascontiguousarray(raw), allow_pickle=False)
        out.append({"file": rel, "shape": list(w.shape), "dtype": dtype})
    return out


# --------------------------------------------------------------------------------------------
# load
# --------------------------------------------------------------------------------------------


def read(path: str, *, verify: bool = True) -> tuple[CausalLM, tuple, dict]:
    """The model (`CausalLM` without functions: its weights memory-mapped, and the cache
    layout), the (prefill, decode) executables and the config saved at `path`, all checked;
    `Generator.load` makes the generator. `verify=False` skips the SHA-256 of the weight files
    (sizes, shapes and dtypes are still checked; the artifacts' libraries are always hashed)."""
    from relax_mlir.runtime import load as load_artifact

    index = _read_index(path)
    _check_machine(path, index)
    cfg = _config(path, index)
    _check_files(path, index, verify)
    weights = [_map_weight(path, k, w) for k, w in enumerate(index["weights"])]
    lm = CausalLM(cfg["name"], None, None, weights, cfg["layers"], cfg["kv_heads"], cfg["head_dim"], cfg["vocab"],
                  cfg["max_positions"], np.dtype(NUMPY_DTYPES[cfg["cache_dtype"]]),
                  np.dtype(NUMPY_DTYPES[cfg["value_dtype"]]) if "value_dtype" in cfg else None)
    exes = tuple(load_artifact(os.path.join(path, name)) for name in ENTRIES)
    for name, exe in zip(ENTRIES, exes):
        n = len(exe[exe.main].sig.params)
        want = len(weights) + (3 if name == "prefill" else 4 + 2 * lm.layers)
        if n != want:
            raise ValueError(f"{path}: {name}/ takes {n} arguments; {INDEX} describes {want} "
                             f"({len(weights)} weights, {lm.layers} layers)")
    return lm, exes, cfg


def _read_index(path: str) -> dict:
    full = os.path.join(path, INDEX)
    if not os.path.isfile(full):
        raise ValueError(f"{path}: no {INDEX}: not a relax-mlir LLM package (Generator.save writes one)")
    try:
        with open(full, encoding="utf-8") as f:
            index = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: {INDEX} is not valid JSON ({e})") from None
    fmt = index.get("format") if isinstance(index, dict) else None
    if not isinstance(fmt, str) or not fmt.startswith(_FORMAT_PREFIX):
        raise ValueError(f"{path}: {INDEX} is not a relax-mlir LLM package index (format {fmt!r})")
    if fmt != FORMAT:
        version = fmt[len(_FORMAT_PREFIX):]
        newer = version.isdigit() and int(version) > _VERSION
        raise ValueError(f"{path}: package format {fmt!r} " + (
            f"is newer than this relax-mlir reads ({FORMAT}): load it with the relax-mlir that saved it, or newer"
            if newer else f"is not one this relax-mlir reads ({FORMAT})"))
    return index


def _check_machine(path: str, index: dict) -> None:
    target = index.get("target")
    if target != "cpu":
        raise ValueError(f"{path}: a package for target {target!r}; this relax-mlir loads CPU packages only")
    built = index.get("built_for")
    if not isinstance(built, dict):
        raise ValueError(f"{path}: {INDEX} does not say which machine the package was built for")
    machine.check(path, built, "compile and save the package on this machine")


_CONFIG = {"name": str, "layers": int, "kv_heads": int, "head_dim": int, "vocab": int, "max_positions": int,
           "cache_dtype": str, "max_context": int, "cache_chunk": int, "pad_token_id": int}


def _config(path: str, index: dict) -> dict:
    cfg = index.get("config")
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: {INDEX} has no config")
    for key, t in _CONFIG.items():
        v = cfg.get(key)
        if not isinstance(v, t) or isinstance(v, bool) or (t is int and v < 0):
            raise ValueError(f"{path}: {INDEX}: config {key} is {v!r}, expected a{'n integer' if t is int else ' string'}")
    for key in ("cache_dtype", "value_dtype"):
        if (key == "cache_dtype" or key in cfg) and (not isinstance(cfg[key], str) or cfg[key] not in NUMPY_DTYPES):
            raise ValueError(f"{path}: {INDEX}: {key.replace('_', ' ')} {cfg[key]!r} is not supported by this runtime")
    eos = cfg.get("eos_token_id")
    if eos is not None and (not isinstance(eos, int) or not 0 <= eos < cfg["vocab"]):
        raise ValueError(f"{path}: {INDEX}: eos_token_id {eos!r} is not a token of the vocabulary")
    if not isinstance(index.get("weights"), list) or not isinstance(index.get("files"), dict):
        raise ValueError(f"{path}: {INDEX} lists no weights or no file records")
    return cfg


def _check_files(path: str, index: dict, hash_weights: bool) -> None:
    """Every weight file and both artifact manifests are recorded, inside the package, present,
    of the recorded size and (for the manifests always, weights when `hash_weights`) SHA-256."""
    files = index["files"]
    weight_files = set()
    for w in index["weights"]:
        if not isinstance(w, dict) or not isinstance(w.get("file"), str):
            raise ValueError(f"{path}: {INDEX}: malformed weight record {w!r}")
        weight_files.add(w["file"])
    needed = sorted(weight_files) + [f"{name}/{MANIFEST}" for name in ENTRIES]
    root = os.path.realpath(path)
    sizes = {}
    for rel in needed:
        rec = files.get(rel)
        if not isinstance(rec, dict) or not isinstance(rec.get("size"), int) or not isinstance(rec.get("sha256"), str):
            raise ValueError(f"{path}: {INDEX} has no size and SHA-256 for {rel}")
        full = os.path.realpath(os.path.join(root, rel))
        if os.path.isabs(rel) or not full.startswith(root + os.sep):
            raise ValueError(f"{path}: {INDEX} names a file outside the package: {rel!r}")
        if not os.path.isfile(full):
            raise ValueError(f"{path}: {rel} is missing")
        sizes[rel] = os.path.getsize(full)
        if sizes[rel] != rec["size"]:
            raise ValueError(f"{path}: {rel} has {sizes[rel]} bytes, {INDEX} records {rec['size']} "
                             "(a truncated or modified file)")
    for rel in needed:
        if (hash_weights or rel not in weight_files) and file_record(os.path.join(root, rel))["sha256"] != files[rel]["sha256"]:
            raise ValueError(f"{path}: {rel} does not match the SHA-256 {INDEX} records (a modified file)")


def _map_weight(path: str, k: int, w: dict) -> np.ndarray:
    """Weight `k` memory-mapped read-only, as a plain ndarray of its dtype (checked against the index)."""
    rel = w["file"]
    dtype = w.get("dtype")
    if dtype not in NUMPY_DTYPES:
        raise ValueError(f"{path}: {INDEX}: weight {k} ({rel}) has dtype {dtype!r}, which this runtime lacks")
    try:
        a = np.load(os.path.join(path, rel), mmap_mode="r", allow_pickle=False)
    except ValueError as e:
        raise ValueError(f"{path}: {rel} is not a readable .npy file ({e})") from None
    want = np.dtype(np.uint16) if dtype == "bf16" else np.dtype(NUMPY_DTYPES[dtype])
    if a.dtype != want or list(a.shape) != w.get("shape") or not a.flags.c_contiguous:
        raise ValueError(f"{path}: {rel} holds {a.dtype}{list(a.shape)}; {INDEX} records {dtype}{w.get('shape')}")
    a = a.view(np.ndarray)  # the memmap's bytes as a plain array (the map stays open through its base)
    if dtype == "bf16":
        a = a.view(NUMPY_DTYPES["bf16"])
    if a.ctypes.data % _ALIGN:  # np.save aligns the data to 64 bytes; a file written otherwise may not be
        buf = np.empty(a.nbytes + _ALIGN, np.uint8)
        start = -buf.ctypes.data % _ALIGN
        aligned = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
        aligned[...] = a
        a = aligned
    return a
