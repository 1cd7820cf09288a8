"""The program generator of the differential fuzzer: a seed -> a random JAX program (as Python
source, so that a failure prints a self-contained repro), its argument specs with symbolic dims,
and its inputs at each binding of the symbols.

A program is a list of statements `vK = <jax expression>` over the arguments `a0, a1, ...`; each
statement is drawn from an op family (elementwise unary/binary, comparisons, logic, where, clip,
broadcasting, reshape, transpose, slicing, concat, reductions, dot/matmul/einsum, gather/take,
iota/arange, astype, softmax-like patterns).  The generator tracks each value's dims as Python
expressions over the symbols (`"n"`, `"n*3"`, `"len(range(n)[1:-1])"`), compared by evaluating them
at a few points, so every program it writes is well-shaped and exports with `jax.export`.

Float values also carry an `exact` flag: a value is exact when it is an input or comes from exact
ops (negation, max, select, reshape, ...).  Ops whose result jumps on a tiny change of a float
operand (floor, ceil, sign, comparisons, float->int casts, remainder) only take exact operands,
so a difference of an ulp in `exp` between XLA and us never turns into a difference of 1 in an
integer -- a float mismatch is then judged with a tolerance, an exact one bit for bit.

The generator is not restricted to avoid known compiler bugs; it only leaves out what the
importer rejects with a clean `UnsupportedOpError` (UNSUPPORTED below) and forms whose result
jax itself leaves implementation-defined (out-of-range float->int casts, out-of-bounds indices
without a mode).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

import numpy as np

SYMBOLS = ("n", "m")
# Bindings of the symbols each program runs at (one compile): 1, primes, a larger size.
BINDINGS = ({"n": 1, "m": 1}, {"n": 7, "m": 3}, {"n": 33, "m": 17})
# Extra points at which dim expressions are compared (not run).
_PROBE = BINDINGS + ({"n": 4, "m": 9}, {"n": 12, "m": 5}, {"n": 2, "m": 2})

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "int16", "int32", "int64")
UINTS = ("uint8", "uint16", "uint32", "uint64")  # from V3_FIRST_SEED on
DTYPES = ("bool",) + INTS + FLOATS
DTYPES_V3 = DTYPES + UINTS

# jax constructs the importer rejects with a clean UnsupportedOpError (so they are not generated).
UNSUPPORTED = {
    "lax.dynamic_slice / dynamic_update_slice with traced starts": "not generated: jax cannot export "
    "them on symbolic dims here",
}

_DT_SHORT = {"bool": "jnp.bool_", "int8": "jnp.int8", "int16": "jnp.int16", "int32": "jnp.int32",
             "int64": "jnp.int64", "uint8": "jnp.uint8", "uint16": "jnp.uint16", "uint32": "jnp.uint32",
             "uint64": "jnp.uint64", "float16": "jnp.float16", "bfloat16": "jnp.bfloat16",
             "float32": "jnp.float32", "float64": "jnp.float64", "complex64": "jnp.complex64",
             "complex128": "jnp.complex128"}


def is_float(dt: str) -> bool:
    return dt in FLOATS


def is_int(dt: str) -> bool:
    return dt in INTS or dt in UINTS


def dim_value(expr: str, env: dict) -> int:
    return int(eval(expr, {"len": len, "range": range, "max": max, "min": min}, dict(env)))  # noqa: S307


def _fp(expr: str) -> tuple:
    return tuple(dim_value(expr, e) for e in _PROBE)


@dataclass
class Value:
    name: str
    dims: tuple[str, ...]  # python expressions over SYMBOLS
    dtype: str
    exact: bool = True
    deps: tuple[str, ...] = ()

    @property
    def rank(self) -> int:
        return len(self.dims)

    def fp(self, i: int) -> tuple:
        return _fp(self.dims[i])

    def min_dim(self, i: int) -> int:
        return min(_fp(self.dims[i]))

    def size_can_be_zero(self) -> bool:
        return any(0 in _fp(d) for d in self.dims)


@dataclass
class Arg:
    name: str
    dims: tuple  # ints and symbol names
    dtype: str
    index_into: str | None = None  # a dim expression: the values are indices in [-d, d)
    # or "any": indices anywhere in [-2d-1, 2d+1]; or "distinct": distinct indices in [0, d + count)
    # (a scatter's set at a repeated index is implementation-defined; those past d are dropped)
    index_mode: str = "in_bounds"
    # Floats without NaN and infinities: a convolution's kernel, which StableHLO multiplies by the
    # padding's zeros (0 * inf = NaN) where XLA's CPU convolution skips the padding (seed 2370018)
    finite: bool = False
    # Finite and at most 100 in magnitude (from V7_FIRST_SEED on, a convolution's kernel): a product
    # of an input near 1e30 with a kernel tap near 1e30 overflows, and whether the overflow meets an
    # infinity of the other sign as NaN or passes inside a fused multiply-add is the order's (seed
    # 2390146: a bf16 depthwise convolution, inf here and NaN in jax.jit, then clipped to 1.0)
    moderate: bool = False


class SpecJnp:
    """jax.numpy with min/max reductions that propagate NaN as StableHLO's `minimum`/`maximum`
    and numpy do. XLA's CPU backend (jax 0.10) drops a NaN from a min or max over the minor axis of
    a rank-3 array of 16 or more elements (`jnp.min(a, axis=2)` of [16, 16, 16] with a NaN first
    in each row: no NaN in the result; rank 2 and shorter rows are right): found by seed 2200167,
    where relax-mlir was right and the reference was not."""

    def __init__(self, jnp):
        self._jnp = jnp

    def __getattr__(self, name):
        return getattr(self._jnp, name)

    def _nan_reduce(self, op, a, axis=None, keepdims=False, **kw):
        jnp = self._jnp
        r = op(a, axis=axis, keepdims=keepdims, **kw)
        if not jnp.issubdtype(jnp.result_type(a), jnp.inexact):
            return r
        nan = jnp.any(jnp.isnan(a), axis=axis, keepdims=keepdims)
        return jnp.where(nan, jnp.asarray(jnp.nan, r.dtype), r)

    def min(self, a, axis=None, keepdims=False, **kw):
        return self._nan_reduce(self._jnp.min, a, axis, keepdims, **kw)

    def max(self, a, axis=None, keepdims=False, **kw):
        return self._nan_reduce(self._jnp.max, a, axis, keepdims, **kw)


@dataclass
class Program:
    seed: int
    args: list[Arg]
    stmts: list[tuple[str, str]]  # (name, expression)
    values: dict[str, Value]
    outputs: list[str]
    specials: bool  # inputs include NaN/Inf/extremes
    families: list[str] = field(default_factory=list)
    bound: list[str] | None = None  # the symbols bound at each run (a restricted program keeps them)

    @property
    def symbols(self) -> list[str]:
        return sorted({d for a in self.args for d in a.dims if isinstance(d, str)})

    def source(self) -> str:
        """The jax function as Python source (jax, jnp and lax in scope)."""
        lines = [f"def f({', '.join(a.name for a in self.args)}):"]
        lines += [f"    {n} = {e}" for n, e in self.stmts]
        outs = ", ".join(self.outputs)
        lines.append(f"    return ({outs},)" if len(self.outputs) == 1 else f"    return {outs}")
        return "\n".join(lines) + "\n"

    def function(self, reference: bool = False):
        """The program as a jax function. `reference=True`: the comparison's reference, jax with
        its known deviations from the StableHLO spec worked around (SpecJnp)."""
        import jax
        import jax.numpy as jnp
        from jax import lax

        ns = {"jax": jax, "jnp": SpecJnp(jnp) if reference else jnp, "lax": lax, "np": np}
        exec(self.source(), ns)  # noqa: S102
        return ns["f"]

    def specs_source(self) -> str:
        syms = self.symbols
        lines = []
        if syms:
            lines.append(f"{', '.join(syms)}{',' if len(syms) == 1 else ''} = "
                         f"jax.export.symbolic_shape({', '.join(syms)!r})")
        specs = ", ".join(f"jax.ShapeDtypeStruct(({', '.join(str(d) for d in a.dims)}{',' if len(a.dims) == 1 else ''}),"
                          f" {_DT_SHORT[a.dtype]})" for a in self.args)
        lines.append(f"specs = [{specs}]")
        return "\n".join(lines) + "\n"

    def specs(self):
        import jax
        import jax.numpy as jnp

        ns = {"jax": jax, "jnp": jnp}
        exec(self.specs_source(), ns)  # noqa: S102
        return ns["specs"]

    def bindings(self) -> list[dict]:
        syms = self.bound if self.bound is not None else self.symbols
        if not syms:
            return [{}]
        return [{s: b[s] for s in syms} for b in BINDINGS]

    def exact_outputs(self) -> list[bool]:
        return [self.values[o].exact for o in self.outputs]

    def output_precisions(self) -> list[str | None]:
        """For each output, the coarsest float dtype its value passed through inexactly (a bf16
        layer norm cast to f64 is only as close to jax as bf16 allows), or None."""
        order = {"bfloat16": 0, "float16": 1, "float32": 2, "float64": 3}
        memo: dict[str, str | None] = {}

        def coarsest(name: str) -> str | None:
            if name not in memo:
                memo[name] = None
                v = self.values.get(name)
                if v is not None:
                    cands = [coarsest(d) for d in v.deps] + ([v.dtype] if is_float(v.dtype) and not v.exact else [])
                    cands = [c for c in cands if c is not None]
                    memo[name] = min(cands, key=order.__getitem__) if cands else None
            return memo[name]

        return [coarsest(o) for o in self.outputs]

    def order_dependent_outputs(self) -> list[bool]:
        """For each output, whether it passed through a float sum of many terms (dot, sum, prod,
        mean, a norm): where such a sum overflows or meets infinities of both signs, IEEE leaves its
        non-finite value to the order and to FMA contraction, which jax itself does not fix
        (jnp.matmul of one bf16 input: inf, the same with preferred_element_type=f32: nan)."""
        exprs = dict(self.stmts)
        memo: dict[str, bool] = {}

        def summed(name: str) -> bool:
            if name not in memo:
                memo[name] = False
                v = self.values.get(name)
                if v is not None:
                    fam = self.families[int(name[1:])] if name in exprs else None
                    here = is_float(v.dtype) and (
                        fam in ("dot", "norm", "conv", "linalg")
                        or (fam == "reduce" and exprs[name].startswith(("jnp.sum", "jnp.prod", "jnp.mean")))
                        or (fam == "cumulative" and exprs[name].startswith(("lax.cumsum", "lax.cumprod")))
                        or (fam == "pool" and "lax.add" in exprs[name])
                        or (fam == "scatter" and (".add(" in exprs[name] or ".multiply(" in exprs[name]))
                        or (fam == "loop" and ("+" in exprs[name] or "*" in exprs[name]))
                        or (fam == "complex" and ("jnp.sum(" in exprs[name] or " @ " in exprs[name]))
                        or (fam == "data" and exprs[name].startswith(DATA_SUMS)))
                    memo[name] = here or any(summed(d) for d in v.deps)
            return memo[name]

        return [summed(o) for o in self.outputs]

    def unit_scale_outputs(self) -> list[bool]:
        """For each output, whether it is a normalized value (softmax, a layer norm) or one moved
        about by shape-only ops: its natural scale is 1, not its own largest element. A layer norm
        of a constant row is all rounding noise of `x - mean(x)` (an ulp of |x| over sqrt(eps):
        seed 1312036, f64 where(False, ., scalar) -> 1e-14 on both sides, 10% apart), so its
        error is judged against 1; a softmax of a row it underflows likewise. So is a unary op of
        such a value whose slope is bounded on O(1) arguments (square, exp, tanh, ...: the noise
        stays noise); not log, sqrt, rsqrt or reciprocal, which blow it up near 0. So is a sum,
        mean, max or min of such values, a `where` choosing among them, and a product with one of them."""
        exprs = dict(self.stmts)
        moved = ("reshape", "transpose", "slice", "concat", "broadcast")
        bounded = ("-", "jnp.abs(", "jax.nn.relu(", "jnp.clip(", "jnp.where(", "jnp.exp(", "jnp.expm1(",
                   "jax.scipy.special.erf(", "jnp.tanh(", "jax.nn.sigmoid(", "jnp.sin(", "jnp.cos(", "jnp.square(",
                   "jnp.exp2(", "jax.nn.gelu(", "jax.nn.silu(", "jax.nn.softplus(", "1.0 / (1.0 + jnp.exp(-")
        # a sum, mean, max or min of normalized values: its noise is the terms' (seed 1900032: an
        # f16 sum over 6 layer-normed rows of 2, +-1 each, cancelling to 5e-4 against jax's 2e-3)
        summed = ("jnp.sum(", "jnp.mean(", "jnp.max(", "jnp.min(")
        memo: dict[str, bool] = {}

        def unit(name: str) -> bool:
            if name not in memo:
                memo[name] = False
                v = self.values.get(name)
                if v is not None and name in exprs and is_float(v.dtype):
                    fam = self.families[int(name[1:])]
                    if fam == "norm":
                        # a variance too (seed 2300948: var of [x, x, x], 5.7e-14 here, 0 in jax.jit;
                        # the scale is max(1, largest element): a large variance is judged by itself)
                        memo[name] = not exprs[name].startswith("jax.nn.log_softmax")
                    elif (fam in moved or (fam == "unary" and exprs[name].startswith(bounded))
                          or (fam == "reduce" and exprs[name].startswith(summed))):
                        memo[name] = bool(v.deps) and all(unit(d) for d in v.deps)
                    elif fam == "binary" and re.fullmatch(r"\w+ \* \w+", exprs[name]):
                        # a product with a normalized value: its noise is that value's noise times
                        # the other factor (seed 2300387: a layer norm of constant rows, 0 here and
                        # +-2e-4 in jax.jit, times an iota): judged against max(1, largest element)
                        memo[name] = any(unit(d) for d in v.deps if is_float(self.values[d].dtype))
                    elif fam == "where":
                        # a selection of normalized values (the condition is not a value; a fill
                        # constant is at most what the scale becomes: max(1, largest element))
                        picked = [d for d in v.deps if is_float(self.values[d].dtype)]
                        memo[name] = bool(picked) and all(unit(d) for d in picked)
            return memo[name]

        return [unit(o) for o in self.outputs]

    def restricted(self, outputs: list[str]) -> "Program":
        """The same program computing only `outputs` (statements and arguments they need)."""
        need, stack = set(), list(outputs)
        while stack:
            v = stack.pop()
            if v in need:
                continue
            need.add(v)
            stack.extend(self.values[v].deps)
        args = [a for a in self.args if a.name in need]
        stmts = [(n, e) for n, e in self.stmts if n in need]
        return Program(self.seed, args, stmts, self.values, list(outputs), self.specials, self.families,
                       self.bound if self.bound is not None else self.symbols)


# -- inputs ------------------------------------------------------------------------------------

_FLOAT_SPECIALS = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e30, -1e30, 1e-30, 65504.0, 100.0)


def _int_extremes(dt):
    info = np.iinfo(dt)
    if info.min == 0:  # unsigned: the ends and the old sign bit's neighbourhood
        half = (info.max >> 1) + 1
        return np.array((0, info.max, 1, info.max - 1, half, half - 1), dtype=dt)
    return np.array((info.min, info.max, 0, -1, 1, info.min + 1), dtype=dt)


def make_inputs(prog: Program, env: dict) -> list[np.ndarray]:
    """The arguments at one binding (deterministic in the seed and the binding)."""
    import ml_dtypes  # noqa: F401  (numpy bfloat16)

    out = []
    for a in prog.args:
        # one generator per argument, so a restricted program (minimize) gets the same values
        rng = np.random.default_rng([prog.seed, int(a.name[1:])] + [env.get(s, 0) for s in SYMBOLS])
        shape = tuple(d if isinstance(d, int) else env[d] for d in a.dims)
        if a.index_into is not None:
            # (an index argument whose gather the generator dropped may name an unbound symbol)
            d = dim_value(a.index_into, {**{s: 1 for s in SYMBOLS}, **env})
            if a.index_mode == "any":
                # (an unsigned index is drawn from 0: a negative one would wrap past 2^31, where
                # jax.export's module converts it to i32 first and jax.jit clamps it unsigned)
                x = rng.integers(0 if a.dtype in UINTS else -2 * d - 1, 2 * d + 2, size=shape)
            elif a.index_mode == "distinct":
                count = int(np.prod(shape))
                x = rng.permutation(d + count)[:count].reshape(shape)
            else:
                x = rng.integers(-d, d, size=shape) if d > 0 else np.zeros(shape, np.int64)
            out.append(x.astype(a.dtype))
        elif a.dtype == "bool":
            out.append(rng.random(shape) < 0.5)
        elif is_int(a.dtype):
            x = rng.integers(0 if a.dtype in UINTS else -9, 10, size=shape).astype(a.dtype)
            if prog.specials:
                ext = _int_extremes(a.dtype)
                mask = rng.random(shape) < 0.2
                x = np.where(mask, ext[rng.integers(0, len(ext), size=shape)], x)
            out.append(x.astype(a.dtype))
        elif a.dtype in COMPLEX:  # moderate finite parts (special values: branch-cut conventions)
            x = rng.uniform(-8, 8, size=shape + (2,))
            out.append((x[..., 0] + 1j * x[..., 1]).astype(a.dtype))
        else:
            x = rng.standard_normal(shape) * (3.0 if rng.random() < 0.3 else 1.0)
            if prog.specials:
                sp = np.array(_FLOAT_SPECIALS)
                mask = rng.random(shape) < 0.2
                x = np.where(mask, sp[rng.integers(0, len(sp), size=shape)], x)
            dt = np.dtype("bfloat16") if a.dtype == "bfloat16" else np.dtype(a.dtype)
            with np.errstate(over="ignore"):
                x = x.astype(dt)
            if a.finite or a.moderate:
                x = np.where(np.isfinite(x.astype(np.float64)), x, np.asarray(0.5, dt))
            if a.moderate:
                x = np.clip(x.astype(np.float64), -100.0, 100.0).astype(dt)
            out.append(x)
    return out


# -- the generator -----------------------------------------------------------------------------

# The op families and their weights. Seeds below V2_FIRST_SEED draw from the first table (their
# programs, which earlier campaigns and regression tests name by seed, stay what they were); from
# V2_FIRST_SEED on the table adds cumulative scans, pooling and padding (and the slice and unary
# families their strides on symbolic dims, integer indices and erf).
FAMILIES_V1 = (("unary", 14), ("binary", 16), ("power_int", 2), ("compare", 6), ("logic", 4), ("where", 6),
               ("clip", 3), ("broadcast", 6), ("reshape", 6), ("transpose", 4), ("slice", 8), ("concat", 5),
               ("reduce", 8), ("norm", 4), ("dot", 6), ("gather", 5), ("iota", 3), ("astype", 6))
FAMILIES_V2 = FAMILIES_V1 + (("cumulative", 3), ("pool", 3), ("pad", 3))
V2_FIRST_SEED = 2_310_000
# From V3_FIRST_SEED on: unsigned integers among the dtypes, bitwise ops and shifts, sorting and
# arg-reductions.
FAMILIES_V3 = FAMILIES_V2 + (("bitwise", 5), ("sort", 4))
V3_FIRST_SEED = 2_350_000
# From V4_FIRST_SEED on: bitwise and / or / xor reductions of integers and booleans (the V3 table).
V4_FIRST_SEED = 2_360_000
# From V5_FIRST_SEED on: convolutions (1-D and 2-D, either channel layout, depthwise).
FAMILIES_V5 = FAMILIES_V3 + (("conv", 4),)
V5_FIRST_SEED = 2_370_000
# From V6_FIRST_SEED on: scatters (set / add / multiply / min / max, every index mode), dynamic
# slices and updates at arbitrary start indices, and loops and branches (fori_loop, scan, cond,
# switch).
FAMILIES_V6 = FAMILIES_V5 + (("scatter", 5), ("dynamic", 4), ("loop", 4))
V6_FIRST_SEED = 2_380_000
# From V7_FIRST_SEED on: complex arithmetic inside the program (its arguments and results real).
FAMILIES_V7 = FAMILIES_V6 + (("complex", 5),)
V7_FIRST_SEED = 2_390_000
# From V8_FIRST_SEED on: complex arguments and results (complex64 / complex128 arrays in and out of
# the function).
FAMILIES_V8 = FAMILIES_V7 + (("complex_io", 8),)
V8_FIRST_SEED = 2_400_000
# From V9_FIRST_SEED on: complex sin, cos, tan, tanh, log1p, expm1, rsqrt, logistic and powers in
# the complex families (each kept off its poles and branch points), drawn more often.
V9_FIRST_SEED = 2_410_000
FAMILIES_V9 = tuple((n, 12 if n in ("complex", "complex_io") else w) for n, w in FAMILIES_V8)
# From V10_FIRST_SEED on: values computed the long way round to themselves (x + 0, x * 1,
# where(c, where(c, x, 0), x), max(x, x), -(-x), casts there and back, (x - y) + y), which upstream
# canonicalization folds away inside a kernel: the kernel's result is then its input's storage
# (seed 2412170, where(c, where(c, x, 0), x): the plan reused that storage while the result lived).
FAMILIES_V10 = FAMILIES_V9 + (("identity", 12),)
V10_FIRST_SEED = 2_420_000
# From V11_FIRST_SEED on: the elementwise functions no other family draws (inverse trigonometric
# and hyperbolic functions, lgamma / digamma, erfc / erf_inv, rounding modes, logaddexp, hypot,
# atan2, copysign, nextafter, sign bits and finiteness tests, negative integer powers), in every
# float dtype.
FAMILIES_V11 = FAMILIES_V10 + (("special", 12),)
V11_FIRST_SEED = 2_430_000
# From V12_FIRST_SEED on: dense linear algebra on well-conditioned matrices (A = X X^T + m I of a
# float argument X): cholesky, solve, inv, slogdet, eigvalsh, singular values, QR's R, triangular
# and tridiagonal solves, over symbolic and batched sizes.
FAMILIES_V12 = FAMILIES_V11 + (("linalg", 10),)
V12_FIRST_SEED = 2_440_000
# From V13_FIRST_SEED on: data-dependent selection and indexing as models and samplers use it
# (top_k, searchsorted, segment reductions, bincount, one_hot, take_along_axis, nonzero and
# unique with a size, while loops whose trip count depends on the data, roll, bands, diff,
# repeat and tile, interp, masked logsumexp / softmax, three-operand einsums, mixed-precision
# dots, select, NaN-ignoring reductions, reduce_precision and bitcasts).
FAMILIES_V13 = FAMILIES_V12 + (("data", 50),)
V13_FIRST_SEED = 2_450_000
COMPLEX = ("complex64", "complex128")
# the data family's forms that sum floats (their order is the implementation's)
DATA_SUMS = ("jax.ops.segment_sum", "jax.ops.segment_prod", "jnp.bincount", "jax.nn.logsumexp", "jax.nn.softmax",
             "jnp.einsum", "jnp.matmul", "jnp.nansum", "jnp.nanmean", "jnp.interp")


class _Gen:
    def __init__(self, seed: int):
        self.seed = seed
        self.r = random.Random(seed)
        self.v2 = seed >= V2_FIRST_SEED
        self.v3 = seed >= V3_FIRST_SEED
        self.v4 = seed >= V4_FIRST_SEED
        self.v5 = seed >= V5_FIRST_SEED
        self.v6 = seed >= V6_FIRST_SEED
        self.v7 = seed >= V7_FIRST_SEED
        self.v8 = seed >= V8_FIRST_SEED
        self.v9 = seed >= V9_FIRST_SEED
        self.v10 = seed >= V10_FIRST_SEED
        self.v11 = seed >= V11_FIRST_SEED
        self.v12 = seed >= V12_FIRST_SEED
        self.v13 = seed >= V13_FIRST_SEED
        self.dtypes = DTYPES_V3 if self.v3 else DTYPES
        self.ints = INTS + UINTS if self.v3 else INTS
        self.args: list[Arg] = []
        self.stmts: list[tuple[str, str]] = []
        self.values: dict[str, Value] = {}
        self.pool: list[str] = []
        self.families: list[str] = []
        nsym = self.r.choice((0, 1, 1, 2, 2))
        self.syms = list(SYMBOLS[:nsym])
        self.zero_dims = self.r.random() < 0.08

    # values and arguments

    def atom(self) -> int | str:
        r = self.r.random()
        if self.syms and r < 0.5:
            return self.r.choice(self.syms)
        if self.zero_dims and r < 0.6:
            return 0
        return self.r.choice((1, 1, 2, 3, 4, 5, 6))

    def new_arg(self, dims, dtype, index_into=None, index_mode="in_bounds", finite=False, moderate=False) -> Value:
        name = f"a{len(self.args)}"
        self.args.append(Arg(name, tuple(dims), dtype, index_into, index_mode, finite, moderate))
        v = Value(name, tuple(str(d) for d in dims), dtype, True, ())
        self.values[name] = v
        if dtype not in COMPLEX:  # (the families take real values: a complex one is never picked)
            self.pool.append(name)
        return v

    def emit(self, expr, dims, dtype, exact, deps, family) -> Value:
        name = f"v{len(self.stmts)}"
        self.stmts.append((name, expr))
        v = Value(name, tuple(dims), dtype, exact, tuple(d.name for d in deps))
        self.values[name] = v
        if dtype not in COMPLEX:
            self.pool.append(name)
        self.families.append(family)
        return v

    def pick(self, pred=lambda v: True) -> Value | None:
        cands = [self.values[n] for n in self.pool if pred(self.values[n])]
        if not cands:
            return None
        # prefer recent values, so programs are chains rather than fans
        if self.stmts and cands[-1].name == self.stmts[-1][0] and self.r.random() < 0.5:
            return cands[-1]
        w = [(1.0 + i) ** 2 for i in range(len(cands))]
        return self.r.choices(cands, weights=w)[0]

    def some_arg(self, dtype=None) -> Value:
        dt = dtype or self.r.choice(self.dtypes)
        rank = self.r.choice((0, 1, 1, 2, 2, 2, 3))
        return self.new_arg([self.atom() for _ in range(rank)], dt)

    def operand(self, pred=lambda v: True, dtype=None) -> Value:
        v = self.pick(pred) if self.r.random() < 0.85 else None
        return v if v is not None else self.some_arg(dtype)

    def same_dims(self, a: Value, b: Value) -> bool:
        return a.rank == b.rank and all(a.fp(i) == b.fp(i) for i in range(a.rank))

    def bcast_dims(self, a: Value, b: Value):
        """numpy broadcast of a and b's dims, or None."""
        ra, rb = a.rank, b.rank
        r = max(ra, rb)
        out = []
        for i in range(r):
            da = a.dims[i - (r - ra)] if i >= r - ra else None
            db = b.dims[i - (r - rb)] if i >= r - rb else None
            if da is None:
                out.append(db)
            elif db is None:
                out.append(da)
            elif _fp(da) == _fp(db):
                out.append(da)
            elif da == "1":
                out.append(db)
            elif db == "1":
                out.append(da)
            else:
                return None
        return tuple(out)

    def partner(self, a: Value, dtype=None) -> Value:
        """A value of a's dtype (or `dtype`) broadcastable with a: an existing one, a new argument
        of a's shape with some dims 1, or a scalar."""
        dt = dtype or a.dtype
        c = self.pick(lambda v: v.dtype == dt and v.name != a.name and self.bcast_dims(a, v) is not None)
        if c is not None and self.r.random() < 0.6:
            return c
        if self.r.random() < 0.15:
            return self.new_arg([], dt)
        dims = []
        for d in a.dims[self.r.randint(0, a.rank):] if self.r.random() < 0.3 else a.dims:
            atom = d if _is_atom(d) else None
            if atom is None or self.r.random() < 0.25:
                dims.append(1)
            else:
                dims.append(int(atom) if atom.isdigit() else atom)
        return self.new_arg(dims, dt)

    # op families

    def f_unary(self):
        x = self.operand()
        dt = x.dtype
        if dt == "bool":
            return self.emit(f"jnp.logical_not({x.name})" if self.r.random() < 0.5 else f"~{x.name}",
                             x.dims, dt, True, [x], "unary")
        if is_int(dt):
            op = self.r.choice(("-{}", "jnp.abs({})", "jnp.sign({})", "{0} * {0}", "jnp.square({})"))
            return self.emit(op.format(x.name), x.dims, dt, True, [x], "unary")
        exact_ops = ["-{}", "jnp.abs({})", "jax.nn.relu({})", "jnp.clip({}, 0, 6)",
                     "jnp.where({0} > 0, {0}, 0.01 * {0})"]
        jumpy = ["jnp.floor({})", "jnp.ceil({})", "jnp.sign({})"]
        smooth = ["jnp.exp({})", "jnp.expm1({})", "jnp.log({})", "jnp.log1p({})", "jnp.tanh({})",
                  "jax.nn.sigmoid({})", "jnp.sqrt({})", "lax.rsqrt({})", "jnp.sin({})", "jnp.cos({})",
                  "jnp.square({})", "jnp.reciprocal({})", "jnp.exp2({})", "jnp.log2({})",
                  "jax.nn.gelu({}, approximate=False)", "jax.nn.gelu({})", "jax.nn.silu({})",
                  "jax.nn.softplus({})", "1.0 / (1.0 + jnp.exp(-{}))", "jnp.isnan({})"]
        if self.v2:
            smooth.append("jax.scipy.special.erf({})")
        if self.v2 and not x.exact:
            # NaN or an infinity's sign on the side of 0 an inexact value lands (seed 2320189: sqrt
            # of an f16 cumsum cancelling to -1e-5 in jax.jit, +6e-5 here): exact operands only
            smooth = [o for o in smooth if o not in ("jnp.log({})", "jnp.sqrt({})", "lax.rsqrt({})",
                                                     "jnp.reciprocal({})", "jnp.log2({})", "jnp.log1p({})")]
        ops = exact_ops + smooth + (jumpy if x.exact else [])
        op = self.r.choice(ops)
        if op == "jnp.isnan({})":
            return self.emit(op.format(x.name), x.dims, "bool", True, [x], "unary")
        exact = x.exact and (op in exact_ops or op in jumpy) and "0.01" not in op
        return self.emit(op.format(x.name), x.dims, dt, exact, [x], "unary")

    def f_binary(self):
        a = self.operand(lambda v: v.dtype != "bool")
        if a.dtype == "bool":
            return self.f_logic()
        b = self.partner(a)
        dims = self.bcast_dims(a, b)
        dt = a.dtype
        if is_int(dt):
            op = self.r.choice(("{} + {}", "{} - {}", "{} * {}", "jnp.maximum({}, {})", "jnp.minimum({}, {})",
                                "{} // {}", "{} % {}", "lax.div({}, {})", "lax.rem({}, {})",
                                "jnp.clip({}, {}, None)"))
            if op.startswith("lax.") and self.same_dims(a, b) is False:
                # lax ops do not broadcast: broadcast both first
                op = "lax.%s(*jnp.broadcast_arrays({}, {}))" % op[4:7]
            return self.emit(op.format(a.name, b.name), dims, dt, True, [a, b], "binary")
        ops = ["{} + {}", "{} - {}", "{} * {}", "{} / {}", "jnp.maximum({}, {})", "jnp.minimum({}, {})",
               "jnp.power({}, {})", "{} - 2.5 * {}"]
        if a.exact and b.exact:
            ops += ["jnp.remainder({}, {})", "jnp.fmod({}, {})"]
        op = self.r.choice(ops)
        exact = a.exact and b.exact and op.startswith("jnp.m")
        if self.r.random() < 0.15:  # a python scalar operand (weakly typed)
            c = self.r.choice((0.5, -1.0, 2.0, 3.0, 1e-3))
            return self.emit(op.format(a.name, repr(c)), a.dims, dt, exact, [a], "binary")
        return self.emit(op.format(a.name, b.name), dims, dt, exact, [a, b], "binary")

    def f_power_int(self):
        a = self.operand(lambda v: is_int(v.dtype) or is_float(v.dtype))
        if a.dtype == "bool":
            a = self.some_arg("int32")
        k = self.r.choice((0, 1, 2, 3, 5))
        return self.emit(f"{a.name} ** {k}", a.dims, a.dtype, a.exact and is_int(a.dtype), [a], "binary")

    def f_compare(self):
        a = self.operand(lambda v: v.exact)
        b = self.partner(a)
        if not b.exact:
            b = self.new_arg([d if not d.isdigit() else int(d) for d in a.dims] if all(_is_atom(d) for d in a.dims)
                             else [], a.dtype)
        dims = self.bcast_dims(a, b)
        op = self.r.choice(("==", "!=", "<", "<=", ">", ">="))
        if self.r.random() < 0.2:
            return self.emit(f"{a.name} {op} 0", a.dims, "bool", True, [a], "compare")
        return self.emit(f"{a.name} {op} {b.name}", dims, "bool", True, [a, b], "compare")

    def f_logic(self):
        a = self.pick(lambda v: v.dtype == "bool") or self.some_arg("bool")
        b = self.partner(a, "bool")
        dims = self.bcast_dims(a, b)
        op = self.r.choice(("{} & {}", "{} | {}", "jnp.logical_and({}, {})", "jnp.logical_or({}, {})",
                            "jnp.maximum({}, {})", "jnp.minimum({}, {})", "{} == {}", "{} != {}",
                            "{} < {}", "{} >= {}"))
        return self.emit(op.format(a.name, b.name), dims, "bool", True, [a, b], "logic")

    def f_where(self):
        a = self.operand()
        b = self.partner(a)
        dims = self.bcast_dims(a, b)
        tmp = Value("_", dims, "bool")
        c = self.pick(lambda v: v.dtype == "bool" and self.bcast_dims(tmp, v) is not None)
        if c is None:
            c = self.partner(tmp, "bool")
        out = self.bcast_dims(tmp, c)
        if self.r.random() < 0.2:
            fill = self.r.choice(("0", "1", "-1e9", "-jnp.inf", "jnp.nan")) if is_float(a.dtype) else "0"
            return self.emit(f"jnp.where({c.name}, {a.name}, {fill})", self.bcast_dims(c, a), a.dtype, a.exact,
                             [c, a], "where")
        return self.emit(f"jnp.where({c.name}, {a.name}, {b.name})", out, a.dtype, a.exact and b.exact,
                         [c, a, b], "where")

    def f_clip(self):
        x = self.operand(lambda v: v.dtype != "bool")
        if x.dtype == "bool":
            x = self.some_arg("float32")
        lo, hi = sorted((self.r.randint(-5, 3), self.r.randint(-3, 5)))
        if x.dtype in UINTS:  # a negative bound is not a value of the type (jax refuses it)
            lo, hi = sorted((abs(lo), abs(hi)))
        if is_float(x.dtype) and self.r.random() < 0.5:
            lo, hi = lo * 0.5, hi * 0.5
        if self.r.random() < 0.5:
            e = f"jnp.clip({x.name}, {lo}, {hi})"
        else:
            e = f"lax.clamp(jnp.asarray({lo}, {x.name}.dtype), {x.name}, jnp.asarray({hi}, {x.name}.dtype))"
        return self.emit(e, x.dims, x.dtype, x.exact, [x], "clip")

    def f_broadcast(self):
        x = self.operand(lambda v: v.rank <= 3)
        r = self.r.random()
        if r < 0.35 and x.rank < 4:
            ax = self.r.randint(0, x.rank)
            dims = x.dims[:ax] + ("1",) + x.dims[ax:]
            e = f"jnp.expand_dims({x.name}, {ax})" if self.r.random() < 0.5 else \
                f"{x.name}[{', '.join([':'] * ax + ['None'])}]"
            return self.emit(e, dims, x.dtype, x.exact, [x], "broadcast")
        # broadcast_to a new leading dim, and size-1 dims to some other value's dims
        other = self.pick(lambda v: v.rank >= 1 and v.name != x.name)
        if other is not None and self.r.random() < 0.6:
            j = self.r.randrange(other.rank)
            lead, lead_src = other.dims[j], f"{other.name}.shape[{j}]"
            deps = [x, other]
        else:
            k = self.r.choice((1, 2, 3))
            lead, lead_src, deps = str(k), str(k), [x]
        tgt, tgt_src = [], []
        for i, d in enumerate(x.dims):
            if d == "1" and other is not None and self.r.random() < 0.5:
                tgt.append(lead)
                tgt_src.append(lead_src)
            else:
                tgt.append(d)
                tgt_src.append(f"{x.name}.shape[{i}]")
        shape = "(" + ", ".join([lead_src] + tgt_src) + ",)"
        return self.emit(f"jnp.broadcast_to({x.name}, {shape})", (lead, *tgt), x.dtype, x.exact, deps, "broadcast")

    def f_reshape(self):
        x = self.operand(lambda v: v.rank >= 1)
        if x.rank == 0:
            return self.emit(f"{x.name}.reshape(1, 1)", ("1", "1"), x.dtype, x.exact, [x], "reshape")
        opts = ["flatten"]
        if x.rank >= 2:
            opts += ["merge", "lead"]
        if any(d == "1" for d in x.dims):
            opts.append("squeeze")
        if any(d.isdigit() and int(d) % 2 == 0 and int(d) > 0 for d in x.dims):
            opts.append("split")
        opts.append("unit")
        k = self.r.choice(opts)
        if k == "flatten":
            return self.emit(f"{x.name}.reshape(-1)" if self.r.random() < 0.5 else f"jnp.ravel({x.name})",
                             ("*".join(f"({d})" for d in x.dims),), x.dtype, x.exact, [x], "reshape")
        if k == "merge":
            i = self.r.randrange(x.rank - 1)
            shp = [f"{x.name}.shape[{j}]" for j in range(x.rank)]
            shp[i:i + 2] = [f"{shp[i]} * {shp[i + 1]}"]
            dims = list(x.dims)
            dims[i:i + 2] = [f"({x.dims[i]})*({x.dims[i + 1]})"]
            return self.emit(f"{x.name}.reshape({', '.join(shp)})", dims, x.dtype, x.exact, [x], "reshape")
        if k == "lead":
            # -1 next to a leading dim that may be 0 is ambiguous (numpy and jax raise): spell it out
            lead0 = x.dims[0]
            nonzero = (lead0.isdigit() and int(lead0) > 0) or lead0 in SYMBOLS
            rest = "-1" if nonzero else " * ".join(f"{x.name}.shape[{j}]" for j in range(1, x.rank))
            return self.emit(f"{x.name}.reshape({x.name}.shape[0], {rest})",
                             (x.dims[0], "*".join(f"({d})" for d in x.dims[1:])), x.dtype, x.exact, [x], "reshape")
        if k == "squeeze":
            i = self.r.choice([j for j, d in enumerate(x.dims) if d == "1"])
            return self.emit(f"jnp.squeeze({x.name}, {i})", x.dims[:i] + x.dims[i + 1:], x.dtype, x.exact, [x],
                             "reshape")
        if k == "split":
            i = self.r.choice([j for j, d in enumerate(x.dims) if d.isdigit() and int(d) % 2 == 0 and int(d) > 0])
            h = int(x.dims[i]) // 2
            shp = [f"{x.name}.shape[{j}]" for j in range(x.rank)]
            shp[i:i + 1] = ["2", str(h)]
            dims = list(x.dims)
            dims[i:i + 1] = ["2", str(h)]
            return self.emit(f"{x.name}.reshape({', '.join(shp)})", dims, x.dtype, x.exact, [x], "reshape")
        return self.emit(f"{x.name}.reshape({x.name}.shape + (1,))", x.dims + ("1",), x.dtype, x.exact, [x], "reshape")

    def f_transpose(self):
        x = self.operand(lambda v: v.rank >= 2)
        if x.rank < 2:
            x = self.some_arg()
            if x.rank < 2:
                return self.f_unary()
        perm = list(range(x.rank))
        self.r.shuffle(perm)
        r = self.r.random()
        if r < 0.3:
            return self.emit(f"{x.name}.T", x.dims[::-1], x.dtype, x.exact, [x], "transpose")
        if r < 0.5:
            i, j = self.r.sample(range(x.rank), 2)
            d = list(x.dims)
            d[i], d[j] = d[j], d[i]
            return self.emit(f"jnp.swapaxes({x.name}, {i}, {j})", d, x.dtype, x.exact, [x], "transpose")
        return self.emit(f"jnp.transpose({x.name}, {tuple(perm)})", [x.dims[p] for p in perm], x.dtype, x.exact,
                         [x], "transpose")

    def f_slice(self):
        x = self.operand(lambda v: v.rank >= 1)
        if x.rank == 0:
            return self.f_broadcast()
        ax = self.r.randrange(x.rank)
        d = x.dims[ax]
        static = d.isdigit()
        if static:
            n = int(d)
            a = self.r.choice((None, self.r.randint(-n - 1, n + 1)))
            b = self.r.choice((None, self.r.randint(-n - 1, n + 1)))
            s = self.r.choice((None, 1, 2, 3))
        elif not self.v2:
            a, b = self.r.choice(((1, None), (None, -1), (1, -1), (None, 1), (-1, None), (None, 2), (-2, None),
                                  (0, None)))
            s = None
        else:
            a, b = self.r.choice(((1, None), (None, -1), (1, -1), (None, 1), (-1, None), (None, 2), (-2, None),
                                  (0, None), (None, None)))
            # strides on a symbolic dim (a gather of an iota of unknown length, or a reverse)
            s = self.r.choice((None, None, None, 2, 3, -1)) if a is None or b is None else None
            if s is not None and s < 0:
                a, b = None, None
        sl = f"{'' if a is None else a}:{'' if b is None else b}{'' if s is None else f':{s}'}"
        if self.r.random() < 0.25 and (static and int(d) > 0 or self.v2 and d in SYMBOLS):
            # an integer index drops the axis (on a symbolic dim, >= 1: a dynamic_slice)
            k = self.r.randint(-int(d), int(d) - 1) if static else self.r.choice((0, -1))
            idx = [":"] * ax + [str(k)]
            dims = x.dims[:ax] + x.dims[ax + 1:]
            return self.emit(f"{x.name}[{', '.join(idx)}]", dims, x.dtype, x.exact, [x], "slice")
        idx = [":"] * ax + [sl]
        dims = list(x.dims)
        dims[ax] = f"len(range({d})[{sl}])"
        return self.emit(f"{x.name}[{', '.join(idx)}]", dims, x.dtype, x.exact, [x], "slice")

    def f_concat(self):
        x = self.operand(lambda v: v.rank >= 1)
        if x.rank == 0:
            return self.f_broadcast()
        ax = self.r.randrange(x.rank)

        def fits(v):
            return v.dtype == x.dtype and v.rank == x.rank and all(
                i == ax or v.fp(i) == x.fp(i) for i in range(x.rank))

        ys = [v for v in (self.pick(fits), self.pick(fits)) if v is not None]
        if not ys or self.r.random() < 0.3:
            if all(_is_atom(dd) for dd in x.dims):
                dims = [int(dd) if dd.isdigit() else dd for dd in x.dims]
                dims[ax] = self.atom()
                ys.append(self.new_arg(dims, x.dtype))
            else:
                ys.append(x)
        parts = [x] + ys
        if self.r.random() < 0.2 and all(self.same_dims(x, y) for y in ys):
            dims = x.dims[:ax] + (str(len(parts)),) + x.dims[ax:]
            return self.emit(f"jnp.stack([{', '.join(p.name for p in parts)}], axis={ax})", dims, x.dtype,
                             all(p.exact for p in parts), parts, "concat")
        dims = list(x.dims)
        dims[ax] = " + ".join(f"({p.dims[ax]})" for p in parts)
        return self.emit(f"jnp.concatenate([{', '.join(p.name for p in parts)}], axis={ax})", dims, x.dtype,
                         all(p.exact for p in parts), parts, "concat")

    def f_reduce(self):
        x = self.operand(lambda v: v.rank >= 1)
        if x.rank == 0:
            x = self.some_arg()
        r = self.r.random()
        if r < 0.3 or x.rank == 0:
            axes = None
        elif r < 0.8:
            axes = (self.r.randrange(x.rank),)
        else:
            axes = tuple(sorted(self.r.sample(range(x.rank), min(2, x.rank))))
        keep = self.r.random() < 0.3
        red = list(range(x.rank)) if axes is None else list(axes)
        empty = any(0 in x.fp(i) for i in red)
        dt = x.dtype
        bitwise = ["jnp.bitwise_and.reduce", "jnp.bitwise_or.reduce", "jnp.bitwise_xor.reduce"] if self.v4 else []
        if dt == "bool":
            ops = ["jnp.any", "jnp.all", "jnp.sum"] + bitwise
        elif is_int(dt):
            ops = ["jnp.sum", "jnp.prod", "jnp.max", "jnp.min"] + bitwise
        elif self.v5:
            # a float product that overflows and holds a zero is NaN or 0 by the order of its
            # factors, which StableHLO leaves to the implementation and XLA's differs with the
            # length (seed 2370756: a bf16 prod of 33 terms, NaN here, 0 in jax.jit; XLA itself
            # gives NaN for [0, 1, .., 1e30, 1e30] from 33 terms on, 0 below): from V5 on no float prod
            ops = ["jnp.sum", "jnp.max", "jnp.min", "jnp.mean"]
        else:
            ops = ["jnp.sum", "jnp.prod", "jnp.max", "jnp.min", "jnp.mean"]
        if any(0 in (x.fp(i) if i < x.rank else ()) for i in red) and any(d.isdigit() and d == "0"
                                                                           for d in (x.dims[i] for i in red)):
            # max/min of a statically empty axis is a jax error (no identity)
            ops = [o for o in ops if o not in ("jnp.max", "jnp.min")]
        op = self.r.choice(ops)
        ax_s = "" if axes is None else f", axis={axes[0] if len(axes) == 1 else axes}"
        if axes is None and op.endswith(".reduce"):
            ax_s = ", axis=None"  # (a ufunc's reduce defaults to axis 0)
        init = ""
        if op in ("jnp.max", "jnp.min") and any(not (d.isdigit() or d in SYMBOLS) for d in (x.dims[i] for i in red)):
            # jax.export cannot prove a derived dim (n - 1) non-empty: give max/min an initial value
            big = "jnp.inf" if is_float(dt) else str(np.iinfo(dt).max if op == "jnp.min" else np.iinfo(dt).min)
            if dt in UINTS:  # a typed scalar: jax parses a bare Python int past int64 as an overflow
                big = f"np.{dt}({big})"
            init = f", initial={'-' if op == 'jnp.max' and is_float(dt) else ''}{big}"
        e = f"{op}({x.name}{ax_s}{', keepdims=True' if keep else ''}{init})"
        dims = [("1" if keep else None) if i in red else d for i, d in enumerate(x.dims)]
        dims = tuple(d for d in dims if d is not None)
        if op in ("jnp.any", "jnp.all"):
            odt = "bool"
        elif op == "jnp.sum" and dt == "bool":
            odt = "int64"
        elif op in ("jnp.sum", "jnp.prod") and dt in ("int8", "int16", "int32"):
            odt = "int64"  # numpy promotion under x64
        elif op in ("jnp.sum", "jnp.prod") and dt in ("uint8", "uint16", "uint32"):
            odt = "uint64"
        elif op == "jnp.mean" and not is_float(dt):
            odt = "float64"
        else:
            odt = dt
        exact = x.exact and (op in ("jnp.max", "jnp.min", "jnp.any", "jnp.all") or not is_float(odt))
        del empty
        return self.emit(e, dims, odt, exact, [x], "reduce")

    def f_norm(self):
        """softmax, log_softmax, a layer norm, variance: reductions feeding elementwise ops."""
        x = self.operand(lambda v: v.rank >= 1 and is_float(v.dtype))
        if x.rank == 0 or not is_float(x.dtype):
            x = self.some_arg(self.r.choice(FLOATS))
            if x.rank == 0:
                return self.f_unary()
        ax = self.r.choice((-1, 0, x.rank - 1))
        k = self.r.choice(("softmax", "log_softmax", "layernorm", "var", "masked_softmax"))
        if k == "softmax":
            e = f"jax.nn.softmax({x.name}, axis={ax})"
        elif k == "log_softmax":
            e = f"jax.nn.log_softmax({x.name}, axis={ax})"
        elif k == "layernorm":
            e = (f"({x.name} - jnp.mean({x.name}, axis={ax}, keepdims=True)) * "
                 f"lax.rsqrt(jnp.var({x.name}, axis={ax}, keepdims=True) + 1e-5)")
        elif k == "var":
            e = f"jnp.var({x.name}, axis={ax}, keepdims=True)"
            dims = list(x.dims)
            dims[ax] = "1"
            return self.emit(e, dims, x.dtype, False, [x], "norm")
        else:
            if x.rank < 2 or x.fp(x.rank - 1) != x.fp(x.rank - 2):
                # a mask from the value itself: only if it is exact (else an ulp flips the mask)
                e = f"jax.nn.softmax(jnp.where({x.name} > 0, {x.name}, -jnp.inf), axis=-1)" if x.exact else \
                    f"jax.nn.softmax({x.name}, axis=-1)"
            else:  # a causal mask from iotas
                nn = f"{x.name}.shape[-1]"
                e = (f"jax.nn.softmax(jnp.where(jnp.arange({nn})[:, None] >= jnp.arange({nn})[None, :], "
                     f"{x.name}, -1e9), axis=-1)")
        return self.emit(e, x.dims, x.dtype, False, [x], "norm")

    def f_dot(self):
        x = self.operand(lambda v: 1 <= v.rank <= 3)
        if x.rank == 0 or x.rank > 3:
            x = self.some_arg()
            if x.rank == 0:
                return self.f_unary()
        dt = x.dtype
        k = x.dims[-1]

        def rows(v):
            return v.dtype == dt and v.rank == 2 and v.fp(0) == x.fp(x.rank - 1)

        y = self.pick(rows)
        r = self.r.random()
        exact = not is_float(dt)
        if x.rank == 1 and r < 0.3:
            y = self.pick(lambda v: v.dtype == dt and v.rank == 1 and v.fp(0) == x.fp(0)) or x
            return self.emit(f"jnp.dot({x.name}, {y.name})", (), dt, exact, [x, y], "dot")
        if y is None and _is_atom(k):
            y = self.new_arg([int(k) if k.isdigit() else k, self.atom()], dt)
        if y is not None and r < 0.6:
            e = f"{x.name} @ {y.name}" if self.r.random() < 0.6 else f"jnp.matmul({x.name}, {y.name})"
            return self.emit(e, x.dims[:-1] + y.dims[1:], dt, exact, [x, y], "dot")
        if x.rank >= 2:
            if r < 0.8:  # x @ x^T
                e = f"jnp.einsum('...ij,...kj->...ik', {x.name}, {x.name})"
                return self.emit(e, x.dims[:-1] + (x.dims[-2],), dt, exact, [x], "dot")
            if x.rank == 3:
                return self.emit(f"jnp.einsum('bij,bij->bi', {x.name}, {x.name})", x.dims[:2], dt, exact, [x], "dot")
            return self.emit(f"jnp.tensordot({x.name}, {x.name}, axes=([0, 1], [0, 1]))", (), dt, exact, [x], "dot")
        return self.emit(f"jnp.einsum('i,j->ij', {x.name}, {x.name})", (x.dims[0], x.dims[0]), dt, exact, [x], "dot")

    def f_gather(self):
        x = self.operand(lambda v: v.rank >= 1)
        if x.rank == 0:
            x = self.some_arg()
            if x.rank == 0:
                return self.f_unary()
        ax = self.r.randrange(x.rank) if self.r.random() < 0.5 else 0
        d = x.dims[ax]
        can_be_empty = 0 in _fp(d)
        if can_be_empty and not d.isdigit():
            # jax cannot export a take from an axis that may be empty (an inconclusive comparison)
            return self.f_slice()
        idt = self.r.choice(("int32", "int32", "int64", "int8", "int16"))
        idims = [self.atom() for _ in range(self.r.choice((0, 1, 1, 2)))]
        form = self.r.choice(("index", "take", "take_clip", "take_fill"))
        if can_be_empty and form in ("index", "take"):
            form = "take_clip"
        mode = "any" if form in ("take_clip", "take_fill") else "in_bounds"
        if d == "0":  # jax: "cannot do a non-empty jnp.take() from an empty axis"
            # (and from an empty axis jax's take drops all but the first index dim: seed 2311123)
            idims = [0] if self.v2 else [0] + idims[1:]
        i = self.new_arg(idims, idt, index_into=d, index_mode=mode)
        dims = x.dims[:ax] + i.dims + x.dims[ax + 1:]
        if form == "index":
            e = f"{x.name}[{', '.join([':'] * ax + [i.name])}]"
        elif form == "take":
            e = f"jnp.take({x.name}, {i.name}, axis={ax})"
        elif form == "take_clip":
            e = f"jnp.take({x.name}, {i.name}, axis={ax}, mode='clip')"
        else:
            e = f"jnp.take({x.name}, {i.name}, axis={ax}, mode='fill')"
        return self.emit(e, dims, x.dtype, x.exact, [x, i], "gather")

    def f_iota(self):
        x = self.operand(lambda v: v.rank >= 1)
        if x.rank == 0:
            return self.emit(f"jnp.arange(5) + {x.name}" if x.dtype != "bool" else "jnp.arange(5)", ("5",),
                             "int64" if x.dtype == "bool" or not is_float(x.dtype) else x.dtype,
                             x.exact and not is_float(x.dtype), [x], "iota")
        ax = self.r.randrange(x.rank)
        dt = self.r.choice(("int32", "int64", "float32", x.dtype if x.dtype != "bool" else "int8"))
        r = self.r.random()
        if r < 0.4:
            return self.emit(f"jnp.arange({x.name}.shape[{ax}], dtype={_DT_SHORT[dt]})", (x.dims[ax],), dt, True,
                             [x], "iota")
        if r < 0.7:
            return self.emit(f"lax.broadcasted_iota({_DT_SHORT[dt]}, {x.name}.shape, {ax})", x.dims, dt, True, [x],
                             "iota")
        nn = f"{x.name}.shape[{ax}]"
        return self.emit(f"jnp.arange({nn})[:, None] >= jnp.arange({nn})[None, :]", (x.dims[ax], x.dims[ax]), "bool",
                         True, [x], "iota")

    def f_astype(self):
        x = self.operand()
        to = self.r.choice(self.dtypes)
        if is_float(x.dtype) and (is_int(to) or to == "bool"):
            if not x.exact:
                to = self.r.choice(FLOATS)
            elif is_int(to):
                info = np.iinfo(to)
                lo, hi = max(info.min, -1000), min(info.max, 1000)
                e = f"jnp.where(jnp.isnan({x.name}), 0, jnp.clip({x.name}, {lo}, {hi})).astype({_DT_SHORT[to]})"
                return self.emit(e, x.dims, to, True, [x], "astype")
        exact = x.exact
        return self.emit(f"{x.name}.astype({_DT_SHORT[to]})", x.dims, to, exact, [x], "astype")

    def f_linalg(self):
        """Dense linear algebra of a new f32 / f64 argument X ([b?, m, m], moderate finite values):
        on A = X X^T + m I (symmetric, eigenvalues in [m, m + |X|^2]: well-conditioned), or on X
        itself where any matrix will do (singular values, QR's R)."""
        dt = self.r.choice(("float32", "float64"))
        m = self.atom()
        batch = [self.atom()] if self.r.random() < 0.3 else []
        x = self.new_arg(batch + [m, m], dt, moderate=True)
        n = x.name
        a = f"({n} @ jnp.swapaxes({n}, -1, -2) + {n}.shape[-1] * jnp.eye({n}.shape[-1], dtype={n}.dtype))"
        dims = tuple(x.dims)
        k = self.r.choice((1, 2, 3))
        rhs = None
        kind = self.r.choice(("cholesky", "solve", "inv", "slogdet", "eigvalsh", "svdvals", "qr_r", "triangular",
                              "tridiagonal"))
        if kind in ("solve", "triangular", "tridiagonal"):
            rhs = self.new_arg(batch + [m, k], dt, moderate=True)
        if kind == "cholesky":
            e, out = f"jnp.linalg.cholesky({a})", dims
        elif kind == "solve":
            e, out = f"jnp.linalg.solve({a}, {rhs.name})", tuple(rhs.dims)
        elif kind == "inv":
            e, out = f"jnp.linalg.inv({a})", dims
        elif kind == "slogdet":
            e, out = f"jnp.linalg.slogdet({a})[1]", dims[:-2]
        elif kind == "eigvalsh":
            e, out = f"jnp.linalg.eigvalsh({a})", dims[:-1]
        elif kind == "svdvals":
            e, out = f"jnp.linalg.svd({n}, compute_uv=False)", dims[:-1]
        elif kind == "qr_r":
            e, out = f"jnp.linalg.qr({n})[1]", dims
        elif kind == "triangular":
            e = f"jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky({a}), {rhs.name}, lower=True)"
            out = tuple(rhs.dims)
        else:  # a diagonally dominant tridiagonal system: its three diagonals, X unused
            t = self.new_arg(batch + [m, 3], dt, moderate=True)
            d = f"(4.0 + jnp.abs({t.name}[..., 0]))"
            e = f"jax.lax.linalg.tridiagonal_solve({t.name}[..., 1] * 0.5, {d}, {t.name}[..., 2] * 0.5, {rhs.name})"
            out = tuple(rhs.dims)
            x = t
        deps = [x] + ([rhs] if rhs is not None else [])
        return self.emit(e, out, dt, False, deps, "linalg")

    def f_special(self):
        """An elementwise function the other families never draw, of a float value (a new float
        argument when there is none). Functions with a restricted domain or poles (arcsin, arccosh,
        lgamma, erf_inv, x ** -2, ...) and the jumpy ones (rounding, sign bits, finiteness) take
        exact operands only: an inexact value a rounding away from a pole or a half is ill-posed."""
        x = self.operand(lambda v: is_float(v.dtype))
        if not is_float(x.dtype):
            x = self.some_arg(self.r.choice(FLOATS))
        n = x.name
        smooth = ["jnp.arctan({})", "jnp.sinh({})", "jnp.cosh({})", "jnp.arcsinh({})", "jnp.cbrt({})",
                  "jax.scipy.special.erfc({})", "jax.nn.log_sigmoid({})", "jax.nn.elu({})", "jax.nn.selu({})",
                  "jax.nn.mish({})", "jax.nn.hard_swish({})", "jnp.sinc({})", "jnp.logaddexp({}, 0.5)",
                  "jnp.hypot({}, 2.0)", "jnp.arctan2({}, -1.5)"]
        domain = ["jnp.arcsin({})", "jnp.arccos({})", "jnp.arccosh({})", "jnp.arctanh({})", "jnp.tan({})",
                  "jax.scipy.special.gammaln({})", "jax.scipy.special.digamma({})", "jax.scipy.special.erfinv({})",
                  "jnp.log10({})", "{} ** -2", "lax.integer_pow({}, -3)", "jnp.arcsin(jnp.tanh({}))"]
        exact_ops = ["jnp.trunc({})", "jnp.rint({})", "jnp.round({})", "lax.round({})", "jnp.copysign(2.0, {})",
                     "jnp.nextafter({}, 0)", "jnp.nextafter({}, jnp.inf)"]
        tests = ["jnp.signbit({})", "jnp.isinf({})", "jnp.isfinite({})", "jnp.isneginf({})"]
        y = self.partner(x)
        pair = self.bcast_dims(x, y)
        binary = ["jnp.arctan2({}, {})", "jnp.hypot({}, {})", "jnp.logaddexp({}, {})", "jnp.logaddexp2({}, {})"]
        exact_binary = ["jnp.copysign({}, {})", "jnp.nextafter({}, {})", "jnp.fmin({}, {})", "jnp.heaviside({}, {})"]
        ops = smooth + (domain + exact_ops + tests if x.exact else []) + (binary if pair else []) + \
            (exact_binary if pair and x.exact and y.exact else [])
        op = self.r.choice(ops)
        if op.count("{}") == 2:
            return self.emit(op.format(n, y.name), pair, x.dtype, op in exact_binary, [x, y], "special")
        if op in tests:
            return self.emit(op.format(n), x.dims, "bool", True, [x], "special")
        return self.emit(op.format(n), x.dims, x.dtype, op in exact_ops, [x], "special")

    def f_identity(self):
        """x the long way round: an expression equal to x (bit for bit, NaN included; broadcast
        with the other values it names) that upstream canonicalization folds to x once the kernel
        computing it is inlined."""
        x = None
        if self.r.random() < 0.5:  # of a reduction's result: a kernel of its own, its storage planned
            x = self.f_reduce()
        if x is None or x.dtype in COMPLEX:
            x = self.operand(lambda v: v.dtype not in COMPLEX)
        dt, n = x.dtype, x.name
        y = self.partner(x)
        if dt == "bool":
            forms = [f"jnp.logical_not(jnp.logical_not({n}))", f"jnp.where({n}, True, False)", f"{n} & {n}",
                     f"{n} | {n}", f"jnp.where({y.name}, {n}, {n})", f"{n} & True", f"{n} | False"]
            zero, other = "False", f"~{n}"
        elif is_int(dt):
            wide = {"int8": "int32", "int16": "int32", "int32": "int64", "uint8": "uint32", "uint16": "uint32",
                    "uint32": "uint64"}.get(dt, dt)
            forms = [f"{n} + 0", f"{n} * 1", f"{n} - 0", f"{n} // 1", f"jnp.maximum({n}, {n})", f"{n} & {n}",
                     f"{n} | 0", f"({n} ^ {y.name}) ^ {y.name}", f"({n} - {y.name}) + {y.name}",
                     f"({n} + {y.name}) - {y.name}", f"{n}.astype({_DT_SHORT[wide]}).astype({_DT_SHORT[dt]})",
                     f"{n} << 0", f"{n} >> 0"]
            zero, other = "0", f"{n} * 2"
        else:
            wide = {"float16": "float32", "bfloat16": "float32", "float32": "float64"}.get(dt, dt)
            forms = [f"{n} * 1.0", f"{n} / 1.0", f"-(-{n})", f"jnp.maximum({n}, {n})", f"jnp.fmax({n}, {n})",
                     f"{n}.astype({_DT_SHORT[wide]}).astype({_DT_SHORT[dt]})", f"jnp.minimum({n}, {n})"]
            zero, other = "0", f"{n} * 2"
        deps = [x, y]
        c = self.pick(lambda v: v.dtype == "bool" and v.name != n and self.bcast_dims(x, v) is not None)
        if c is not None:  # selects of x on one condition
            forms += [f"jnp.where({c.name}, jnp.where({c.name}, {n}, {zero}), {n})",
                      f"jnp.where({c.name}, {n}, jnp.where({c.name}, {other}, {n}))"]
            deps.append(c)
        e = self.r.choice(forms)
        used = [d for d in deps if re.search(rf"\b{d.name}\b", e)]
        dims = tuple(x.dims)
        for d in used:
            dims = self.bcast_dims(Value("_", dims, dt), d)
        return self.emit(e, dims, dt, x.exact and all(d.exact for d in used), used, "identity")

    def f_cumulative(self):
        """lax.cumsum (any number type), cumprod, cummax, cummin (integers: XLA's CPU max and min
        are not NaN-exact, gen.SpecJnp) along one axis, forward or reversed: a reduce_window whose
        window is the whole (maybe symbolic) axis."""
        x = self.operand(lambda v: v.rank >= 1 and v.dtype != "bool")
        if x.rank == 0 or x.dtype == "bool":
            x = self.some_arg(self.r.choice(self.ints + FLOATS))
            if x.rank == 0:
                return self.f_unary()
        # jax.export cannot scan a symbolic axis that may be empty (seed 2311201: max(0, m - 2) >= 1
        # is inconclusive)
        axes = [i for i in range(x.rank) if x.dims[i].isdigit() or 0 not in x.fp(i)]
        if not axes:
            return self.f_unary()
        ax = self.r.choice(axes)
        # a float product's overflow depends on the order of its factors, which StableHLO leaves to
        # the implementation (seed 1: a reversed bf16 cumprod, 1.6e38 here, inf in jax.jit): cumprod
        # of integers only (wrapping, exact)
        ops = ["lax.cumsum", "lax.cumsum"] + (["lax.cumprod", "lax.cummax", "lax.cummin"] if is_int(x.dtype) else [])
        op = self.r.choice(ops)
        rev = self.r.random() < 0.3
        return self.emit(f"{op}({x.name}, axis={ax}, reverse={rev})", x.dims, x.dtype,
                         x.exact and not is_float(x.dtype), [x], "cumulative")

    def f_pool(self):
        """lax.reduce_window sum / max / min over the last one or two axes: windows 1-3, strides
        1-2, padding from 0 to window - 1 on each side (the identity fills it), as pooling layers
        do on symbolic image sizes."""
        x = self.operand(lambda v: v.rank >= 1 and v.dtype != "bool")
        if x.rank == 0 or x.dtype == "bool":
            x = self.some_arg(self.r.choice(self.ints + FLOATS))
            if x.rank == 0:
                return self.f_unary()
        k = min(x.rank, self.r.choice((1, 2)))
        win, st, pad, dims = [], [], [], list(x.dims)
        for i in range(x.rank):
            if i < x.rank - k:
                win.append(1), st.append(1), pad.append((0, 0))
                continue
            w, s_ = self.r.choice((1, 2, 2, 3)), self.r.choice((1, 1, 2))
            lo, hi = self.r.randint(0, w - 1), self.r.randint(0, w - 1)
            if not x.dims[i].isdigit():
                # a symbolic dim keeps its size ("SAME"): jax.export cannot prove a later flatten
                # of (n - 1) * m or of a floor division non-negative (seed 2310308)
                s_, hi = 1, w - 1 - lo
                if 0 in x.fp(i):  # nor compare a window with a dim that may be empty (as cumulative)
                    w, lo, hi = 1, 0, 0
            win.append(w), st.append(s_), pad.append((lo, hi))
            dims[i] = f"max(0, (({x.dims[i]}) + {lo + hi} - {w}) // {s_} + 1)"
        if is_float(x.dtype):
            op, init = self.r.choice((("lax.add", "0"), ("lax.max", "-jnp.inf"), ("lax.min", "jnp.inf")))
        else:
            info = np.iinfo(x.dtype)
            op, init = self.r.choice((("lax.add", "0"), ("lax.max", str(info.min)), ("lax.min", str(info.max))))
        e = (f"lax.reduce_window({x.name}, jnp.asarray({init}, {x.name}.dtype), {op}, {tuple(win)}, "
             f"{tuple(st)}, {tuple(pad)})")
        # max / min of floats: NaN propagation as StableHLO's maximum / minimum (exact otherwise)
        exact = x.exact and (op != "lax.add" or not is_float(x.dtype))
        return self.emit(e, dims, x.dtype, exact, [x], "pool")

    def f_pad(self):
        """jnp.pad with a constant (edges 0-2 per side) or lax.pad with negative edges and
        interior padding, on static and symbolic dims."""
        x = self.operand(lambda v: v.rank >= 1)
        if x.rank == 0:
            return self.f_broadcast()
        dims = list(x.dims)
        if self.r.random() < 0.5:
            widths = []
            for i in range(x.rank):
                lo, hi = self.r.choice(((0, 0), (1, 0), (0, 2), (1, 1), (2, 1)))
                widths.append((lo, hi))
                dims[i] = f"({x.dims[i]}) + {lo + hi}"
            val = "True" if x.dtype == "bool" else self.r.choice(("0", "1", "-2"))
            if x.dtype in UINTS and val == "-2":
                val = "2"
            e = f"jnp.pad({x.name}, {tuple(widths)}, constant_values={val})"
        else:
            cfg = []
            for i in range(x.rank):
                lo, hi = self.r.choice((0, 0, 1, 2, -1)), self.r.choice((0, 0, 1, -1))
                mid = self.r.choice((0, 0, 1))
                if not x.dims[i].isdigit():  # negative or interior: n - 1, 2n - 1 (as in f_pool)
                    lo, hi, mid = max(lo, 0), max(hi, 0), 0
                if (lo < 0 or hi < 0) and x.min_dim(i) + (x.min_dim(i) - 1) * mid + lo + hi < 0:
                    lo, hi = max(lo, 0), max(hi, 0)  # a negative size is a jax error
                cfg.append((lo, hi, mid))
                dims[i] = f"max(0, ({x.dims[i]}) + max(0, ({x.dims[i]}) - 1) * {mid} + {lo + hi})"
            val = "True" if x.dtype == "bool" else "0"
            e = f"lax.pad({x.name}, jnp.asarray({val}, {x.name}.dtype), {tuple(cfg)})"
        return self.emit(e, dims, x.dtype, x.exact, [x], "pad")

    def f_bitwise(self):
        """and, or, xor, not, shifts (counts from another value, any size: StableHLO defines a
        count past the width), population count and leading zeros, on signed and unsigned ints."""
        x = self.operand(lambda v: is_int(v.dtype))
        if not is_int(x.dtype):
            x = self.some_arg(self.r.choice(self.ints))
        dt = x.dtype
        r = self.r.random()
        if r < 0.25:
            op = self.r.choice(("~{}", "lax.population_count({})", "lax.clz({})", "{} << 3", "{} >> 1"))
            return self.emit(op.format(x.name), x.dims, dt, True, [x], "bitwise")
        y = self.partner(x)
        dims = self.bcast_dims(x, y)
        op = self.r.choice(("{} & {}", "{} | {}", "{} ^ {}", "jnp.left_shift({}, {})", "jnp.right_shift({}, {})",
                            "lax.shift_left", "lax.shift_right_logical", "lax.shift_right_arithmetic"))
        if op.startswith("lax."):  # lax ops do not broadcast
            op += "(*jnp.broadcast_arrays({}, {}))"
        return self.emit(op.format(x.name, y.name), dims, dt, True, [x, y], "bitwise")

    def f_sort(self):
        """jnp.sort / argsort (stable, either direction) along an axis, argmax / argmin (ties:
        the first; NaN: the first NaN) along an axis that cannot be empty. Indices only of
        exact values (an inexact value's order is not the reference's)."""
        x = self.operand(lambda v: v.rank >= 1)
        if x.rank == 0:
            x = self.some_arg()
            if x.rank == 0:
                return self.f_unary()
        ax = self.r.randrange(x.rank)
        desc = ", descending=True" if self.r.random() < 0.3 else ""
        r = self.r.random()
        if r < 0.4 or not x.exact:
            return self.emit(f"jnp.sort({x.name}, axis={ax}{desc})", x.dims, x.dtype, x.exact, [x], "sort")
        if r < 0.7:
            return self.emit(f"jnp.argsort({x.name}, axis={ax}, stable=True{desc})", x.dims, "int64", True, [x],
                             "sort")
        # jax refuses an arg-reduction over an axis it cannot prove non-empty
        if not (x.dims[ax] in SYMBOLS or (x.dims[ax].isdigit() and int(x.dims[ax]) > 0)):
            return self.emit(f"jnp.sort({x.name}, axis={ax})", x.dims, x.dtype, x.exact, [x], "sort")
        keep = self.r.random() < 0.3
        op = self.r.choice(("jnp.argmax", "jnp.argmin"))
        dims = tuple(("1" if keep else None) if i == ax else d for i, d in enumerate(x.dims))
        return self.emit(f"{op}({x.name}, axis={ax}{', keepdims=True' if keep else ''})",
                         tuple(d for d in dims if d is not None), "int64", True, [x], "sort")

    def f_conv(self):
        """lax.conv_general_dilated of a float value read as [N, spatial..., C] or [N, C,
        spatial...] (one or two spatial dims, the channels a static dim) with a new HWIO kernel
        argument: windows 1-3, strides and window dilations 1-2, explicit padding (a symbolic dim
        keeps its size, as in f_pool), one feature group or depthwise with a multiplier 1-2."""
        def fits(v):
            return is_float(v.dtype) and v.rank in (3, 4) and (v.dims[-1].isdigit() or v.dims[1].isdigit())

        x = self.operand(fits)
        if not fits(x):
            dims = [self.atom() for _ in range(self.r.choice((2, 3)))] + [self.r.choice((1, 2, 3, 4))]
            x = self.new_arg(dims, self.r.choice(FLOATS))
        ns = x.rank - 2
        last = x.dims[-1].isdigit() and (not x.dims[1].isdigit() or self.r.random() < 0.6)
        c_axis = x.rank - 1 if last else 1
        spatial = list(range(1, 1 + ns)) if last else list(range(2, 2 + ns))
        c = int(x.dims[c_axis])
        # XLA's f64 grouped convolution spreads a channel's infinity to the others' outputs as NaN
        # (seed 2370444: depthwise, [-0.06, -inf, ...] -> [nan, inf, nan, nan]; f32 is right)
        groups = c if c > 1 and x.dtype != "float64" and self.r.random() < 0.25 else 1
        o = groups * self.r.choice((1, 2)) if groups > 1 else self.r.choice((1, 2, 3, 4))
        win, strides, dils, pads, dims = [], [], [], [], list(x.dims)
        for ax in spatial:
            w, st, dl = self.r.choice((1, 2, 3)), self.r.choice((1, 1, 2)), self.r.choice((1, 1, 2))
            eff = (w - 1) * dl + 1
            lo, hi = self.r.randint(0, eff - 1), self.r.randint(0, eff - 1)
            if not x.dims[ax].isdigit():
                st, hi = 1, eff - 1 - lo
                if 0 in x.fp(ax):
                    w, dl, eff, lo, hi = 1, 1, 1, 0, 0
            win.append(w), strides.append(st), dils.append(dl), pads.append((lo, hi))
            dims[ax] = f"max(0, (({x.dims[ax]}) + {lo + hi} - {eff}) // {st} + 1)"
        dims[c_axis] = str(o)
        kernel = self.new_arg(win + [c // groups, o], x.dtype, finite=True, moderate=self.v7)
        sp = "WH"[:ns][::-1] if ns == 2 else "W"
        lhs = "N" + sp + "C" if last else "NC" + sp
        e = (f"lax.conv_general_dilated({x.name}, {kernel.name}, {tuple(strides)}, {tuple(pads)}, "
             f"rhs_dilation={tuple(dils)}, dimension_numbers=({lhs!r}, {sp + 'IO'!r}, {lhs!r}), "
             f"feature_group_count={groups})")
        return self.emit(e, dims, x.dtype, False, [x, kernel], "conv")

    def rows_like(self, x: Value, lead: list) -> Value:
        """A new argument of x's dtype shaped `lead` + x's trailing dims where those are atoms, else a
        scalar (an update that broadcasts)."""
        if all(_is_atom(d) for d in x.dims[1:]) and self.r.random() < 0.75:
            return self.new_arg(lead + [int(d) if d.isdigit() else d for d in x.dims[1:]], x.dtype)
        return self.new_arg([], x.dtype)

    def f_scatter(self):
        """x.at[i].set / add / multiply / min / max(u) along axis 0 with an index vector: a set at
        distinct indices (past the axis: dropped); the others at any indices, dropped, clipped or
        counted from the end when negative and in bounds; the update the indexed rows or a scalar."""
        x = self.operand(lambda v: v.rank >= 1)
        if x.rank == 0:
            x = self.some_arg()
            if x.rank == 0:
                return self.f_unary()
        d = x.dims[0]
        if 0 in _fp(d) and not d.isdigit():
            return self.f_slice()  # (jax cannot export an index into an axis that may be empty)
        kinds = ("set", "max", "min") if x.dtype == "bool" else ("set", "add", "multiply", "max", "min")
        kind = self.r.choice(kinds)
        k = self.r.choice((1, 2, 3, 5) + ((self.syms[0],) if self.syms else ()))
        idt = self.r.choice(("int32", "int32", "int64", "int8", "uint8"))
        if kind == "set":  # (narrow types would wrap distinct indices onto each other)
            idt = self.r.choice(("int32", "int64"))
            i, mode = self.new_arg([k], idt, index_into=d, index_mode="distinct"), "drop"
        else:
            mode = self.r.choice(("drop", "clip", None))
            i = self.new_arg([k], idt, index_into=d, index_mode="in_bounds" if mode is None else "any")
        if idt == "uint8" and mode is None:  # a negative in-bounds index wraps to 2**8 - j: out of bounds
            mode = "drop"
        u = self.rows_like(x, [k])
        m = "" if mode is None else f", mode={mode!r}"
        exact = x.exact and u.exact and not (is_float(x.dtype) and kind in ("add", "multiply"))
        return self.emit(f"{x.name}.at[{i.name}].{kind}({u.name}{m})", x.dims, x.dtype, exact, [x, i, u], "scatter")

    def f_dynamic(self):
        """lax.dynamic_slice, dynamic_update_slice and dynamic_index_in_dim with start indices of
        any integer type anywhere (StableHLO clamps each start into [0, dim - size]; jax first
        counts a negative one from the end), slice sizes static and at most the dim's least value."""
        x = self.operand(lambda v: v.rank >= 1)
        if x.rank == 0:
            x = self.some_arg()
            if x.rank == 0:
                return self.f_unary()
        idt = self.r.choice(self.ints)  # (jax wants the starts of one type)
        starts = [self.new_arg([], idt, index_into=x.dims[i], index_mode="any") for i in range(x.rank)]
        sizes = []
        for i in range(x.rank):
            lo = x.min_dim(i)
            if not x.dims[i].isdigit():  # jax.export proves size <= dim only for 1 <= n
                lo = min(lo, 1) if x.dims[i] in SYMBOLS else 0
            sizes.append(self.r.randint(0, lo) if lo > 0 else 0)
        st = "(" + "".join(f"{a.name}, " for a in starts) + ")"
        r = self.r.random()
        if r < 0.4:
            return self.emit(f"lax.dynamic_slice({x.name}, {st}, {tuple(sizes)})", [str(z) for z in sizes],
                             x.dtype, x.exact, [x] + starts, "dynamic")
        if r < 0.8:
            u = self.new_arg(sizes, x.dtype)
            return self.emit(f"lax.dynamic_update_slice({x.name}, {u.name}, {st})", x.dims, x.dtype,
                             x.exact and u.exact, [x, u] + starts, "dynamic")
        ax = self.r.randrange(x.rank)
        if 0 in x.fp(ax):  # an index into an axis that may be empty
            return self.emit(f"lax.dynamic_slice({x.name}, {st}, {tuple(sizes)})", [str(z) for z in sizes],
                             x.dtype, x.exact, [x] + starts, "dynamic")
        keep = self.r.random() < 0.3
        dims = [d for j, d in enumerate(x.dims) if j != ax or keep]
        if keep:
            dims[ax] = "1"
        return self.emit(f"lax.dynamic_index_in_dim({x.name}, {starts[ax].name}, axis={ax}, keepdims={keep})",
                         dims, x.dtype, x.exact, [x, starts[ax]], "dynamic")

    def f_loop(self):
        """lax.fori_loop (a static or symbolic trip count, maybe 0) of an elementwise body, lax.scan
        along axis 0 (forward or reversed; its carry or its stacked outputs), lax.cond on an exact
        predicate, lax.switch on any integer (clamped into the branches)."""
        x = self.operand(lambda v: v.dtype != "bool")
        if x.dtype == "bool":
            x = self.some_arg(self.r.choice(self.ints + FLOATS))
        y = self.partner(x)
        if self.bcast_dims(x, y) != x.dims:
            y = self.new_arg([], x.dtype)
        fl = is_float(x.dtype)
        ops = ("c * 0.5 + {y}", "jnp.maximum(c, {y})", "c - {y}", "jnp.minimum(c, {y}) * 2") if fl else \
            ("c + {y}", "c ^ {y}", "jnp.maximum(c, {y}) - 1", "c * 3 + {y}")
        op = self.r.choice(ops)
        exact = x.exact and y.exact and (not fl or "jnp.m" in op and "+" not in op and "* 0.5" not in op)
        r = self.r.random()
        if r < 0.3:
            trips = self.r.choice(("0", "1", "3") + tuple(f"{x.name}.shape[{i}]" for i in range(x.rank)
                                                          if x.dims[i] in SYMBOLS))
            body = op.format(y=f"{y.name} * i" if not fl and "^" not in op else y.name)
            if not fl:
                body = f"({body}).astype(c.dtype)"
            return self.emit(f"lax.fori_loop(0, {trips}, lambda i, c: {body}, {x.name})", x.dims, x.dtype,
                             exact, [x, y], "loop")
        if r < 0.6 and x.rank >= 1 and (x.dims[0].isdigit() or 0 not in x.fp(0)):
            rev = self.r.random() < 0.3
            body = op.format(y="r")
            if not fl:
                body = f"({body}).astype(c.dtype)"
            which = self.r.choice((0, 1))
            dims = x.dims[1:] if which == 0 else x.dims
            e = (f"lax.scan(lambda c, r: ({body}, c), jnp.zeros({x.name}.shape[1:], {x.name}.dtype), "
                 f"{x.name}, reverse={rev})[{which}]")
            return self.emit(e, dims, x.dtype, exact, [x], "loop")
        if r < 0.8:
            p = self.operand(lambda v: v.exact)  # (an inexact value's sign is not the reference's)
            if not p.exact:
                p = self.some_arg()
            pred = f"jnp.any({p.name} > 0)" if p.dtype != "bool" else f"jnp.all({p.name})"
            b1, b2 = op.format(y="b").replace("c", "a"), "a - b" if fl else "a | b"
            cast = "" if fl else ".astype(a.dtype)"
            e = f"lax.cond({pred}, lambda a, b: ({b1}){cast}, lambda a, b: ({b2}){cast}, {x.name}, {y.name})"
            return self.emit(e, x.dims, x.dtype, exact and not fl, [x, y, p], "loop")
        i = self.new_arg([], self.r.choice(self.ints))
        e = (f"lax.switch({i.name}, [lambda a: a, lambda a: -a, lambda a: a * 2], {x.name})" if x.dtype not in UINTS
             else f"lax.switch({i.name}, [lambda a: a, lambda a: a + 1, lambda a: a * 2], {x.name})")
        return self.emit(e, x.dims, x.dtype, x.exact, [x, i], "loop")

    def _nonempty_axis(self, x: Value, ax: int) -> bool:
        """Whether jax.export can index into axis `ax` of x (it cannot prove a dim that may be 0
        non-empty)."""
        d = x.dims[ax]
        return (d.isdigit() and int(d) > 0) or (d in SYMBOLS)

    def f_data(self):
        """Data-dependent selection and indexing (V13): one form drawn among top_k, searchsorted,
        segment reductions, bincount, one_hot, take_along_axis, a while loop whose trip count
        depends on the data, reduce_precision, bitcasts, nonzero / unique with a size, roll, bands,
        diff, repeat / tile, interp, masked logsumexp / softmax, three-operand einsums,
        mixed-precision dots, select and the NaN-ignoring reductions, jax.random draws from a key
        argument over a value's (symbolic) shape, isin / digitize / count_nonzero, flip / rot90.
        Forms that compare or order values take exact operands (a new argument where the value
        drawn is not)."""
        form = self.r.choice(("top_k", "searchsorted", "segment", "bincount", "one_hot", "take_along", "while",
                              "precision", "bitcast", "nonzero", "unique", "roll", "band", "diff", "repeat",
                              "interp", "masked", "einsum3", "mixed_dot", "select", "nan_reduce", "random", "random",
                              "membership", "flip"))
        return getattr(self, "_data_" + form)()

    def _array_operand(self) -> Value | None:
        """A value of rank >= 1 (a new argument where the one drawn is a scalar), or None."""
        x = self.operand(lambda v: v.rank >= 1)
        if x.rank == 0:
            x = self.some_arg()
        return x if x.rank >= 1 else None

    def _exact_operand(self, pred) -> Value:
        x = self.operand(lambda v: v.exact and pred(v))
        if not (x.exact and pred(x)):
            dt = self.r.choice([d for d in self.ints + FLOATS if pred(Value("_", (), d))] or ["float32"])
            x = self.new_arg([self.atom() for _ in range(self.r.choice((1, 1, 2)))], dt)
        return x

    def _data_top_k(self):
        x = self._exact_operand(lambda v: v.dtype != "bool" and v.rank >= 1) if self.r.random() < 0.5 else \
            self.operand(lambda v: v.dtype != "bool" and v.rank >= 1)
        if x.rank == 0 or x.dtype == "bool":
            x = self.some_arg(self.r.choice(self.ints + FLOATS))
            if x.rank == 0:
                return self.f_unary()
        d = x.dims[-1]
        if d.isdigit() and int(d) >= 1:
            k = self.r.randint(1, min(3, int(d)))
        elif d in SYMBOLS:
            k = 1  # (jax.export proves k <= n only for k = 1)
        else:
            return self._data_segment()
        which = self.r.choice((0, 1)) if x.exact else 0
        return self.emit(f"lax.top_k({x.name}, {k})[{which}]", x.dims[:-1] + (str(k),),
                         x.dtype if which == 0 else "int32", x.exact, [x], "data")

    def _data_searchsorted(self):
        dt = self.r.choice(self.ints + FLOATS)
        table = self.new_arg([self.r.randint(1, 8)], dt)
        q = self._exact_operand(lambda v: v.dtype == dt)
        side = self.r.choice(("left", "right"))
        method = self.r.choice(("scan", "scan_unrolled", "compare_all"))
        return self.emit(f"jnp.searchsorted(jnp.sort({table.name}), {q.name}, side={side!r}, method={method!r})"
                         f".astype(jnp.int32)", q.dims, "int32", True, [table, q], "data")

    def _data_segment(self):
        x = self.operand(lambda v: v.rank >= 1 and v.dtype != "bool")
        if x.rank == 0 or x.dtype == "bool":
            x = self.some_arg(self.r.choice(self.ints + FLOATS))
            if x.rank == 0:
                return self.f_unary()
        k = self.r.randint(1, 5)
        ids = self.new_arg([int(x.dims[0]) if x.dims[0].isdigit() else x.dims[0]] if _is_atom(x.dims[0]) else [],
                           self.r.choice(("int32", "int64")), index_into=str(k), index_mode="any")
        if ids.rank == 0:  # (an expression dim: index the rows by an argument of their own)
            return self._data_one_hot()
        op = self.r.choice(("segment_sum", "segment_max", "segment_min", "segment_prod"))
        exact = x.exact and (not is_float(x.dtype) or op in ("segment_max", "segment_min"))
        return self.emit(f"jax.ops.{op}({x.name}, {ids.name}, num_segments={k})", (str(k),) + x.dims[1:], x.dtype,
                         exact, [x, ids], "data")

    def _data_bincount(self):
        i = self.operand(lambda v: is_int(v.dtype) and v.rank == 1)
        if not (is_int(i.dtype) and i.rank == 1):
            i = self.new_arg([self.atom()], self.r.choice(self.ints))
        k = self.r.randint(1, 9)
        if self.r.random() < 0.4:
            w = self.new_arg(list(int(d) if d.isdigit() else d for d in i.dims) if _is_atom(i.dims[0]) else [],
                             self.r.choice(("float32", "float64")))
            if w.rank == 1:
                return self.emit(f"jnp.bincount(jnp.clip({i.name}, 0, None), weights={w.name}, length={k})", (str(k),),
                                 w.dtype, False, [i, w], "data")
        return self.emit(f"jnp.bincount(jnp.clip({i.name}, 0, None), length={k}).astype(jnp.int32)", (str(k),),
                         "int32", True, [i], "data")

    def _data_one_hot(self):
        i = self.operand(lambda v: is_int(v.dtype))
        if not is_int(i.dtype):
            i = self.new_arg([self.atom() for _ in range(self.r.choice((0, 1, 2)))], self.r.choice(self.ints))
        k = self.r.randint(1, 6)
        dt = self.r.choice(("float32", "int8", "bool", "bfloat16"))
        return self.emit(f"jax.nn.one_hot({i.name}, {k}, dtype={_DT_SHORT[dt]})", i.dims + (str(k),), dt, True, [i],
                         "data")

    def _data_take_along(self):
        x = self._array_operand()
        if x is None:
            return self.f_unary()
        axes = [a for a in range(x.rank) if self._nonempty_axis(x, a)]
        if not axes or not all(_is_atom(d) for d in x.dims):
            return self._data_roll()
        ax = self.r.choice(axes)
        mode = self.r.choice((None, "clip", "fill"))
        idims = [int(d) if d.isdigit() else d for d in x.dims]
        idims[ax] = self.atom()
        i = self.new_arg(idims, self.r.choice(("int32", "int64", "int8")), index_into=x.dims[ax],
                         index_mode="in_bounds" if mode is None else "any")
        m = "" if mode is None else f", mode={mode!r}"
        dims = x.dims[:ax] + (str(idims[ax]),) + x.dims[ax + 1:]
        return self.emit(f"jnp.take_along_axis({x.name}, {i.name}, axis={ax}{m})", dims, x.dtype, x.exact, [x, i],
                         "data")

    def _data_while(self):
        x = self._exact_operand(lambda v: v.dtype != "bool")
        which = self.r.choice((0, 1))
        if is_int(x.dtype):
            e = (f"lax.while_loop(lambda c: jnp.any(c[0] != 0) & (c[1] < 40), lambda c: (c[0] // 2, c[1] + 1), "
                 f"({x.name}, jnp.int32(0)))[{which}]")
            exact = True
        else:
            e = (f"lax.while_loop(lambda c: (jnp.max(jnp.abs(c[0]), initial=0) > 1) & (c[1] < 40), "
                 f"lambda c: (c[0] * 0.5, c[1] + 1), ({x.name}, jnp.int32(0)))[{which}]")
            exact = which == 1
        return self.emit(e, x.dims if which == 0 else (), x.dtype if which == 0 else "int32", exact, [x], "data")

    def _data_precision(self):
        x = self.operand(lambda v: is_float(v.dtype))
        if not is_float(x.dtype):
            x = self.some_arg(self.r.choice(FLOATS))
        bits = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}[x.dtype]
        e, m = self.r.choice([(eb, mb) for eb, mb in ((5, 10), (8, 7), (4, 3), (5, 2), (8, 23), (3, 1))
                               if eb <= bits[0] and mb <= bits[1]])
        return self.emit(f"lax.reduce_precision({x.name}, exponent_bits={e}, mantissa_bits={m})", x.dims, x.dtype,
                         x.exact, [x], "data")

    def _data_bitcast(self):
        to_float = {"int16": "float16", "uint16": "bfloat16", "int32": "float32", "uint32": "float32",
                    "int64": "float64", "uint64": "float64"}
        if self.r.random() < 0.5:
            x = self.operand(lambda v: v.dtype in to_float)
            if x.dtype not in to_float:
                x = self.some_arg(self.r.choice(sorted(to_float)))
            return self.emit(f"lax.bitcast_convert_type({x.name}, {_DT_SHORT[to_float[x.dtype]]})", x.dims,
                             to_float[x.dtype], x.exact, [x], "data")
        # a float's bits: of an argument only (a NaN computed inside has no reference sign or payload)
        x = self.new_arg([self.atom() for _ in range(self.r.choice((0, 1, 2)))], self.r.choice(FLOATS))
        width = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}[x.dtype]
        if self.r.random() < 0.3:
            return self.emit(f"lax.bitcast_convert_type({x.name}, jnp.uint8)", x.dims + (str(width),), "uint8", True,
                             [x], "data")
        to = {2: "int16", 4: "int32", 8: "int64"}[width]
        return self.emit(f"lax.bitcast_convert_type({x.name}, {_DT_SHORT[to]})", x.dims, to, True, [x], "data")

    def _data_nonzero(self):
        x = self._exact_operand(lambda v: 1 <= v.rank <= 2)
        k = self.r.randint(1, 6)
        j = self.r.randrange(x.rank)
        return self.emit(f"jnp.nonzero({x.name}, size={k}, fill_value=-1)[{j}].astype(jnp.int32)", (str(k),), "int32",
                         True, [x], "data")

    def _data_unique(self):
        x = self._exact_operand(lambda v: v.rank >= 1 and v.dtype != "bool")
        k = self.r.randint(1, 6)
        fill = "0" if not is_float(x.dtype) else self.r.choice(("0.5", "jnp.nan"))
        if self.r.random() < 0.5:
            return self.emit(f"jnp.unique({x.name}, size={k}, fill_value={fill})", (str(k),), x.dtype, True, [x],
                             "data")
        return self.emit(f"jnp.unique({x.name}, size={k}, fill_value={fill}, return_counts=True)[1].astype(jnp.int32)",
                         (str(k),), "int32", True, [x], "data")

    def _data_roll(self):
        x = self._array_operand()
        if x is None:
            return self.f_unary()
        ax = self.r.randrange(x.rank)
        if self.r.random() < 0.5:
            sh = str(self.r.choice((-3, -1, 1, 2, 5)))
            deps = [x]
        else:
            s = self.new_arg([], self.r.choice(("int32", "int64", "int8")))
            sh, deps = s.name, [x, s]
        return self.emit(f"jnp.roll({x.name}, {sh}, axis={ax})", x.dims, x.dtype, x.exact, deps, "data")

    def _data_band(self):
        x = self.operand(lambda v: v.rank >= 2)
        if x.rank < 2:
            x = self.new_arg([self.atom(), self.atom()], self.r.choice(self.dtypes))
        k = self.r.randint(-2, 2)
        op = self.r.choice(("jnp.tril", "jnp.triu"))
        return self.emit(f"{op}({x.name}, {k})", x.dims, x.dtype, x.exact, [x], "data")

    def _data_diff(self):
        x = self.operand(lambda v: v.rank >= 1 and v.dtype != "bool")
        axes = [a for a in range(x.rank) if x.min_dim(a) >= 1] if x.dtype != "bool" else []
        if not axes:
            return self._data_repeat()
        ax = self.r.choice(axes)
        dims = x.dims[:ax] + (f"({x.dims[ax]}) - 1",) + x.dims[ax + 1:]
        return self.emit(f"jnp.diff({x.name}, axis={ax})", dims, x.dtype, x.exact and not is_float(x.dtype), [x],
                         "data")

    def _data_repeat(self):
        x = self._array_operand()
        if x is None:
            return self.f_unary()
        ax = self.r.randrange(x.rank)
        r = self.r.randint(1, 3)
        if self.r.random() < 0.5:
            dims = x.dims[:ax] + (f"({x.dims[ax]}) * {r}",) + x.dims[ax + 1:]
            return self.emit(f"jnp.repeat({x.name}, {r}, axis={ax})", dims, x.dtype, x.exact, [x], "data")
        reps = [1] * x.rank
        reps[ax] = r
        dims = x.dims[:ax] + (f"({x.dims[ax]}) * {r}",) + x.dims[ax + 1:]
        return self.emit(f"jnp.tile({x.name}, {tuple(reps)})", dims, x.dtype, x.exact, [x], "data")

    def _data_interp(self):
        dt = self.r.choice(("float32", "float64"))
        k = self.r.randint(1, 6)
        xp = self.new_arg([k], dt, finite=True)
        fp = self.new_arg([k], dt, finite=True)
        x = self._exact_operand(lambda v: v.dtype == dt)
        return self.emit(f"jnp.interp({x.name}, jnp.sort({xp.name}), {fp.name})", x.dims, dt, False, [x, xp, fp],
                         "data")

    def _data_masked(self):
        x = self.operand(lambda v: is_float(v.dtype) and v.rank >= 1)
        if not (is_float(x.dtype) and x.rank >= 1):
            x = self.new_arg([self.atom() for _ in range(self.r.choice((1, 2)))], self.r.choice(FLOATS))
        c = self.partner(x, "bool")
        ax = self.r.randrange(x.rank)
        if self.bcast_dims(x, c) != x.dims:
            c = self.new_arg([int(d) if d.isdigit() else d for d in x.dims] if all(_is_atom(d) for d in x.dims) else [],
                             "bool")
        if self.r.random() < 0.5:
            dims = x.dims[:ax] + x.dims[ax + 1:]
            return self.emit(f"jax.nn.logsumexp({x.name}, axis={ax}, where={c.name})", dims, x.dtype, False, [x, c],
                             "data")
        return self.emit(f"jax.nn.softmax({x.name}, axis={ax}, where={c.name})", x.dims, x.dtype, False, [x, c], "data")

    def _data_einsum3(self):
        dt = self.r.choice(("float32", "float64", "int32", "float16"))
        p, q, r_ = self.atom(), self.atom(), self.atom()
        a = self.new_arg([p, q], dt, moderate=True)
        b = self.new_arg([q, r_], dt, moderate=True)
        c = self.new_arg([r_], dt, moderate=True)
        return self.emit(f"jnp.einsum('pq,qr,r->p', {a.name}, {b.name}, {c.name})", (str(p),), dt, is_int(dt),
                         [a, b, c], "data")

    def _data_mixed_dot(self):
        src, acc = self.r.choice((("int8", "int32"), ("uint8", "int32"), ("bfloat16", "float32"),
                                  ("float16", "float32"), ("int16", "int64")))
        p, q, r_ = self.atom(), self.atom(), self.atom()
        a = self.new_arg([p, q], src, moderate=True)
        b = self.new_arg([q, r_], src, moderate=True)
        return self.emit(f"jnp.matmul({a.name}, {b.name}, preferred_element_type={_DT_SHORT[acc]})", (str(p), str(r_)),
                         acc, is_int(acc), [a, b], "data")

    def _data_select(self):
        x = self.operand(lambda v: v.dtype != "bool")
        y = self.partner(x)
        c1 = self._exact_operand(lambda v: True)
        c2 = self._exact_operand(lambda v: True)
        dims = self.bcast_dims(x, y)
        for c in (c1, c2):
            dims = None if dims is None else self.bcast_dims(Value("_", dims, "bool"), c)
        if dims is None:
            return self._data_nan_reduce()
        conds = f"[jnp.asarray({c1.name}) != 0, jnp.asarray({c2.name}) != 0]"
        return self.emit(f"jnp.select({conds}, [{x.name}, {y.name}], 0)", dims, x.dtype, x.exact and y.exact,
                         [x, y, c1, c2], "data")

    def _data_random(self):
        """jax.random with a threefry key argument (uint32[2], any bits) over a value's shape: the
        bits are exact, so are uniform floats and the integer draws; normal goes through erf_inv."""
        k = self.new_arg([2], "uint32")
        x = self.operand()
        key = f"jax.random.wrap_key_data({k.name})"
        r = self.r.random()
        if r < 0.3:
            key = f"jax.random.split({key})[{self.r.choice((0, 1))}]"
        elif r < 0.45:
            i = self.new_arg([], self.r.choice(("int32", "uint32", "int8")))
            key = f"jax.random.fold_in({key}, {i.name})"
            k = (k, i)
        deps = list(k) if isinstance(k, tuple) else [k]
        shape = f"{x.name}.shape"
        kind = self.r.choice(("uniform", "bits", "bernoulli", "randint", "normal"))
        if kind == "uniform":
            dt = self.r.choice(FLOATS)
            e, dt_out, exact = f"jax.random.uniform({key}, {shape}, dtype={_DT_SHORT[dt]})", dt, True
        elif kind == "bits":
            dt = self.r.choice(("uint8", "uint16", "uint32", "uint64"))
            e, dt_out, exact = f"jax.random.bits({key}, {shape}, {_DT_SHORT[dt]})", dt, True
        elif kind == "bernoulli":
            e, dt_out, exact = f"jax.random.bernoulli({key}, {self.r.choice((0.1, 0.5, 0.9))}, {shape})", "bool", True
        elif kind == "randint":
            dt = self.r.choice(("int8", "int32", "int64", "uint8"))
            lo, hi = (0, 200) if dt == "uint8" else (-7, self.r.choice((3, 100, 1000)))
            if dt == "int8":
                hi = min(hi, 100)
            e, dt_out, exact = f"jax.random.randint({key}, {shape}, {lo}, {hi}, dtype={_DT_SHORT[dt]})", dt, True
        else:
            dt = self.r.choice(("float32", "float64"))
            e, dt_out, exact = f"jax.random.normal({key}, {shape}, dtype={_DT_SHORT[dt]})", dt, False
        return self.emit(e, x.dims, dt_out, exact, deps + [x], "data")

    def _data_membership(self):
        r = self.r.random()
        if r < 0.35:
            x = self.operand(lambda v: is_int(v.dtype))
            if not is_int(x.dtype):
                x = self.new_arg([self.atom() for _ in range(self.r.choice((0, 1, 2)))], self.r.choice(self.ints))
            k = self.r.randint(1, 6)
            return self.emit(f"jnp.isin({x.name}, jnp.arange({k}))", x.dims, "bool", True, [x], "data")
        if r < 0.7:
            x = self._exact_operand(lambda v: is_float(v.dtype))
            bins = sorted(self.r.sample((-2.0, -1.0, -0.5, 0.0, 0.25, 1.0, 3.0), self.r.randint(1, 4)))
            right = self.r.random() < 0.5
            return self.emit(f"jnp.digitize({x.name}, jnp.array({bins}, {x.name}.dtype), right={right})"
                             f".astype(jnp.int32)", x.dims, "int32", True, [x], "data")
        x = self._array_operand()
        if x is None:
            return self.f_unary()
        ax = self.r.randrange(x.rank)
        return self.emit(f"jnp.count_nonzero({x.name}, axis={ax}).astype(jnp.int32)", x.dims[:ax] + x.dims[ax + 1:],
                         "int32", x.exact or not is_float(x.dtype), [x], "data")

    def _data_flip(self):
        x = self._array_operand()
        if x is None:
            return self.f_unary()
        if x.rank >= 2 and self.r.random() < 0.5:
            k = self.r.choice((1, 2, 3))
            dims = (x.dims[1], x.dims[0]) + x.dims[2:] if k % 2 else x.dims
            return self.emit(f"jnp.rot90({x.name}, {k})", dims, x.dtype, x.exact, [x], "data")
        ax = self.r.randrange(x.rank)
        return self.emit(f"jnp.flip({x.name}, {ax})", x.dims, x.dtype, x.exact, [x], "data")

    def _data_nan_reduce(self):
        x = self.operand(lambda v: is_float(v.dtype) and v.rank >= 1)
        if not (is_float(x.dtype) and x.rank >= 1):
            x = self.new_arg([self.atom() for _ in range(self.r.choice((1, 2)))], self.r.choice(FLOATS))
        ax = self.r.randrange(x.rank)
        dims = x.dims[:ax] + x.dims[ax + 1:]
        ops = ["jnp.nansum", "jnp.nanmean"]
        if self._nonempty_axis(x, ax) and x.exact:
            ops += ["jnp.nanmax", "jnp.nanmin", "jnp.nanargmax", "jnp.nanargmin"]
        op = self.r.choice(ops)
        if op in ("jnp.nanargmax", "jnp.nanargmin"):
            return self.emit(f"{op}({x.name}, axis={ax}).astype(jnp.int32)", dims, "int32", True, [x], "data")
        return self.emit(f"{op}({x.name}, axis={ax})", dims, x.dtype, x.exact and op in ("jnp.nanmax", "jnp.nanmin"),
                         [x], "data")

    def complex_unary(self, z: str) -> str:
        """One of exp, log, sqrt, conj, sign, square, negation of the complex expression z (from
        V9_FIRST_SEED on also sin, cos, tan, tanh, log1p, expm1, rsqrt, sigmoid, a power), kept
        finite on moderate values and off the poles, where f32 results of two correct formulas
        differ by far more than the tolerance (shifts by irrational-looking constants: a part of
        z is often exactly 0, rarely exactly -0.3183)."""
        fns = ("jnp.exp", "jnp.log", "jnp.sqrt", "jnp.conj", "jnp.sign", "jnp.square", "jnp.negative")
        if self.v9:
            fns += ("jnp.sin", "jnp.cos", "jnp.tan", "jnp.tanh", "jnp.log1p", "jnp.expm1", "lax.rsqrt",
                    "jax.nn.sigmoid", "power")
        fn = self.r.choice(fns)
        if fn in ("jnp.log", "jnp.log1p", "lax.rsqrt"):  # away from 0 (-1 for log1p)
            return f"{fn}({z} + (17 + 0.5j))"
        if fn in ("jnp.exp", "jnp.expm1"):  # |re| <= 8 keeps it finite
            return f"{fn}(jnp.clip({z}.real, -8, 8) + 1j * {z}.imag)"
        if fn in ("jnp.sin", "jnp.cos"):  # |im| <= 8: cosh, sinh finite
            return f"{fn}({z}.real + 1j * jnp.clip({z}.imag, -8, 8))"
        if fn == "jnp.tan":  # poles at pi/2 + k pi on the real axis
            return f"{fn}({z} + 0.3183j)"
        if fn == "jnp.tanh":  # poles at i (pi/2 + k pi)
            return f"{fn}({z} + 0.3183)"
        if fn == "jax.nn.sigmoid":  # poles at i pi (2k + 1); |re| <= 8
            return f"{fn}(jnp.clip({z}.real, -8, 8) + 0.3183 + 1j * {z}.imag)"
        if fn == "power":  # off the cut of log z and away from 0
            w = self.r.choice(("2", "3", "0.5", "(0.5 + 0.25j)", "(1.5 - 0.5j)"))
            return f"((({z}) + 0.3183j) ** {w})"  # (parenthesized: an outer function takes its .real)
        return f"{fn}({z})"

    def f_complex(self):
        """Complex arithmetic on moderate values: z = lax.complex(re, im) of two f32 or f64 values
        clipped to [-8, 8] (no NaN or infinity: the special values of complex functions are
        branch-cut conventions), through one or two of + - * /, exp, log, sqrt, conj, sign,
        square, a sum along an axis or a product with another complex matrix, and back to a real
        value (real, imag, abs, angle), the program's results staying real."""
        x = self.operand(lambda v: v.dtype in ("float32", "float64") and v.exact)
        if x.dtype not in ("float32", "float64") or not x.exact:
            x = self.new_arg([self.atom() for _ in range(self.r.choice((0, 1, 2)))],
                             self.r.choice(("float32", "float64")))
        y = self.partner(x)
        if self.bcast_dims(x, y) != x.dims:
            y = self.new_arg([], x.dtype)

        def clip(v):
            return f"jnp.clip(jnp.nan_to_num({v.name}), -8, 8)"
        z = f"lax.complex(*jnp.broadcast_arrays({clip(x)}, {clip(y)}))"
        dims = x.dims
        deps = [x, y]
        for _ in range(self.r.choice((1, 1, 2))):
            r = self.r.random()
            if r < 0.35 and dims == x.dims:  # (x and y's shape: before a sum or product reshapes z)
                op = self.r.choice(("+", "-", "*", "/"))
                w = f"lax.complex(*jnp.broadcast_arrays({clip(y)}, {clip(x)}))"
                if op == "/":  # a divisor away from 0 (Smith's algorithm and XLA's agree there)
                    w = f"({w} + (9 + 1j))"
                z = f"({z} {op} {w})"
            elif r < 0.75:
                z = self.complex_unary(z)
            elif r < 0.9 and len(dims) >= 1 and (dims[-1].isdigit() or 0 not in _fp(dims[-1])):
                z = f"jnp.sum({z}, axis=-1)"
                dims = dims[:-1]
            elif len(dims) == 2 and dims[-1].isdigit():
                k = int(dims[-1])
                w = self.new_arg([k, 2], x.dtype)
                deps.append(w)
                z = f"({z} @ lax.complex({clip(w)}, -{clip(w)}))"
                dims = (dims[0], "2")
        back = self.r.choice(("jnp.real", "jnp.imag", "jnp.abs", "jnp.angle"))
        if back == "jnp.angle" and "jnp.sum(" in z:
            # the sign of a zero sum: XLA returns a one-element sum's -0.0 as it is, its reduce adds
            # the +0.0 init otherwise (seed 2,390,908: angle -pi in jax.jit, +pi here, which adds
            # the init as StableHLO says); angle tells the two zeros apart
            back = "jnp.abs"
        return self.emit(f"{back}({z})", dims, x.dtype, False, deps, "complex")

    def f_complex_io(self):
        """Complex arguments and results: a complex64 / complex128 argument of moderate finite
        parts (uniform in [-8, 8]) through one or two of + - * / with another complex argument, a
        product with a real argument, exp, log, sqrt, conj, sign, square, negation, an FFT along a
        static last axis or a sum along it, returned complex (no other statement reads it)."""
        cdt = self.r.choice(COMPLEX)
        part = "float32" if cdt == "complex64" else "float64"
        atoms = [self.atom() for _ in range(self.r.choice((0, 1, 1, 2, 2, 3)))]  # (ints and symbols: new_arg's)
        z0 = self.new_arg(atoms, cdt, moderate=True)
        z, dims, deps = z0.name, z0.dims, [z0]
        for _ in range(self.r.choice((1, 1, 2))):
            r = self.r.random()
            if r < 0.3:
                op = self.r.choice(("+", "-", "*", "/"))
                w = self.new_arg(atoms if self.r.random() < 0.7 else [], cdt, moderate=True)
                deps.append(w)
                z = f"({z} {op} ({w.name} + (9 + 1j)))" if op == "/" else f"({z} {op} {w.name})"
            elif r < 0.45:
                x = self.new_arg(atoms, part, moderate=True)
                deps.append(x)
                z = f"({z} * {x.name})"
            elif r < 0.8:
                z = self.complex_unary(z)
            elif len(dims) >= 1 and dims[-1].isdigit() and int(dims[-1]) > 0 and self.r.random() < 0.6:
                z = f"jnp.fft.{self.r.choice(('fft', 'ifft'))}({z})"
            elif len(dims) >= 1 and (dims[-1].isdigit() or 0 not in _fp(dims[-1])):
                z = f"jnp.sum({z}, axis=-1)"
                dims, atoms = dims[:-1], atoms[:-1]
        return self.emit(z, dims, cdt, False, deps, "complex_io")

    def generate(self) -> Program:
        for _ in range(self.r.choice((1, 1, 2, 3))):
            self.some_arg()
        nstmt = self.r.randint(1, 7)
        names, weights = zip(*(FAMILIES_V13 if self.v13 else FAMILIES_V12 if self.v12 else FAMILIES_V11 if self.v11 else FAMILIES_V10 if self.v10 else FAMILIES_V9 if self.v9 else FAMILIES_V8 if self.v8 else FAMILIES_V7 if self.v7 else FAMILIES_V6 if self.v6 else FAMILIES_V5 if self.v5
                               else FAMILIES_V3 if self.v3 else FAMILIES_V2 if self.v2 else FAMILIES_V1))
        while len(self.stmts) < nstmt:
            fam = self.r.choices(names, weights=weights)[0]
            getattr(self, "f_" + fam)()
        # every value no other statement reads is a result (at most 3), so nothing is dead code
        used = {d for v in self.values.values() for d in v.deps}
        outs = [n for n, _ in self.stmts if n not in used][-3:]
        prog = Program(self.seed, self.args, self.stmts, self.values, outs, self.r.random() < 0.35, self.families)
        prog = prog.restricted(outs)
        prog.bound = None
        return prog


def _is_atom(d: str) -> bool:
    return d.isdigit() or d in SYMBOLS


def generate(seed: int) -> Program:
    """The program of a seed (deterministic)."""
    return _Gen(seed).generate()
