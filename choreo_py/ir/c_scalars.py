"""Scalar C semantics of the IR, defined once: type promotion, integer arithmetic, conversion.

Sema's constant folding (ir.build), the static passes' evaluator (ir.eval)
and the interpreter (interp/scalars) all compute with these functions, so
a value the pipeline check or the interpreter sees is the value the GPU
computes: if they disagreed, a check could pass a kernel that hangs.

- Promotion (`promote`): C's usual arithmetic conversions, reduced to the
  IR's types: a floating operand makes the result floating (f16/bf16
  compute in f32, as the GPU's scalar code does), bool adopts the other
  side's type, an integer literal adopts the other side's integer type
  (`order % 2` stays u32), else the wider integer type, unsigned first.
  New conversion rules (e.g. which operand converts to which) belong here.
- Integers are two's complement of their width (`wrap`): `+ - * << ~`
  wrap around, as PTX's integer instructions do; `/` and `%` truncate
  toward zero (C99, PTX div.s32/rem.s32); `cdiv(a, b)` rounds up for
  b > 0 (the tile counts of a grid).
- Conversions to an integer type truncate toward zero, then wrap (`to_int`).
- `__min` / `__max` of floats (`minmax`) are PTX's min / max (ISA 9.7.3.11-12,
  9.7.4.7-8): a NaN loses to a number, and -0.0 < +0.0, so `__min(+0, -0)` is -0 and
  `__max(-0, +0)` is +0 whichever operand comes first.
"""
from __future__ import annotations

import math

INT_BITS = {"s8": 8, "u8": 8, "s16": 16, "u16": 16, "s32": 32, "u32": 32, "s64": 64, "u64": 64,
            # the sub-byte integers wrap to their width too (cute's integer_subbyte keeps
            # the low bits); bin1 is a bool (see `wrap`)
            "s6": 6, "u6": 6, "s4": 4, "u4": 4, "s2": 2, "u2": 2, "u1": 1}
FLOAT_PROMOTION = ("f64", "f32", "bf16", "f16")  # the first one present wins
INT_PROMOTION = ("u64", "s64", "u32")            # else s32
DEFAULT_INT = "s32"
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=", "&&", "||")


def promote(ta: str, tb: str, a_literal: bool = False, b_literal: bool = False) -> str:
    """The type of `a op b` for operands of types `ta`, `tb` (literals: see above)."""
    if ta == tb:
        return ta
    for t in FLOAT_PROMOTION:
        if t in (ta, tb):
            return "f32" if t in ("bf16", "f16") else t
    if "bool" in (ta, tb):
        return tb if ta == "bool" else ta
    if a_literal:
        return tb
    if b_literal:
        return ta
    for t in INT_PROMOTION:
        if t in (ta, tb):
            return t
    return DEFAULT_INT


def minmax(fn: str, a, b):
    """`__min(a, b)` / `__max(a, b)` of two scalars as PTX computes them (see above)."""
    if isinstance(a, float) and math.isnan(a):
        return b
    if isinstance(b, float) and math.isnan(b):
        return a
    if a == b == 0 and (isinstance(a, float) or isinstance(b, float)):
        neg_a = math.copysign(1.0, a) < 0
        take_a = neg_a if fn == "min" else not neg_a
        return a if take_a else b
    return max(a, b) if fn == "max" else min(a, b)


def wrap(v, dtype: str):
    """An integer reduced to the range of `dtype` (two's complement); other values as they are."""
    if dtype == "bin1" and isinstance(v, int):
        return int(v != 0)
    bits = INT_BITS.get(dtype)
    if bits is None or not isinstance(v, int) or isinstance(v, bool):
        return v
    v &= (1 << bits) - 1
    if dtype[0] == "s" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def c_div(a: int, b: int) -> int:
    """Integer division truncating toward zero (b != 0)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_mod(a: int, b: int) -> int:
    """The remainder of c_div: it has the sign of `a`."""
    return a - c_div(a, b) * b


def cdiv(a: int, b: int) -> int:
    """`cdiv(a, b)`: a / b rounded up, for b > 0 (truncating division for a < 0)."""
    return c_div(a + b - 1, b) if a >= 0 else c_div(a, b)


_INT_OPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": c_div, "%": c_mod, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
    "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
}
_COMPARE = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "&&": lambda a, b: bool(a) and bool(b), "||": lambda a, b: bool(a) or bool(b),
}


def int_binary(op: str, a: int, b: int, dtype: str):
    """`a op b` on integers of result type `dtype`; comparisons give a bool.

    Raises ZeroDivisionError for `/` and `%` by zero (callers name it in their
    own terms) and ValueError for a negative shift."""
    if op in _COMPARE:
        return _COMPARE[op](a, b)
    if op in ("/", "%") and b == 0:
        raise ZeroDivisionError(f"integer {'division' if op == '/' else 'remainder'} by zero")
    if op in ("<<", ">>") and b < 0:
        raise ValueError(f"shift by a negative amount ({b})")
    return wrap(_INT_OPS[op](int(a), int(b)), dtype)


def int_unary(op: str, v: int, dtype: str):
    if op == "!":
        return not v
    return wrap(-int(v) if op == "-" else ~int(v), dtype)


def to_f32(x: float) -> float:
    """The f32 nearest a double (beyond f32's range: an infinity), as a Python float."""
    import struct

    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def to_float(x, dtype: str) -> float:
    """A number converted to the float type `dtype`, as a Python float: f16 and bf16 round
    to nearest even (cvt.rn's rounding; f16 overflows to an infinity), f32 and wider keep
    the value (an f32 constant is rounded where it is written out)."""
    import struct

    x = float(x)
    if dtype == "f16":
        try:
            return struct.unpack("<e", struct.pack("<e", x))[0]
        except OverflowError:
            return math.copysign(math.inf, x)
    if dtype == "bf16" and math.isfinite(x):
        try:
            bits = struct.unpack("<I", struct.pack("<f", x))[0]
        except OverflowError:
            return math.copysign(math.inf, x)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
    return x


def to_int(x, dtype: str) -> int:
    """C's conversion of a number to the integer type `dtype`: truncation toward zero, then
    wrap-around. Raises ValueError for NaN and infinities (undefined in C)."""
    if isinstance(x, float):
        if x != x or x in (float("inf"), float("-inf")):
            raise ValueError(f"conversion of {x} to {dtype}")
        x = int(x)
    return wrap(int(x), dtype)
