"""`mma.store acc, <global tile>` in an MMA kernel: through a shared staging tile and a TMA store.

The MMA lowering writes an accumulator into a shared tile, each thread its
elements, and moves tiles between shared and global memory with TMA (its
kernels receive tensor maps, not pointers). A store straight into a global
tensor is therefore rewritten into that pair:

    mma.store acc, __stage_acc;            (a shared tile of the global tile's shape)
    tma.copy __stage_acc => <global tile>;  (synchronous: done reading it when it returns)

Inside a parallel region of several instances (`parallel wgm by 2 : group-4`)
each instance has its own staging tile (an array of them, indexed by the
region's variable) and issues its own store, as the program does. Only 2-D
tiles of static shape are rewritten; the TMA copy's own rules (contiguous rows,
box sizes) then apply, and what they refuse is refused by name there.
"""
from __future__ import annotations

from .. import ir


def run(kernel: ir.Kernel, target=None) -> None:
    if ir.is_warp_mma_kernel(kernel):
        return  # its lanes store their accumulator elements themselves (warp_mma.py)
    counter = iter(range(1 << 30))
    kernel.body = _rewrite(kernel, kernel.body, None, counter)


def _rewrite(kernel: ir.Kernel, stmts: list, region, counter) -> list:
    out = []
    for s in stmts:
        if isinstance(s, ir.MmaStore) and not s.direct and _global_tile(kernel, s.dst):
            out += _staged(kernel, s, region, next(counter))
            continue
        inner = s if isinstance(s, ir.Parallel) else region
        for attr in ("body", "then", "orelse"):
            sub = getattr(s, attr, None)
            if isinstance(sub, list):
                setattr(s, attr, _rewrite(kernel, sub, inner, counter))
        out.append(s)
    return out


def _global_tile(kernel: ir.Kernel, view: ir.View) -> bool:
    if kernel.buffer(view.base) is not None or kernel.param(view.base) is None:
        return False
    return view.rank == 2 and all(isinstance(e, ir.Const) for e in view.shape)


def _staged(kernel: ir.Kernel, s: ir.MmaStore, region, n: int) -> list:
    shape = tuple(e.value for e in s.dst.shape)
    count = region.extent if region is not None and region.extent > 1 else None
    name = f"__stage_{s.acc}" + (f"{n}" if n else "")
    dtype = kernel.param(s.dst.base).dtype
    kernel.buffers.append(ir.Buffer(name, "shared", dtype, shape, count=count, loc=s.loc))
    slot = ir.Sym(region.var, "s32") if count else None
    tile = ir.View(name, (ir.Const(0, "s32"),) * 2, tuple(ir.Const(x, "s32") for x in shape),
                   (True, True), slot=slot)
    return [ir.MmaStore(s.acc, tile, loc=s.loc, transposed=s.transposed),
            ir.TmaStore(tile, s.dst, loc=s.loc)]
