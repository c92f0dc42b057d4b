"""The SASS census of bench/model_sass.py: loops, roles and counts from nvdisasm output.

A tiny hand-written PTX kernel with known per-trip counts goes through ptxas and nvdisasm
(skipped when either is missing); synthetic SASS text pins the loop finder's rules; the
flash-attn-4 row needs flash-attn-4 installed and ../shared (skipped, with the reason,
otherwise).
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from choreo_py.runtime.build import find_ptxas

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import model_sass as S  # noqa: E402

# One loop trip: three dependent FMAs, two ex2 (.ftz: one MUFU.EX2 each), one shared
# store, one bar.sync; the counter's add/setp/bra around them.
TINY_PTX = """
.version 8.7
.target sm_100a
.address_size 64
.visible .entry tiny(.param .u64 p, .param .u32 n)
{
  .reg .f32 %f<4>;
  .reg .b32 %r<4>;
  .reg .pred %q;
  .reg .b64 %rd<3>;
  .shared .align 4 .b32 buf[32];
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [n];
  cvta.to.global.u64 %rd2, %rd1;
  ld.global.f32 %f1, [%rd2];
  mov.u32 %r2, 0;
  mov.u32 %r3, buf;
LOOP:
  .pragma "nounroll";
  fma.rn.f32 %f1, %f1, %f1, 0f3F800000;
  fma.rn.f32 %f1, %f1, %f1, 0f3F000000;
  fma.rn.f32 %f1, %f1, %f1, 0f3E800000;
  ex2.approx.ftz.f32 %f2, %f1;
  ex2.approx.ftz.f32 %f1, %f2;
  st.shared.f32 [%r3], %f1;
  bar.sync 0;
  add.u32 %r2, %r2, 1;
  setp.lt.u32 %q, %r2, %r1;
  @%q bra LOOP;
  st.global.f32 [%rd2], %f1;
  ret;
}
"""


def _tools() -> str:
    """ptxas (the test is skipped without it or nvdisasm)."""
    ptxas = find_ptxas()
    if ptxas is None or S.nvdisasm_path() is None:
        pytest.skip("ptxas or nvdisasm missing (pip install nvidia-cuda-nvdisasm)")
    return ptxas


def test_tiny_kernel_counts(tmp_path):
    ptxas = _tools()
    src, cubin = tmp_path / "tiny.ptx", tmp_path / "tiny.cubin"
    src.write_text(TINY_PTX)
    subprocess.run([ptxas, "-arch=sm_100a", str(src), "-o", str(cubin)], check=True)
    ins, labels = S.main_function(S.parse(S.disassemble(str(cubin))))
    work = [lp for lp in S.loops(ins, labels) if not lp.spin]
    assert len(work) == 1
    m = S.mix(work[0].body)
    assert (m.fp32, m.fp32_paired, m.ex2, m.smem, m.mma) == (3, 0, 2, 1, 0)
    assert sum(1 for i in work[0].body if i.op.startswith("BAR.SYNC")) == 1
    assert work[0].role == "softmax"  # exponentials and no MMA


SYNTHETIC = """
.text.k:
        /*0000*/                   MOV R2, 0x0 ;
