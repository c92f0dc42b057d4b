"""Tensor memory rules, tcgen05.ld/st fragment maps and tcgen05.mma semantics of the
emulator (choreo_py/emu/tmem.py, tcgen05.py), checked against numpy and against maps
worked out by hand from CUTLASS's Copy_Traits<SM100_TMEM_LOAD_*> layouts."""
from __future__ import annotations

import numpy as np
import pytest

from choreo_py.emu.tcgen05 import Tcgen05State, bf16_to_f32
from choreo_py.emu.tmem import (ATOMS_X2, POISON, TensorMemory, TmemError, accumulator_lanes,
                                atom_map, check_warp_lanes, fragment_map)

pytestmark = pytest.mark.emu


# ----------------------------------------------------------------- allocation
def test_alloc_sizes_blocking_and_dealloc():
    t = TensorMemory()
    assert t.alloc(256) == 0 and t.alloc(128) == 256 and t.alloc(128) == 384
    assert t.alloc(32) is None                         # full: the alloc blocks
    t.dealloc(256, 128)
    assert t.alloc(64) == 256
    with pytest.raises(TmemError, match="power of 2"):
        t.alloc(48)
    with pytest.raises(TmemError, match="power of 2"):
        t.alloc(16)
    with pytest.raises(TmemError, match="not a live allocation"):
        t.dealloc(256, 128)                            # it is 256+64 now
    assert t.leaked() == [(0, 256), (256, 64), (384, 128)]


def test_alloc_after_relinquish_is_an_error():
    t = TensorMemory()
    t.alloc(32)
    t.relinquish()
    with pytest.raises(TmemError, match="relinquish_alloc_permit"):
        t.alloc(32)


def test_warp_quarter_rule():
    check_warp_lanes(5, np.arange(32, 64), "ld")      # warp 5 % 4 = 1: lanes 32..63
    with pytest.raises(TmemError, match="outside its lanes 32..63"):
        check_warp_lanes(5, np.array([31]), "ld")
    with pytest.raises(TmemError, match="outside its lanes 0..31"):
        check_warp_lanes(4, np.arange(16, 48), "ld")


# ----------------------------------------------------------------- fragment maps
def test_fragment_32x32b():
    # 32dp32b1x: DstLayout (32,32):(32,1) over 32-bit lanes: thread t -> lane t; .xN: column r.
    fm = fragment_map("32x32b", 4)
    assert (fm.lane[:, 2] == np.arange(32)).all() and (fm.col_lo[7] == [0, 1, 2, 3]).all()


def test_fragment_16x64b():
    # 16dp64b1x: ((2,2,8),32):((512,32,64),1) over 64-bit lanes: t = t0 + 2 t1 + 4 t2
    # -> lane 8 t0 + t2, column t1.  So T1 is lane 8, T2 column 1, T4 lane 1.
    fm = fragment_map("16x64b", 1)
    assert [(fm.lane[t, 0], fm.col_lo[t, 0]) for t in (0, 1, 2, 3, 4, 31)] == \
        [(0, 0), (8, 0), (0, 1), (8, 1), (1, 0), (15, 1)]


def test_fragment_16x128b_and_16x256b():
    # 16dp128b1x: ((4,8),(32,2)):((32,128),(1,1024)): thread t -> column t%4, lane t//4,
    # register 1 eight lanes down.
    fm = fragment_map("16x128b", 1)
    assert (fm.lane[13].tolist(), fm.col_lo[13].tolist()) == ([3, 11], [1, 1])
    # 16dp256b1x: ((4,8),(64,2)):((64,256),(1,2048)): registers 0,1 columns 2(t%4)+{0,1}.
    fm = fragment_map("16x256b", 2)
    assert fm.lane[6].tolist() == [1, 1, 9, 9, 1, 1, 9, 9]
    assert fm.col_lo[6].tolist() == [4, 5, 4, 5, 12, 13, 12, 13]


