"""Static pipeline check: do producers and consumers agree on event rings?

For a set of launch scenarios (values of the symbolic dimensions and of the
block's grid coordinates) the check runs every role instance of a block on
its scalar code alone: loops, counters, conditions, and the event operations
`wait` and `trigger`. Data, MMAs and fragments are ignored. Roles are
scheduled round-robin; each runs until it waits for an event generation
that is not complete.

It reports, with the scenario and a short trace:
- a deadlock: a role waits a generation that no remaining trigger completes;
- a generation overrun: a slot completes generation g+2 (or later) while a
  waiter still expects g; the hardware's parity wait (`mbarrier.try_wait.parity`)
  cannot tell g from g+2 and would hang;
- an early pass: a role waits generation g of a slot that has completed
  fewer than g-1 generations, where the parity wait would pass spuriously;
  on a slot that `trigger ... after <MMA future>` completes, also a wait of g
  by a role that did not wait g-1 first (the commits' arrivals come when the
  MMAs complete, later than the simulation takes them).

The scenarios vary the trip counts the program derives from its inputs
(1 to 8 tiles of the common tile sizes, plus ragged sizes), which covers
every slot/parity combination of rings of up to 4 slots. They come in
families: every symbolic dimension at the same value, and one dimension
at each value while the others stay small (1 or 8), so that a persistent
block that walks many work items also meets several multi-tile items.
Sizes the function's asserts exclude are no scenario (they are checked
before every launch: `Kernel.assumes`). Within a family the values grow; a scenario that needs more than
`SCENARIO_STEPS` steps is left unchecked and ends its family (the larger
values would only cost more), and the check fails only when no scenario
finishes at all (a loop that never ends). The check is bounded: the step
budget of a scenario grows with the kernel's size (a long straight-line kernel
is not taken for an endless loop), the scenarios together stop at
`TOTAL_STEPS`, and a block of more than `MAX_INSTANCES` role instances is not
simulated; each way of giving up is reported as a located warning saying what
was left unchecked. Arrival counts are the IR's (`Event.arrivals`,
passes/event_arrivals: two consumer warpgroups releasing one K slot arrive
twice).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

from .. import ir
from ..diagnostics import ChoreoError, InternalError, warn
from . import event_arrivals
from ..ir.eval import EvalError, evaluate, wrap
from ..ir.printer import event_ref, expr

DIM_VALUES = (1, 64, 128, 129, 256, 384, 640, 1024)
SMALL_VALUES = (1, 8)  # the other dimensions, in the one-dimension families
SCENARIO_STEPS = 4_000
STEPS_PER_STATEMENT = 4  # per statement and role instance, added to SCENARIO_STEPS
TOTAL_STEPS = 400_000  # all scenarios of one kernel together
MAX_INSTANCES = 1024  # role instances of one block (a CUDA block has 1,024 threads)


@dataclass
class _Blocked:
    event: str
    slot: int
    generation: int
    ref: ir.EventRef
    loc: object


def committed_events(kernel: ir.Kernel) -> set:
    """Events some `trigger ... after` of an MMA future completes (a tcgen05.commit)."""
    mma = {s.future for s in ir.walk(kernel.body) if isinstance(s, ir.Mma) and s.future}
    return {s.event.event for s in ir.walk(kernel.body)
            if isinstance(s, ir.Trigger) and set(s.after) & mma}


@dataclass
class _RoleRun:
    label: str
    gen: object  # the generator running the role
    blocked: _Blocked | None = None
    done: bool = False
    triggers: dict = field(default_factory=dict)  # (event, slot) -> count
    trace: list = field(default_factory=list)
    triggerable: set = field(default_factory=set)  # events its code triggers
    waited: dict = field(default_factory=dict)  # (event, slot) -> latest generation waited


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Leave(Exception):
    """`yield`: the role instance leaves the kernel."""


class PipelineError(ChoreoError):
    pass


class _OverBudget(Exception):
    """A scenario that would take more than SCENARIO_STEPS steps to simulate."""


class _Sim:
    def __init__(self, kernel: ir.Kernel, env: dict, scenario: str,
                 budget: int = SCENARIO_STEPS) -> None:
        self.k = kernel
        self.env0 = env
        self.scenario = scenario
        self.done: dict[tuple[str, int], int] = {}
        self.arrivals: dict[tuple[str, int], int] = {}
        self.expected: dict[str, int] = {}
        self.steps = 0
        self.budget = budget
        self.last_loc = None

    # -- event state
    def slots(self, name: str) -> int:
        ev = self.k.event(name)
        return ev.slots or 1

    def completed(self, name: str, slot: int) -> int:
        key = (name, slot)
        if key not in self.done:
            self.done[key] = 1 if self.k.event(name).ready else 0
        return self.done[key]

    def resolve(self, ref: ir.EventRef, env: dict, path_gen: dict) -> tuple[int, int]:
        n = self.slots(ref.event)
        if ref.order is not None:
            order = evaluate(ref.order, env)
            return order % n, order // n
        slot = evaluate(ref.index, env) if ref.index is not None else 0
        return slot, path_gen.get((ref.event, slot), 0)

    # -- role execution (generators yielding _Blocked while waiting)
    def run_role(self, body: list[ir.Stmt], env: dict, run: _RoleRun):
        path_gen: dict = {}
        try:
            yield from self.block(body, dict(env), run, path_gen)
        except _Leave:
            return

    def block(self, stmts, env, run, path_gen):
        for s in stmts:
            self.steps += 1
            if self.steps > self.budget:
                self.last_loc = getattr(s, "loc", None)
                raise _OverBudget(run.label)
            yield from self.stmt(s, env, run, path_gen)

    def stmt(self, s, env, run, path_gen):
        rule = SIM_STATEMENTS.get(type(s))
        if rule is None:
            raise InternalError(f"pipeline check: no rule for the statement kind "
                                f"{type(s).__name__}", getattr(s, "loc", None))
        yield from rule(self, s, env, run, path_gen)

    # -- statement rules (SIM_STATEMENTS): generators, yielding while a role waits
    def s_skip(self, s, env, run, path_gen):
        """Data, MMAs, fragments, copies and barriers: no event operation."""
        yield from ()

    def s_scalar(self, s, env, run, path_gen):
        value = s.init if isinstance(s, ir.Var) else s.value
        try:
            env[s.name] = wrap(evaluate(value, env), getattr(s, "dtype", None) or value.dtype)
        except EvalError:
            # A value of data (a buffer element): unknown here. The name stays unbound,
            # so a branch, loop or event order that depends on it still stops the check.
            env.pop(s.name, None)
        yield from ()

    def s_while(self, s: ir.While, env, run, path_gen):
        while evaluate(s.cond, env):
            try:
                yield from self.block(s.body, env, run, path_gen)
            except _Break:
                break
            except _Continue:
                continue

    def s_if(self, s: ir.If, env, run, path_gen):
        branch = s.then if evaluate(s.cond, env) else s.orelse
        yield from self.block(branch, env, run, path_gen)

    def s_role(self, s: ir.Role, env, run, path_gen):
        """A role nested in this one (sema/role_forms.py)."""
        if evaluate(s.cond, env):
            yield from self.block(s.body, env, run, path_gen)

    def s_break(self, s, env, run, path_gen):
        raise _Break
        yield  # a generator

    def s_continue(self, s, env, run, path_gen):
        raise _Continue
        yield  # a generator

    def s_yield(self, s, env, run, path_gen):
        """The thread leaves the kernel: this role instance runs nothing more."""
        raise _Leave
        yield  # a generator

    def s_wait(self, s: ir.Wait, env, run, path_gen):
        for item in s.items:
            if isinstance(item, ir.EventRef):
                yield from self.wait(item, s.loc, env, run, path_gen)

    def s_trigger(self, s: ir.Trigger, env, run, path_gen):
        self.trigger(s, env, run, path_gen)
        yield from ()

    def s_nested(self, s, env, run, path_gen):
        """A statement no role body holds (the passes' order puts them elsewhere)."""
        raise InternalError(f"pipeline check: {type(s).__name__} inside a role", s.loc)
        yield  # a generator

    def loop(self, s: ir.For, env, run, path_gen):
        i, stop, step = evaluate(s.start, env), evaluate(s.stop, env), evaluate(s.step, env)
        while i < stop:
            env[s.var] = i
            try:
                yield from self.block(s.body, env, run, path_gen)
            except _Break:
                break
            except _Continue:
                pass
            i += step

    def wait(self, ref, loc, env, run, path_gen):
        slot, gen = self.resolve(ref, env, path_gen)
        label = f"{ref.event}[{slot}] generation {gen}"
        while True:
            done = self.completed(ref.event, slot)
            if done > gen:
                break
            if done < gen and (done - gen) % 2:
                self.fail(f"role {run.label} waits {label} while only {done} generation(s) "
                          f"completed: the parity wait would pass early", loc, run)
            run.blocked = _Blocked(ref.event, slot, gen, ref, loc)
            yield
        run.blocked = None
        if ref.event in self.committed:
            self.no_skip(ref.event, slot, gen, label, loc, run)
        if done > gen + 1:
            self.fail(f"role {run.label} waits {label}, but the slot already completed "
                      f"generation {done - 1}: the parity wait cannot tell them apart", loc, run)
        run.trace.append(f"wait {event_ref(ref)} -> {label}")
        if ref.order is None:
            path_gen[(ref.event, slot)] = gen + 1

    def no_skip(self, event: str, slot: int, gen: int, label: str, loc, run) -> None:
        """A slot MMA commits complete is waited generation after generation: its arrivals
        come when the MMAs complete, later than this simulation takes them, so a wait past
        a generation not waited could see an earlier one incomplete and pass by parity."""
        prev = run.waited.get((event, slot), 0 if self.k.event(event).ready else -1)
        if gen > prev + 1:
            self.fail(f"role {run.label} waits {label} without waiting generation {gen - 1} "
                      f"of that slot first; its triggers are MMA commits ('trigger ... after'), "
                      f"whose arrivals may still be to come, and the parity wait would pass "
                      f"early", loc, run)
        run.waited[(event, slot)] = max(prev, gen)

    def trigger(self, s: ir.Trigger, env, run, path_gen):
        ref = s.event
        n = self.slots(ref.event)
        if ref.order is not None:
            slot = evaluate(ref.order, env) % n
        else:
            slot = evaluate(ref.index, env) if ref.index is not None else 0
        key = (ref.event, slot)
        self.completed(ref.event, slot)
        self.arrivals[key] = self.arrivals.get(key, 0) + 1
        run.triggers[key] = run.triggers.get(key, 0) + 1
        run.trace.append(f"trigger {event_ref(ref)} -> {ref.event}[{slot}]")
        if self.arrivals[key] >= self.expected.get(ref.event, 1):
            self.arrivals[key] = 0
            self.done[key] += 1

    def fail(self, message: str, loc, run: _RoleRun | None) -> None:
        trace = ""
        if run is not None and run.trace:
            trace = "; last steps of that role: " + ", ".join(run.trace[-4:])
        scenario = self.scenario or _describe(self.k, self.env0)  # in words only when failing
        raise PipelineError(f"pipeline check: {message} when {scenario}{trace}", loc)

    # -- the block
    def instances(self):
        """(label, body, env) for every role instance of the block, after block-level code."""
        env = dict(self.env0)
        out = []
        for s in self.k.body:
            if isinstance(s, (ir.Let, ir.Var)):
                self.steps += 1
                value = s.value if isinstance(s, ir.Let) else s.init
                env[s.name] = evaluate(value, env)
            elif isinstance(s, ir.Parallel):
                for p in range(s.extent):
                    penv = dict(env, **{s.var: p})
                    out += self._roles_of(s.body, penv, s.var, p)
        return env, out

    def _roles_of(self, body, env, var, p):
        roles, plain = [], []
        env = dict(env)
        for s in body:
            if isinstance(s, ir.Role):
                if p in _member_set(s):
                    roles.append((f"({s.name}) [{var}={p}]", s.body, dict(env)))
            else:
                if isinstance(s, (ir.Let, ir.Var)) and not plain:
                    value = s.value if isinstance(s, ir.Let) else s.init
                    env[s.name] = evaluate(value, env)
                    continue
                plain.append(s)
        if plain and any(isinstance(s, (ir.Wait, ir.Trigger)) for s in ir.walk(plain)):
            roles.append((f"{var}={p}", plain, env))
        return roles

    def run(self) -> None:
        _, instances = self.instances()
        self.expected = event_arrivals.arrivals(self.k)
        self.committed = committed_events(self.k)
        runs = []
        for label, body, env in instances:
            r = _RoleRun(label, None)
            r.gen = self.run_role(body, env, r)
            r.triggerable = {s.event.event for s in ir.walk(body) if isinstance(s, ir.Trigger)}
            runs.append(r)
        while True:
            progressed = False
            for r in runs:
                if r.done:
                    continue
                if r.blocked and self.completed(r.blocked.event, r.blocked.slot) <= r.blocked.generation:
                    continue
                progressed = True
                try:
                    next(r.gen)
                except StopIteration:
                    r.done = True
            if all(r.done for r in runs):
                return
            if not progressed:
                self.deadlock(runs)

    def deadlock(self, runs: list[_RoleRun]) -> None:
        waiting = [r for r in runs if not r.done]
        first = waiting[0]
        b = first.blocked
        producers = [r for r in runs if b.event in r.triggerable]
        who = "; ".join(f"role {r.label} {'finished' if r.done else 'is blocked'} after "
                        f"triggering {b.event}[{b.slot}] {r.triggers.get((b.event, b.slot), 0)} time(s)"
                        for r in producers) or f"no role triggers {b.event}"
        others = "; ".join(f"role {r.label} waits {r.blocked.event}[{r.blocked.slot}] generation "
                           f"{r.blocked.generation} at {r.blocked.loc}" for r in waiting[1:])
        msg = (f"role {first.label} waits {event_ref(b.ref)} = {b.event}[{b.slot}] generation "
               f"{b.generation}, which is never completed ({who})")
        if others:
            msg += f"; also {others}"
        self.fail(msg, b.loc, first)


_S = _Sim
#: The rule of every statement kind (tests/test_static_dispatch.py checks each has one: a
#: kind without one is an internal error, never a statement the simulation skips silently).
SIM_STATEMENTS = {
    ir.Let: _S.s_scalar, ir.Var: _S.s_scalar, ir.Assign: _S.s_scalar,
    ir.For: lambda self, s, env, run, path_gen: self.loop(s, env, run, path_gen),
    ir.While: _S.s_while, ir.If: _S.s_if, ir.Role: _S.s_role,
    ir.Break: _S.s_break, ir.Continue: _S.s_continue, ir.Yield: _S.s_yield,
    ir.Wait: _S.s_wait, ir.Trigger: _S.s_trigger,
    ir.Parallel: _S.s_nested,  # parallel regions are the instances, never inside a role
    ir.Launch: _S.s_nested, ir.Assert: _S.s_nested, ir.HostCall: _S.s_nested,  # host statements
    **{kind: _S.s_skip for kind in (
        ir.ViewDef, ir.SetMaxRegs, ir.TmaLoad, ir.TmaStore, ir.DmaCopy, ir.RoleSync,
        ir.SyncShared, ir.SyncWarp, ir.GridSync, ir.Fence, ir.NamedBarrier, ir.FragDecl,
        ir.MmaFill, ir.Mma, ir.SparseMma, ir.WarpMma, ir.MmaStore, ir.MmaLoad, ir.ElemStore,
        ir.BufStore, ir.Apply, ir.Reduce, ir.AllReduce, ir.FragCopy, ir.Print, ir.Asm)},
}


def _families(kernel: ir.Kernel):
    """Lists of dimension assignments, each growing (see the module docstring), without
    those the function's asserts exclude (no launch has them: `Kernel.assumes`)."""
    for family in _all_families(kernel.symbolic_dims, _equal_sizes(kernel)):
        yield [dims for dims in family if assumed(kernel, dims)]


def _all_families(dims: list[str], same: dict):
    """The families; a dimension an assert makes equal to others (`same`) varies with them."""
    yield [{d: v for d in dims} for v in DIM_VALUES]
    if len(dims) > 1:
        for small in SMALL_VALUES:
            for d in dims:
                tied = same.get(d, {d})
                yield [{e: (v if e in tied else small) for e in dims} for v in DIM_VALUES]


def _equal_sizes(kernel: ir.Kernel) -> dict:
    """dimension -> the dimensions `assert(A == B)` conjuncts make equal to it (itself
    included)."""
    same: dict = {}
    for cond in kernel.assumes:
        for a, b in _equalities(cond):
            group = same.get(a, {a}) | same.get(b, {b})
            for n in group:
                same[n] = group
    return same


def _equalities(cond: ir.Expr):
    if isinstance(cond, ir.Bin) and cond.op == "&&":
        yield from _equalities(cond.lhs)
        yield from _equalities(cond.rhs)
    elif isinstance(cond, ir.Bin) and cond.op == "==" and isinstance(cond.lhs, ir.Sym) \
            and isinstance(cond.rhs, ir.Sym):
        yield cond.lhs.name, cond.rhs.name


def assumed(kernel: ir.Kernel, dims: dict) -> bool:
    """Whether sizes `dims` satisfy every assert of the function on its sizes (one that
    cannot be evaluated on them is taken as satisfied)."""
    for cond in kernel.assumes:
        try:
            if not evaluate(cond, dims):
                return False
        except EvalError:
            continue
    return True


def _blocks(kernel: ir.Kernel, env: dict, direct: set[str]):
    """Grid coordinates to run: the first 8 blocks of dimension 0, the ends of the others.

    A grid variable that the roles read directly (a persistent block's index,
    which picks its work items) is run at its first two values and its last."""
    ranges = []
    for i, g in enumerate(kernel.grid):
        try:
            n = int(evaluate(g.extent, env))
        except EvalError:
            n = 1
        if n <= 0:
            return
        if g.var in direct:
            ranges.append(sorted({0, min(1, n - 1), n - 1}))
        else:
            ranges.append(range(min(n, 8)) if i == 0 else sorted({0, n - 1}))
    for coords in product(*ranges):
        yield dict(env, **{g.var: c for g, c in zip(kernel.grid, coords)})


def _grid_vars_in_roles(kernel: ir.Kernel) -> set[str]:
    """Grid variables that code below the block level reads directly."""
    grid = {g.var for g in kernel.grid}
    used: set[str] = set()
    for s in ir.walk([t for t in kernel.body if isinstance(t, ir.Parallel)]):
        for e in _stmt_exprs(s):
            used |= _names(e) & grid
    return used


def _stmt_exprs(s):
    for attr in ("value", "init", "cond", "start", "stop", "step"):
        e = getattr(s, attr, None)
        if isinstance(e, ir.Expr):
            yield e
    refs = [s.event] if isinstance(s, ir.Trigger) else \
        [x for x in s.items if isinstance(x, ir.EventRef)] if isinstance(s, ir.Wait) else []
    for r in refs:
        for e in (r.order, r.index):
            if e is not None:
                yield e


_names = ir.sym_names


def _describe(kernel: ir.Kernel, env: dict) -> str:
    """The scenario in words: dimensions, grid coordinates and the block's first lets."""
    scope, lets = dict(env), {}
    for s in kernel.body:
        if isinstance(s, ir.Let):
            try:
                scope[s.name] = lets[s.name] = evaluate(s.value, scope)
            except EvalError:
                pass
    parts = [f"{k}={v}" for k, v in env.items()]
    parts += [f"{k}={v}" for k, v in list(lets.items())[:DESCRIBED_LETS]]
    if len(lets) > DESCRIBED_LETS:
        parts.append(f"... ({len(lets) - DESCRIBED_LETS} more lets)")
    return ", ".join(parts)


DESCRIBED_LETS = 12
_MEMBER_SETS: dict[int, tuple] = {}


def _member_set(role: ir.Role) -> frozenset:
    """`role.members` as a set, made once per role (a role may have thousands)."""
    got = _MEMBER_SETS.get(id(role))
    if got is None or got[0] is not role.members:
        got = (role.members, frozenset(role.members))
        _MEMBER_SETS[id(role)] = got
    return got[1]


def _instances(kernel: ir.Kernel) -> tuple[int, ir.Parallel | None]:
    """Role instances of the block (the parallel regions' extents) and the widest region."""
    pars = [s for s in kernel.body if isinstance(s, ir.Parallel)]
    widest = max(pars, key=lambda s: s.extent, default=None)
    return sum(s.extent for s in pars), widest


def _size(kernel: ir.Kernel) -> int:
    return sum(1 for _ in ir.walk(kernel.body))


def check_kernel(kernel: ir.Kernel) -> int:
    """Runs the scenarios; returns how many distinct ones finished. Raises PipelineError."""
    if not kernel.events:
        return 0
    instances, widest = _instances(kernel)
    if instances > MAX_INSTANCES:
        warn(f"pipeline check: not run: the block has {instances} role instances, more than "
             f"the {MAX_INSTANCES} it simulates", widest.loc if widest else kernel.loc)
        return 0
    budget = SCENARIO_STEPS + STEPS_PER_STATEMENT * _size(kernel) * max(instances, 1)
    direct = _grid_vars_in_roles(kernel)
    seen, finished, over, spent = set(), 0, None, 0
    for family in _families(kernel):
        for dims in family:
            too_big = False
            for env in _blocks(kernel, dims, direct):
                if spent > TOTAL_STEPS:
                    if finished:
                        warn(f"pipeline check: stopped after {finished} scenarios, at its "
                             f"budget of {TOTAL_STEPS} steps; larger sizes are not checked",
                             kernel.loc)
                        return finished
                    break
                sim = _Sim(kernel, env, "", budget)
                try:
                    block_env, _ = sim.instances()
                except EvalError:
                    continue
                key = tuple(sorted((k, v) for k, v in block_env.items()
                                   if k not in env or k in direct))
                if key in seen:
                    spent += sim.steps
                    continue
                seen.add(key)
                try:
                    sim.run()
                except EvalError as e:
                    sim.scenario = _describe(kernel, env)
                    raise PipelineError(f"pipeline check: {e} when {sim.scenario}", kernel.loc)
                except _OverBudget as ob:
                    sim.scenario = _describe(kernel, env)
                    over = over or (sim, str(ob))
                    too_big = True
                    break
                except PipelineError:
                    raise
                finally:
                    spent += sim.steps
                finished += 1
            if too_big:
                break
    if not finished and over is not None:
        sim, label = over
        raise PipelineError(f"pipeline check: no end after {sim.budget} steps in role "
                            f"{label} ({sim.scenario}), nor in any other scenario",
                            sim.last_loc)
    return finished


def check_module(module: ir.Module) -> None:
    for f in module.functions:
        for k in f.kernels:
            check_kernel(k)


__all__ = ["check_kernel", "check_module", "PipelineError", "expr"]


def run(kernel: ir.Kernel, target=None) -> None:
    """The same on every target: the event protocol is the program's."""
    check_kernel(kernel)
