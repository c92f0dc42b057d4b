"""`wait` on events whose buffers only tcgen05.mma reads: the issuing thread waits alone.

On sm_100a an MMA is issued by one thread and reads its shared-memory operands
through the async proxy; the other threads of the role never touch the tile a
TMA load publishes on such an event ("full" barriers of the K/V rings, the Q
tile). If they all wait too, a thread that falls behind can miss a phase: once
the issuing threads have released the slot and the producer has refilled it,
the barrier has completed two more phases and the late thread's parity test
reads the refill as incomplete, so it waits for a phase that needs its own
progress (a hang; the emulator reports such a waiter). CUTLASS has only the MMA
warp wait on its "full" barriers for the same reason.

An event qualifies when every buffer a load publishing it writes is named, in
the role that waits, by nothing but MMA operands (A or B). Anything else (an
`mma.load`, a TMA store of it, an element read) keeps the wait on every thread.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from choreo_py import ir

from ..core import events
from ..core.context import Lowering


def _mentions(obj, names: set, skip: tuple = ()) -> bool:
    """Whether any string inside `obj` (a statement's own fields) is one of `names`."""
    if isinstance(obj, str):
        return obj in names
    if isinstance(obj, ir.Stmt) and skip:
        return any(_mentions(getattr(obj, f.name), names)
                   for f in dataclasses.fields(obj) if f.name not in skip)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return any(_mentions(getattr(obj, f.name), names) for f in dataclasses.fields(obj)
                   if not _is_block(getattr(obj, f.name)))
    if isinstance(obj, (list, tuple)):
        return any(_mentions(x, names) for x in obj if not isinstance(x, ir.Stmt))
    return False


def _is_block(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, ir.Stmt) for x in v)


def _published_buffers(kernel: ir.Kernel, event: str) -> set:
    """Shared buffers written by the loads whose completion triggers `event`."""
    stmts = list(ir.walk(kernel.body))
    futures = {f for s in stmts if isinstance(s, ir.Trigger) and s.event.event == event
               for f in s.after}
    return {s.dst.base for s in stmts if isinstance(s, ir.TmaLoad) and s.future in futures}


def mma_only_event(kernel: ir.Kernel, role: ir.Role, event: str) -> bool:
    bufs = _published_buffers(kernel, event)
    if not bufs:
        return False
    for s in ir.walk(role.body):
        skip = ("a", "b") if isinstance(s, ir.Mma) else ()
        if skip:
            if _mentions(s, bufs, skip):
                return False
        elif _mentions(s, bufs):
            return False
    return True


def wait(target, lw: Lowering, s: ir.Wait) -> None:
    """The sm_100a `wait`: events only MMAs consume are waited by the issuing thread."""
    issuer = _issuer_only(target, lw, s)
    if issuer is None:
        events.wait(lw, s)
        if _orders_tmem(target, lw) and any(isinstance(i, ir.EventRef) for i in s.items):
            # the issuing thread of block accumulators: what the event orders (another
            # role's tensor-memory accesses) comes before its next MMA; a warpgroup that
            # reads or writes them: the MMAs (or stores) the event publishes come before
            # its next tcgen05.ld / st
            lw.w.call("ptx.tcgen05.fence_after_thread_sync")
        return
    w = lw.w
    names = ", ".join(i.event for i in s.items)
    w.comment(f"{names}: only the MMA-issuing thread reads what it publishes; it waits alone")
    done = w.label("issuer_waited")
    w.bra(done, issuer, negate=True)
    # Values made here are not available to the other threads (depth keeps them out of
    # the reuse cache). A plain `wait e` computes none (its address and parity are
    # constants) and must stay at depth 0, where its generation count is known.
    computed = any(i.order is not None or i.index is not None for i in s.items)
    lw.depth += computed
    events.wait(lw, s)
    lw.depth -= computed
    w.put_label(done)
    w.op("bar.warp.sync", -1)  # the warp reconverges before its next .aligned instruction


def _orders_tmem(target, lw: Lowering) -> bool:
    """A role that shares the block's accumulators with another through events."""
    if lw.role is None or not target.block:
        return False
    if lw.role.single_thread:
        return target.in_mma_role(lw)
    return not target.in_mma_role(lw)


def _issuer_only(target, lw: Lowering, s: ir.Wait) -> Optional[object]:
    if not target.in_mma_role(lw) or not s.items or lw.role.single_thread:
        return None
    if not all(isinstance(i, ir.EventRef) for i in s.items):
        return None
    kernel = lw.k
    if not all(mma_only_event(kernel, target.role, i.event) for i in s.items):
        return None
    return lw.issuer()
