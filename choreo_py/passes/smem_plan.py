"""Shared-memory planning: an offset for every shared buffer and event.

Alignment: 1024 bytes for 128B-swizzled buffers (the swizzle pattern repeats
every 8 rows of 128 bytes and TMA/MMA descriptors assume the pattern starts
at such a boundary), 512/256 for 64B/32B swizzles, 128 bytes otherwise (TMA
destinations), 8 bytes for mbarriers. Buffers are placed largest-alignment
first, in declaration order within an alignment, so the layout is stable.
The total is checked against the target's limit by passes/smem_limit, after
the target's own additions (passes/mma_barriers).
"""
from __future__ import annotations

from .. import ir

_SWIZZLE_ALIGN = {128: 1024, 64: 512, 32: 256}
BARRIER_BYTES = 8


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def plan(kernel: ir.Kernel) -> int:
    """Offsets for the kernel's shared buffers and events; returns the bytes used."""
    shared = [b for b in kernel.buffers if b.storage == "shared"]
    order = sorted(enumerate(shared), key=lambda t: (-_SWIZZLE_ALIGN.get(t[1].swizzle, 128), t[0]))
    offset = 0
    for _, b in order:
        offset = _align(offset, _SWIZZLE_ALIGN.get(b.swizzle, 128))
        b.offset = offset
        offset += b.nbytes
    offset = _align(offset, BARRIER_BYTES)
    for e in kernel.events:
        e.offset = offset
        offset += BARRIER_BYTES * (e.slots or 1)
    kernel.smem_total = offset
    return offset


def run(kernel: ir.Kernel, target=None) -> None:
    """The same on every target: alignments are TMA's and the swizzles'."""
    plan(kernel)
