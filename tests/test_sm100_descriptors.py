"""tcgen05 descriptor and TMEM address math against independent values.

Instruction descriptors are compared with pyptx's own helper
(`ptx.tcgen05.make_instr_desc_f16bf16_f32`, written after CUTLASS's
UMMA::InstrDescriptor); shared memory descriptors with integers worked out
by hand from PTX ISA 9.1 Table 40 (each derivation is in a comment); TMEM
addresses with the layout-F row -> lane rule of 9.7.16.10.5.
"""
from __future__ import annotations

import pytest
from pyptx import ptx

from choreo_py import targets
from choreo_py.lowering.sm100 import descriptors as d

ROWS = targets.get("sm_100a").acc_rows  # the row split of tcgen05.ld's shapes


# ---------------------------------------------------------------- instruction descriptor

@pytest.mark.parametrize("m,n,dtype,a_major,b_major", [
    (64, 128, "bf16", "K", "K"),      # the seed's QK^T per consumer
    (64, 128, "bf16", "K", "MN"),     # the seed's P@V (V row-major = N-major B)
    (128, 128, "bf16", "K", "MN"),    # the design kernel's P@V
    (128, 256, "f16", "MN", "K"),
    (128, 16, "bf16", "MN", "MN"),
    (64, 8, "f16", "K", "K"),
    (64, 256, "bf16", "MN", "MN"),
    (128, 64, "f16", "K", "MN"),
])
def test_instr_desc_matches_pyptx(m, n, dtype, a_major, b_major):
    ours = d.instr_desc_f16(m, n, ab_dtype=dtype, a_major=a_major, b_major=b_major)
    theirs = ptx.tcgen05.make_instr_desc_f16bf16_f32(m=m, n=n, ab_dtype=dtype,
                                                     a_major=a_major, b_major=b_major)
    assert ours == theirs


def test_instr_desc_hand_values():
    # Table 42, kind::f16: D=f32 -> bit 4; A=B=bf16 -> 1<<7 | 1<<10; N=128 -> 16<<17;
    # M=64 -> 4<<24:  0x10 + 0x80 + 0x400 + 0x200000 + 0x4000000
    assert d.instr_desc_f16(64, 128) == 0x04200490
    # ... and transpose B (N-major V) adds bit 16
    assert d.instr_desc_f16(64, 128, b_major="MN") == 0x04210490
    # M=128 N=256 f16 inputs, f16 accumulate: 32<<17 | 8<<24 = 0x400000 | 0x8000000
    assert d.instr_desc_f16(128, 256, ab_dtype="f16", d_dtype="f16") == 0x08400000
    f = d.decode_instr_desc(d.instr_desc_f16(64, 136, a_major="MN", negate_b=True))
    assert (f["m_shr4"], f["n_shr3"], f["a_major"], f["b_major"], f["negate_b"]) == (4, 17, 1, 0, 1)
    assert f["sparse"] == f["saturate"] == f["max_shift"] == 0


@pytest.mark.parametrize("m,n", [(32, 64), (256, 128), (64, 4), (64, 260), (128, 24), (128, 0)])
def test_instr_desc_rejects_shapes(m, n):
    with pytest.raises(ValueError):
        d.instr_desc_f16(m, n)


def test_instr_desc_tmem_a_is_k_major():
    assert d.instr_desc_f16(64, 128, b_major="MN", a_in_tmem=True) == 0x04210490
    with pytest.raises(ValueError):
        d.instr_desc_f16(64, 128, a_major="MN", a_in_tmem=True)


# ---------------------------------------------------------------- shared memory descriptor

