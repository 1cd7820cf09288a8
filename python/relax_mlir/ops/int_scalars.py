"""Scalar templates of integer arithmetic shared by ops/elementwise.py and ops/bits.py (integer
power, conversions involving unsigned types): plain functions of dtypes, no op classes."""
from __future__ import annotations

from relax_mlir.dialect.types import FLOAT_DTYPES, is_unsigned, signless


def width(dtype: str) -> int:
    return int(signless(dtype)[1:])


def int_power_scalar(dtype: str) -> tuple[str, ...]:
    """Integer a ** b (StableHLO's reference interpreter, XLA): exponentiation by squaring over
    every bit of b (products wrap); for signed b < 0: 1 ** b = 1, (-1) ** b = +-1 by b's parity,
    anything else 0. Unrolled over the bit width (no loop in the kernel body)."""
    w = width(dtype)
    lines = ["%z = arith.constant 0 : {t}", "%o = arith.constant 1 : {t}"]
    e = "%b"
    if not is_unsigned(dtype):
        lines += ["%bn = arith.cmpi slt, %b, %z : {t}", "%nb = arith.subi %z, %b : {t}",
                  "%ab = arith.select %bn, %nb, %b : {t}", "%m1 = arith.constant -1 : {t}",
                  "%a1 = arith.cmpi eq, %a, %o : {t}", "%am1 = arith.cmpi eq, %a, %m1 : {t}",
                  "%unit = arith.ori %a1, %am1 : i1"]
        e = "%ab"
    acc, base = "%o", "%a"
    for i in range(w):
        lines += [f"%c{i} = arith.constant {i} : {{t}}", f"%s{i} = arith.shrui {e}, %c{i} : {{t}}",
                  f"%bit{i} = arith.andi %s{i}, %o : {{t}}", f"%set{i} = arith.cmpi ne, %bit{i}, %z : {{t}}",
                  f"%p{i} = arith.muli {acc}, {base} : {{t}}", f"%acc{i} = arith.select %set{i}, %p{i}, {acc} : {{t}}"]
        acc = f"%acc{i}"
        if i + 1 < w:
            lines.append(f"%sq{i} = arith.muli {base}, {base} : {{t}}")
            base = f"%sq{i}"
    if is_unsigned(dtype):
        lines.append(f"%r = arith.select %o_true, {acc}, {acc} : {{t}}")
        lines.insert(0, "%o_true = arith.constant true")
    else:
        lines += [f"%zr = arith.select %unit, {acc}, %z : {{t}}", f"%r = arith.select %bn, %zr, {acc} : {{t}}"]
    return tuple(lines)


# --- element math ---------------------------------------------------------------------------------


def _int_width(dt: str) -> int:
    return 1 if dt == "i1" else width(dt)


def convert_unsigned(src: str, dst: str) -> tuple[str, ...]:
    """Scalar conversion %x : src -> %r : dst where src or dst is unsigned, as XLA: integers
    zero-extend from unsigned and sign-extend from signed sources, truncate to narrower ones;
    unsigned -> float rounds the unsigned value; float -> unsigned truncates toward zero and
    saturates (NaN and negatives -> 0, >= 2**w -> all ones); -> i1 is x != 0."""
    s, d = signless(src), signless(dst)
    fsrc, fdst = src in FLOAT_DTYPES, dst in FLOAT_DTYPES
    if not fsrc and not fdst:
        sw, dw = _int_width(s), _int_width(d)
        if dst == "i1":
            return (f"%z = arith.constant 0 : {s}", f"%r = arith.cmpi ne, %x, %z : {s}")
        if sw < dw:
            ext = "extui" if (is_unsigned(src) or src == "i1") else "extsi"
            return (f"%r = arith.{ext} %x : {s} to {d}",)
        if sw > dw:
            return (f"%r = arith.trunci %x : {s} to {d}",)
        return ("%true = arith.constant true", f"%r = arith.select %true, %x, %x : {s}")
    if not fsrc:  # unsigned -> float
        return (f"%r = arith.uitofp %x : {s} to {dst}",)
    # float -> unsigned
    lines: list[str] = []
    x, f = "%x", src
    if src in ("f16", "bf16"):
        lines.append(f"%x32 = arith.extf %x fastmath<contract> : {src} to f32")  # (internal: ops/kernel.py via_f32)
        x, f = "%x32", "f32"
    w = width(d)
    lines += [f"%fz = arith.constant 0.0 : {f}", f"%ok = arith.cmpf ogt, {x}, %fz : {f}",  # false for NaN
              f"%xp = arith.select %ok, {x}, %fz : {f}", f"%lim = arith.constant {float(2 ** w)!r} : {f}",
              f"%over = arith.cmpf oge, %xp, %lim : {f}", f"%c = arith.select %over, %fz, %xp : {f}",
              f"%u = arith.fptoui %c : {f} to {d}", f"%all = arith.constant -1 : {d}",
              f"%r = arith.select %over, %all, %u : {d}"]
    return tuple(lines)
