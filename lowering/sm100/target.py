"""Blackwell's MMA unit for the lowering core: tcgen05 (see core/target_base.py).

Accumulators live in tensor memory (TMEM), at the regions of the kernel's
`tmem` map (the IR pass choreo_py/passes/tmem_plan.py decides them; this
backend only reads them, and refuses IR that lacks them): the seed's two
64-row consumers share S's columns at lane offsets 0 and 16 (S 0-127, O
128-255 / 256-383, P 384-447 / 448-511; 512 allocated).

- Register copies. A warpgroup reads an [M, N] tile with one `tcgen05.ld`
  per warp: M = 64 (layout F) `.16x32bx2` with the second half-warp N/2
  columns on: thread t = 32w + l holds row 16w + l%16, columns
  N/2 * (l/16) + k, so a row is held by the pair (l, l^16) and a row
  reduction ends with one `shfl.bfly 16`. M = 128 (layout D) `.32x32b`:
  thread t holds row t, every column. `access`/`update` load and store
  those copies where lower_flow.py says the registers are stale or tensor
  memory will be read again.
- `mma` is issued by one elected thread per role instance (its thread 0):
  `tcgen05.fence::after_thread_sync`, one `tcgen05.mma.cta_group::1.kind::f16`
  per 16-wide k-step (shared operands as sm_100 descriptors, a bf16 A
  operand from TMEM as `[a]`), then `tcgen05.commit` to the future's
  mbarrier. Enable-input-d of k-step 0 is false after a folded `mma.fill 0`
  and a predicate register after a fill kept as a flag (lower_flow.py).
- Ordering. Before an issue, if this instance's threads used tcgen05.ld/st
  (or waited a future) since their last barrier: `tcgen05.wait::st`,
  `fence::before_thread_sync`, `bar.sync` over the instance. That orders
  their TMEM reads and writes before the MMA, and keeps every waiter within
  one phase of an mbarrier that is about to be re-armed.
- `wait f`: all threads `mbarrier.try_wait.parity` on f's barrier (a parity
  register flips at each issue), then `tcgen05.fence::after_thread_sync`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from choreo_py import ir, targets
from choreo_py.ir.verify_tmem import check_tmem_map
from choreo_py.diagnostics import ChoreoError, InternalError
from choreo_py.ir.tmem_rules import describe

from ..core.context import Lowering
from ..core.memory import SMEM_ALIGN
from ..core.memory import addr as _addr
from ..core.target_base import AccLayout, Target
from ..core.writer import V
from . import block_acc
from . import descriptors as d
from .lower_flow import Flow, analyse, writes
from .lower_mma import issue as issue_mma

LANE16 = 16 << 16        # TMEM address step of 16 lanes


@dataclass
class _Sync:
    """What this instance's threads did to tensor memory since their last barrier
    (at straight-line precision; control flow makes everything possible)."""

    touched: bool = False      # tcgen05.ld/st issued
    st_pending: bool = False   # tcgen05.st not yet waited for
    waited: set = field(default_factory=set)  # MMA futures waited
    unknown: bool = False      # after a loop head, exit or branch
    role_synced: bool = True   # no TMEM access since a barrier over the whole role

    def boundary(self) -> None:
        self.touched = self.st_pending = self.unknown = True
        self.role_synced = False

    def synced(self) -> None:
        self.touched = self.st_pending = self.unknown = False
        self.waited = set()


class Sm100Target(block_acc.BlockAccHooks, Target):
    f16_accumulators = True  # f32 cells rounded after each MMA (lower_mma._round_f16)

    def __init__(self, record: targets.Target) -> None:
        super().__init__(record)
        self.plan: Optional[ir.TmemMap] = None  # the kernel's map (pass tmem-plan)
        self.flow: Optional[Flow] = None
        self.role: Optional[ir.Role] = None
        self.m = 0                     # tile rows of the role's fragments
        self.n = 0                     # the width whose column map thread_bases reports
        self.futures: dict[str, ir.Event] = {}
        self.future_of: dict[int, str] = {}  # id(Mma) -> future (synchronous MMAs too)
        self.slot = 0                  # smem offset of the TMEM base address
        self.stmt = None               # the statement being lowered (lower.py)
        self.wait_queue: list[str] = []
        self.sync = _Sync()
        self.block: frozenset = frozenset()  # accumulators of the block (block_acc.py)
        self.block_ops: frozenset = frozenset()  # MMA operands of the block (`frag ... : block`)
        self.repartitioned = False  # block_acc.repartitioned

    @property
    def uses_tmem(self) -> bool:
        return bool(self.plan and self.plan.regions)

    def roles_may_join(self, lw: Lowering) -> bool:
        """Not with tensor memory: the roles free it as they end (a loop would find it gone)."""
        return not (self.block or self.uses_tmem)

    # ------------------------------------------------------------ kernel setup
    def prepare(self, k: ir.Kernel) -> ir.Kernel:
        """Reads the IR's facts: the TMEM map (pass tmem-plan; none: no MMA needs tensor
        memory), the MMA futures' mbarriers and the TMEM address slot (pass mma-barriers)."""
        target = self.record
        if k.tmem is None and any(isinstance(s, ir.Mma) for s in ir.walk(k.body)):
            raise InternalError(f"kernel {k.name} has MMAs but no tensor-memory map (the IR "
                                "did not go through the pass tmem-plan)")
        self.plan = k.tmem
        if self.plan is not None and self.plan.refused:
            raise ChoreoError(self.plan.refused, self.plan.loc)
        if not self.uses_tmem:
            return k
        check_tmem_map(k, target)  # the map is still the kernel's (IR edited since?)
        self.block = block_acc.block_accs(k)
        self.block_ops = block_acc.block_operands(k)
        self.repartitioned = block_acc.repartitioned(k)
        if self.plan.staged:
            name, why = next(iter(self.plan.staged.items()))
            raise ChoreoError(f"the MMA operand '{name}' cannot be read from tensor memory "
                              f"({why}); staging it through shared memory is not lowered for "
                              f"{self.arch} yet", _frag_loc(k, name))
        self.role = _mma_role(k, self.refuse)
        self._fragment_shape(k)
        if k.tmem_slot is None:
            raise InternalError(f"kernel {k.name} has a tensor-memory map but no TMEM address "
                                "slot (the IR did not go through the pass mma-barriers)")
        for s in ir.walk(self.role.body):
            if isinstance(s, ir.Mma):
                fut = s.completion[len("mma."):] if s.completion else s.future
                self.future_of[id(s)] = fut
                if s.completion:  # (none: only `trigger ... after` commits it: mma_barriers)
                    self.futures.setdefault(fut, k.event(s.completion))
        self.slot = k.tmem_slot
        total, limit = k.smem_total, self.record.smem_limit
        if total + SMEM_ALIGN > limit:
            raise ChoreoError(f"the block needs {total + SMEM_ALIGN} bytes of shared memory "
                              f"with its MMA barriers, more than the {limit} {self.arch} "
                              "allows", k.loc)
        return k

    def _fragment_shape(self, k: ir.Kernel) -> None:
        """One M for the role's tiles, and the width N whose thread -> column map
        `thread_bases` reports: a thread's first column is N/2 * (lane / 16), so the
        applies that use the column index must all run over tiles of one width."""
        rows = {k.frag(r.frag).shape[0] for r in self.plan.regions}
        if len(rows) > 1:
            raise ChoreoError(f"MMA tiles of {sorted(rows)} rows in one role are not lowered "
                              f"for {self.arch} yet", self.role.loc)
        self.m, = rows
        widths = {}
        for s in ir.walk(self.role.body):
            f = k.frag(s.domain) if isinstance(s, ir.Apply) else None
            if f is not None and len(f.shape) == 2 and _uses_index(s.body, s.indices[1]):
                widths.setdefault(f.shape[1], s)
        if len(widths) > 1:
            raise ChoreoError("applies that use the column index over tiles of different widths "
                              f"({', '.join(map(str, sorted(widths)))}) in one role are not "
                              f"lowered for {self.arch} yet", list(widths.values())[1].loc)
        self.n = next(iter(widths), k.frag(self.plan.regions[0].frag).shape[1])

    def start(self, lw: Lowering) -> None:
        """After the core's analysis: the load/store decisions for the MMA role."""
        if self.uses_tmem:
            accs = {r.frag for r in self.plan.regions if r.kind == "acc"}
            self.flow = analyse(self.role, accs, lw.facts, self.block, lw.k, self.repartitioned)

    def alloc_tmem(self, lw: Lowering) -> None:
        """Kernel entry, before the block barrier: one warp of the MMA role allocates."""
        if not self.uses_tmem:
            return
        w = lw.w
        w.comment(_plan_comment(lw.k, self.plan, self.role))
        done = w.label("tmem_allocated")
        w.bra(done, self._not_alloc_warp(lw))
        w.op("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
             _addr(lw.smem_base, self.slot), self.plan.alloc)
        w.put_label(done)
        w.call("ptx.tcgen05.fence_before_thread_sync")

    def after_block_sync(self, lw: Lowering) -> None:
        if self.uses_tmem:
            lw.w.call("ptx.tcgen05.fence_after_thread_sync")

    def _not_alloc_warp(self, lw: Lowering) -> V:
        """Predicate: not the warp that allocates and frees (the MMA role's first warp)."""
        def make() -> V:
            warp = lw.w.reg("u32", "warp_id")
            lw.w.op("shr.u32", warp, lw.tid, 5)
            p = lw.w.reg("pred", "not_tmem_warp")
            lw.w.op("setp.ne.u32", p, warp, self.role.members[0] * 128 // 32)
            return p
        return lw.once(("not_tmem_warp",), make)

    # ------------------------------------------------------------ roles
    def in_mma_role(self, lw: Lowering) -> bool:
        return self.uses_tmem and lw.role is not None and lw.role.members == self.role.members

    def enter_role(self, lw: Lowering) -> None:
        self.sync = _Sync()

    def leave_role(self, lw: Lowering) -> None:
        """Role exit: wait for every instance's TMEM work, then the allocating warp frees
        (with block accumulators, at the kernel's join instead: block_acc.py)."""
        lw.next_statement()  # the region's last statement (core/target_base.py)
        if not self.in_mma_role(lw) or self.block:
            return
        w = lw.w
        w.comment("tensor memory: the allocating warp frees it once the role is done with it")
        if not self.sync.role_synced:
            self._before_sync(lw)
            _role_barrier(lw)
        tmem = self.tmem_base(lw)
        w.op("bar.warp.sync", -1)  # dealloc is .sync.aligned: the warp reconverged
        done = w.label("tmem_freed")
        w.bra(done, self._not_alloc_warp(lw))
        w.call("ptx.tcgen05.fence_after_thread_sync")
        w.op("tcgen05.dealloc.cta_group::1.sync.aligned.b32", tmem, self.plan.alloc)
        w.op("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned")
        w.put_label(done)

    def before_role_sync(self, lw: Lowering) -> None:
        """`role.sync` is a barrier over the role: it also orders TMEM use before it."""
        if self.in_mma_role(lw) and (self.sync.touched or self.sync.unknown):
            self._before_sync(lw)

    def after_role_sync(self, lw: Lowering) -> None:
        if self.in_mma_role(lw):
            self.sync.synced()
            self.sync.role_synced = True

    def _before_sync(self, lw: Lowering) -> None:
        if self.sync.st_pending:
            lw.w.call("ptx.tcgen05.wait_st")
        lw.w.call("ptx.tcgen05.fence_before_thread_sync")

    # ------------------------------------------------------------ layout
    def acc_layout(self, frag: ir.Frag, loc) -> AccLayout:
        m, n = frag.shape
        split = self.record.acc_rows.get(m)
        if split is not None:  # .16x32bx2 split N/2 (M = 64), .32x32b (M = 128); one row
            return AccLayout(rows=m, cols=n, row_off=(0,) * (n // split.owners),  # a thread
                             col_off=split.columns(n, 0), row_lanes=split.lanes,
                             col_base_max=split.col_base(n, split.owners - 1))
        raise self.refuse(f"a fragment of {m} rows per warpgroup (tcgen05 tiles are 64 or 128 "
                          "rows)", loc)

    def thread_bases(self, lw: Lowering) -> tuple[V, V]:
        if self.block and lw.role is not None and not self.in_mma_role(lw):
            self.check_block_role(lw, None, ", ".join(sorted(self.block)))  # a reader role
        else:
            self._check_role(lw, None)
        return self.row_base(lw), self.col_base(lw, self.n)

    def row_base(self, lw: Lowering) -> V:
        """The thread's row: 16 * warp + lane % 16 (M = 64), its index (M = 128)."""
        tid = lw.role.local_tid

        def make() -> V:
            w = lw.w
            rb = w.reg("s32", "row_base")
            if self.m == 128:
                w.op("mov.s32", rb, tid)
                return rb
            hi = w.reg("u32", "warp_rows")
            w.op("and.b32", hi, tid, 0x60)
            w.op("shr.u32", hi, hi, 1)
            w.op("and.b32", rb, tid, 15)
            w.op("or.b32", rb, rb, hi)
            return rb
        return lw.once(("row_base",), make)

    def col_base(self, lw: Lowering, n: int) -> V:
        """The thread's first column of an N-wide tile: N/2 * (lane / 16) (M = 64), 0 (M = 128)."""
        if self.m == 128:
            return V.imm(0, "s32")

        def make() -> V:
            w = lw.w
            cb = w.reg("s32", f"col_base{n}" if n != self.n else "col_base")
            split = self.record.row_split(64)  # owner 1: the lanes of bit 16
            lane = split.lanes[0]
            w.op("and.b32", cb, lw.role.local_tid, lane)
            half = split.col_base(n, 1)
            if half & (half - 1) == 0:
                shift = half.bit_length() - lane.bit_length()
                if shift:
                    w.op("shl.b32" if shift > 0 else "shr.u32", cb, cb, abs(shift))
            else:
                w.op("shr.u32", cb, cb, lane.bit_length() - 1)
                w.op("mul.lo.s32", cb, cb, half)
            return cb
        return lw.once(("col_base", n), make)

    def _check_role(self, lw: Lowering, loc, name: Optional[str] = None) -> None:
        if name in self.block and lw.role is not None:
            return self.check_block_role(lw, loc, name)  # block_acc.BlockAccHooks
        if not self.in_mma_role(lw):
            raise self.refuse("MMA fragments outside the role that issues the MMAs", loc)
        if lw.role.threads != 128 or lw.role.single_thread:
            raise self.refuse("MMA fragments outside a warpgroup (parallel ... : group-4) role",
                              loc)

    # ------------------------------------------------------------ fragments
    def declare_acc(self, lw: Lowering, frag: ir.Frag) -> str:
        if frag.name in self.block and lw.role is None:  # the block's: no role yet
            return lw.w.array("f32", self.acc_layout(frag, frag.loc).regs, frag.name)
        self._check_role(lw, frag.loc, frag.name)
        lay = self.acc_layout(frag, frag.loc)
        arr = lw.w.array("f32", lay.regs, frag.name)
        if self.flow and frag.name in self.flow.flagged:
            self._flag(lw, frag.name)
        return arr

    def _flag(self, lw: Lowering, name: str) -> V:
        """Enable-input-d of the accumulator's next MMA: false while a fill 0 is pending."""
        def make() -> V:
            p = lw.w.reg("pred", f"{name}_accumulate")
            lw.w.op("mov.pred", p, 1)
            return p
        return lw.once(("flag", name), make)

    def fill(self, lw: Lowering, frag: ir.Frag, value: V) -> None:
        if frag.name in self.block and not (self.in_mma_role(lw) and frag.name in self.flow.flagged):
            if lw.role is not None:
                raise self.refuse(f"filling the block's accumulator '{frag.name}' inside a role",
                                  self.stmt.loc if self.stmt is not None else frag.loc)
            block_acc.fill(self, lw, frag, value)
            return
        if frag.name in self.flow.flagged:
            lw.w.comment(f"{frag.name} = 0: the next MMA into it overwrites (predicate)")
            lw.w.op("mov.pred", self._flag(lw, frag.name), 0)
            return
        arr = lw.frags[frag.name].array
        for k in range(self.acc_layout(frag, frag.loc).regs):
            lw.w.op("mov.f32", V(f"{arr}[{k}]", "f32"), value)
        if self.flow.store_back(self.stmt, frag.name):
            self.tmem_store(lw, frag.name, arr, self.acc_layout(frag, frag.loc).regs, packed=False)

    def access(self, lw: Lowering, frag: ir.Frag) -> None:
        if self.flow.load(self.stmt, frag.name):
            fi = lw.frags[frag.name]
            self.tmem_load(lw, frag.name, fi.array, fi.layout.regs)

    def update(self, lw: Lowering, frag: ir.Frag) -> None:
        # the core calls this for every accumulator an apply touched, read-only ones too
        # (a reader role of the block's accumulator has no flow facts: store_back is True,
        # so its write goes back to tensor memory at once)
        if frag.name in writes(self.stmt) and self.flow.store_back(self.stmt, frag.name):
            fi = lw.frags[frag.name]
            self.tmem_store(lw, frag.name, fi.array, fi.layout.regs, packed=False)
            if frag.name in self.block and not self.in_mma_role(lw):
                block_acc.wrote(self, lw)

    def store_operand(self, lw: Lowering, name: str) -> None:
        """A bf16 A operand written by per-thread code goes to its TMEM columns."""
        fi = lw.frags[name]
        self.tmem_store(lw, name, fi.array, fi.layout.regs // 2, packed=True)

    # ------------------------------------------------------------ TMEM moves
    def tmem_load(self, lw: Lowering, name: str, arr: str, regs: int) -> None:
        self._move(lw, "ld", name, arr, regs, packed=False)
        lw.w.call("ptx.tcgen05.wait_ld")

    def tmem_store(self, lw: Lowering, name: str, arr: str, regs: int, *, packed: bool) -> None:
        self._move(lw, "st", name, arr, regs, packed=packed)
        self.sync.st_pending = True

    def _move(self, lw: Lowering, op: str, name: str, arr: str, regs: int, *, packed: bool,
              first: Optional[int] = None) -> None:
        """tcgen05.ld/st of this warp's rows in power-of-two pieces (piece_limit), of registers
        first.. of the array (columns first.. in the 32x32b shape; None: the whole array).

        In the .16x32bx2 shape the second half-warp reads `split` columns on;
        a bf16 operand packs two elements per column, so its split is half."""
        w = lw.w
        base = self.warp_addr(lw, name)
        shape = "16x32bx2" if self.m == 64 else "32x32b"
        split, start = regs, first or 0
        for n in _pieces(regs, self.piece_limit(lw, name)):
            a = _addr(base, start)
            whole = n == regs and first is None
            vec = f"list({arr})" if whole else f"[{arr}[i] for i in range({start}, {start + n})]"
            opcode = f"tcgen05.{op}.sync.aligned.{shape}.x{n}.b32"
            extra = [split] if shape == "16x32bx2" else []
            if op == "ld":
                w.op(opcode, vec, a, *extra)
            else:
                w.op(opcode, a, *extra, vec)
            start += n
        self.sync.touched = True
        self.sync.role_synced = False

    # ------------------------------------------------------------ TMEM addresses
    def tmem_base(self, lw: Lowering) -> V:
        def make() -> V:
            t = lw.w.reg("b32", "tmem")
            lw.w.op("ld.shared.b32", t, _addr(lw.smem_base, self.slot))
            return t
        return lw.once(("tmem_base",), make)

    def instance(self, lw: Lowering) -> V:
        """0, 1, ... for the role's instances."""
        first = self.role.members[0]
        if first == 0:
            return lw.role.instance

        def make() -> V:
            i = lw.w.reg("u32", "mma_instance")
            lw.w.op("sub.u32", i, lw.role.instance, first)
            return i
        return lw.once(("mma_instance",), make)

    def region_addr(self, lw: Lowering, name: str) -> V:
        """TMEM address of this instance's tile `name` (what its MMAs name)."""
        lane, col, const = self._region_terms(name)
        count = len(self.role.members)
        whole = name in self.block or name in self.block_ops
        if whole:  # one tile for the whole block: no instance term
            lane = col = 0

        def make() -> V:
            w = lw.w
            acc = self.tmem_base(lw)
            inst = self.instance(lw) if not whole else None
            out = w.reg("b32", f"{name}_tmem")
            if lane:  # M = 64: the instance's parity picks the lane half (0 or 16)
                par = inst
                if count > 2:
                    par = w.reg("u32", "inst_parity")
                    w.op("and.b32", par, inst, 1)
                w.op("mad.lo.u32", out, par, lane, acc)
                acc = out
                if col:
                    pair = w.reg("u32", "inst_pair")
                    w.op("shr.u32", pair, inst, 1)
                    inst = pair
            if col:
                w.op("mad.lo.u32", out, inst, col, acc)
                acc = out
            if const or acc is not out:
                w.op("add.u32", out, acc, const)
            return out
        return lw.once(("tmem", name), make)

    def _region_terms(self, name: str) -> tuple[int, int, int]:
        """(lane step, column step, base) such that the plan's region of instance i is
        base + (i & 1) * lane + (i >> 1) * col for M = 64 pairs sharing columns at lane
        offsets 0 and 16, base + i * col otherwise (M = 128, or an M = 64 fragment kept
        at lane 0 because an MMA reads A from tensor memory)."""
        rs = sorted((r for r in self.plan.regions if r.frag == name), key=lambda r: r.instance)
        offsets = [d.tmem_addr(r.lane, r.col) for r in rs]
        base = offsets[0]
        if self.m == 64 and any(r.lane for r in rs):
            lane = LANE16 if len(rs) > 1 else 0
            col = offsets[2] - base if len(rs) > 2 else 0
            want = [base + (i & 1) * lane + (i >> 1) * col for i in range(len(rs))]
        else:
            lane, col = 0, (offsets[1] - base if len(rs) > 1 else 0)
            want = [base + i * col for i in range(len(rs))]
        if want != offsets:
            raise ChoreoError(f"the TMEM regions of '{name}' are not evenly spaced per role "
                              f"instance; this is not lowered for {self.arch} yet", self.role.loc)
        return lane, col, base

    def warp_addr(self, lw: Lowering, name: str) -> V:
        """Where this warp's tcgen05.ld/st of `name` start: warp w % 4 reaches lanes 32(w%4).."""
        def quarter() -> V:
            q = lw.w.reg("u32", "warp_lanes")
            lw.w.op("and.b32", q, lw.role.local_tid, 0x60)
            lw.w.op("shl.b32", q, q, 16)  # (t / 32) * 32 lanes, in the lane field
            return q

        def make() -> V:
            out = lw.w.reg("b32", f"{name}_rows")
            lw.w.op("add.u32", out, self.region_addr(lw, name), lw.once(("warp_lanes",), quarter))
            return out
        return lw.once(("tmem_rows", name), make)

    # ------------------------------------------------------------ futures
    def prepare_wait(self, lw: Lowering, s: ir.Wait) -> None:
        """The MMA futures a `wait` statement will hand to `wait`, in order."""
        waits = lw.facts.wait_groups.get(id(s), {})
        self.wait_queue = [i.future for i in s.items if isinstance(i, ir.FutureRef)
                           and i.future in lw.facts.mma_futures and waits.get(i.future) is not None]

    def wait(self, lw: Lowering, groups_after: int) -> None:
        # one mbarrier per future: waiting it does not depend on the groups issued after it
        if not self.wait_queue:
            raise ChoreoError("internal: an MMA wait without its future", getattr(self.stmt, "loc", None))
        self.wait_future(lw, self.wait_queue.pop(0))

    def wait_future(self, lw: Lowering, fut: str) -> None:
        reg, off = self.barrier(lw, fut)
        lw.w.call("ptx.mbarrier.wait", _addr(reg, off), self.phase(lw, fut).text)
        lw.w.call("ptx.tcgen05.fence_after_thread_sync")
        self.sync.waited.add(fut)

    def barrier(self, lw: Lowering, fut: str) -> tuple[V, int]:
        ev = self.futures[fut]
        if len(self.role.members) == 1:
            return lw.smem_base, ev.offset

        def make() -> V:
            r = lw.w.reg("u32", "mma_bars")
            lw.w.op("mad.lo.u32", r, self.instance(lw), 8, lw.smem_base)
            return r
        return lw.once(("mma_bars",), make), ev.offset

    def phase(self, lw: Lowering, fut: str) -> V:
        """Parity of the future's latest commit: flips at each issue (starts at 1)."""
        def make() -> V:
            p = lw.w.reg("u32", f"{_ident(fut)}_phase")
            lw.w.op("mov.u32", p, 1)
            return p
        return lw.once(("phase", fut), make)

    def sync_before_issue(self, lw: Lowering, fut: str) -> None:
        st = self.sync
        if not (st.touched or st.unknown or fut in st.waited):
            return
        self._before_sync(lw)
        if lw.instance_barrier_base is None:
            lw.instance_barrier_base = lw.new_barrier_id(lw.parallel_extent)

        def make() -> V:
            b = lw.w.reg("u32", "inst_bar")
            lw.w.op("add.u32", b, lw.role.instance, lw.instance_barrier_base)
            return b
        lw.w.call("ptx.bar.sync", lw.once(("inst_bar",), make).text, str(lw.role.threads))
        st.synced()

    # ------------------------------------------------------------ mma
    def issue(self, lw: Lowering, s: ir.Mma, zero_first: bool) -> None:
        issue_mma(self, lw, s, zero_first)  # the statement's lowering: lower_mma.py


# ---------------------------------------------------------------- helpers

def _mma_role(k: ir.Kernel, refuse) -> ir.Role:
    for s in ir.walk(k.body):
        if isinstance(s, ir.Role) and any(isinstance(t, ir.Mma) for t in ir.walk(s.body)):
            return s
        if isinstance(s, ir.Parallel) and not any(isinstance(t, ir.Role) for t in s.body) \
                and any(isinstance(t, ir.Mma) for t in ir.walk(s.body)):
            raise refuse("MMAs in a parallel region without inthreads roles", s.loc)
    mma = next(s for s in ir.walk(k.body) if isinstance(s, ir.Mma))
    raise refuse("an MMA outside a parallel region's role", mma.loc)


def _plan_comment(k: ir.Kernel, plan: ir.TmemMap, role: ir.Role) -> str:
    """The map as the module's comment at the allocation."""
    lines = [f"tmem plan for {k.name}: role ({role.name}) x {len(role.members)}, "
             f"{plan.used} columns used, tcgen05.alloc {plan.alloc}"]
    lines += ["  " + describe(r, k.frag(r.frag)) for r in plan.regions]
    return "\n".join(lines)


def _uses_index(stmts: list, name: str) -> bool:
    """Whether apply code uses index `name` as a value (not just to name its element)."""
    from ..core.context import children

    def visit(e) -> bool:
        if isinstance(e, ir.Elem):  # frag.at(i, j) picks the register: no column value
            return False
        return (isinstance(e, ir.Sym) and e.name == name) or any(visit(c) for c in children(e))
    return any(visit(getattr(s, attr)) for s in ir.walk(stmts) for attr in ("value", "cond")
               if isinstance(getattr(s, attr, None), ir.Expr))


def _frag_loc(k: ir.Kernel, name: str):
    f = k.frag(name)
    return f.loc if f is not None else k.loc


def _pieces(n: int, limit: int = 64) -> list[int]:
    """n as a sum of powers of two <= limit, largest first (tcgen05.ld/st .num)."""
    out = []
    while n:
        p = min(limit, 1 << (n.bit_length() - 1))
        out.append(p)
        n -= p
    return out


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def _role_barrier(lw: Lowering) -> None:
    from ..core.roles import role_barrier

    role = lw.role
    if len(role.members) == lw.parallel_extent:
        lw.w.call("ptx.bar.sync", "0")
    else:
        lw.w.call("ptx.bar.sync", str(role_barrier(lw)), str(role.threads * len(role.members)))

