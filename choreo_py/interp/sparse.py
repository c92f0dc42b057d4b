"""The 2:4 structured-sparse A operand of `mma.row.row.sp` (ir.SparseMma), expanded to
the dense matrix it stands for.

The packed tile holds, for each group of four columns of a row of A, the group's two
kept values in column order; the u8 metadata holds one nibble per group (row r, byte
j: group 2j in bits 0..3, group 2j + 1 in bits 4..7), i0 | i1 << 2 with i0, i1 the
columns (0..3) of the two values within the group. A nibble whose two indices are equal
(0b0000, 0b0101, 0b1010, 0b1111) does not describe two values: the hardware's result is
undefined for it, and the interpreter reports it.
"""
from __future__ import annotations

import torch

from .errors import InterpError


def expand(packed: torch.Tensor, meta: torch.Tensor, loc) -> torch.Tensor:
    """The dense [M, K] A of a packed [M, K/2] tile and its u8 [M, K/8] metadata."""
    m, half = packed.shape
    groups = half // 2
    if tuple(meta.shape) != (m, groups // 2) or half % 4:
        raise InterpError(f"sparse MMA metadata of shape {list(meta.shape)} for a packed A of "
                          f"{list(packed.shape)} (expected [{m}, {groups // 2}])", loc)
    if torch.isnan(meta).any():
        raise InterpError("a sparse MMA reads metadata that was never loaded", loc)
    codes = meta.to(torch.int64)
    shift = 4 * (torch.arange(groups) % 2)
    nibble = (codes[:, torch.arange(groups) // 2] >> shift) & 0xF        # [M, groups]
    i0, i1 = nibble & 3, nibble >> 2
    bad = (i0 == i1).nonzero()
    if len(bad):
        r, g = (int(x) for x in bad[0])
        raise InterpError(f"sparse MMA metadata of row {r}, group {g} is "
                          f"0b{int(nibble[r, g]):04b}: both kept values in one column "
                          "(the result is undefined)", loc)
    dense = torch.zeros(m, 4 * groups, dtype=torch.float32)
    packed = packed.to(torch.float32)
    base = 4 * torch.arange(groups)
    rows = torch.arange(m)[:, None]
    dense[rows, base + i0] = packed[:, 0::2]
    dense[rows, base + i1] = packed[:, 1::2]
    return dense
