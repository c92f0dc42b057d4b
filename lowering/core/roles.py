"""Parallel regions, roles (`inthreads.async`) and who issues what.

`parallel p by [n] : group-4` runs n warpgroups; p = tid / 128. Each role is
one branch taken by its instances (members), and the instances that run it
leave the kernel at its end, so no join is needed when nothing follows the
region:

    @!(p in members) bra skip_role
    setmaxnreg ...            (first, by every thread of the warpgroup)
    [issue-only role: @(local tid != 0) bra role_exit]
    ... role body ...
  role_exit: ret
  skip_role:

Asynchronous copies and event arrivals are operations of a role instance,
not of each thread: in an issue-only role the single remaining thread
issues them; in other roles thread 0 of the instance does, predicated.
A region that something follows, or that sits in a loop or branch, joins
instead: each role ends with a jump to the join, where every thread of the
block meets (`bar.sync 0`) before the code after it (a loop's next
iteration, a store of what the roles wrote). Refused where the threads could
not all meet there: roles that change their register counts, accumulators in
tensor memory (sm_100a frees it as its roles end).

`leader_only` statements (after `role.sync`) are issued once for the whole
role by its first thread, after a named barrier over the role's threads and
`fence.proxy.async.shared::cta` (thread-written shared memory becomes
visible to the TMA engine). A synchronous `tma.load` is armed, issued and
waited on its own mbarrier slot by the threads that run it (for a leader-only
one, the role's threads after the leader's block, where they have converged).
"""
from __future__ import annotations

from choreo_py import ir

from . import analysis, events, tma_align, tma_fallback
from .context import Lowering, RoleCtx
from .exprs import ExprLowering
from .writer import V

_LEVEL_THREADS = {"group-4": 128, "group": 32, "thread": 1}


def parallel(lw: Lowering, s: ir.Parallel, region, last: bool) -> None:
    w = lw.w
    if lw.role is not None:
        raise lw.refuse("a parallel region inside another one", s.loc)
    join = _join(lw, s) if (not last or lw.depth or lw.loops) else None
    threads = s.threads or _LEVEL_THREADS.get(s.level, 0)
    if threads <= 0 or threads & (threads - 1):
        raise lw.refuse(f"parallel instances of {threads} threads", s.loc)
    shift = threads.bit_length() - 1
    inst = w.reg("u32", s.var)
    w.op("shr.u32", inst, lw.tid, shift)
    if threads >= 32 and lw.target.uniform_instance_index:
        # The same in every lane of a warp: said through a shuffle from lane 0, ptxas knows
        # it too (Target.uniform_instance_index).
        w.op("shfl.sync.idx.b32", inst, inst, 0, 31, -1)
    local = w.reg("u32", f"{s.var}_tid")
    w.op("and.b32", local, lw.tid, threads - 1)
    lw.bind(s.var, inst, nonneg=True, uniform=threads >= 32)  # a warp is in one instance
    lw.parallel_extent = s.extent
    roles = [t for t in s.body if isinstance(t, ir.Role)]
    shared = [t for t in s.body if not isinstance(t, ir.Role)]
    if roles and shared:
        other = next((t for t in shared if not _scalar_let(t)), None)
        if other is not None:
            raise lw.refuse("a statement of a parallel region outside its inthreads roles",
                            getattr(other, "loc", s.loc))
        # Names every thread computes alike (of the instance, the block, the arguments):
        # computed once before the roles branch, and the roles read them.
        region(shared)
    if not roles:
        roles = [ir.Role("all", ir.Const(True, "bool"), tuple(range(s.extent)), s.body,
                         loc=s.loc)]
    for r in roles:
        role(lw, r, inst, local, threads, s.extent, region, join)
    if join is not None:
        w.put_label(join)
        w.comment("the roles' threads meet: what follows the region sees their work (their "
                  "shared-memory writes fenced for the TMA engine that may read them next)")
        w.call("ptx.fence.proxy_async_shared_cta")
        w.call("ptx.bar.sync", "0")
        return
    lw.target.after_roles(lw)  # e.g. the roles meet to free what they shared


def _scalar_let(s) -> bool:
    """A scalar name the roles may read, computed from no memory (so it may move ahead of
    roles that write memory)."""
    return isinstance(s, ir.Let) and not any(
        isinstance(e, (ir.Elem, ir.BufElem)) for e in ir.expr_walk(s.value))


def _join(lw: Lowering, s: ir.Parallel) -> str:
    """The label where a region's roles meet (see the module docstring), or a refusal."""
    if not lw.target.roles_may_join(lw):
        # the roles free tensor memory as they end (sm_100a): a loop would find it gone
        raise lw.refuse("a parallel region that joins (code after it, or a loop or branch "
                        "around it) in a kernel with tensor-memory accumulators", s.loc)
    if any(isinstance(t, ir.SetMaxRegs) for t in ir.walk(s.body)):
        raise lw.refuse("a parallel region that joins (code after it, or a loop or branch "
                        "around it) whose roles set their register counts", s.loc)
    return lw.w.label(f"{s.var}_join")


