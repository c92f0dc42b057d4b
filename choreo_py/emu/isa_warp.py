"""Warp-level data exchange: shfl.sync, elect.sync, activemask.

shfl.sync follows the PTX ISA's lane computation: c packs the clamp value
(bits 0-4) and the segment mask (bits 8-12); a source lane outside the
segment's bounds leaves the destination with the thread's own value and the
optional predicate false. Reading a lane that does not execute the shuffle
is reported (its value would be undefined).
"""
from __future__ import annotations

import numpy as np

from .isa_table import decoder
from .lanes import LANES
from .operands import operand_reader, writer


@decoder("shfl")
def _dec_shfl(inst):
    from .isa_support import machine
    m = machine()
    mode = next(p for p in inst.parts if p in ("bfly", "up", "down", "idx"))
    ops = inst.operands
    dst, pdst = ops[0], None
    if dst.kind == "vec":
        dst, pdst = dst.items
    a = operand_reader(ops[1], "b32", m)
    b = operand_reader(ops[2], "u32", m)
    c = operand_reader(ops[3], "u32", m)
    wr = writer(dst, "b32", m)
    wp = writer(pdst, "pred", m) if pdst is not None else None
    lane = np.arange(LANES, dtype=np.int64)

    def ex(w):
        bb = b(w).astype(np.int64)
        cc = c(w).astype(np.int64)
        seg = (cc >> 8) & 31
        clamp = cc & 31
        min_lane = lane & seg
        max_lane = min_lane | (clamp & ~seg)
        if mode == "bfly":
            j = lane ^ bb
            ok = j <= max_lane
        elif mode == "up":
            j = lane - bb
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bb
            ok = j <= max_lane
        else:
            j = min_lane | (bb & ~seg)
            ok = j <= max_lane
        j = np.where(ok, j, lane) & 31
        src_lanes = j[w.mask]
        if not w.mask[src_lanes].all():
            bad = int(src_lanes[~w.mask[src_lanes]][0])
            w.machine.race(f"shfl.sync reads lane {bad}, which does not execute it", inst)
        v = a(w)
        wr(w, v[j])
        if wp:
            wp(w, ok)
    return ex


@decoder("elect")
def _dec_elect(inst):
    from .isa_support import machine
    m = machine()
    ops = inst.operands
    dst, pdst = ops[0], None
    if dst.kind == "vec":
        dst, pdst = dst.items
    member = operand_reader(ops[1], "u32", m)
    wr = writer(dst, "u32", m)
    wp = writer(pdst, "pred", m) if pdst is not None else None

    def ex(w):
        mm = (member(w)[0] >> np.arange(LANES, dtype=np.uint32)) & 1
        cand = np.flatnonzero(w.mask & (mm == 1))
        leader = int(cand[0]) if cand.size else 0
        wr(w, np.full(LANES, leader, dtype=np.uint32))
        if wp:
            wp(w, np.arange(LANES) == leader)
    return ex


@decoder("activemask")
def _dec_activemask(inst):
    from .isa_support import machine
    wr = writer(inst.operands[0], "b32", machine())
    bits = (1 << np.arange(LANES, dtype=np.uint64)).astype(np.uint64)
    return lambda w: wr(w, np.full(LANES, int(bits[w.mask].sum()), dtype=np.uint32))
