"""sm_90 sparse warpgroup MMA: wgmma.mma_async.sp (A 2:4 structured sparse).

wgmma.mma_async.sp.sync.aligned.m64nNk32.f32.{bf16,f16}.{bf16,f16}
    d, a-desc, b-desc, sp-meta, sp-sel, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b
wgmma.mma_async.sp.sync.aligned.m64nNk64.f32.{e4m3,e5m2}.{e4m3,e5m2}
    d, a-desc, b-desc, sp-meta, sp-sel, scale-d, imm-scale-a, imm-scale-b

Written from the PTX ISA's description of the sparse wgmma and CUTLASS's metadata
layouts (cute/atom/mma_traits_sm90_gmma_sparse.hpp, ELayout_64x32 and ELayout_64x64),
not from the lowering:

- A (shared, through its descriptor) is the packed M x K/2 matrix: of each group of
  four consecutive elements along K in a row of the dense A, the two that may be
  non-zero, in order. B is the dense K-major N x K matrix.
- sp-meta is one 32-bit register per thread; a group's 4 bits hold the two indices
  (0..3) of its values in the group, the first in bits 0-1. Indices that are equal
  (0b0000, 0b0101, 0b1010, 0b1111) are invalid: undefined behaviour, reported.
- Which thread holds which group (lane = 4 g + c, warp w of the warpgroup):
  16-bit types: 2 threads of each group of four contribute, the pair 2 sp-sel and
  2 sp-sel + 1 (sp-sel 0 or 1); pair member j holds K columns 16 j .. 16 j + 15 of row
  16 w + g in bits 0-15 and of row 16 w + g + 8 in bits 16-31.
  8-bit types: every thread contributes (sp-sel 0); thread c holds K columns
  32 (c >> 1) .. + 31 of row 16 w + g + 8 (c & 1).
- Each warp's 16 rows of D are [D +] dense(A) @ B^T, as the dense form computes them
  (isa_wgmma.issue_result: at wgmma.wait_group, races as for the dense form).
"""
from __future__ import annotations

import re

import numpy as np

from .isa_table import Unsupported, decoder
from .isa_wgmma import _ESIZE, _gather, _to_f32, issue_begin, issue_result, operand_addrs
from .operands import operand_reader

_INVALID = {0b0000, 0b0101, 0b1010, 0b1111}


def meta_groups(meta: np.ndarray, es: int, sel: int):
    """(row within the warp's 16, first group, nibbles [groups]) for each contributing
    register: meta is the warp's 32 sp-meta values (uint32)."""
    out = []
    for lane in range(32):
        g, c = lane // 4, lane % 4
        v = int(meta[lane])
        if es == 2:
            if c // 2 != sel:
                continue
            j = c % 2
            for half, row in ((0, g), (1, g + 8)):
                bits = (v >> (16 * half)) & 0xFFFF
                out.append((row, 4 * j, [(bits >> (4 * q)) & 0xF for q in range(4)]))
        else:
            out.append((g + 8 * (c & 1), 8 * (c >> 1), [(v >> (4 * q)) & 0xF for q in range(8)]))
    return out


def dense_a(packed: np.ndarray, meta: np.ndarray, es: int, sel: int, report) -> np.ndarray:
    """The warp's 16 x K dense A from its 16 x K/2 packed rows and its sp-meta values."""
    rows, half = packed.shape
    dense = np.zeros((rows, 2 * half), dtype=np.float32)
    for row, first, nibbles in meta_groups(meta, es, sel):
        for q, nib in enumerate(nibbles):
            grp = first + q
            if nib in _INVALID:
                report(f"sp-meta of row {row} (of the warp's 16), group {grp} is 0b{nib:04b}: "
                       "both indices equal, which the PTX ISA names invalid (undefined result)")
            i0, i1 = nib & 3, nib >> 2
            dense[row, 4 * grp + i1] = packed[row, 2 * grp + 1]
            dense[row, 4 * grp + i0] = packed[row, 2 * grp]
    return dense


