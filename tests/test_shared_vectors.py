"""A shared f32 vector in an MMA kernel (tests/co/gemm_row_vector.co): a synchronous
`dma.copy` of a run of one row fills it (a TMA copy of a one-row box, lowering/core/memory.py),
`apply` reads it per row (row_buffers.py) and scalar code reads one element
(global_reads.py: `ld.shared` after the copy's event). Checked against torch in the
interpreter and in the PTX emulator on both targets; ptxas assembles both; what does not
fit is refused by name."""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "gemm_row_vector.co")
M = N = K = 128


def _inputs():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(M, K, generator=gen).bfloat16()
    b = torch.randn(N, K, generator=gen).bfloat16()
    bias = torch.randn(M, generator=gen)
    first = bias[::64].repeat_interleave(64)  # each tile's first row's bias
    want = a.float() @ b.float().T + (bias + first)[:, None]
    return {"A": a, "B": b, "row_bias": bias, "C": torch.zeros(M, N)}, want


def test_the_vector_in_the_interpreter():
    args, want = _inputs()
    choreo_py.interpret(PATH, args, target="sm_90a")
    assert torch.allclose(args["C"], want, atol=1e-4, rtol=1e-4)


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_the_vector_in_the_emulator(target):
    from choreo_py.emu.api import emulate

    args, want = _inputs()
    emulate(PATH, args, target=target, schedule="random", seed=5)
    assert torch.allclose(args["C"], want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_one_row_tma_box_and_a_shared_load(target):
    ptx = compile_file(PATH, "ptx", target)
    assert "cp.async.bulk.tensor.1d" in ptx  # row_bias: a rank-1 tensor, a box of 64
    assert "ld.shared.f32" in ptx
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    ptxas(ptx, target)


def _variant(tmp_path, *edits) -> str:
    src = open(PATH).read()
    for old, new in edits:
        assert old in src
        src = src.replace(old, new)
    path = tmp_path / "variant.co"
    path.write_text(src)
    return str(path)


def test_a_vector_narrower_than_16_bytes_is_refused(tmp_path):
    path = _variant(tmp_path, ("f32[64] bias_s", "f32[2] bias_s"),
                    ("subspan(64).at(bm) => bias_s", "subspan(2).at(bm) => bias_s"),
                    ("r = bias_s.at(i);", "r = 0.0f;"))
    with pytest.raises(ChoreoError) as e:
        compile_file(path, "ptx", "sm_90a")
    assert "a TMA copy of a vector of 8 B" in e.value.message and e.value.loc.line == 12


def test_an_element_of_a_swizzled_tile_outside_apply_is_refused(tmp_path):
    path = _variant(tmp_path, ("first = bias_s.at(0);", "first = a_s.at(0, 0);"))
    with pytest.raises(ChoreoError) as e:
        compile_file(path, "ptx", "sm_90a")
    assert "reading an element of the shared buffer 'a_s' in an MMA kernel" in e.value.message
    assert e.value.loc is not None
