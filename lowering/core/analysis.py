"""Facts about a kernel that its lowering needs before emitting code.

- MMA futures in flight: `wait f` on an MMA future waits until at most N
  groups are outstanding, N = the groups issued after f that the program
  lets stay in flight (QK[current] waited while PV[previous] runs: N = 1).
  Found by walking the structured code with the ordered list of
  outstanding futures; loops iterate to a fixed point, and where paths
  disagree the list is unknown and the next wait drains everything (0).
- Fill folding: `acc = mma.fill 0` directly followed (in the same block,
  nothing else touching acc) by an MMA into acc costs nothing: the MMA's
  first k-step overwrites instead of accumulating.
- TMA futures: `trigger e after f, g` publishes loads f, g on event e. The
  loads must precede it in the same block; the event is armed with the
  loads' byte count before the first of them.
- MMA commits: `trigger e after qk` (qk an MMA future) is a tcgen05.commit of
  the issuing thread to e's mbarrier (`Facts.commits`); targets without
  mbarrier-completed MMAs refuse it by name.
- Event arrival counts: `Event.arrivals`, decided by passes/event_arrivals.
- Issue-only roles: a role whose body only moves data and synchronises
  (TMA loads and stores, events, scalar code) runs on one thread per
  instance; the other threads of its warpgroup leave at once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from choreo_py import ir, targets
from choreo_py.diagnostics import ChoreoError, InternalError
from choreo_py.ir.sync_slots import SYNC_EVENT, sync_loads

from .context import children

_ISSUE_ONLY = (ir.Let, ir.Var, ir.Assign, ir.ViewDef, ir.For, ir.While, ir.If, ir.Break,
               ir.Continue, ir.SetMaxRegs, ir.TmaLoad, ir.TmaStore, ir.Trigger, ir.Wait)


@dataclass
class TmaGroup:
    trigger: ir.Trigger
    loads: list  # the TmaLoad statements it publishes, in program order
    nbytes: int


@dataclass
class Facts:
    wait_groups: dict = field(default_factory=dict)  # id(Wait) -> {future: N or None}
    folded_fills: set = field(default_factory=set)  # id(MmaFill)
    zero_first: set = field(default_factory=set)  # id(Mma)
    tma_groups: dict = field(default_factory=dict)  # id(TmaLoad) -> TmaGroup
    published: set = field(default_factory=set)  # id(Trigger) whose work the loads do
    arrivals: dict = field(default_factory=dict)  # event -> count
    mma_futures: set = field(default_factory=set)
    commits: set = field(default_factory=set)  # id(Trigger) after MMA futures (tcgen05.commit)
    sync_loads: dict = field(default_factory=dict)  # id(synchronous TmaLoad) -> __tma_sync slot


def analyse(kernel: ir.Kernel, target: targets.Target) -> Facts:
    f = Facts()
    f.mma_futures = {s.future for s in ir.walk(kernel.body) if isinstance(s, ir.Mma) and s.future}
    _InFlight(f).block(kernel.body, ())
    shared = {fr.name for fr in kernel.frags if fr.block}
    _blocks(kernel.body, lambda b: _fold_fills(b, f, shared))
    _blocks(kernel.body, lambda b: _pair_tma(kernel, b, f, target))
    f.arrivals = _arrivals(kernel)
    if kernel.event(SYNC_EVENT) is not None:
        f.sync_loads = {id(s): i for i, s in enumerate(sync_loads(kernel.body))}
    return f


def _arrivals(kernel: ir.Kernel) -> dict:
    """Event -> arrivals per generation: the fact the pass event-arrivals stored on each
    event (`arrivals=N` in the printed IR), which the interpreter and the pipeline check
    read too. An event without it is IR the passes did not run on."""
    missing = [e.name for e in kernel.events if e.arrivals is None]
    if missing:
        raise InternalError(f"the event '{missing[0]}' of kernel {kernel.name} has no arrival "
                            "count (the IR did not go through the pass event-arrivals)")
    return {e.name: e.arrivals for e in kernel.events}


def _blocks(stmts: list, fn) -> None:
    fn(stmts)
    for s in stmts:
        for b in ir.child_blocks(s):
            _blocks(b, fn)


# ---------------------------------------------------------------- MMA futures

class _InFlight:
    def __init__(self, facts: Facts) -> None:
        self.f = facts
        self.record = True

    def block(self, stmts: list, state):
        for s in stmts:
            state = self.stmt(s, state)
        return state

    def stmt(self, s, state):
        if isinstance(s, ir.Mma):
            if s.future is None:
                return ()
            return None if state is None else state + (s.future,)
        if isinstance(s, ir.Wait):
            waits = {}
            for item in s.items:
                if isinstance(item, ir.FutureRef) and item.future in self.f.mma_futures:
                    n, state = self._wait(item.future, state)
                    waits[item.future] = n
            if self.record:
                self.f.wait_groups[id(s)] = waits
            return state
        if isinstance(s, ir.If):
            a = self.block(s.then, state)
            b = self.block(s.orelse, state)
            return a if a == b else None
        if isinstance(s, (ir.For, ir.While)):
            return self._loop(s.body, state)
        if isinstance(s, (ir.Parallel, ir.Role)):
            return self.block(s.body, state)
        return state

    @staticmethod
    def _wait(fut: str, state):
        if state is None:
            return 0, ()
        if fut not in state:
            return None, state  # already complete on every path
        idx = len(state) - 1 - state[::-1].index(fut)
        return len(state) - idx - 1, state[idx + 1:]

    def _loop(self, body: list, entry):
        """The loop head's state: `entry` if one trip preserves it, else unknown."""
        rec, self.record = self.record, False
        state = entry
        if self.block(body, state) != state:
            state = None
        self.record = rec
        out = self.block(body, state)  # the recorded pass, from the fixed point
        return state if out == state else None


