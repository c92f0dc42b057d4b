"""`mma.store.transp acc, tile`: element (i, j) of the accumulator to (j, i) of the tile.

tests/co/gemm_store_transp.co stores C^T = (A B^T)^T through a shared tile and
a TMA copy; the interpreter and the emulated sm_90a kernel (two schedules) are
checked against torch, ptxas assembles it, the IR prints and parses back, and
sm_100a refuses it by name (its accumulators are in tensor memory).
"""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.ir.parse import parse_module
from choreo_py.ir.printer import print_module
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "gemm_store_transp.co")


def _inputs(m=128, n=256, k=128):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).bfloat16()
    b = torch.randn(n, k, generator=gen).bfloat16()
    return a, b, (a.float() @ b.float().T).T


def _rel(out, want) -> float:
    return float((out.float() - want).norm() / want.norm())


def test_transposed_store_in_the_interpreter():
    a, b, want = _inputs()
    out = torch.zeros(want.shape, dtype=torch.bfloat16)
    choreo_py.interpret(PATH, {"A": a, "B": b, "CT": out}, target="sm_90a")
    assert _rel(out, want) < 4e-3


@pytest.mark.emu
@pytest.mark.parametrize("schedule", ["round_robin", "random"])
def test_transposed_store_in_the_emulator(schedule):
    from choreo_py.emu.api import emulate

    a, b, want = _inputs()
    out = torch.zeros(want.shape, dtype=torch.bfloat16)
    emulate(PATH, {"A": a, "B": b, "CT": out}, target="sm_90a", schedule=schedule, seed=3)
    assert _rel(out, want) < 4e-3


def test_the_ir_says_transp_and_round_trips():
    text = compile_file(PATH, "ir", "sm_90a")
    assert "mma.store.transp acc => ct_buf" in text
    assert print_module(parse_module(text)) == text


def test_sm_90a_assembles_and_sm_100a_refuses_by_name():
    if find_ptxas() is not None:
        ptxas(compile_file(PATH, "ptx", "sm_90a"), "sm_90a")
    with pytest.raises(ChoreoError) as e:
        compile_file(PATH, "ptx", "sm_100a")
    assert "mma.store.transp" in str(e.value) and "sm_100a" in str(e.value)
