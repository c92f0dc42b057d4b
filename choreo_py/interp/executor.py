"""Statement execution for the threads of one block.

Each thread runs `exec` as a generator. Statements that may block (waits,
joins, barriers, and the control flow around them) are generator handlers;
the others are plain functions. Asynchronous operations create `Future`s
whose `action` performs the data movement or the MMA when the scheduler
completes them, so a result lands strictly after its issue.

Collective copies: sema marks a copy that a role of several instances
performs together as `leader_only` and puts a `RoleSync` (a barrier among
the role's instances) before it; only the role's leader (its lowest
instance) executes such a copy. For IR without those (an older IR, before
`leader_only` existed), a `tma.copy` in a role of several instances is made
collective here: the instances meet, then the last to arrive performs the
distinct copies, as the reference compiler does with a named barrier.
"""
from __future__ import annotations

import dataclasses
from dataclasses import fields

import torch

from .. import ir
from .errors import FutureError, InterpError
from . import atomics, lanes, printing
from .frag_exec import FragmentStatements, retire_observed
from .grid import GridWait
from .memory import Box, Memory, _element_pos
from .scalars import Evaluator, round_to
from .scheduler import PREEMPT, Scheduler, Thread
from .shared_frags import SharedFrags, inherit
from .sync import (Barrier, BarrierWait, Binding, EventState, EventWait, Future, FutureWait,
                   JoinWait, NamedBarrierState, NamedBarrierWait)
from ..construct_names import describe


#: Whether the IR marks collective copies itself (`leader_only` + `RoleSync`).
IR_MARKS_COLLECTIVES = any(f.name == "leader_only" for f in fields(ir.TmaStore))


def _layout(s: ir.DmaCopy, dst: Box):
    """The data transform of `dma.transp` / `dma.pad`, checked against the destination."""
    def apply(data, loc):
        if s.transpose:
            data = data.permute(*s.transpose)
        if s.pad:
            low, high, value = s.pad
            out = torch.full(tuple(n + a + b for n, a, b in zip(data.shape, low, high)),
                             value.value, dtype=data.dtype)
            out[tuple(slice(a, a + n) for a, n in zip(low, data.shape))] = data
            data = out
        if tuple(data.shape) != tuple(dst.shape):
            raise InterpError(f"dma.{'transp' if s.transpose else 'pad'} gives "
                              f"{list(data.shape)} elements, the destination is {list(dst.shape)}",
                              loc)
        return data.contiguous()
    return apply


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class Yielded(Exception):
    """`yield`: the thread of control leaves the kernel."""


