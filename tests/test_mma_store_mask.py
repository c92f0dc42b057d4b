"""`mma.store.mask acc, <global tile>, rows, cols` where the mask is the tensor's edge.

sema/store_mask.py proves that the guards are the tile's part inside the tensor
(`M - tm * 64` for the tile at row `tm * 64`), which the plain store's TMA copy
already writes; other masks are refused by name. tests/co/gemm_store_mask.co at
M = 70, N = 130 (partial tiles in both dimensions) against torch: interpreter,
emulator (both targets), ptxas.
"""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "gemm_store_mask.co")


def _inputs(m=70, n=130, k=128):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).bfloat16()
    b = torch.randn(n, k, generator=gen).bfloat16()
    return a, b, a.float() @ b.float().T


def _rel(out, want) -> float:
    return float((out.float() - want).norm() / want.norm())


def test_masked_store_in_the_interpreter():
    a, b, want = _inputs()
    out = torch.zeros(want.shape, dtype=torch.bfloat16)
    choreo_py.interpret(PATH, {"A": a, "B": b, "C": out}, target="sm_90a")
    assert _rel(out, want) < 4e-3


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_masked_store_in_the_emulator(target):
    from choreo_py.emu.api import emulate

    a, b, want = _inputs()
    out = torch.zeros(want.shape, dtype=torch.bfloat16)
    emulate(PATH, {"A": a, "B": b, "C": out}, target=target, schedule="random", seed=3)
    assert _rel(out, want) < 4e-3


def test_masked_store_assembles():
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in ("sm_90a", "sm_100a"):
        ptxas(compile_file(PATH, "ptx", target), target)


@pytest.mark.parametrize("rows,why", [
    ("10", "the guard of dimension 0 is not the tensor's edge"),
    ("M - tm * 32", "the guard of dimension 0 is not the tensor's edge"),
])
def test_another_mask_is_refused_by_name(tmp_path, rows, why):
    src = open(PATH).read().replace("row_guard = M - tm * 64;", f"row_guard = {rows};")
    path = tmp_path / "mask.co"
    path.write_text(src)
    with pytest.raises(ChoreoError) as e:
        compile_file(str(path), "ptx", "sm_90a")
    text = str(e.value)
    assert "'mma.store.mask' whose mask is not the tensor's edge" in text and why in text
    assert "mask.co:30:" in text
