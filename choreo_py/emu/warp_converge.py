"""`bar.warp.sync membermask`: the lanes of a warp wait for each other (reconvergence).

PTX ISA (bar.warp.sync): the executing thread waits until every non-exited thread in
membermask has executed a bar.warp.sync with the same mask. The sm_100a kernels rely
on it after a block only one lane runs (the MMA issue, the issuer-only mbarrier wait):
the .sync.aligned instructions that follow (tcgen05.ld/st, shfl.sync) need the whole
warp converged. Modelled as a per-warp rendezvous at the instruction: a group of lanes
that arrives before the others is parked; the group that completes the set releases
them, and all continue together at the next instruction.

This replaces the core's no-op decoder of the same opcode (registered later, it wins).
The warp votes (`vote.sync.ballot`, `.any`, `.all`) live here too: like the barrier,
they are defined over the lanes of the membermask executing them together.
"""
from __future__ import annotations

import numpy as np

from .isa_table import decoder
from .lanes import CONTROL, LANES, NONE
from .operands import operand_reader, writer


@decoder("bar.warp.sync")
def _dec_warp_sync(inst):
    from .isa_support import machine
    member = operand_reader(inst.operands[0], "u32", machine())
    key = ("bar.warp.sync", inst.idx)
    bits = np.uint32(1) << np.arange(LANES, dtype=np.uint32)

    def ex(w):
        mask = (member(w) & bits) != 0
        need = w.live & mask
        arrived = w.async_state.get(key, NONE) | w.gmask
        if (need & ~arrived).any():
            w.async_state[key] = arrived
            return w.block(lambda: key not in w.async_state or
                           not (w.live & mask & ~w.async_state[key]).any(),
                           "bar.warp.sync (the warp's other lanes)", retry=False)
        w.async_state.pop(key, None)
        waiting = [x for x in w.waits if x.inst is inst]
        if not waiting:
            return None
        for x in waiting:
            w.waits.remove(x)
            w.parked = w.parked & ~x.lanes
        w.lane_pc[arrived] = w.pc + 1
        w.repick()
        return CONTROL
    return ex


@decoder("vote.sync.ballot", "vote.ballot")
def _dec_vote_ballot(inst):
    """`vote.sync.ballot.b32 d, p, membermask`: bit i of d is lane i's p, for the lanes
    executing it (the mask's other live lanes must execute it too: reported otherwise,
    as for shfl.sync)."""
    from .isa_support import machine
    m = machine()
    ops = inst.operands
    p = operand_reader(ops[1], "pred", m)
    member = operand_reader(ops[2], "u32", m) if len(ops) > 2 else None
    wr = writer(ops[0], "b32", m)
    bits = np.uint32(1) << np.arange(LANES, dtype=np.uint32)

    def ex(w):
        _check_members(w, member, bits, inst)
        votes = np.asarray(p(w), bool) & w.mask
        wr(w, np.full(LANES, np.bitwise_or.reduce(np.where(votes, bits, 0)), np.uint32))
    return ex


@decoder("vote.sync.any", "vote.sync.all", "vote.any", "vote.all")
def _dec_vote_pred(inst):
    """`vote.sync.any.pred d, p, membermask` (`.all`): d is whether p holds in any (every)
    lane executing it, the same in each; `@!d bra.uni` is then a warp-uniform branch (the
    block-accumulator lowering skips a warp's tcgen05.ld/st by it). Lanes of the
    membermask that do not execute it are reported, as for the ballot. (A negated source,
    `!p`, is not read by the PTX parser, and the compiler does not write one.)"""
    from .isa_support import machine
    m = machine()
    ops = inst.operands
    p = operand_reader(ops[1], "pred", m)
    member = operand_reader(ops[2], "u32", m) if len(ops) > 2 else None
    wr = writer(ops[0], "pred", m)
    every = "all" in inst.opcode.split(".")
    bits = np.uint32(1) << np.arange(LANES, dtype=np.uint32)

    def ex(w):
        _check_members(w, member, bits, inst)
        votes = np.asarray(p(w), bool)
        held = bool(votes[w.mask].all()) if every else bool(votes[w.mask].any())
        wr(w, np.full(LANES, held, bool))
    return ex


def _check_members(w, member, bits, inst) -> None:
    """A live lane of a vote's membermask that does not execute it is reported (the warp
    would wait for it), as for shfl.sync."""
    if member is None:
        return
    missing = w.live & ((member(w) & bits) != 0) & ~w.mask
    if missing.any():
        w.machine.race(f"vote.sync: lane {int(np.flatnonzero(missing)[0])} of its "
                       "membermask does not execute it", inst)
