"""The machine: a grid of CTAs run one after another, each CTA's warps interleaved.

CTAs of the examples do not communicate through global memory while they
run, so executing them one at a time gives the results of any concurrent
execution. A cooperative launch (all CTAs resident: a grid-wide barrier)
runs its CTAs together instead, in turns, so that one may spin on global
memory until the others write it; a wait that never ends there is reported
at the step limit.

Per CTA: shared memory (bytes; the dynamic window starts at SMEM_BASE, as
on sm_90 where the first 1 KiB of the window is reserved), the mbarriers
(by shared address), the named barriers 0-15, the queue of asynchronous
operations in flight, and the bookkeeping for the strict-mode race rules.
"""
from __future__ import annotations

import heapq
from typing import Callable, Optional

import numpy as np

from . import isa, report, scheduler
from .barriers import MBarrier, NamedBarrier
from .hb import Clocks, join
from .isa_alu import resolve_labels
from .isa_support import decoding
from .isa_tma import check_exit
from .isa_wgmma import check_async_registers
from .lanes import LANES
from .memory import SMEM_BASE
from .races import SmemTracker
from .report import DeadlockError, EmuError, MisuseError, RaceError, StepLimitError
from .warp import Warp

DEFAULT_STEP_LIMIT = 20_000_000
#: Warp instructions a CTA of a cooperative launch runs before the next CTA's turn.
TURN = 64


