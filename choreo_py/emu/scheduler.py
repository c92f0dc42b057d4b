"""The orders in which a CTA's warps are interleaved.

Each order picks the next runnable warp and how many instructions it may
execute before the next pick (its quantum; a warp also stops when it
blocks). Asynchronous operations (TMA copies, bulk stores) complete after
a delay in executed instructions that the order also chooses, so that
different orders also move completions relative to the warps.

    round_robin  warps in id order, 8 instructions each; copies land 64 instructions later
    reverse      warps in reverse id order; copies land 512 instructions later
    greedy       the lowest-id runnable warp runs until it blocks; copies land only
                 when every warp waits (the latest point the program allows)
    random       a seeded random warp and quantum (1-32); copies land 1-1024 later
"""
from __future__ import annotations

import random as _random

SCHEDULES = ("round_robin", "reverse", "greedy", "random")
NEVER = 1 << 60


class RoundRobin:
    quantum = 8
    delay_steps = 64

    def __init__(self, seed: int = 0) -> None:
        self.last = -1

    def pick(self, runnable: list):
        for w in runnable:
            if w.warp_id > self.last:
                self.last = w.warp_id
                return w, self.quantum
        w = runnable[0]
        self.last = w.warp_id
        return w, self.quantum

    def delay(self) -> int:
        return self.delay_steps


class Reverse(RoundRobin):
    delay_steps = 512

    def __init__(self, seed: int = 0) -> None:
        self.last = 1 << 30

    def pick(self, runnable: list):
        for w in reversed(runnable):
            if w.warp_id < self.last:
                self.last = w.warp_id
                return w, self.quantum
        w = runnable[-1]
        self.last = w.warp_id
        return w, self.quantum


class Greedy:
    def __init__(self, seed: int = 0) -> None:
        pass

    def pick(self, runnable: list):
        return runnable[0], 1 << 20

    def delay(self) -> int:
        return NEVER


class Random:
    def __init__(self, seed: int = 0) -> None:
        self.rng = _random.Random(seed)

    def pick(self, runnable: list):
        return self.rng.choice(runnable), self.rng.randint(1, 32)

    def delay(self) -> int:
        return self.rng.randint(1, 1024)


ORDERS = {"round_robin": RoundRobin, "reverse": Reverse, "greedy": Greedy, "random": Random}


def make(name: str, seed: int = 0):
    try:
        return ORDERS[name](seed)
    except KeyError:
        raise ValueError(f"unknown schedule '{name}' (one of {', '.join(SCHEDULES)})") from None
