"""The hand-written sm_100a FlashAttention kernel: it traces, its PTX has the
instruction census the seed's schedule implies, its constants are the ones the
descriptor math and the TMEM plan give, and ptxas (when present) assembles it
for sm_100a without spills."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from choreo_py.driver import ir_of_file
from choreo_py.lowering.sm100 import descriptors as d

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "examples" / "flash_atten_causal.co"
sys.path.insert(0, str(ROOT / "bench" / "reference"))  # the reference kernels live there
import handwritten_sm100_fa as fa  # noqa: E402


@pytest.fixture(scope="module", params=[True, False], ids=["causal", "full"])
def ptx_text(request) -> str:
    return fa.flash_attention_ptx(request.param)


def _count(text: str, pattern: str) -> int:
    return len(re.findall(pattern, text))


def test_instruction_census(ptx_text):
    # MMAs: prologue QK (8 k-steps), loop QK + PV (16), final PV (8); one commit per group.
    assert _count(ptx_text, r"tcgen05\.mma\.cta_group::1\.kind::f16 ") == 32
    assert _count(ptx_text, r"tcgen05\.commit\.cta_group::1\.mbarrier::arrive::one") == 4
    # P@V reads A from tensor memory: the [d], [a] form (loop and final PV).
    assert _count(ptx_text, r"kind::f16 \[%r\d+\], \[%r\d+\]") == 16
    # S loads (prologue, loop), O loads (loop rescale, epilogue); P and O stores.
    assert _count(ptx_text, r"tcgen05\.ld\.sync\.aligned\.16x32bx2\.x64\.b32") == 4
    assert _count(ptx_text, r"tcgen05\.st\.sync\.aligned\.16x32bx2\.x32\.b32 \[%r\d+\], 32,") == 2
    assert _count(ptx_text, r"tcgen05\.st\.sync\.aligned\.16x32bx2\.x64\.b32 \[%r\d+\], 64,") == 1
    for op in ("alloc", "dealloc", "relinquish_alloc_permit"):
        assert _count(ptx_text, rf"tcgen05\.{op}\.cta_group::1") == 1
    assert "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32" in ptx_text
    # Row reductions combine the thread pair (t, t ^ 16) only: 2 max + 1 sum, and no
    # quad shuffles (lane masks 1, 2) as in the wgmma fragment of sm_90a.
    assert _count(ptx_text, r"shfl\.sync\.bfly\.b32 %f\d+, %f\d+, 16, 31, -1") == 3
    assert _count(ptx_text, r"shfl\.sync\.bfly\.b32 [^;]*, [12], 31, -1") == 0


def test_descriptor_constants_in_ptx(ptx_text):
    assert re.search(rf"mov\.b32 %r\d+, {d.instr_desc_f16(64, 128)};", ptx_text)
    assert re.search(rf"mov\.b32 %r\d+, {d.instr_desc_f16(64, 128, b_major='MN')};", ptx_text)
    assert _count(ptx_text, rf", {d.kmajor_sw128_const()};") == 2        # Q and K
    assert _count(ptx_text, rf", {d.mnmajor_sw128_const(16384)};") == 1  # V


def test_constants_match_the_plan():
    kernel = ir_of_file(str(SEED), target="sm_100a").functions[0].kernels[0]
    plan = kernel.tmem  # the map pass tmem-plan recorded
    assert plan.alloc == fa.TMEM_ALLOC_COLS
    for frag, col in (("acc_s", fa.TMEM_S), ("acc_o", fa.TMEM_O), ("acc_s_cast", fa.TMEM_P)):
        for cid in range(fa.NUM_CONSUMERS):
            r = plan.region(frag, cid)
            step = fa.TMEM_STEP[frag]
            lane, cols = (step >> 16) * cid, (step & 0xFFFF) * cid
            assert (r.col, r.lane) == (col + cols, lane)
    assert fa.IDESC_PV == d.instr_desc_f16(64, 128, b_major="MN", a_in_tmem=True)
    assert fa.DYN_SMEM_BYTES <= 227 * 1024
    # every barrier and the TMEM slot sit after the 1024-aligned tiles
    assert fa.SMEM_BAR == 6 * fa.TILE_BYTES and fa.SMEM_TMEM_SLOT % 8 == 0


@pytest.mark.ptxas
@pytest.mark.parametrize("causal", [True, False])
def test_ptxas_sm100a_no_spills(causal):
    report = fa.ptxas_report(causal)
    assert f"Compiling entry function '{fa.kernel_name(causal)}' for 'sm_100a'" in report
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report
    regs = int(re.search(r"Used (\d+) registers", report).group(1))
    assert regs <= 168                     # the .maxntid 384 / 1-CTA entry cap