def test_fragment_16x32bx2_half_split_and_pack():
    # 16dp32b: ((16,2),N):((..),1): threads 0-15 lanes 0-15, threads 16-31 the same lanes
    # immHalfSplitoff columns on.
    fm = fragment_map("16x32bx2", 4, half_split=64)
    assert fm.lane[17].tolist() == [1] * 4 and fm.col_lo[17].tolist() == [64, 65, 66, 67]
    # pack::16b (16dp32b1x_16b ValID ((16,4),16):((1,32),DP)): register r = cells 2r, 2r+1.
    fm = fragment_map("16x32bx2", 2, pack16=True, half_split=4)
    assert fm.col_lo[20].tolist() == [4, 6] and fm.col_hi[20].tolist() == [5, 7]


@pytest.mark.parametrize("shape", sorted(ATOMS_X2))
def test_repeat_rule_matches_cutlass_x2(shape):
    lane, col = atom_map(*ATOMS_X2[shape])
    fm = fragment_map(shape, 2, half_split=2)
    assert (fm.lane == lane).all() and (fm.col_lo == col).all()


def test_accumulator_lanes():
    assert (accumulator_lanes(128, 0) == np.arange(128)).all()
    lanes = accumulator_lanes(64, 16)
    assert lanes[[0, 15, 16, 63]].tolist() == [16, 31, 48, 127]
    with pytest.raises(TmemError):
        accumulator_lanes(64, 8)
    with pytest.raises(TmemError):
        accumulator_lanes(128, 16)


