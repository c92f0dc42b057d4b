"""Tensor memory's and tcgen05.mma's rules (PTX ISA 9.1, 9.7.16), below every stage that uses them.

The pass that plans tensor memory (passes/tmem_plan.py) places fragments by
these rules, and the sm_100a backend (lowering/sm100) encodes its
instructions by the same ones; neither imports the other, so the rules live
here, with the words both use for a region of the kernel's `ir.TmemMap`.
"""
from __future__ import annotations

from . import Frag, TmemRegion

ALLOC_UNIT = 32  # tcgen05.alloc columns come in powers of two from 32


def check_mma_shape(m: int, n: int) -> None:
    """Dense kind::f16, cta_group::1, no .ws: M in {64, 128}, K = 16 (Table 39).

    Table 39 lists N = 8..256 in steps of 8 for both M. CUTLASS (SM100_MMA_F16BF16_SS/TS)
    asks N % 16 == 0 when M = 128; we take the stricter rule, so every shape we emit is
    one both documents accept.
    """
    if m not in (64, 128):
        raise ValueError(f"tcgen05.mma cta_group::1 kind::f16: M must be 64 or 128, got {m}")
    step = 8 if m == 64 else 16
    if n % step or not step <= n <= 256:
        raise ValueError(f"tcgen05.mma M={m}: N must be a multiple of {step} in [{step}, 256], got {n}")


def alloc_columns(needed: int, limit: int = 512) -> int:
    """`tcgen05.alloc` column count: a power of two in [32, limit] (9.7.16.7.1)."""
    if needed > limit:
        raise ValueError(f"{needed} columns exceed the {limit} of tensor memory")
    n = ALLOC_UNIT
    while n < needed:
        n *= 2
    return n


def describe(r: TmemRegion, frag: Frag) -> str:
    """`acc_s[1] f32[64, 128] layout F lanes+16 cols 0..127 (128)`: a region in the plan's
    messages and in the backend's comment at the allocation."""
    rows, cols = frag.shape
    return (f"{r.frag}[{r.instance}] {frag.dtype}[{rows}, {cols}] layout {r.layout} "
            f"lanes+{r.lane} cols {r.col}..{r.col + r.ncols - 1} ({r.ncols})")
