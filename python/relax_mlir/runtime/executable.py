"""`Executable`: a compiled relax module that checks shapes, binds symbols, allocates, and runs.

The runtime never trusts its caller: every argument's type, dtype, rank and dims are checked
against the relax signature (with its symbols) in Python before native code runs; a mismatch
raises `ValueError` naming the argument, the dim and the symbol. Symbol values are bound from the
first whole-dim occurrence in the signature; output shapes are the result types evaluated under
that binding. Checks that native code performs (match_cast relations) report through the error
slot and raise `ValueError` with their message.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from relax_mlir.shape import Expr, parse as parse_expr

NUMPY_DTYPES = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i1": np.bool_, "i8": np.int8,
                "i16": np.int16, "i32": np.int32, "i64": np.int64}


@dataclass(frozen=True)
class TensorSig:
    dims: tuple  # Expr | None per dim
    dtype: str

    @staticmethod
    def parse(text: str) -> "TensorSig":
        from relax_mlir.dialect.types import parse_type_text

        t = parse_type_text(text)
        return TensorSig(tuple(t.dims), t.dtype)

    def __str__(self):
        return "[" + ", ".join("?" if d is None else str(d) for d in self.dims) + f"] {self.dtype}"


@dataclass(frozen=True)
class Signature:
    """The relax signature of an entry, and how its symbols bind."""

    name: str
    params: tuple[TensorSig, ...]
    results: tuple[TensorSig, ...]
    arg_names: tuple[str, ...]
    messages: tuple[str, ...]
    bindings: tuple[tuple[str, int, int], ...]  # symbol, param, dim
    derived: tuple[tuple[str, Expr], ...] = ()  # match_cast-bound symbols, in binding order
    upper: tuple[tuple[str, int], ...] = ()  # relax.symbol_bounds
    workspace: tuple[Expr, ...] = ()  # bytes of each storage block the caller passes (relax.workspace)
    lower: tuple[tuple[str, int], ...] = ()  # relax.symbol_lower (jax: every dimension variable >= 1)

    @staticmethod
    def make(name, params, results, arg_names, messages, derived=None, upper=None,
             workspace=None, lower=None) -> "Signature":
        binds = []
        seen = set()
        for i, p in enumerate(params):
            for j, d in enumerate(p.dims):
                if d is not None and d.is_symbol and str(d) not in seen:
                    seen.add(str(d))
                    binds.append((str(d), i, j))
        return Signature(name, tuple(params), tuple(results), tuple(arg_names), tuple(messages), tuple(binds),
                         tuple((k, parse_expr(v)) for k, v in (derived or {}).items()),
                         tuple(sorted((upper or {}).items())),
                         tuple(parse_expr(str(w)) for w in (workspace or ())),
                         tuple(sorted((lower or {}).items())))


class Function:
    """One callable entry of an Executable."""

    def __init__(self, sig: Signature, invoke: Callable[..., None]):
        self.sig = sig
        self._invoke = invoke
        self._np = [np.dtype(NUMPY_DTYPES[p.dtype]) for p in sig.params]
        self._np_out = [np.dtype(NUMPY_DTYPES[r.dtype]) for r in sig.results]
        self._ws = threading.local()
        # per parameter: (axis, the dim if it is a constant, its expression), known dims only
        self._dim_checks = [[(j, d.value if d.is_const else None, d) for j, d in enumerate(p.dims) if d is not None]
                            for p in sig.params]

    def workspace_bytes(self) -> int:
        """Bytes of storage blocks this thread holds for this entry between calls."""
        return sum(b.nbytes for b in getattr(self._ws, "blocks", ()))

    def workspace(self, env: dict[str, int]) -> list[np.ndarray]:
        """The storage blocks of one call: cached per thread, grown when a call needs more, so
        repeated calls allocate nothing (64-byte aligned, uninitialized)."""
        sizes = [max(int(w.evaluate(env)), 1) for w in self.sig.workspace]
        have = getattr(self._ws, "blocks", None)
        if have is None:
            have = self._ws.blocks = [np.empty(0, np.int8)] * len(sizes)
        out = []
        for i, n in enumerate(sizes):
            if have[i].size < n:
                raw = np.empty(n + 64, np.int8)
                off = (-raw.ctypes.data) % 64
                have[i] = raw[off:off + n]
            out.append(have[i][:n])
        return out

    def bind(self, arrays: Sequence[np.ndarray]) -> dict[str, int]:
        sig = self.sig
        env: dict[str, int] = {}
        where: dict[str, str] = {}
        for s, i, j in sig.bindings:
            env[s] = int(arrays[i].shape[j])
            where[s] = f"{sig.arg_names[i]} dim {j}"
        for i, (a, p) in enumerate(zip(arrays, sig.params)):
            for j, const, d in self._dim_checks[i]:
                want = const if const is not None else d.evaluate(env)
                if a.shape[j] != want:
                    syms = sorted(d.symbols())
                    how = "; ".join(f"{s} = {env[s]} from {where[s]}" for s in syms)
                    raise ValueError(
                        f"@{sig.name}: {sig.arg_names[i]} has shape {tuple(a.shape)}, but dim {j} must be {d}"
                        + (f" ({how})" if how else "") + f"; the signature is {p}")
        for s, lb in sig.lower:
            if s in env and env[s] < lb:
                raise ValueError(f"@{sig.name}: symbol {s} = {env[s]} (from {where[s]}) is below its lower bound {lb} "
                                 f"(relax.symbol_lower)")
        for s, ub in sig.upper:
            if s in env and env[s] > ub:
                raise ValueError(f"@{sig.name}: symbol {s} = {env[s]} (from {where[s]}) exceeds its upper bound {ub} "
                                 f"(relax.symbol_bounds)")
        return env

    def __call__(self, *args: Any):
        sig = self.sig
        if len(args) != len(sig.params):
            raise ValueError(f"@{sig.name} takes {len(sig.params)} arguments, got {len(args)}")
        arrays = []
        for i, (a, p, dt) in enumerate(zip(args, sig.params, self._np)):
            if not isinstance(a, np.ndarray):
                if isinstance(a, (list, tuple, int, float, bool, np.generic)):
                    a = np.asarray(a)
                else:
                    raise ValueError(f"@{sig.name}: {sig.arg_names[i]} must be a numpy array, got {type(a).__name__}")
            if a.dtype != dt:
                raise ValueError(f"@{sig.name}: {sig.arg_names[i]} has dtype {a.dtype}, expected {dt} ({p.dtype})")
            if a.ndim != len(p.dims):
                raise ValueError(f"@{sig.name}: {sig.arg_names[i]} has rank {a.ndim} (shape {tuple(a.shape)}), "
                                 f"expected rank {len(p.dims)}: {p}")
            arrays.append(a if a.flags.c_contiguous else np.ascontiguousarray(a))
        env = self.bind(arrays)
        for s, e in sig.derived:
            env[s] = e.evaluate(env)
        outs = [np.empty(tuple(d.evaluate(env) for d in r.dims), dtype=dt) for r, dt in zip(sig.results, self._np_out)]
        err = np.zeros(1, dtype=np.int32)
        self._invoke(*arrays, *outs, *self.workspace(env), err)
        if err[0]:
            code = int(err[0])
            msg = sig.messages[code - 1] if 0 < code <= len(sig.messages) else f"check {code}"
            raise ValueError(f"@{sig.name}: shape check failed: {msg}")
        return outs[0] if len(outs) == 1 else tuple(outs)


class Executable:
    """A compiled module: `exe(*arrays)` calls its main entry; `exe["name"]` any other."""

    def __init__(self, functions: dict[str, Function], main: str, keepalive: Any = None, artifacts=None):
        self.functions = functions
        self.main = main
        self._keepalive = keepalive
        self.artifacts = artifacts or {}

    def __getitem__(self, name: str) -> Function:
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"no public function @{name}; have {', '.join('@' + n for n in self.functions)}") from None

    def __call__(self, *args):
        return self.functions[self.main](*args)

    def export(self, path: str, cpu: str | None = "native") -> None:
        """Write a self-contained artifact that `relax_mlir.runtime.load(path)` runs without MLIR:
        cpu: a shared library + manifest (numpy and ctypes); vulkan / cuda: a manifest, the host
        program (host.json) and the kernels (kernels/*.spv, kernels/*.ptx)."""
        if "hostprog" in self.artifacts:
            from relax_mlir.runtime.loader import write_gpu_artifact

            write_gpu_artifact(path, self.artifacts, [f.sig for f in self.functions.values()], self.main)
            return
        if "upstream" not in self.artifacts:
            raise ValueError("this executable cannot be exported (it was loaded from an artifact)")
        from relax_mlir.backend.cpu_artifact import export

        export(self.artifacts["upstream"], [f.sig for f in self.functions.values()], self.main, path, cpu)

    def signature(self, name: str | None = None) -> Signature:
        return self.functions[name or self.main].sig

