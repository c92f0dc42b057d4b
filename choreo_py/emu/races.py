"""Strict-mode shared-memory race rules (per CTA).

- An asynchronous write in flight (a TMA copy before its transaction
  completes) must not be read or written by the generic proxy (ld/st.shared),
  nor read by another asynchronous operation (a wgmma operand).
- An asynchronous read in flight (a wgmma operand before wgmma.wait_group
  retires it; a bulk store's source before cp.async.bulk.wait_group.read)
  must not be overwritten, by st.shared or by a TMA copy.
- A generic-proxy write (st.shared) read by the async proxy (wgmma operand,
  bulk store source) must be followed, in the writing warp, by
  `fence.proxy.async` before that read is issued.

Shared memory is tracked per 4-byte word: the last unfenced generic write's
instruction and warp.

Besides these in-flight rules, every shared-memory access (ld/st.shared, TMA
loads and stores, wgmma and tcgen05.mma operands) is checked by happens-before
(hb.py): two accesses of a word by different agents, one a write, that no
synchronisation orders are a race whatever the schedule.
"""
from __future__ import annotations

import numpy as np

from .hb import Shadow, words as _words


class SmemTracker:
    def __init__(self, cta) -> None:
        self.cta = cta
        self.machine = cta.machine
        words = (cta.smem.size + 3) // 4
        self.unfenced = np.full(words, -1, dtype=np.int32)   # instruction index
        self.unfenced_warp = np.full(words, -1, dtype=np.int16)
        self.any_unfenced = False
        self.writes: list = []   # in-flight async writes: [lo, hi, inst, what]
        self.reads: list = []    # in-flight async reads: [lo, hi, inst, key]
        self.hb = Shadow(cta.hb, words, "shared memory")

    # ------------------------------------------------------------ happens-before
    def hb_warp(self, warp, inst, addrs: np.ndarray, size: int, write: bool, what: str) -> None:
        """An access by `warp` itself (ld/st.shared, a wgmma operand) at its current epoch."""
        w = warp.warp_id
        clock = self.cta.hb.vc[w]
        self.hb_check(inst, _words(addrs, size), write, w, int(clock[w]), clock, what)

    def hb_check(self, inst, cells: np.ndarray, write: bool, agent: int, epoch: int,
                 clock: np.ndarray, what: str) -> None:
        hit = self.hb.access(cells, write, agent, epoch, clock, inst.idx)
        if hit is not None:
            race_report(self.machine, self.cta.hb, "shared memory", hit, write, agent, what,
                        inst, lambda c: f"{4 * c:#x}")

    # ------------------------------------------------------------ generic proxy
    def generic_read(self, inst, addrs: np.ndarray, size: int) -> None:
        for lo, hi, other, what in self.writes:
            if np.any((addrs < hi) & (addrs + size > lo)):
                self.machine.race(f"ld.shared reads shared memory [{lo:#x}, {hi:#x}) that "
                                  f"{what} is still writing (its completion was not awaited)",
                                  inst, other)

    def generic_write(self, warp, inst, addrs: np.ndarray, size: int) -> None:
        for lo, hi, other, what in self.writes:
            if np.any((addrs < hi) & (addrs + size > lo)):
                self.machine.race(f"st.shared writes shared memory [{lo:#x}, {hi:#x}) that "
                                  f"{what} is still writing", inst, other)
        for lo, hi, other, _ in self.reads:
            if np.any((addrs < hi) & (addrs + size > lo)):
                self.machine.race(f"st.shared overwrites shared memory [{lo:#x}, {hi:#x}) that "
                                  f"an asynchronous operation still reads", inst, other)
        # the words written (a word twice is harmless: every index gets the same value)
        words = addrs >> 2 if size <= 4 else np.concatenate(
            [(addrs + k) >> 2 for k in range(0, size, 4)])
        self.unfenced[words] = inst.idx
        self.unfenced_warp[words] = warp.warp_id
        self.any_unfenced = True

    def fence(self, warp) -> None:
        """fence.proxy.async by `warp`: its generic writes become visible to the async proxy."""
        if self.any_unfenced:
            mine = self.unfenced_warp == warp.warp_id
            self.unfenced[mine] = -1
            self.unfenced_warp[mine] = -1
            self.any_unfenced = bool((self.unfenced >= 0).any())

    # ------------------------------------------------------------ async proxy
    def async_read(self, inst, lo: int, hi: int, what: str, key=None) -> None:
        """An async-proxy read of [lo, hi) issued now (held until `release(key)` if key)."""
        if self.any_unfenced:
            seg = self.unfenced[lo >> 2:(hi + 3) >> 2]
            hit = np.flatnonzero(seg >= 0)
            if hit.size:
                writer = self.machine.prog[int(seg[hit[0]])]
                self.machine.race(
                    f"{what} reads shared memory at {lo + 4 * int(hit[0]):#x} written by "
                    f"st.shared without fence.proxy.async between them (the async proxy "
                    f"may not see the write)", inst, writer)
        for wlo, whi, other, wwhat in self.writes:
            if lo < whi and hi > wlo:
                self.machine.race(f"{what} reads shared memory [{wlo:#x}, {whi:#x}) that "
                                  f"{wwhat} is still writing", inst, other)
        if key is not None:
            self.reads.append([lo, hi, inst, key])

    def release(self, key) -> None:
        self.reads = [r for r in self.reads if r[3] != key]

    def async_write_begin(self, inst, lo: int, hi: int, what: str) -> list:
        for rlo, rhi, other, _ in self.reads:
            if lo < rhi and hi > rlo:
                self.machine.race(f"{what} overwrites shared memory [{rlo:#x}, {rhi:#x}) that "
                                  f"an asynchronous read still uses (not yet retired)",
                                  inst, other)
        for wlo, whi, other, _ in self.writes:
            if lo < whi and hi > wlo:
                self.machine.race(f"{what} writes shared memory [{wlo:#x}, {whi:#x}) that "
                                  f"another copy in flight also writes", inst, other)
        rec = [lo, hi, inst, what]
        self.writes.append(rec)
        return rec

    def async_write_end(self, rec: list) -> None:
        self.writes.remove(rec)


def race_report(machine, clocks, memory: str, hit, write: bool, agent: int, what: str, inst,
                cell_name, hint: str = "") -> None:
    """Raises the race `hit` (Shadow.access's answer) between `inst` and the other access."""
    cell, other, other_idx, other_wrote = hit
    theirs = machine.prog[other_idx]
    machine.race(
        f"{what} by {clocks.names[agent]} {'writes' if write else 'reads'} {memory} at "
        f"{cell_name(cell)}, which {theirs.opcode} by {clocks.names[other]} "
        f"{'wrote' if other_wrote else 'read'} at {machine.where(theirs)}, and nothing orders "
        f"the two accesses (no bar.sync, mbarrier wait, or completion the accessor waited "
        f"for lies between them: docs/emulator.md, happens-before)"
        + (f"; {hint}" if hint else ""), inst, theirs)
