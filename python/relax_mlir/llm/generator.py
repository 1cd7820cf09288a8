"""`Generator`: text generation from a prefill and a decode function, each compiled once.

    gen = Generator.from_hf_flax(model, max_context=256)        # compiles prefill and decode
    tokens = gen.generate([[1, 2, 3], [4, 5]], max_new_tokens=32)  # greedy, a batch of prompts
    for step in gen.stream(prompts, 32, sampling="sample", top_k=40, seed=0): ...

Prompts of different lengths are left-padded into one batch, with an attention mask and per
sequence positions (as HF's Flax `generate`). The weights are bound once; the KV cache
(`cache.KVCache`) is preallocated for `max_context` positions and written in place each step.
`target="jax"` runs the same loop over `jax.jit` of the same two functions (the reference that
benchmarks compare with).
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Sequence

import numpy as np

import relax_mlir
from relax_mlir.llm import package
from relax_mlir.llm.cache import KVCache
from relax_mlir.llm.model import CausalLM, export, from_gemma, from_hf_flax
from relax_mlir.llm.out_of_process import compile_out_of_process, return_freed_memory
from relax_mlir.llm.sampling import Sampler, whole_number

__all__ = ["Generator"]


class _Compiled:
    """A compiled entry with the weights bound once: the runtime's `partial` where it has one,
    else the weights are passed (and checked) on every call."""

    def __init__(self, exe, weights: list[np.ndarray]):
        fn = exe[exe.main]
        if hasattr(fn, "partial"):
            self._call = fn.partial(dict(enumerate(weights)))
        else:
            self._call = lambda *rest: fn(*weights, *rest)

    def __call__(self, *args):
        return self._call(*args)


class _JaxCompiled:
    """`jax.jit` of the same function (the reference backend): flat arrays in, a flat tuple out,
    like a compiled entry; the decode step donates its caches."""

    def __init__(self, fn, weights, layers: int, decode: bool):
        import jax

        self._fn = jax.jit(fn, donate_argnums=(5, 6) if decode else ())
        self._w = [jax.device_put(w) for w in weights]
        self._layers, self._decode = layers, decode

    def __call__(self, *args):
        if self._decode:
            n = len(args) - 2 * self._layers
            args = (*args[:n], list(args[n:n + self._layers]), list(args[n + self._layers:]))
        logits, ks, vs = self._fn(self._w, *args)
        return (logits, *ks, *vs)


def _compile_here(lm: CausalLM, max_context: int, target: str, options, verbose: bool) -> tuple:
    """(prefill, decode) exported and compiled in this process; the compile's freed heap handed back."""
    from relax_mlir.frontend.jax import import_exported  # the compiler: not needed for loaded executables

    ex_prefill, ex_decode = export(lm, max_context)
    exes = tuple(relax_mlir.compile(import_exported(ex), target, options=options, verbose=verbose)
                 for ex in (ex_prefill, ex_decode))
    del ex_prefill, ex_decode
    return_freed_memory()
    return exes


