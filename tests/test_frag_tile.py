"""A declared f32 fragment of a 64-row accumulator's shape that no MMA writes
(`frag f32[64, N] s {v};` in a warpgroup): passes/fragment_layout gives it the
accumulator's register layout, which no statement observes, so fills, `apply`,
reductions and `mma.store` lower as for an accumulator. tests/co/frag_tile.co runs in
the interpreter and the sm_90a emulator and assembles; sm_100a (accumulators in tensor
memory, allocated by the role that issues MMAs) refuses it by name."""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "frag_tile.co")


def _want() -> torch.Tensor:
    i, j = torch.arange(64).view(64, 1), torch.arange(64).view(1, 64)
    s = torch.where(j > i, 2.0, 1.0)
    return s + s.max(1, keepdim=True).values


def test_frag_tile_in_the_interpreter():
    y = torch.zeros(64, 64)
    choreo_py.interpret(PATH, {"Y": y}, target="sm_90a")
    assert torch.equal(y, _want())


@pytest.mark.emu
@pytest.mark.parametrize("schedule", ["round_robin", "random"])
def test_frag_tile_in_the_emulator(schedule):
    from choreo_py.emu.api import emulate

    y = torch.zeros(64, 64)
    emulate(PATH, {"Y": y}, target="sm_90a", schedule=schedule, seed=1)
    assert torch.equal(y, _want())


def test_frag_tile_assembles_for_sm_90a_and_is_refused_for_sm_100a():
    text = compile_file(PATH, "ptx", "sm_90a")
    if find_ptxas() is not None:
        ptxas(text, "sm_90a")
    with pytest.raises(ChoreoError) as info:
        compile_file(PATH, "ptx", "sm_100a")
    assert "MMA fragments outside the role that issues the MMAs" in info.value.message
    assert info.value.loc.line == 7
