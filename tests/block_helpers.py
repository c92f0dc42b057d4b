"""What the block-accumulator tests share: ptxas's spill line and a strict emulator run.

(test_block_accumulators.py, test_block_acc_writes.py, test_block_operands.py)
"""
from __future__ import annotations

import re


def assert_no_spills(ptx: str, target: str = "sm_100a") -> None:
    """ptxas assembles `ptx` and reports no spill stores or loads."""
    from choreo_py.runtime import build
    _, log = build.ptxas(ptx, target, verbose=True)
    assert re.search(r"0 bytes spill stores, 0 bytes spill loads", log), log


def emulate_strict(path, tensors: dict, schedule: str, seed: int = 1) -> list:
    """Runs `path`'s sm_100a PTX in the emulator, strict, in place on `tensors`; the notes
    of the run (strict: none is expected, nothing let pass and no flagged path taken)."""
    from choreo_py.emu import EmuStats
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co
    stats = EmuStats()
    run_spec(from_co(str(path), "sm_100a"), tensors, schedule=schedule, seed=seed, strict=True,
             stats=stats)
    return stats.notes
