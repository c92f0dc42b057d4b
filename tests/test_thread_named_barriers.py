"""`__bar_sync` / `__bar_arrive` between the threads of a `: thread` region (no roles):
a thread kernel's `bar.sync id, n` / `bar.arrive id, n`. tests/co/thread_named_barrier.co
has the first warp publish a shared row to the second through barrier 1 (arrive, no
wait); the interpreter, the emulator (both targets, three schedules) and ptxas check it,
and the corpus program the reference compiles this way assembles."""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.frontend import check_text
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "thread_named_barrier.co")
CORPUS = os.path.join(os.environ.get("CHOREO_SHARED", os.path.join(
    os.path.dirname(__file__), "..", "..", "shared")), "corpus", "tests", "gpu", "codegen",
    "cute", "barrier_builtins.co")


def _input():
    return torch.randn(64, generator=torch.Generator().manual_seed(0))


def test_threads_meet_at_named_barriers_in_the_interpreter():
    a = _input()
    b = torch.zeros_like(a)
    choreo_py.interpret(PATH, {"A": a, "B": b}, target="sm_90a")
    assert torch.equal(b, a.flip(0))


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("schedule", ["round_robin", "random", "reverse"])
def test_threads_meet_at_named_barriers_in_the_emulator(target, schedule):
    a = _input()
    b = torch.zeros_like(a)
    lib = choreo_py.emulate_program(PATH, target=target, schedule=schedule, seed=1)
    lib.thread_named_barrier(a, b)
    assert torch.equal(b, a.flip(0))


def test_named_barriers_are_bar_instructions():
    text = compile_file(PATH, "ptx", "sm_90a")
    assert "bar.arrive 1, 64;" in text
    assert "bar.sync 1, 64;" in text
    assert "bar.sync 2, 64;" in text


def test_a_count_of_part_of_a_warp_is_an_error():
    src = ("__co__ void k(global f32[64] A) {\n  parallel p by 64 : thread {\n"
           "    __bar_sync(1, 48);\n  }\n}\n")
    with pytest.raises(ChoreoError) as info:
        check_text(src, "t.co")
    assert "thread count 48" in info.value.message
    assert (info.value.loc.line, info.value.loc.col) == (3, 19)


def test_barrier_zero_is_refused_by_name(tmp_path):
    path = tmp_path / "t.co"
    path.write_text("__co__ void k(global f32[64] A) {\n  parallel p by 64 : thread {\n"
                    "    __bar_sync(0, 64);\n  }\n}\n")
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ptx", "sm_90a")
    assert "__bar_sync on barrier 0" in info.value.message
    assert info.value.loc.line == 3


@pytest.mark.parametrize("path", [PATH, CORPUS])
def test_thread_named_barriers_assemble(path):
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    if not os.path.exists(path):
        pytest.skip("the shared corpus is not present")
    for target in ("sm_90a", "sm_100a"):
        ptxas(compile_file(path, "ptx", target), target)
