"""sm_100a: the mbarriers that MMA completion arrives on, and the tensor-memory address slot.

tcgen05.mma completes asynchronously and says so only through
`tcgen05.commit ... mbarrier::arrive::one`: every MMA future (and every
synchronous MMA, which gets a future of its own, waited right after it) needs
an mbarrier per instance of the role issuing it, one arrival per generation.
`tcgen05.alloc` writes the allocated tensor-memory address to shared memory,
which needs an 8-byte slot. Both are appended to the shared-memory plan
after the program's own buffers and events:

    event mma.<future>[<role instances>] pending arrivals=1 offset=...
    mma... commit=mma.<future>
    tmem_slot <offset>

An MMA whose future no `wait` names (one that `trigger e after f` publishes)
gets no mbarrier and no `commit=`: the events' commits are its only completion.

Only for targets whose MMAs complete through mbarriers (targets.Target
.mma_barriers); only for the role that issues MMAs (the backend refuses
MMAs elsewhere).
"""
from __future__ import annotations

from typing import Optional

from .. import ir
from ..targets import Target

BARRIER_BYTES = 8


def mma_role(kernel: ir.Kernel) -> Optional[ir.Role]:
    """The first role whose body issues an MMA."""
    for s in ir.walk(kernel.body):
        if isinstance(s, ir.Role) and any(isinstance(t, ir.Mma) for t in ir.walk(s.body)):
            return s
    return None


def future_name(s: ir.Mma, index: int) -> str:
    """The MMA's future, or the name a synchronous MMA's own future gets."""
    if s.future:
        return s.future
    return f"mma_line{s.loc.line}_{s.loc.col}" if s.loc else f"mma{index}"


def run(kernel: ir.Kernel, target: Target) -> None:
    if not target.mma_barriers or kernel.tmem_slot is not None:
        return
    role = mma_role(kernel)
    if role is None:
        return
    offset = -(-(kernel.smem_total or 0) // BARRIER_BYTES) * BARRIER_BYTES
    made: set[str] = set()
    mmas = [s for s in ir.walk(role.body) if isinstance(s, ir.Mma)]
    waited = {i.future for s in ir.walk(kernel.body) if isinstance(s, ir.Wait)
              for i in s.items if isinstance(i, ir.FutureRef)}
    for index, s in enumerate(mmas):
        if s.future is not None and s.future not in waited:
            s.completion = None  # only `trigger ... after` observes it: their commits
            continue
        name = "mma." + future_name(s, index)
        s.completion = name
        if name not in made:
            made.add(name)
            kernel.events.append(ir.Event(name, len(role.members), offset=offset, arrivals=1))
            offset += BARRIER_BYTES * len(role.members)
    kernel.tmem_slot = offset
    kernel.smem_total = offset + BARRIER_BYTES
