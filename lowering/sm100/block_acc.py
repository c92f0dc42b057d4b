"""The block's accumulators on sm_100a (`acc = mma.fill.f32 0.0f : block;`): shared by roles.

An accumulator declared `: block` in the block, before `parallel p ... :
group-4`, is the block's tensor-memory tile: one role issues its MMAs, other
roles read it after an event. What that takes here:

- The declaration's fill is real (the roles may publish the tile before any
  MMA wrote it: a loop of no K steps): the block's first warpgroup stores the
  value with `tcgen05.st` (warp w % 4 reaches lanes 32(w % 4)..), then
  `tcgen05.wait::st`, `fence::before_thread_sync`, `bar.sync 0` and
  `fence::after_thread_sync` order it before every role's first access.
- The issuing role needs no warpgroup: its body is MMAs, waits, triggers and
  control, so it is issue-only and one thread runs it (no election, no
  instance barrier; every MMA accumulates onto the fill). A fill 0 of the tile
  in that role, right before an MMA into it (no trigger between), is the MMA's
  first k-step with enable-input-d false (lowering/core/analysis.py folds it):
  a fresh S per KV step costs no store to tensor memory.
- A reading role fences (`fence::after_thread_sync`) after each wait on an
  event (lower_wait.py) and loads the tile at each statement that touches it
  (its registers are never assumed current across the other role's MMAs); one
  that writes it stores it back at once and waits the stores (`wrote`), and
  before its `trigger` each warp fences and the warpgroup meets
  (lower.py's before_stmt), so the next MMA sees every warp's stores.
- The tile lives until every role is done with it: the roles meet at the
  kernel's end (`bar.warp.sync`, `fence::before_thread_sync`, `bar.sync 0`)
  and the allocating warp frees tensor memory there, instead of at the end of
  the issuing role.
"""
from __future__ import annotations

from choreo_py import ir

from ..core.context import Lowering
from ..core.memory import addr as _addr
from ..core.writer import V
from .lower_flow import writes

JOIN = "L_kernel_join"


def _pow2_pieces(n: int, limit: int) -> list[int]:
    """n as a sum of powers of two <= limit, largest first (tcgen05.st's .num)."""
    out = []
    while n:
        p = min(limit, 1 << (n.bit_length() - 1))
        out.append(p)
        n -= p
    return out


def block_accs(k: ir.Kernel) -> frozenset:
    """The block's accumulators (`mma.fill ... : block`)."""
    return frozenset(f.name for f in k.frags if f.block and f.layout == "acc")


def block_operands(k: ir.Kernel) -> frozenset:
    """The block's MMA operands (`frag bf16[M, K] p : block`), in tensor memory."""
    return frozenset(f.name for f in k.frags if f.block and f.layout == "operand")


def fill(t, lw: Lowering, frag: ir.Frag, value: V) -> None:
    """The block-scope fill: warpgroup 0 stores `value` into the whole tile."""
    w = lw.w
    m, n = frag.shape
    w.comment(f"{frag.name} = {value.text}: the block's accumulator, stored by warpgroup 0")
    piece = min(n, t.piece_limit(lw, frag.name))
    vals = w.array("f32", piece, f"{frag.name}_fill")
    for i in range(piece):
        w.op("mov.f32", V(f"{vals}[{i}]", "f32"), value)
    # The tile's address is computed by every thread, before the branch: the roles reuse
    # it (the writer's cache), and a register only warpgroup 0 set would be undefined in
    # theirs (it read as the tile at column 0 by luck when that was the only tile).
    tile = t.region_addr(lw, frag.name)
    done = w.label("block_filled")
    skip = w.reg("pred", "not_filler")
    w.op("setp.ge.u32", skip, lw.tid, 128)
    w.bra(done, skip, uni=True)
    lanes = w.reg("u32", "fill_lanes")
    w.op("and.b32", lanes, lw.tid, 0x60)
    w.op("shl.b32", lanes, lanes, 16)
    base = w.reg("b32", f"{frag.name}_fill_at")
    w.op("add.u32", base, tile, lanes)
    start = 0
    for num in _pow2_pieces(n, piece):  # .num is a power of two (48 columns: 32 + 16)
        regs = f"list({vals})" if num == piece else f"[{vals}[i] for i in range({num})]"
        w.op(f"tcgen05.st.sync.aligned.32x32b.x{num}.b32", _addr(base, start), regs)
        start += num
    w.call("ptx.tcgen05.wait_st")
    w.put_label(done)
    w.call("ptx.tcgen05.fence_before_thread_sync")
    w.call("ptx.bar.sync", "0")
    w.call("ptx.tcgen05.fence_after_thread_sync")