.L_x_1:
        /*0010*/                   FFMA2 R4, R4.F32x2.HI_LO, R6.F32x2.HI_LO, R8.F32x2.HI_LO ;
        /*0020*/                   MUFU.EX2 R5, R4 ;
        /*0030*/                   LDTM.x32 R8, tmem[UR4] ;
        /*0040*/              @!P0 BRA `(.L_x_9) ;
.L_x_2:
        /*0050*/                   STTM.16dp256bit.x2 tmem[UR5], R8 ;
.L_x_3:
        /*0060*/               @P2 ELECT P3, URZ, PT ;
        /*0070*/                   UTCHMMA tmem[UR8], gdesc[UR6], tmem[UR25], tmem[UR10], idesc[UR11], !UPT ;
        /*0080*/               @P2 BRA.U.ANY `(.L_x_3) ;
        /*0090*/               @P1 BRA `(.L_x_1) ;
        /*00a0*/                   EXIT ;
.L_x_9:
        /*00b0*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4+0x10], R3 ;
        /*00c0*/              @!P0 BRA `(.L_x_9) ;
        /*00d0*/                   BRA `(.L_x_2) ;
"""


def test_loop_finder_rules():
    """One real loop (0x10-0x90); the wait's retry after EXIT spins on itself and its
    branch back behind the wait closes no loop; the ELECT loop is not a loop."""
    ins, labels = S.main_function(S.parse(SYNTHETIC))
    found = S.loops(ins, labels)
    assert [(lp.start, lp.end, lp.spin) for lp in found] == [(0x10, 0x90, False), (0xb0, 0xc0, True)]
    m = S.mix(found[0].body)
    assert (m.fp32, m.fp32_paired, m.ex2, m.ldtm, m.sttm, m.mma) == (1, 1, 1, 1, 1, 1)
    assert m.tmem_words == 32 + 16 * 256 * 2 // 1024
    assert m.mma_a_smem == 0  # A in tensor memory
    assert found[0].role == "consumer"  # MMAs and exponentials in one loop (Hopper-like)


def test_tmem_words_per_shape():
    """Words a thread moves, per the PTX ISA's shapes: 32x32b.x32 -> 32, 16x256b.x2 -> 8,
    16x128b.x4 -> 8; 16x32bx2.x64 (64 registers a thread) is two SASS halves, 32 each."""
    ops = ["LDTM.x32", "STTM.16dp256bit.x2", "LDTM.16dp128bit.x4", "LDTM.16dp32bit_t0_t15.x64"]
    assert [S.tmem_words(S.Ins(0, "", op, "")) for op in ops] == [32, 8, 8, 32]


def test_fa4_step_loops():
    """flash-attn-4's 1-CTA causal kernel (sm_100a) as the census reads it: 32 UTCHMMA a
    K/V step (2 stages x QK and PV, K = 16 each), a softmax loop with MUFU.EX2 for most
    of a row's 128 exponentials and f32x2 arithmetic, a correction loop moving both
    stages' O rows (2 x 128 words, read and written)."""
    import model_fa4 as F

    if not F.have_fa4():
        pytest.skip("flash-attn-4 not installed (pip install flash-attn-4==4.0.0b36 "
                    "\"nvidia-cutlass-dsl[cu13]==4.8.1\" einops)")
    if F.shared_dir() is None:
        pytest.skip("../shared/tools/fa4_ptx.py not found")
    _tools()
    census = S.step_loops(F.fa4_cubin("sm_100a", True))
    assert set(census) == {"mma", "load", "softmax", "correction"}
    assert census["mma"][1].mma == 32 and census["mma"][1].mma_a_smem == 16
    soft = census["softmax"][1]
    assert 64 <= soft.ex2 < 128 and soft.fp32_paired > 0 and soft.cvt == 64
    assert census["correction"][1].tmem_words == 512


def _mix(**kw):
    base = dict(instr=0, fp32=0, fp32_paired=0, ex2=0, mufu_other=0, fmnmx=0, cvt=0, mma=0,
                tma_load=0, ldtm=0, sttm=0, tmem_words=0, smem=0, barrier=0, mma_a_smem=0)
    base.update(kw)
    return S.Mix(**base)


def test_step_bounds_by_hand(monkeypatch):
    """A 1-CTA block-accumulator kernel's step from a census given by hand, at the best
    end (FFMA2 one clock, issue 1 a clock, no rescale, 1024 B/clock of tensor memory)."""
    import model_fa4 as F

    census = {"mma": (None, _mix(instr=200, mma=32, mma_a_smem=16)),
              "load": (None, _mix(instr=50, tma_load=4)),
              "softmax": (None, _mix(instr=500, fp32=200, fp32_paired=200, ex2=100, cvt=64,
                                     tmem_words=192)),
              "correction": (None, _mix(instr=185, fp32=128, fp32_paired=128, ldtm=16, sttm=16,
                                        tmem_words=512))}
    monkeypatch.setattr(F.model_sass, "step_loops", lambda cubin: census)
    k = F.Kernel("k", "k", F.B200, False, 256, 128, 128, False, False, "stride", "unused")
    best, _ = F.ends(F.B200)
    got = F.step_bounds(k, best)
    # tensor: 32 MMAs x 2*128*128*16 / 8192; smem: (16 A + 32 B) x 4 KB + 64 KB of TMA over
    # 128 B; issue: 2 softmax warps x 500 + the correction's skip path (185 - 128 - 32) +
    # the MMA warp (200, the load warp on another sub-partition); MUFU: 2 x 100 x 8;
    # FMA: 2 x 200 pairs x 1 clock; TMEM: 2 x 192 words x 4 B x 128 threads / 1024.
    assert got == {"tensor": 2048.0, "smem": 2048.0, "issue": 1225.0, "mufu": 1600.0,
                   "fma": 400.0, "tmem": 192.0}


def test_items_of_the_schedules():
    """Items per head: the 1-CTA causal kernel's 256-row blocks take 2, 4, 6, 8 steps at
    S=1024, longest first; the 2-CTA kernel's 512-row pairs take all 8, over 74 pairs."""
    import model_fa4 as F

    causal = F.Kernel("k", "k", F.B200, True, 256, 128, 128, False, False, "lpt", "unused")
    pair = F.Kernel("k", "k", F.B200, False, 256, 128, 128, False, True, "lpt", "unused")
    assert F.items(causal, 1, 2, 1024) == ([8, 8, 6, 6, 4, 4, 2, 2], 148)
    assert F.items(pair, 1, 1, 1024) == ([8, 8], 74)
    assert F.makespan([8, 6, 4, 2], 2, 1.0, 0.0, static=True) == 12.0   # 8+4, 6+2
    assert F.makespan([8, 6, 4, 2], 2, 1.0, 0.0, static=False) == 10.0  # 8+2, 6+4