class CTA:
    def __init__(self, machine, ctaid: tuple) -> None:
        self.machine = machine
        self.ctaid = ctaid
        launch = machine.launch
        size = SMEM_BASE + launch.smem_bytes
        self.smem = np.zeros(size, dtype=np.uint8)
        self.smem_base = SMEM_BASE
        self.tmem = None  # tensor memory: filled in by the sm_100 families
        self.mbarriers: dict[int, MBarrier] = {}
        self.bars = [NamedBarrier(i) for i in range(16)]
        nthreads = launch.threads
        nwarps = (nthreads + LANES - 1) // LANES
        self.warps = [Warp(self, w, nthreads, launch.block) for w in range(nwarps)]
        self.order = scheduler.make(machine.schedule, machine.seed + hash(ctaid) % 1000)
        self.step = 0
        self.epoch = 0
        self._pending: list = []  # heap of (ready step, seq, fn, what, inst)
        self._seq = 0
        self.running: Optional[Warp] = None
        # strict-mode bookkeeping (see races.py, hb.py)
        self.hb = Clocks(nwarps)
        self.races = SmemTracker(self)
        self.state: dict = {}  # per-family CTA state (e.g. "tmem")

    # ------------------------------------------------------------ interface
    def mbarrier(self, addr: int) -> MBarrier:
        bar = self.mbarriers.get(int(addr))
        if bar is None:
            raise self.machine.misuse(f"no mbarrier initialised at shared address {int(addr):#x}",
                                      self.current_inst())
        return bar

    def notify(self) -> None:
        """Something a waiter may wait for changed (a phase, a barrier, an exit)."""
        self.epoch += 1

    def schedule(self, fn: Callable, what: str, inst, delay: Optional[int] = None) -> None:
        """Runs `fn()` when an asynchronous operation completes (after `delay` instructions,
        by default the schedule's delay; always before the CTA could otherwise deadlock)."""
        d = self.order.delay() if delay is None else delay
        self._seq += 1
        heapq.heappush(self._pending, (self.step + d, self._seq, fn, what, inst))

    def in_flight(self) -> list:
        return [(what, inst) for _, _, _, what, inst in self._pending]

    def current_inst(self):
        return self.running.inst if self.running is not None else None

    def lanes_exited(self, warp) -> None:
        self.notify()
        for b in self.bars:
            if b.warps:
                self._bar_check(b)

    # ------------------------------------------------------------ named barriers
    def bar_arrive(self, warp, bid: int, count: Optional[int], wait: bool):
        b = self.bars[bid]
        expected = count
        if b.expected is not None and count is not None and b.expected != count:
            raise self.machine.misuse(f"barrier {bid}: thread count {count} differs from "
                                      f"{b.expected} given by an earlier arrival", warp.inst)
        if count is not None:
            b.expected = expected
        b.arrived += int(np.count_nonzero(warp.mask))
        gen = b.generation
        b.clock = join(b.clock, self.hb.release(warp.warp_id))
        b.warps.append((warp.warp_id, warp.inst, wait))
        self._bar_check(b)
        if not wait:
            return None
        w = warp.warp_id
        if b.generation != gen:
            self.hb.acquire(w, b.done.get(gen))
            return None
        def what():
            expect = b.expected if b.expected is not None else "all"
            return f"barrier {bid} ({b.arrived}/{expect} threads arrived)"
        return warp.block(lambda: b.generation != gen, what, retry=False,
                          then=lambda: self.hb.acquire(w, b.done.get(gen)))

    def _bar_check(self, b: NamedBarrier) -> None:
        expected = b.expected
        if expected is None:
            expected = sum(int(w.live.sum()) for w in self.warps)
        if b.arrived >= expected:
            # the generation's arrivals happen before what its bar.syncs do after it
            b.done[b.generation] = b.clock
            b.done.pop(b.generation - 8, None)
            b.clock = np.zeros(0, np.int32)
            b.arrived, b.expected, b.warps = 0, None, []
            b.generation += 1
            self.notify()

    # ------------------------------------------------------------ running
    def _complete_due(self, force: bool = False) -> bool:
        done = False
        while self._pending and (force or self._pending[0][0] <= self.step):
            _, _, fn, _, _ = heapq.heappop(self._pending)
            fn()
            done = True
            force = False
        return done

    def run(self, budget: Optional[int] = None) -> bool:
        """Runs the CTA to its end (True); with `budget`, stops after about that many warp
        instructions (False: not done; a cooperative launch's CTAs take turns)."""
        warps = self.warps
        start = self.step
        order = self.order
        limit = self.machine.step_limit
        seen_epoch = -1
        while True:
            if self._pending and self._pending[0][0] <= self.step:
                self._complete_due()
            if self.epoch != seen_epoch:
                seen_epoch = self.epoch
                for w in warps:
                    if w.blocked and not w.done:
                        w.wake()
            runnable = [w for w in warps if not w.done and not w.blocked]
            if not runnable:
                if self._pending:
                    self._complete_due(force=True)
                    continue
                if all(w.done for w in warps):
                    return True
                if any([w.wake() for w in warps if w.blocked and not w.done]):
                    continue  # a wait already satisfied when it parked
                raise self._deadlock()
            w, quantum = order.pick(runnable)
            self.running = w
            self.step += w.run(quantum)
            self.running = None
            if budget is not None and self.step - start >= budget:
                return all(w.done for w in warps)
            if self.step > limit:
                raise StepLimitError(
                    f"CTA {self.ctaid} executed more than {limit} warp instructions "
                    f"(--step-limit); warps: " + "; ".join(
                        f"warp {x.warp_id} {x.state()}" for x in warps if not x.done))

    def _deadlock(self) -> DeadlockError:
        """Every warp waits: the report stands at the first waiting warp's mbarrier wait
        (else its first wait of any kind) and lists every warp and mbarrier."""
        details = [f"warp {w.warp_id}: {w.state()}" for w in self.warps]
        for b in self.mbarriers.values():
            details.append(b.describe())
        waits = [(w.warp_id, x.inst) for w in self.warps if not w.done for x in w.waits]
        first = next((wi for wi in waits if wi[1].parts[0] == "mbarrier"),
                     waits[0] if waits else None)
        where, head = "", ""
        if first is not None:
            where = self.machine.where(first[1])
            head = f" (the first: warp {first[0]} at {first[1].text})"
        return DeadlockError(f"CTA {self.ctaid}: every warp waits and nothing in flight can "
                             f"release them{head}", where, details)


class Launch:
    """What a launch needs: grid, block, dynamic shared bytes, parameter values."""

    def __init__(self, grid, block, smem_bytes, params, gmem, cooperative: bool = False) -> None:
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.block = tuple(block) + (1,) * (3 - len(block))
        self.threads = self.block[0] * self.block[1] * self.block[2]
        self.smem_bytes = smem_bytes
        self.params = params  # ParamSpace
        self.gmem = gmem      # GlobalMemory
        self.cooperative = cooperative  # all CTAs resident, run together (Machine.run)


