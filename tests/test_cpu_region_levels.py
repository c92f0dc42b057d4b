"""Parallel levels inside a `: device(cpu)` region run as loops (sema/cpu_region.py) when
their iterations never wait for each other; otherwise they stay refused by name."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file

FILL = Path(__file__).parent / "co" / "cpu_region_levels.co"  # x.at(p, q) = p * 10 + q
WANT = (torch.arange(4)[:, None] * 10 + torch.arange(3)[None, :]).int()


def test_levels_become_loops_in_the_ir() -> None:
    ir = compile_file(str(FILL), "ir", "sm_90a")
    assert "device cpu" in ir and "for p in 0..4 {\n    for q in 0..3 {" in ir


@pytest.mark.parametrize("engine", ["interpreter", "sm_90a", "sm_100a"])
def test_every_iteration_runs(engine) -> None:
    x = torch.full((4, 3), -1, dtype=torch.int32)
    if engine == "interpreter":
        choreo_py.interpret(str(FILL))(x)
    else:
        choreo_py.emulate_program(str(FILL), target=engine)(x)
    assert torch.equal(x, WANT)


@pytest.mark.ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_the_module_assembles(target) -> None:
    from choreo_py.runtime.build import ptxas

    ptx = compile_file(str(FILL), "ptx", target)
    assert ".entry" not in ptx  # the region runs on the host: no kernel
    assert ptxas(ptx, target)[0] is not None


@pytest.mark.parametrize("inner", [
    "    parallel p by 4 : block {\n      shared s32 [4] s;\n      x.at(p, 0) = p;\n    }\n",
    "    parallel p by 4 : thread {\n      x.at(p, 0) = p;\n      sync.shared;\n    }\n",
])
def test_levels_that_synchronise_stay_refused(tmp_path, inner) -> None:
    path = tmp_path / "r.co"
    path.write_text("__co__ void r(s32 [4, 3] x) {\n  parallel.async by 1 : device(cpu) {\n"
                    + inner + "  }\n}\n")
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ir", "sm_90a")
    assert info.value.message.startswith(("parallel levels inside a ': device(cpu)' region",
                                          "the parallel level ': block' inside a block")), \
        info.value.render()