def test_kmajor_sw128_constant():
    # K-major 128B swizzle: LBO unused ("assumed 1") -> encode(16) = 1 at bit 16 = 0x1_0000;
    # SBO = 8 rows x 128 B = 1024 -> encode = 64 at bit 32 = 0x40_0000_0000;
    # version 0b001 at bits 46-48 = 0x4000_0000_0000; swizzle 128B = 2 at bits 61-63
    # = 0x4000_0000_0000_0000.  Sum: 0x4000_4040_0001_0000.
    assert d.kmajor_sw128_const() == 0x4000_4040_0001_0000
    # pyptx's fixed SM100 GEMM constant encodes the same operand.
    assert d.kmajor_sw128_const() == ptx.tcgen05.BLACKWELL_MASKED_DESC_B128


def test_kmajor_sw128_with_address():
    # Consumer 1's Q rows start 64 rows x 128 B = 8192 B into q_shared; with q_shared at
    # shared address 0x400: start 0x2400 -> encode = 0x240 in bits 0-13.
    assert d.kmajor_sw128(0x2400) == 0x4000_4040_0001_0240
    # Shared addresses are taken modulo 2^18 before the >> 4 (matrix-descriptor-encode):
    # 0x40400 & 0x3FFFF = 0x400 -> 0x40.
    assert d.kmajor_sw128(0x40400) & 0x3FFF == 0x40


def test_mnmajor_sw128_v_tile():
    # V (B of P@V) as [2 stripes][128 keys][128 B]: N-major; LBO = stripe stride
    # 128 x 128 = 16384 -> encode 0x400 at bit 16 = 0x400_0000; SBO = 1024 -> 0x40 << 32.
    # V slot 0 at 0x18000 (96 KiB) -> start field 0x1800.
    assert d.mnmajor_sw128(0x18000, 16384) == 0x4000_4040_0400_1800
    f = d.decode_smem_desc(d.mnmajor_sw128(0x18000, 16384))
    assert f == {"start": 0x18000, "lbo": 16384, "sbo": 1024, "version": 1, "base_offset": 0,
                 "lbo_mode": 0, "fixed_53_60": 0, "swizzle": 2, "reserved_14_15": 0,
                 "reserved_30_31": 0}


def test_other_swizzle_modes_and_fields():
    # swizzle codes of Table 40 land in bits 61-63; base offset in 49-51; LBO mode bit 52.
    assert d.smem_desc_const(lbo=16, sbo=512, swizzle="64B") >> 61 == 4
    assert d.smem_desc_const(lbo=16, sbo=256, swizzle="32B") >> 61 == 6
    assert d.smem_desc_const(lbo=16, sbo=128, swizzle="none") >> 61 == 0
    assert d.smem_desc_const(lbo=16, sbo=1024, swizzle="128B_base32B") >> 61 == 1
    assert d.smem_desc_const(lbo=16, sbo=1024, base_offset=5) >> 49 & 7 == 5
    assert d.smem_desc_const(lbo=16, sbo=1024, lbo_absolute=True) >> 52 & 1 == 1
    with pytest.raises(ValueError):
        d.smem_desc(0x408, lbo=16, sbo=1024)        # start not 16-B aligned
    with pytest.raises(ValueError):
        d.smem_desc_const(lbo=16, sbo=1024, swizzle="16B")


def test_kstep_offsets():
    # K-major, 128-row stripes: k-steps 0-3 move 32 B inside the 128-B row; step 4 starts
    # the second stripe (128 x 128 = 16384 B on); step 5 = 16384 + 32.
    assert [d.kmajor_sw128_kstep(k, rows=128) for k in range(8)] == [
        0, 32, 64, 96, 16384, 16416, 16448, 16480]
    # 64-row stripes (the 2-CTA / half-tile layouts): the stripe is 8192 B.
    assert d.kmajor_sw128_kstep(5, rows=64) == 8192 + 32
    # MN-major: a k-step is 16 K-rows of 128 B.
    assert [d.mnmajor_sw128_kstep(k) for k in (0, 1, 7)] == [0, 2048, 14336]
    # Advancing a descriptor adds bytes >> 4 to the start field only.
    desc = d.kmajor_sw128(0x2400)
    assert d.desc_advance(desc, 16416) == desc + (16416 >> 4)
    with pytest.raises(ValueError):
        d.desc_advance(d.kmajor_sw128(0x3FF00), 0x200)


