"""The CUDA limits sm_90a and sm_100a share, as the language's attributes meet them.

A block has at most 1,024 threads, an SM runs at most 2,048 threads and 32
blocks, and its register file holds 65,536 32-bit registers (a thread at most
255). `[[launch_bounds(...)]]` is range-checked here, where sema reads it;
passes/budget.py checks the block's threads and registers against the same
numbers once the IR exists, and the lowering checks an instruction's registers
against what a thread gets at entry (`entry_registers`).
"""
from __future__ import annotations

from ..diagnostics import ChoreoError

MAX_BLOCK_THREADS = 1024
MAX_SM_THREADS = 2048
MAX_SM_BLOCKS = 32
SM_REGISTERS = 65536
MAX_THREAD_REGS = 255
WARPGROUP = 128


def entry_registers(threads: int, blocks: int) -> int:
    """Registers per thread at entry when `blocks` blocks of `threads` share an SM
    (allocated per warp in units of 8)."""
    warps_threads = -(-threads // 32) * 32
    return min(MAX_THREAD_REGS, SM_REGISTERS // (blocks * warps_threads) // 8 * 8)


def check_region_threads(threads: int, detail: str, loc) -> None:
    """A thread region that sema analyses thread by thread (the roles its `inthreads` select,
    their guards) is refused before that analysis past the block's limit, which no target
    runs (passes/budget.py says the same of every block): the analysis costs per thread,
    and 65,536 groups of 128 threads are 8 million."""
    if threads > MAX_BLOCK_THREADS:
        raise ChoreoError(f"the block has {threads} threads{detail}, more than the "
                          f"{MAX_BLOCK_THREADS} a CUDA block may have", loc)


def check_launch_bounds(values: tuple, locs: tuple) -> None:
    """`[[launch_bounds(max_threads, min_blocks_per_sm)]]`: each given value in range."""
    limits = (("the threads of a block", MAX_BLOCK_THREADS),
              ("the blocks per SM", MAX_SM_BLOCKS))
    if len(values) > len(limits):
        raise ChoreoError(f"launch_bounds takes at most {len(limits)} values (threads of a "
                          f"block, blocks per SM), not {len(values)}", locs[len(limits)])
    for v, loc, (what, hi) in zip(values, locs, limits):
        if v is not None and not 1 <= v <= hi:
            raise ChoreoError(f"launch_bounds: {what} must be in [1, {hi}], not {v}", loc)
