"""The block's thread and register budget, checked before any code is emitted.

The limits are the CUDA ones shared by sm_90a and sm_100a: a block has at most
1,024 threads, an SM runs at most 2,048 threads and 32 blocks, and an SM's
register file holds 65,536 32-bit registers. Past them ptxas or the launch
fails (`.maxntid 1152` assembles and then never launches), and a
`setmaxnreg.inc` that the block's share of the register file cannot satisfy
waits for ever. Each finding is a located error naming the numbers.
"""
from __future__ import annotations

from .. import ir
from ..diagnostics import ChoreoError

from ..sema.limits import (MAX_BLOCK_THREADS, MAX_SM_BLOCKS, MAX_SM_THREADS,  # noqa: F401
                           MAX_THREAD_REGS, SM_REGISTERS, WARPGROUP, check_launch_bounds,
                           entry_registers)


def _parallels(stmts: list[ir.Stmt]):
    for s in ir.walk(stmts):
        if isinstance(s, ir.Parallel):
            yield s


def _roles(par: ir.Parallel):
    for s in ir.walk(par.body):
        if isinstance(s, ir.Role):
            yield s


def block_threads(k: ir.Kernel) -> tuple[int, ir.Parallel | None]:
    """Threads of the block: the widest parallel region inside it (1 without one)."""
    best, where = 1, None
    for par in _parallels(k.body):
        n = par.extent * (par.threads or 1)
        if n > best:
            best, where = n, par
    return best, where


def check_kernel(k: ir.Kernel) -> None:
    threads, par = block_threads(k)
    loc = par.loc if par is not None else k.loc
    if threads > MAX_BLOCK_THREADS:
        groups = f" ({par.extent} x {par.threads} threads)" if par is not None else ""
        raise ChoreoError(f"the block has {threads} threads{groups}, more than the "
                          f"{MAX_BLOCK_THREADS} a CUDA block may have", loc)
    max_threads, blocks = (tuple(k.launch_bounds or ()) + (None, None))[:2]
    if max_threads is not None and max_threads < threads:
        raise ChoreoError(f"launch_bounds allows {max_threads} threads, but the block has "
                          f"{threads}", k.loc)
    blocks = blocks or 1
    if threads * blocks > MAX_SM_THREADS:
        raise ChoreoError(f"launch_bounds(_, {blocks}): {blocks} blocks of {threads} threads "
                          f"are {threads * blocks} threads, more than the {MAX_SM_THREADS} "
                          "of an SM", k.loc)
    if par is not None:
        _check_registers(k, par, threads, blocks)


def _check_direction(par: ir.Parallel, entry: int) -> None:
    """With the entry allocation fixed by launch_bounds, `setmaxnreg.inc` must ask for at
    least what a thread has and `.dec` for at most (PTX leaves the other way undefined;
    ptxas has been seen to crash on such code)."""
    for s in ir.walk(par.body):
        if not isinstance(s, ir.SetMaxRegs):
            continue
        if s.increase and s.count < entry:
            raise ChoreoError(f"setreg_inc({s.count}) asks for fewer registers than the {entry} "
                              "each thread has at launch; use setreg_dec to give some back",
                              s.loc)
        if not s.increase and s.count > entry:
            raise ChoreoError(f"setreg_dec({s.count}) asks for more registers than the {entry} "
                              "each thread has at launch; use setreg_inc to get more", s.loc)


def _check_registers(k: ir.Kernel, par: ir.Parallel, threads: int, blocks: int) -> None:
    """setmaxnreg moves registers between the warpgroups of one block: their sum must fit
    in the block's share of the register file, or `setmaxnreg.inc` never returns."""
    if par.threads != WARPGROUP:
        return
    entry = entry_registers(threads, blocks)
    if k.launch_bounds and len(k.launch_bounds) > 1 and k.launch_bounds[1] \
            and entry < MAX_THREAD_REGS:
        # Only a binding cap fixes the entry allocation (below 255 ptxas allocates what
        # the bounds allow); at the architectural cap it allocates what the code needs.
        _check_direction(par, entry)
    regs = [entry] * par.extent
    setters = []
    for role in _roles(par):
        if role.max_regs is None:
            continue
        setters.append(role)
        for m in role.members:
            if 0 <= m < par.extent:
                regs[m] = role.max_regs
    if not setters:
        return
    # The block's pool is what it got at launch: `entry` registers for each thread.
    need, pool = sum(regs) * WARPGROUP, entry * threads
    if need > pool:
        per = ", ".join(f"{r}" for r in regs)
        widest = max(setters, key=lambda r: r.max_regs)
        raise ChoreoError(f"the warpgroups ask setmaxnreg for {need} registers ({per} per "
                          f"thread), more than the {pool} the block gets at launch ({entry} "
                          f"per thread for {threads} threads, {blocks} block(s) per SM)",
                          widest.loc)