class Machine:
    def __init__(self, kernel, launch: Launch, *, schedule: str = "round_robin", seed: int = 0,
                 strict: bool = True, ptx_name: str = "kernel.ptx",
                 step_limit: int = DEFAULT_STEP_LIMIT) -> None:
        self.kernel = kernel
        self.launch = launch
        self.schedule = schedule
        self.seed = seed
        self.strict = strict
        self.relaxed = not strict
        self.ptx_name = ptx_name
        self.step_limit = step_limit
        self.notes: list[str] = []  # what relaxed mode let pass
        self._noted: set = set()
        self.prog = self._decode(kernel)
        self.instructions = 0

    def _decode(self, kernel) -> list:
        resolve_labels(kernel)
        decoding(self)
        for inst in kernel.insts:
            self.decoding = inst
            try:
                inst.fn = isa.decode(inst)
            except isa.Unsupported as err:
                raise report.UnsupportedError(str(err), self.where(inst), [inst.text]) from None
        return kernel.insts

    # ------------------------------------------------------------ reports
    def where(self, inst) -> str:
        return report.where(inst, self.ptx_name)

    def misuse(self, message: str, inst) -> MisuseError:
        return MisuseError(message, self.where(inst), [inst.text] if inst is not None else [])

    def race(self, message: str, inst, other=None, relaxable: bool = False) -> None:
        """A race: raised in strict mode; in relaxed mode only the rules documented as
        tolerated by hardware (relaxable=True) are let pass (and noted)."""
        details = [f"this: {report.show(inst, self.ptx_name)}"] if inst is not None else []
        if other is not None:
            details.append(f"with: {report.show(other, self.ptx_name)}")
        if relaxable and self.relaxed:
            note = f"{self.where(inst)}: {message}"
            if note not in self._noted:  # once per instruction and message, not per execution
                self._noted.add(note)
                self.notes.append(note)
            return
        raise RaceError(message, self.where(inst), details)

    def unwritten_read(self, warp, r: int, lanes) -> None:
        """A register read on lanes that never wrote it (no instruction of those threads
        had it as a destination; warp.check_read)."""
        ids = warp.tid[lanes]
        self.misuse_or_note(f"reads {self.kernel.reg_names[r]}, which {len(ids)} active "
                            f"thread(s) never wrote (the first: thread {int(ids[0])}; no "
                            f"instruction of theirs has it as a destination, so it holds an "
                            f"undefined value)", warp.inst, r)

    def misuse_or_note(self, message: str, inst, key) -> None:
        """A misuse the hardware executes anyway: an error in strict mode; relaxed mode
        notes it once per instruction and `key` and lets it pass."""
        if self.strict:
            raise self.misuse(message, inst)
        key = (inst.idx if inst is not None else -1, key)
        if key not in self._noted:
            self._noted.add(key)
            self.notes.append(f"{self.where(inst)}: {message}")

    def check_inflight_regs(self, warp, inst) -> None:
        check_async_registers(self, warp, inst)

    # ------------------------------------------------------------ running
    def run(self) -> None:
        if self.launch.cooperative:
            return self._run_together()
        gx, gy, gz = self.launch.grid
        for z in range(gz):
            for y in range(gy):
                for x in range(gx):
                    cta = CTA(self, (x, y, z))
                    try:
                        cta.run()
                    except EmuError as err:
                        if not err.where and cta.running is not None:
                            err.where = self.where(cta.running.inst)
                        raise
                    self.finish_cta(cta)
                    self.instructions += sum(w.instructions for w in cta.warps)

    def _run_together(self) -> None:
        """A cooperative launch: every CTA resident, so CTAs may wait on each other through
        global memory (a grid-wide barrier spins until the others arrive); they take turns
        of TURN warp instructions each, in grid order, until all have exited."""
        gx, gy, gz = self.launch.grid
        live = [CTA(self, (x, y, z)) for z in range(gz) for y in range(gy) for x in range(gx)]
        while live:
            for cta in list(live):
                try:
                    done = cta.run(budget=TURN)
                except EmuError as err:
                    if not err.where and cta.running is not None:
                        err.where = self.where(cta.running.inst)
                    raise
                if done:
                    self.finish_cta(cta)
                    self.instructions += sum(w.instructions for w in cta.warps)
                    live.remove(cta)

    def finish_cta(self, cta) -> None:
        """At exit: bulk stores whose source reads were not retired are reported
        (isa_tma.check_exit); async operations still in flight complete (stores drain)."""
        check_exit(cta)
        while cta._pending:
            cta._complete_due(force=True)