# ---------------------------------------------------------------- fills

def _mentions(s: ir.Stmt, name: str) -> bool:
    for t in ir.walk([s]):
        for attr in ("acc", "frag", "src", "dst", "domain", "a"):
            if getattr(t, attr, None) == name:
                return True
        for e in _exprs(t):
            if _reads_frag(e, name):
                return True
    return False


def _exprs(s: ir.Stmt):
    for attr in ("value", "cond", "init"):
        e = getattr(s, attr, None)
        if isinstance(e, ir.Expr):
            yield e
    for e in getattr(s, "index", ()) or ():
        yield e


def _reads_frag(e: ir.Expr, name: str) -> bool:
    if isinstance(e, ir.Elem) and e.frag == name:
        return True
    return any(_reads_frag(c, name) for c in children(e))


def _fold_fills(stmts: list, f: Facts, shared: set) -> None:
    """A fill 0 whose next use in its block is an MMA into the accumulator folds into that
    MMA (its first k-step overwrites). The block's accumulator (`shared`) is seen by other
    roles: a trigger between the two could publish the tile to one that reads it expecting
    the zeros, so such a fill does not fold (and a fill kept inside a role is refused)."""
    for i, s in enumerate(stmts):
        if not (isinstance(s, ir.MmaFill) and s.value.value == 0):
            continue
        for t in stmts[i + 1:]:
            if s.acc in shared and any(isinstance(x, ir.Trigger) for x in ir.walk([t])):
                break
            if not _mentions(t, s.acc):
                continue
            if isinstance(t, ir.Mma) and t.acc == s.acc:
                f.folded_fills.add(id(s))
                f.zero_first.add(id(t))
            break


# ---------------------------------------------------------------- TMA futures

def view_elems(v: ir.View, loc) -> int:
    n = 1
    for e in v.extents:
        if not isinstance(e, ir.Const):
            raise ChoreoError("a copy whose box size is not a compile-time constant", loc)
        n *= e.value
    return n


def _assigned(stmts: list) -> set:
    out = set()
    for s in ir.walk(stmts):
        if isinstance(s, (ir.Assign, ir.Var, ir.Let)):
            out.add(s.name)
    return out


def _syms(e: Optional[ir.Expr], out: set) -> set:
    if isinstance(e, ir.Sym):
        out.add(e.name)
    elif isinstance(e, ir.Expr):
        for c in children(e):
            _syms(c, out)
    return out


def _pair_tma(kernel: ir.Kernel, stmts: list, f: Facts, target: targets.Target) -> None:
    loads = {s.future: (i, s) for i, s in enumerate(stmts)
             if isinstance(s, ir.TmaLoad) and s.future}
    arch = target.name
    for i, s in enumerate(stmts):
        if not (isinstance(s, ir.Trigger) and s.after):
            continue
        if _commit(s, f, target):
            continue
        group = []
        for name in s.after:
            if name not in loads or loads[name][0] > i:
                raise ChoreoError(
                    f"'trigger ... after {name}': publishing a future that is not a tma.load "
                    f"earlier in the same block is not lowered for {arch} yet", s.loc)
            group.append(loads[name])
        group.sort(key=lambda t: t[0])
        first = group[0][0]
        used = _syms(s.event.order, set()) | _syms(s.event.index, set())
        if used & _assigned(stmts[first:i]):
            raise ChoreoError(
                f"the event of 'trigger {s.event.event} after ...' changes between its loads and "
                f"the trigger; this is not lowered for {arch} yet", s.loc)
        nbytes = sum(view_elems(ld.dst, ld.loc) * ir.dtype_bytes(_elem_type(kernel, ld))
                     for _, ld in group)
        g = TmaGroup(s, [ld for _, ld in group], nbytes)
        for _, ld in group:
            f.tma_groups[id(ld)] = g
        f.published.add(id(s))


def _commit(s: ir.Trigger, f: Facts, target: targets.Target) -> bool:
    """`trigger e after qk`: the MMA-issuing thread commits its MMAs to e's mbarrier (a
    tcgen05 target); a target whose MMAs complete otherwise refuses it by name."""
    mma = [n for n in s.after if n in f.mma_futures]
    if not mma:
        return False
    arch = target.name
    if len(mma) != len(s.after):  # sema refuses this; IR built by hand may still hold it
        raise ChoreoError(f"'trigger {s.event.event} after {', '.join(s.after)}': TMA loads "
                          f"and MMA futures in one 'after' are not lowered for {arch} yet", s.loc)
    if not target.mma_barriers:
        raise ChoreoError(f"'trigger {s.event.event} after {', '.join(s.after)}' (an MMA "
                          f"future completing an event) is not lowered for {arch} yet; write "
                          f"'wait {mma[0]};' and a plain trigger", s.loc)
    f.commits.add(id(s))
    return True


def _elem_type(kernel: ir.Kernel, s) -> str:
    b = kernel.buffer(s.dst.base)
    return b.dtype if b else kernel.param(s.dst.base).dtype


def issue_only(role: ir.Role, also: tuple = ()) -> bool:
    """Whether one thread per instance can run the role: it only issues asynchronous work
    (`also`: statement kinds the target issues from one thread too, or predicates on a
    statement saying so)."""
    kinds = _ISSUE_ONLY + tuple(a for a in also if isinstance(a, type))
    preds = [a for a in also if not isinstance(a, type)]
    return all(isinstance(s, kinds) or any(p(s) for p in preds) for s in ir.walk(role.body))
