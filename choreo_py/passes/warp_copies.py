"""Synchronous TMA copies in a warp-MMA kernel become cooperative copies.

A kernel whose MMAs take both operands as register fragments (the mma.sync
form: ir.is_warp_mma_kernel) is lowered thread by thread, and thread kernels
move tiles with cooperative `ld`/`st` loops, not with TMA (no tensor maps).
A synchronous `tma.copy` means only that the tile is in place, for every
thread, at the next statement, which the cooperative copy also gives; so it
is rewritten into a `dma.copy` of the same views. Its swizzle is dropped: the
layout of a tile in shared memory is no statement's business here (the
lowering's `mma.load` reads the tile as the copy wrote it), and the thread
copies write tiles row-major. Asynchronous TMA copies are left as they are
(a kernel with them is no warp-MMA kernel, and is refused by name).
"""
from __future__ import annotations

from .. import ir


def run(kernel: ir.Kernel, target=None) -> None:
    if ir.is_warp_mma_kernel(kernel):
        kernel.body = _rewrite(kernel.body)


def _rewrite(stmts: list) -> list:
    out = []
    for s in stmts:
        if isinstance(s, (ir.TmaLoad, ir.TmaStore)) and s.future is None:
            s = ir.DmaCopy(s.src, s.dst, None, None, loc=s.loc, leader_only=s.leader_only)
        for attr in ("body", "then", "orelse"):
            if isinstance(getattr(s, attr, None), list):
                setattr(s, attr, _rewrite(getattr(s, attr)))
        out.append(s)
    return out
