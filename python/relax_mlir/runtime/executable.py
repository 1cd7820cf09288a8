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
                "i16": np.int16, "i32": np.int32, "i64": np.int64, "ui8": np.uint8, "ui16": np.uint16,
                "ui32": np.uint32, "ui64": np.uint64}
try:  # numpy has no bfloat16; ml_dtypes (installed with jax) is what jax uses for numpy bf16 arrays
    import ml_dtypes as _ml_dtypes

    NUMPY_DTYPES["bf16"] = _ml_dtypes.bfloat16
except ImportError:  # pragma: no cover - without ml_dtypes, bf16 entries are refused at compile time
    pass


def numpy_dtype(dtype: str, where: str = "") -> np.dtype:
    """The numpy dtype of a relax element type; ValueError when the runtime has none (bf16 without
    ml_dtypes)."""
    t = NUMPY_DTYPES.get(dtype)
    if t is None:
        raise ValueError(f"element type {dtype}{where} is not supported by this runtime"
                         + (" (bf16 needs the ml_dtypes package)" if dtype == "bf16" else ""))
    return np.dtype(t)


_SIGNED_VIEW = {np.dtype(np.uint8): np.int8, np.dtype(np.uint16): np.int16, np.dtype(np.uint32): np.int32,
                np.dtype(np.uint64): np.int64}


def _raw(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """bf16 arrays as uint16 views (same bytes): ml_dtypes arrays do not export the buffer
    protocol that native calls read pointers through. Unsigned arrays as signed views (same
    bytes): native code computes on signless integers."""
    bf16 = NUMPY_DTYPES.get("bf16")
    return [a.view(np.uint16) if bf16 is not None and a.dtype == bf16
            else a.view(_SIGNED_VIEW[a.dtype]) if a.dtype in _SIGNED_VIEW else a for a in arrays]


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
        self._np = [numpy_dtype(p.dtype, f" of @{sig.name} {n}") for p, n in zip(sig.params, sig.arg_names)]
        self._np_out = [numpy_dtype(r.dtype, f" of @{sig.name} result #{i}") for i, r in enumerate(sig.results)]
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

    def as_array(self, i: int, a: Any) -> np.ndarray:
        """Argument `i` as a plain ndarray with the signature's dtype and rank, or ValueError
        naming it. Nothing is copied here: a huge broadcast view is refused by the shape and
        bound checks before `__call__` makes it contiguous. An ndarray subclass is read through
        a base-class view (np.matrix, a user subclass); a masked array is refused (its masked
        entries hold arbitrary values)."""
        sig, p, dt = self.sig, self.sig.params[i], self._np[i]
        name = sig.arg_names[i]
        if isinstance(a, np.ma.MaskedArray):
            raise ValueError(f"@{sig.name}: {name} is a masked array; pass plain data (a.filled(value))")
        if isinstance(a, np.ndarray):
            if type(a) is not np.ndarray:
                a = a.view(np.ndarray)
        elif isinstance(a, (list, tuple, int, float, bool, np.generic)):
            try:
                a = np.asarray(a)
            except (ValueError, TypeError, OverflowError) as e:
                raise ValueError(f"@{sig.name}: {name} cannot be made a numpy array: {e}") from None
        else:
            raise ValueError(f"@{sig.name}: {name} must be a numpy array, got {type(a).__name__}")
        if a.dtype != dt:
            raise ValueError(f"@{sig.name}: {name} has dtype {a.dtype}, expected {dt} ({p.dtype})")
        if a.ndim != len(p.dims):
            raise ValueError(f"@{sig.name}: {name} has rank {a.ndim} (shape {tuple(a.shape)}), "
                             f"expected rank {len(p.dims)}: {p}")
        return a

    def __call__(self, *args: Any):
        sig = self.sig
        if len(args) != len(sig.params):
            raise ValueError(f"@{sig.name} takes {len(sig.params)} arguments, got {len(args)}")
        arrays = [self.as_array(i, a) for i, a in enumerate(args)]
        env = self.bind(arrays)  # shapes, symbols and their bounds, before any copy
        arrays = [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays]
        for s, e in sig.derived:
            env[s] = e.evaluate(env)
        outs = [np.empty(tuple(d.evaluate(env) for d in r.dims), dtype=dt) for r, dt in zip(sig.results, self._np_out)]
        err = np.zeros(1, dtype=np.int32)
        self._invoke(*_raw(arrays), *_raw(outs), *self.workspace(env), err)
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
        exporter = self.artifacts.get("exporter")
        if exporter is None:
            raise ValueError("this executable cannot be exported (it was loaded from an artifact)")
        # Set by whoever built this executable (the CPU target's backend/cpu_artifact.py, or
        # loader.gpu_executable): the runtime package never imports the compiler.
        exporter(self, path, cpu)

    def signature(self, name: str | None = None) -> Signature:
        return self.functions[name or self.main].sig

