"""Run-time faults decided at compile time, where no schedule or shape can avoid them.

The interpreter reports these when a run reaches them; the generated code would
compute garbage silently (a wgmma accumulator read before `wgmma.wait_group` is
whatever the tensor core has written so far; a shared-memory box past its
buffer reads its neighbour). Each check here is exact for what it reports:

- a shared or local view whose box lies outside its buffer for every value its
  indices can take (interval arithmetic over grid, parallel, role, loop and
  apply indices; a symbol of unknown range makes the check give up, silently);
- a fragment read (or refilled) while an MMA that writes it may still be in
  flight on some path: a may-analysis over the structured control flow, with
  the in-order completion of MMA groups (waiting a later MMA completes the
  earlier ones); a fill 0 right before an MMA into the same fragment is that
  MMA's overwrite, not a read (so is a block accumulator's `if (c) mma.fill acc, 0;`
  right before an MMA into it: sm_100a clears that MMA's enable-input-d predicate,
  lowering/sm100/lower_flow.py `flagged`, and writes no tensor memory); what leaves a role (to the roles after it) drops
  the MMAs a `trigger e after f` published (and those issued before them): the
  other roles see them through e;
- an event some role waits on, not `= ready`, that no statement ever triggers.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .. import ir
from ..diagnostics import ChoreoError, Diagnostic, InternalError
from . import static_order as O
from . import static_ranges as R
from .static_bounds import Bounds, elements as _elements, views as _views
from .static_ranges import Scope, interval


# ---------------------------------------------------------------- the state that flows

@dataclass
class Flow:
    """What may be in flight after some path to a statement.

    frags: fragment -> (MMA future, loc, sequence number) of an MMA that may be writing it;
    loads: (future, place) -> loc of a copy that may be writing the place;
    mmas: (future, sequence number) -> (places it reads, loc) of an MMA not waited."""

    frags: dict = field(default_factory=dict)
    loads: dict = field(default_factory=dict)
    mmas: dict = field(default_factory=dict)

    def forget(self, names: set) -> "Flow":
        """Drop the places whose slot or offsets read a name that is rebound."""
        if not names or not (self.loads or self.mmas):
            return self
        loads = {k: v for k, v in self.loads.items() if not k[1].names & names}
        mmas = {k: (tuple(p for p in v[0] if not p.names & names), v[1])
                for k, v in self.mmas.items()}
        return replace(self, loads=loads, mmas=mmas)


def _union(a: Flow | None, b: Flow | None) -> Flow | None:
    if a is None:
        return b
    if b is None:
        return a
    mmas = dict(a.mmas)
    for k, (ps, loc) in b.mmas.items():
        mmas[k] = (tuple(dict.fromkeys(mmas.get(k, ((), loc))[0] + ps)), loc)
    return Flow(_union_frags(a.frags, b.frags), {**a.loads, **b.loads}, mmas)


# ---------------------------------------------------------------- the walk

class _Faults(Bounds):
    def __init__(self, k: ir.Kernel) -> None:
        self.k = k
        self.found: list[Diagnostic] = []
        self.races: list[Diagnostic] = []
        self.seen: set = set()
        self.seq = 0
        self.issued: dict[str, int] = {}  # future -> sequence number of its latest MMA
        self.jumps: list[list] = []
        self.published: list[set] = []  # per role: futures a `trigger ... after` names
        self.parallel_var: str | None = None
        self.folded = _folded_fills(k.body, block=_block_accs(k.body))
        self.events = O.Events(k)

    def report(self, message: str, loc, race: bool = False) -> None:
        key = (message, loc)
        if key not in self.seen:
            self.seen.add(key)
            (self.races if race else self.found).append(Diagnostic("error", message, loc))

    # -- walking
    def block(self, stmts, scope: Scope, flow):
        scope = scope.copy()
        for s in stmts:
            if flow is None:  # unreachable after a break/continue/yield
                return None
            flow = self.stmt(s, scope, flow)
        return flow

    def stmt(self, s, scope: Scope, flow: Flow):
        rule = STATEMENTS.get(type(s))
        if rule is None:
            raise InternalError(f"static faults: no rule for the statement kind "
                                f"{type(s).__name__}", getattr(s, "loc", None))
        for v in _views(s):
            self.check_view(v, scope, s.loc)
        for v, index, loc in _elements(s):
            self.check_element(v, index, scope, loc)
        self.frag_reads(s, rule.reads(self, s), flow.frags)
        self.load_reads(s, scope, flow)
        return rule.step(self, s, scope, flow)

    def loop(self, body, scope: Scope, flow: Flow, index: set = frozenset()):
        """The state at the loop's exit; the body is walked until the state is stable.
        A let the body's assignments change is not substituted in it (its value was
        taken before the iteration)."""
        scope = scope.copy()
        scope.entering_loop(body)
        state = flow
        for _ in range(8):  # the pending sets only grow: a fixpoint in a few rounds
            self.jumps.append([])
            end = self.block(body, scope, state)
            jumps = self.jumps.pop()
            nxt = state
            for x in [end] + jumps:
                nxt = _union(nxt, x)
            nxt = nxt.forget(set(index))  # the next iteration's index
            if nxt == state:
                break
            state = nxt
        return state

    # -- statement rules (STATEMENTS)
    def s_plain(self, s, scope, flow):
        return flow

    def s_let(self, s: ir.Let, scope, flow):
        scope.let(s.name, s.value)
        return flow.forget({s.name})

    def s_mutable(self, s, scope, flow):
        scope.unknown(s.name, s.init if isinstance(s, ir.Var) else s.value)
        return flow.forget({s.name})

    def s_for(self, s: ir.For, scope, flow):
        inner = scope.copy()
        start, stop = interval(s.start, scope.ranges), interval(s.stop, scope.ranges)
        inner.varying(set().union(*(ir.sym_names(e) for e in (s.start, s.stop, s.step))))
        inner.index(s.var, (start[0], stop[1] - 1) if start and stop else None)
        return self.loop(s.body, inner, flow.forget({s.var}), {s.var})

    def s_while(self, s: ir.While, scope, flow):
        inner = scope.copy()
        inner.varying(ir.sym_names(s.cond))
        return self.loop(s.body, inner, flow)

    def s_if(self, s: ir.If, scope, flow):
        yes, no = scope.split(s.cond)
        out = _union(self.block(s.then, yes, flow), self.block(s.orelse, no, flow))
        if any(isinstance(t, _JUMPS) for t in ir.walk(s.then + s.orelse)):
            scope.varying(ir.sym_names(s.cond))  # after it: the cases that did not jump
        return out

    def s_jump(self, s, scope, flow):
        if self.jumps and not isinstance(s, ir.Yield):
            self.jumps[-1].append(flow)
        return None

    def s_parallel(self, s: ir.Parallel, scope, flow):
        inner = scope.copy()
        inner.index(s.var, (0, s.extent - 1), range(s.extent))
        self.parallel_var = s.var
        return _union(flow, self.block(s.body, inner, flow))

    def s_role(self, s: ir.Role, scope, flow):
        inner = scope.copy()
        var = self.parallel_var
        if s.members and var:
            inner.ranges[var] = (min(s.members), max(s.members))
            inner.restrict(var, s.members)
        self.published.append(set())
        out = self.block(s.body, inner, flow)
        return _union(flow, self._unpublished(out, self.published.pop()))

    def s_apply(self, s: ir.Apply, scope, flow):
        inner = scope.copy()
        for i, n in zip(s.indices, s.shape):
            inner.index(i, (0, n - 1), range(n))
        return self.block(s.body, inner, flow)

    def s_mma(self, s: ir.Mma, scope, flow):
        if s.future is None:
            return flow
        self.seq += 1
        self.issued[s.future] = self.seq
        frags = dict(flow.frags)
        frags[s.acc] = (s.future, s.loc, self.seq)
        reads = tuple(O.place(v, scope) for v in (s.a, s.b) if isinstance(v, ir.View))
        mmas = dict(flow.mmas)
        mmas[(s.future, self.seq)] = (reads, s.loc)
        return replace(flow, frags=frags, mmas=mmas)

    def s_copy(self, s, scope, flow):
        if s.future is None:
            return flow
        loads = dict(flow.loads)
        loads[(s.future, O.place(s.dst, scope))] = s.loc
        return replace(flow, loads=loads)

    def s_trigger(self, s: ir.Trigger, scope, flow):
        if self.published:
            self.published[-1].update(s.after)
        self.release(s, scope, flow)
        return flow

    def s_wait(self, s: ir.Wait, scope, flow):
        """Waiting a future completes it (and the MMAs issued before it); waiting an event
        a trigger publishes after an MMA completes that MMA for the operand check; a copy
        is complete after any event its completion orders (Events.completing). A fragment
        is complete only once its own future is waited."""
        done = {it.future for it in s.items if isinstance(it, ir.FutureRef)}
        events = {it.event for it in s.items if isinstance(it, ir.EventRef)}
        loads = {k: v for k, v in flow.loads.items()
                 if k[0] not in done and not self.events.completing(k[0]) & events}
        frags, mmas = flow.frags, flow.mmas
        if done:
            upto = max(self.issued.get(f, 0) for f in done)
            frags = {f: x for f, x in frags.items() if x[2] > upto and x[0] not in done}
        done |= {f for f in self.issued if self.events.after.get(f, set()) & events}
        if done:
            upto = max(self.issued.get(f, 0) for f in done)
            mmas = {k: v for k, v in mmas.items() if k[1] > upto and k[0] not in done}
        return Flow(frags, loads, mmas)

    # -- fragments and MMA futures
    def frag_reads(self, s, reads, pend) -> None:
        if not pend:
            return
        for attr in ("value", "cond"):
            e = getattr(s, attr, None)
            if isinstance(e, ir.Expr):
                reads = reads + [(x.frag, "this statement") for x in ir.expr_walk(e)
                                 if isinstance(x, ir.Elem)]
        for frag, what in reads:
            if frag in pend:
                fut, loc, _ = pend[frag]
                where = f" (line {loc.line})" if loc is not None else ""
                self.report(f"{what} uses '{frag}' while the MMA '{fut}'{where} may still be "
                            f"writing it; 'wait {fut};' first", s.loc)

    # -- copies and the MMAs reading shared tiles
    def load_reads(self, s, scope: Scope, flow: Flow) -> None:
        """A read of a copy's destination before the copy is waited."""
        if not flow.loads:
            return
        whole = [O.place(v, scope) for v in _SHARED_READS.get(type(s), _none)(s)]
        elems = [O.place(v, scope) for v, _, _ in _elements(s) if self.k.buffer(v.base)
                 and not (isinstance(s, ir.BufStore) and v is s.view)]
        for (fut, dst), loc in flow.loads.items():
            hit = any(O.overlaps(p, dst, scope.ranges) for p in whole) or \
                any(O.inside(p, dst, scope.ranges) for p in elems)
            if hit:
                where = f" (line {loc.line})" if loc is not None else ""
                self.report(f"{_READER.get(type(s), 'this statement')} reads '{dst.label}' "
                            f"while the copy '{fut}'{where} "
                            f"may still be writing it; 'wait {fut};' (or an event triggered "
                            f"after it) first", s.loc, race=True)

    def release(self, s: ir.Trigger, scope: Scope, flow: Flow) -> None:
        """A ring slot handed back (its producer refills the buffer after waiting this
        event) while an MMA that reads the slot may still be running."""
        guarded = self.events.guards.get(s.event.event)
        if not guarded or not flow.mmas:
            return
        upto = max((self.issued.get(f, 0) for f in s.after), default=0)
        slot = self.events.slot_of(s.event, scope)
        for (fut, seq), (places, loc) in flow.mmas.items():
            if seq <= upto or fut in s.after:
                continue
            for p in places:
                if p.base in guarded and p.slot == slot:
                    where = f" (line {loc.line})" if loc is not None else ""
                    self.report(f"this trigger hands '{p.base}' back to its producer while "
                                f"the MMA '{fut}'{where} may still be reading it; 'wait "
                                f"{fut};' first (or 'trigger ... after {fut}')", s.loc,
                                race=True)
                    return

    def _unpublished(self, flow, published: set):
        """What leaves a role in flight: not its MMAs a `trigger e after f` published (the
        other roles see them through e), nor the ones issued before them (in order), nor
        its copies a trigger published."""
        if flow is None or not published:
            return flow
        loads = {k: v for k, v in flow.loads.items() if k[0] not in published}
        mmas_done = [self.issued[f] for f in published if f in self.issued]
        if not mmas_done:
            return replace(flow, loads=loads)
        upto = max(mmas_done)
        frags = {f: x for f, x in flow.frags.items() if x[2] > upto and x[0] not in published}
        mmas = {k: v for k, v in flow.mmas.items() if k[1] > upto and k[0] not in published}
        return Flow(frags, loads, mmas)

    def _folded(self, s: ir.MmaFill) -> bool:
        """`mma.fill s, 0` right before an MMA into s: that MMA's overwrite, issued after
        the MMAs in flight (lowering/core/analysis.py folds the same pairs)."""
        return id(s) in self.folded


