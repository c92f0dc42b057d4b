"""Agents, vector clocks, events, futures and the conditions a role waits on.

An agent is anything that touches data: a role thread, or the asynchronous
operation behind a future (a TMA copy, an MMA). Each carries a vector clock
(agent id -> epoch) that says which other agents' work it is ordered after;
memory accesses are checked against it (see memory.py).

Events. `e.at(order)` on an event of N slots is slot `order % N`, generation
`order // N`. A slot counts its completed phases, starting at 1 for a
`ready` event (phase 0 is pre-completed). A wait for generation g is
satisfied once phase g has completed. A trigger arrives on its slot's
current phase: `trigger e.at(order)` selects the slot `order % N` and
"triggers the current generation" (the language's words); the generation
`order // N` it names plays no part, as an mbarrier arrive takes no phase
(a ring primed by `trigger empty.at(s)` for each slot, then released with
`trigger empty.at(k)` in the loop, is valid and runs so on the hardware).

Arrival count (one rule for every event): a phase completes when it has
received one arrival from every role instance that can trigger the event,
i.e. the sum over the roles (or parallel bodies) containing a `trigger` of
that event of their instance counts. The seed's `ke`/`ve` are triggered by
the consumer role of 2 instances, so each phase needs both warpgroups;
`kf`/`vf`/`qf` by the single producer instance. A plain `trigger` arrives at
once; `trigger e after f, g` arrives when all of f, g have completed (for an
MMA future f, also every MMA its thread issued before f: executor._committed).

Because the hardware waits on a phase's parity, the interpreter reports a
wait for generation g while fewer than g phases completed (the parity test
would pass early) or after g + 2 completed (it would hang).
"""
from __future__ import annotations

import itertools
from typing import Callable, Optional

from .errors import EventError

_ids = itertools.count(1)


def join(into: dict, other: dict) -> None:
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


class Agent:
    def __init__(self, name: str, clock: Optional[dict] = None) -> None:
        self.id = next(_ids)
        self.name = name
        self.clock = dict(clock or {})
        self.clock[self.id] = 1

    def release(self) -> dict:
        """A snapshot of this agent's clock to hand to others; later work is not in it."""
        snap = dict(self.clock)
        self.clock[self.id] += 1
        return snap


class EventState:
    def __init__(self, name: str, slots: Optional[int], ready: bool, expected: int) -> None:
        self.name = name
        self.array = slots is not None
        self.n = slots or 1
        self.ready = ready
        self.expected = max(expected, 1)
        self.completed = [1 if ready else 0] * self.n
        self.arrivals = [0] * self.n
        self.pending = [dict() for _ in range(self.n)]  # clock of the phase being filled
        self.phase_clocks: list[list[dict]] = [[{}] if ready else [] for _ in range(self.n)]

    def label(self, slot: int) -> str:
        return f"{self.name}[{slot}]" if self.array else self.name

    def trigger_phase(self, generation: int) -> int:
        return generation + (1 if self.ready else 0)

    def arrive(self, slot: int, phase: Optional[int], clock: dict, loc, who: str) -> None:
        """One arrival on `slot`'s current phase (`phase`, the generation a trigger names,
        does not choose it: see the module docstring)."""
        join(self.pending[slot], clock)
        self.arrivals[slot] += 1
        if self.arrivals[slot] == self.expected:
            self.phase_clocks[slot].append(self.pending[slot])
            self.pending[slot] = {}
            self.arrivals[slot] = 0
            self.completed[slot] += 1


class Future(Agent):
    """One dynamic instance of an asynchronous operation."""

    def __init__(self, name: str, kind: str, loc, issuer, action: Callable[["Future"], None],
                 order_key: Optional[object] = None) -> None:
        super().__init__(f"{kind} '{name}'", issuer.release())
        self.var = name
        self.kind = kind
        self.loc = loc
        self.issuer = issuer
        self.action = action
        self.done = False
        self.consumed = False  # waited, or bound by `trigger ... after`: once only
        self.consumed_at = None
        self.consumed_how = ""
        self.acc_name: Optional[str] = None  # MMA: the accumulator it updates
        self.a_name: Optional[str] = None  # MMA: a register A operand it reads
        self.bindings: list["Binding"] = []
        self.order_key = order_key  # futures with a key complete in issue order (wgmma groups)
        self.due = 0
        self.retired = False  # an MMA whose completion the issuer has observed


class Binding:
    """`trigger e after f1, f2`: one arrival once every future has completed."""

    def __init__(self, event: EventState, slot: int, phase: Optional[int], futures, loc, who) -> None:
        self.event, self.slot, self.phase, self.loc, self.who = event, slot, phase, loc, who
        self.left = len(futures)
        self.clock: dict = {}

    def future_done(self, fut: Future) -> None:
        join(self.clock, fut.clock)
        self.left -= 1
        if self.left == 0:
            self.event.arrive(self.slot, self.phase, self.clock, self.loc, self.who)


# ---------------------------------------------------------------- wait conditions


