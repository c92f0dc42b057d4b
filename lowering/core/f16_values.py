"""f16 and bf16 values of f32 registers and constants: an f16 accumulator lives in f32
registers and takes f16 precision after every update (as the interpreter's does)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .writer import V

if TYPE_CHECKING:
    from .context import Lowering


def half_bits(value: float, dtype: str) -> int:
    """The bits of a constant as f16 or bf16 (round to nearest even, as cvt.rn does)."""
    import struct

    if dtype == "f16":
        return struct.unpack("<H", struct.pack("<e", value))[0]
    f32 = struct.unpack("<I", struct.pack("<f", value))[0]
    return ((f32 + 0x7FFF + ((f32 >> 16) & 1)) >> 16) & 0xFFFF


def round_to_dtype(value: float, dtype: str) -> float:
    """A constant as the accumulator's type holds it (f16: rounded to nearest even)."""
    import struct

    if dtype != "f16":
        return value
    return struct.unpack("<e", struct.pack("<e", value))[0]


def round_f16(lw: Lowering, regs: list[V]) -> None:
    """f32 registers of an f16 accumulator rounded to f16 values (an f16 accumulator lives
    in f32 registers and takes f16 precision after every update, as the interpreter's
    does: each MMA into it and each element stored)."""
    h = lw.w.reg("b16", "acc_h")
    for r in regs:
        lw.w.op("cvt.rn.f16.f32", h, r)
        lw.w.op("cvt.f32.f16", r, h)
