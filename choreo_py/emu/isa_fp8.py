"""`cvt.rn.f16x2.e4m3x2` / `.e5m2x2`: two fp8 values of a 16-bit register to two halves.

Each byte keeps its place: the low byte of the source becomes the low half of the
destination, the high byte the high half. Every e4m3 (fn: no infinities, S.1111.111
is NaN) and e5m2 value is exact in f16, so the conversion is a table of the 256
codes, computed from the formats' definitions.
"""
from __future__ import annotations

import numpy as np

from .operands import operand_reader, writer


def _decode(code: int, exp_bits: int, man_bits: int, bias: int, fn: bool) -> float:
    sign = -1.0 if code >> (exp_bits + man_bits) & 1 else 1.0
    e = code >> man_bits & ((1 << exp_bits) - 1)
    m = code & ((1 << man_bits) - 1)
    top = (1 << exp_bits) - 1
    if fn and e == top and m == (1 << man_bits) - 1:
        return float("nan")
    if not fn and e == top:
        return float("nan") if m else sign * float("inf")
    if e == 0:
        return sign * m / (1 << man_bits) * 2.0 ** (1 - bias)
    return sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)


def _table(exp_bits: int, man_bits: int, bias: int, fn: bool) -> np.ndarray:
    values = np.array([_decode(c, exp_bits, man_bits, bias, fn) for c in range(256)], np.float16)
    return values.view(np.uint16).astype(np.uint32)


TABLES = {"e4m3x2": _table(4, 3, 7, True), "e5m2x2": _table(5, 2, 15, False)}


def decode_fp8x2(inst, m):
    """The instruction's function, or None when it is no fp8-pair conversion."""
    src_t = next((p for p in inst.parts[1:] if p in TABLES), None)
    if src_t is None or "f16x2" not in inst.parts:
        return None
    table = TABLES[src_t]
    src = operand_reader(inst.operands[1], "b16", m)
    wr = writer(inst.operands[0], "b32", m)

    def convert(w):
        x = src(w).astype(np.uint32)
        wr(w, (table[x >> np.uint32(8) & np.uint32(0xFF)] << np.uint32(16)) | table[x & np.uint32(0xFF)])
    return convert
