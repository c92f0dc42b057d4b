"""TMA copies of tensors whose rows are not 16-byte multiples (lowering/core/tma_fallback.py).

A tensor map needs byte strides that are multiples of 16; the GPU's driver refuses any
other, and so does the emulator (tests/test_emu_tma_strides.py). The same GEMM
(examples/gemm.co: A [M, K], B [N, K], C [M, N], partial tiles) runs for any shape:
with aligned rows every copy is the TMA's, with K = 36 and N = 100 (rows of 72 and 200 bytes)
the launcher picks the build whose copies of those tensors the threads make (loads
zero-filled outside the tensor and written in the tile's swizzled layout, completing the
TMA's bytes on its mbarrier; the store clipped to the tensor). Both match torch on both
targets in the strict emulator; ptxas accepts both builds. A [64, 8] u8 tensor (rows of
8 bytes, static) is copied cooperatively whatever the call.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from choreo_py.emu.api import run_spec
from choreo_py.emu.launch import from_co, tma_build
from choreo_py.runtime.build import find_ptxas, ptxas

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "examples" / "gemm.co"
TARGETS = ["sm_90a", "sm_100a"]


def _tensors(m, n, k, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    return dict(A=a, B=b, C=torch.full((m, n), float("nan")).to(torch.bfloat16))


def _kinds(spec) -> dict:
    return {p[2]: p[0] for p in spec.params if p[0] in ("tmap", "ptr")}


@pytest.fixture(scope="module", params=TARGETS)
def spec(request):
    return from_co(str(GEMM), request.param)


def test_aligned_rows_use_tma(spec):
    t = _tensors(128, 128, 64)
    built = tma_build(spec, t)
    assert built is spec
    assert _kinds(built) == {"A": "tmap", "B": "tmap", "C": "tmap"}
    assert "mbarrier.complete_tx" not in built.ptx and "st.global" not in built.ptx
    run_spec(built, t, strict=True)
    ref = (t["A"].float() @ t["B"].float().T).to(torch.bfloat16)
    assert torch.allclose(t["C"].float(), ref.float(), atol=0.05, rtol=0.02)


def test_unaligned_rows_use_the_threads(spec):
    t = _tensors(128, 100, 36)  # A, B: rows of 72 bytes, C: of 200; partial N and K tiles
    built = tma_build(spec, t)
    assert built is not spec
    assert _kinds(built) == {"A": "ptr", "B": "ptr", "C": "ptr"}
    assert "mbarrier.complete_tx.shared::cta.b64" in built.ptx
    assert "ld.global.b64" in built.ptx and "st.global.b64" in built.ptx  # (8-byte aligned rows)
    assert "cp.async.bulk.tensor" not in built.ptx
    assert tma_build(spec, _tensors(128, 100, 36, seed=1)) is built  # (the build is cached)
    run_spec(spec, t, strict=True)  # (run_spec picks the build itself)
    ref = (t["A"].float() @ t["B"].float().T).to(torch.bfloat16)
    assert torch.allclose(t["C"].float(), ref.float(), atol=0.05, rtol=0.02)


def test_only_the_unaligned_tensor_leaves_tma(spec):
    t = _tensors(128, 100, 64)  # C alone: rows of 200 bytes
    built = tma_build(spec, t)
    assert _kinds(built) == {"A": "tmap", "B": "tmap", "C": "ptr"}
    run_spec(built, t, strict=True, schedule="random", seed=3)
    ref = (t["A"].float() @ t["B"].float().T).to(torch.bfloat16)
    assert torch.allclose(t["C"].float(), ref.float(), atol=0.05, rtol=0.02)


@pytest.mark.ptxas
@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")
@pytest.mark.parametrize("target", TARGETS)
def test_ptxas_accepts_the_cooperative_build(target):
    spec = from_co(str(GEMM), target, cooperative=("A", "B", "C"))
    cubin, _ = ptxas(spec.ptx, target)
    assert cubin


@pytest.mark.parametrize("target", TARGETS)
def test_the_gpu_launcher_picks_the_cooperative_build(target):
    # (what ChoreoFunction._prepare does before encoding tensor maps; no GPU needed here)
    import choreo_py
    from choreo_py.runtime.launch import unaligned_tmaps

    fn = choreo_py.load(str(GEMM), target=target)
    t = _tensors(128, 100, 64)
    names = unaligned_tmaps(fn.meta.PARAMS, t)
    assert names == {"C:8"}  # (rows of 200 bytes: 8-byte accesses)
    other = fn.build_for(names)
    assert other is fn.build_for(names) and other.cooperative == names
    assert {p[2]: p[0] for p in other.meta.PARAMS if p[0] in ("tmap", "ptr")} == \
        {"A": "tmap", "B": "tmap", "C": "ptr"}
    assert unaligned_tmaps(other.meta.PARAMS, t) == set()


@pytest.mark.slow  # (4 s alone, 20 s on the loaded machine: 2 x 8192 one-element copies)
def test_rows_of_an_odd_element_count_move_one_element_at_a_time():
    spec = from_co(str(GEMM), "sm_100a")
    t = _tensors(128, 64, 33)  # A, B: rows of 66 bytes (2-byte aligned: one bf16 per access)
    built = tma_build(spec, t)
    assert _kinds(built) == {"A": "ptr", "B": "ptr", "C": "tmap"}
    assert "ld.global.b16" in built.ptx and "ld.global.b64" not in built.ptx
    run_spec(built, t, strict=True, schedule="reverse")
    ref = (t["A"].float() @ t["B"].float().T).to(torch.bfloat16)
    assert torch.allclose(t["C"].float(), ref.float(), atol=0.05, rtol=0.02)
