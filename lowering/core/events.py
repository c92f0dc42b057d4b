"""Shared events as mbarriers; waits on futures.

| Choreo | PTX |
|---|---|
| `shared event e[N]` | N mbarriers, initialised by thread 0 with the arrival count (one per triggering role instance), then `fence.mbarrier_init` and a block barrier |
| `wait e.at(order)` | spin on slot `order % N` with phase parity `(order / N) & 1` (`^ 1` for `= ready` events, whose generation 0 starts complete) |
| `wait e` (no order) | the generation this path waits next, counted at compile time; where a wait on `e` is inside a loop or branch of the role, a phase register per role flipped after each wait |
| `trigger e after f, g` | the loads' issuing thread arms slot e with `arrive.expect_tx` (their byte count) before the first load; the loads complete it |
| `trigger e after qk` (MMA future) | the target's `commit_trigger` (tcgen05: the issuing thread commits its MMAs to slot e) |
| `trigger e` | one `mbarrier.arrive` per role instance, by its thread 0 (`trigger e[i]`: on slot i) |
| `wait f` (MMA future) | the target's wait (wgmma: `wait_group N`, N from analysis.py) |
| `tma.load src => dst` (synchronous) | its slot of `__tma_sync` (choreo_py/ir/sync_slots.py; pass sync-copies) armed with the load's bytes, the load, then a wait by the threads that run it (a leader-only load's: by its role's threads after the leader's block) on a phase register of its own, flipped after each wait |
"""
from __future__ import annotations

from typing import Optional

from choreo_py import ir
from choreo_py.diagnostics import ChoreoError

from choreo_py.ir.sync_slots import SYNC_EVENT

from .analysis import view_elems
from .context import Lowering
from .exprs import ExprLowering
from .writer import V


def init_events(lw: Lowering) -> None:
    k = lw.k
    if not k.events:
        return
    w = lw.w
    w.comment("mbarriers for the shared events: thread 0 initialises, then the block syncs")
    t0 = w.reg("pred", "is_thread0")
    w.op("setp.eq.u32", t0, lw.tid, 0)
    for ev in k.events:
        count = lw.facts.arrivals[ev.name]
        w.source(ev.loc)
        for slot in range(ev.slots or 1):
            w.call("ptx.mbarrier.init", f"ptx.addr({lw.smem_base.text}, {ev.offset + 8 * slot})",
                   str(count), f"pred={t0.text}")
    w.call("ptx.fence.mbarrier_init", f"pred={t0.text}")
    w.call("ptx.bar.sync", "0")


def _event(lw: Lowering, ref: ir.EventRef, loc) -> ir.Event:
    ev = lw.k.event(ref.event)
    if ev is None:
        raise ChoreoError(f"'{ref.event}' is not an event of this kernel", loc)
    return ev


def slot_address(lw: Lowering, ref: ir.EventRef, loc, by_slot: bool = False) -> tuple[V, int]:
    """(register, byte offset) of the mbarrier `ref` names; `by_slot`: `e[i]` may name one by
    its physical slot (a trigger arrives there; a wait would need the slot's generation)."""
    ev = _event(lw, ref, loc)
    n = ev.slots or 1
    if ref.order is None and ref.index is not None and not by_slot:
        raise lw.refuse(f"indexing event '{ev.name}' by physical slot ('{ev.name}[i]')", loc)
    if (ref.order is None and ref.index is None) or n == 1:
        return lw.smem_base, ev.offset
    ex = ExprLowering(lw, loc)
    if ref.order is None:  # `e[i]`, i < n (sema checks constant indices; the program's word)
        b = ex.value(ir.Bin("*", ref.index, ir.Const(8, "s32"), ref.index.dtype),
                     f"{ev.name}_slot")
        if b.is_const:
            return lw.smem_base, ev.offset + b.const
        out = lw.w.reg("u32", f"{ev.name}_bar")
        lw.w.op("add.u32", out, lw.smem_base, ex.as_type(b, "u32"))
        return out, ev.offset
    slot = ir.Bin("%", ref.order, ir.Const(n, "s32"), ref.order.dtype)
    byte = ir.Bin("*", slot, ir.Const(8, "s32"), ref.order.dtype)
    if n & (n - 1) == 0 and ex.nonneg(ref.order):
        byte = ir.Bin("<<", slot, ir.Const(3, "s32"), ref.order.dtype)
    b = ex.value(byte, f"{ev.name}_slot")
    if b.is_const:
        return lw.smem_base, ev.offset + b.const
    out = lw.w.reg("u32", f"{ev.name}_bar")
    # an order of any integer type (`mutable s64 order`): its slot's offset is a u32 word
    lw.w.op("add.u32", out, lw.smem_base, ex.as_type(b, "u32"))
    return out, ev.offset


def parity(lw: Lowering, ref: ir.EventRef, loc) -> V:
    ev = _event(lw, ref, loc)
    ex = ExprLowering(lw, loc)
    if ref.order is not None:
        n = ev.slots or 1
        gen = ir.Bin("/", ref.order, ir.Const(n, "s32"), ref.order.dtype)
        bit = ir.Bin("&", gen, ir.Const(1, "s32"), ref.order.dtype)
        if ev.ready:
            bit = ir.Bin("^", bit, ir.Const(1, "s32"), ref.order.dtype)
        return ex.as_type(ex.value(bit, f"{ev.name}_phase"), "u32")  # try_wait's b32 parity
    counts = lw.plain_waits
    if isinstance(counts.get(ev.name), V):  # counted at run time (plain_phases)
        return counts[ev.name]
    if lw.depth or lw.loops:
        raise lw.refuse(f"waiting '{ev.name}' without .at(order) inside a loop or branch", loc)
    gen = counts.get(ev.name, 0)
    counts[ev.name] = gen + 1
    return V.imm((gen & 1) ^ (1 if ev.ready else 0), "u32")