class BlockRun(FragmentStatements):
    def __init__(self, kernel: ir.Kernel, memory: Memory, events: dict[str, EventState],
                 sched: Scheduler, owners: int, instances: dict[int, int]) -> None:
        self.k, self.mem, self.events, self.sched = kernel, memory, events, sched
        self.owners = owners
        self.instances = instances  # id(Role or Parallel) -> instances per block
        self.ev = Evaluator(self)
        self.apply = None  # the fragments.ApplyRun in progress, if any
        self.barriers: dict = {}
        self.named_barriers: dict[int, NamedBarrierState] = {}
        self.collective: dict = {}  # leader_only copies: the first instance's boxes
        self.apply_cache: dict = {}
        self.shared = SharedFrags()  # fragments of the block, seen by its roles
        self.lane_bodies: dict[int, str | None] = {}  # id(Parallel) -> lanes.mode of its body
        self.partial_yield = None  # where some (not all) instances of a region yielded
        self.grid, self.grid_generation = None, 0  # a cooperative launch's barrier (grid.py)
        self.env_threads: dict = {}  # id(thread's env) -> thread (element race checks)
        # the handlers of this block's statements (GENERATORS / PLAIN below), bound
        self.gens = {t: fn.__get__(self) for t, fn in GENERATORS.items()}
        self.plain = {t: fn.__get__(self) for t, fn in PLAIN.items()}

    # ---------------------------------------------------------------- threads
    def start(self, env: dict) -> None:
        self.begin(env)
        self.sched.run()

    def begin(self, env: dict) -> None:
        """The block's thread, added to the scheduler (which may hold other blocks' too)."""
        th = Thread("block", None, dict(env), {})
        self.main = th  # its environment holds a host region's copies at the end (writes_back)
        self.launch(th, self.k.body)

    def s_grid_sync(self, s, th):
        b = self.grid.at(self.grid_generation, s.loc)
        self.grid_generation += 1
        b.arrive(th, None)
        yield from self.block_on(th, GridWait(b, s.loc))

    def launch(self, th: Thread, body: list[ir.Stmt]) -> None:
        self.env_threads[id(th.env)] = th  # buf_elem sees only the environment
        th.gen = self._main(th, body)
        self.sched.add(th)

    def _main(self, th: Thread, body):
        try:
            yield from self.exec(body, th)
        except Yielded:
            th.yielded = True
        if th.children:  # an instance ends when the roles it started end
            yield from self.block_on(th, JoinWait(th.children, th.loc))

    def block_on(self, th: Thread, cond):
        cond.check(f"role {th.name}")
        while not cond.ready():
            yield cond
        cond.acquire(th, f"role {th.name}")

    def exec(self, stmts: list[ir.Stmt], th: Thread):
        for s in stmts:
            if s.loc is not None:
                th.loc = s.loc
            self.sched.step(th.loc)
            g = self.gens.get(type(s))
            if g is not None:
                yield from g(s, th)
                continue
            h = self.plain.get(type(s))
            if h is None:
                what = REFUSED.get(type(s), describe(s))
                raise InterpError(f"the interpreter cannot run {what} in a kernel", s.loc)
            h(s, th)

    # ---------------------------------------------------------------- scalars and control
    def s_let(self, s, th):
        th.env[s.name] = self.ev(s.value, th.env, s.loc)

    def s_var(self, s, th):
        th.types[s.name] = s.dtype
        th.env[s.name] = round_to(self.ev(s.init, th.env, s.loc), s.dtype)

    def s_assign(self, s, th):
        if s.name not in th.env:
            raise InterpError(f"assignment to '{s.name}', which has no value here", s.loc)
        dtype = th.types.get(s.name, s.value.dtype)
        th.env[s.name] = round_to(self.ev(s.value, th.env, s.loc), dtype)

    def s_assert(self, s, th):
        """An assert of a region the host runs (sema/host_regions.py): false stops the run."""
        if not self.ev(s.cond, th.env, s.loc):
            raise InterpError(f"assertion failed: {s.message}", s.loc)

    def s_viewdef(self, s, th):
        th.env[s.name] = self.mem.resolve(s.view, th.env, self.ev, s.loc)

    def s_break(self, s, th):
        raise _Break

    def s_yield(self, s, th):
        raise Yielded

    def s_continue(self, s, th):
        raise _Continue

    def s_for(self, s, th):
        i = self.ev.integer(s.start, th.env, s.loc)
        stop = self.ev.integer(s.stop, th.env, s.loc)
        step = self.ev.integer(s.step, th.env, s.loc)
        if step == 0:
            raise InterpError("foreach with a zero step", s.loc)
        while i < stop if step > 0 else i > stop:
            th.env[s.var] = i
            try:
                yield from self.exec(s.body, th)
            except _Break:
                break
            except _Continue:
                pass
            i += step

    def s_while(self, s, th):
        while self._cond(s.cond, th, s.loc):
            try:
                yield from self.exec(s.body, th)
            except _Break:
                break
            except _Continue:
                pass

    def s_if(self, s, th):
        yield from self.exec(s.then if self._cond(s.cond, th, s.loc) else s.orelse, th)

    def _cond(self, e, th, loc) -> bool:
        v = self.ev(e, th.env, loc)
        if not isinstance(v, (bool, int, float)):
            raise InterpError("a condition outside apply must be a scalar", loc)
        return bool(v)

    # ---------------------------------------------------------------- parallel and roles
    def s_parallel(self, s, th):
        if self.partial_yield is not None:
            # The GPU runs it without the threads that left; instances here are not threads.
            raise InterpError("the interpreter cannot run a parallel region after a yield "
                              f"that only some instances took (at {self.partial_yield})", s.loc)
        if id(s) not in self.lane_bodies:
            self.lane_bodies[id(s)] = lanes.mode(s.body, private=self.mem.private)
        how = self.lane_bodies[id(s)]
        if how == "lanes":  # plain per-thread code: every instance at once
            self._yields(*lanes.LaneRun(self, s, th).run(), s.extent)
            return
        if how == "guarded":  # the same with barriers in loops; threads if it faults
            done = lanes.LaneRun(self, s, th, guarded=True).attempt()
            if done is not None:
                self._yields(*done, s.extent)
                return
        kids = []
        for p in range(s.extent):
            c = Thread(f"{s.var}={p}", th, dict(th.env, **{s.var: p}), dict(th.types))
            c.instance, c.frags = (s.var, p), inherit(self.k, th.frags)
            c.threads = s.threads or 1
            c.leader = p == 0
            c.group = (("parallel", id(s)), self.instances.get(id(s), s.extent))
            self.launch(c, s.body)
            kids.append(c)
        yield from self.block_on(th, JoinWait(kids, s.loc))
        gone = [k.loc for k in kids if getattr(k, "yielded", False)]
        self._yields(len(gone), gone[0] if gone else None, s.extent)

    def _yields(self, gone: int, where, extent: int) -> None:
        """After a region: when every instance yielded, so does the thread that ran it (the
        rest of the kernel is skipped); when some did, code common to the block may go on
        (the threads left run it), a later parallel region may not (see s_parallel)."""
        if gone and gone == extent:
            raise Yielded
        if gone:
            self.partial_yield = where

    def s_role(self, s, th):
        run = self._cond(s.cond, th, s.loc)
        if th.instance is not None and s.members and (th.instance[1] in s.members) != run:
            raise InterpError(f"role {s.name}: its condition and its members {list(s.members)} "
                              f"disagree for {th.instance[0]}={th.instance[1]}", s.loc)
        if not run:
            return
        if not s.is_async:
            yield from self.exec(s.body, th)
            return
        var, p = th.instance or ("", 0)
        name = s.name if s.name.isidentifier() else f"({s.name})"  # sema names roles by condition
        c = Thread(f"{name}[{var}={p}]", th, dict(th.env), dict(th.types))
        c.instance, c.frags = th.instance, inherit(self.k, th.frags)
        c.threads = th.threads
        c.leader = p == (min(s.members) if s.members else 0)
        c.group = (("role", id(s)), self.instances.get(id(s), 1))
        self.launch(c, s.body)
        th.children.append(c)

    def s_sync(self, s, th):
        """`sync.shared` / `RoleSync`: a barrier among the instances of the role (or parallel)."""
        yield from self._barrier(s, th, None)

    def _barrier(self, s, th, item):
        key, n = th.group
        occ = th.occurrences[id(s)] = th.occurrences.get(id(s), 0) + 1
        bar = self.barriers.setdefault((key, id(s), occ), Barrier(n, s.loc))
        bar.arrive(th, item)
        last = len(bar.arrived) == bar.expected
        yield from self.block_on(th, BarrierWait(bar, s.loc))
        return bar if last else None

    def s_named_barrier(self, s, th):
        """`__bar_sync` / `__bar_arrive`: the instance's threads arrive on barrier `id`."""
        bid = self.ev.integer(s.barrier, th.env, s.loc)
        if not 0 <= bid <= 15:
            raise InterpError(f"named barrier id {bid}: the hardware has named barriers 0..15",
                              s.loc)
        bar = self.named_barriers.setdefault(bid, NamedBarrierState(bid))
        gen = bar.arrive(th.threads, s.count, th.release(), s.loc, f"role {th.name}")
        if s.op == "sync":
            yield from self.block_on(th, NamedBarrierWait(bar, gen, s.loc))
        else:
            yield PREEMPT

    # ---------------------------------------------------------------- events and futures
    def event(self, name: str, loc) -> EventState:
        ev = self.events.get(name)
        if ev is None:
            raise InterpError(f"'{name}' is not an event of this kernel", loc)
        return ev

    def _slot(self, ev: EventState, ref: ir.EventRef, th: Thread, loc):
        """(slot, generation or None) of a reference; None: a plain (path-counted) reference."""
        if ref.order is not None:
            o = self.ev.integer(ref.order, th.env, loc)
            if o < 0:
                raise InterpError(f"negative event order {o}", loc)
            return o % ev.n, o // ev.n
        if ref.index is not None:
            slot = self.ev.integer(ref.index, th.env, loc)
            if not 0 <= slot < ev.n:
                raise InterpError(f"slot {slot} of event '{ev.name}' is out of range [0, {ev.n})", loc)
            return slot, None
        if ev.array:
            raise InterpError(f"'{ev.name}' is an array of {ev.n} events; use [slot] or .at(order)", loc)
        return 0, None

    def s_wait(self, s, th):
        for item in s.items:
            if isinstance(item, ir.EventRef):
                ev = self.event(item.event, s.loc)
                slot, gen = self._slot(ev, item, th, s.loc)
                plain = gen is None
                if plain:  # each path counts its own generations of a plain event
                    gen = th.implicit.get((ev.name, slot), 0)
                yield from self.block_on(th, EventWait(ev, slot, gen, s.loc))
                if plain:
                    th.implicit[(ev.name, slot)] = gen + 1
            else:
                fut = self._take_future(item.future, th, s.loc, "waited")
                yield from self.block_on(th, FutureWait(fut, s.loc))
                if fut in th.mma_inflight:  # waiting a wgmma group retires the earlier ones
                    del th.mma_inflight[: th.mma_inflight.index(fut) + 1]

    def _take_future(self, name: str, th: Thread, loc, how: str) -> Future:
        fut = th.futures.get(name)
        if fut is None:
            raise FutureError(f"future '{name}' has not been issued on this path", loc)
        if fut.consumed:
            raise FutureError(f"future '{name}' is {how} twice: this dynamic instance was already "
                              f"{fut.consumed_how}", loc, [("the first use", fut.consumed_at)])
        fut.consumed, fut.consumed_at, fut.consumed_how = True, loc, how
        return fut

    def s_trigger(self, s, th):
        ev = self.event(s.event.event, s.loc)
        slot, gen = self._slot(ev, s.event, th, s.loc)
        phase = None if gen is None else ev.trigger_phase(gen)
        who = f"role {th.name}"
        if not s.after:
            ev.arrive(slot, phase, th.release(), s.loc, who)
        else:
            futs = []
            for name in s.after:
                f = th.futures.get(name)
                if f is not None and f.kind == "mma":
                    futs += self._committed(f, th)
                    continue
                futs.append(self._take_future(name, th, s.loc, "bound to an event"))
            b = Binding(ev, slot, phase, futs, s.loc, who)
            for f in futs:
                if f.done:
                    b.future_done(f)
                else:
                    f.bindings.append(b)
        yield PREEMPT

    @staticmethod
    def _committed(fut, th) -> list:
        """`trigger e after qk`: the slot completes once qk and every MMA this thread issued
        before it have (a tcgen05.commit tracks them all). Not a consumption: an MMA future
        may complete several events, and be waited too."""
        retire_observed(th)
        if fut not in th.mma_inflight:  # waited already: only its own completion is left
            return [fut]
        return th.mma_inflight[: th.mma_inflight.index(fut) + 1]

    # ---------------------------------------------------------------- data movement
    def s_copy(self, s, th):
        src = self.mem.resolve(s.src, th.env, self.ev, s.loc)
        dst = self.mem.resolve(s.dst, th.env, self.ev, s.loc)
        layout = _layout(s, dst) if getattr(s, "transpose", None) or getattr(s, "pad", None) \
            else None
        whole = None
        if src.shape != dst.shape and layout is None:
            full = dst
            _, src, dst = self._corner(s, src, dst)
            if dst is not full:  # a smaller tile: the rest of the destination is zero-filled
                whole = full
        if getattr(s, "leader_only", False):
            self._same_boxes(s, th, (src, dst))
            if not th.leader:
                return
        kind = "tma.load" if isinstance(s, ir.TmaLoad) else "dma.copy"
        yield from self._transfer(s, th, src, dst, kind, zfill=whole, layout=layout)

    def _corner(self, s, src: Box, dst: Box) -> Box:
        """A DMA of a smaller box fills the leading corner of its destination; into a
        destination whose extent is known only at run time and is smaller (a view of `X`
        rows, X computed), it moves the destination's shape from the source's corner."""
        fits = len(src.shape) == len(dst.shape) and all(
            a <= b for a, b in zip(src.shape, dst.shape))
        shrinks = len(src.shape) == len(dst.shape) and all(
            a >= b for a, b in zip(src.shape, dst.shape))
        if isinstance(s, ir.DmaCopy) and shrinks and not fits:
            sizes, it = list(src.sizes), iter(dst.shape)
            for d, k in enumerate(src.keep):
                if k:
                    sizes[d] = next(it)
            return src, Box(src.base, src.slot, src.starts, tuple(sizes), src.keep), dst
        if not isinstance(s, ir.DmaCopy) or not fits:
            what = "dma.copy" if isinstance(s, ir.DmaCopy) else "copy"
            raise InterpError(f"{what} of {list(src.shape)} elements ({src}) into "
                              f"{list(dst.shape)} ({dst})", s.loc)
        sizes, it = list(dst.sizes), iter(src.shape)
        for d, k in enumerate(dst.keep):
            if k:
                sizes[d] = next(it)
        return src, src, Box(dst.base, dst.slot, dst.starts, tuple(sizes), dst.keep)

    def _transfer(self, s, th, src: Box, dst: Box, kind: str, zfill: Box | None = None,
                  layout=None):
        """A copy: at once without a future, else when the scheduler completes it.
        `zfill`: the whole destination, zeroed first (cp.async's zero fill of a DMA whose
        tile is smaller than its destination)."""
        what = f"{kind} '{s.future}'" if s.future else kind

        def action(agent):
            self.mem.access(src, False, agent, s.loc, what)
            data = self.mem.read(src, as_float=False)
            if layout is not None:  # dma.transp / dma.pad: the tile as the destination has it
                data = layout(data, s.loc)
            if zfill is not None:
                self.mem.access(zfill, True, agent, s.loc, what)
                self.mem.write(zfill, torch.zeros(tuple(zfill.shape), dtype=data.dtype), s.loc)
            self.mem.access(dst, True, agent, s.loc, what)
            self.mem.write(dst, data, s.loc)

        if s.future is None:
            action(th)
            return
        fut = Future(s.future, kind, s.loc, th, action)
        th.futures[s.future] = fut
        self.sched.issue(fut)
        yield PREEMPT

    def s_tma_store(self, s, th):
        src = self.mem.resolve(s.src, th.env, self.ev, s.loc)
        dst = self.mem.resolve(s.dst, th.env, self.ev, s.loc)
        if src.shape != dst.shape:
            raise InterpError(f"tma.copy of {list(src.shape)} ({src}) into {list(dst.shape)} ({dst})",
                              s.loc)
        if getattr(s, "rows", None) is not None:  # `.rows<n>`: the box's first n rows
            n = self.ev.integer(s.rows, th.env, s.loc)
            src, dst = _first_rows(src, n), _first_rows(dst, n)
        if getattr(s, "future", None):  # asynchronous: done once its future completes
            yield from self._transfer(s, th, src, dst, "tma.copy")
            return
        if getattr(s, "leader_only", False):
            self._same_boxes(s, th, (src, dst))
            if th.leader:
                self._store(src, dst, th, s.loc)
            return
        key, n = th.group
        if IR_MARKS_COLLECTIVES or key is None or key[0] != "role" or n == 1:
            self._store(src, dst, th, s.loc)
            return
        bar = yield from self._barrier(s, th, (src, dst))
        if bar is not None:  # the last instance to arrive issues the role's copies
            for a, b in dict.fromkeys(bar.items):
                self._store(a, b, th, s.loc)

    def _same_boxes(self, s, th: Thread, boxes: tuple) -> None:
        """A `leader_only` copy stands for every instance's copy only if they all agree."""
        occ = th.occurrences[("copy", id(s))] = th.occurrences.get(("copy", id(s)), 0) + 1
        first = self.collective.setdefault((th.group[0], id(s), occ), (th.name, boxes))
        if first[1] != boxes:
            raise InterpError(f"a copy issued once for the whole role (by its leader) has "
                              f"instance-dependent boxes: {first[0]} copies {first[1][0]} => "
                              f"{first[1][1]}, {th.name} copies {boxes[0]} => {boxes[1]}; only "
                              f"the leader's copy would happen", s.loc)

    def _store(self, src: Box, dst: Box, th: Thread, loc) -> None:
        if 0 in src.shape:  # (`.rows<n>` with n <= 0: nothing is written)
            return
        self.mem.access(src, False, th, loc, "tma.copy")
        self.mem.access(dst, True, th, loc, "tma.copy")
        self.mem.write(dst, self.mem.read(src, as_float=False), loc)

    # ---------------------------------------------------------------- buffers in per-thread code
    def buf_elem(self, e, env):
        if self.apply is not None and self.apply.buffers is not None \
                and self.k.param(self.k.root(e.view.base)) is None:
            return self.apply.buf_load(e)  # a shared row vector's element, all rows at once
        box = self.mem.resolve(e.view, env, self.ev, e.loc)
        vals = [self.ev(i, env, e.loc) for i in e.index]
        mask = self.apply.read_mask if self.apply is not None else None
        if any(isinstance(v, torch.Tensor) for v in vals):  # inside an apply: a gather
            return self.mem.gather(box, vals, e.loc, mask)
        if mask is not None and not bool(torch.as_tensor(mask).any()):
            return 0  # one element, under a condition no point of the apply takes: not read
        idx = tuple(self.ev.integer(i, env, e.loc) for i in e.index)
        value, pos = self.mem.element(box, idx, e.loc)
        th = self.env_threads.get(id(env))
        if th is not None:
            self.mem.element_access(box, pos, False, th, th.loc)
        return value

    def s_buf_store(self, s, th):
        box = self.mem.resolve(s.view, th.env, self.ev, s.loc)
        idx = tuple(self.ev.integer(i, th.env, s.loc) for i in s.index)
        value = self.ev(s.value, th.env, s.loc)
        if s.atomic:  # one thread runs at a time here: update in place
            cmp = self.ev(s.compare, th.env, s.loc) if s.compare is not None else None
            old = self.mem.element(box, idx, s.loc)[0]
            value = atomics.combine(s.atomic, old, value, cmp, s.value.dtype)  # sema typed it
            if s.result is not None:
                th.env[s.result] = atomics.c_value(old, s.value.dtype)
        if not s.atomic:  # atomics do not race with each other
            self.mem.element_access(box, _element_pos(box, idx, s.loc), True, th, s.loc)
        self.mem.set_element(box, idx, value, s.loc)


