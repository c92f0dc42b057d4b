"""A warp: 32 numpy lanes, its registers, and the loop that executes it.

Registers are numpy arrays of 32 lanes, one per register number, in the
storage dtype of their declaration (.f32 -> float32, .b32 -> uint32, .pred ->
bool, 16-bit types -> uint16 so that bf16/f16 bits stay exact). Arrays are
never changed in place: a write builds a new array (np.where under a
partial mask), so aliasing after `mov` is harmless.

Divergence: every lane has a PC; the warp executes the group of runnable
lanes at the lowest PC (the min-PC rule). For PTX's unstructured branches
this reconverges at the first PC all paths reach in program order, which
for the reducible control flow compilers emit is the immediate
post-dominator; a group that blocks (a barrier, an mbarrier wait) is parked
and the warp runs its other lanes, so lanes of one warp can wait for each
other as under independent thread scheduling.
"""
from __future__ import annotations

import numpy as np

from .lanes import ALL, BLOCKED, CONTROL, LANE_IDS, LANES, NONE, NP  # noqa: F401  (re-exported)
from .operands import address_reader, operand_reader
from .ptx_parse import REG_STORAGE


class Wait:
    """What a parked group of lanes waits for."""

    __slots__ = ("ready", "what", "inst", "lanes", "retry", "then")

    def __init__(self, ready, what, inst, lanes, retry, then=None) -> None:
        self.ready, self.what, self.inst, self.lanes, self.retry = ready, what, inst, lanes, retry
        self.then = then  # run when the wait is over (a barrier's acquire, hb.py)


