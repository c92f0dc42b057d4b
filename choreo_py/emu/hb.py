"""Happens-before between a CTA's agents: vector clocks and shadow memories.

A race is two accesses of the same shared-memory word (or tensor-memory cell),
at least one a write, by different agents, neither ordered before the other
by the PTX memory consistency model's synchronisation. It is decided from
the order the program establishes, not from the order a schedule happens to
run, so a missing barrier is reported under every schedule.

Agents (each an index into every vector clock):
- each warp (its lanes, converged or not, count as one agent: the emulator
  runs a warp's memory operations in program order);
- ("tma", mbarrier): the TMA loads completing on that mbarrier, whose epoch is
  the (1-based) phase their complete_tx counts toward;
- ("bulk", warp): the bulk stores (cp.async.bulk.tensor shared -> global) the
  warp issued, epoch = their issue number (groups retire in order);
- ("mma", warp): the tcgen05.mma work the warp issued (in order), epoch = issue
  number; tcgen05.commit tracks only the executing thread's MMAs.

Synchronisation (what joins one clock into another), by PTX ISA section title:
- bar.sync / bar.arrive / barrier.* ("bar, barrier"; "Memory Consistency
  Model"): every arrival releases into the barrier's
  generation; a bar.sync that the completed generation lets go acquires it.
- mbarrier ("mbarrier"; mbarrier arrive
  has release semantics, a test_wait/try_wait that returns true acquire): an
  arrive (also arrive.expect_tx, complete_tx, and the arrive-on of
  tcgen05.commit) releases into the barrier; the completion of a phase
  snapshots the barrier's clock; a wait that observes it acquires that
  snapshot (every earlier arrival, all earlier phases included: arrivals are
  read-modify-writes of one object, a release sequence).
- TMA loads ("cp.async.bulk.tensor", async proxy; completion
  mechanism mbarrier::complete_tx::bytes): the copy is ordered after its
  issue; its writes are the ("tma", mbarrier) agent's at the phase it
  completes toward, released into that phase.
- bulk stores ("cp.async.bulk.wait_group"): the source is read by
  ("bulk", warp) until the issuing warp's wait_group(.read) retires it; the
  wait acquires that, and only the issuing warp, so another warp may
  overwrite the source only after synchronising with the waiter.
- wgmma ("wgmma.wait_group"): each warp's operand reads are its own,
  at issue; the wait_group that retires an operation acquires the clocks of
  all four warps at their issue (it cannot complete before they issued).
- tcgen05 ("tcgen05 Memory Consistency Model", "tcgen05.fence"): the
  tensor-memory accesses of a warp's tcgen05 operations (tcgen05.ld/st, and
  the tcgen05.mma it issues) are those of a separate agent ("tc", warp),
  ordered against other threads only through the fences:
  tcgen05.fence::before_thread_sync puts the warp's tcgen05 work so far into
  the warp's own clock (so the next bar.sync / mbarrier arrive releases it),
  tcgen05.fence::after_thread_sync lets the warp's later tcgen05 work see
  what the warp acquired. A thread synchronisation without the fences
  orders the threads' generic work but not their tcgen05 work. tcgen05.mma
  runs on the in-order pipe, its tensor-memory accesses ordered after the
  issuer's tcgen05 view (its shared-memory operand reads after the issuer's
  generic view: TMA data waited for on an mbarrier needs no tcgen05 fence);
  tcgen05.commit's mbarrier arrive-on releases the pipe's work up to it.
- fence.proxy.async orders the generic and async proxies of one thread
  (races.py); other fences order nothing by themselves (a fence with no
  synchronising access after it creates no happens-before edge).
Atomics (red/atom) are not recorded (they do not race with each other).
"""
from __future__ import annotations

import numpy as np

EPOCH = np.int32
_EMPTY = np.zeros(0, EPOCH)


def join(into: np.ndarray, other: np.ndarray) -> np.ndarray:
    """`into` raised to `other` entry-wise (grown to `other`'s length if shorter)."""
    if other.size > into.size:
        into = np.concatenate([into, np.zeros(other.size - into.size, EPOCH)])
    np.maximum(into[:other.size], other, out=into[:other.size])
    return into