_JUMPS = (ir.Break, ir.Continue, ir.Yield)



def _none(s):
    return ()


_READER = {ir.Mma: "this MMA", ir.SparseMma: "this MMA", ir.MmaLoad: "this mma.load",
           ir.TmaStore: "this store", ir.DmaCopy: "this copy"}
#: Shared tiles a statement reads as a whole (an MMA's operands, a copy's source).
_SHARED_READS = {
    ir.Mma: lambda s: [v for v in (s.a, s.b) if isinstance(v, ir.View)],
    ir.SparseMma: lambda s: [v for v in (s.a, s.b) if isinstance(v, ir.View)],
    ir.MmaLoad: lambda s: [s.src],
    ir.TmaStore: lambda s: [s.src],
    ir.DmaCopy: lambda s: [s.src],
}


@dataclass(frozen=True)
class Rule:
    """How the walk treats a statement kind: its effect on the state (`step`) and the
    fragments it reads (`reads`: (name, what reads it) pairs)."""

    step: object = _Faults.s_plain
    reads: object = lambda self, s: []


def _reads(*pairs):
    """A `reads` rule: the fragment in each (attribute, words) pair."""
    return lambda self, s: [(getattr(s, a), w) for a, w in pairs]


def _fill_reads(self, s: ir.MmaFill):
    return [] if self._folded(s) else [(s.acc, "this fill")]