class Warp:
    """One warp of a CTA. The interface handlers use is documented in the package docstring."""

    def __init__(self, cta, warp_id: int, nthreads: int, block_dims: tuple) -> None:
        self.cta = cta
        self.machine = cta.machine
        kernel = self.machine.kernel
        self.prog = self.machine.prog
        self.warp_id = warp_id
        self.lane = LANE_IDS
        tid = warp_id * LANES + LANE_IDS
        self.tid = tid
        bx, by, _ = block_dims
        self.tid_xyz = (tid % bx, (tid // bx) % by, tid // (bx * by))
        self.live = tid < nthreads
        zero = {dt: np.zeros(LANES, dtype=dt) for dt in set(REG_STORAGE.values())}
        self.R = [zero[REG_STORAGE[t]] for t in kernel.reg_types]
        # Written lanes, for the unwritten-register rule (check_read): `unset` holds the
        # registers some live lane has not written; `written[r]` the lanes that did (dead
        # lanes count as written). A register leaves `unset` once every lane wrote it, so
        # the common case costs one set lookup per operand.
        self.unset = set(range(len(self.R)))
        self.written: dict = {}
        self.dead = ~self.live
        self.pc = 0
        self.lane_pc = np.zeros(LANES, dtype=np.int64)
        self.parked = NONE.copy()
        self.waits: list[Wait] = []
        self.blocked = False
        self.done = not self.live.any()
        self.gmask = self.live
        self.gfull = bool(self.live.all())
        self.gcount = int(self.live.sum())
        self.others = False      # live lanes outside the running group
        self.merge_pc = -1       # the next PC where another group waits
        self.glane = int(np.flatnonzero(self.live)[0]) if self.gcount == 1 else -1
        self.mask = self.gmask   # the executing lanes (group & guard)
        self.full = self.gfull
        self.one = self.glane    # the one executing lane when the group has one, else -1
        self.inst = None         # the instruction executing
        self.inflight_regs: dict = {}  # register -> instruction of an async write (wgmma)
        self.async_state: dict = {}    # per-family state (wgmma groups, bulk groups, ...)
        self.instructions = 0

    # ------------------------------------------------------------ handler interface
    def read(self, op, ptype: str) -> np.ndarray:
        """Operand `op` as 32 lanes of PTX type `ptype` (registers, immediates, special registers)."""
        return operand_reader(op, ptype, self.machine)(self)

    def write(self, op, ptype: str, values) -> None:
        """Writes `values` (32 lanes or a scalar) of PTX type `ptype` to `op` under the active mask."""
        if op.kind == "sink":
            return
        if op.kind != "reg":
            raise self.machine.misuse(f"destination {op.text} is not a register", self.inst)
        self.write_reg(op.reg, np.broadcast_to(np.asarray(values, dtype=NP[ptype]), (LANES,)))

    def write_reg(self, r: int, v: np.ndarray) -> None:
        """Register `r` := v (already 32 lanes; viewed/cast to the register's storage)."""
        cur = self.R[r]
        if v.dtype != cur.dtype:
            v = v.view(cur.dtype) if v.dtype.itemsize == cur.dtype.itemsize else v.astype(cur.dtype)
        self.R[r] = v if self.full else np.where(self.mask, v, cur)
        if r in self.unset:
            self.mark_written(r)

    def mark_written(self, r: int, lanes=None) -> None:
        """Register `r` was written on `lanes` (default: the executing lanes)."""
        if r not in self.unset:  # every lane wrote it already (check_read only looks at unset)
            return
        if lanes is None:
            if self.full:  # all 32 lanes: no mask to merge
                self.unset.discard(r)
                self.written.pop(r, None)
                return
            lanes = self.mask
        m = self.written.get(r)
        m = (self.dead | lanes) if m is None else (m | lanes)
        if m.all():
            self.unset.discard(r)
            self.written.pop(r, None)
        else:
            self.written[r] = m

    def check_read(self, r: int, lanes=None) -> None:
        """A read of register `r` by `lanes` (default: the executing lanes): a lane that
        never wrote it reads an undefined value (machine.unwritten_read)."""
        lanes = self.mask if lanes is None else lanes
        m = self.written.get(r)
        bad = lanes if m is None else lanes & ~m
        if bad.any():
            self.machine.unwritten_read(self, r, bad)

    def addr(self, op) -> np.ndarray:
        """Per-lane address of an [address] operand (uint64)."""
        return address_reader(op, self.machine)(self)

    def active_lanes(self) -> np.ndarray:
        return np.flatnonzero(self.mask)

    def block(self, ready, what: str, retry: bool = True, then=None):
        """Parks the executing lanes until `ready()` is true (`what`: text or a callable
        giving it, for deadlock reports).

        retry=True: the instruction executes again then (a polling wait);
        retry=False: it is complete then (the lanes resume after it).
        Returns BLOCKED, which the handler returns."""
        self.waits.append(Wait(ready, what, self.inst, self.gmask.copy(), retry, then))
        return BLOCKED

    # ------------------------------------------------------------ lane groups
    def jump(self, target: int) -> None:
        if self.others:
            self.lane_pc[self.gmask] = target
            self.repick()
        else:
            self.pc = target

    def split(self, taken: np.ndarray, target: int) -> None:
        """A branch some lanes of the group take."""
        self.lane_pc[taken] = target
        self.lane_pc[self.gmask & ~taken] = self.pc + 1
        self.repick()

    def exit_lanes(self, lanes: np.ndarray) -> None:
        self.live = self.live & ~lanes
        self.cta.lanes_exited(self)
        if not self.live.any():
            self.done = True
            return
        rest = self.gmask & ~lanes
        self.lane_pc[rest] = self.pc + 1
        self.repick()

    def repick(self) -> bool:
        """Chooses the runnable lanes at the lowest PC; False if none."""
        cand = self.live & ~self.parked
        if not cand.any():
            self.blocked = True
            return False
        pcs = np.where(cand, self.lane_pc, 1 << 40)
        pc = int(pcs.min())
        g = pcs == pc
        rest = cand & ~g
        self.pc = pc
        self.gmask = g
        self.gcount = int(g.sum())
        self.gfull = self.gcount == LANES
        self.glane = int(np.flatnonzero(g)[0]) if self.gcount == 1 else -1
        self.others = bool((self.live & ~g).any())
        self.merge_pc = int(np.where(rest, self.lane_pc, 1 << 40).min()) if rest.any() else -1
        return True

    def wake(self) -> bool:
        """Unparks the lanes whose waits are over; True if any lane can run."""
        done = [w for w in self.waits if w.ready()]
        if not done:
            return False
        for w in done:
            self.waits.remove(w)
            if w.then is not None:
                w.then()
            if not w.retry:
                self.lane_pc[w.lanes] += 1
            self.parked = self.parked & ~w.lanes
        self.blocked = False
        return self.repick()

    def _park(self) -> None:
        self.lane_pc[self.gmask] = self.pc
        self.parked = self.parked | self.gmask
        self.repick()

    # ------------------------------------------------------------ execution
    def run(self, budget: int) -> int:
        """Executes up to `budget` instructions; stops early when blocked or done."""
        prog = self.prog
        R = self.R
        pc = self.pc
        n = 0
        gmask, gfull, glane = self.gmask, self.gfull, self.glane
        count = np.count_nonzero
        inflight = self.inflight_regs
        unset = self.unset
        while n < budget:
            inst = prog[pc]
            g = inst.guard
            if g >= 0:
                if g in unset:  # the guard predicate is read by every lane of the group
                    self.pc, self.inst = pc, inst
                    self.check_read(g, gmask)
                m = gmask & ~R[g] if inst.guard_neg else gmask & R[g]
                c = count(m)
                if c == 0:
                    pc += 1
                    n += 1
                    if pc == self.merge_pc:
                        self.pc = pc
                        self._merge()
                        pc, gmask, gfull, glane = self.pc, self.gmask, self.gfull, self.glane
                    continue
                self.mask = m
                self.full = c == LANES
            else:
                self.mask = gmask
                self.full = gfull
            self.one = glane  # a group of one lane executes on that lane (c == 1 above)
            self.pc = pc
            self.inst = inst
            if inflight:
                self.machine.check_inflight_regs(self, inst)
            r = inst.fn(self)
            n += 1
            if r is None:
                pc += 1
                if pc == self.merge_pc:
                    self.pc = pc
                    self._merge()
                    pc, gmask, gfull, glane = self.pc, self.gmask, self.gfull, self.glane
                continue
            if r is BLOCKED:
                if self.others and (self.live & ~self.parked & ~self.gmask).any():
                    self._park()
                    pc, gmask, gfull, glane = self.pc, self.gmask, self.gfull, self.glane
                    continue
                self.lane_pc[self.gmask] = pc
                self.parked = self.parked | self.gmask
                self.blocked = True
                break
            # CONTROL: the executor moved pc / changed the groups
            if self.done or self.blocked:
                break
            pc, gmask, gfull, glane = self.pc, self.gmask, self.gfull, self.glane
        else:
            self.pc = pc  # the budget ran out: resume after the last executed instruction
        self.instructions += n
        return n

    def _merge(self) -> None:
        self.lane_pc[self.gmask] = self.pc
        self.repick()

    # ------------------------------------------------------------ reports
    def state(self) -> str:
        """What the warp is doing, for deadlock reports."""
        if self.done:
            return "exited"
        if self.waits:
            return "; ".join(f"waits on {w.what() if callable(w.what) else w.what} at "
                             f"{self.machine.where(w.inst)}: {w.inst.text}" for w in self.waits)
        inst = self.prog[self.pc] if self.pc < len(self.prog) else None
        return f"runnable at {self.machine.where(inst)}" if inst else "runnable"
