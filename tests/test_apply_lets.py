"""Named values inside `apply` over an accumulator (lowering/core/fragments.py,
ApplyLowering.lets): each element's value is computed where the statement stands, so a
later store into the element it was read from does not change it. The kernel is
tests/co/gemm_element_reads.co with its epilogue rewritten; checked against torch in the
interpreter and the PTX emulator on both targets."""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py

from test_element_reads import PATH, _inputs

EPILOGUE = "mc.at(i, j) = mc.at(i, j) + bias.at(bn * 64 + j);"
WITH_LETS = ("{ t = mc.at(i, j); b = bias.at(bn * 64 + j); mc.at(i, j) = 0.0f; "
             "mc.at(i, j) = t * 2.0f + b; }")


def _program(tmp_path) -> str:
    src = open(PATH).read()
    assert EPILOGUE in src
    path = tmp_path / "lets.co"
    path.write_text(src.replace(EPILOGUE, WITH_LETS))
    return str(path)


def _want():
    args, want = _inputs()
    return args, 2 * (want - args["bias"]) + args["bias"]


def test_lets_in_the_interpreter(tmp_path):
    args, want = _want()
    choreo_py.interpret(_program(tmp_path), args, target="sm_90a")
    assert torch.allclose(args["C"], want, atol=1e-4, rtol=1e-4)


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_lets_in_the_emulator(tmp_path, target):
    from choreo_py.emu.api import emulate

    args, want = _want()
    emulate(_program(tmp_path), args, target=target)
    assert torch.allclose(args["C"], want, atol=1e-4, rtol=1e-4)
