"""The fp6/fp4 conversions of sm_100a: cvt between f32 (or f16x2) and pairs of fp6/fp4 codes.

    cvt.rn.satfinite.{e2m3x2,e3m2x2}.f32  d(b16), a, b   a's code in d's upper byte, b's in
                                                          the lower (the codes' top 2 bits 0)
    cvt.rn.satfinite.e2m1x2.f32           d(b8),  a, b   a's code in the upper nibble
    cvt.rn.f16x2.{e2m3x2,e3m2x2}          d(b32), a(b16) the upper byte to d's upper half
    cvt.rn.f16x2.e2m1x2                   d(b32), a(b8)  the upper nibble to the upper half

The codes' meaning, rounding (to nearest, ties to even) and saturation are
choreo_py/ir/subbyte.py's, the one definition the interpreter uses too; every fp6/fp4
value is exact in f16. `.relu` and the other roundings are not modelled (refused).
"""
from __future__ import annotations

import numpy as np
import torch

from choreo_py.ir import subbyte

from .isa_table import Unsupported
from .operands import operand_reader, writer

#: cvt's pair names -> (element type, bits per code in the pair register)
FP6_FP4_PAIRS = {"e2m3x2": ("f6_e2m3", 8), "e3m2x2": ("f6_e3m2", 8), "e2m1x2": ("f4_e2m1", 4)}


def _f16_table(dtype: str) -> np.ndarray:
    """The f16 bits of each code's value (indexed by the code)."""
    codes = torch.arange(1 << subbyte.code_bits(dtype))
    return subbyte.decode(codes, dtype).to(torch.float16).view(torch.int16).numpy() \
        .view(np.uint16).astype(np.uint32)


def float_encoder(dtype: str):
    """x (f32 lanes) -> uint32 codes: subbyte.encode's rounding (nearest, ties to the even
    code, saturating, NaN to the largest positive code) in numpy, without the round trip
    through torch tensors (tests/test_emu_fast_paths.py compares the two)."""
    mags = np.array(subbyte.magnitudes(dtype), dtype=np.float64)
    mids = (mags[1:] + mags[:-1]) / 2
    top = mags[-1]
    e, m = subbyte.FLOAT_FORMATS[dtype]
    sign_bit = np.uint32(1 << (e + m))

    def encode(x):
        x = np.asarray(x, np.float32).astype(np.float64)
        ax = np.nan_to_num(np.abs(x), nan=top, posinf=top)
        lo = np.searchsorted(mids, ax, side="left")    # a tie goes to the smaller code
        hi = np.searchsorted(mids, ax, side="right")   # a tie goes to the larger code
        idx = np.where((lo != hi) & (hi % 2 == 0), hi, lo).astype(np.uint32)
        return np.where(np.signbit(x) & ~np.isnan(x), idx | sign_bit, idx)
    return encode


def decode_cvt_fp6_fp4(inst, m):
    pair = next(p for p in inst.parts if p in FP6_FP4_PAIRS)
    dtype, width = FP6_FP4_PAIRS[pair]
    reg_t = "b16" if width == 8 else "b8"
    ops = inst.operands
    if inst.parts[1:] == ("rn", "satfinite", pair, "f32"):
        a, b = operand_reader(ops[1], "f32", m), operand_reader(ops[2], "f32", m)
        wr = writer(ops[0], reg_t, m)

        encode = float_encoder(dtype)

        def pack(w):
            wr(w, ((encode(a(w)) << np.uint32(width)) | encode(b(w))).astype(
                np.uint16 if width == 8 else np.uint8))
        return pack
    if inst.parts[1:] == ("rn", "f16x2", pair):
        table = _f16_table(dtype)
        mask = np.uint32((1 << subbyte.code_bits(dtype)) - 1)
        src = operand_reader(ops[1], reg_t, m)
        wr = writer(ops[0], "b32", m)

        def unpack(w):
            x = src(w).astype(np.uint32)
            hi = table[(x >> np.uint32(width)) & mask]
            wr(w, (hi << np.uint32(16)) | table[x & mask])
        return unpack
    raise Unsupported(f"'{inst.opcode}' (of the fp6/fp4 conversions only cvt.rn.satfinite."
                      f"{pair}.f32 and cvt.rn.f16x2.{pair} are modelled)")
