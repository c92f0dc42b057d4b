"""sm_100a: a parallel region of one instance whose MMAs stand in no role becomes one role.

`parallel g by 1 : group-4 { mc = mma.fill...; mma.row.row mc, a, b; mma.store mc, out; }`
means the one warpgroup computes the tile. wgmma (sm_90a) is issued by the
warpgroup as written. tcgen05 (sm_100a) issues an MMA from one thread and keeps
the accumulator in tensor memory, and its lowering organises that around the
kernel's MMA role (`inthreads.async`): the role's instances own the
accumulator, one thread issues, all of them read it back. A region of one
instance without roles is exactly the role of that instance (`inthreads.async
(g == 0)` around its whole body), so it is rewritten into it. Regions of several
instances without roles stay as they are (each instance would need an
accumulator of its own in tensor memory) and are refused by name there.
"""
from __future__ import annotations

from .. import ir


def run(kernel: ir.Kernel, target) -> None:
    if not target.mma_barriers:  # the tcgen05 targets
        return
    regions = [s for s in ir.walk(kernel.body)
               if isinstance(s, ir.Parallel) and s.extent == 1 and _mmas_without_roles(s)]
    for s in regions:
        cond = ir.Bin("==", ir.Sym(s.var, "s32"), ir.Const(0, "s32"), "bool")
        s.body = [ir.Role(f"{s.var} == 0", cond, (0,), s.body, loc=s.loc)]


def _mmas_without_roles(p: ir.Parallel) -> bool:
    inner = list(ir.walk(p.body))
    return any(isinstance(t, ir.Mma) for t in inner) and \
        not any(isinstance(t, (ir.Role, ir.Parallel)) for t in inner)