def role(lw: Lowering, r: ir.Role, inst: V, local: V, threads: int, extent: int, region,
         join=None) -> None:
    w = lw.w
    w.blank()
    w.source(r.loc)
    skip = w.label("skip_role")
    exit_ = w.label("role_exit")
    members = sorted(r.members)
    if members != list(range(extent)):
        inside = member_pred(lw, inst, members, extent)
        w.bra(skip, inside, negate=True, uni=threads >= 32)
    single = threads > 1 and analysis.issue_only(r, lw.target.issue_only_also(lw))
    lw.role = RoleCtx(tuple(members), threads, inst, local, single, exit_label=exit_)
    lw.plain_waits = {}
    lw.smem_dirty = lw.smem_read = False
    body = list(r.body)
    while body and isinstance(body[0], ir.SetMaxRegs):  # every thread of the warpgroup
        setmaxnreg(lw, body.pop(0))
    events.plain_phases(lw, body)
    if single:
        w.comment("issue-only role: one thread per instance issues its copies and events")
        rest = w.reg("pred", "not_issuer")
        w.op("setp.ne.u32", rest, local, 0)
        w.bra(exit_, rest)
    region(body)
    w.put_label(exit_)
    if join is not None:
        w.bra(join)
    elif not lw.target.role_exit(lw):
        w.call("ptx.ret")
    w.put_label(skip)
    lw.role = None


def member_pred(lw: Lowering, inst: V, members: list[int], extent: int) -> V:
    w = lw.w
    p = w.reg("pred", "in_role")
    lo, hi = members[0], members[-1]
    if members == list(range(lo, hi + 1)):
        if lo == hi:
            w.op("setp.eq.u32", p, inst, lo)
        elif hi == extent - 1:
            w.op("setp.ge.u32", p, inst, lo)
        elif lo == 0:
            w.op("setp.le.u32", p, inst, hi)
        else:
            q = w.reg("pred", "in_role_hi")
            w.op("setp.ge.u32", p, inst, lo)
            w.op("setp.le.u32", q, inst, hi)
            w.op("and.pred", p, p, q)
        return p
    w.op("setp.eq.u32", p, inst, members[0])
    for m in members[1:]:
        q = w.reg("pred", "is_member")
        w.op("setp.eq.u32", q, inst, m)
        w.op("or.pred", p, p, q)
    return p


def setmaxnreg(lw: Lowering, s: ir.SetMaxRegs) -> None:
    lw.w.source(s.loc)
    if s.count % 8 or not 24 <= s.count <= 256:
        raise lw.refuse(f"setmaxnreg {s.count} (a multiple of 8 in [24, 256])", s.loc)
    lw.w.call("ptx.setmaxnreg", str(s.count), f"inc={s.increase}")


def role_sync(lw: Lowering, s: ir.RoleSync) -> None:
    role = lw.role
    if role is None:
        lw.w.call("ptx.bar.sync", "0")
        return
    n = role.threads * len(role.members)
    if role.single_thread:
        raise lw.refuse("role.sync in an issue-only role", s.loc)
    lw.w.comment("thread-written shared memory -> visible to the async (TMA) proxy")
    lw.w.call("ptx.fence.proxy_async_shared_cta")
    if len(role.members) == lw.parallel_extent:
        lw.w.call("ptx.bar.sync", "0")
    else:
        bid = role_barrier(lw)
        lw.w.call("ptx.bar.sync", str(bid), str(n))
    lw.smem_dirty = lw.smem_read = False


def named_barrier(lw: Lowering, s: ir.NamedBarrier) -> None:
    """`__bar_sync/arrive(id, count)`: every thread of the instance arrives on barrier `id`."""
    # A role holding one is never issue-only (analysis.issue_only), so every thread arrives.
    if lw.role is None:
        raise lw.refuse(f"__bar_{s.op} outside an 'inthreads.async' role", s.loc)
    if isinstance(s.barrier, ir.Const) and s.barrier.value == 0:
        raise lw.refuse(f"__bar_{s.op} on barrier 0 (the whole-block barrier of this backend's "
                        "own code)", s.loc)
    bid = ExprLowering(lw, s.loc).value(s.barrier, "bar_id")
    lw.w.op(f"bar.{s.op}", bid, V.imm(s.count, "u32"))


def role_barrier(lw: Lowering) -> int:
    """One named barrier id per role (by its members)."""
    if lw.role.members not in lw.role_barriers:
        lw.role_barriers[lw.role.members] = lw.new_barrier_id()
    return lw.role_barriers[lw.role.members]


def leader_block(lw: Lowering, stmts: list, lower_one) -> None:
    """Statements issued once for the whole role."""
    w = lw.w
    skip = w.label("leader_done")
    w.bra(skip, lw.role_leader(), negate=True)
    saved = lw.role
    lw.role = RoleCtx(saved.members, saved.threads, saved.instance, saved.local_tid, True,
                      exit_label=saved.exit_label)
    lw.leader_waits = []
    with lw.skippable():
        for s in stmts:
            lower_one(s)
    lw.role = saved
    w.put_label(skip)
    # The role's threads, converged again, wait for the tiles the leader's synchronous
    # loads bring (the wgmma that reads them next is warp-aligned).
    waits, lw.leader_waits = lw.leader_waits, None
    for wait in waits:
        wait()