# ---------------------------------------------------------------- tensor memory addresses

def test_tmem_address_fields():
    # 9.7.16.1.1: lane in bits 31-16, column in bits 15-0.
    assert d.tmem_addr(80, 0x100) == 0x0050_0100
    assert (d.tmem_lane(0x0050_0100), d.tmem_col(0x0050_0100)) == (80, 0x100)
    with pytest.raises(ValueError):
        d.tmem_addr(128, 0)
    with pytest.raises(ValueError):
        d.tmem_addr(0, 512)


def test_alloc_columns():
    assert [d.alloc_columns(n) for n in (1, 32, 33, 320, 512)] == [32, 32, 64, 512, 512]
    with pytest.raises(ValueError):
        d.alloc_columns(513)


def test_warp_lane_quarters():
    # 9.7.16.8.1: warp w % 4 of a warpgroup reaches lanes 32(w % 4) .. +31.
    assert [d.warp_lane_base(w) for w in range(4, 12)] == [0, 32, 64, 96, 0, 32, 64, 96]


@pytest.mark.parametrize("cid", [0, 1])
@pytest.mark.parametrize("warp", [0, 1, 2, 3])
def test_consumer_load_addresses(cid, warp):
    # Seed plan: consumer cid at lane alignment 16*cid; S at column 0, O at 128, P at 256.
    # Warp w of the consumer loads lanes 32w + 16cid .. +15.
    lane = 32 * warp + 16 * cid
    assert d.ld_base_addr(64, 4 + 4 * cid + warp, 16 * cid, 0) == lane << 16
    assert d.ld_base_addr(64, warp, 16 * cid, 128) == lane << 16 | 128
    assert d.ld_base_addr(64, warp, 16 * cid, 256) == lane << 16 | 256


def test_layout_f_rows_and_threads_agree():
    """Every thread's row (thread_fragment) sits in a lane its warp may access, at the
    lane its load address points to, and every (row, column) is loaded exactly once."""
    for cid in (0, 1):
        covered = set()
        for warp in range(4):
            base = d.tmem_lane(d.ld_base_addr(64, warp, 16 * cid))
            for t in range(32):
                fr = d.thread_fragment(64, 128, warp, t, acc_rows=ROWS)
                lane = d.acc_lane(64, fr.row, 16 * cid)
                assert lane == base + t % 16
                assert d.warp_lane_base(warp) <= lane < d.warp_lane_base(warp) + 32
                covered |= {(fr.row, fr.col_start + c) for c in range(fr.ncols)}
        assert covered == {(r, c) for r in range(64) for c in range(128)}
    # The two consumers never share a lane.
    lanes = [{d.acc_lane(64, r, 16 * c) for r in range(64)} for c in (0, 1)]
    assert not lanes[0] & lanes[1] and len(lanes[0] | lanes[1]) == 128


def test_layout_d_whole_rows():
    assert [d.acc_lane(128, r) for r in (0, 37, 127)] == [0, 37, 127]
    fr = d.thread_fragment(128, 128, 6, 9, acc_rows=ROWS)
    assert (fr.row, fr.col_start, fr.ncols) == (73, 0, 128)
    assert d.ld_base_addr(128, 6) == 64 << 16
    with pytest.raises(ValueError):
        d.acc_lane(128, 0, lane_align=16)
    with pytest.raises(ValueError):
        d.acc_lane(64, 0, lane_align=8)


def test_layout_f_lane_values():
    # row 37 = 16*2 + 5 -> sub-partition 2: lane 64 + align + 5.
    assert d.acc_lane(64, 37, 0) == 69
    assert d.acc_lane(64, 37, 16) == 85
    fr = d.thread_fragment(64, 128, 2, 21, acc_rows=ROWS)       # second half-warp: columns 64..127
    assert (fr.row, fr.col_start, fr.ncols) == (37, 64, 64)
