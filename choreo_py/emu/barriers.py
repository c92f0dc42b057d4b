"""The CTA's synchronisation objects: mbarriers (by shared address) and the named barriers 0-15.

A leaf module: machine.py keeps them per CTA, isa_sync.py creates mbarriers
(mbarrier.init); neither of those is imported here.
"""
from __future__ import annotations

import numpy as np

from .hb import join

_NONE = np.zeros(0, np.int32)


class MBarrier:
    """An mbarrier object: expected arrivals, pending arrivals and tx-count, phase.

    `phase` counts completed phases; a phase completes when both the
    pending arrival count and the transaction count are zero, and then the
    arrival count is re-armed. try_wait.parity P succeeds when the phase
    with parity P has completed, i.e. (phase & 1) != P."""

    __slots__ = ("addr", "count", "pending", "tx", "phase", "init_inst", "cta", "seen",
                 "clock", "done_clock")

    def __init__(self, cta, addr: int, count: int, inst) -> None:
        self.cta, self.addr, self.count = cta, addr, count
        self.pending, self.tx, self.phase = count, 0, 0
        self.init_inst = inst
        self.seen: dict = {}  # warp id -> last phase index it waited for
        # happens-before (hb.py): every arrival's clock (a release sequence: all arrivals
        # so far), and its snapshot at the last phase completion (what a wait acquires)
        self.clock = _NONE
        self.done_clock = _NONE

    def arrive(self, n: int = 1, clock=None) -> None:
        if clock is not None:
            self.clock = join(self.clock, clock)
        self.pending -= n
        if self.pending < 0:
            raise self.cta.machine.misuse(
                f"mbarrier at shared {self.addr:#x}: more arrivals than its count "
                f"{self.count} in phase {self.phase}", self.cta.current_inst())
        self._maybe_complete()

    def expect_tx(self, nbytes: int) -> None:
        self.tx += nbytes

    def complete_tx(self, nbytes: int, clock=None) -> None:
        if clock is not None:
            self.clock = join(self.clock, clock)
        self.tx -= nbytes
        self._maybe_complete()

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.done_clock = self.clock.copy()
            self.pending = self.count
            self.cta.notify()

    def describe(self) -> str:
        return (f"mbarrier at shared {self.addr:#x} (phase {self.phase}, parity {self.phase & 1}; "
                f"{self.count - self.pending}/{self.count} arrivals, tx {self.tx} bytes pending)")


class NamedBarrier:
    __slots__ = ("bid", "arrived", "expected", "generation", "warps", "clock", "done")

    def __init__(self, bid: int) -> None:
        self.bid, self.arrived, self.expected, self.generation = bid, 0, None, 0
        self.warps: list = []
        self.clock = _NONE   # the arrivals of the generation being filled (hb.py)
        self.done: dict = {}  # generation -> its arrivals' clock, the last completed one
