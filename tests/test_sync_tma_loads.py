"""Synchronous TMA loads the MMA lowering keeps (passes/sync_copies.py leaves them): each on
its own slot of the `__tma_sync` mbarrier, armed with its bytes, waited by the threads that
run it (lowering/core/events.py, roles.py).

Two forms: a load in a producer role (examples/gemm.co with its A tile loaded
synchronously before the B tile it publishes), and a load that two warpgroups make
together (wgmma_ss.co's matmul_e4m3_mwg, tests/end2end_gemms.py), issued by their leader
and waited by all of them after the leader's block.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from choreo_py.driver import compile_file
from choreo_py.emu.api import run_spec
from choreo_py.emu.launch import from_co
from choreo_py.runtime.build import find_ptxas, ptxas

ROOT = Path(__file__).resolve().parents[1]
GEMM = (ROOT / "examples" / "gemm.co").read_text()
SYNC_A = (GEMM.replace("a_load = tma.load.async.swiz", "tma.load.swiz")
          .replace("after a_load, b_load", "after b_load"))


@pytest.fixture(scope="module")
def sync_a(tmp_path_factory):
    path = tmp_path_factory.mktemp("sync") / "gemm_sync_a.co"
    path.write_text(SYNC_A)
    return str(path)


def test_the_load_is_armed_issued_and_waited(sync_a):
    ptx = compile_file(sync_a, "ptx", "sm_90a")
    waits = re.findall(r"mbarrier\.try_wait\.parity\.shared\.b64 %\w+, \[%smem_base\+(\d+)\]", ptx)
    armed = re.findall(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 %\w+, "
                       r"\[%smem_base\+(\d+)\], 16384;", ptx)
    assert armed and armed[0] in waits  # A's 128 x 64 bf16 tile: its own slot, waited
    if find_ptxas() is not None:
        for target in ("sm_90a", "sm_100a"):
            ptxas(compile_file(sync_a, "ptx", target), target)


@pytest.mark.emu
@pytest.mark.parametrize("target,schedule", [("sm_90a", "random"), ("sm_90a", "greedy"),
                                             ("sm_100a", "round_robin")])
def test_emulated_gemm_matches_torch(sync_a, target, schedule):
    g = torch.Generator().manual_seed(3)
    m, n, k = 128, 128, 192
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    c = torch.full((m, n), float("nan")).to(torch.bfloat16)
    run_spec(from_co(sync_a, target, (), None), dict(A=a, B=b, C=c), schedule=schedule, seed=2)
    ref = a.double() @ b.double().T
    assert (c.double() - ref).abs().max() <= ref.abs().max() * 2 ** -8 + 1e-2
