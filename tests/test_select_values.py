"""`select(k, c0, c1, ...)` in an expression (choreo_py/sema/exprs._select): a
compile-time k names candidate k itself (a future: `c = select(1, a, b)` is another name
of `b`), a run-time k chooses among scalars. tests/co/select_values.co runs in the
interpreter and the emulator (both targets) and assembles; a run-time choice among
futures is refused by name."""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "select_values.co")
G = torch.arange(8, dtype=torch.int32).reshape(2, 4) + 1
CHOSEN = [[0, 1, 2, 3], [0, 10, 20, 30], [100, 101, 102, 103]]


def _check(lib) -> None:
    picked = torch.zeros(1, 4, dtype=torch.int32)
    lib.select_future(G, picked)
    assert picked.tolist() == [[5, 6, 7, 8]]
    for k, want in enumerate(CHOSEN):
        chosen = torch.zeros(1, 4, dtype=torch.int32)
        lib.select_scalar(chosen, k)
        assert chosen.tolist() == [want]


def test_select_in_the_interpreter():
    _check(choreo_py.interpret(PATH, target="sm_90a"))


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_select_in_the_emulator(target):
    _check(choreo_py.emulate_program(PATH, target=target))


def test_select_assembles():
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in ("sm_90a", "sm_100a"):
        ptxas(compile_file(PATH, "ptx", target), target)


def test_a_run_time_choice_among_futures_is_refused(tmp_path):
    path = tmp_path / "t.co"
    path.write_text("__co__ void k(global s32 [2, 4] g, global s32 [1, 4] o, int n) {\n"
                    "  parallel p by 1 : block {\n"
                    "    a = dma.copy g.subspan(1, 4).at(0, 0) => local;\n"
                    "    b = dma.copy g.subspan(1, 4).at(1, 0) => local;\n"
                    "    c = select(n, a, b);\n"
                    "    dma.copy c.data => o;\n  }\n}\n")
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ptx", "sm_90a")
    assert "'select' of futures or buffers by a run-time selector is not supported" \
        in info.value.message
    assert (info.value.loc.line, info.value.loc.col) == (5, 9)
