"""What a kernel uses of the GPU, read from `ptxas -v`: registers, spills, shared memory.

ptxas reports, per entry function, lines such as

    ptxas info    : Function properties for gemm
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 168 registers, used 2 barriers, 16 bytes smem

The generated kernels take their shared memory dynamically (the size is
only known at launch, from the shared-memory plan), so `shared_bytes` adds
the plan's dynamic bytes to what ptxas counts as static.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBERS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "barriers": re.compile(r"used (\d+) barriers"),
    "static_smem": re.compile(r"(\d+) bytes smem"),
    "stack": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
}


@dataclass(frozen=True)
class Resources:
    registers: int
    spill_stores: int
    spill_loads: int
    stack: int
    barriers: int
    static_smem: int
    dynamic_smem: int

    @property
    def spills(self) -> int:
        """Bytes spilled to local memory (stores + loads); 0 for a kernel that fits."""
        return self.spill_stores + self.spill_loads

    @property
    def shared_bytes(self) -> int:
        return self.static_smem + self.dynamic_smem

    def line(self) -> str:
        """One line, as `choreo compile --emit cubin` prints it."""
        return (f"{self.registers} registers, {self.spill_stores} bytes spill stores, "
                f"{self.spill_loads} bytes spill loads, {self.stack} bytes stack, "
                f"{self.shared_bytes} bytes shared memory ({self.dynamic_smem} dynamic), "
                f"{self.barriers} barriers")


def parse_ptxas_log(log: str, dynamic_smem: int = 0) -> Resources:
    """The resources of the (single) entry function in a `ptxas -v` log; a number
    ptxas does not print (no barriers, no static shared memory) is 0."""
    found = {}
    for key, pattern in _NUMBERS.items():
        m = pattern.search(log)
        found[key] = int(m.group(1)) if m else 0
    if not _NUMBERS["registers"].search(log):
        raise ValueError("no 'Used N registers' line in the ptxas log")
    return Resources(dynamic_smem=dynamic_smem, **found)
