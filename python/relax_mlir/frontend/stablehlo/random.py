"""stablehlo.rng_bit_generator and its dynamic form (jax's "rbg" and "unsafe_rbg" PRNGs: every
jax.random draw once `jax_default_prng_impl` names either), computed as XLA computes it on the CPU,
which is what jax.jit returns there. StableHLO leaves the bits of algorithm DEFAULT to the
implementation; XLA's CPU backend expands DEFAULT and PHILOX alike to Philox-4x32-10 (Salmon et
al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), with the u64[2] state (key, counter)
read as (measured against jax.jit, bit for bit: test_random_bits.py):

- key: the state's first word, as two 32-bit halves (low first);
- counter of block i: the 128-bit number whose high half is the state's first word and whose low
  half is the second, plus i (the carry reaches the high half);
- each block gives four 32-bit words (x0..x3, in order); an output of 8, 16 or 32 bits takes one
  word per element (its low bits), a 64-bit output two (x0 | x1 << 32, then x2 | x3 << 32); the
  elements fill the output row-major, the last block cut short;
- the new state: the same first word, the second plus the number of blocks (mod 2^64).

Built from integer ops on i64 tensors holding 32-bit values (the 32 x 32 -> 64-bit products of
Philox's rounds fit). Algorithm THREE_FRY (XLA's variant, not jax's threefry keys), a state of
another shape, float or signed outputs are refused by name.
"""
from __future__ import annotations

from relax_mlir.frontend.stablehlo.common import _dtype_attr, _ints, _merge_dims, _res, _splat
from relax_mlir.frontend.stablehlo.registry import register_converters, register_custom_calls
from relax_mlir.ops.common import fmt_dims, product
from relax_mlir.shape import const
from relax_mlir.shape.expr import floordiv

_M0, _M1 = 0xD2511F53, 0xCD9E8D57  # Philox-4x32's multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85  # its key increments (Weyl sequence)
_ROUNDS = 10
_LOW32 = 0xFFFFFFFF
_WIDTHS = {"ui8": 8, "ui16": 16, "ui32": 32, "ui64": 64}


def _algorithm(op) -> str:
    """The op's rng_algorithm as a word (DEFAULT, THREE_FRY, PHILOX)."""
    name = "rng_algorithm"
    attr = op.attributes[name] if name in op.attributes else None
    text = str(attr) if attr is not None else "DEFAULT"
    for word in ("DEFAULT", "THREE_FRY", "PHILOX"):
        if word in text:
            return word
    return text


class _Ops:
    """Shorthands for i64 ops of one shape (`dims`) and scalars."""

    def __init__(self, im, dims, scalars: dict):
        self.im, self.dims, self.scalars = im, dims, scalars

    def scalar(self, value: int):
        """An i64 constant, one per value (the rounds reuse their multipliers and masks)."""
        if value not in self.scalars:
            v = value - (1 << 64) if value >> 63 else value
            self.scalars[value] = self.im.emit("relax.constant", [], 0, "i64", {"value": _splat([], "i64", v)},
                                               dims=[])
        return self.scalars[value]

    def bin(self, name, a, b, dims=None):
        dims = self.dims if dims is None else dims
        return self.im.emit(f"relax.{name}", [a, b], len(dims), "i64", dims=dims)

    def low(self, a, dims=None):
        return self.bin("bitwise_and", a, self.scalar(_LOW32), dims)

    def high(self, a, dims=None):
        return self.bin("right_shift_logical", a, self.scalar(32), dims)


