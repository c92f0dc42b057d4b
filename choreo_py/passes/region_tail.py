"""MMA kernels: the statements around a block's only parallel region, when it is the block.

    mc = mma.fill.f32 0.0f;
    parallel by 1 : group-4 { mma.row.row mc, a, b; }
    mma.store mc, output.chunkat(bm, bn);

The block has as many threads as its widest region; when the kernel has one
parallel region and it has one instance, the region's threads are the block's
threads, and what follows the region runs on exactly those threads after them:
it is the same program with the statements at the end of the region. The MMA
lowering lowers a parallel region as the last statement of its list (joining
the instances of wider regions is not lowered there), so the statements move
in. So do the fragments declared or filled before it in the same list: the
block's fragments are then its one instance's (the interpreter models registers
per instance, and tcgen05 keeps the accumulators of the role that issues the
MMAs). Kernels with other regions, or regions of several instances, are left as
they are (and refused by name where the lowering cannot join them).
"""
from __future__ import annotations

from .. import ir

_MMA_KINDS = (ir.Mma, ir.MmaFill, ir.MmaStore, ir.FragDecl, ir.TmaLoad, ir.TmaStore)


def run(kernel: ir.Kernel, target=None) -> None:
    regions = [s for s in ir.walk(kernel.body) if isinstance(s, ir.Parallel)]
    if len(regions) != 1 or regions[0].extent != 1:
        return
    if not (kernel.events or kernel.frags
            or any(isinstance(s, _MMA_KINDS) for s in ir.walk(kernel.body))):
        return  # a thread kernel joins its regions itself
    _move_tail(kernel.body, regions[0])


def _move_tail(stmts: list, region: ir.Parallel) -> bool:
    """Moves the statements after `region` in the list holding it; True once found."""
    for i, s in enumerate(stmts):
        if s is region:
            region.body += stmts[i + 1:]
            del stmts[i + 1:]
            head = [t for t in stmts[:i] if isinstance(t, (ir.FragDecl, ir.MmaFill))]
            region.body[:0] = head
            stmts[:] = [t for t in stmts if not any(t is h for h in head)]
            return True
        for attr in ("body", "then", "orelse"):
            sub = getattr(s, attr, None)
            if isinstance(sub, list) and _move_tail(sub, region):
                return True
    return False