@decoder("wgmma.mma_async.sp")
def _dec_mma_sp(inst):
    from .isa_support import machine
    m = machine()
    shape = next((p for p in inst.parts if re.fullmatch(r"m\d+n\d+k\d+", p)), None)
    types = [p for p in inst.parts if p in ("f32", "f16", "bf16", "e4m3", "e5m2", "tf32", "s8",
                                             "u8", "s32")]
    if shape is None or len(types) != 3:
        raise Unsupported(f"'{inst.opcode}'")
    mm, n, k = (int(x) for x in re.findall(r"\d+", shape))
    dtype, atype, btype = types
    es = _ESIZE.get(atype)
    if mm != 64 or dtype != "f32" or es is None or atype != btype or k != 64 // es:
        raise Unsupported(f"'{inst.opcode}' (modelled: m64nNk32 with bf16/f16 inputs, m64nNk64 "
                          "with e4m3/e5m2 inputs, f32 accumulators)")
    ops = inst.operands
    d_regs = [op.reg for op in ops[0].items]
    if len(d_regs) != n // 2:
        raise Unsupported(f"'{inst.opcode}': {len(d_regs)} accumulator registers for N={n}")
    if ops[1].kind == "vec":
        raise Unsupported(f"'{inst.opcode}' with A in registers")
    a_desc = operand_reader(ops[1], "b64", m)
    b_desc = operand_reader(ops[2], "b64", m)
    meta = operand_reader(ops[3], "b32", m)
    sel = ops[4].value
    scale_d = operand_reader(ops[5], "pred" if ops[5].kind == "reg" else "s32", m)
    imms = [op.value for op in ops[6:]]
    want = 2 if es == 1 else 4
    if len(imms) != want or tuple(imms[:2]) != (1, 1) or any(imms[2:]):
        raise Unsupported(f"'{inst.opcode}' with negated or transposed inputs ({imms})")
    if sel not in ((0, 1) if es == 2 else (0,)):
        raise Unsupported(f"'{inst.opcode}' with sparsity selector {sel} (the PTX ISA allows "
                          f"{'0 or 1' if es == 2 else '0'} for this type)")

    def ex(w):
        lane0, accumulate, key = issue_begin(w, inst, scale_d, d_regs, None)
        rank, cta = w.warp_id % 4, w.cta
        bd, ad = int(b_desc(w)[lane0]), int(a_desc(w)[lane0])
        _check_row_fits(w, ad, k // 2 * es, inst, "A")
        _check_row_fits(w, bd, k * es, inst, "B")
        b_addr = operand_addrs(bd, n, k, es, False)
        a_addr = operand_addrs(ad, 64, k // 2, es, False)[16 * rank:16 * rank + 16]
        for addrs, what in ((b_addr, "B"), (a_addr, "A")):
            cta.races.async_read(inst, int(addrs.min()), int(addrs.max()) + es,
                                 f"the wgmma.sp {what} operand", key)
            cta.races.hb_warp(w, inst, addrs.ravel(), es, False, f"the wgmma.sp {what} operand")
        bmat = _to_f32(_gather(cta, b_addr, es), btype)                     # (n, k)
        packed = _to_f32(_gather(cta, a_addr, es), atype)                   # (16, k/2)
        values = meta(w).view(np.uint32)
        amat = dense_a(packed, values, es, sel,
                       lambda msg: w.machine.misuse_or_note(msg, inst, "sp-meta"))
        issue_result(w, inst, d_regs, None, accumulate, amat, bmat, key)
    return ex


def _check_row_fits(w, desc: int, row_bytes: int, inst, what: str) -> None:
    """A K-major swizzled operand's rows are one swizzle atom wide (W bytes of K in each
    of 8 rows): the instruction's K must lie within it."""
    sw = {0: 0, 1: 128, 2: 64, 3: 32}[(desc >> 62) & 3]
    if sw and row_bytes > sw:
        raise w.machine.misuse(f"wgmma.mma_async.sp reads {row_bytes} bytes of each {what} row "
                               f"from a {sw}-byte swizzled layout (K past one swizzle atom is "
                               "not modelled)", inst)
