"""`inthreads` forms beside the role of thread groups (sema/kernel.py's s_InThreads).

In a block's own code (no parallel level around it), `inthreads (p < 2) { ... }` is an
`if` on the block's indices: every thread of the block runs its code, so the blocks
whose indices satisfy the condition run the body and the others skip it.

In a region of single threads (`parallel g by 2 : group-4, t by 128 : thread`, one
instance per thread), a condition may also read values known only at run time:
`inthreads.async (g == 0 && t < limit)`. Its conjuncts that depend on the instance
alone choose the role's members, as any role's condition does; the others guard the
body inside the role (`if (t < limit)`), so that exactly the threads the whole condition
selects run it. A plain `trigger` of the body, whose arrivals the event counts per
member, runs in every member (`GuardedBody` says why that is the same program); a body
holding another operation of the whole role (a copy one thread issues for all, an MMA, a
meeting of the role's threads) stays refused by name.

Inside a role of single threads, `inthreads (t == 32) { ... }` (not '.async': only the
outermost may be) is a role of fewer members nested in it, whose threads run the body
while the others skip it; the outer role's threads meet after it, as after any plain
`inthreads`, so that what it did is done for all of them.

An asynchronous TMA load in a role of several single threads is one operation of the
role: one elected thread, its first member, issues it, and the `trigger e after load`
that publishes it is that thread's one arrival on `e` (the copy's bytes complete the
generation). Sema puts the loads and the triggers right after them in a nested role of
that one member, so that arrival counting (passes/event_arrivals.py), the interpreter
and the backends see an ordinary role of one instance. Any other use of such a future
(waiting it in every thread) stays refused by name.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Optional

from ..frontend import ast as A
from .. import ir
from ..ir import build as B
from ..ir.eval import EvalError, evaluate
from ..ir.printer import expr as print_expr
from ..construct_names import describe
from .exprs import err
from .values import Unsupported

#: What a guarded role body may hold: statements each thread runs on its own.
PER_THREAD = (ir.Let, ir.Var, ir.ViewDef, ir.Assign, ir.If, ir.For, ir.While, ir.Break,
              ir.Wait)


class RoleFormBuilder:
    """Mixin of the statement builder (needs scalar, block, emit and the parallel state)."""

    def block_inthreads(self, s: A.InThreads) -> None:
        cond = self.scalar(s.cond)
        body = self.block(s.body.stmts)
        if any(isinstance(x, ir.Parallel) for x in ir.walk(body)):
            raise Unsupported("'inthreads' around parallel levels of thread groups", s.loc)
        self.emit(ir.If(cond, body, loc=s.loc))

    def role_members(self, cond: ir.Expr, par: ir.Parallel, s: A.InThreads) -> list[int]:
        """The thread groups `cond` selects (it may read the parallel variable alone), none
        of them already in an asynchronous role of the same region."""
        members = _selected(cond, par, range(par.extent), s)
        if not members:
            raise err(f"this 'inthreads' condition selects none of the {par.extent} thread groups",
                      s.cond)
        for other in self.out:
            if isinstance(other, ir.Role) and other.is_async and s.is_async:
                both = sorted(set(other.members) & set(members))
                if both:
                    raise err(f"roles ({other.name}) and ({print_expr(cond)}) both select thread "
                              f"group {par.var}={both[0]}; asynchronous roles must not overlap",
                              s.cond)
        return members

    def split_guard(self, cond: ir.Expr, par: ir.Parallel, s: A.InThreads):
        """(the condition on the instance, the run-time guard or None)."""
        if par.threads != 1:  # instances of several threads: a role's code is collective
            return cond, None
        static, dynamic = [], []
        for c in _conjuncts(cond):
            (static if _on_instance(c, par) else dynamic).append(c)
        if not dynamic:
            return cond, None
        return _conjunction(static) or B.const(True), _conjunction(dynamic)

    def guarded_body(self, guard: ir.Expr, body: list[ir.Stmt], s: A.InThreads):
        """The body under the guard; one holding a trigger with the guard pushed down to
        its per-thread statements (GuardedBody)."""
        if _holds_trigger(body):
            return GuardedBody(guard, s).block(body)
        for x in ir.walk(body):
            _per_thread(x, s)
        return [ir.If(guard, body, loc=s.loc)]


    def nested_inthreads(self, s: A.InThreads, par: ir.Parallel) -> None:
        outer = self.role
        if s.is_async:
            raise err("only the outermost 'inthreads' of a parallel level can be '.async'", s)
        if par.threads != 1:
            # Valid Choreo; the IR nests roles of single threads only.
            raise Unsupported("nested 'inthreads' regions", s.loc)
        cond, guard = self.split_guard(self.scalar(s.cond), par, s)
        members = _selected(cond, par, outer.members, s)
        if not members:
            raise err(f"this 'inthreads' condition selects none of the {len(outer.members)} "
                      f"threads of the role ({outer.name})", s.cond)
        inner = ir.Role(print_expr(cond), cond, tuple(members), [], is_async=False, loc=s.loc)
        self.emit(self.role_body(inner, s, par, guard, restore=outer))
        self.emit(ir.RoleSync(loc=s.loc))

    def role_body(self, role: ir.Role, s: A.InThreads, par: ir.Parallel, guard,
                  restore: Optional[ir.Role]) -> ir.Role:
        """`role` with its body built (in it), its elected copies and its run-time guard;
        `restore`: the role the builder is in after it (the outer one of a nested role)."""
        self.role = role
        try:
            role.body = self.block(s.body.stmts)
        finally:
            self.role = restore
        self.elect_copies(role.body, role, par)
        if guard is not None:
            role.body = self.guarded_body(guard, role.body, s)
        return role

    def elected_copy(self, op: ir.TmaLoad, varying: str | None, s) -> None:
        if varying:
            # Valid Choreo; the one thread that issues it would copy its own tile only.
            raise Unsupported(f"an asynchronous copy issued once for the {len(self.role.members)} "
                              f"threads of a role whose tile depends on '{varying}', which "
                              f"differs between them", s.loc)
        self.elected.add(id(op))
        self.emit(op)

    def elect_copies(self, body: list[ir.Stmt], role: ir.Role, par: ir.Parallel) -> None:
        """The role's elected loads and their triggers, in a role of its first member."""
        leader = min(role.members)
        cond = B.binop("==", ir.Sym(par.var, "s32"), B.const(leader))
        futures: set[str] = set()
        inside: set[int] = set()

        def block(stmts: list[ir.Stmt]) -> None:
            out, i = [], 0
            while i < len(stmts):
                j = _elected_run(stmts, i, self.elected, futures)
                if j == i:
                    for b in ([] if isinstance(stmts[i], ir.Role) else ir.child_blocks(stmts[i])):
                        block(b)
                    out.append(stmts[i])
                    i += 1
                    continue
                run = stmts[i:j]
                inside.update(id(x) for x in run)
                out.append(ir.Role(print_expr(cond), cond, (leader,), run, is_async=False,
                                   loc=run[0].loc))
                i = j
            stmts[:] = out

        block(body)
        _other_uses(body, futures, inside)