def plain_phases(lw: Lowering, body: list) -> None:
    """Phase registers for the events that `body` (a role's code, or the block's) waits
    without an order inside a loop or branch: the generation such a wait is for is the
    number of waits this thread made on the event before, known only at run time. Each
    starts at generation 0's parity and flips after every wait on the event (any wait on
    it in `body`, so the count stays one count)."""
    names = sorted({item.event for s in _nested(body, lw.role is not None)
                    if isinstance(s, ir.Wait)
                    for item in s.items if isinstance(item, ir.EventRef) and item.order is None})
    for name in names:
        ev = lw.k.event(name)
        if ev is None:
            continue
        lw.plain_waits[name] = lw.w.reg("u32", f"{name}_phase", V.imm(1 if ev.ready else 0, "u32"))


def _nested(body: list, in_role: bool = False):
    """The statements of `body` inside a loop or branch (not inside a role of a parallel
    region). In a role's code a role nested in it (sema/role_forms.py) is a branch: only
    its members run it."""
    for s in body:
        if isinstance(s, ir.Role) and not in_role:
            continue
        if isinstance(s, (ir.For, ir.While, ir.If, ir.Role)):
            yield from ir.walk(_blocks(s))
        else:
            for block in ir.child_blocks(s):
                yield from _nested(block, in_role)


def _blocks(s) -> list:
    return [t for block in ir.child_blocks(s) for t in block]


def wait(lw: Lowering, s: ir.Wait) -> None:
    waits = lw.facts.wait_groups.get(id(s), {})
    for item in s.items:
        if isinstance(item, ir.EventRef):
            reg, off = slot_address(lw, item, s.loc)
            ph = parity(lw, item, s.loc)
            lw.w.call("ptx.mbarrier.wait", _addr(reg, off), ph.text)
            if item.order is None and lw.plain_waits.get(item.event) is ph:
                lw.w.op("xor.b32", ph, ph, 1)  # the next wait is for the next generation
        elif item.future in lw.facts.mma_futures:
            n = waits.get(item.future)
            if n is None:
                lw.w.comment(f"{item.future} has completed on every path here")
            else:
                lw.target.wait(lw, n)
        else:
            raise lw.refuse(f"waiting the copy future '{item.future}' directly (publish it with "
                            f"'trigger <event> after {item.future}')", s.loc)


def trigger(lw: Lowering, s: ir.Trigger) -> None:
    if id(s) in lw.facts.published:
        lw.w.comment(f"armed before the loads above: they complete {s.event.event}")
        return
    if id(s) in lw.facts.commits:  # analysis: only targets with `commit_trigger` record them
        lw.target.commit_trigger(lw, s)
        return
    reg, off = slot_address(lw, s.event, s.loc, by_slot=True)
    pred = lw.issuer()
    if pred is not None:
        lw.instance_sync_if_dirty()
    args = [_addr(reg, off)] + ([f"pred={pred.text}"] if pred is not None else [])
    lw.w.call("ptx.mbarrier.arrive", *args)


def arm(lw: Lowering, group, loc, pred: Optional[V]) -> tuple[V, int]:
    """`arrive.expect_tx` on the event a group of loads publishes; returns its address."""
    reg, off = slot_address(lw, group.trigger.event, loc)
    args = [_addr(reg, off), str(group.nbytes)] + ([f"pred={pred.text}"] if pred else [])
    lw.w.call("ptx.mbarrier.arrive_expect_tx", *args)
    return reg, off


def sync_load_phases(lw: Lowering) -> None:
    """Phase registers of the synchronous loads' mbarrier slots, one per load statement
    (its slot completes once per execution, and the threads that wait on it are always the
    ones that run it), initialised by every thread before any code that may run one."""
    lw.sync_load_phase = {i: lw.w.reg("u32", "tma_sync_phase", V.imm(0, "u32"))
                          for i in sorted(set(lw.facts.sync_loads.values()))}


def sync_load(lw: Lowering, s: ir.TmaLoad, slot: int) -> None:
    """A synchronous TMA load: armed with its bytes, issued, waited (see the table)."""
    ev = lw.k.event(SYNC_EVENT)
    pred = lw.issuer()
    lw.instance_sync_if_dirty()
    off = ev.offset + 8 * slot
    nbytes = view_elems(s.dst, s.loc) * ir.dtype_bytes(lw.k.buffer(s.dst.base).dtype)
    args = [_addr(lw.smem_base, off), str(nbytes)] + ([f"pred={pred.text}"] if pred else [])
    lw.w.call("ptx.mbarrier.arrive_expect_tx", *args)
    lw.memory.tma_load(s, (lw.smem_base, off), pred)
    ph = lw.sync_load_phase[slot]

    def wait() -> None:
        lw.w.comment("a synchronous load: its threads wait for the tile")
        lw.w.call("ptx.mbarrier.wait", _addr(lw.smem_base, off), ph.text)
        lw.w.op("xor.b32", ph, ph, 1)
    if lw.leader_waits is not None:  # issued in a leader's block: waited after it
        lw.leader_waits.append(wait)
    else:
        wait()


def _addr(reg: V, off: int) -> str:
    return f"ptx.addr({reg.text}, {off})" if off else f"ptx.addr({reg.text})"
