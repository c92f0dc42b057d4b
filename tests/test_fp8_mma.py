"""fp8 MMAs on sm_90a: TMA copies of 1-byte elements and wgmma m64nNk32 (e4m3, e5m2).

tests/co/gemm_e4m3.co (and its e5m2 twin) runs in the interpreter and, compiled,
in the emulator under two schedules, against torch's float32 product of the same
fp8 values (the products are exact and the sums short: the results agree to
rounding); ptxas assembles it. sm_100a refuses fp8 MMAs by name.
"""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

SOURCE = os.path.join(os.path.dirname(__file__), "co", "gemm_e4m3.co")
TYPES = {"f8_e4m3": torch.float8_e4m3fn, "f8_e5m2": torch.float8_e5m2}


def _program(tmp_path, etype: str) -> str:
    path = tmp_path / f"gemm_{etype}.co"
    path.write_text(open(SOURCE).read().replace("f8_e4m3", etype))
    return str(path)


def _inputs(etype: str, m=128, n=64, k=96):
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(m, k, generator=gen).to(TYPES[etype])
    b = torch.randn(n, k, generator=gen).to(TYPES[etype])
    return a, b, a.float() @ b.float().T


def _rel(out, want) -> float:
    return float((out - want).norm() / want.norm())


@pytest.mark.parametrize("etype", list(TYPES))
def test_fp8_gemm_in_the_interpreter(tmp_path, etype):
    a, b, want = _inputs(etype)
    out = torch.zeros_like(want)
    choreo_py.interpret(_program(tmp_path, etype), {"lhs": a, "rhs": b, "output": out},
                        target="sm_90a")
    assert _rel(out, want) < 1e-6


@pytest.mark.emu
@pytest.mark.parametrize("etype", list(TYPES))
@pytest.mark.parametrize("schedule", ["round_robin", "random"])
def test_fp8_gemm_in_the_emulator(tmp_path, etype, schedule):
    from choreo_py.emu.api import emulate

    a, b, want = _inputs(etype)
    out = torch.zeros_like(want)
    emulate(_program(tmp_path, etype), {"lhs": a, "rhs": b, "output": out}, target="sm_90a",
            schedule=schedule, seed=3)
    assert _rel(out, want) < 1e-6


@pytest.mark.parametrize("etype", list(TYPES))
def test_fp8_gemm_is_wgmma_k32_and_assembles(tmp_path, etype):
    text = compile_file(_program(tmp_path, etype), "ptx", "sm_90a")
    kind = etype[3:]
    assert f"wgmma.mma_async.sync.aligned.m64n64k32.f32.{kind}.{kind}" in text
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    ptxas(text, "sm_90a")


def test_fp8_mma_is_refused_by_name_on_sm_100a():
    with pytest.raises(ChoreoError) as e:
        compile_file(SOURCE, "ptx", "sm_100a")
    assert "an MMA on f8_e4m3 x f8_e4m3 is not lowered for sm_100a yet" in str(e.value)


@pytest.mark.gpu
@pytest.mark.parametrize("etype", list(TYPES))
def test_fp8_gemm_on_the_gpu(tmp_path, etype):
    """wgmma's own fp8 products on the H200: its fp8 accumulation is not float32's (the
    H200 gave relative errors of 2.1e-4 (e4m3) and 1.3e-4 (e5m2) here where the exact f32
    sums give 0), so a tolerance of 1e-3, not equality."""
    a, b, want = _inputs(etype, m=256, n=128, k=256)
    out = torch.zeros_like(want).cuda()
    gemm = choreo_py.load(_program(tmp_path, etype))  # one kernel: the kernel itself
    gemm(a.cuda(), b.cuda(), out)
    torch.cuda.synchronize()
    assert _rel(out.cpu(), want) < 1e-3


def test_a_loaded_fp8_kernel_binds_fp8_tensors(tmp_path):
    """The launcher's binding names torch's float8 types (without a GPU: the binding is
    checked before anything launches)."""
    from choreo_py.runtime.kernel import _TORCH_DTYPES

    for etype, dtype in TYPES.items():
        assert getattr(torch, _TORCH_DTYPES[etype]) is dtype
