"""An MMA kernel that reads single elements of global tensors (lowering/core/global_reads.py).

tests/co/gemm_element_reads.co takes each block's tile from two s32 schedule tables (a
read at block level, as a persistent kernel's Hilbert schedule does: end2end
wgmma_persis.co) and adds one bias element per column inside the apply over the
accumulator (a read whose index is the register's column). The tensors become `ptr_*`
parameters beside the tensor maps; the result is checked against torch in the
interpreter and in the PTX emulator on both targets, ptxas assembles both, and a read of
a tensor the kernel also writes is refused by name.
"""
from __future__ import annotations

import os
import re

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "gemm_element_reads.co")
M, N, K = 128, 192, 128
TILE_M = [1, 0, 1, 0, 1, 0]  # every 64 x 64 tile of C once, in an order of its own
TILE_N = [2, 2, 0, 0, 1, 1]


def _inputs():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(M, K, generator=gen).bfloat16()
    b = torch.randn(N, K, generator=gen).bfloat16()
    bias = torch.randn(N, generator=gen)
    args = {"A": a, "B": b, "bias": bias, "C": torch.zeros(M, N),
            "tile_m": torch.tensor(TILE_M, dtype=torch.int32),
            "tile_n": torch.tensor(TILE_N, dtype=torch.int32)}
    return args, a.float() @ b.float().T + bias


def test_schedule_and_bias_in_the_interpreter():
    args, want = _inputs()
    choreo_py.interpret(PATH, args, target="sm_90a")
    assert torch.allclose(args["C"], want, atol=1e-4, rtol=1e-4)


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("schedule", ["round_robin", "random"])
def test_schedule_and_bias_in_the_emulator(target, schedule):
    from choreo_py.emu.api import emulate

    args, want = _inputs()
    emulate(PATH, args, target=target, schedule=schedule, seed=3)
    assert torch.allclose(args["C"], want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_element_reads_are_pointer_parameters(target):
    ptx = compile_file(PATH, "ptx", target)
    params = re.findall(r"\.param \.u64 (ptr_\w+)", ptx)
    assert params == ["ptr_bias", "ptr_tile_m", "ptr_tile_n"]
    assert len(re.findall(r"ld\.global\.s32", ptx)) == 2  # one per schedule table
    assert "ld.global.f32" in ptx                          # the bias, per register
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    ptxas(ptx, target)


def test_reading_a_tensor_the_kernel_writes_is_refused(tmp_path):
    src = open(PATH).read().replace("+ bias.at(bn * 64 + j)", "+ C.at(bm * 64 + i, bn * 64 + j)")
    bad = tmp_path / "reads_c.co"
    bad.write_text(src)
    with pytest.raises(ChoreoError) as e:
        compile_file(str(bad), "ptx", "sm_90a")
    assert "reading elements of 'C', which this kernel also writes" in e.value.message
    assert e.value.loc is not None and e.value.loc.line == 19  # the apply


GDN = os.path.join(os.environ.get("CHOREO_SHARED") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared"),
    "corpus", "tests", "gpu", "end2end", "gdn_recurrence.co")


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_tensor_stored_in_a_loop_and_read_next_iteration(target):
    """gdn_recurrence.co reads State by element in each chunk and stores it at the end of the
    chunk (the last statement of the loop): the store is waited for in full (not just its
    read of the tile), fenced toward the generic proxy, and the instance's threads meet,
    before the next chunk reads it (its run: the end-to-end case in end2end_gdn.py)."""
    if not os.path.exists(GDN):
        pytest.skip("the shared corpus is not available (set CHOREO_SHARED)")
    ptx = compile_file(GDN, "ptx", target)
    assert "ptr_State" in ptx and "ptr_U" in ptx
    waits = re.findall(r"cp\.async\.bulk\.wait_group(\.read)? 0;\s*\n(.*)\n(.*)\n(.*)", ptx)
    full = [w for w in waits if not w[0]]
    assert len(full) == 1 and "fence.proxy.async;" in full[0][1]
    assert any("bar.sync %inst_bar" in line for line in full[0][2:])
