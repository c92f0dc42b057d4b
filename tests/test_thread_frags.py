"""Fragments of a `: thread` region are each thread's own arrays: a thread kernel lowers
them as local buffers and loops (lowering/core/thread_frags.py, ir.per_thread_frags).
tests/co/thread_frags.co (a fragment refilled in a loop, one carried over, an `apply`
that stores to a global tensor) runs in the emulator for both targets against values
computed here, and assembles. The interpreter refuses a buffer store inside `apply` by
name (its `apply` runs fragment code only), so this program has no interpreter run."""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py import ir
from choreo_py.driver import compile_file, ir_of_file
from choreo_py.interp import InterpError
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "thread_frags.co")
S = 1.5


def _want() -> torch.Tensor:
    # pass 0: c = 1 * s + 0.5, a -> 2; pass 1: c = 2 * s + 0.5 (refilled); Y sums both
    return torch.full((4, 8), 3 * S + 1)


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_thread_fragments_in_the_emulator(target):
    y = torch.zeros(4, 8)
    choreo_py.emulate_program(PATH, target=target, schedule="random", seed=1).thread_frags(y, S)
    assert torch.equal(y, _want())


def test_thread_fragments_make_a_thread_kernel_that_assembles():
    k = ir_of_file(PATH, target="sm_90a").functions[0].kernels[0]
    assert ir.per_thread_frags(k) and ir.is_thread_kernel(k)
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in ("sm_90a", "sm_100a"):
        text = compile_file(PATH, "ptx", target)
        ptxas(text, target)
        assert "wgmma" not in text and "tcgen05" not in text


def test_the_interpreter_refuses_a_store_inside_apply_by_name():
    with pytest.raises(InterpError) as info:
        choreo_py.interpret(PATH, target="sm_90a").thread_frags(torch.zeros(4, 8), S)
    # (the interpreter's apply takes a buffer element only as a shared row vector)
    assert "'Y' inside apply other than as a vector of the 8 rows indexed by the apply's row " \
        "index 'i'" in info.value.message
    assert info.value.loc.line == 14


def test_group_fragments_are_not_per_thread(tmp_path):
    path = tmp_path / "t.co"
    path.write_text("__co__ void k() {\n  parallel b by 1 : block {\n"
                    "    parallel g by 1 : group-4 {\n      frag f32[64, 64] s {1.0f};\n"
                    "    }\n  }\n}\n")
    k = ir_of_file(str(path), target="sm_90a").functions[0].kernels[0]
    assert k.frags and not ir.per_thread_frags(k) and not ir.is_thread_kernel(k)
