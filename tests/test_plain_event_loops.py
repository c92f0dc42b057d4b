"""Order-less waits (`wait e`) inside loops: the generation a wait is for is the number
of waits its role made on the event before, counted at run time by a phase register
(lowering/core/events.plain_phases). tests/co/plain_event_loop.co passes one staging
tile between a loading and a storing role three times; the interpreter, the emulator
(three schedules, both targets; a phase that did not advance is an mbarrier misuse
there) and ptxas check it."""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "plain_event_loop.co")


def _input():
    return torch.randn(384, 64, generator=torch.Generator().manual_seed(0)).half()


def test_plain_waits_in_loops_in_the_interpreter():
    a = _input()
    c = torch.zeros_like(a)
    choreo_py.interpret(PATH, {"A": a, "C": c}, target="sm_90a")
    assert torch.equal(c, a)


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("schedule", ["round_robin", "random", "reverse"])
def test_plain_waits_in_loops_in_the_emulator(target, schedule):
    from choreo_py.emu.api import emulate

    a = _input()
    c = torch.zeros_like(a)
    emulate(PATH, {"A": a, "C": c}, target=target, schedule=schedule, seed=1)
    assert torch.equal(c, a)


def test_phase_register_flips_after_each_wait():
    text = compile_file(PATH, "pyptx", "sm_90a")
    assert text.count("ptx.inst.xor.b32(full_phase") == 1
    assert text.count("ptx.inst.xor.b32(empty_phase") == 1


def test_plain_waits_in_loops_assemble():
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in ("sm_90a", "sm_100a"):
        ptxas(compile_file(PATH, "ptx", target), target)
