"""f16 and bf16 values of f32 registers and constants: an f16 accumulator lives in f32
registers and takes f16 precision after every update (as the interpreter's does)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .writer import V

if TYPE_CHECKING:
    from .context import Lowering


#: the magnitudes from which round-to-nearest-even gives infinity (the largest finite value
#: plus half its last unit: f16 65504 + 16, f32 (2 - 2^-23) * 2^127 + 2^103), as cvt.rn does;
#: struct refuses to pack them ("float too large")
_INF_FROM = {"e": 65520.0, "f": 2.0 ** 128 * (1 - 2.0 ** -25)}


def _packed(fmt: str, value) -> bytes:
    """`value` packed as struct's f16 ("e") or f32 ("f"), overflowing to infinity."""
    import math
    import struct

    try:
        x = float(value)
    except OverflowError:  # an integer beyond every float
        x = -math.inf if value < 0 else math.inf
    if abs(x) >= _INF_FROM[fmt]:
        x = math.copysign(math.inf, x)
    return struct.pack("<" + fmt, x)


def half_bits(value: float, dtype: str) -> int:
    """The bits of a constant as f16 or bf16 (round to nearest even, as cvt.rn does)."""
    import struct

    if dtype == "f16":
        return struct.unpack("<H", _packed("e", value))[0]
    f32 = struct.unpack("<I", _packed("f", value))[0]
    return ((f32 + 0x7FFF + ((f32 >> 16) & 1)) >> 16) & 0xFFFF


def round_to_dtype(value: float, dtype: str) -> float:
    """A constant as the accumulator's type holds it (f16: rounded to nearest even; beyond
    f16's range, infinity)."""
    import struct

    if dtype != "f16":
        return value
    return struct.unpack("<e", _packed("e", value))[0]


def round_f16(lw: Lowering, regs: list[V]) -> None:
    """f32 registers of an f16 accumulator rounded to f16 values (an f16 accumulator lives
    in f32 registers and takes f16 precision after every update, as the interpreter's
    does: each MMA into it and each element stored)."""
    h = lw.w.reg("b16", "acc_h")
    for r in regs:
        lw.w.op("cvt.rn.f16.f32", h, r)
        lw.w.op("cvt.f32.f16", r, h)