def _philox(im, state, out_dims, out_dt: str):
    """(new state, bits): `state` a ui64[2] Val, the bits of `out_dims` and dtype `out_dt`."""
    width = _WIDTHS[out_dt]
    per = 2 if width == 64 else 4  # elements per block
    n = product(out_dims)
    blocks = floordiv(n + (per - 1), per)
    scalars: dict = {}
    im_s = _Ops(im, [], scalars)
    s = im.emit("relax.bitcast", [state], 1, "i64", {"dtype": _dtype_attr("i64")}, dims=[const(2)])

    def word(i):
        w = im.emit("relax.strided_slice", [s], 1, "i64", {"axes": [0], "begin": [i], "end": [i + 1],
                                                           "strides": [1]}, dims=[const(1)])
        return im.reshape(w, [])

    key, count = word(0), word(1)
    v = _Ops(im, [blocks], scalars)
    i = im.emit("relax.arange", [], 1, "i64", {"end": blocks, "dtype": _dtype_attr("i64")}, dims=[blocks])
    lo = v.bin("add", count, i)
    # the carry out of count + i (unsigned): the top bit of (a & b) | ((a | b) & ~sum)
    either = v.bin("bitwise_or", count, i)
    not_lo = im.emit("relax.bitwise_not", [lo], 1, "i64", dims=[blocks])
    carry = v.bin("bitwise_or", v.bin("bitwise_and", count, i), v.bin("bitwise_and", either, not_lo))
    carry = v.bin("right_shift_logical", carry, v.scalar(63))
    hi = v.bin("add", key, carry)
    c = [v.low(lo), v.high(lo), v.low(hi), v.high(hi)]
    k0, k1 = im_s.low(key, []), im_s.high(key, [])
    for r in range(_ROUNDS):
        if r:
            k0 = im_s.low(im_s.bin("add", k0, im_s.scalar(_W0), []), [])
            k1 = im_s.low(im_s.bin("add", k1, im_s.scalar(_W1), []), [])
        p0 = v.bin("multiply", c[0], v.scalar(_M0))
        p1 = v.bin("multiply", c[2], v.scalar(_M1))
        c = [v.bin("bitwise_xor", v.bin("bitwise_xor", v.high(p1), c[1]), k0), v.low(p1),
             v.bin("bitwise_xor", v.bin("bitwise_xor", v.high(p0), c[3]), k1), v.low(p0)]
    if width == 64:
        words = [v.bin("bitwise_or", c[0], v.bin("left_shift", c[1], v.scalar(32))),
                 v.bin("bitwise_or", c[2], v.bin("left_shift", c[3], v.scalar(32)))]
    else:
        words = c
    cols = [im.reshape(w, [blocks, const(1)]) for w in words]
    table = im.emit("relax_v.concat", cols, 2, "i64", {"axis": 1}, dims=[blocks, const(per)])
    flat = im.reshape(table, [blocks * per])
    bits = im.emit("relax.strided_slice", [flat], 1, "i64", {"axes": [0], "begin": [0], "end": [n], "strides": [1]},
                   dims=[n])
    sdt = f"i{width}"
    if width != 64:
        bits = im.emit("relax.astype", [bits], 1, sdt, {"dtype": _dtype_attr(sdt)}, dims=[n])
    bits = im.emit("relax.bitcast", [bits], 1, out_dt, {"dtype": _dtype_attr(out_dt)}, dims=[n])
    bits = im.reshape(bits, list(out_dims))
    next_count = im_s.bin("add", count, im.emit("relax.arange", [], 1, "i64", {"start": blocks, "end": blocks + 1,
                                                                                 "dtype": _dtype_attr("i64")},
                                                  dims=[const(1)]), [const(1)])
    new = im.emit("relax_v.concat", [im.reshape(key, [const(1)]), next_count], 1, "i64", {"axis": 0},
                  dims=[const(2)])
    new = im.emit("relax.bitcast", [new], 1, "ui64", {"dtype": _dtype_attr("ui64")}, dims=[const(2)])
    return [new, bits]


def _check(im, op, state, out_dims, out_dt):
    algo = _algorithm(op)
    if algo not in ("DEFAULT", "PHILOX"):
        raise ValueError(f"rng_bit_generator with algorithm {algo} (XLA's own variant) is not supported; "
                         "DEFAULT and PHILOX are (jax's 'rbg' and 'unsafe_rbg' PRNGs)")
    if state.dtype != "ui64" or len(state.dims) != 1 or state.dims[0] is None or state.dims[0] != const(2):
        raise ValueError(f"rng_bit_generator with a {state.dtype} state of dims {fmt_dims(state.dims)}: only a ui64[2] "
                         "state (jax's) is supported")
    if out_dt not in _WIDTHS:
        raise ValueError(f"rng_bit_generator producing {out_dt}: only unsigned integers (what jax asks for) "
                         "are supported")
    if any(d is None for d in out_dims):
        raise ValueError("rng_bit_generator with an output dim that is not a known shape expression")


def _rng_bit_generator(im, op, ins):
    (state,) = ins
    out_dims, out_dt = _res(op, 1)
    _check(im, op, state, out_dims, out_dt)
    return _philox(im, state, out_dims, out_dt)


def _dynamic_rng_bit_generator(im, op, ins):
    """custom_call @stablehlo.dynamic_rng_bit_generator(state, output_shape) (a draw over symbolic
    dims): as rng_bit_generator, the dims from the shape operand."""
    state, shape = ins
    out_dims, out_dt = _res(op, 1)
    if shape.known is None:
        raise ValueError("dynamic_rng_bit_generator's output_shape is not a known shape computation")
    out_dims = _merge_dims(out_dims, shape.known)
    _check(im, op, state, out_dims, out_dt)
    return _philox(im, state, out_dims, out_dt)


CONVERTERS = register_converters({"stablehlo.rng_bit_generator": _rng_bit_generator})
CUSTOM_CALLS = register_custom_calls({"stablehlo.dynamic_rng_bit_generator": _dynamic_rng_bit_generator})