def _no_op(self, s, th) -> None:
    """`setmaxnreg`: a register budget; nothing to model on the CPU. A fence: one thread
    runs at a time here, and its writes are seen in program order. A warp barrier
    (`sync.warp`): the interpreter has no warps, so it orders nothing here (an access of
    another thread ordered only by it is reported as a race: stricter than the GPU)."""


#: Statements that may block (generators: they yield while they wait).
GENERATORS = {
    ir.For: BlockRun.s_for, ir.While: BlockRun.s_while, ir.If: BlockRun.s_if,
    ir.Parallel: BlockRun.s_parallel, ir.Role: BlockRun.s_role, ir.Wait: BlockRun.s_wait,
    ir.Trigger: BlockRun.s_trigger, ir.TmaLoad: BlockRun.s_copy, ir.DmaCopy: BlockRun.s_copy,
    ir.TmaStore: BlockRun.s_tma_store, ir.Mma: BlockRun.s_mma, ir.SparseMma: BlockRun.s_mma,
    ir.SyncShared: BlockRun.s_sync,
    ir.NamedBarrier: BlockRun.s_named_barrier, ir.RoleSync: BlockRun.s_sync,
    ir.GridSync: BlockRun.s_grid_sync,
}
#: Statements that run to completion at once.
PLAIN = {
    ir.Let: BlockRun.s_let, ir.Var: BlockRun.s_var, ir.Assign: BlockRun.s_assign,
    ir.ViewDef: BlockRun.s_viewdef, ir.Break: BlockRun.s_break, ir.Continue: BlockRun.s_continue,
    ir.SetMaxRegs: _no_op, ir.SyncWarp: _no_op, ir.Fence: _no_op, ir.Yield: BlockRun.s_yield, ir.FragDecl: BlockRun.s_frag_decl, ir.MmaFill: BlockRun.s_mma_fill,
    ir.MmaStore: BlockRun.s_mma_store, ir.Apply: BlockRun.s_apply, ir.MmaLoad: BlockRun.s_mma_load,
    ir.WarpMma: BlockRun.s_warp_mma,
    ir.Reduce: BlockRun.s_reduce, ir.AllReduce: BlockRun.s_all_reduce,
    ir.FragCopy: BlockRun.s_frag_copy, ir.ElemStore: BlockRun.s_elem_store,
    ir.BufStore: BlockRun.s_buf_store, ir.Print: printing.print_line,
    ir.Assert: BlockRun.s_assert,  # (only the host's regions hold one: ir/verify.py)
}
#: Statements a kernel body never holds (interpret_module runs a function's launches).
REFUSED = {ir.Launch: "a launch", ir.HostCall: "a call of a __co__ function (host code only)",
           ir.Asm: "inline asm (PTX: `choreo emulate` and the GPU run it)"}


def _first_rows(box: Box, n: int) -> Box:
    """`box` cut to the first n (clamped to [0, size]) positions of its first kept dimension:
    the part of a tile a `tma.copy.rows<n>` writes (or reads)."""
    d = box.keep.index(True)
    sizes = list(box.sizes)
    sizes[d] = max(0, min(n, sizes[d]))
    return dataclasses.replace(box, sizes=tuple(sizes))
