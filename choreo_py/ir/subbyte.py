"""The sub-byte scalar types: fp6 (e2m3, e3m2), fp4 (e2m1) and the integers u6..u1, s6..s2, bin1.

Each element takes one byte, in host and device arrays alike, with its value in
the byte's low bits (the reference's element types are one byte each: CUDA's
`__nv_fp6_*`/`__nv_fp4_*` and cute's `integer_subbyte`). A tensor of these types
is therefore a `uint8` tensor of codes; this module is the one definition of
what a code means, shared by the interpreter, the host runtime and the PTX
emulator:

- fp6/fp4 codes are sign, exponent and mantissa bits with the exponent biased by
  2**(E-1) - 1, subnormals at exponent 0, and no infinity or NaN (every code is a
  finite number). Converting a number to them rounds to the nearest code, ties to
  the even code, and saturates to the largest finite magnitude (`satfinite`, as
  PTX's `cvt.rn.satfinite.e2m3x2.f32` and its siblings do); NaN becomes the
  largest positive code.
- integer codes are the value's low `bits` bits (conversion from a wider integer
  keeps them: wrap-around); a signed code reads sign-extended. `bin1` is a bool
  (cute's `bin1_t`): any nonzero value stores 1.
"""
from __future__ import annotations

import bisect
import math
from functools import cache


def _torch():
    # The tensor codecs need torch; the compiler (which reads only the formats and the
    # one-element codecs) must not import it: it costs 2.5 s of CPU on every compile.
    import torch

    return torch

#: fp6/fp4 formats: (exponent bits, mantissa bits).
FLOAT_FORMATS = {"f6_e2m3": (2, 3), "f6_e3m2": (3, 2), "f4_e2m1": (2, 1)}
#: sub-byte integers: (bits, signed).
INT_FORMATS = {"u6": (6, False), "s6": (6, True), "u4": (4, False), "s4": (4, True),
               "u2": (2, False), "s2": (2, True), "u1": (1, False), "bin1": (1, False)}
TYPES = tuple(FLOAT_FORMATS) + tuple(INT_FORMATS)


def is_subbyte(dtype: str) -> bool:
    return dtype in FLOAT_FORMATS or dtype in INT_FORMATS


def code_bits(dtype: str) -> int:
    """How many low bits of the byte the code uses."""
    if dtype in FLOAT_FORMATS:
        e, m = FLOAT_FORMATS[dtype]
        return 1 + e + m
    return INT_FORMATS[dtype][0]


def _magnitude(dtype: str, bits: int) -> float:
    """The non-negative value of the code's exponent and mantissa bits."""
    e, m = FLOAT_FORMATS[dtype]
    exp, man = bits >> m, bits & ((1 << m) - 1)
    bias = (1 << (e - 1)) - 1
    if exp == 0:
        return man / (1 << m) * 2.0 ** (1 - bias)
    return (1 + man / (1 << m)) * 2.0 ** (exp - bias)


def magnitudes(dtype: str) -> list[float]:
    """The values of the non-negative codes 0, 1, ... in order (they increase)."""
    e, m = FLOAT_FORMATS[dtype]
    return [_magnitude(dtype, c) for c in range(1 << (e + m))]


def max_finite(dtype: str) -> float:
    return magnitudes(dtype)[-1]


def decode(codes: torch.Tensor, dtype: str) -> torch.Tensor:
    """The values of a tensor of codes: float32 for fp6/fp4, int64 for the integers
    (bits above the code's are ignored)."""
    torch = _torch()
    c = codes.to(torch.int64) & ((1 << code_bits(dtype)) - 1)
    if dtype in FLOAT_FORMATS:
        return _value_table(dtype)[c]
    bits, signed = INT_FORMATS[dtype]
    if signed:
        c = torch.where(c >= 1 << (bits - 1), c - (1 << bits), c)
    return c


