"""sm_100a: a parallel region whose MMAs stand in no role becomes one role of its instances.

`parallel g by 1 : group-4 { mc = mma.fill...; mma.row.row mc, a, b; mma.store mc, out; }`
means the one warpgroup computes the tile. wgmma (sm_90a) is issued by the
warpgroup as written. tcgen05 (sm_100a) issues an MMA from one thread and keeps
the accumulator in tensor memory, and its lowering organises that around the
kernel's MMA role (`inthreads.async`): the role's instances own the
accumulator, one thread issues, all of them read it back. A region of one
instance without roles is exactly the role of that instance (`inthreads.async
(g == 0)` around its whole body), so it is rewritten into it. A region of several
instances without roles (`parallel wgm by 2 : group-4 { ... }`, each warpgroup its
own tile) is likewise the role of all its instances (`inthreads.async (wgm < 2)`:
every instance runs the whole body, nothing runs beside it); the role's instances
each own an accumulator in tensor memory, as the instances of any MMA role do.
"""
from __future__ import annotations

from .. import ir


def run(kernel: ir.Kernel, target) -> None:
    if not target.mma_barriers:  # the tcgen05 targets
        return
    regions = [s for s in ir.walk(kernel.body)
               if isinstance(s, ir.Parallel) and _mmas_without_roles(s)]
    for s in regions:
        if s.extent == 1:
            cond = ir.Bin("==", ir.Sym(s.var, "s32"), ir.Const(0, "s32"), "bool")
            s.body = [ir.Role(f"{s.var} == 0", cond, (0,), s.body, loc=s.loc)]
        else:
            cond = ir.Bin("<", ir.Sym(s.var, "s32"), ir.Const(s.extent, "s32"), "bool")
            s.body = [ir.Role(f"{s.var} < {s.extent}", cond, tuple(range(s.extent)), s.body,
                              loc=s.loc)]


def _mmas_without_roles(p: ir.Parallel) -> bool:
    inner = list(ir.walk(p.body))
    return any(isinstance(t, ir.Mma) for t in inner) and \
        not any(isinstance(t, (ir.Role, ir.Parallel)) for t in inner)