# ----------------------------------------------------------------- MMA
def _bf16(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even bf16 bit patterns of f32 values."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _store_kmajor_sw128(smem: np.ndarray, base: int, mat_bits: np.ndarray) -> None:
    """Write rows x 64 bf16 the way TMA's 128-B swizzle does: 16-B chunk c of row r at
    r * 128 + (c ^ r % 8) * 16 (base 1024-aligned). Independent of the decoder."""
    rows = mat_bits.shape[0]
    for r in range(rows):
        row = mat_bits[r].view(np.uint8)
        for c in range(8):
            off = base + r * 128 + ((c ^ (r % 8)) * 16)
            smem[off:off + 16] = row[c * 16:(c + 1) * 16]


def _kdesc(start: int) -> int:
    return (start >> 4) | 1 << 16 | (1024 >> 4) << 32 | 1 << 46 | 2 << 61


def _idesc(m: int, n: int) -> int:
    return 1 << 4 | 1 << 7 | 1 << 10 | (n >> 3) << 17 | (m >> 4) << 24


@pytest.mark.parametrize("m,lane_base", [(128, 0), (64, 0), (64, 16)])
def test_mma_kmajor_smem(m, lane_base):
    rng = np.random.default_rng(m + lane_base)
    a = _bf16(rng.standard_normal((m, 64)))
    b = _bf16(rng.standard_normal((64, 64)))
    smem = np.zeros(48 * 1024, np.uint8)
    _store_kmajor_sw128(smem, 0, a)
    _store_kmajor_sw128(smem, 16384, b)
    st = Tcgen05State()
    st.tmem.alloc(128)
    for kk in range(4):                                  # K = 64 as four K = 16 MMAs
        st.mma(0, 10, "f16", _idesc(m, 64), lane_base << 16, ("smem", _kdesc(32 * kk)),
               _kdesc(16384 + 32 * kk), kk > 0, smem)
    want = bf16_to_f32(a).astype(np.float64) @ bf16_to_f32(b).astype(np.float64).T
    lanes = accumulator_lanes(m, lane_base)
    assert not st.tmem.written.any()                     # nothing lands before the commit
    st.commit(0)
    got = st.tmem.cells[lanes, :64].view(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert not st.reports


def test_mma_a_from_tmem_lane16_is_flagged():
    rng = np.random.default_rng(3)
    a = _bf16(rng.standard_normal((64, 16)))
    b = _bf16(rng.standard_normal((64, 16)))              # N x K, K-major
    smem = np.zeros(16384, np.uint8)
    _store_kmajor_sw128(smem, 0, np.pad(b, ((0, 0), (0, 48))))
    st = Tcgen05State()
    st.tmem.alloc(256)
    lanes = accumulator_lanes(64, 16)
    packed = a[:, 0::2].astype(np.uint32) | a[:, 1::2].astype(np.uint32) << 16
    st.tmem.write(lanes[:, None], 128 + np.arange(8)[None, :], packed)
    st.mma(0, 7, "f16", _idesc(64, 64), 16 << 16, ("tmem", 16 << 16 | 128), _kdesc(0), False, smem)
    st.commit(0)
    want = bf16_to_f32(a).astype(np.float64) @ bf16_to_f32(b).astype(np.float64).T
    np.testing.assert_allclose(st.tmem.cells[lanes, :64].view(np.float32), want, rtol=1e-5, atol=1e-5)
    assert [r.kind for r in st.reports] == ["tmem-a-lane16"]


def test_ld_before_commit_is_a_race_and_ld_poison_until_wait():
    smem = np.zeros(32768, np.uint8)
    st = Tcgen05State()
    st.tmem.alloc(64)
    st.mma(0, 12, "f16", _idesc(128, 64), 0, ("smem", _kdesc(0)), _kdesc(16384), False, smem)
    real, now = st.ld(0, 20, 0, "32x32b", 4, False, None, np.ones(32, bool))
    assert [r.kind for r in st.reports][:1] == ["tmem-race"]
    assert "line 12" in st.reports[0].message
    assert (now == POISON).all()                          # strict: poison until wait::ld
    st.reports.clear()
    st.commit(0)
    real, now = st.ld(0, 21, 0, "32x32b", 4, False, None, np.ones(32, bool))
    assert not st.reports and (real.view(np.float32) == 0).all()


def test_st_needs_wait_and_fence_before_mma():
    smem = np.zeros(32768, np.uint8)
    st = Tcgen05State()
    st.tmem.alloc(256)
    vals = np.zeros((32, 8), np.uint32)
    for w in range(4):
        st.st(w, 30, (32 * w) << 16 | 128, "32x32b", 8, False, None, vals, np.ones(32, bool))
    st.mma(0, 40, "f16", _idesc(128, 64), 0, ("tmem", 128), _kdesc(16384), False, smem)
    assert st.reports[-1].kind == "tcgen05.st-unordered"
    assert "tcgen05.wait::st" in st.reports[-1].message
    for w in range(4):
        st.wait_st(w)
    st.mma(0, 41, "f16", _idesc(128, 64), 0, ("tmem", 128), _kdesc(16384), False, smem)
    assert "fence::before_thread_sync" in st.reports[-1].message
    n = len(st.reports)
    for w in range(4):
        st.fence_before(w)
    st.mma(0, 42, "f16", _idesc(128, 64), 0, ("tmem", 128), _kdesc(16384), False, smem)
    assert len(st.reports) == n


def test_ld_outside_quarter_and_unallocated():
    st = Tcgen05State()
    st.tmem.alloc(32)
    with pytest.raises(TmemError, match="outside its lanes"):
        st.ld(1, 5, 0, "32x32b", 1, False, None, np.ones(32, bool))
    with pytest.raises(TmemError, match="not allocated"):
        st.ld(0, 5, 32, "32x32b", 1, False, None, np.ones(32, bool))


# ----------------------------------------------------------------- raw PTX through the handlers
ROUNDTRIP = """.version 8.8
.target sm_100a
.address_size 64
.extern .shared .align 128 .b8 smem[];

.visible .entry k(
\t.param .u64 p_y
)
{
\t.reg .u32 %sm, %tid, %warp, %lane, %t, %addr, %v<4>, %w<4>, %off;
\t.reg .u64 %py, %o64;
\t.reg .pred %alloc;
\tmov.u32 %sm, smem;
\tmov.u32 %tid, %tid.x;
\tshr.u32 %warp, %tid, 5;
\tand.b32 %lane, %tid, 31;
\tsetp.eq.u32 %alloc, %warp, 0;
\t@%alloc tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%sm], 64;
\ttcgen05.fence::before_thread_sync;
\tbar.sync 0;
\ttcgen05.fence::after_thread_sync;
\tld.shared.u32 %t, [%sm];
\tshl.b32 %addr, %warp, 21;
\tADDR_FIXUP
\tadd.u32 %addr, %addr, %t;
\tmul.lo.u32 %v0, %tid, 4;
\tadd.u32 %v1, %v0, 1;
\tadd.u32 %v2, %v0, 2;
\tadd.u32 %v3, %v0, 3;
\ttcgen05.st.sync.aligned.16x64b.x4.b32 [%addr], {%v0, %v1, %v2, %v3};
\tadd.u32 %v0, %v0, 1000;
\tadd.u32 %v1, %v1, 1000;
\tadd.u32 %v2, %v2, 1000;
\tadd.u32 %v3, %v3, 1000;
\ttcgen05.st.sync.aligned.16x64b.x4.b32 [%addr+1048576], {%v0, %v1, %v2, %v3};
\ttcgen05.wait::st.sync.aligned;
\ttcgen05.ld.sync.aligned.32x32b.x2.b32 {%w0, %w1}, [%addr];
\ttcgen05.wait::ld.sync.aligned;
\tld.param.u64 %py, [p_y];
\tmul.lo.u32 %off, %tid, 8;
\tcvt.u64.u32 %o64, %off;
\tadd.s64 %py, %py, %o64;
\tst.global.u32 [%py], %w0;
\tst.global.u32 [%py+4], %w1;
\ttcgen05.fence::before_thread_sync;
\tbar.sync 0;
\ttcgen05.fence::after_thread_sync;
\t@%alloc tcgen05.dealloc.cta_group::1.sync.aligned.b32 %t, 64;
\t@%alloc tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
\tret;
}
"""
LAUNCH = {"grid": [1, 1, 1], "block": [128, 1, 1], "shared_bytes": 64,
          "params": [{"name": "p_y", "ptr": "Y"}],
          "tensors": {"Y": {"dtype": "s32", "shape": [256]}}}


def _roundtrip(fixup: str, strict: bool = True):
    from choreo_py.emu import EmuStats, emulate_ptx
    y = __import__("torch").zeros(256, dtype=__import__("torch").int32)
    stats = EmuStats()
    emulate_ptx(ROUNDTRIP.replace("ADDR_FIXUP", fixup), LAUNCH, {"Y": y}, strict=strict,
                stats=stats)
    return y.numpy().astype(np.int64).reshape(128, 2), stats


def test_st_16x64b_then_ld_32x32b_through_the_handlers():
    # Warp w stores at lanes 32w and 32w + 16: .16x64b.x4 puts register r of thread t at
    # lane 8 (t % 2) + t // 4, column 2 r + (t // 2) % 2 (16 lanes, columns 0-7); the
    # second store adds 1000. Thread t then loads lane t, columns 0-1 with .32x32b.x2.
    got, _ = _roundtrip("")
    want = np.full((128, 2), -1, np.int64)
    fm = fragment_map("16x64b", 4)
    for w in range(4):
        for t in range(32):
            for r in range(4):
                lane, col = 32 * w + fm.lane[t, r], fm.col_lo[t, r]
                if col < 2:
                    want[lane, col] = 4 * (32 * w + t) + r
                    want[lane + 16, col] = 4 * (32 * w + t) + r + 1000
    np.testing.assert_array_equal(got, want)


def test_per_thread_tmem_address_strict_and_relaxed():
    from choreo_py.emu import EmuError
    fixup = "shl.b32 %off, %lane, 16;\n\tadd.u32 %addr, %addr, %off;"   # base + lane << 16
    with pytest.raises(EmuError, match="address differs between the threads"):
        _roundtrip(fixup)
    got, stats = _roundtrip(fixup, strict=False)
    assert any("thread 0's value used" in n for n in stats.notes)
    np.testing.assert_array_equal(got, _roundtrip("")[0])


BALLOT = """.version 8.8
.target sm_100a
.address_size 64

.visible .entry k(
\t.param .u64 p_y
)
{
\t.reg .u32 %tid, %lane, %b, %off;
\t.reg .u64 %py, %o64;
\t.reg .pred %odd, %lead;
\tmov.u32 %tid, %tid.x;
\tand.b32 %lane, %tid, 31;
\tsetp.eq.u32 %lead, %lane, 0;
\t@!%lead bra SKIP;
\tadd.u32 %lane, %lane, 0;
SKIP:
\tbar.warp.sync -1;
\tand.b32 %b, %lane, 1;
\tsetp.eq.u32 %odd, %b, 1;
\tvote.sync.ballot.b32 %b, %odd, -1;
\tld.param.u64 %py, [p_y];
\tmul.lo.u32 %off, %tid, 4;
\tcvt.u64.u32 %o64, %off;
\tadd.s64 %py, %py, %o64;
\tst.global.u32 [%py], %b;
\tret;
}
"""


def test_vote_ballot_after_a_reconverged_branch():
    import torch
    from choreo_py.emu import emulate_ptx
    y = torch.zeros(64, dtype=torch.int32)
    emulate_ptx(BALLOT, {"grid": [1, 1, 1], "block": [64, 1, 1], "shared_bytes": 0,
                         "params": [{"name": "p_y", "ptr": "Y"}],
                         "tensors": {"Y": {"dtype": "s32", "shape": [64]}}}, {"Y": y},
                schedule="random", seed=4)
    assert (y.numpy().view(np.uint32) == 0xAAAAAAAA).all()       # the odd lanes' votes


VOTE = """.version 8.8
.target sm_100a
.address_size 64

.visible .entry k(
\t.param .u64 p_y
)
{
\t.reg .u32 %tid, %lane, %b, %off, %r;
\t.reg .u64 %py, %o64;
\t.reg .pred %one, %any, %all, %none;
\tmov.u32 %tid, %tid.x;
\tand.b32 %lane, %tid, 31;
\tshr.u32 %b, %tid, 5;
\tsetp.eq.u32 %one, %lane, %b;
\tvote.sync.any.pred %any, %one, -1;
\tvote.sync.all.pred %all, %one, -1;
\tsetp.lt.u32 %none, %tid, 64;
\tvote.sync.all.pred %none, %none, -1;
\tselp.u32 %r, 1, 0, %any;
\tselp.u32 %b, 2, 0, %all;
\tadd.u32 %r, %r, %b;
\tselp.u32 %b, 4, 0, %none;
\tadd.u32 %r, %r, %b;
\tld.param.u64 %py, [p_y];
\tmul.lo.u32 %off, %tid, 4;
\tcvt.u64.u32 %o64, %off;
\tadd.s64 %py, %py, %o64;
\tst.global.u32 [%py], %r;
\tret;
}
"""


def test_vote_any_and_all_are_the_warps():
    """One lane of each warp (lane w of warp w) holds %one: `any` holds in every warp, `all`
    in none; tid < 64 holds in every lane of warps 0 and 1 and in none of warp 2, so its
    `all` holds there only. Every lane of a warp gets the warp's answer."""
    import torch
    from choreo_py.emu import emulate_ptx
    y = torch.zeros(96, dtype=torch.int32)
    emulate_ptx(VOTE, {"grid": [1, 1, 1], "block": [96, 1, 1], "shared_bytes": 0,
                       "params": [{"name": "p_y", "ptr": "Y"}],
                       "tensors": {"Y": {"dtype": "s32", "shape": [96]}}}, {"Y": y},
                schedule="random", seed=2)
    assert y.tolist() == [1 + 4] * 64 + [1] * 32


def test_st_onto_cells_an_mma_in_flight_reads_or_writes_is_a_race():
    """P written over S while the MMA reading P (as A) or writing S (as D) is in flight."""
    smem = np.zeros(32768, np.uint8)
    st = Tcgen05State()
    st.tmem.alloc(256)
    vals = np.zeros((32, 8), np.uint32)
    ones = np.ones(32, bool)
    for w in range(4):
        st.st(w, 30, (32 * w) << 16 | 128, "32x32b", 8, False, None, vals, ones)
        st.wait_st(w)
        st.fence_before(w)
    st.mma(0, 40, "f16", _idesc(128, 64), 0, ("tmem", 128), _kdesc(16384), False, smem)
    assert not st.reports
    st.st(1, 50, 32 << 16 | 128, "32x32b", 8, False, None, vals, ones)   # A still read
    assert [r.kind for r in st.reports] == ["tmem-race"]
    assert "lane 32 column 128 that the tcgen05.mma at line 40 reads as its A operand" in \
        st.reports[0].message
    st.reports.clear()
    st.st(2, 51, 64 << 16 | 0, "32x32b", 8, False, None, vals, ones)      # D still written
    assert "lane 64 column 0 that the tcgen05.mma at line 40 writes" in st.reports[0].message
    st.reports.clear()
    st.commit(0)
    st.st(1, 52, 32 << 16 | 128, "32x32b", 8, False, None, vals, ones)
    st.st(2, 53, 64 << 16 | 0, "32x32b", 8, False, None, vals, ones)
    assert not st.reports                                  # completed: nothing in flight
