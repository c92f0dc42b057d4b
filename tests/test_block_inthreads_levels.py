"""Two parallel-structure forms (sema/kernel.py, sema/host.py): `inthreads` in a block's own
code is an `if` on the block's indices, and a `: group` level inside a flattened
`: group-4` is the warp of each thread within its group-4. The interpreter, the PTX
emulator (both targets) and ptxas see the same kernels."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file

CO = Path(__file__).parent / "co"
LEVELS = CO / "nested_group_levels.co"
INTHREADS = CO / "block_inthreads.co"
ENGINES = ["interpreter", "sm_90a", "sm_100a"]


def _run(path: Path, engine: str, x: torch.Tensor) -> torch.Tensor:
    if engine == "interpreter":
        choreo_py.interpret(str(path))(x)
    else:
        choreo_py.emulate_program(str(path), target=engine)(x)
    return x


def _levels_want() -> torch.Tensor:
    want = torch.full((2, 128), -1, dtype=torch.int32)
    for b in range(2):
        for q in range(3):
            for t in range(20):
                want[b, q * 32 + t] = b * 1000 + q * 100 + t
    return want


def _inthreads_want() -> torch.Tensor:
    want = torch.zeros((4, 8), dtype=torch.int32)
    for p in range(4):
        v = p * 10 + (1 if p != 2 else 0)
        if p != 2:
            want[p, 0] = v
        want[p] += v
    return want


@pytest.mark.parametrize("engine", ENGINES)
def test_groups_inside_a_group4(engine) -> None:
    x = _run(LEVELS, engine, torch.full((2, 128), -1, dtype=torch.int32))
    assert torch.equal(x, _levels_want())


@pytest.mark.parametrize("engine", ENGINES)
def test_inthreads_in_block_code(engine) -> None:
    x = _run(INTHREADS, engine, torch.zeros((4, 8), dtype=torch.int32))
    assert torch.equal(x, _inthreads_want())


def test_the_ir() -> None:
    levels = compile_file(str(LEVELS), "ir", "sm_90a")
    assert "if w__t % 128 / 32 < 3 {" in levels and "if w__t % 32 < 20 {" in levels
    assert "if p < 2 || p == 3 {" in compile_file(str(INTHREADS), "ir", "sm_90a")


@pytest.mark.ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("path", [LEVELS, INTHREADS], ids=["levels", "inthreads"])
def test_assembles(target, path) -> None:
    from choreo_py.runtime.build import ptxas

    assert ptxas(compile_file(str(path), "ptx", target), target)[0] is not None


@pytest.mark.parametrize("body, message", [
    ("    inthreads (p < 2) {\n      parallel t by 4 : thread { x.at(p, t) = t; }\n    }\n",
     "'inthreads' around parallel levels of thread groups"),
    ("    parallel g by 1 : group-4 {\n      parallel q by 5 : group {\n"
     "        parallel t by 4 : thread { x.at(p, t) = t; }\n      }\n    }\n",
     "a nested group level that is not one dimension of at most 4 groups"),
])
def test_forms_left_refused(tmp_path, body, message) -> None:
    path = tmp_path / "r.co"
    path.write_text("__co__ void r(s32 [4, 8] x) {\n  parallel p by 4 : block {\n" + body
                    + "  }\n}\n")
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ir", "sm_90a")
    assert info.value.message.startswith(message), info.value.render()
