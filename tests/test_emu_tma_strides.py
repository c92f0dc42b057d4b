"""The emulator refuses a tensor map the GPU's driver cannot encode: byte strides that are
not multiples of 16 (runtime/launch.check_tma_strides, the rule both apply), so a kernel
the emulator runs is one the GPU can launch (the H200 found TMA copies of 8-byte and
260-byte rows that the emulator had run). A build from a .co file is rebuilt for such
tensors with cooperative copies instead (tests/test_tma_fallback.py); raw PTX has no other
build, so its launch is refused."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from choreo_py.emu.api import run_spec
from choreo_py.emu.launch import from_co
from choreo_py.runtime.launch import ChoreoRuntimeError

GEMM = Path(__file__).resolve().parent.parent / "examples" / "gemm.co"


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_rows_of_520_bytes_are_refused_as_on_the_gpu(target):
    a = torch.randn(128, 64).to(torch.bfloat16)
    bt = torch.randn(260, 64).to(torch.bfloat16)
    c = torch.empty(128, 260).to(torch.bfloat16)  # rows of 260 bf16 = 520 bytes
    raw = replace(from_co(str(GEMM), target), rebuild=None)  # the PTX alone, as emulate_ptx's
    with pytest.raises(ChoreoRuntimeError, match="C: rows of 520 bytes; TMA needs strides "
                                                 "that are multiples of 16 bytes"):
        run_spec(raw, dict(A=a, B=bt, C=c))
