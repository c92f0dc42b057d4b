"""Warp-level MMA: mma.sync.aligned (m16n8k16 f16/bf16, m16n8k32 s8/u8, m16n8k8 tf32) and
cvt.rna.tf32.f32.

    mma.sync.aligned.m16n8kK.row.col.dtype.atype.btype.ctype {d}, {a}, {b}, {c}

The 32 lanes hold a 16 x K A, a K x 8 B and 16 x 8 C/D; lane = 4 * g + t. The
fragment layouts are the PTX ISA's tables ("Matrix fragments for mma.m16n8k*"),
written here per element index i of each operand (a register holds
32 / bits consecutive elements, element 0 in the low bits):

    m16n8k16 (f16, bf16)  a_i (i < 8):  row g + 8 * (i in {2,3,6,7}), col 2t + (i & 1) + 8 * (i >= 4)
                          b_i (i < 4):  row 2t + (i & 1) + 8 * (i >= 2), col g
    m16n8k32 (s8, u8)     a_i (i < 16): row g + 8 * (i in 4..7, 12..15), col 4t + (i & 3) + 16 * (i >= 8)
                          b_i (i < 8):  row 4t + (i & 3) + 16 * (i >= 4), col g
    m16n8k8 (tf32)        a_i (i < 4):  row g + 8 * (i & 1), col t + 4 * (i >= 2)
                          b_i (i < 2):  row t + 4 * i, col g
    c_i / d_i (i < 4):    row g + 8 * (i >= 2), col 2t + (i & 1)

This module is written from those tables and not from the lowering that emits
the instruction (lowering/core/warp_mma.py), so that the two are checked
against each other through torch. Numerics: f16/bf16 products are exact in
f32; each instruction sums its K products and C in float64 and rounds once to
f32 (as isa_wgmma.py does; the hardware's order is not documented). tf32
operands are their f32 bits with the low 13 ignored. Integer sums are exact,
wrapped to s32 (no .satfinite).
"""
from __future__ import annotations

import re

import numpy as np

from .isa_alu import bf16_bits_to_f32
from .isa_table import Unsupported, decoder
from .lanes import LANES
from .operands import operand_reader, writer

_LANE = np.arange(LANES)
_G, _T = _LANE // 4, _LANE % 4


def _a_pos(kind: str, i: int):
    if kind == "k16":
        return _G + 8 * (i in (2, 3, 6, 7)), 2 * _T + (i & 1) + 8 * (i >= 4)
    if kind == "k32":
        return _G + 8 * (4 <= i < 8 or 12 <= i < 16), 4 * _T + (i & 3) + 16 * (i >= 8)
    return _G + 8 * (i & 1), _T + 4 * (i >= 2)


def _b_pos(kind: str, i: int):
    if kind == "k16":
        return 2 * _T + (i & 1) + 8 * (i >= 2), _G
    if kind == "k32":
        return 4 * _T + (i & 3) + 16 * (i >= 4), _G
    return _T + 4 * i, _G


def _c_pos(i: int):
    return _G + 8 * (i >= 2), 2 * _T + (i & 1)


#: operand type -> (k, bits per element, element values from their bits)
_TYPES = {
    "f16": (16, 16, lambda b: b.astype(np.uint16).view(np.float16).astype(np.float64)),
    "bf16": (16, 16, lambda b: bf16_bits_to_f32(b.astype(np.uint16)).astype(np.float64)),
    "s8": (32, 8, lambda b: b.astype(np.uint8).view(np.int8).astype(np.int64)),
    "u8": (32, 8, lambda b: b.astype(np.uint8).astype(np.int64)),
    "tf32": (8, 32, lambda b: (b.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
             .astype(np.float64)),
}


def _elements(regs: list, bits: int) -> list:
    """Per element index i, its 32 lanes' bits (register i // per, field i % per)."""
    per = 32 // bits
    mask = (1 << bits) - 1
    return [(regs[i // per] >> np.uint32(bits * (i % per))) & np.uint32(mask)
            for i in range(len(regs) * per)]


@decoder("mma.sync")
def _dec_mma_sync(inst):
    from .isa_support import machine
    m = machine()
    shape = next((p for p in inst.parts if re.fullmatch(r"m\d+n\d+k\d+", p)), "")
    types = [p for p in inst.parts if p in ("f32", "s32", "f16", "bf16", "s8", "u8", "tf32")]
    if len(types) != 4 or "row" not in inst.parts or "col" not in inst.parts:
        raise Unsupported(f"'{inst.opcode}'")
    dtype, atype, btype, ctype = types
    k = _TYPES.get(atype, (None,))[0]
    if atype != btype or shape != f"m16n8k{k}" or dtype != ctype or \
            dtype != ("s32" if atype in ("s8", "u8") else "f32"):
        raise Unsupported(f"'{inst.opcode}' (modelled: m16n8k16 f16/bf16 -> f32, m16n8k32 "
                          "s8/u8 -> s32, m16n8k8 tf32 -> f32)")
    _, bits, value = _TYPES[atype]
    kind = f"k{k}" if k != 8 else "k8"
    ops = inst.operands
    if any(o.kind != "vec" for o in ops[:4]) or \
            [len(o.items) for o in ops[:4]] != [4, 4, 2, 4]:
        raise Unsupported(f"'{inst.opcode}': operands are not {{4}}, {{4}}, {{2}}, {{4}} registers")
    d_wr = [writer(o, dtype, m) for o in ops[0].items]
    a_rd = [operand_reader(o, "b32", m) for o in ops[1].items]
    b_rd = [operand_reader(o, "b32", m) for o in ops[2].items]
    c_rd = [operand_reader(o, ctype, m) for o in ops[3].items]

    def ex(w):
        if not w.mask.all():
            w.machine.race(f"{inst.opcode} executed by {int(w.mask.sum())} of the warp's 32 "
                           "lanes (.aligned: all of them must)", inst)
        a = np.zeros((16, k), np.float64 if dtype == "f32" else np.int64)
        b = np.zeros((k, 8), a.dtype)
        c = np.zeros((16, 8), a.dtype)
        for i, x in enumerate(_elements([r(w).view(np.uint32) for r in a_rd], bits)):
            a[_a_pos(kind, i)] = value(x)
        for i, x in enumerate(_elements([r(w).view(np.uint32) for r in b_rd], bits)):
            b[_b_pos(kind, i)] = value(x)
        for i, r in enumerate(c_rd):
            c[_c_pos(i)] = r(w)
        d = a @ b + c
        for i, wr in enumerate(d_wr):
            out = d[_c_pos(i)]
            if dtype == "f32":
                wr(w, out.astype(np.float32))
            else:  # wrapped to 32 bits
                wr(w, (out & 0xFFFFFFFF).astype(np.uint32).view(np.int32))
    return ex


@decoder("cvt.rna.tf32")
def _dec_cvt_tf32(inst):
    """f32 -> tf32 bits (10 mantissa bits), to nearest with ties away from zero."""
    from .isa_support import machine
    m = machine()
    if "f32" not in inst.parts[3:]:
        raise Unsupported(f"'{inst.opcode}'")
    src = operand_reader(inst.operands[1], "f32", m)
    wr = writer(inst.operands[0], "b32", m)

    def ex(w):
        bits = src(w).astype(np.float32).view(np.uint32)
        wr(w, ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).astype(np.uint32))
    return ex
