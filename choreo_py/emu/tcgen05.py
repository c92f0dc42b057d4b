"""Semantics of the tcgen05 family (sm_100a) as numpy functions over one CTA's state.

``Tcgen05State`` lives in the CTA's ``tmem`` slot: the tensor memory (tmem.py), the
asynchronous tensor pipe and the per-warp outstanding tcgen05.ld/st. The opcode
handlers (tcgen05_handlers.py) decode operands and call into it; this module never
sees PTX text, so it can be unit-tested against numpy directly. It does not import
the handlers (they import it; isa._loaded() imports them).

Asynchrony, strict model (the ISA's completion mechanisms, and only those):

* tcgen05.mma is issued by each active thread that executes it and runs in issue
  order on the CTA's tensor pipe. Its result is computed at issue against the pipe's
  own view of TMEM (earlier MMAs included, as the pipe is in order), but lands in TMEM
  only when a tcgen05.commit of the issuing thread makes it complete: then the
  commit's mbarrier receives its arrival. A tcgen05.ld of a cell an MMA has written
  and no commit has completed is a race (``Report``).
* tcgen05.ld: destination registers hold POISON until the warp's tcgen05.wait::ld.
* tcgen05.st: cells written are not visible to a tcgen05.mma until the writing warp
  executed tcgen05.wait::st and then tcgen05.fence::before_thread_sync (the ordering
  the ISA asks for before the thread synchronisation that precedes the MMA).
Relaxed mode drops the POISON of tcgen05.ld registers (values are visible at once);
nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .sm100_desc import (DescriptorError, InstrDesc, decode_instr_desc, decode_smem_desc,
                         decode_tmem_addr, operand_addresses)
from .tmem import POISON, TensorMemory, TmemError, accumulator_lanes, check_warp_lanes, fragment_map


@dataclass
class Report:
    """A rule broken by the kernel: `kind` is a short tag, `message` says it in full."""
    kind: str
    message: str


# ----------------------------------------------------------------- number formats
def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f16_to_f32(bits: np.ndarray) -> np.ndarray:
    return bits.astype(np.uint16).view(np.float16).astype(np.float32)


def tf32_to_f32(bits: np.ndarray) -> np.ndarray:
    """tf32 keeps the upper 19 bits of an f32 (the tensor core ignores the low 13)."""
    return (bits.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


_DECODE_16 = {"bf16": bf16_to_f32, "f16": f16_to_f32}


def read_smem_operand(smem: np.ndarray, desc_raw: int, major: str, rows: int, idesc: InstrDesc,
                      dtype: str, on_read=None) -> np.ndarray:
    """A rows x K operand slice (f32 values) read through a shared memory descriptor.

    `on_read(lo, hi, addrs, nbytes)` is told the byte range read and each element's address
    (for the shared-memory race rules)."""
    desc = decode_smem_desc(desc_raw)
    nbytes = 4 if dtype == "tf32" else 2
    if dtype not in _DECODE_16 and dtype != "tf32":
        raise DescriptorError(f"operand type {dtype} is not modelled")
    addr = operand_addresses(desc, major, rows, idesc.k, nbytes)
    if addr.max() + nbytes > smem.size:
        raise DescriptorError(f"descriptor {desc_raw:#018x} reads shared memory up to byte "
                              f"{int(addr.max()) + nbytes}, past the {smem.size} bytes the CTA has")
    if on_read is not None:
        on_read(int(addr.min()), int(addr.max()) + nbytes, addr, nbytes)
    raw = sum(smem[addr + i].astype(np.uint32) << (8 * i) for i in range(nbytes))
    return tf32_to_f32(raw) if dtype == "tf32" else _DECODE_16[dtype](raw)


# ----------------------------------------------------------------- per-CTA state
@dataclass
class _PendingMma:
    lanes: np.ndarray
    cols: np.ndarray
    values: np.ndarray          # uint32 bit patterns
    line: int
    seq: int                    # issue number (the pipe is in order)
    key: object = None          # the caller's handle of its shared-memory reads
    a_cells: tuple = ()         # (lanes, cols) it reads as A from tensor memory


_ST_STAGES = {1: "tcgen05.wait::st", 2: "tcgen05.fence::before_thread_sync"}


def _grid(fill, dtype):
    return field(default_factory=lambda: np.full((128, 512), fill, dtype))


@dataclass
class Tcgen05State:
    tmem: TensorMemory = field(default_factory=TensorMemory)
    strict: bool = True
    # Outputs of issued, not yet completed MMAs: the in-order tensor pipe sees them
    # (a later MMA accumulates on them), tcgen05.ld does not.
    overlay: np.ndarray = _grid(POISON, np.uint32)
    # thread id -> MMAs issued and not yet committed
    uncommitted: dict = field(default_factory=dict)
    # issue number of the in-flight MMA writing each cell (0: none); its PTX line
    in_flight: np.ndarray = _grid(0, np.int64)
    # issue number of the last in-flight MMA reading each cell as its A operand (0: none)
    a_in_flight: np.ndarray = _grid(0, np.int64)
    seq_line: dict = field(default_factory=dict)
    # tcgen05.st not yet ordered before an MMA: writer warp, line, stage missing (_ST_STAGES)
    st_warp: np.ndarray = _grid(-1, np.int64)
    st_line: np.ndarray = _grid(0, np.int64)
    st_stage: np.ndarray = _grid(0, np.int8)
    # tcgen05.ld in flight (until the loading warp's wait::ld): loading warp, line
    ld_warp: np.ndarray = _grid(-1, np.int64)
    ld_line: np.ndarray = _grid(0, np.int64)
    # commit groups whose completion is pending, in commit order
    commit_queue: list = field(default_factory=list)
    reports: list = field(default_factory=list)

    # -- pipe view ---------------------------------------------------------
    def _pipe_read(self, lanes: np.ndarray, cols: np.ndarray, line: int):
        self._check_st_ordered(lanes, cols, line)
        busy = self.in_flight[lanes, cols] > 0
        values, poison = self.tmem.read(lanes, cols)
        return np.where(busy, self.overlay[lanes, cols], values), poison & ~busy

    def _check_st_ordered(self, lanes, cols, line) -> None:
        stage = self.st_stage[lanes, cols]
        if not stage.any():
            return
        idx = tuple(a[stage > 0][0] for a in (lanes, cols))
        # Stage 2 (waited, not fenced) is relaxable: FA4's forward kernel, which ran on
        # B200s, orders P's tcgen05.st before the PV MMA by wait::st and an mbarrier alone.
        kind = "tcgen05.st-unfenced" if int(self.st_stage[idx]) == 2 else "tcgen05.st-unordered"
        self.reports.append(Report(kind, (
            f"tcgen05.mma at line {line} reads tensor memory lane {int(idx[0])} column "
            f"{int(idx[1])} written by warp {int(self.st_warp[idx])}'s tcgen05.st at line "
            f"{int(self.st_line[idx])} without {_ST_STAGES[int(self.st_stage[idx])]} before it")))

    # -- MMA ---------------------------------------------------------------
    def mma(self, thread: int, line: int, kind: str, idesc_raw: int, d_addr: int,
            a_operand, b_desc: int, enable_d: bool, smem: np.ndarray, smem_read=None,
            key=None) -> None:
        """One tcgen05.mma.cta_group::1 of thread `thread`.

        `a_operand` is ("smem", descriptor) or ("tmem", address) (the `[a]` form).
        `smem_read(lo, hi, what, addrs, nbytes)` is told each shared-memory range (and element
        addresses) the MMA reads; `key`
        comes back from `complete` once the MMA no longer reads it.
        """
        idesc = decode_instr_desc(idesc_raw, kind)
        if idesc.sparse:
            raise DescriptorError("sparse tcgen05.mma is not modelled")
        if idesc.kind not in ("f16", "tf32") or idesc.d_dtype != "f32":
            raise DescriptorError(f"tcgen05.mma kind::{kind} with {idesc.a_dtype} inputs and "
                                  f"{idesc.d_dtype} accumulation is not modelled")
        d = decode_tmem_addr(d_addr)
        lanes = accumulator_lanes(idesc.m, d.lane)[:, None]
        cols = d.col + np.arange(idesc.n)[None, :]
        lanes, cols = np.broadcast_arrays(lanes, cols)
        self.tmem.check_columns(cols, f"tcgen05.mma D at line {line}")
        if idesc.a_major != "K" and a_operand[0] == "tmem":
            raise DescriptorError("an A operand in tensor memory is K-major; transpose A is set")
        reader = (lambda what: (lambda lo, hi, addrs, nbytes: smem_read(lo, hi, what, addrs,
                                                                        nbytes))) if smem_read else \
            (lambda what: None)
        a, a_cells = self._read_a(a_operand, idesc, smem, line, reader("A"))
        b = read_smem_operand(smem, b_desc, idesc.b_major, idesc.n, idesc, idesc.b_dtype,
                              reader("B"))
        if idesc.negate_a:
            a = -a
        if idesc.negate_b:
            b = -b
        prod = a.astype(np.float64) @ b.astype(np.float64).T
        if enable_d:
            old, poison = self._pipe_read(lanes, cols, line)
            if poison.any() and self.strict:
                self.reports.append(Report("tmem-uninitialised", (
                    f"tcgen05.mma at line {line} accumulates into tensor memory never "
                    f"written (lane {int(lanes[poison][0])}, column {int(cols[poison][0])})")))
            prod = prod + old.view(np.float32).astype(np.float64)
        out = prod.astype(np.float32).view(np.uint32)
        self._check_ld_in_flight(lanes, cols, f"tcgen05.mma at line {line} (its D)")
        if not enable_d:
            self._check_st_ordered(lanes, cols, line)   # overwriting a st still in flight
        seq = len(self.seq_line) + 1
        self.seq_line[seq] = line
        self.uncommitted.setdefault(thread, []).append(
            _PendingMma(lanes, cols, out, line, seq, key, a_cells))
        self.overlay[lanes, cols] = out
        self.in_flight[lanes, cols] = seq
        if a_cells:
            self.a_in_flight[a_cells] = seq

    def _read_a(self, a_operand, idesc: InstrDesc, smem, line, on_read) -> np.ndarray:
        where, value = a_operand
        if where == "smem":
            return read_smem_operand(smem, value, idesc.a_major, idesc.m, idesc, idesc.a_dtype,
                                     on_read), ()
        if idesc.a_dtype not in _DECODE_16:
            raise DescriptorError(f"A in tensor memory of type {idesc.a_dtype} is not modelled")
        addr = decode_tmem_addr(value)
        if idesc.m == 64 and addr.lane == 16:
            # The one layout-F case CUTLASS never emits for A (its TS atoms allocate A
            # NonInterleaved, lane 0); modelled like D, and flagged so a kernel's reliance
            # on it is visible in every run.
            self.reports.append(Report("tmem-a-lane16", (
                f"tcgen05.mma at line {line} reads A from tensor memory at lane offset 16 "
                "(M=64 layout F upper half): not a path CUTLASS uses; modelled as the same "
                "row placement as D")))
        lanes = accumulator_lanes(idesc.m, addr.lane)[:, None]
        half_cols = idesc.k // 2                      # two 16-bit values per 32-bit cell
        cols = addr.col + np.arange(half_cols)[None, :]
        lanes, cols = np.broadcast_arrays(lanes, cols)
        self.tmem.check_columns(cols, f"tcgen05.mma A at line {line}")
        cells, poison = self._pipe_read(lanes, cols, line)
        if poison.any() and self.strict:
            self.reports.append(Report("tmem-uninitialised", (
                f"tcgen05.mma at line {line} reads A from tensor memory never written")))
        lo, hi = cells & 0xFFFF, cells >> 16
        packed = np.stack([lo, hi], axis=-1).reshape(idesc.m, idesc.k)
        return _DECODE_16[idesc.a_dtype](packed), (lanes, cols)

    def commit(self, thread: int) -> None:
        """tcgen05.commit completing at once (commit_take + complete)."""
        self.complete(self.commit_take(thread))

    def commit_take(self, thread: int) -> list:
        """tcgen05.commit: the thread's MMAs issued since its last commit, as one group
        whose completion the caller schedules (then performs the mbarrier arrival)."""
        group = self.uncommitted.pop(thread, [])
        self.commit_queue.append(group)
        return group

    def complete(self, group: list) -> list:
        """Complete `group` and every group committed before it (the pipe is in order):
        their TMEM writes land. Returns the keys of the MMAs completed."""
        keys = []
        while self.commit_queue:
            head = self.commit_queue.pop(0)
            for op in head:
                self.tmem.write(op.lanes, op.cols, op.values)
                mine = self.in_flight[op.lanes, op.cols] == op.seq
                self.in_flight[op.lanes[mine], op.cols[mine]] = 0
                if op.a_cells:
                    la, ca = op.a_cells
                    read = self.a_in_flight[la, ca] == op.seq
                    self.a_in_flight[la[read], ca[read]] = 0
                keys.append(op.key)
            if head is group:
                break
        return keys

    # -- ld / st -----------------------------------------------------------
    def _fragment_cells(self, warp: int, taddr: int, shape: str, num: int, pack16: bool,
                        half_split, what: str):
        fm = fragment_map(shape, num, pack16, half_split)
        base = decode_tmem_addr(taddr)
        lanes = base.lane + fm.lane
        check_warp_lanes(warp, lanes, what)
        cols_lo = base.col + fm.col_lo
        self.tmem.check_columns(cols_lo, what)
        cols_hi = base.col + fm.col_hi if pack16 else None
        if pack16:
            self.tmem.check_columns(cols_hi, what)
        return lanes, cols_lo, cols_hi

    def ld(self, warp: int, line: int, taddr: int, shape: str, num: int, pack16: bool,
           half_split, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """tcgen05.ld: (values[32, nregs] uint32, the values the registers hold now)."""
        what = f"tcgen05.ld at line {line}"
        lanes, lo, hi = self._fragment_cells(warp, taddr, shape, num, pack16, half_split, what)
        values, poison = self.tmem.read(lanes, lo)
        if pack16:
            hi_vals, hi_poison = self.tmem.read(lanes, hi)
            values = (values & 0xFFFF) | ((hi_vals & 0xFFFF) << 16)
            poison = poison | hi_poison
        self._check_ld_races(lanes, lo, hi, line)
        if self.strict:
            for cols in (lo, hi) if pack16 else (lo,):
                self.ld_warp[lanes, cols] = warp
                self.ld_line[lanes, cols] = line
        if poison.any() and self.strict:
            t, r = np.argwhere(poison)[0]
            self.reports.append(Report("tmem-uninitialised", (
                f"{what} reads tensor memory lane {int(lanes[t, r])} column {int(lo[t, r])}, "
                "never written")))
        now = values if not self.strict else np.full_like(values, POISON)
        return values, now

    def _check_ld_races(self, lanes, lo, hi, line) -> None:
        for cols in (lo, hi):
            if cols is None:
                continue
            busy = self.in_flight[lanes, cols]
            if busy.any():
                t, r = np.argwhere(busy)[0]
                self.reports.append(Report("tmem-race", (
                    f"tcgen05.ld at line {line} reads tensor memory lane {int(lanes[t, r])} "
                    f"column {int(cols[t, r])} while the tcgen05.mma at line "
                    f"{self.seq_line[int(busy[t, r])]} "
                    "that writes it has not completed (no tcgen05.commit yet)")))
                return

    def st(self, warp: int, line: int, taddr: int, shape: str, num: int, unpack16: bool,
           half_split, values: np.ndarray, active: np.ndarray) -> None:
        what = f"tcgen05.st at line {line}"
        lanes, lo, hi = self._fragment_cells(warp, taddr, shape, num, unpack16, half_split, what)
        values = values.astype(np.uint32)
        parts = [(lo, values & 0xFFFF), (hi, values >> 16)] if unpack16 else [(lo, values)]
        self._check_st_races(lanes, [c for c, _ in parts], line)
        for cols, _ in parts:
            self._check_ld_in_flight(lanes, cols, f"tcgen05.st at line {line}")
        for cols, vals in parts:
            self.tmem.write(lanes, cols, vals)
            self.st_warp[lanes, cols] = warp
            self.st_line[lanes, cols] = line
            self.st_stage[lanes, cols] = 1

    def _check_st_races(self, lanes, parts, line) -> None:
        """A tcgen05.st onto cells an issued, not completed MMA still reads as its A
        operand or still writes as D (P written over S while the previous PV reads it)."""
        for cols in parts:
            for grid, what in ((self.a_in_flight, "reads as its A operand"),
                               (self.in_flight, "writes")):
                busy = grid[lanes, cols]
                if busy.any():
                    t, r = np.argwhere(busy)[0]
                    self.reports.append(Report("tmem-race", (
                        f"tcgen05.st at line {line} writes tensor memory lane "
                        f"{int(lanes[t, r])} column {int(cols[t, r])} that the tcgen05.mma at "
                        f"line {self.seq_line[int(busy[t, r])]} {what} and has not completed")))
                    return

    def _advance_st(self, warp: int, stage: int, to: int) -> None:
        mine = (self.st_warp == warp) & (self.st_stage == stage)
        self.st_stage[mine] = to

    def _check_ld_in_flight(self, lanes, cols, what: str) -> None:
        """A write of cells a tcgen05.ld still reads (its warp has not executed
        tcgen05.wait::ld): the load may read the new value (PTX ISA, "tcgen05.wait":
        tcgen05.ld completes only at the wait; write-after-read)."""
        busy = self.ld_warp[lanes, cols] >= 0
        if busy.any():
            t = tuple(a[busy][0] for a in (lanes, cols))
            self.reports.append(Report("tmem-race", (
                f"{what} writes tensor memory lane {int(t[0])} column {int(t[1])} that warp "
                f"{int(self.ld_warp[t])}'s tcgen05.ld at line {int(self.ld_line[t])} still "
                "reads (no tcgen05.wait::ld of that warp between them)")))

    def wait_ld(self, warp: int) -> None:
        self.ld_warp[self.ld_warp == warp] = -1

    def wait_st(self, warp: int) -> None:
        self._advance_st(warp, 1, 2)

    def fence_before(self, warp: int) -> None:
        self._advance_st(warp, 2, 0)


__all__ = ["Report", "Tcgen05State", "TmemError", "DescriptorError", "read_smem_operand",
           "bf16_to_f32", "f16_to_f32", "tf32_to_f32"]
