"""Shared-memory swizzles, shared by TMA and the MMA descriptor decoders (sm_90 and sm_100).

The hardware swizzles 16-byte chunks by XOR-ing address bits [4, 4+B) with
bits [7, 7+B) of the *shared address* (CUTLASS Swizzle<B,4,3>; PTX ISA
"tensor copy" swizzle modes): 128B -> B=3, 64B -> B=2, 32B -> B=1. Because
the absolute address is used, a tile must start at a multiple of the
pattern's period (1024/512/256 bytes) for its rows to line up with the
atoms; advancing a descriptor by 32 bytes inside a 128-byte row (the next
K=16 slice) keeps the pattern, as CUTLASS's descriptor iterators rely on.
"""
from __future__ import annotations

import numpy as np

SWIZZLE_BITS = {0: 0, 32: 1, 64: 2, 128: 3}


def swizzle(addr, span: int):
    """Swizzled byte address(es) for a swizzle of `span` bytes (0: none)."""
    b = SWIZZLE_BITS[span]
    if b == 0:
        return addr
    mask = (1 << b) - 1
    if isinstance(addr, np.ndarray):
        a = addr.astype(np.int64)
        return a ^ (((a >> 7) & mask) << 4)
    return addr ^ (((addr >> 7) & mask) << 4)


def period(span: int) -> int:
    """Bytes after which the pattern repeats (the alignment a swizzled tile needs)."""
    return 128 << SWIZZLE_BITS[span] if span else 16
