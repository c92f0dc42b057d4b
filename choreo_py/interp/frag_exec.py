"""The fragment statements of a block's threads (a mixin of executor.BlockRun).

Declarations and fills, MMAs (run as futures when the program names one: the
operands are read when the scheduler completes it, not at issue), mma.store /
mma.load, apply, reductions and copies. Every access goes through `check_frag`,
so a register that an in-flight MMA still updates is reported as a race.
"""
from __future__ import annotations

from contextlib import nullcontext

import torch

from .. import ir
from .errors import InterpError, RaceError
from .fragments import (ApplyRun, FragState, all_reduce, apply_frags, copy, mma_product, reduce,
                        warp_product)
from . import sparse
from .scalars import round_to
from .scheduler import PREEMPT, Thread
from .sync import Future



def retire_observed(th: Thread) -> None:
    """Drops the MMAs whose completion the thread is ordered after without waiting them:
    published by `trigger e after f` and observed through an event (its clock holds the
    MMA's), they no longer race with the thread's own fragment accesses."""
    th.mma_inflight[:] = [f for f in th.mma_inflight
                          if not (f.done and th.clock.get(f.id, 0) >= f.clock[f.id])]

class LazyAcc:
    """`acc = mma.fill v` for an accumulator whose shape the first MMA will give."""

    def __init__(self, name: str, value) -> None:
        self.name, self.value = name, value


