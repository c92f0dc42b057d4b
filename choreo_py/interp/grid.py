"""The blocks of a cooperative launch, run together: its grid-wide barrier.

A kernel with `sync.barrier : block` in a `: block<cooperative>` launch
(ir.GridSync) has every block's thread in one scheduler (runner.py), so that a
block waits at the barrier while the others run up to it. Each barrier is a
generation: the n-th GridSync a block reaches is the n-th meeting of all
blocks, which carries every block's earlier writes to all of them (their
clocks joined, as a role barrier's are).
"""
from __future__ import annotations

from .sync import Barrier, BarrierWait


class GridBarrier:
    def __init__(self, blocks: int) -> None:
        self.blocks = blocks
        self.generations: dict[int, Barrier] = {}

    def at(self, generation: int, loc) -> Barrier:
        return self.generations.setdefault(generation, Barrier(self.blocks, loc))


class GridWait(BarrierWait):
    def describe(self) -> str:
        b = self.barrier
        return f"the other blocks at a grid-wide barrier ({len(b.arrived)}/{b.expected} arrived)"

    detail = describe


def has_grid_sync(kernel) -> bool:
    from .. import ir

    return kernel.cooperative and any(isinstance(s, ir.GridSync) for s in ir.walk(kernel.body))