class Clocks:
    """The CTA's agents and their vector clocks (one per warp; async agents are
    given the clock of what they are ordered after when their access is checked)."""

    def __init__(self, nwarps: int) -> None:
        self.nwarps = nwarps
        self.names = [f"warp {i}" for i in range(nwarps)]
        self.index: dict = {}
        self.cap = nwarps + 16
        self.vc = [np.zeros(self.cap, EPOCH) for _ in range(nwarps)]
        for w in range(nwarps):
            self.vc[w][w] = 1
        self.shadows: list = []
        self.epochs: dict = {}   # async agent -> its last epoch
        self.tc_epoch: dict = {}  # warp -> epoch of its tcgen05 operations' agent
        self.tc_clock: dict = {}  # warp -> the clock its tcgen05 operations are ordered after

    def agent(self, key, name: str) -> int:
        a = self.index.get(key)
        if a is None:
            a = self.index[key] = len(self.names)
            self.names.append(name)
            if a >= self.cap:
                self._grow()
        return a

    def _grow(self) -> None:
        extra = self.cap
        self.cap += extra
        self.vc = [join(np.zeros(self.cap, EPOCH), c) for c in self.vc]
        for s in self.shadows:
            s.grow(self.cap)

    def clock(self, w: int) -> np.ndarray:
        return self.vc[w]

    def release(self, w: int) -> np.ndarray:
        """A snapshot of warp w's clock to hand on; w's later work is not in it."""
        snap = self.vc[w].copy()
        self.vc[w][w] += 1
        return snap

    def acquire(self, w: int, clock) -> None:
        if clock is not None:
            self.vc[w] = join(self.vc[w], clock)

    # -- tcgen05 operations of a warp: an agent of their own (tcgen05.fence) --
    def tc_agent(self, w: int) -> int:
        return self.agent(("tc", w), f"warp {w}'s tcgen05 operations")

    def tc_view(self, w: int):
        """(agent, epoch, clock) of warp w's tcgen05 operations issued now."""
        a = self.tc_agent(w)
        e = self.tc_epoch.setdefault(w, 1)
        clock = self.padded(self.tc_clock.get(w, _EMPTY)).copy()
        clock[a] = e
        return a, e, clock

    def tc_fence_before(self, w: int) -> None:
        """tcgen05.fence::before_thread_sync: w's tcgen05 work so far joins w's clock."""
        a = self.tc_agent(w)
        e = self.tc_epoch.setdefault(w, 1)
        self.vc[w] = self.padded(self.vc[w])
        self.vc[w][a] = max(int(self.vc[w][a]), e)
        self.tc_epoch[w] = e + 1

    def tc_fence_after(self, w: int) -> None:
        """tcgen05.fence::after_thread_sync: w's later tcgen05 work sees w's clock."""
        self.tc_clock[w] = join(self.padded(self.tc_clock.get(w, _EMPTY)).copy(), self.vc[w])

    def padded(self, clock: np.ndarray) -> np.ndarray:
        return clock if clock.size >= self.cap else join(np.zeros(self.cap, EPOCH), clock)


class Shadow:
    """Per cell: the last write (agent, epoch, instruction index) and the reads since
    (epoch and instruction per agent). FastTrack's rule: a read races with an unordered
    last write; a write with an unordered last write or any unordered read since."""

    def __init__(self, clocks: Clocks, ncells: int, what: str) -> None:
        self.clocks = clocks
        self.what = what
        self.w_agent = np.full(ncells, -1, np.int32)
        self.w_epoch = np.zeros(ncells, EPOCH)
        self.w_inst = np.zeros(ncells, np.int32)
        self.r_epoch = np.zeros((ncells, clocks.cap), EPOCH)
        self.r_inst = np.zeros((ncells, clocks.cap), np.int32)
        self.any_read = np.zeros(ncells, bool)
        clocks.shadows.append(self)

    def grow(self, cap: int) -> None:
        n = self.r_epoch.shape[0]
        pad = cap - self.r_epoch.shape[1]
        self.r_epoch = np.concatenate([self.r_epoch, np.zeros((n, pad), EPOCH)], axis=1)
        self.r_inst = np.concatenate([self.r_inst, np.zeros((n, pad), np.int32)], axis=1)

    def access(self, cells: np.ndarray, write: bool, agent: int, epoch: int,
               clock: np.ndarray, inst_idx: int):
        """Checks and records one access; returns None, or (cell, other agent, other's
        instruction index, whether the other access wrote) of the first race."""
        clock = self.clocks.padded(clock)
        wa = self.w_agent[cells]
        other = (wa >= 0) & (wa != agent)
        if other.any():
            bad = other & (self.w_epoch[cells] > clock[np.where(other, wa, 0)])
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                c = int(cells[k])
                return c, int(wa[k]), int(self.w_inst[c]), True
        if write:
            touched = self.any_read[cells]
            if touched.any():
                rc = cells[touched]
                r = self.r_epoch[rc]
                bad = r > clock[None, :r.shape[1]]
                bad[:, agent] = False
                if bad.any():
                    i, a = (int(x) for x in np.argwhere(bad)[0])
                    c = int(rc[i])
                    return c, a, int(self.r_inst[c, a]), False
                self.r_epoch[rc] = 0
                self.any_read[rc] = False
            self.w_agent[cells] = agent
            self.w_epoch[cells] = epoch
            self.w_inst[cells] = inst_idx
        else:
            self.r_epoch[cells, agent] = epoch
            self.r_inst[cells, agent] = inst_idx
            self.any_read[cells] = True
        return None


def words(addrs: np.ndarray, size: int) -> np.ndarray:
    """The 4-byte word indices an access of `size` bytes at each address touches."""
    a = np.asarray(addrs, dtype=np.int64)
    if size <= 4:
        return a >> 2
    return np.concatenate([(a + k) >> 2 for k in range(0, size, 4)])
