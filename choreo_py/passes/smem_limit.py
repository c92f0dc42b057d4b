"""The shared-memory plan must fit the target's per-block limit.

A launch asking for more dynamic shared memory than the target allows
fails at run time (cudaFuncSetAttribute refuses it); the program is refused
here instead, naming what takes the space.
"""
from __future__ import annotations

from .. import ir
from ..diagnostics import ChoreoError
from ..targets import Target


def run(kernel: ir.Kernel, target: Target) -> None:
    used = kernel.smem_total or 0
    if used > target.smem_limit:
        shared = [b for b in kernel.buffers if b.storage == "shared"]
        parts = ", ".join(f"{b.name} {b.nbytes} B" for b in shared)
        raise ChoreoError(f"the block needs {used} bytes of shared memory, more than the "
                          f"{target.smem_limit} bytes {target.name} allows ({parts})", kernel.loc)