def encode(values: torch.Tensor, dtype: str) -> torch.Tensor:
    """The uint8 codes of a tensor of values (see the module docstring for the rounding)."""
    torch = _torch()
    if dtype in FLOAT_FORMATS:
        return _encode_float(values.to(torch.float64), dtype)
    bits, _ = INT_FORMATS[dtype]
    if dtype == "bin1":
        return (values != 0).to(torch.uint8)
    v = torch.trunc(values).to(torch.int64) if values.is_floating_point() else values.to(torch.int64)
    return (v & ((1 << bits) - 1)).to(torch.uint8)


@cache
def _value_table(dtype: str) -> torch.Tensor:
    """Each code's value (float32; the tables are small and read-only: callers index them)."""
    torch = _torch()
    mags = magnitudes(dtype)
    table = torch.tensor(mags + [-v for v in mags], dtype=torch.float32)
    table[len(mags)] = -0.0
    return table


@cache
def _midpoints(dtype: str) -> tuple[torch.Tensor, torch.Tensor]:
    torch = _torch()
    mags = torch.tensor(magnitudes(dtype), dtype=torch.float64)
    return mags, (mags[1:] + mags[:-1]) / 2


def _encode_float(x: torch.Tensor, dtype: str) -> torch.Tensor:
    torch = _torch()
    mags, mids = _midpoints(dtype)
    ax = torch.nan_to_num(x.abs(), nan=float(mags[-1]), posinf=float(mags[-1]))
    lo = torch.bucketize(ax, mids, right=False)   # a tie goes to the smaller code
    hi = torch.bucketize(ax, mids, right=True)    # a tie goes to the larger code
    idx = torch.where((lo != hi) & (hi % 2 == 0), hi, lo)  # ties to the even code
    sign = torch.signbit(x) & ~torch.isnan(x)
    e, m = FLOAT_FORMATS[dtype]
    return (idx | (sign.to(torch.int64) << (e + m))).to(torch.uint8)


def round_value(x, dtype: str):
    """`x` converted to `dtype` and back: the value a store of `x` keeps (a Python number
    or a tensor, as given)."""
    if not isinstance(x, (bool, int, float)):   # a tensor
        return decode(encode(x, dtype), dtype)
    return decode_one(encode_one(x, dtype), dtype)


# One element at a time (the interpreter's scalar code): the same tables, as Python lists.
@cache
def _value_list(dtype: str) -> list:
    # Every code's value is exact in float32 (at most 4 significant bits), so the Python
    # floats equal `_value_table`'s; -0.0 is the code with only the sign bit.
    mags = magnitudes(dtype)
    return mags + [-0.0] + [-v for v in mags[1:]]


def decode_one(code: int, dtype: str):
    """`decode` of one code: a float (fp6/fp4) or an int."""
    c = int(code) & ((1 << code_bits(dtype)) - 1)
    if dtype in FLOAT_FORMATS:
        return _value_list(dtype)[c]
    bits, signed = INT_FORMATS[dtype]
    return c - (1 << bits) if signed and c >= 1 << (bits - 1) else c


@cache
def _midpoint_list(dtype: str) -> tuple[list, list]:
    mags = magnitudes(dtype)   # float64 sums, as `_midpoints`
    return mags, [(a + b) / 2 for a, b in zip(mags[1:], mags[:-1])]


def encode_one(x, dtype: str) -> int:
    """`encode` of one Python number (the same rounding, by bisection)."""
    if dtype == "bin1":
        return int(x != 0)
    if dtype in INT_FORMATS:
        v = int(x) if not isinstance(x, float) else int(math.trunc(x))
        return v & ((1 << INT_FORMATS[dtype][0]) - 1)
    mags, mids = _midpoint_list(dtype)
    x = float(x)
    ax = mags[-1] if math.isnan(x) or math.isinf(x) else abs(x)
    lo, hi = bisect.bisect_left(mids, ax), bisect.bisect_right(mids, ax)
    idx = hi if lo != hi and hi % 2 == 0 else lo
    sign = math.copysign(1.0, x) < 0 and not math.isnan(x)
    e, m = FLOAT_FORMATS[dtype]
    return idx | (int(sign) << (e + m))
