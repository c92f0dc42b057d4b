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


class VoteLog:
    """The outcomes of every `vote.sync.any` a strict emulator run executes, as
    (PTX site, warp, held) in execution order: the correction role's row votes (pass
    tmem-row-vote), whose `held` False is a warp that skips its rescale. Wraps the
    emulator's decoder of the instruction from outside (test-side instrumentation)."""

    def __init__(self, monkeypatch) -> None:
        from choreo_py.emu import isa, isa_table
        from choreo_py.emu.operands import operand_reader
        isa._loaded()
        original = isa_table.DECODERS["vote.sync.any"]
        self.votes: list = []

        def counting(inst):
            from choreo_py.emu.isa_support import machine
            ex = original(inst)
            p = operand_reader(inst.operands[1], "pred", machine())

            def run(w):
                import numpy as np
                self.votes.append((inst.idx, id(w), bool(np.asarray(p(w), bool)[w.mask].any())))
                return ex(w)
            return run
        monkeypatch.setitem(isa_table.DECODERS, "vote.sync.any", counting)

    def per_step(self) -> list:
        """[(skips, votes)] for the n-th vote of each (site, warp): the n-th KV step of a
        block that runs one item."""
        seq: dict = {}
        for site, warp, held in self.votes:
            seq.setdefault((site, warp), []).append(held)
        steps = max(map(len, seq.values()), default=0)
        return [(sum(not s[n] for s in seq.values() if len(s) > n),
                 sum(1 for s in seq.values() if len(s) > n)) for n in range(steps)]
