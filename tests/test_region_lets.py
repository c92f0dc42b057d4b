"""Scalar names a parallel region computes outside its `inthreads.async` roles
(lowering/core/roles._scalar_let): every thread computes them before the roles branch.
tests/co/region_lets.co (the tiles' rows from the block index, read by both roles) runs
in the interpreter and the emulator (both targets) and assembles; any other statement
outside the roles stays refused by name."""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "region_lets.co")


def _input():
    return torch.randn(512, 64, generator=torch.Generator().manual_seed(0)).half()


def test_region_lets_in_the_interpreter():
    a = _input()
    c = torch.zeros_like(a)
    choreo_py.interpret(PATH, {"A": a, "C": c}, target="sm_90a")
    assert torch.equal(c, a)


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("schedule", ["round_robin", "random"])
def test_region_lets_in_the_emulator(target, schedule):
    from choreo_py.emu.api import emulate

    a = _input()
    c = torch.zeros_like(a)
    emulate(PATH, {"A": a, "C": c}, target=target, schedule=schedule, seed=1)
    assert torch.equal(c, a)


def test_region_lets_assemble():
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in ("sm_90a", "sm_100a"):
        ptxas(compile_file(PATH, "ptx", target), target)


def test_a_copy_outside_the_roles_is_still_refused(tmp_path):
    src = open(PATH).read().replace("      second = first + 1;\n",
                                    "      second = first + 1;\n"
                                    "      tma.copy tile[0] => C.subspan(128, 64).at(0, 0);\n")
    path = tmp_path / "t.co"
    path.write_text(src)
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ptx", "sm_90a")
    assert "a statement of a parallel region outside its inthreads roles" in info.value.message
    assert info.value.loc.line == 10