class Generator:
    """Greedy or sampled generation for a batch of prompts, from one compile of the model's
    prefill and one of its decode step (see `relax_mlir.llm.model` for their contract).

    `prefill_step(ids, mask, pos)` and `decode_step(ids, mask, pos, index, *keys, *values)` are
    the compiled functions with the weights bound (flat arrays in, a flat tuple (logits, *keys,
    *values) out); `prefill_exe` / `decode_exe` the executables; `compile_seconds` the time to
    export and compile both; `last_stats` the timings of the last generation. `out_of_process=True`
    compiles in a child process and loads its CPU artifacts (`llm/out_of_process.py`): no
    compiler memory here, at the cost of compile time.
    `executables=(prefill, decode)` takes them compiled or loaded elsewhere
    (`relax_mlir.runtime.load` of exported artifacts): nothing is compiled, and the compiler (MLIR)
    is not imported, as on a GPU machine that has only the runtime (bench/gpu_check.py); with
    `out_of_process=True` or target="jax", which make their own, they are a ValueError."""

    def __init__(self, lm: CausalLM, max_context: int, target: str = "cpu", *, cache_chunk: int = 64,
                 pad_token_id: int = 0, options=None, verbose: bool = False, out_of_process: bool = False,
                 executables=None):
        max_context = whole_number("max_context", max_context, 2)
        if max_context > lm.max_positions:
            raise ValueError(f"max_context {max_context} exceeds the {lm.name} definition's "
                             f"{lm.max_positions} positions")
        cache_chunk = whole_number("cache_chunk", cache_chunk, 1)
        if executables is not None:
            if target == "jax" or out_of_process:
                raise ValueError("executables= are the (prefill, decode) executables to run: there is nothing to "
                                 + ("compile out of process" if out_of_process else "run with target='jax'"))
            executables = tuple(executables)
            if len(executables) != 2:
                raise ValueError(f"executables= must be (prefill, decode), got {len(executables)} executables")
        if whole_number("pad_token_id", pad_token_id, 0) >= lm.vocab:  # (it fills the prompts' padding)
            raise ValueError(f"pad_token_id must be a token id in [0, {lm.vocab}), got {pad_token_id!r}")
        self.lm, self.max_context, self.target = lm, int(max_context), target
        self.cache_chunk, self.pad_token_id = int(cache_chunk), int(pad_token_id)
        self.last_stats: dict = {}
        self.package_path = self.eos_token_id = None  # set by load() from a package
        t0 = time.perf_counter()
        if target == "jax":
            self.prefill_step = _JaxCompiled(lm.prefill, lm.weights, lm.layers, decode=False)
            self.decode_step = _JaxCompiled(lm.decode, lm.weights, lm.layers, decode=True)
        else:
            if executables is not None:  # compiled or loaded elsewhere: no compiler
                self.prefill_exe, self.decode_exe = executables
            elif out_of_process:  # peak memory: no compiler in this process (llm/out_of_process.py)
                (self.prefill_exe, self.decode_exe), self._artifacts = compile_out_of_process(
                    list(export(lm, self.max_context)), target, options)
            else:
                self.prefill_exe, self.decode_exe = _compile_here(lm, self.max_context, target, options, verbose)
            self.prefill_step = _Compiled(self.prefill_exe, lm.weights)
            self.decode_step = _Compiled(self.decode_exe, lm.weights)
        self.compile_seconds = time.perf_counter() - t0

    @classmethod
    def from_hf_flax(cls, model, params=None, *, max_context: int, target: str = "cpu", **kw) -> "Generator":
        """A transformers Flax causal LM (`FlaxLlamaForCausalLM`, `FlaxGPT2LMHeadModel`, ...)
        with `params` (default `model.params`): exports and compiles its prefill and decode."""
        return cls(from_hf_flax(model, params), max_context, target, **kw)

    @classmethod
    def from_gemma(cls, model, params, *, max_context: int, target: str = "cpu", **kw) -> "Generator":
        """Google's gemma `gm.nn.Transformer` with its params: exports and compiles its prefill
        and decode."""
        return cls(from_gemma(model, params), max_context, target, **kw)

    # --- packages ----------------------------------------------------------------------------

    def save(self, path: str, *, eos_token_id: int | None = None) -> None:
        """Write this CPU generator as a package (`llm/package.py`): both functions' CPU artifacts
        (with their multi-threaded builds where the compile used threads), the weights as .npy
        files and the config as JSON, to the new directory `path`. `Generator.load(path)` (or
        `relax_mlir.llm.load`) generates from it without jax, transformers or MLIR."""
        package.save(self, path, eos_token_id=eos_token_id)

    @classmethod
    def load(cls, path: str, *, verify: bool = True) -> "Generator":
        """The generator saved at `path` (`save`), its weights memory-mapped; every file is checked
        first (`verify=False` skips hashing the weights). `package_path` and `eos_token_id` (as
        saved, or None) are set on it."""
        lm, exes, cfg = package.read(path, verify=verify)
        gen = cls(lm, cfg["max_context"], cache_chunk=cfg["cache_chunk"], pad_token_id=cfg["pad_token_id"],
                  executables=exes)
        gen.package_path = os.path.abspath(path)
        gen.eos_token_id = cfg["eos_token_id"]
        return gen

    # --- generation ------------------------------------------------------------------------

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, sampling: str = "greedy", *,
                 temperature: float | None = None, top_k: int | None = None, top_p: float | None = None,
                 seed: int = 0, eos_token_id: int | None = None, progress: bool = False) -> list[list[int]]:
        """The new tokens of each prompt (a list per prompt; one that emits `eos_token_id` stops
        there, the token included)."""
        steps = self.stream(prompts, max_new_tokens, sampling, temperature=temperature, top_k=top_k,
                            top_p=top_p, seed=seed, eos_token_id=eos_token_id, progress=progress)  # (checks first)
        out: list[list[int]] = [[] for _ in prompts]
        done = [False] * len(prompts)
        for tokens in steps:
            for i, t in enumerate(tokens.tolist()):
                if not done[i]:
                    out[i].append(t)
                    done[i] = t == eos_token_id
        return out

    def stream(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, sampling: str = "greedy", *,
               temperature: float | None = None, top_k: int | None = None, top_p: float | None = None,
               seed: int = 0, eos_token_id: int | None = None, progress: bool = False,
               logits: bool = False) -> Iterator:
        """Yields the next token of every sequence ([b] int32) step by step, or (tokens, logits
        [b, V]) with `logits=True`. Sequences that emitted `eos_token_id` continue with the pad
        token; the stream ends when all have. Arguments are checked before anything runs: a
        prompt plus `max_new_tokens` that does not fit `max_context` is a ValueError."""
        sampler = Sampler.make(sampling, temperature, top_k, top_p, seed)
        ids, mask, pos, lengths = self._batch(prompts)
        if eos_token_id is not None:
            eos_token_id = whole_number("eos_token_id", eos_token_id, 0)
            if eos_token_id >= self.lm.vocab:
                raise ValueError(f"eos_token_id {eos_token_id} is not a token of the vocabulary [0, {self.lm.vocab})")
        max_new_tokens = whole_number("max_new_tokens", max_new_tokens, 1)
        need = ids.shape[1] + max_new_tokens - 1
        if need > self.max_context:
            raise ValueError(f"KV cache overflow: a batch whose longest prompt has {ids.shape[1]} tokens plus "
                             f"{max_new_tokens} new tokens needs {need} cache positions; max_context is "
                             f"{self.max_context}")
        return self._loop(sampler, ids, mask, pos, lengths, int(max_new_tokens), eos_token_id, progress, logits)

    def _batch(self, prompts):
        """Left-padded ids, the attention mask and positions ([b, s] i32 each), prompt lengths."""
        if isinstance(prompts, np.ndarray) and prompts.ndim == 2:
            prompts = prompts.tolist()
        if not isinstance(prompts, (list, tuple)) or not prompts or not all(
                isinstance(p, (list, tuple, np.ndarray)) for p in prompts):
            raise ValueError("prompts must be a non-empty list of token lists")
        lengths = np.array([len(p) for p in prompts], np.int32)
        if lengths.min() < 1:
            raise ValueError(f"prompt {int(np.argmin(lengths))} is empty")
        s = int(lengths.max())
        if s > self.max_context:
            raise ValueError(f"a prompt of {s} tokens does not fit max_context {self.max_context}")
        ids = np.full((len(prompts), s), self.pad_token_id, np.int32)
        mask = np.zeros((len(prompts), s), np.int32)
        for i, p in enumerate(prompts):
            row = np.asarray(p)
            if row.ndim != 1 or not np.issubdtype(row.dtype, np.integer):
                raise ValueError(f"prompt {i} must be a list of integer token ids")
            if row.min() < 0 or row.max() >= self.lm.vocab:
                raise ValueError(f"prompt {i} has a token id outside [0, {self.lm.vocab})")
            ids[i, s - len(row):] = row
            mask[i, s - len(row):] = 1
        pos = np.maximum(np.cumsum(mask, axis=1, dtype=np.int32) - 1, 0).astype(np.int32)
        return ids, mask, pos, lengths

    def _loop(self, sampler, ids, mask, pos, lengths, max_new, eos, progress, with_logits):
        lm, (b, s) = self.lm, ids.shape
        rng = sampler.rng()
        cache = self._new_cache(b)
        # The decode mask over the cache: the prompt's padding, then 1 for every later position.
        full_mask = np.ones((b, self.max_context), np.int32)
        full_mask[:, :s] = mask
        finished = np.zeros(b, bool)
        t0 = time.perf_counter()
        out = self.prefill_step(ids, mask, pos)
        cache.load(list(out[1:1 + lm.layers]), list(out[1 + lm.layers:]))
        # The logits are part of the prefill's time: the reference backend (jax) returns before
        # its work is done, and its cache stays on its device, so only reading them waits for it.
        logits = np.asarray(out[0])
        t_prefill = time.perf_counter() - t0
        t_decode, steps = 0.0, 0
        try:
            for t in range(max_new):
                tokens = sampler(logits, rng)
                if eos is not None:
                    tokens = np.where(finished, self.pad_token_id, tokens).astype(np.int32)
                    finished |= tokens == eos
                yield (tokens, logits) if with_logits else tokens
                if t + 1 == max_new or finished.all():
                    break
                t1 = time.perf_counter()
                index = s + t  # the cache position of the token fed now
                if cache.reserve(index + 1) or t == 0:
                    step_mask = np.ascontiguousarray(full_mask[:, :cache.capacity])
                out = self.decode_step(tokens[:, None], step_mask, (lengths + t)[:, None], np.int32(index),
                                   *cache.arrays)
                cache.store(out[1:])
                logits = np.asarray(out[0])
                t_decode += time.perf_counter() - t1
                steps += 1
        finally:
            self.last_stats = {"batch": b, "prompt_tokens": int(lengths.sum()), "padded_prompt": s,
                               "prefill_s": t_prefill, "decode_steps": steps, "decode_s": t_decode,
                               "cache_bytes": cache.nbytes}
            if progress:
                st = self.last_stats
                print(f"[relax-mlir {self.target}] prefill {st['prompt_tokens']} tokens in {t_prefill:.3f} s "
                      f"({st['prompt_tokens'] / max(t_prefill, 1e-9):.1f} tokens/s), decode {steps} x {b} tokens "
                      f"in {t_decode:.3f} s ({steps * b / max(t_decode, 1e-9):.1f} tokens/s)",
                      file=sys.stderr, flush=True)

    def _new_cache(self, batch: int):
        lm = self.lm
        if self.target == "jax":
            return _JaxCache(lm, self.max_context, self.cache_chunk)
        return KVCache(lm.layers, batch, lm.kv_heads, lm.head_dim, self.max_context, lm.cache_dtype, self.cache_chunk,
                       lm.value_dtype)


class _JaxCache:
    """The reference backend's cache: jax arrays, padded to each new capacity and replaced by
    each (donating) decode step."""

    def __init__(self, lm, max_context: int, chunk: int):
        self.max_context, self.chunk = max_context, chunk
        self.capacity, self.arrays = 0, []

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)

    def reserve(self, positions: int) -> bool:
        import jax.numpy as jnp

        if positions <= self.capacity:
            return False
        if positions > self.max_context:
            raise ValueError(f"KV cache overflow: {positions} positions needed, max_context is {self.max_context}")
        new = min(self.max_context, -(-positions // self.chunk) * self.chunk)
        self.arrays = [jnp.pad(a, ((0, 0), (0, new - a.shape[1]), (0, 0), (0, 0))) for a in self.arrays]
        self.capacity = new
        return True

    def load(self, keys, values) -> None:
        self.arrays, self.capacity = [*keys, *values], 0
        self.reserve(keys[0].shape[1])

    def store(self, outs) -> None:
        self.arrays = list(outs)
