"""sm_100a (Blackwell) backend: the lowering core with the tcgen05 target (target.py).

`lower_module(module, source_name)` returns the pyptx module text of the
file's kernel, as the sm_90a backend does.

The core lowers one statement at a time and calls the MmaTarget for
accumulator work. The tcgen05 target needs three things that protocol does
not carry, so this module runs the core's kernel lowering and statement walk
(the same steps as core/kernel.py: prologue, events, regions, leader-only
runs, every statement lowered by the core's handler) with them added:

- the statement being lowered (`Sm100Target.stmt`): whether an access loads
  from tensor memory and whether an update stores back depend on where the
  statement sits (lower_flow.py decides once over the IR); structured
  control flow resets the target's straight-line sync state;
- kernel entry and role exit: one warp allocates tensor memory before the
  block barrier that follows the mbarrier initialisation, and frees it when
  the MMA role ends;
- after an `apply` (or copy) that writes a bf16 A operand, its registers go
  to the operand's TMEM columns, where the next MMA reads it; `mma.store`
  uses lower_store.py (a thread's columns are a run of one row here).

The MMA futures' mbarriers and the TMEM address slot are appended to the
kernel's shared-memory plan first (Sm100Target.prepare).
"""
from __future__ import annotations

from choreo_py import ir
from choreo_py.diagnostics import ChoreoError

from ..core import analysis, control, events, roles
from ..core import kernel as core
from ..core.context import Lowering
from ..core.memory import Memory
from ..core.writer import Writer
from .lower_flow import writes
from .lower_store import mma_store
from .target import Sm100Target

ARCH = "sm_100a"


def lower_module(module: ir.Module, source_name: str) -> str:
    found = [(f, k) for f in module.functions for k in f.kernels]
    if not found:
        raise ChoreoError("the file has no kernel (no `parallel ... : block`) to compile")
    if len(found) > 1:
        raise ChoreoError(f"a file with several kernels is not lowered for {ARCH} yet",
                          found[1][1].loc)
    fn, kernel = found[0]
    for s in fn.body:
        if not isinstance(s, ir.Launch):
            raise ChoreoError(f"host code other than launching the kernel is not lowered for "
                              f"{ARCH} yet", getattr(s, "loc", fn.loc))
    return lower_kernel(kernel, fn, source_name)


def lower_kernel(k: ir.Kernel, fn: ir.Function, source_name: str) -> str:
    target = Sm100Target()
    k = target.prepare(k)
    w = Writer()
    lw = Lowering(k, target, w)
    lw.facts = analysis.analyse(k, target.arch)
    target.start(lw)
    if len(k.grid) > 3:
        raise lw.refuse("a block grid of more than 3 dimensions", k.loc)
    lw.enter_region()
    core._prologue(lw)
    lw.memory = Memory(lw)
    prefetch = w.mark()
    target.alloc_tmem(lw)
    events.init_events(lw)  # ends with the block barrier the allocation needs
    target.after_block_sync(lw)
    _region(lw, k.body, top=True)
    lw.leave_region()
    with w.into(prefetch):
        core._prefetch_tensor_maps(lw)
    return core._module(lw, fn, w.text(), source_name)


# ---------------------------------------------------------------- the statement walk

def _region(lw: Lowering, stmts: list, top: bool = False) -> None:
    lw.enter_region() if not top else None
    for i, s in enumerate(stmts):
        lw.next_statement()
        _stmt(lw, s, stmts, i)
    lw.leave_region() if not top else None


def _block(lw: Lowering, stmts: list) -> None:
    lw.target.sync.boundary()  # a loop head or branch: reached from elsewhere too
    i = 0
    while i < len(stmts):
        i = _stmt(lw, stmts[i], stmts, i)


def _stmt(lw: Lowering, s: ir.Stmt, stmts: list, i: int) -> int:
    if getattr(s, "leader_only", False):
        j = i
        while j < len(stmts) and getattr(stmts[j], "leader_only", False):
            j += 1
        if lw.role is None:
            raise lw.refuse("a leader-only statement outside a role", s.loc)
        rest = stmts[j:]
        roles.leader_block(lw, stmts[i:j], lambda t: _one(lw, t, last=not rest))
        return j
    if isinstance(s, ir.Parallel) and i + 1 < len(stmts):
        raise lw.refuse("a statement after a parallel region (joining its instances)",
                        getattr(stmts[i + 1], "loc", s.loc))
    _one(lw, s, last=i == len(stmts) - 1)
    return i + 1


def _one(lw: Lowering, s: ir.Stmt, last: bool) -> None:
    t: Sm100Target = lw.target
    lw.stmt_memo = {}
    if not isinstance(s, (ir.Parallel, ir.Role, ir.ViewDef)):
        lw.w.source(s.loc)
    handler = _HANDLERS.get(type(s)) or core._HANDLERS.get(type(s))
    if handler is None:
        raise lw.refuse(core._NAMES.get(type(s), type(s).__name__), getattr(s, "loc", None))
    outer, t.stmt = t.stmt, s
    _before(lw, s)
    handler(lw, s, last)
    _after(lw, s)
    t.stmt = outer


def _before(lw: Lowering, s: ir.Stmt) -> None:
    t: Sm100Target = lw.target
    if isinstance(s, ir.Wait):
        t.prepare_wait(lw, s)
    elif isinstance(s, ir.RoleSync):
        t.before_role_sync(lw)
    elif isinstance(s, ir.FragCopy) and t.uses_tmem:
        fi = lw.frags.get(s.dst)
        if fi is not None and fi.kind == "acc":
            raise lw.refuse(f"copy() into the accumulator '{s.dst}' (a tensor-memory tile)",
                            s.loc)


def _after(lw: Lowering, s: ir.Stmt) -> None:
    t: Sm100Target = lw.target
    if isinstance(s, ir.RoleSync):
        t.after_role_sync(lw)
        return
    if not t.in_mma_role(lw):
        return
    written = writes(s) if isinstance(s, ir.Apply) else \
        {s.dst} if isinstance(s, ir.FragCopy) else set()
    for name in sorted(written):
        fi = lw.frags.get(name)
        if fi is not None and fi.kind == "operand":
            lw.w.comment(f"{name} -> its tensor-memory columns (the A operand of an MMA)")
            t.store_operand(lw, name)


def _control(lower):
    def handler(lw: Lowering, s, last: bool) -> None:
        lw.target.sync.boundary()
        lower(lw, s, lambda body: _block(lw, body))
        lw.target.sync.boundary()  # after it: paths join
    return handler


def _parallel(lw: Lowering, s: ir.Parallel, last: bool) -> None:
    def role_region(body: list) -> None:
        lw.target.enter_role(lw)
        lw.enter_region()
        for i, t in enumerate(body):
            lw.next_statement()
            _stmt(lw, t, body, i)
        lw.next_statement()
        lw.target.leave_role(lw)  # in the role's region: its TMEM base register is known
        lw.leave_region()
    roles.parallel(lw, s, role_region, last)


_HANDLERS = {
    ir.For: _control(control.for_),
    ir.While: _control(control.while_),
    ir.If: _control(control.if_),
    ir.Parallel: _parallel,
    ir.MmaStore: lambda lw, s, last: mma_store(lw, s),
}
