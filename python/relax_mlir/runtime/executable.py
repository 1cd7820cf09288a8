"""`Executable`: a compiled relax module that checks shapes, binds symbols, allocates, and runs.

The runtime never trusts its caller: every argument's type, dtype, rank and dims are checked
against the relax signature (with its symbols) in Python before native code runs; a mismatch
raises `ValueError` naming the argument, the dim and the symbol. Symbol values are bound from the
first whole-dim occurrence in the signature; output shapes are the result types evaluated under
that binding. Checks that native code performs (match_cast relations) report through the error
slot and raise `ValueError` with their message.

Donated parameters (`Signature.donate`, from `relax.donate`): the result is written into the
argument's own buffer and the call returns that very ndarray (`out is arg`). Such an argument
must be C-contiguous, writable, of the exact dtype and share no memory with another argument
(ValueError otherwise: a copy would break `out is arg`).

`Function.partial({index or name: array})` binds parameters once (weights): they are checked
then, kept, and their symbols fixed; the returned callable takes the remaining parameters.

The call path (CPU): checks run from per-signature plans built once; native code is called
through one ctypes buffer per thread holding every memref descriptor and the pointers to them,
of which a call rewrites only the changing words (measured by bench/call_overhead.py).
"""
from __future__ import annotations

import bisect
import ctypes
import functools
import itertools
import operator
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from relax_mlir.shape import Expr, parse as parse_expr
from relax_mlir.shape.expr import PyCode, make_function

class _NumpyDtypes(Mapping):
    """relax element type -> numpy scalar type. bf16 is ml_dtypes' bfloat16 (what jax uses for numpy
    bf16 arrays), imported on its first use: ml_dtypes registers its types with numpy when imported,
    about a second of every process's start (every relax-opt run) for a type most never meet. Absent
    (KeyError, not listed) without ml_dtypes: bf16 entries are then refused at compile time."""

    _BASE = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i1": np.bool_, "i8": np.int8,
             "i16": np.int16, "i32": np.int32, "i64": np.int64, "ui8": np.uint8, "ui16": np.uint16,
             "ui32": np.uint32, "ui64": np.uint64}

    @functools.cached_property
    def _bf16(self):
        try:
            import ml_dtypes
        except ImportError:  # pragma: no cover
            return None
        return ml_dtypes.bfloat16

    def __getitem__(self, key):
        if key == "bf16" and self._bf16 is not None:
            return self._bf16
        return self._BASE[key]

    def __iter__(self):
        yield from self._BASE
        if self._bf16 is not None:
            yield "bf16"

    def __len__(self):
        return len(self._BASE) + (self._bf16 is not None)


NUMPY_DTYPES = _NumpyDtypes()


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
    return [a.view(np.uint16) if a.dtype.name == "bfloat16"
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
    donate: tuple[tuple[int, int], ...] = ()  # (param, result): the result is written into the param's buffer
    # params / results that are complex arrays (relax.complex): the relax type is their real parts
    # interleaved with the imaginary ones in one more dim of 2, numpy's complex layout
    complex_params: tuple[int, ...] = ()
    complex_results: tuple[int, ...] = ()
    # relations lhs <= rhs between symbols the entry's prologue checks (relax.requires), each with
    # its message: evaluated here only for a binding at which a result dim would be negative
    requires: tuple[tuple[Expr, Expr, str], ...] = ()

    @staticmethod
    def make(name, params, results, arg_names, messages, derived=None, upper=None,
             workspace=None, lower=None, donate=None, complex_params=(), complex_results=(),
             requires=()) -> "Signature":
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
                         tuple(sorted((lower or {}).items())),
                         tuple(sorted((int(i), int(r)) for i, r in dict(donate or {}).items())),
                         tuple(sorted(int(i) for i in complex_params)), tuple(sorted(int(r) for r in complex_results)),
                         tuple((parse_expr(str(l)), parse_expr(str(r)), str(m)) for l, r, m in requires))


    def unbound_symbols(self) -> list[str]:
        """Symbols the signature uses (in result dims, derived expressions, workspace sizes, bounds)
        that no parameter dim and no earlier derived symbol binds: a consistent signature (what
        compile writes) has none; a hand-edited artifact manifest may."""
        known = {s for s, _, _ in self.bindings}
        used: list[str] = []

        def need(e: Expr | None, have: set) -> None:
            if e is not None:
                used.extend(sorted(x for x in e.symbols() if x not in have and x not in used))

        for p in self.params:
            for d in p.dims:
                need(d, known)
        for s, e in self.derived:
            need(e, known)
            known.add(s)
        for r in self.results:
            for d in r.dims:
                need(d, known)
        for e in self.workspace:
            need(e, known)
        used.extend(s for s, _ in self.upper + self.lower if s not in known and s not in used)
        return used


_ndarray = np.ndarray


def _python_values_as(a: np.ndarray, dt: np.dtype) -> np.ndarray:
    """A Python number (numpy's default bool / int64 / float64 0-d array of it) as dtype `dt` where that
    keeps its value, as jax.jit takes a Python scalar (weakly typed) for a parameter of any width:
    an int as a narrower int in range or as a float, a float as a narrower float (rounded).
    Otherwise `a` unchanged (the dtype check names the mismatch)."""
    k, want = a.dtype.kind, dt.kind
    if k == "b" and (want in "iuf" or dt.name == "bfloat16"):
        return a.astype(dt)  # True / False as 1 / 0, as jax.jit takes a Python bool for a number
    if want in "iu" and k in "iu":
        info = np.iinfo(dt)
        if a.size == 0 or (int(a.min()) >= info.min and int(a.max()) <= info.max):
            return a.astype(dt)
    elif (want == "f" or dt.name == "bfloat16") and k in "iuf":
        with np.errstate(over="ignore"):
            return a.astype(dt)
    return a


def _numpy_scalar_as(a: np.ndarray, dt: np.dtype) -> np.ndarray:
    """A numpy scalar of another dtype (0-d) as `dt` where that keeps its value: an integer or bool
    in range (np.int64(3) for an int32 parameter, as jax.jit takes it), an integer as a float, a
    float as a float at least as wide. Otherwise `a` unchanged (the dtype check names it)."""
    k, want = a.dtype.kind, dt.kind
    if k in "biu":
        return _python_values_as(a, dt)
    if k == "f" and (want == "f" or dt.name == "bfloat16") and dt.itemsize >= a.dtype.itemsize \
            and a.dtype.name != "bfloat16" and dt.name != "bfloat16":
        return a.astype(dt)
    return a


def _contiguous_copy(sig: "Signature", i: int, a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of argument `i` (native code reads dense arrays); a ValueError naming
    the argument when the copy cannot be allocated (a broadcast view of 2^40 elements)."""
    try:
        return np.ascontiguousarray(a) if a.ndim else a.copy()  # (ascontiguousarray makes 0-d 1-d)
    except MemoryError:
        size = a.size * a.itemsize
        raise ValueError(f"@{sig.name}: {sig.arg_names[i]} is a non-contiguous {tuple(a.shape)} {a.dtype} view: its "
                         f"C-contiguous copy ({size / 2**30:.1f} GiB) cannot be allocated") from None


class _ComplexParam:
    """The expected type of a complex parameter in a call plan: never an argument's type."""


_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}
_void_at = ctypes.c_void_p.from_address
_word_at = ctypes.c_uint64.from_address  # .value is an int, 0 for NULL (c_void_p gives None)
_addressof = ctypes.addressof
_get_dtype = operator.attrgetter("dtype")
_get_ndim = operator.attrgetter("ndim")
_get_shape = operator.attrgetter("shape")
_get_contig = operator.attrgetter("flags.c_contiguous")
_get_value = operator.attrgetter("value")


