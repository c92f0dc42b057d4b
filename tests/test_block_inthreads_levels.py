"""Parallel-structure forms (sema/role_forms.py, sema/host.py): `inthreads` in a block's own
code is an `if` on the block's indices; a `: group` level inside a flattened `: group-4` is
the warp of each thread within its group-4; a role of single threads whose condition reads
a run-time value guards its body with that part. The interpreter, the PTX emulator (both
targets) and ptxas see the same kernels."""
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
GUARDED = CO / "role_run_time_guard.co"
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


def test_a_run_time_condition_guards_the_role_body() -> None:
    ir = compile_file(str(GUARDED), "ir", "sm_90a")
    assert "role (g__t / 128 == 0) = {0, 1, 2," in ir and "126, 127} {\n      if g__t % 128 < limit {\n        wait e" in ir


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_guarded_waits_complete(target) -> None:
    """Strict runs (races and deadlocks are errors) for no, some and every thread of group-4
    0 waiting, in the interpreter and the emulator; in the emulator, the warps that skip the
    wait run fewer instructions (the guard is evaluated at run time, not dropped)."""
    from choreo_py.emu.api import EmuStats

    ran = {}
    for limit in (0, 40, 128):
        choreo_py.interpret(str(GUARDED)).guarded(limit)
        ran[limit] = EmuStats()
        choreo_py.emulate_program(str(GUARDED), target=target, stats=ran[limit]).guarded(limit)
    assert ran[0].instructions < ran[40].instructions < ran[128].instructions


@pytest.mark.ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("path", [LEVELS, INTHREADS, GUARDED], ids=["levels", "inthreads", "guarded"])
def test_assembles(target, path) -> None:
    from choreo_py.runtime.build import ptxas

    assert ptxas(compile_file(str(path), "ptx", target), target)[0] is not None


@pytest.mark.parametrize("body, message", [
    ("    inthreads (p < 2) {\n      parallel t by 4 : thread { x.at(p, t) = t; }\n    }\n",
     "'inthreads' around parallel levels of thread groups"),
    ("    parallel g by 1 : group-4 {\n      parallel q by 5 : group {\n"
     "        parallel t by 4 : thread { x.at(p, t) = t; }\n      }\n    }\n",
     "a nested group level that is not one dimension of at most 4 groups"),
    ("    shared event e;\n    parallel g by 2 : group-4, t by 128 : thread {\n"
     "      inthreads.async (g == 0 && t < n) { wait e; }\n"
     "      inthreads.async (g == 1 && t < n) { if (t > 3) { trigger e; } }\n    }\n",
     "an 'inthreads' condition on run-time values around a trigger under an 'if' or a "
     "'while', an operation of the whole role"),
])
def test_forms_left_refused(tmp_path, body, message) -> None:
    path = tmp_path / "r.co"
    path.write_text("__co__ void r(s32 [4, 8] x, int n) {\n  parallel p by 4 : block {\n" + body
                    + "  }\n}\n")
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ir", "sm_90a")
    assert info.value.message.startswith(message), info.value.render()