def tma_load(lw: Lowering, s: ir.TmaLoad) -> None:
    group = lw.facts.tma_groups.get(id(s))
    if group is None and s.future is None and id(s) in lw.facts.sync_loads:
        events.sync_load(lw, s, lw.facts.sync_loads[id(s)])
        return
    if group is None:
        what = "a synchronous tma.load" if s.future is None else \
            f"tma.load '{s.future}' that no 'trigger ... after {s.future}' publishes"
        raise lw.refuse(what, s.loc)
    pred = lw.issuer()
    if s is group.loads[0]:
        lw.instance_sync_if_dirty()
        lw.armed[id(group)] = events.arm(lw, group, s.loc, pred)
    if tma_fallback.applies(lw, s.src.base):
        tma_fallback.load(lw, s, lw.armed[id(group)], pred)
    else:
        lw.memory.tma_load(s, lw.armed[id(group)], pred)


def role_wide(lw: Lowering, s: ir.Stmt) -> bool:
    """Whether the leader-only statement `s` is lowered by all the role's threads instead:
    a `tma.copy.rows<n>` store (partly the threads' stores) of a role whose instances'
    threads are consecutive."""
    role = lw.role
    if not isinstance(s, ir.TmaStore) or s.rows is None or role is None \
            or role.single_thread or role.threads == 1:
        return False
    return tuple(role.members) == tuple(range(role.members[0],
                                              role.members[0] + len(role.members)))


def role_wide_store(lw: Lowering, s: ir.TmaStore, last: bool) -> None:
    """A leader-only `tma.copy.rows<n>` by every thread of the role: the role's first
    thread issues the TMA store of a whole box, all of them share the stores of a part
    (a thread's rank in the role, the role's thread count apart). The role's threads met
    before it and meet after it (sema's RoleSync around a collective copy)."""
    role, w = lw.role, lw.w
    rank = w.reg("u32", "role_rank")
    w.op("sub.u32", rank, lw.tid, role.members[0] * role.threads)
    if lw.loops:
        last = False
    _store_rows(lw, s, lw.role_leader(), last, (rank, role.threads * len(role.members)))


def _store_rows(lw: Lowering, s: ir.TmaStore, pred, last: bool, workers=None) -> None:
    """`tma.copy.rows<n>`: the TMA store where n covers the box (its one thread), else the
    threads' stores of the first n rows (the TMA can not stop at a run-time row). n is
    the same for every thread of the role, so all of them take one side."""
    from .exprs import ExprLowering

    if tma_fallback.applies(lw, s.dst.base):  # (no TMA for this tensor: the threads always)
        tma_fallback.store(lw, s, last, workers)
        return
    w = lw.w
    box = next(e for e, k in zip(s.dst.extents, s.dst.keep) if k)  # the rows n counts
    if not isinstance(box, ir.Const):
        raise lw.refuse("a copy whose box size is not a compile-time constant", s.loc)
    part = w.reg("pred", "part_tile")
    w.op("setp.lt.s32", part, ExprLowering(lw, s.loc).value(s.rows, "rows"), box.value)
    esize = ir.dtype_bytes(lw.k.param(s.dst.base).dtype)
    aligned = tma_align.check(lw, s.dst.offsets[-1], esize, s.loc)
    if not aligned:  # a box off the 16-byte grid (PTX ISA 5.5.3.1): the threads store it
        inner = ExprLowering(lw, s.loc).value(s.dst.offsets[-1], "coord")
        low, off = w.reg("u32", "coord_low"), w.reg("pred", "off_grid")
        w.op("and.b32", low, inner, 16 // esize - 1)
        w.op("setp.ne.u32", off, low, 0)
        w.op("or.pred", part, part, off)
    by_threads, done = w.label("rows_threads"), w.label("rows_done")
    w.bra(by_threads, part, uni=True)
    lw.memory.tma_store(s, pred, last, aligned_at_run_time=not aligned)
    w.bra(done, uni=True)
    w.put_label(by_threads)
    tma_fallback.store(lw, s, last, workers)
    w.put_label(done)


def tma_store(lw: Lowering, s: ir.TmaStore, last: bool) -> None:
    if lw.loops:
        # The last statement of a loop body is followed by the next iteration: its threads
        # may write the tile again (the store must have read it first: one thread waits,
        # then the instance's threads meet), and its element reads of the tensor must see
        # this store (global_reads.py: waited for in full first)
        last = False
    pred = lw.issuer()
    lw.instance_sync_if_dirty()
    if s.rows is not None:
        _store_rows(lw, s, pred, last)
    elif tma_fallback.applies(lw, s.dst.base):
        tma_fallback.store(lw, s, last)
    else:
        lw.memory.tma_store(s, pred, last)
    if not last and lw.role is not None and not lw.role.single_thread:
        # one thread waited for the copy to read the tile: the others may write it after
        lw.w.comment("the store has read the tile: every thread may write it again")
        lw.instance_barrier()
