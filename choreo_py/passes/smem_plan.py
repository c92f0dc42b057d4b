"""Shared-memory planning: an offset for every shared buffer and event.

Alignment: 1024 bytes for 128B-swizzled buffers (the swizzle pattern repeats
every 8 rows of 128 bytes and TMA/MMA descriptors assume the pattern starts
at such a boundary), 512/256 for 64B/32B swizzles, 128 bytes otherwise (TMA
destinations), 8 bytes for mbarriers. Buffers are placed largest-alignment
first, in declaration order within an alignment, so the layout is stable.
The total is checked against the target's per-block limit.
"""
from __future__ import annotations

from .. import ir
from ..diagnostics import ChoreoError

SMEM_LIMIT = {"sm_90a": 227 * 1024, "sm_100a": 227 * 1024}
_SWIZZLE_ALIGN = {128: 1024, 64: 512, 32: 256}
BARRIER_BYTES = 8


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def plan(kernel: ir.Kernel, target: str = "sm_90a") -> int:
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
    limit = SMEM_LIMIT.get(target, 227 * 1024)
    if offset > limit:
        parts = ", ".join(f"{b.name} {b.nbytes} B" for b in shared)
        raise ChoreoError(f"the block needs {offset} bytes of shared memory, more than the "
                          f"{limit} bytes {target} allows ({parts})", kernel.loc)
    return offset