class EventWait:
    def __init__(self, event: EventState, slot: int, gen: int, loc) -> None:
        self.event, self.slot, self.gen, self.loc = event, slot, gen, loc

    def ready(self) -> bool:
        return self.event.completed[self.slot] > self.gen

    def check(self, who: str) -> None:
        """Called when the wait starts: the parity wait must not pass early."""
        done = self.event.completed[self.slot]
        if done < self.gen:
            raise EventError(f"{who} waits {self.describe()} while generation {done} of that "
                             f"slot has not completed: the hardware's parity wait would pass "
                             f"early", self.loc)

    def acquire(self, agent: Agent, who: str) -> None:
        done = self.event.completed[self.slot]
        if done > self.gen + 1:
            raise EventError(f"{who} waits {self.describe()}, but the slot already completed "
                             f"generation {done - 1}: the hardware's parity wait cannot tell "
                             f"them apart", self.loc)
        join(agent.clock, self.event.phase_clocks[self.slot][self.gen])

    def describe(self) -> str:
        return f"{self.event.label(self.slot)} generation {self.gen}"

    def detail(self) -> str:
        e = self.event
        return (f"{self.describe()} ({e.arrivals[self.slot]}/{e.expected} arrivals on "
                f"generation {e.completed[self.slot] - (1 if e.ready else 0)})")


class FutureWait:
    def __init__(self, fut: Future, loc) -> None:
        self.fut, self.loc = fut, loc

    def ready(self) -> bool:
        return self.fut.done

    def check(self, who: str) -> None:
        pass

    def acquire(self, agent: Agent, who: str) -> None:
        join(agent.clock, self.fut.clock)

    def describe(self) -> str:
        return f"future {self.fut.var} ({self.fut.kind} issued at {self.fut.loc})"

    detail = describe


class Barrier:
    """The instances of a role meeting before a collective statement."""

    def __init__(self, expected: int, loc) -> None:
        self.expected, self.loc = expected, loc
        self.arrived: list = []
        self.clock: dict = {}
        self.items: list = []

    def arrive(self, agent: Agent, item) -> None:
        join(self.clock, agent.release())
        self.arrived.append(agent)
        self.items.append(item)


class BarrierWait:
    def __init__(self, barrier: Barrier, loc) -> None:
        self.barrier, self.loc = barrier, loc

    def ready(self) -> bool:
        return len(self.barrier.arrived) >= self.barrier.expected

    def check(self, who: str) -> None:
        pass

    def acquire(self, agent: Agent, who: str) -> None:
        join(agent.clock, self.barrier.clock)

    def describe(self) -> str:
        b = self.barrier
        return f"the role's other instances at a barrier ({len(b.arrived)}/{b.expected} arrived)"

    detail = describe


class NamedBarrierState:
    """Hardware named barrier `id` (`__bar_sync` / `__bar_arrive`), shared by the block.

    Arrivals count threads: a role instance adds all its threads. A generation
    completes when the arrivals reach the count the arrivals name (they must all
    name the same one); the next arrival starts the next generation. `sync`
    waits for the generation it arrived in; `arrive` does not wait. A completed
    generation orders everything its arrivers did before arriving before what
    its `sync`ers do after it.
    """

    def __init__(self, bid: int) -> None:
        self.bid = bid
        self.count = 0  # threads the generation being filled needs (0: none arrived yet)
        self.arrived = 0
        self.completed = 0
        self.pending: dict = {}
        self.clocks: list[dict] = []

    def arrive(self, threads: int, count: int, clock: dict, loc, who: str) -> int:
        """One instance's arrival; returns the generation it counts toward."""
        if self.arrived and count != self.count:
            raise EventError(f"{who} arrives on named barrier {self.bid} counting {count} "
                             f"threads, but the generation being filled counts {self.count} "
                             f"({self.arrived} arrived)", loc)
        if self.arrived + threads > count:
            raise EventError(f"{who} brings {threads} threads to named barrier {self.bid}, "
                             f"{self.arrived} of {count} already arrived: the count is exceeded",
                             loc)
        self.count = count
        join(self.pending, clock)
        gen = self.completed
        self.arrived += threads
        if self.arrived == count:
            self.clocks.append(self.pending)
            self.pending, self.arrived, self.count = {}, 0, 0
            self.completed += 1
        return gen


class NamedBarrierWait:
    def __init__(self, bar: NamedBarrierState, gen: int, loc) -> None:
        self.bar, self.gen, self.loc = bar, gen, loc

    def ready(self) -> bool:
        return self.bar.completed > self.gen

    def check(self, who: str) -> None:
        pass

    def acquire(self, agent: Agent, who: str) -> None:
        join(agent.clock, self.bar.clocks[self.gen])

    def describe(self) -> str:
        return f"named barrier {self.bar.bid} generation {self.gen}"

    def detail(self) -> str:
        b = self.bar
        return f"{self.describe()} ({b.arrived}/{b.count} threads arrived)"


class JoinWait:
    """A parallel region (or an instance) waiting for the threads it spawned."""

    def __init__(self, threads: list, loc) -> None:
        self.threads, self.loc = threads, loc

    def ready(self) -> bool:
        return all(t.done for t in self.threads)

    def check(self, who: str) -> None:
        pass

    def acquire(self, agent: Agent, who: str) -> None:
        for t in self.threads:
            join(agent.clock, t.clock)

    def describe(self) -> str:
        return "its spawned roles to finish"

    detail = describe