def _mma_reads(self, s: ir.Mma):
    return [(s.a, "this MMA")] if isinstance(s.a, str) else []


_PLAIN = Rule()
#: The rule of every statement kind (tests/test_static_dispatch.py checks each has one: a
#: kind without one is an internal error, never a statement skipped silently).
STATEMENTS = {
    ir.Let: Rule(_Faults.s_let),
    ir.Var: Rule(_Faults.s_mutable),
    ir.Assign: Rule(_Faults.s_mutable),
    ir.ViewDef: _PLAIN,
    ir.For: Rule(_Faults.s_for),
    ir.While: Rule(_Faults.s_while),
    ir.If: Rule(_Faults.s_if),
    ir.Break: Rule(_Faults.s_jump),
    ir.Continue: Rule(_Faults.s_jump),
    ir.Yield: Rule(_Faults.s_jump),
    ir.Parallel: Rule(_Faults.s_parallel),
    ir.Role: Rule(_Faults.s_role),
    ir.SetMaxRegs: _PLAIN,
    ir.TmaLoad: Rule(_Faults.s_copy),
    ir.TmaStore: _PLAIN,  # its future orders the store's read of shared memory only
    ir.DmaCopy: Rule(_Faults.s_copy),
    ir.Wait: Rule(_Faults.s_wait),
    ir.Trigger: Rule(_Faults.s_trigger),
    ir.RoleSync: _PLAIN,
    ir.SyncShared: _PLAIN,
    ir.SyncWarp: _PLAIN,
    ir.GridSync: _PLAIN,
    ir.Fence: _PLAIN,
    ir.NamedBarrier: _PLAIN,
    ir.FragDecl: _PLAIN,
    ir.MmaFill: Rule(reads=_fill_reads),
    ir.Mma: Rule(_Faults.s_mma, _mma_reads),
    ir.SparseMma: Rule(_Faults.s_mma, _mma_reads),
    ir.WarpMma: _PLAIN,  # synchronous
    ir.MmaStore: Rule(reads=_reads(("acc", "mma.store"))),
    ir.MmaLoad: _PLAIN,
    ir.ElemStore: Rule(reads=_reads(("frag", "this store"))),
    ir.BufStore: _PLAIN,
    ir.Apply: Rule(_Faults.s_apply),
    ir.Reduce: Rule(reads=_reads(("src", "this reduction"))),
    ir.AllReduce: Rule(reads=_reads(("frag", "this reduction"))),
    ir.FragCopy: Rule(reads=_reads(("src", "this copy"))),
    ir.Print: _PLAIN,
    ir.Asm: _PLAIN,
    ir.Launch: _PLAIN, ir.HostCall: _PLAIN,  # host statements: verify refuses them in a kernel
    ir.Assert: _PLAIN,
}