class GuardedBody:
    """A role body holding a `trigger`, under a run-time guard: its per-thread statements
    run in the threads the guard selects (`if guard { ... }`); its triggers and waits, at
    its top level or in a `foreach` there, run in every member of the role.

    The event counts one arrival per member of the role (passes/event_arrivals.py), so a
    member the guard leaves out, which has nothing to publish, still arrives: it runs the
    body's waits and triggers in their order, and arrives on each generation once it has
    waited for what the body waits for before it, as the members the guard selects do
    (were it to arrive at once, its arrivals for later generations would complete the
    current one early). A `foreach` holding a trigger runs in every member for that
    reason, its other statements guarded. What every member runs must be the same in
    every member, so it may not read a name the guarded statements define or assign; a
    name one guarded run defines is read in that run only, and the guard, evaluated before
    each run, reads no name the body assigns. A wait or trigger elsewhere
    (under an `if`, a `while`, in a loop with a `break`) or another operation of the
    whole role stays refused by name."""

    def __init__(self, guard: ir.Expr, s: A.InThreads) -> None:
        self.guard, self.s = guard, s
        self.runs: list[list[ir.Stmt]] = []
        self.free: list[ir.Stmt] = []   # statements every member runs (triggers, loop heads)

    def block(self, body: list[ir.Stmt]) -> list[ir.Stmt]:
        out = self._push(body)
        self._check_names()
        return out

    def _push(self, body: list[ir.Stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        run: list[ir.Stmt] = []

        def flush() -> None:
            if run:
                self.runs.append(list(run))
                out.append(ir.If(self.guard, list(run), loc=self.s.loc))
                run.clear()

        for x in body:
            if isinstance(x, ir.Trigger) and not x.after or isinstance(x, ir.Wait) and \
                    not any(isinstance(i, ir.FutureRef) for i in x.items):
                flush()
                self.free.append(x)
                out.append(x)
            elif isinstance(x, ir.For) and _holds_trigger(x.body):
                if any(isinstance(y, ir.Break) for y in ir.walk(x.body)):
                    self._refuse(x, "a 'foreach' with a 'break' and a trigger")
                flush()
                self.free.append(ir.For(x.var, x.start, x.stop, [], x.step, loc=x.loc))
                out.append(ir.For(x.var, x.start, x.stop, self._push(x.body), x.step, loc=x.loc))
            else:
                for y in ir.walk([x]):
                    if isinstance(y, (ir.Wait, ir.Trigger)):
                        self._refuse(y, f"{describe(y)} under an 'if' or a 'while'")
                    _per_thread(y, self.s)
                run.append(x)
        flush()
        return out

    def _refuse(self, x: ir.Stmt, what: str):
        raise Unsupported(f"an 'inthreads' condition on run-time values around {what}, an "
                          f"operation of the whole role", x.loc or self.s.loc)

    def _check_names(self) -> None:
        written = set().union(*[_writes(r) for r in self.runs])
        changed = sorted(ir.sym_names(self.guard) & written)
        if changed:  # evaluated before each guarded run, it must have one value
            self._refuse(self.s, f"a trigger, the guard reading '{changed[0]}', which the "
                                 f"body assigns")
        for x in self.free:
            hit = sorted(_reads([x]) & written)
            if hit:
                self._refuse(x, f"{describe(x)} that reads '{hit[0]}' (which only the "
                                f"threads the guard selects compute)")
        for i, r in enumerate(self.runs):
            defined = _defines(r)
            for j, other in enumerate(self.runs):
                hit = sorted(_reads(other) & defined) if i != j else []
                if hit:
                    self._refuse(other[0], f"a trigger between the definition of '{hit[0]}' "
                                           f"and a use of it")


def _per_thread(x: ir.Stmt, s: A.InThreads) -> None:
    items = getattr(x, "items", ())
    if not isinstance(x, PER_THREAD) or any(isinstance(i, ir.FutureRef) for i in items):
        raise Unsupported(f"an 'inthreads' condition on run-time values around "
                          f"{describe(x)}, an operation of the whole role", x.loc or s.loc)


def _holds_trigger(body: list[ir.Stmt]) -> bool:
    return any(isinstance(x, ir.Trigger) for x in ir.walk(body))


def _defines(stmts: list[ir.Stmt]) -> set[str]:
    """The names `stmts` declare (lets, mutables, views, loop variables)."""
    out = set()
    for x in ir.walk(stmts):
        if isinstance(x, (ir.Let, ir.Var, ir.ViewDef)):
            out.add(x.name)
        elif isinstance(x, ir.For):
            out.add(x.var)
    return out


def _writes(stmts: list[ir.Stmt]) -> set[str]:
    return _defines(stmts) | {x.name for x in ir.walk(stmts) if isinstance(x, ir.Assign)}


def _reads(stmts: list[ir.Stmt]) -> set[str]:
    """Every scalar name the statements read (their expressions, event indices and
    orders, assigned names included: an assignment of a mutable uses it)."""
    out: set[str] = set()

    def value(v) -> None:
        if isinstance(v, ir.Expr):
            out.update(ir.sym_names(v))
        elif isinstance(v, (list, tuple)):
            for y in v:
                value(y)
        elif is_dataclass(v) and not isinstance(v, ir.Stmt):
            for f in fields(v):
                value(getattr(v, f.name))

    for x in ir.walk(stmts):
        if isinstance(x, ir.Assign):
            out.add(x.name)
        for f in fields(x):
            v = getattr(x, f.name)
            if not (isinstance(v, list) and v and isinstance(v[0], ir.Stmt)):
                value(v)
    return out


def _elected_run(stmts: list[ir.Stmt], i: int, elected: set[int], futures: set[str]) -> int:
    """The end of the run of elected loads at stmts[i] and the triggers publishing them."""
    j, mine = i, set()
    while j < len(stmts):
        x = stmts[j]
        if isinstance(x, ir.TmaLoad) and id(x) in elected:
            mine.add(x.future)
        elif not (isinstance(x, ir.Trigger) and x.after and set(x.after) <= mine):
            break
        j += 1
    if j == i:
        return i
    published = {f for x in stmts[i:j] if isinstance(x, ir.Trigger) for f in x.after}
    for x in stmts[i:j]:
        if isinstance(x, ir.TmaLoad) and x.future not in published:
            raise Unsupported(f"an asynchronous copy issued by one thread for a role of several "
                              f"threads, its future '{x.future}' not published by a 'trigger "
                              f"... after {x.future}' right after it", x.loc)
    futures |= mine
    return j


def _other_uses(body: list[ir.Stmt], futures: set[str], inside: set[int]) -> None:
    """An elected load's future is the elected thread's alone: the others never had it."""
    for x in ir.walk(body):
        if id(x) in inside:
            continue
        names = set(getattr(x, "after", ())) | {
            i.future for i in getattr(x, "items", ()) if isinstance(i, ir.FutureRef)}
        hit = sorted(names & futures)
        if hit:
            raise Unsupported(f"{describe(x)} of '{hit[0]}', a copy one elected thread issues "
                              f"for a role of several threads", x.loc)


def _selected(cond: ir.Expr, par: ir.Parallel, candidates, s: A.InThreads) -> list[int]:
    members = []
    for p in candidates:
        try:
            if evaluate(cond, {par.var: p}):
                members.append(p)
        except EvalError:
            # Valid Choreo (the predicate need only differ between threads); the IR
            # assigns roles to thread groups when compiling.
            raise Unsupported(f"an 'inthreads' condition depending on more than the "
                              f"parallel variable '{par.var}'", s.cond.loc) from None
    return members


def _conjuncts(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.Bin) and e.op == "&&":
        return _conjuncts(e.lhs) + _conjuncts(e.rhs)
    return [e]


def _conjunction(parts: list[ir.Expr]):
    out = None
    for p in parts:
        out = p if out is None else B.binop("&&", out, p)
    return out


def _on_instance(e: ir.Expr, par: ir.Parallel) -> bool:
    """Whether `e` has a value for every instance from the instance index alone."""
    try:
        for p in range(par.extent):
            evaluate(e, {par.var: p})
    except EvalError:
        return False
    return True
