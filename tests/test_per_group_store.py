"""A TMA store whose tile depends on the thread group, in a role of several groups.

`tma.copy out_s[p - 1] => C...at(t * 2 + p - 1, 0)` in `inthreads.async (p > 0)`
is one copy per group (each group stores its own tile), not one for the role:
each group's first thread issues its own, after the group's shared-memory
writes are fenced and met. tests/co/per_group_store.co loops over three tiles
(so a group rewrites its staging tile while its previous store may be in
flight); the emulator's strict rules check that, the values are checked against
torch, and ptxas assembles both targets.
"""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "per_group_store.co")


def _inputs():
    gen = torch.Generator().manual_seed(0)
    a = (torch.randn(384, 64, generator=gen) / 4).half()
    b = (torch.randn(128, 64, generator=gen) / 4).half()
    return a, b, a.float() @ b.float().T


def _rel(c, want) -> float:
    return float((c.float() - want).norm() / want.norm())


def test_each_group_stores_its_tile_in_the_interpreter():
    a, b, want = _inputs()
    c = torch.zeros(384, 128, dtype=torch.float16)
    choreo_py.interpret(PATH, {"A": a, "B": b, "C": c}, target="sm_90a")
    assert _rel(c, want) < 2e-3


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("schedule", ["round_robin", "random", "reverse"])
def test_each_group_stores_its_tile_in_the_emulator(target, schedule):
    from choreo_py.emu.api import emulate

    a, b, want = _inputs()
    c = torch.zeros(384, 128, dtype=torch.float16)
    emulate(PATH, {"A": a, "B": b, "C": c}, target=target, schedule=schedule, seed=1)
    assert _rel(c, want) < 2e-3


def test_one_store_per_group_assembles():
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in ("sm_90a", "sm_100a"):
        text = compile_file(PATH, "ptx", target)
        ptxas(text, target)
        # issued by each group's first thread, not by the role's
        assert "is_inst_leader cp.async.bulk.tensor.2d.global.shared::cta" in text


F16_PATH = os.path.join(os.path.dirname(__file__), "co", "f16_accumulator.co")


@pytest.mark.emu
def test_an_f16_accumulator_takes_f16_precision_after_each_mma():
    """The emulated sm_90a kernel against the interpreter (which rounds the accumulator to
    f16 after each MMA statement): equal but for the f32 summation order of one MMA (a
    last-place difference in a few elements), and every value an f16."""
    from choreo_py.emu.api import emulate

    a, b, want = _inputs()
    ci = torch.zeros(384, 128, dtype=torch.float16)
    choreo_py.interpret(F16_PATH, {"A": a, "B": b, "C": ci}, target="sm_90a")
    ce = torch.zeros(384, 128, dtype=torch.float16)
    emulate(F16_PATH, {"A": a, "B": b, "C": ce}, target="sm_90a", schedule="random", seed=2)
    assert _rel(ce, want) < 2e-3
    ulps = (ce.view(torch.int16).int() - ci.view(torch.int16).int()).abs()
    assert int(ulps.max()) <= 1 and int((ulps > 0).sum()) < ce.numel() // 100


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_f16_accumulators_are_lowered_for_both_targets(target):
    """sm_100a's tests: tests/test_sm100_f16_acc.py."""
    text = compile_file(F16_PATH, "ptx", target)
    assert "cvt.rn.f16.f32" in text
    if find_ptxas() is not None:
        ptxas(text, target)


def test_mma_store_async_is_the_plain_store(tmp_path):
    """`mma.store.async` (no future to wait on: nothing observes it in flight) is lowered as
    the plain store: the same PTX for both targets, and the same values in the
    interpreter and the emulator."""
    from choreo_py.emu.api import emulate

    src = open(PATH).read()
    assert "mma.store mc," in src
    path = tmp_path / "per_group_store.co"
    path.write_text(src.replace("mma.store mc,", "mma.store.async mc,"))
    for target in ("sm_90a", "sm_100a"):
        assert compile_file(str(path), "ptx", target) == compile_file(PATH, "ptx", target)
    a, b, want = _inputs()
    c = torch.zeros(384, 128, dtype=torch.float16)
    choreo_py.interpret(str(path), {"A": a, "B": b, "C": c}, target="sm_90a")
    assert _rel(c, want) < 2e-3
    c = torch.zeros(384, 128, dtype=torch.float16)
    emulate(str(path), {"A": a, "B": b, "C": c}, target="sm_90a", schedule="random", seed=1)
    assert _rel(c, want) < 2e-3
