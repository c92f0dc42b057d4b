"""MMA kernels (and mma.sync kernels): a block whose only parallel region has one
instance is that region.

    mc = mma.fill.f32 0.0f;
    foreach {k} in [K / 64] {
      a_s = dma.copy.swiz<128> A.chunkat(m, k) => shared;      (passes/sync_copies.py: TMA)
      parallel g by 1 : group-4 { mma.row.row mc, a_s, ...; }
    }
    mma.store mc, output.chunkat(m, n);

The block has as many threads as its widest region; when the kernel has one
parallel region and it has one instance, the region's threads are the block's
threads, and every statement of the block, inside the region or around it, runs
on exactly those threads in program order. So the program is the same with the
whole body in the region, the region's own statements in its place (its
variable is 0). The MMA lowering needs that form: it lowers a parallel region as
the last statement of the kernel (its roles end their threads), keeps the
accumulators in the region's registers, and the interpreter models fragments per
instance (so does the thread lowering of mma.sync fragments, whose warpgroup
shares the rows of a `: group-4` region's fragments). Kernels with other
regions, or a region of several instances, are left as they are (and refused by
name where the lowering cannot join them).
"""
from __future__ import annotations

from .. import ir

_MMA_KINDS = (ir.Mma, ir.MmaFill, ir.MmaStore, ir.FragDecl, ir.TmaLoad, ir.TmaStore)


def run(kernel: ir.Kernel, target=None) -> None:
    regions = [s for s in ir.walk(kernel.body) if isinstance(s, ir.Parallel)]
    if len(regions) != 1 or regions[0].extent != 1:
        return
    if (ir.is_thread_kernel(kernel) and not ir.is_warp_mma_kernel(kernel)) or not (
            kernel.events or kernel.frags
            or any(isinstance(s, _MMA_KINDS) for s in ir.walk(kernel.body))):
        return  # a thread kernel joins its regions itself
    region = regions[0]
    if kernel.body == [region]:
        return
    if any(isinstance(s, ir.Role) for s in region.body):
        return  # roles select instances: the block's statements are in none of them
    body = _inline(kernel.body, region, region.body)
    region.body = body
    kernel.body = [region]


def _inline(stmts: list, region: ir.Parallel, body: list) -> list:
    """`stmts` with `region` replaced by `body` wherever it sits."""
    out = []
    for s in stmts:
        if s is region:
            out += body
            continue
        for attr in ("body", "then", "orelse"):
            sub = getattr(s, attr, None)
            if isinstance(sub, list):
                setattr(s, attr, _inline(sub, region, body))
        out.append(s)
    return out
