"""sm_100a (Blackwell) backend: the lowering core with the tcgen05 target (target.py).

`Sm100Lowering` is the folder's `TARGET` (lowering/sm100/__init__.py): the
core lowers a file with it as it does with sm_90a's.

The core lowers one statement at a time and calls the target for
accumulator work. The tcgen05 target also uses the core's hooks around
statements, roles and events (`Target` in core/target_base.py):

- the statement being lowered (`Sm100Target.stmt`): whether an access loads
  from tensor memory and whether an update stores back depend on where the
  statement sits (lower_flow.py decides once over the IR); loop heads,
  branches and the points where paths join reset the target's straight-line
  sync state;
- kernel entry and role exit: one warp allocates tensor memory before the
  block barrier that follows the mbarrier initialisation, and frees it when
  the MMA role ends;
- `wait` on an event whose tile only MMAs read is the issuing thread's alone
  (lower_wait.py: a thread left behind could miss a phase of the ring);
- after an `apply` (or copy, or an initialised declaration) that writes a bf16
  A operand, its registers go to the operand's TMEM columns, where the next MMA
  reads it; `mma.store`
  uses lower_store.py (a thread's columns are a run of one row here).

The MMA futures' mbarriers and the TMEM address slot are appended to the
kernel's shared-memory plan first (Sm100Target.prepare).
"""
from __future__ import annotations

from choreo_py import ir

from ..core.context import Lowering
from .lower_flow import writes
from .lower_mma import commit_trigger
from .lower_store import mma_store
from .lower_wait import wait as issuer_wait
from . import block_acc
from .target import Sm100Target

_CONTROL = (ir.For, ir.While, ir.If)


class Sm100Lowering(Sm100Target):
    """The tcgen05 target with the core hooks it needs."""

    # (mma.load is refused by the target's record: choreo_py/targets.py)
    handlers = {ir.MmaStore: lambda lw, s, last: mma_store(lw, s),
                ir.Wait: lambda lw, s, last: issuer_wait(lw.target, lw, s)}

    def __init__(self, record) -> None:
        super().__init__(record)
        self._outer: list = []

    def declare_sparse_meta(self, lw: Lowering, frag: ir.Frag, loc) -> str:
        # tcgen05.mma.sp reads the metadata from tensor memory (tcgen05.cp from shared
        # memory, in the layout the PTX ISA gives per kind and M), not from registers
        raise lw.refuse(f"the metadata fragment '{frag.name}' of a sparse MMA "
                        "(mma.row.row.sp; tcgen05.mma.sp reads it from tensor memory)", loc)

    def commit_trigger(self, lw: Lowering, s: ir.Trigger) -> None:
        commit_trigger(self, lw, s)  # `trigger e after <MMA future>`: lower_mma.py

    def before_events(self, lw: Lowering) -> None:
        self.alloc_tmem(lw)  # the mbarrier set-up's block barrier publishes the address

    def after_events(self, lw: Lowering) -> None:
        self.after_block_sync(lw)

    def block_boundary(self, lw: Lowering) -> None:
        self.sync.boundary()  # a loop head or branch: reached from elsewhere too

    def before_stmt(self, lw: Lowering, s: ir.Stmt) -> None:
        self._outer.append(self.stmt)
        self.stmt = s
        if isinstance(s, _CONTROL):
            self.sync.boundary()
        elif isinstance(s, ir.Wait):
            self.prepare_wait(lw, s)
        elif isinstance(s, ir.RoleSync):
            self.before_role_sync(lw)
        elif isinstance(s, ir.Trigger) and self.block and lw.role is not None \
                and not self.in_mma_role(lw) and not lw.role.single_thread \
                and (self.sync.touched or self.sync.unknown):
            # a reader of the block's accumulators publishes: every warp's tcgen05.ld (and
            # tcgen05.st, waited) come before whatever the event releases (the next MMAs),
            # so each warp fences and the role meets before its one thread arrives
            self._before_sync(lw)
            self.sync.st_pending = False
            lw.smem_read = True  # the instance barrier of events.trigger
        elif isinstance(s, ir.FragCopy) and self.uses_tmem:
            fi = lw.frags.get(s.dst)
            if fi is not None and fi.kind == "acc":
                raise lw.refuse(f"copy() into the accumulator '{s.dst}' (a tensor-memory tile)",
                                s.loc)

    def after_stmt(self, lw: Lowering, s: ir.Stmt) -> None:
        self._after(lw, s)
        self.stmt = self._outer.pop()

    def _after(self, lw: Lowering, s: ir.Stmt) -> None:
        if isinstance(s, _CONTROL):
            self.sync.boundary()  # after it: paths join
            return
        if isinstance(s, ir.RoleSync):
            self.after_role_sync(lw)
            return
        if not self.in_mma_role(lw):
            self._operand_written_elsewhere(lw, s)
            return
        written = writes(s) if isinstance(s, ir.Apply) else \
            {s.dst} if isinstance(s, ir.FragCopy) else set()
        if isinstance(s, ir.FragDecl) and s.init is not None and \
                any(r.frag == s.frag.name for r in self.plan.regions):
            written = {s.frag.name}  # (one mma.load fills instead is refused by name there)
        for name in sorted(written):
            fi = lw.frags.get(name)
            if fi is not None and fi.kind == "operand":
                lw.w.comment(f"{name} -> its tensor-memory columns (the A operand of an MMA)")
                self.store_operand(lw, name)


    def _operand_written_elsewhere(self, lw: Lowering, s: ir.Stmt) -> None:
        """An MMA's A operand lives in tensor memory, where the issuing role stores it from
        its registers: written by another role (FA4's P, written by softmax for the MMA
        role), it would stay in that role's registers and the MMA would read columns no
        one wrote. Refused by name until the block's operands are lowered."""
        if lw.role is None or not self.uses_tmem or not isinstance(s, ir.Apply):
            return
        for name in sorted(writes(s)):
            if name in self.block_ops:  # the block's: this role stores it, then waits
                lw.w.comment(f"{name} -> the block's tensor-memory columns (an MMA's A operand)")
                self.store_operand(lw, name)
                block_acc.wrote(self, lw)
            elif any(r.frag == name and r.kind == "operand" for r in self.plan.regions):
                raise lw.refuse(f"the MMA operand '{name}' written by a role that does not "
                                "issue its MMAs (its tensor-memory columns are stored by the "
                                "issuing role)", s.loc)
