"""Cooperative scheduling of the threads of one block, and of pending futures.

Every role instance (and the block's own code, and each parallel instance
before it reaches its roles) is a Python generator. It runs until it yields
a wait condition that does not hold (then it is blocked until it does) or a
preemption point (after a trigger or an asynchronous issue).

Two policies:
- "round_robin": a thread runs until it blocks; the next runnable thread in
  creation order runs next. A thread's pending futures complete when it
  blocks or finishes: completion is always later than issue, but
  deterministic.
- "random" (seeded): the next thread is a random runnable one; at a
  preemption point the running thread is switched out with some
  probability; each future completes after a random number (1..max_delay)
  of scheduling steps, or earlier when nothing else can run.

MMA futures of one thread complete in issue order (wgmma groups retire in
order); copies complete in any order. All threads blocked with no pending
future is a deadlock.
"""
from __future__ import annotations

import random
from typing import Optional

from .errors import DeadlockError, StepLimitError
from .sync import Agent, Future, JoinWait

PREEMPT = object()


class Thread(Agent):
    """One thread of control: a role instance, a parallel instance, or the block."""

    def __init__(self, name: str, parent: Optional["Thread"], env: dict, types: dict) -> None:
        super().__init__(name, parent.release() if parent is not None else None)
        self.env = env
        self.types = types
        self.frags: dict = {}
        self.futures: dict[str, Future] = {}
        self.mma_inflight: list[Future] = []
        self.implicit: dict = {}  # (event, slot) -> next generation of plain waits
        self.children: list[Thread] = []
        self.gen = None
        self.cond = None
        self.done = False
        self.loc = None
        self.instance: Optional[tuple[str, int]] = None
        self.group: tuple = (None, 1)  # (key, instances) for collective statements
        self.leader = True  # the instance that issues the group's `leader_only` copies
        self.occurrences: dict = {}
        self.threads = 1  # hardware threads this thread of control stands for


class Scheduler:
    def __init__(self, policy: str, rng: random.Random, step_limit: int,
                 max_delay: int = 8, preempt: float = 0.3) -> None:
        if policy not in ("round_robin", "random"):
            raise ValueError(f"unknown schedule '{policy}'")
        self.policy = policy
        self.rng = rng
        self.step_limit = step_limit
        self.max_delay = max_delay
        self.preempt = preempt
        self.threads: list[Thread] = []
        self.pending: list[Future] = []
        self.ticks = 0
        self.steps = 0
        self._last = -1

    # -- bookkeeping called by the executor
    def add(self, th: Thread) -> None:
        self.threads.append(th)

    def issue(self, fut: Future) -> None:
        fut.due = self.ticks + self.rng.randint(1, self.max_delay)
        self.pending.append(fut)

    def step(self, loc) -> None:
        self.steps += 1
        if self.steps > self.step_limit:
            raise StepLimitError(f"step limit of {self.step_limit} statements exceeded "
                                 f"(a runaway loop?)", loc, self._positions())

    def complete(self, fut: Future) -> None:
        """Completes `fut` (and, for ordered futures, those issued before it)."""
        if fut.done:
            return
        if fut.order_key is not None:
            for f in list(self.pending):
                if f is fut:
                    break
                if f.order_key == fut.order_key:
                    self.complete(f)
        self.pending.remove(fut)
        fut.action(fut)
        fut.done = True
        for b in fut.bindings:
            b.future_done(fut)

    # -- the loop
    def run(self) -> None:
        while True:
            self.ticks += 1
            if self.ticks > self.step_limit:
                raise StepLimitError(f"step limit of {self.step_limit} scheduling steps exceeded",
                                     None, self._positions())
            if self.policy == "random":
                due = [f for f in self.pending if f.due <= self.ticks]
                self.rng.shuffle(due)
                for f in due:
                    self.complete(f)
            th = self._pick()
            if th is not None:
                self._resume(th)
            elif self.pending:
                f = self.pending[0] if self.policy == "round_robin" else self.rng.choice(self.pending)
                self.complete(f)
            elif all(t.done for t in self.threads):
                return
            else:
                self._deadlock()

    def _pick(self) -> Optional[Thread]:
        runnable = [i for i, t in enumerate(self.threads)
                    if not t.done and (t.cond is None or t.cond.ready())]
        if not runnable:
            return None
        if self.policy == "random":
            i = self.rng.choice(runnable)
        else:
            i = next((j for j in runnable if j > self._last), runnable[0])
        self._last = i
        return self.threads[i]

    def _resume(self, th: Thread) -> None:
        th.cond = None
        while True:
            try:
                req = next(th.gen)
            except StopIteration:
                th.done = True
                self._settle(th)
                return
            if req is PREEMPT:
                if self.policy == "random" and self.rng.random() < self.preempt:
                    return
                continue
            if not req.ready():
                th.cond = req
                self._settle(th)
                return

    def _settle(self, th: Thread) -> None:
        """Round-robin: the futures a thread issued complete once it stops running."""
        if self.policy == "round_robin":
            for f in [f for f in self.pending if f.issuer is th]:
                self.complete(f)

    # -- reports
    def _positions(self) -> list[tuple[str, object]]:
        return [(f"role {t.name} is at this statement", t.loc)
                for t in self.threads if not t.done and t.loc is not None]

    def _deadlock(self) -> None:
        stuck = [t for t in self.threads if not t.done]
        waiting = [t for t in stuck if not isinstance(t.cond, JoinWait)] or stuck
        parts = [f"role {t.name} waits {t.cond.describe()} at {t.loc}" for t in waiting]
        notes = [(f"role {t.name} waits {t.cond.detail()}", t.loc) for t in waiting]
        raise DeadlockError("deadlock: " + "; ".join(parts), waiting[0].loc, notes)