def _folded_fills(stmts: list, out: set | None = None, block: frozenset = frozenset()) -> set:
    """id() of every `mma.fill acc, 0` whose next statement is an MMA into acc, and of a
    block accumulator's fill 0 that is all of an `if` (no else) right before one."""
    out = set() if out is None else out
    for s, nxt in zip(stmts, stmts[1:] + [None]):
        into = isinstance(nxt, ir.Mma)
        if isinstance(s, ir.MmaFill) and s.value.value == 0 and into and nxt.acc == s.acc:
            out.add(id(s))
        if isinstance(s, ir.If) and not s.orelse and len(s.then) == 1 and into:
            f = s.then[0]
            if isinstance(f, ir.MmaFill) and f.value.value == 0 and f.acc == nxt.acc \
                    and f.acc in block:
                out.add(id(f))
        for b in ir.child_blocks(s):
            _folded_fills(b, out, block)
    return out


def _block_accs(stmts: list) -> frozenset:
    """The block's accumulators (`mma.fill ... : block`: tensor memory on sm_100a)."""
    return frozenset(s.frag.name for s in ir.walk(stmts)
                     if isinstance(s, ir.FragDecl) and s.frag.block)


def ir_int(e) -> int | None:
    if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def _union_frags(a, b):
    if a is None:
        return b
    if b is None:
        return a
    out = dict(a)
    for f, x in b.items():
        if f not in out or out[f][2] < x[2]:
            out[f] = x
    return out