def wrote(t, lw: Lowering) -> None:
    """A reader role stored the tile back: it waits the stores at once, since its next
    statement reloads the tile (a tcgen05.ld of the thread is not ordered after its own
    tcgen05.st without the wait), possibly across a loop's back edge."""
    lw.w.call("ptx.tcgen05.wait_st")
    t.sync.st_pending = False


#: Columns of an accumulator an elementwise apply (or mma.store) of a reader role moves at
#: a time: flash_atten_blackwell.co's correction role (64 registers) spilled with 16 or 32.
CHUNK_COLUMNS = 8
#: Registers of one tcgen05.ld/st of the block's tiles in a kernel that repartitions its
#: registers (piece_limit).
REPARTITIONED_PIECE = 16


class BlockAccHooks:
    """The Sm100Target hooks (lowering/core/target_base.py) block accumulators need; `self.block`
    names them (none: every hook leaves the kernel as it was)."""

    block: frozenset = frozenset()

    def row_vote(self, lw: Lowering, guard: V, a: ir.Apply) -> str:
        """An apply of pass tmem-row-vote: the warp votes on its lanes' row guards and, when
        none holds, branches (warp-uniformly) past the tile's tcgen05.ld, the arithmetic and
        the tcgen05.st, all of which are warp-collective; the label the caller puts after
        them is returned."""
        w = lw.w
        w.comment(f"{a.domain}: the update depends on the row alone; a warp none of whose "
                  "rows takes it skips the tensor-memory round trip")
        any_row = w.reg("pred", "any_row")
        w.op("vote.sync.any.pred", any_row, guard, -1)
        skip = w.label("row_vote_skip")
        w.bra(skip, any_row, negate=True, uni=True)
        return skip

    def role_exit(self, lw: Lowering) -> bool:
        """A role of a kernel with block accumulators ends at the join, not with `ret`."""
        if self.block:
            lw.w.bra(JOIN)
        return bool(self.block)

    def after_roles(self, lw: Lowering) -> None:
        if self.block:
            join(self, lw)

    def piece_limit(self, lw: Lowering, name: str) -> int:
        """Registers per tcgen05.ld/st of `name`. A move fills or reads a block of
        consecutive registers. In a kernel whose roles lower their budget (setmaxnreg.dec),
        the values every role keeps (addresses, loop bounds) sit in the low registers the
        smallest budget leaves, and a 64-register block has to avoid them: there the block's
        tiles move 16 registers at a time outside the MMA role (the readers, the fill).
        (flash_atten_blackwell.co spilled 48 bytes at x64 moves and none at x16;
        flash_atten_blackwell_persistent.co, 168 registers everywhere, spills at x16.)"""
        if self.repartitioned and (name in self.block or name in self.block_ops) \
                and not self.in_mma_role(lw):
            return REPARTITIONED_PIECE
        return 64

    def column_chunk(self, lw: Lowering, frags: list) -> int:
        """Registers per piece of an elementwise apply over block accumulators in a reader
        role (0: the whole tile at once). A piece is loaded, computed and stored back
        before the next: a warpgroup that rescales a 128-column O then holds 8 of its
        registers, not 128 (the correction role's budget is small)."""
        if self.m != 128 or lw.role is None or self.in_mma_role(lw) or not frags \
                or any(f.name not in self.block for f in frags):
            return 0
        return CHUNK_COLUMNS

    def access_columns(self, lw: Lowering, frag: ir.Frag, first: int, n: int) -> None:
        if self.flow.load(self.stmt, frag.name):
            self._move(lw, "ld", frag.name, lw.frags[frag.name].array, n, packed=False,
                       first=first)
            lw.w.call("ptx.tcgen05.wait_ld")

    def update_columns(self, lw: Lowering, frag: ir.Frag, first: int, n: int) -> bool:
        """Stores a written piece back; True if it did."""
        if frag.name in writes(self.stmt) and self.flow.store_back(self.stmt, frag.name):
            self._move(lw, "st", frag.name, lw.frags[frag.name].array, n, packed=False,
                       first=first)
            self.sync.st_pending = True
            return True
        return False

    def wrote_back(self, lw: Lowering) -> None:
        wrote(self, lw)

    def check_block_frag(self, frag: ir.Frag, loc) -> None:
        """A `frag ... : block` is the block's MMA operand (its tensor-memory columns);
        another per-thread fragment shared by the roles has nowhere to live."""
        if frag.layout != "operand":
            raise self.refuse(f"the ': block' fragment '{frag.name}' that is not an MMA's A "
                              "operand", loc)

    def issue_only_also(self, lw: Lowering) -> tuple:
        """Statements an issue-only role may hold here: MMAs into block accumulators, and a
        fill of one that folds into the next MMA (its enable-input-d: no instruction on the
        tile, so the MMA role that starts a fresh S each step stays one thread), or that
        clears the predicate the next MMA's enable-input-d reads (lower_flow's `flagged`:
        a fill under a branch, O's per work item)."""
        if not self.block:
            return ()
        folded = lw.facts.folded_fills
        flagged = self.flow.flagged if self.flow is not None else frozenset()
        return (ir.Mma, lambda s: isinstance(s, ir.MmaFill) and s.acc in self.block
                and (id(s) in folded or s.acc in flagged))

    def check_block_role(self, lw: Lowering, loc, name: str) -> None:
        """A role using the block's accumulator `name`: the issue-only one issues its MMAs;
        the others are warpgroups (a warp reaches a quarter of tensor memory's lanes)."""
        if lw.role.single_thread and not self.in_mma_role(lw):
            raise self.refuse(f"the block's accumulator '{name}' in an issue-only role that does "
                              "not issue its MMAs", loc)
        if not lw.role.single_thread and lw.role.threads != 128:
            raise self.refuse(f"the block's accumulator '{name}' outside a warpgroup "
                              "(parallel ... : group-4) role", loc)


def repartitioned(k: ir.Kernel) -> bool:
    """Whether a role of the kernel lowers its register budget (setmaxnreg.dec)."""
    return any(isinstance(s, ir.SetMaxRegs) and not s.increase for s in ir.walk(k.body))


def join(t, lw: Lowering) -> None:
    """Kernel end: every thread arrives; then the allocating warp frees tensor memory."""
    w = lw.w
    w.comment("the roles are done with tensor memory: the allocating warp frees it")
    w.put_label(JOIN)
    w.op("bar.warp.sync", -1)
    w.call("ptx.tcgen05.fence_before_thread_sync")
    w.call("ptx.bar.sync", "0")
    tmem = t.tmem_base(lw)
    done = w.label("tmem_freed")
    w.bra(done, t._not_alloc_warp(lw))
    w.call("ptx.tcgen05.fence_after_thread_sync")
    w.op("tcgen05.dealloc.cta_group::1.sync.aligned.b32", tmem, t.plan.alloc)
    w.op("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned")
    w.put_label(done)
    w.call("ptx.ret")