class FragmentStatements:
    """The statements on fragments; `BlockRun` supplies mem, sched, shared, k, owners, ev."""

    def elem(self, e: ir.Elem, env):
        if self.apply is None:
            return self._outside_apply(e.frag, e.index, env, None)
        return self.apply.load(e)

    def _outside_apply(self, name: str, index, env, value, loc=None):
        """One element of a fragment read (`value` None) or written outside `apply`: the
        fragment's logical element, as co-mock (which keeps each fragment whole) has it; a
        1-D fragment's copies of its owners all take a written value."""
        th = self.env_threads.get(id(env))
        if th is None:
            raise InterpError(f"element of fragment '{name}' read outside apply", loc)
        self.check_frag(th, name, value is not None, loc or th.loc)
        f = self.frag(th, name, loc or th.loc)
        at = tuple(self.ev.integer(i, env, loc) for i in index)
        if len(at) != f.rank or not all(0 <= i < n for i, n in zip(at, f.shape)):
            raise InterpError(f"index {list(at)} is out of bounds of fragment '{name}' "
                              f"{list(f.shape)}", loc or th.loc)
        where = at if f.rank == 2 else (slice(None), at[0])
        if value is None:
            v = f.data[where] if f.rank == 2 else f.data[0, at[0]]
            return float(v) if ir.is_float(f.dtype) else int(v)
        f.data = f.data.clone()
        f.data[where] = float(round_to(torch.as_tensor(float(value)), f.dtype))
        return None

    def reads_under(self, cond):
        """The element reads of an `apply` evaluated inside read only the points `cond`
        selects (an arm of a `?:`, the right side of `&&`/`||`: C evaluates it only there)."""
        return self.apply.reads_under(cond) if self.apply is not None else nullcontext()

    def frag(self, th: Thread, name: str, loc) -> FragState:
        f = th.frags.get(name)
        if not isinstance(f, FragState):
            state = "has no shape yet (no MMA used it)" if isinstance(f, LazyAcc) else "is not declared"
            raise InterpError(f"fragment '{name}' {state} in role {th.name}", loc)
        return f

    def check_frag(self, th: Thread, name: str, write: bool, loc, chain: bool = False) -> None:
        """A register an in-flight MMA updates (its accumulator) or reads (its A operand)."""
        if not chain:  # the block's fragments (shared_frags.py); an MMA records its own
            self.shared.access(th.frags.get(name), write, th, loc, "this statement")
        retire_observed(th)
        for f in th.mma_inflight:
            if (f.acc_name == name and not chain) or (write and f.a_name == name):
                role = "update" if f.acc_name == name else "read"
                raise RaceError(f"role {th.name} {'writes' if write else 'reads'} fragment "
                                f"'{name}' while {f.kind} '{f.var}' may still {role} it; "
                                f"wait '{f.var}' first", loc, [(f"{f.kind} '{f.var}' issued here", f.loc)])

    def s_frag_decl(self, s, th):
        f = s.frag
        st = th.frags[f.name] = FragState(f.name, f.dtype, f.shape, self.owners)
        if s.init is not None:
            st.fill(s.init.value)

    def s_mma_fill(self, s, th):
        self.check_frag(th, s.acc, True, s.loc)
        cur = th.frags.get(s.acc)
        decl = self.k.frag(s.acc)
        if isinstance(cur, FragState):
            cur.fill(s.value.value)
        elif decl is not None:
            st = th.frags[s.acc] = FragState(s.acc, decl.dtype, decl.shape, self.owners)
            st.fill(s.value.value)
        else:
            th.frags[s.acc] = LazyAcc(s.acc, s.value.value)

    def _acc(self, s: ir.Mma, th: Thread, a_shape, b_shape) -> FragState:
        """The accumulator; one filled before its shape was known takes it from the operands."""
        cur = th.frags.get(s.acc)
        if isinstance(cur, LazyAcc):
            ra, rb = s.layout.split(".")
            m = a_shape[0] if ra == "row" else a_shape[1]
            n = b_shape[0] if rb == "row" else b_shape[1]
            decl = self.k.frag(s.acc)
            st = th.frags[s.acc] = FragState(s.acc, decl.dtype if decl else "f32", (m, n), self.owners)
            st.fill(cur.value)
        return self.frag(th, s.acc, s.loc)

    def s_mma(self, s, th):
        a_frag = s.a if isinstance(s.a, str) else None
        a_box = None if a_frag else self.mem.resolve(s.a, th.env, self.ev, s.loc)
        b_box = self.mem.resolve(s.b, th.env, self.ev, s.loc)
        a_shape = self.frag(th, a_frag, s.loc).shape if a_frag else a_box.shape
        acc = self._acc(s, th, a_shape, b_box.shape)
        self.check_frag(th, s.acc, True, s.loc, chain=True)
        shared_a = a_frag is not None and getattr(th.frags.get(a_frag), "shared", False)
        if a_frag and not shared_a:  # a shared one (`: block`) is read when the MMA runs
            self.check_frag(th, a_frag, False, s.loc)
        what = f"mma.{s.layout} '{s.future}'" if s.future else f"mma.{s.layout}"

        meta = None
        if isinstance(s, ir.SparseMma):
            self.check_frag(th, s.meta, False, s.loc)
            meta = self.frag(th, s.meta, s.loc).data

        def action(agent):  # the MMA reads its operands when it runs, not at issue
            a = self.frag(th, a_frag, s.loc).data if a_frag else self.mem.read(a_box)
            if meta is not None:  # 2:4 sparse A: the dense matrix it packs
                a = sparse.expand(a, meta, s.loc)
            acc.set(acc.data + mma_product(s.layout, a, self.mem.read(b_box), acc, s.loc))

        agent = th
        if s.future is not None:
            agent = Future(s.future, "mma", s.loc, th, action, order_key=("mma", th.id))
        self.shared.access(acc, True, agent, s.loc, what, issuer=th)  # the block's fragments
        if shared_a:
            self.shared.access(th.frags[a_frag], False, agent, s.loc, what)
        for box in (a_box, b_box):
            if box is not None:
                self.mem.access(box, False, agent, s.loc, what)
        if s.future is None:
            action(th)
            return
        agent.acc_name, agent.a_name = s.acc, a_frag
        th.mma_inflight.append(agent)
        th.futures[s.future] = agent
        self.sched.issue(agent)
        yield PREEMPT

    def s_warp_mma(self, s, th):
        """One warp's MMA on register fragments (synchronous: the lanes wait for it)."""
        a, b = self.frag(th, s.a, s.loc), self.frag(th, s.b, s.loc)
        acc = self._acc(s, th, a.shape, b.shape)
        for name, write in ((s.a, False), (s.b, False), (s.acc, True)):
            self.check_frag(th, name, write, s.loc)
        acc.set(acc.data + warp_product(s.layout, a, b, acc, s.loc))

    def s_mma_store(self, s, th):
        acc = self.frag(th, s.acc, s.loc)
        self.check_frag(th, s.acc, False, s.loc)
        if acc.rank != 2:
            raise InterpError(f"mma.store of '{s.acc}', which is not a 2-D accumulator", s.loc)
        dst = self.mem.resolve(s.dst, th.env, self.ev, s.loc)
        self.mem.access(dst, True, th, s.loc, "mma.store")
        self.mem.write(dst, acc.data.T.contiguous() if s.transposed else acc.data, s.loc)

    def s_mma_load(self, s, th):
        self.check_frag(th, s.frag, True, s.loc)
        dst = self.frag(th, s.frag, s.loc)
        src = self.mem.resolve(s.src, th.env, self.ev, s.loc)
        self.mem.access(src, False, th, s.loc, "mma.load")
        dst.set(self.mem.read(src))

    def s_apply(self, s, th):
        if id(s) not in self.apply_cache:
            self.apply_cache[id(s)] = apply_frags(s)
        reads, writes = self.apply_cache[id(s)]
        for name in reads:
            self.check_frag(th, name, False, s.loc)
        for name in writes:
            self.check_frag(th, name, True, s.loc)
        run = ApplyRun(s, th.frags, self.owners, self.ev, th.env, (self.mem, th))
        self.apply = run
        try:
            run.run()
        finally:
            self.apply = None

    def s_reduce(self, s, th):
        self.check_frag(th, s.src, False, s.loc)
        self.check_frag(th, s.dst, True, s.loc)
        reduce(self.frag(th, s.dst, s.loc), self.frag(th, s.src, s.loc), s.kind, s.dim, s.loc)

    def s_all_reduce(self, s, th):
        self.check_frag(th, s.frag, True, s.loc)
        all_reduce(self.frag(th, s.frag, s.loc), s.kind, s.loc)

    def s_frag_copy(self, s, th):
        self.check_frag(th, s.src, False, s.loc)
        self.check_frag(th, s.dst, True, s.loc)
        copy(self.frag(th, s.dst, s.loc), self.frag(th, s.src, s.loc), s.loc)

    def s_elem_store(self, s, th):
        """`frag.at(i, j) = v;` outside `apply` (co-mock's fragments are whole arrays)."""
        self._outside_apply(s.frag, s.index, th.env, self.ev(s.value, th.env, s.loc), s.loc)