def _never_triggered(k: ir.Kernel) -> list[Diagnostic]:
    triggered = {s.event.event for s in ir.walk(k.body) if isinstance(s, ir.Trigger)}
    ready = {e.name for e in k.events if e.ready}
    out, seen = [], set()
    for s in ir.walk(k.body):
        if not isinstance(s, ir.Wait):
            continue
        for it in s.items:
            if isinstance(it, ir.EventRef) and it.event not in triggered | ready | seen:
                seen.add(it.event)
                out.append(Diagnostic("error", f"'{it.event}' is waited on but never "
                                      "triggered, and does not start ready: this wait "
                                      "never returns", s.loc))
    return out


def _shapeless(k: ir.Kernel) -> list[Diagnostic]:
    """Accumulators used but never shaped: only an MMA (or a declared shape) gives an
    accumulator its shape; `mma.fill` alone does not, and no code exists for a tile of
    unknown size."""
    unshaped = {f.name: f for f in k.frags if not f.shape}
    out, seen = [], set()
    for s in ir.walk(k.body):
        if isinstance(s, (ir.FragDecl, ir.MmaFill)) or not unshaped:
            continue
        used = {getattr(s, a, None) for a in ("acc", "src", "dst", "frag", "domain", "a")}
        for name in sorted(n for n in used if isinstance(n, str) and n in unshaped):
            if name not in seen:
                seen.add(name)
                out.append(Diagnostic("error", f"accumulator '{name}' has no shape: no MMA "
                                      "writes it ('mma.fill' alone does not give one)", s.loc))
    return out


class Races(ChoreoError):
    """Races certain for every schedule that the walk found (a copy's destination read
    before its wait, a ring slot handed back under an MMA) and no other fault: `compile`
    refuses them; `check` and the interpreter warn (the interpreter then shows the race
    it runs into)."""


def faults(k: ir.Kernel) -> list[Diagnostic]:
    """The view, element and fragment faults of kernel `k`, then its races."""
    found, races = findings(k)
    return found + races


def findings(k: ir.Kernel) -> tuple[list[Diagnostic], list[Diagnostic]]:
    """(faults, races) of kernel `k`."""
    shapeless = _shapeless(k)
    if shapeless:
        return shapeless, []
    f = _Faults(k)
    scope = Scope(R.assumed_ranges(k))
    for g in k.grid:
        extent = ir_int(g.extent)
        scope.index(g.var, R.index_range(g.extent, scope.ranges),
                    range(extent) if extent is not None else None)
    f.block(k.body, scope, Flow())
    return f.found, f.races


def hangs(k: ir.Kernel) -> list[Diagnostic]:
    """Waits that can never return (judged like the pipeline check's findings)."""
    return _never_triggered(k)


def check_kernel(k: ir.Kernel) -> None:
    found, races = findings(k)
    if found:
        raise ChoreoError(diagnostics=found + races)
    if races:
        raise Races(diagnostics=races)