def _probe_data_offset() -> int | None:
    """Where numpy's array object keeps its data pointer (PyArrayObject_fields.data, right after
    the 16-byte object header): read there for a whole argument list in C-level loops, it costs a
    fraction of `ctypes.c_char.from_buffer` per array and works for read-only arrays too. Checked
    against `.ctypes.data` on arrays and views at import; None (`.ctypes.data`) where it does not hold."""
    try:
        base = np.arange(16, dtype=np.int64)
        probes = (base, base[3:], base.reshape(4, 4)[2], np.ones((2, 3), np.float16)[1:], base[::-1][::-1])
        if all(_void_at(id(a) + 16).value == a.ctypes.data for a in probes):
            return 16
    except (AttributeError, TypeError, ValueError, OverflowError):  # pragma: no cover - another layout:
        pass  # the probe failing means: read `.ctypes.data` per array instead
    return None  # pragma: no cover


_DATA_OFFSET = _probe_data_offset()
if _DATA_OFFSET is not None:
    _plus_offset = _DATA_OFFSET.__add__

    def _pointers(arrays) -> list[int]:
        """Addresses of the first elements of exact ndarrays (C-level loops, no per-array Python code)."""
        return list(map(_get_value, map(_word_at, map(_plus_offset, map(id, arrays)))))

    def _memory_words() -> np.ndarray | None:
        """A read-only int64 view of the user address space (below 2^48): the data pointers of a
        whole argument list are then one gather at their objects' addresses. Checked against
        `.ctypes.data` on probe arrays; None (and per-array reads) where it does not hold."""
        try:
            mem = np.ctypeslib.as_array((ctypes.c_int64 * ((1 << 48) // 8 - 1)).from_address(8))
            mem.flags.writeable = False
            probes = (np.arange(5.0), np.zeros((3, 2), np.float16)[1:])
            ids = np.array([id(a) for a in probes], np.int64)
            if [int(x) for x in mem[(ids + (_DATA_OFFSET - 8)) >> 3]] == [a.ctypes.data for a in probes]:
                return mem
        except (TypeError, ValueError, OverflowError, MemoryError):  # pragma: no cover - no such view here
            pass
        return None  # pragma: no cover

    _MEMORY = _memory_words()
    _SHIFT = _DATA_OFFSET - 8

    def _pointer_array(arrays, more) -> np.ndarray:
        """`_pointers(arrays + more)` as an int64 array (the caller checked that every one is an
        exact ndarray): their objects' ids, then one gather of the data-pointer fields."""
        ids = np.fromiter(map(id, itertools.chain(arrays, more)), np.int64, len(arrays) + len(more))
        if _MEMORY is not None:
            try:
                return _MEMORY[(ids + _SHIFT) >> 3]
            except IndexError:  # pragma: no cover - an object above the view: read one by one
                pass
        return np.array(_pointers(itertools.chain(arrays, more)), np.int64)  # pragma: no cover
else:  # pragma: no cover
    def _pointers(arrays) -> list[int]:
        return [a.ctypes.data for a in arrays]

    def _pointer_array(arrays, more) -> np.ndarray:
        return np.array([a.ctypes.data for a in itertools.chain(arrays, more)], np.int64)


def _pointer(a: np.ndarray) -> int:
    return _pointers((a,))[0]


# numpy's first gather through the address-space view costs ~45 us (type resolution, the view's
# first use): paid here, at import, not by the first call
_pointer_array((_PROBE := np.empty(2, np.int64),), (_PROBE[1:],))


def _strides(shape: tuple) -> tuple:
    """Identity-layout strides in elements (numpy may give size-1 dims any stride)."""
    out, k = [], 1
    for d in reversed(shape):
        out.append(k)
        k *= d
    return tuple(reversed(out))


def _words(p: int, shape: tuple) -> tuple:
    """A ranked memref descriptor {allocated, aligned, offset, sizes, strides} of a C-contiguous array."""
    return (p, p, 0) + tuple(shape) + _strides(tuple(shape))


def _value_or_none(d: Expr, env: dict) -> int | None:
    """`d` under `env`; None where it divides by zero (a symbol below its lower bound: that bound's
    error is the one reported)."""
    try:
        return d.evaluate(env)
    except ZeroDivisionError:
        return None


_EMPTY_BLOCK = np.empty(0, np.int8)
_PAGE = 4096


def _aligned_block(nbytes: int) -> np.ndarray:
    """`nbytes` uninitialized bytes, 64-byte aligned, from numpy's allocator: malloc hands back
    memory the process already faulted in (freed by the compile, or by earlier blocks) where it
    can, and numpy advises huge pages from 4 MiB. Measured and refused: blocks from 2 MiB on
    their own MAP_PRIVATE mappings advised MADV_HUGEPAGE took 28 faults instead of 539 for 56
    MiB in isolation, but in a process that had compiled the module the transformer block's first
    call at s = 2048 after 512 took 3.2-4.1 ordinary calls with them against 0.9-2.1 with malloc's
    memory (fresh pages every time: 120-180 ms of system time against 16-93)."""
    raw = np.empty(nbytes + 64, np.int8)
    off = (-_pointer(raw)) % 64
    return raw[off:off + nbytes]


PREFAULT_MIN = 1 << 20  # fresh blocks from this size are faulted in by a helper thread
PREFAULT = True
_MADV_POPULATE_WRITE = 23  # Linux 5.14+: fault pages in, writable, leaving their contents alone


def _madvise():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        f = libc.madvise
    except (OSError, AttributeError):  # pragma: no cover - no libc madvise
        return None
    f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    f.restype = ctypes.c_int
    return f


_MADVISE = _madvise()


def _populate(blocks: list[np.ndarray]) -> None:
    for b in blocks:
        lo = _pointer(b)
        start = lo - lo % _PAGE
        if _MADVISE(start, lo + b.nbytes - start, _MADV_POPULATE_WRITE) != 0:
            return  # an older kernel: the calls fault the pages in themselves


def _prefault_in_background(blocks: list[np.ndarray]) -> None:
    """Fault in freshly allocated storage blocks on a helper thread while the call that grew them
    runs its first kernels (madvise(MADV_POPULATE_WRITE) changes no byte, so the kernels may
    write the same pages meanwhile; ctypes releases the GIL for it). The thread holds the blocks,
    so they stay mapped until it ends."""
    if _MADVISE is not None:
        threading.Thread(target=_populate, args=(blocks,), daemon=True).start()


def _touch(block: np.ndarray) -> None:
    """Fault in every page of `block` now (one write per page; its contents are scratch)."""
    if block.size:
        block[::_PAGE] = 0
        block[-1] = 0


class _EnvFacts:
    """What follows from one binding of a plan's per-call symbols (cached per plan, by their values):
    `dyn` the expected (dim, size) pairs of each free parameter with '?' dims, `deferred_ok` whether
    the bound parameters' dims that the free ones' symbols decide hold, `ws` the workspace sizes."""

    __slots__ = ("env", "shapes", "bound_error", "outs", "size_vals", "elements", "dyn", "deferred_ok", "ws")


def _tuple_text(items: Sequence[str]) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _facts_function(fn: "Function", plan: "_Plan"):
    """Python code, generated once per plan, computing what a binding implies (`_EnvFacts`' fields):
    `f(*key)` returns `(bound,)` for the first symbol bound violated (an index into
    `plan.bound_checks`), else `(None, derived values, known shapes, result shapes, descriptor
    words, elements, workspace sizes, dyn, deferred_ok)`. Straight-line arithmetic over locals
    (`shape.expr.PyCode`): a new binding costs a few microseconds instead of interpreting every
    expression tree (~0.14 ms). None where a signature needs the interpreter's errors (an unbound
    symbol, a result with '?' dims): `Function._facts_interpreted` then raises them per call."""
    sig = fn.sig
    names: dict = dict(plan.fixed)
    params = []
    for n, (s, _, _) in enumerate(plan.binds):
        names[s] = f"_a{n}"
        params.append(f"_a{n}")
    code = PyCode(names)
    lines = code.lines
    for n, (s, bound, below) in enumerate(plan.bound_checks):
        lines.append(f"if {code.names[s]} {'<' if below else '>'} {int(bound)!r}: return ({n},)")
    try:
        derived = []
        for n, (s, e) in enumerate(sig.derived):
            code.assign(f"_d{n}", e)
            code.bind(s, f"_d{n}")
            derived.append(f"_d{n}")
        for n, (s, bound, below) in enumerate(plan.derived_checks, len(plan.bound_checks)):
            lines.append(f"if {code.names[s]} {'<' if below else '>'} {int(bound)!r}: return ({n},)")
        shapes, words, elements = [], [], []

        def shape_of(dims, stem):
            out = []
            for j, d in enumerate(dims):
                code.assign(f"{stem}_{j}", d)
                out.append(f"{stem}_{j}")
            strides, k = [], "1"
            for d in reversed(out):
                strides.append(k)
                k = d if k == "1" else f"{d}*{k}"
            words.extend(out + strides[::-1])
            elements.append("*".join(out) or "1")
            return _tuple_text(out)

        for k in plan.known_pos:
            shapes.append(shape_of(sig.params[plan.free[k]].dims, f"_p{k}"))
        outs = []
        for r, t in enumerate(sig.results):
            if any(d is None for d in t.dims):
                return None
            outs.append(shape_of(t.dims, f"_r{r}"))
        ws = [f"max({code.value(w)}, 1)" for w in sig.workspace] if fn._ws_const is None and sig.workspace else []
        dyn = []
        for k in plan.dyn_pos:
            dyn.append(_tuple_text([f"({j}, {code.value(d)})" for j, d in enumerate(sig.params[plan.free[k]].dims)
                                    if d is not None]))
        deferred = [f"{code.value(d)} == {int(plan.bound[i].shape[j])!r}" for i, j, d in plan.deferred]
    except KeyError:  # a symbol no argument binds: the interpreter's KeyError, per call
        return None
    lines.append("return " + _tuple_text([
        "None", _tuple_text(derived), "[" + ", ".join(shapes) + "]", "[" + ", ".join(outs) + "]",
        "[" + ", ".join(words) + "]", " + ".join(elements) or "0", "[" + ", ".join(ws) + "]",
        _tuple_text(dyn), " and ".join(deferred) or "True"]))
    return make_function("facts", params, lines, f"<relax-mlir facts of @{sig.name}>")


def _dyn_dims_match(plan: "_Plan", facts: _EnvFacts, arrays: Sequence, shapes: list) -> bool:
    """Whether the free parameters with '?' dims have the right ranks and, in their other dims,
    this binding's expected sizes (False where the generated facts do not hold them: the
    interpreter's checks then decide)."""
    if facts.dyn is None or list(map(_get_ndim, arrays)) != plan.ranks:
        return False
    for k, want in zip(plan.dyn_pos, facts.dyn):
        shape = shapes[k]
        for j, v in want:
            if shape[j] != v:
                return False
    return True


class _Plan:
    """What a call checks and writes, for one set of free parameters (all of them, or those a
    `partial` leaves), built once: the expected types, dtypes and ranks as lists (compared in C),
    which symbols the free arguments bind, and where each descriptor word lives in the call buffer.
    Everything a binding of the symbols implies (expected shapes, bounds, result shapes, descriptor
    sizes) is computed once per distinct binding and cached."""

    CACHE = 256  # bindings remembered per plan

    def __init__(self, fn: "Function", free: tuple[int, ...], fixed: dict[str, int], fixed_where: dict[str, str],
                 deferred: tuple = (), bound: dict[int, np.ndarray] | None = None):
        sig = fn.sig
        self.fn = fn
        self.free = free
        self.fixed = dict(fixed)
        self.bound = dict(bound or {})
        where = dict(fixed_where)
        binds = []
        for k, i in enumerate(free):
            for j, d in enumerate(sig.params[i].dims):
                if d is not None and d.is_symbol and str(d) not in where:
                    binds.append((str(d), k, j))
                    where[str(d)] = f"{sig.arg_names[i]} dim {j}"
        self.binds = tuple(binds)
        self.where = where
        # (a complex param's type never matches: every call converts it in `as_array`)
        self.types = [_ComplexParam if i in fn._complex else _ndarray for i in free]
        self.dts = [fn._np[i] for i in free]
        self.ranks = [len(sig.params[i].dims) for i in free]
        known = [all(d is not None for d in sig.params[i].dims) for i in free]
        self.all_known = all(known)
        self.known_pos = tuple(k for k, ok in enumerate(known) if ok)
        self.dyn_pos = tuple(k for k, ok in enumerate(known) if not ok)  # '?' dims: read per call
        self.deferred = tuple(deferred)  # (i, j, d): dims of bound params whose symbols the free ones bind
        per_call = {s for s, _, _ in binds}
        self.lower = tuple((s, v) for s, v in sig.lower if s in per_call)
        self.upper = tuple((s, v) for s, v in sig.upper if s in per_call)
        # (symbol, bound, is_lower) in the order they are reported: every lower bound first
        self.bound_checks = tuple((s, v, True) for s, v in self.lower) + tuple((s, v, False) for s, v in self.upper)
        # symbols derived from the bound ones (k of an argument dim given as 4*k), checked once
        # computed: a jax `k >= 8` constraint on them, before any result shape uses them
        derived = {s: e for s, e in sig.derived}
        self.derived_checks = tuple((s, v, True) for s, v in sig.lower if s in derived and s not in per_call) + \
            tuple((s, v, False) for s, v in sig.upper if s in derived and s not in per_call)
        for s in sorted({c[0] for c in self.derived_checks}):
            parts = ", ".join(f"{a} = {where[a]}" for a in sorted(derived[s].symbols()) if a in where)
            where.setdefault(s, f"{derived[s]}" + (f" where {parts}" if parts else ""))
        self.donated_pos = tuple(k for k, i in enumerate(free) if i in fn._donate)
        self.bound_elements = sum(a.size for a in self.bound.values())
        # the call buffer: descriptors of params, results, workspace blocks, the error slot; then
        # one pointer per descriptor (ciface arguments); then the packed array of their addresses
        n_p, n_r = len(sig.params), len(sig.results)
        ranks = [len(p.dims) for p in sig.params] + [len(r.dims) for r in sig.results] \
            + [1] * (len(sig.workspace) + 1)
        offs, pos = [], 0
        for r in ranks:
            offs.append(pos)
            pos += 3 + 2 * r
        self.offsets = offs
        self.n_desc = pos
        self.n_mem = len(ranks)
        self.ws_offset = offs[n_p + n_r] if sig.workspace else None
        self.err_offset = offs[-1]
        # per call: the two pointer words of every free param and result, written with one scatter
        ptr_slots = [offs[i] for i in free] + [offs[n_p + r] for r in range(n_r)]
        self.ptr_alloc = np.array(ptr_slots, dtype=np.intp)
        # per binding: the sizes and strides of the known free params and of the results
        size_idx = []
        for k in self.known_pos:
            o = offs[free[k]] + 3
            size_idx += range(o, o + 2 * self.ranks[k])
        for r in range(n_r):
            o = offs[n_p + r] + 3
            size_idx += range(o, o + 2 * len(sig.results[r].dims))
        self.size_idx = np.array(size_idx, dtype=np.intp)
        self.cache: dict[tuple, _EnvFacts] = {}
        self.tls = threading.local()
        # memory spans of bound arrays (Partial fills them in): donated ones, the others sorted
        self.bound_spans: dict[int, tuple[int, int, int]] = {}
        self.bound_donated: tuple[int, ...] = ()
        self.bound_sorted: list[tuple[int, int, int]] = []
        self.bound_starts: list[int] = []
        self.bound_max_end: list[int] = []
        self.bound_originals: dict[int, Any] = {}  # what the caller passed to partial (returned when donated)
        self.derived_names = tuple(s for s, _ in sig.derived)
        self.facts_fn = _facts_function(fn, self)
        st = self.state()  # the building thread's call buffer now: its first call builds nothing (~0.2 ms)
        # the two scatters a call makes, once on the fresh buffer (pointers not set yet: zeros;
        # sizes rewritten unchanged): numpy's first strided scatter costs ~30 us
        st.pairs[self.ptr_alloc] = np.zeros((len(self.ptr_alloc), 1), np.int64)
        st.words[self.size_idx] = st.words[self.size_idx]

    def state(self) -> "_CallState":
        """This thread's call buffer (bound descriptors, pointers and error slot written once)."""
        st = getattr(self.tls, "st", None)
        if st is None or st.busy:
            st = _CallState(self)
            if getattr(self.tls, "st", None) is None:
                self.tls.st = st
        return st


class _CallState:
    """One thread's call buffer for a plan, and what it last held."""

    __slots__ = ("buf", "words", "pairs", "packed", "descs", "err", "busy", "key", "ws_key", "ws_gen", "ws_hold")

    def __init__(self, plan: _Plan):
        n_desc, n = plan.n_desc, plan.n_mem
        buf = (ctypes.c_int64 * (n_desc + 2 * n))()
        base = _addressof(buf)
        self.descs = tuple(base + 8 * o for o in plan.offsets)
        buf[n_desc:n_desc + n] = self.descs
        buf[n_desc + n:n_desc + 2 * n] = [base + 8 * (n_desc + k) for k in range(n)]
        self.packed = base + 8 * (n_desc + n)
        for i, a in plan.bound.items():
            w = _words(_pointer(a), a.shape)
            buf[plan.offsets[i]:plan.offsets[i] + len(w)] = w
        self.err = np.zeros(1, np.int32)
        p = _pointer(self.err)
        buf[plan.err_offset:plan.err_offset + 5] = (p, p, 0, 1, 1)
        self.buf = buf
        self.words = np.frombuffer(buf, np.int64)  # a view (np.ctypeslib.as_array: 0.6 ms at its first use)
        # pairs[o] is (words[o], words[o + 1]): a descriptor's allocated and aligned pointers,
        # both written by one scatter of a column of pointers
        self.pairs = np.lib.stride_tricks.as_strided(self.words, (len(self.words) - 1, 2), (8, 8))
        self.busy = False
        self.key = None  # the binding whose sizes the buffer holds
        self.ws_key, self.ws_gen = None, -1
        # the storage blocks whose descriptors `buf` holds, kept alive while a call runs: a
        # re-entrant call in the same thread (a signal handler, a finalizer, a trace hook calling
        # the model) may grow them, replacing the blocks the outer call's descriptors point to
        self.ws_hold = None


# A compiled executable holds native code and device state: it moves between processes as an artifact.
_NO_PICKLE = ("a compiled relax_mlir {} holds native code and cannot be pickled; in the other process "
              "load what exe.export(path) writes: relax_mlir.runtime.load(path)")


class Function:
    """One callable entry of an Executable: `f(*arrays)`; `f.partial({...})` binds some parameters once.

    `invoke(*arrays)` runs the native code on the inputs, outputs, workspace blocks and error slot
    (numpy arrays); `native`, where the backend offers one, is the fast path: `native.function(n)`
    returns the ctypes function for a call touching n elements, called with the address of the
    packed argument array (`native.packed`) or with one descriptor address per memref."""

    def __init__(self, sig: Signature, invoke: Callable[..., None], native: Any = None):
        self.sig = sig
        self._invoke = invoke
        self._native = native
        self._np = [numpy_dtype(p.dtype, f" of @{sig.name} {n}") for p, n in zip(sig.params, sig.arg_names)]
        self._np_out = [numpy_dtype(r.dtype, f" of @{sig.name} result #{i}") for i, r in enumerate(sig.results)]
        self._ws = threading.local()
        self._donate = dict(sig.donate)  # param -> result
        # complex params / results (relax.complex) -> numpy's complex dtype of their parts' dtype
        self._complex = {i: _COMPLEX_OF[self._np[i]] for i in sig.complex_params}
        self._complex_out = {r: _COMPLEX_OF[self._np_out[r]] for r in sig.complex_results}
        self._donor = {r: i for i, r in sig.donate}  # result -> param
        self._ws_const = [int(w.value) for w in sig.workspace] if all(w.is_const for w in sig.workspace) else None
        self._ws_syms = tuple(sorted({s for w in sig.workspace for s in w.symbols()}))
        self._ws_cap = self._workspace_at_bounds()
        self._ws_at_cap = self._ws_cap is not None and sum(self._ws_cap) <= self.RESERVE_AT_BOUNDS
        self._names = {n[len("argument '"):-1]: i for i, n in enumerate(sig.arg_names) if n.startswith("argument '")}
        self._plan = _Plan(self, tuple(range(len(sig.params))), {}, {})
        known = self._ws_const if self._ws_const is not None else self._ws_cap if self._ws_at_cap else None
        if sig.workspace and known is not None and sum(known) <= self.RESERVE_AT_BOUNDS:
            # sizes known now and small (constant, or at the symbols' bounds): the building
            # thread's blocks are allocated and faulted in here, not in its first call
            for b in self.workspace({}, known):
                _touch(b)

    # --- workspace --------------------------------------------------------------------------
    # Storage blocks whose sizes at the symbols' upper bounds (relax.symbol_bounds) add up to at
    # most this many bytes are allocated at those sizes at once (and, for the building thread, at
    # build time): no call of that entry ever grows them.
    RESERVE_AT_BOUNDS = 16 << 20

    def __reduce__(self):
        raise TypeError(_NO_PICKLE.format(type(self).__name__))

    def workspace_bytes(self) -> int:
        """Bytes of storage blocks this thread holds for this entry between calls."""
        return sum(b.nbytes for b in getattr(self._ws, "blocks", ()))

    def workspace_allocations(self) -> int:
        """How many storage blocks this thread has allocated for this entry (a call that grows no
        block leaves it unchanged)."""
        return getattr(self._ws, "allocations", 0)

    def workspace(self, env: dict[str, int], sizes: Sequence[int] | None = None) -> list[np.ndarray]:
        """The storage blocks of one call (their byte `sizes` under `env`, computed here unless
        given): cached per thread, grown when a call needs more, so repeated calls allocate
        nothing (64-byte aligned, uninitialized)."""
        sizes = self._ws_const or sizes or [max(int(w.evaluate(env)), 1) for w in self.sig.workspace]
        have = getattr(self._ws, "blocks", None)
        if have is None:  # (blocks last: an interrupt in between leaves the state consistent)
            self._ws.gen = 0
            self._ws.allocations = 0
            have = self._ws.blocks = [_EMPTY_BLOCK] * len(sizes)
        out = []
        fresh: list[np.ndarray] = []
        cap = self._ws_cap
        for i, n in enumerate(sizes):
            n = max(n, 1)
            if have[i].size < n:
                if self._ws_at_cap:  # small enough at the bounds: allocated there once
                    grow = max(n, cap[i])
                else:
                    # grown at least 2x (up to the size at the symbols' upper bounds, where all have
                    # one): calls at ever larger shapes allocate, and fault in fresh pages, O(log) times
                    grow = max(n, min(2 * have[i].size, cap[i] if cap else 1 << 62))
                block = self._storage_block(grow)
                # descriptors cached by call states (`_workspace_words`) are stale from here on
                # (before the block is replaced: an interrupt in between must not leave them valid)
                self._ws.gen += 1
                have[i] = block
                if grow >= PREFAULT_MIN:
                    fresh.append(have[i])
                self._ws.allocations += 1
            out.append(have[i][:n])
        if fresh and PREFAULT:
            _prefault_in_background(fresh)
        return out

    def _storage_block(self, nbytes: int) -> np.ndarray:
        """A fresh storage block; a ValueError naming the entry when it cannot be allocated."""
        try:
            return _aligned_block(nbytes)
        except (MemoryError, ValueError) as e:
            sig = self.sig
            raise ValueError(f"@{sig.name}: a storage block of {nbytes} bytes ({nbytes / 2**30:.1f} GiB) for this "
                             f"call's intermediates cannot be allocated ({type(e).__name__}: {e})") from None

    def reserve(self, bindings: dict[str, int]) -> int:
        """Prepare this thread for calls with the symbols at `bindings` (or smaller): its storage
        blocks are grown to those sizes now and their pages faulted in (fresh memory is otherwise
        faulted in by the first kernels of the first call at a larger shape: 0.25 s of system time
        for the transformer block's 2048 tokens), and what the binding implies for the call
        checks is computed and cached. Storage blocks are per thread: reserve in the thread that
        calls. ValueError for a symbol the entry does not have, one its blocks need that is not
        given, or a value outside the symbol's bounds. Returns this thread's storage bytes."""
        sig, plan = self.sig, self._plan
        if not isinstance(bindings, dict):
            raise ValueError(f"@{sig.name}.reserve takes a dict {{symbol: value}}, got {type(bindings).__name__}")
        known = {s for s, _, _ in plan.binds} | set(plan.derived_names)
        env = {}
        for s, v in bindings.items():
            if s not in known:
                have = ", ".join(sorted(known)) or "none"
                raise ValueError(f"@{sig.name}.reserve: no symbol {s!r} in the signature (symbols: {have})")
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ValueError(f"@{sig.name}.reserve: {s} must be an integer, got {type(v).__name__}")
            env[s] = int(v)
        for s, lb in sig.lower:
            if s in env and env[s] < lb:
                raise ValueError(f"@{sig.name}.reserve: symbol {s} = {env[s]} is below its lower bound {lb}")
        for s, ub in sig.upper:
            if s in env and env[s] > ub:
                raise ValueError(f"@{sig.name}.reserve: symbol {s} = {env[s]} exceeds its upper bound {ub}")
        if all(s in env for s, _, _ in plan.binds):
            key = tuple(env[s] for s, _, _ in plan.binds)
            facts = plan.cache.get(key) or self._facts(plan, key, dict(env))
            if facts.bound_error:
                raise ValueError(facts.bound_error)
            env = facts.env  # derived symbols included
        if self.sig.workspace:
            missing = [s for s in self._ws_syms if s not in env]
            if missing:
                raise ValueError(f"@{sig.name}.reserve: the storage sizes need {', '.join(missing)}; "
                                 f"got {', '.join(sorted(bindings)) or 'none'}")
            for b in self.workspace(env):
                _touch(b)
        return self.workspace_bytes()

    def _workspace_at_bounds(self) -> list[int] | None:
        """Each storage block's bytes with every symbol at its upper bound (relax.symbol_bounds);
        None unless every symbol the sizes use has one."""
        upper = dict(self.sig.upper)
        if not self.sig.workspace or not set(self._ws_syms) <= upper.keys():
            return None
        try:
            return [max(int(w.evaluate(upper)), 1) for w in self.sig.workspace]
        except (ZeroDivisionError, KeyError):  # pragma: no cover - sizes divide by a symbol
            return None

    def _workspace_words(self, st: _CallState, env: dict, sizes: Sequence[int] | None) -> tuple | None:
        """The descriptors of this call's storage blocks; None while the buffer already holds them
        (the symbols they depend on and the blocks themselves, `gen`, unchanged)."""
        held = list(getattr(self._ws, "blocks", ()))  # (before the check: see _CallState.ws_hold)
        key = tuple([env[s] for s in self._ws_syms])
        if st.ws_key == key and st.ws_gen == getattr(self._ws, "gen", -2):
            st.ws_hold = held
            return None
        words = []
        blocks = self.workspace(env, sizes)
        st.ws_hold = blocks
        for b in blocks:
            p = _pointer(b)
            words += (p, p, 0, b.shape[0], 1)
        st.ws_key, st.ws_gen = key, self._ws.gen
        return words

    # --- checks -----------------------------------------------------------------------------
    def _facts(self, plan: _Plan, key: tuple, env: dict) -> _EnvFacts:
        """What binding `env` implies for `plan`: expected shapes of the known free params, the
        first bound violated (reported after the shape checks), derived symbols, result shapes,
        descriptor sizes, elements touched. Computed by the plan's generated code (`_facts_function`)
        and cached by `key`."""
        code = plan.facts_fn
        if code is None:
            f = self._facts_interpreted(plan, env)
        else:
            r = code(*key)
            f = _EnvFacts()
            f.bound_error = None
            if len(r) == 1:
                s, bound, below = (plan.bound_checks + plan.derived_checks)[r[0]]
                if s not in env:  # a derived symbol: its value for the message
                    env = dict(env)
                    for d, e in self.sig.derived:
                        env[d] = e.evaluate(env)
                f.bound_error = self._bound_message(plan, s, env[s], bound, below)
                f.env, f.shapes, f.outs, f.size_vals, f.elements, f.ws = env, None, [], None, 0, None
                f.dyn, f.deferred_ok = (), True
            else:
                _, derived, f.shapes, f.outs, words, f.elements, f.ws, f.dyn, f.deferred_ok = r
                if derived:
                    env = dict(env)
                    env.update(zip(plan.derived_names, derived))
                f.env = env
                f.bound_error = self._check_result_sizes(f.outs, env)
                f.size_vals = np.array(words, dtype=np.int64)
        if len(plan.cache) >= plan.CACHE:
            plan.cache.clear()
        plan.cache[key] = f
        return f

    def _check_result_sizes(self, outs, env: dict) -> str | None:
        """A ValueError naming the result whose size at this binding no memory can hold (a dim
        product past 2^63 bytes would overflow the descriptors' 64-bit words). A negative dim
        means a relation the program needs does not hold at this binding: the message of the first
        `relax.requires` relation that fails (the one the native prologue would report), else one
        naming the result; returned, for the caller to raise after the argument checks (it
        allocates the results before the prologue runs)."""
        for r, shape in enumerate(outs):
            if any(int(d) < 0 for d in shape):
                syms = ", ".join(f"{k} = {v}" for k, v in sorted(env.items()))
                for lhs, rhs, msg in self.sig.requires:
                    try:
                        if lhs.evaluate(env) > rhs.evaluate(env):
                            return f"@{self.sig.name}: shape check failed: {msg} ({syms})"
                    except KeyError:
                        continue
                return (f"@{self.sig.name}: result #{r} would have shape {tuple(int(d) for d in shape)}: a relation "
                        f"between the arguments' dims that the program needs does not hold ({syms})")
            n = self._np_out[r].itemsize
            for d in shape:
                n *= int(d)
            if n >= 1 << 63 or any(int(d) >= 1 << 63 for d in shape):
                syms = ", ".join(f"{k} = {v}" for k, v in sorted(env.items()))
                raise ValueError(f"@{self.sig.name}: result #{r} would have shape {tuple(int(d) for d in shape)}, "
                                 f"{n} bytes: more than any memory ({syms})")
        return None

    def _bound_message(self, plan: _Plan, s: str, value: int, bound: int, below: bool) -> str:
        if below:
            return (f"@{self.sig.name}: symbol {s} = {value} (from {plan.where[s]}) is below its lower "
                    f"bound {bound} (relax.symbol_lower)")
        return (f"@{self.sig.name}: symbol {s} = {value} (from {plan.where[s]}) exceeds its upper "
                f"bound {bound} (relax.symbol_bounds)")

    def _facts_interpreted(self, plan: _Plan, env: dict) -> _EnvFacts:
        """`_facts` by interpreting the expressions (signatures the generated code does not cover)."""
        sig = self.sig
        f = _EnvFacts()
        f.dyn, f.deferred_ok, f.ws = None, None, None
        f.bound_error = None
        for s, bound, below in plan.bound_checks:
            if (env[s] < bound) if below else (env[s] > bound):
                f.bound_error = self._bound_message(plan, s, env[s], bound, below)
                break
        f.shapes = None
        if f.bound_error is None:
            f.shapes = [tuple(d.evaluate(env) for d in sig.params[plan.free[k]].dims) for k in plan.known_pos]
        f.env, f.outs, f.size_vals, f.elements = env, [], None, 0
        if f.bound_error is None:
            env = dict(env)
            for s, e in sig.derived:
                env[s] = e.evaluate(env)
            f.env = env
            for s, bound, below in plan.derived_checks:
                if (env[s] < bound) if below else (env[s] > bound):
                    f.bound_error = self._bound_message(plan, s, env[s], bound, below)
                    return f
            for r in sig.results:
                if any(d is None for d in r.dims):
                    raise ValueError(f"@{sig.name}: a result has unknown ('?') dims: {r}")
                f.outs.append(tuple(d.evaluate(env) for d in r.dims))
            f.bound_error = self._check_result_sizes(f.outs, env)
            vals = []
            for shape in f.shapes:
                vals += shape
                vals += _strides(shape)
            for shape in f.outs:
                vals += shape
                vals += _strides(shape)
            f.size_vals = np.array(vals, dtype=np.int64)
            f.elements = sum(int(np.prod(s)) for s in f.shapes) + sum(int(np.prod(s)) for s in f.outs)
        return f

    def _check_shapes(self, plan: _Plan, arrays: Sequence, env: dict) -> None:
        """Every dim of every free argument (and deferred dims of bound ones) against `env`;
        ValueError naming the argument, the dim and where its symbols come from."""
        sig = self.sig
        for k, i in enumerate(plan.free):
            shape = arrays[k].shape
            for j, d in enumerate(sig.params[i].dims):
                if d is not None and shape[j] != _value_or_none(d, env):
                    self._shape_error(plan, i, shape, env)
        for i, j, d in plan.deferred:
            if plan.bound[i].shape[j] != _value_or_none(d, env):
                self._shape_error(plan, i, plan.bound[i].shape, env)

    def _shape_error(self, plan: _Plan, i: int, shape: tuple, env: dict):
        sig, p = self.sig, self.sig.params[i]
        for j, d in enumerate(p.dims):
            if d is None:
                continue
            want = _value_or_none(d, env)
            if want is not None and shape[j] != want:
                how = "; ".join(f"{s} = {env[s]} from {plan.where[s]}" for s in sorted(d.symbols()))
                raise ValueError(f"@{sig.name}: {sig.arg_names[i]} has shape {tuple(shape)}, but dim {j} must be {d}"
                                 + (f" ({how})" if how else "") + f"; the signature is {p}")
        if any(d is not None and _value_or_none(d, env) is None for d in p.dims):
            return  # a dim divides by a symbol a violated bound made 0: the bound error is raised next
        raise AssertionError("unreachable: a dim check failed but no dim differs")  # pragma: no cover

    def _bind_shapes(self, arrays: Sequence[np.ndarray], plan: _Plan | None = None) -> dict[str, int]:
        """The symbols bound by `arrays` (the plan's free arguments, in order; checked for dtype
        and rank already), with every dim and symbol bound checked; ValueError otherwise."""
        plan = plan or self._plan
        env = dict(plan.fixed) if plan.fixed else {}
        for s, k, j in plan.binds:
            env[s] = arrays[k].shape[j]
        self._check_shapes(plan, arrays, env)
        f = self._facts(plan, tuple(env[s] for s, _, _ in plan.binds), env)
        if f.bound_error:
            raise ValueError(f.bound_error)
        return dict(f.env)

    def as_array(self, i: int, a: Any) -> np.ndarray:
        """Argument `i` as a plain ndarray with the signature's dtype and rank, or ValueError
        naming it. Nothing is copied here: a huge broadcast view is refused by the shape and
        bound checks before `__call__` makes it contiguous. An ndarray subclass is read through
        a base-class view (np.matrix, a user subclass); a masked array is refused (its masked
        entries hold arbitrary values). Lists, scalars and array-likes (`__array__`: a jax array)
        are converted, except for a donated argument."""
        sig, p, dt = self.sig, self.sig.params[i], self._np[i]
        name = sig.arg_names[i]
        if isinstance(a, np.ma.MaskedArray):
            raise ValueError(f"@{sig.name}: {name} is a masked array; pass plain data (a.filled(value))")
        if isinstance(a, np.ndarray):
            if type(a) is not np.ndarray:
                a = a.view(np.ndarray)
        elif isinstance(a, (list, tuple, int, float, bool, complex, np.generic)) or hasattr(a, "__array__"):
            # (objects with `__array__`: jax arrays on the CPU, read through numpy without a copy)
            if str(getattr(a, "dtype", "")).startswith("key<"):  # a typed jax PRNG key: its data, as exported
                import jax

                a = jax.random.key_data(a)
            if i in self._donate:
                raise ValueError(f"@{sig.name}: {name} is donated (result #{self._donate[i]} is written into it): "
                                 f"pass a numpy array, got {type(a).__name__}")
            python = isinstance(a, (int, float, bool, complex))  # (a list keeps numpy's dtype: refused if not exact)
            scalar = python or isinstance(a, np.generic)
            given = a
            try:
                a = np.asarray(a)
            except (ValueError, TypeError, OverflowError) as e:
                raise ValueError(f"@{sig.name}: {name} cannot be made a numpy array: {e}") from None
            if python and i in self._complex:
                if a.dtype.kind in "iufc" and a.dtype != np.bool_:
                    a = a.astype(self._complex[i])
            elif python and a.dtype != dt:
                a = _python_values_as(a, dt)  # Python numbers take the parameter's dtype where they fit
            elif scalar and a.dtype != dt and i not in self._complex:
                a = _numpy_scalar_as(a, dt)  # np.int64(3) for an int32: as jax.jit takes it
            if a.dtype != dt and i not in self._complex and (scalar or isinstance(given, (list, tuple))):
                if not scalar:
                    why = f"a {type(given).__name__} converts to {a.dtype}: pass np.asarray(..., dtype='{dt}')"
                elif a.dtype.kind in "iub" and dt.kind in "iu":
                    why = f"{given!r} does not fit in {dt}"
                else:
                    why = f"{given!r} ({a.dtype}) would not keep its value as {dt}"
                raise ValueError(f"@{sig.name}: {name} must have dtype {dt} ({p.dtype}); {why}")
        else:
            raise ValueError(f"@{sig.name}: {name} must be a numpy array, got {type(a).__name__}")
        if i in self._complex:
            return self._complex_parts(i, a)
        if a.dtype != dt:
            raise ValueError(f"@{sig.name}: {name} has dtype {a.dtype}, expected {dt} ({p.dtype})")
        if a.ndim != len(p.dims):
            raise ValueError(f"@{sig.name}: {name} has rank {a.ndim} (shape {tuple(a.shape)}), "
                             f"expected rank {len(p.dims)}: {p}")
        return a

    def _complex_parts(self, i: int, a: np.ndarray) -> np.ndarray:
        """Complex argument `i` as the relax parameter sees it: its parts interleaved in one more
        dim of 2 (a view of the caller's array where it is C-contiguous, else of a copy)."""
        sig, p, cdt = self.sig, self.sig.params[i], self._complex[i]
        name = sig.arg_names[i]
        if a.dtype != cdt:
            raise ValueError(f"@{sig.name}: {name} has dtype {a.dtype}, expected {cdt}")
        if a.ndim != len(p.dims) - 1:
            shape = "[" + ", ".join("?" if d is None else str(d) for d in p.dims[:-1]) + "]"
            raise ValueError(f"@{sig.name}: {name} has rank {a.ndim} (shape {tuple(a.shape)}), "
                             f"expected rank {len(p.dims) - 1}: {shape} {cdt}")
        if i in self._donate and (not a.flags.c_contiguous or not a.flags.writeable):
            self._check_donated(i, a)
        if not a.flags.c_contiguous:
            a = _contiguous_copy(sig, i, a)
        return a.reshape(a.shape + (1,)).view(self._np[i])

    def _check_donated(self, i: int, a: np.ndarray) -> None:
        """A donated argument is updated in place and returned: it must be C-contiguous and writable
        (a copy would not be the caller's array)."""
        if not a.flags.c_contiguous or not a.flags.writeable:
            what = "C-contiguous" if not a.flags.c_contiguous else "writable"
            raise ValueError(f"@{self.sig.name}: {self.sig.arg_names[i]} is donated (result #{self._donate[i]} is "
                             f"written into its buffer and returned as the same array), so it must be {what}; "
                             f"pass np.ascontiguousarray(x) (and keep using the returned array)")

    def _overlap_error(self, i: int, k: int):
        sig = self.sig
        raise ValueError(f"@{sig.name}: {sig.arg_names[i]} is donated (result #{self._donate[i]} is written into its "
                         f"buffer) but shares memory with {sig.arg_names[k]}; pass separate arrays")

    def _check_overlaps(self, plan: _Plan, arrays: Sequence, ptrs: Sequence[int]) -> None:
        """No donated argument shares memory with another argument (its buffer is written)."""
        spans = []
        for k, i in enumerate(plan.free):
            n = arrays[k].nbytes
            if n:
                spans.append((ptrs[k], ptrs[k] + n, i))
        for i in plan.bound_donated:
            if i in plan.bound_spans:
                spans.append(plan.bound_spans[i])
        spans.sort()
        hi_any, who_any, hi_don, who_don = -1, -1, -1, -1
        for lo, hi, i in spans:
            if lo < hi_don:
                self._overlap_error(who_don, i)
            donated = i in self._donate
            if donated and lo < hi_any:
                self._overlap_error(i, who_any)
            if hi > hi_any:
                hi_any, who_any = hi, i
            if donated and hi > hi_don:
                hi_don, who_don = hi, i
        # free donated arguments against the bound (non-donated) ones: spans sorted by start with
        # the running maximum of their ends, bisected (no work per bound array)
        starts = plan.bound_starts
        if starts:
            for k in plan.donated_pos:
                n = arrays[k].nbytes
                if not n:
                    continue
                lo, hi = ptrs[k], ptrs[k] + n
                m = bisect.bisect_left(starts, hi) - 1  # the last bound span starting before hi
                if m >= 0 and plan.bound_max_end[m] > lo:
                    for blo, bhi, b in plan.bound_sorted:
                        if blo < hi and lo < bhi:
                            self._overlap_error(plan.free[k], b)

    # --- calls ------------------------------------------------------------------------------
    def __call__(self, *args: Any):
        if len(args) != len(self.sig.params):
            raise ValueError(f"@{self.sig.name} takes {len(self.sig.params)} arguments, got {len(args)}")
        return self._call(self._plan, args)

    def _call(self, plan: _Plan, arrays: Sequence):
        """Run with `arrays`, the plan's free arguments in order (the bound ones live in the plan)."""
        originals = arrays
        if list(map(type, arrays)) != plan.types or list(map(_get_dtype, arrays)) != plan.dts:
            arrays = [self.as_array(i, a) for i, a in zip(plan.free, arrays)]  # converts, or raises by name
        # the symbols, then every dim (one list comparison), then the bounds: all before any copy
        shapes = list(map(_get_shape, arrays))
        env = dict(plan.fixed) if plan.fixed else {}
        try:
            for s, k, j in plan.binds:
                env[s] = shapes[k][j]
        except IndexError:  # a rank too small: as_array names the argument
            arrays = [self.as_array(i, a) for i, a in zip(plan.free, arrays)]
            raise AssertionError("unreachable: an argument of the wrong rank was accepted") from None  # pragma: no cover
        key = tuple([env[s] for s, _, _ in plan.binds])
        facts = plan.cache.get(key)
        if facts is None:
            facts = self._facts(plan, key, env)
        ok = (shapes if plan.all_known else [shapes[k] for k in plan.known_pos]) == facts.shapes
        if ok and plan.dyn_pos:
            ok = _dyn_dims_match(plan, facts, arrays, shapes)
        if not ok or (plan.deferred and not facts.deferred_ok):
            if list(map(_get_ndim, arrays)) != plan.ranks:
                arrays = [self.as_array(i, a) for i, a in zip(plan.free, arrays)]  # the rank error, by name
            self._check_shapes(plan, arrays, facts.env)
        if facts.bound_error:
            raise ValueError(facts.bound_error)
        if not all(map(_get_contig, arrays)):
            arrays = list(arrays)
            for k, i in enumerate(plan.free):
                if not arrays[k].flags.c_contiguous:
                    if i in self._donate:
                        self._check_donated(i, arrays[k])
                    arrays[k] = _contiguous_copy(self.sig, i, arrays[k])
        for k in plan.donated_pos:
            if not arrays[k].flags.writeable:
                self._check_donated(plan.free[k], arrays[k])
        env = facts.env
        outs = []
        donor = self._donor
        for r, shape in enumerate(facts.outs):
            i = donor.get(r)
            if i is None:
                outs.append(np.empty(shape, self._np_out[r]))
            else:  # the donated argument itself
                outs.append(plan.bound[i] if i in plan.bound else arrays[plan.free.index(i)])
        native = self._native
        if native is None:
            return self._call_generic(plan, arrays, originals, outs, env)
        st = plan.state()
        st.busy = True
        try:
            ptrs = _pointer_array(arrays, outs)
            if self._donate:
                self._check_overlaps(plan, arrays, ptrs.tolist())
            st.pairs[plan.ptr_alloc] = ptrs[:, None]
            if st.key != key:
                st.words[plan.size_idx] = facts.size_vals
                st.key = key
            for k in plan.dyn_pos:  # params with '?' dims: their sizes come from the array
                off = plan.offsets[plan.free[k]]
                w = _words(int(ptrs[k]), arrays[k].shape)
                st.buf[off:off + len(w)] = w
            if plan.ws_offset is not None:
                ws = self._workspace_words(st, env, facts.ws)
                if ws is not None:
                    st.buf[plan.ws_offset:plan.ws_offset + len(ws)] = ws
            n = 0
            if native.threaded:
                n = plan.bound_elements + facts.elements
                for k in plan.dyn_pos:
                    n += arrays[k].size
            st.err[0] = 0
            fn = native.function(n)
            if native.packed:
                fn(st.packed)
            else:
                fn(*st.descs)
            code = int(st.err[0])
        finally:
            st.busy = False
            st.ws_hold = None
        return self._finish(plan, code, outs, originals)

    def _call_generic(self, plan: _Plan, arrays: Sequence, originals: Sequence, outs: list, env: dict):
        if self._donate:
            self._check_overlaps(plan, arrays, [a.ctypes.data for a in arrays])
        full = [None] * len(self.sig.params)
        for i, a in plan.bound.items():
            full[i] = a
        for k, i in enumerate(plan.free):
            full[i] = arrays[k]
        err = np.zeros(1, dtype=np.int32)
        self._invoke(*_raw(full), *_raw(outs), *(self.workspace(env) if self.sig.workspace else ()), err)
        return self._finish(plan, int(err[0]), outs, originals)

    def _finish(self, plan: _Plan, code: int, outs: list, originals: Sequence):
        if code:
            sig = self.sig
            msg = sig.messages[code - 1] if 0 < code <= len(sig.messages) else f"check {code}"
            given = ", ".join(f"{sig.arg_names[i]} {tuple(np.shape(a))}" for i, a in zip(plan.free, originals))
            raise ValueError(f"@{sig.name}: shape check failed: {msg} (given: {given})")
        for r, cdt in self._complex_out.items():  # interleaved parts -> the complex array (a view)
            if r not in self._donor:
                outs[r] = outs[r].view(cdt).reshape(outs[r].shape[:-1])
        for r, i in self._donor.items():  # the caller's own array (not a base-class view), updated in place
            outs[r] = plan.bound_originals[i] if i in plan.bound else originals[plan.free.index(i)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    # --- binding parameters once --------------------------------------------------------------
    def param_index(self, key: int | str) -> int:
        """The index of parameter `key` (an index, or a name given by `relax.name`)."""
        n = len(self.sig.params)
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if 0 <= int(key) < n:
                return int(key)
            raise ValueError(f"@{self.sig.name} has {n} parameters; there is no parameter #{key}")
        if isinstance(key, str):
            if key in self._names:
                return self._names[key]
            names = ", ".join(repr(k) for k in self._names) or "none (parameters have no relax.name)"
            raise ValueError(f"@{self.sig.name} has no parameter named {key!r}; names: {names}")
        raise ValueError(f"@{self.sig.name}: a parameter is named by its index or name, got {type(key).__name__}")

    def partial(self, bound: dict) -> "Partial":
        """This entry with the parameters in `bound` ({index or name: array}) bound once: they are
        checked now (dtype, rank, shape, their symbols), kept as C-contiguous arrays, and the
        symbols they bind are fixed. The result takes the remaining parameters, in order."""
        return Partial(self, bound)


class Partial:
    """An entry with some parameters bound (`Function.partial`): `g(*remaining)`. Per call, only
    the remaining arguments are checked and written; the bound ones cost nothing."""

    def __init__(self, fn: Function, bound: dict):
        if not isinstance(bound, dict):
            raise ValueError(f"@{fn.sig.name}.partial takes a dict {{index or name: array}}, got {type(bound).__name__}")
        sig = fn.sig
        arrays: dict[int, np.ndarray] = {}
        originals: dict[int, Any] = {}
        for key, a in bound.items():
            i = fn.param_index(key)
            if i in arrays:
                raise ValueError(f"@{sig.name}.partial: {sig.arg_names[i]} is bound twice")
            originals[i] = a
            arrays[i] = fn.as_array(i, a)
        # the symbols the bound arrays carry as whole dims are fixed (first occurrence, in order)
        fixed, where = {}, {}
        for i in sorted(arrays):
            for j, d in enumerate(sig.params[i].dims):
                if d is not None and d.is_symbol and str(d) not in fixed:
                    fixed[str(d)] = int(arrays[i].shape[j])
                    where[str(d)] = f"{sig.arg_names[i]} dim {j}, bound by partial"
        deferred = []
        for i in sorted(arrays):
            a = arrays[i]
            for j, d in enumerate(sig.params[i].dims):
                if d is None:
                    continue
                if not d.symbols() <= fixed.keys():
                    deferred.append((i, j, d))
                elif a.shape[j] != d.evaluate(fixed):
                    how = "; ".join(f"{s} = {fixed[s]} from {where[s]}" for s in sorted(d.symbols()))
                    raise ValueError(f"@{sig.name}.partial: {sig.arg_names[i]} has shape {tuple(a.shape)}, but dim {j} "
                                     f"must be {d}" + (f" ({how})" if how else "") + f"; the signature is {sig.params[i]}")
        for s, lb in sig.lower:
            if s in fixed and fixed[s] < lb:
                raise ValueError(f"@{sig.name}.partial: symbol {s} = {fixed[s]} (from {where[s]}) is below its lower "
                                 f"bound {lb} (relax.symbol_lower)")
        for s, ub in sig.upper:
            if s in fixed and fixed[s] > ub:
                raise ValueError(f"@{sig.name}.partial: symbol {s} = {fixed[s]} (from {where[s]}) exceeds its upper "
                                 f"bound {ub} (relax.symbol_bounds)")
        for i in sorted(arrays):
            if i in fn._donate:
                fn._check_donated(i, arrays[i])  # written in place: never copied
            elif not arrays[i].flags.c_contiguous:
                arrays[i] = _contiguous_copy(sig, i, arrays[i])
        self.fn = fn
        self.sig = sig
        self.free = tuple(i for i in range(len(sig.params)) if i not in arrays)
        plan = self.plan = _Plan(fn, self.free, fixed, where, tuple(deferred), arrays)
        plan.bound_originals = originals
        spans = {i: (_pointer(a), _pointer(a) + a.nbytes, i) for i, a in arrays.items() if a.nbytes}
        plan.bound_spans = spans
        plan.bound_donated = tuple(i for i in arrays if i in fn._donate)
        others = sorted(v for i, v in spans.items() if i not in fn._donate)
        plan.bound_sorted = others
        plan.bound_starts = [lo for lo, _, _ in others]
        end = 0
        for _, hi, _ in others:
            end = max(end, hi)
            plan.bound_max_end.append(end)
        for i in plan.bound_donated:  # bound donated arrays against the other bound arrays: once, here
            if i in spans:
                lo, hi, _ = spans[i]
                for lo2, hi2, k in spans.values():
                    if k != i and lo2 < hi and lo < hi2:
                        fn._overlap_error(i, k)

    @property
    def params(self) -> tuple[int, ...]:
        """The indices of the parameters this callable takes, in order."""
        return self.free

    def reserve(self, bindings: dict[str, int]) -> int:
        """`Function.reserve` for calls of this partial: the bound parameters' symbols are
        filled in, and this partial's checks for the binding are cached too."""
        if not isinstance(bindings, dict):
            raise ValueError(f"@{self.sig.name}.reserve takes a dict {{symbol: value}}, got {type(bindings).__name__}")
        plan = self.plan
        for s, v in bindings.items():
            if s in plan.fixed and v != plan.fixed[s]:
                raise ValueError(f"@{self.sig.name}.reserve: {s} = {plan.fixed[s]} is fixed by partial, got {v}")
        env = {**bindings, **plan.fixed}
        held = self.fn.reserve(env)
        if all(s in env for s, _, _ in plan.binds):
            key = tuple(int(env[s]) for s, _, _ in plan.binds)
            if key not in plan.cache:
                self.fn._facts(plan, key, dict(plan.fixed, **{s: int(env[s]) for s, _, _ in plan.binds}))
        return held

    def __call__(self, *args: Any):
        if len(args) != len(self.free):
            names = ", ".join(self.sig.arg_names[i] for i in self.free)
            raise ValueError(f"@{self.sig.name} (partial) takes {len(self.free)} arguments ({names}), got {len(args)}")
        return self.fn._call(self.plan, args)


def _containers(args: tuple) -> bool:
    """Whether an argument is a pytree container (never an array): dict, list, tuple or None."""
    return any(a is None or isinstance(a, (dict, list, tuple)) for a in args)


class Executable:
    """A compiled module: `exe(*arrays)` calls its main entry; `exe["name"]` any other."""

    def __init__(self, functions: dict[str, Function], main: str, keepalive: Any = None, artifacts=None):
        self.functions = functions
        self.main = main
        self._keepalive = keepalive
        self.artifacts = artifacts or {}
        # (in_tree, out_tree) of a compiled jax.export.Exported: `exe(params, x)` with its pytrees
        self.pytree = None

    def __getitem__(self, name: str) -> Function:
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"no public function @{name}; have {', '.join('@' + n for n in self.functions)}") from None

    def __reduce__(self):
        raise TypeError(_NO_PICKLE.format(type(self).__name__))

    def __call__(self, *args, **kwargs):
        if self.pytree is not None and (kwargs or _containers(args) or len(args) != self.pytree[0].num_leaves):
            return self._call_tree(args, kwargs)
        if kwargs:
            raise TypeError(f"@{self.main} takes positional arrays, got keyword arguments {', '.join(kwargs)}")
        return self.functions[self.main](*args)

    def _call_tree(self, args: tuple, kwargs: dict):
        """The call of a compiled jax.export.Exported with the exported function's arguments as
        jax takes them (pytrees: a params dict, ...): flattened as jax flattens them, checked
        against the exported structure, and the results put back into its result structure."""
        from jax import tree_util

        in_tree, out_tree = self.pytree
        leaves, tree = tree_util.tree_flatten((args, kwargs))
        if tree != in_tree:
            raise ValueError(f"@{self.main} was exported for arguments structured as {in_tree}; got {tree}")
        out = self.functions[self.main](*leaves)
        outs = list(out) if isinstance(out, tuple) else [out]
        return tree_util.tree_unflatten(out_tree, outs)

    def reserve(self, bindings: dict[str, int], name: str | None = None) -> int:
        """Prepare calls with the symbols at `bindings` (`{"s": 2048}`) or smaller: every entry
        (or entry `name`) whose storage sizes these symbols decide grows its storage blocks now
        and faults their pages in, in the calling thread (`Function.reserve`), so that a first
        call at those shapes allocates nothing. ValueError for a symbol no entry has. Returns the
        storage bytes this thread holds for those entries."""
        if not isinstance(bindings, dict):
            raise ValueError(f"reserve takes a dict {{symbol: value}}, got {type(bindings).__name__}")
        if name is not None:
            return self[name].reserve(bindings)  # every symbol given must be that entry's
        funcs = list(self.functions.values())
        known = set()
        for f in funcs:
            known |= {s for s, _, _ in f._plan.binds} | set(f._plan.derived_names)
        unknown = sorted(set(bindings) - known)
        if unknown:
            raise ValueError(f"reserve: no entry has symbol {', '.join(map(repr, unknown))} "
                             f"(symbols: {', '.join(sorted(known)) or 'none'})")
        # the entries whose storage sizes these symbols decide (directly, or through the symbols
        # derived from a complete binding)
        funcs = [f for f in funcs if set(f._ws_syms) <= bindings.keys()
                 or all(s in bindings for s, _, _ in f._plan.binds)]
        held = 0
        for f in funcs:
            mine = {b for b, _, _ in f._plan.binds} | set(f._plan.derived_names)
            held += f.reserve({s: v for s, v in bindings.items() if s in mine})
        return held

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

