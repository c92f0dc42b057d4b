"""The emulator's sm_100 descriptor decoders against values worked out by hand from the
PTX ISA (tcgen05 "Instruction descriptor", "Shared memory descriptor") and CUTLASS
(include/cute/arch/mma_sm100_desc.hpp: InstrDescriptor, SmemDescriptor, make_umma_desc).

The last tests also decode what the compiler's own encoder (lowering/sm100/descriptors.py)
produces: the two were written apart, so agreement is evidence and a disagreement is a
bug on one side, to be settled from the ISA.
"""
from __future__ import annotations

import numpy as np
import pytest

from choreo_py.emu.sm100_desc import (DescriptorError, decode_instr_desc, decode_smem_desc,
                                      decode_tmem_addr, encode_tmem_addr, operand_addresses,
                                      swizzle_address)

pytestmark = pytest.mark.emu


# ----------------------------------------------------------------- instruction descriptor
def test_idesc_bf16_f32_m128_n256():
    # c_format [4,6) = 1 (F32) -> 0x10; a_format [7,10) = 1 (BF16) -> 0x80;
    # b_format [10,13) = 1 -> 0x400; n_dim [17,23) = 256>>3 = 32 -> 0x400000;
    # m_dim [24,29) = 128>>4 = 8 -> 0x08000000.
    d = decode_instr_desc(0x08400490, "f16")
    assert (d.m, d.n, d.k) == (128, 256, 16)
    assert (d.a_dtype, d.b_dtype, d.d_dtype) == ("bf16", "bf16", "f32")
    assert (d.a_major, d.b_major, d.negate_a, d.negate_b) == ("K", "K", False, False)


def test_idesc_m64_n128_transpose_b_negate_a():
    # m_dim 4 -> 0x04000000; n_dim 16 -> 0x200000; b_major [16] -> 0x10000;
    # a_negate [13] -> 0x2000; F16 inputs (0) and F32 D (0x10).
    d = decode_instr_desc(0x04000000 | 0x200000 | 0x10000 | 0x2000 | 0x10, "f16")
    assert (d.m, d.n, d.a_dtype, d.d_dtype) == (64, 128, "f16", "f32")
    assert (d.b_major, d.a_major, d.negate_a) == ("MN", "K", True)


def test_idesc_tf32_and_f8():
    # kind::tf32: a/b format 2 -> 0x100 | 0x800, K = 8 per MMA (32 bytes of a row).
    d = decode_instr_desc(0x08000000 | (64 >> 3) << 17 | 0x100 | 0x800 | 0x10, "tf32")
    assert (d.a_dtype, d.k, d.n) == ("tf32", 8, 64)
    # kind::f8f6f4: E5M2 A (1 << 7), E4M3 B (0), f32 D; K = 32.
    d = decode_instr_desc(0x08000000 | 4 << 17 | 0x80 | 0x10, "f8f6f4")
    assert (d.a_dtype, d.b_dtype, d.k) == ("e5m2", "e4m3", 32)


@pytest.mark.parametrize("raw,kind,msg", [
    (0x10000000 | 16 << 17 | 0x490, "f16", "cta_group::2"),        # M = 256
    (0x02000000 | 16 << 17 | 0x490, "f16", "64 or 128"),           # M = 32
    (0x08000000 | 1 << 17 | 0x490, "f16", "multiple of 16"),      # M = 128, N = 8
    (0x08400490 | 3 << 7, "f16", "format code"),                  # A format 3 under kind::f16
    (0x08400490 | 1 << 23, "f16", "reserved bit 23"),
    (0x08400490, "mxf4", "not modelled"),
])
def test_idesc_refusals(raw, kind, msg):
    with pytest.raises(DescriptorError, match=msg):
        decode_instr_desc(raw, kind)


# ----------------------------------------------------------------- shared memory descriptor
def test_smem_desc_fields():
    # start 1024 >> 4 = 0x40 [0,14); LBO 16 >> 4 = 1 at [16,30); SBO 1024 >> 4 = 64 at [32,46);
    # version 1 at bit 46; layout SWIZZLE_128B = 2 at [61,64).
    raw = 0x40 | 1 << 16 | 64 << 32 | 1 << 46 | 2 << 61
    assert raw == 0x4000404000010040
    d = decode_smem_desc(raw)
    assert (d.start, d.lbo, d.sbo, d.version, d.base_offset, d.lbo_mode, d.layout) == \
        (1024, 16, 1024, 1, 0, 0, "SWIZZLE_128B")


@pytest.mark.parametrize("code,name", [(0, "SWIZZLE_NONE"), (1, "SWIZZLE_128B_BASE32B"),
                                       (4, "SWIZZLE_64B"), (6, "SWIZZLE_32B")])
def test_smem_desc_layout_types(code, name):
    assert decode_smem_desc(1 << 46 | code << 61).layout == name


def test_smem_desc_refusals():
    with pytest.raises(DescriptorError, match="version bits 46-47 = 0"):
        decode_smem_desc(2 << 61)                          # an sm_90 wgmma descriptor
    with pytest.raises(DescriptorError, match="layout type 3"):
        decode_smem_desc(1 << 46 | 3 << 61)
    with pytest.raises(DescriptorError, match="base offset"):
        operand_addresses(decode_smem_desc(1 << 46 | 2 << 61 | 1 << 49), "K", 8, 16, 2)


@pytest.mark.parametrize("bit", [48, 53, 56, 60])
def test_smem_desc_fixed_bits(bit):
    # PTX ISA tcgen05 shared memory descriptor: bits 46-48 are the constant 0b001 and bits
    # 53-60 the constant 0; a descriptor with any of them flipped is not one the hardware
    # defines (CUTLASS calls bit 48 reserved), so a lowering that sets one is caught.
    good = 0x40 | 1 << 16 | 64 << 32 | 1 << 46 | 2 << 61
    decode_smem_desc(good)
    with pytest.raises(DescriptorError, match="the ISA fixes them"):
        decode_smem_desc(good | 1 << bit)


def test_kmajor_sw128_addresses_match_tma_pattern():
    # K-major SWIZZLE_128B bf16 ((8,m),(T,2)):((8T,SBO),(1,T)) from a 1024-aligned start:
    # row r, element k sits at r%8 * 128 + r//8 * SBO + 2k, then 16-B chunk (k // 8) ^ (r % 8).
    desc = decode_smem_desc(0x4000404000010040)               # start 1024, SBO 1024
    addr = operand_addresses(desc, "K", 128, 16, 2)
    assert addr[3, 9] == 1024 + 3 * 128 + ((1 ^ 3) * 16) + 2    # chunk 1 -> 2
    assert addr[8, 0] == 1024 + 1024                            # next 8-row group: SBO
    assert addr[13, 15] == 1024 + 1024 + 5 * 128 + ((1 ^ 5) * 16) + 14
    assert len(np.unique(addr)) == addr.size


def test_kmajor_kstep_inside_atom():
    # Moving the start 32 B (one K=16 bf16 step) keeps base offset 0: the XOR uses address
    # bits 7-9, so row r's k-step 1 reads 16-B chunks (2 ^ r%8, 3 ^ r%8).
    desc = decode_smem_desc(0x4000404000010040 + 2)           # start + 32 B
    addr = operand_addresses(desc, "K", 8, 16, 2)
    assert addr[5, 0] == 1024 + 5 * 128 + (2 ^ 5) * 16
    assert addr[5, 8] == 1024 + 5 * 128 + (3 ^ 5) * 16


def test_mnmajor_sw128_addresses():
    # MN-major SWIZZLE_128B ((8,n),(8,k)) units: ((1,LBO),(8,SBO)); element (mn, k):
    # 16-B unit mn//8 (of 8 per 128-B row), row k%8 of a 1024-B atom, k//8 atoms SBO apart,
    # 64-element MN stripes LBO apart. LBO = 8192 here (a 64 x 128 stripe of a V tile).
    raw = (0 >> 4) | (8192 >> 4) << 16 | (1024 >> 4) << 32 | 1 << 46 | 2 << 61
    addr = operand_addresses(decode_smem_desc(raw), "MN", 128, 16, 2)
    assert addr[0, 0] == 0
    assert addr[9, 0] == 16 + 2                                  # unit 1, element 1
    assert addr[9, 3] == (3 * 128) + ((1 ^ 3) * 16) + 2
    assert addr[70, 10] == 8192 + 1024 + 2 * 128 + ((0 ^ 2) * 16) + 12


def test_no_swizzle_kmajor_core_matrices():
    # INTERLEAVE K-major ((8,n),2):((1,SBO),LBO): 8 rows of 16 B contiguous, LBO between
    # the two K halves, SBO between 8-row groups.
    raw = (4096 >> 4) | (128 >> 4) << 16 | (256 >> 4) << 32 | 1 << 46
    addr = operand_addresses(decode_smem_desc(raw), "K", 16, 16, 2)
    assert addr[1, 0] == 4096 + 16
    assert addr[0, 8] == 4096 + 128
    assert addr[9, 9] == 4096 + 256 + 16 + 128 + 2


def test_swizzle_patterns():
    assert swizzle_address(0x3F0 | 0x80, "SWIZZLE_32B") == (0x3F0 | 0x80) ^ 0x10
    assert swizzle_address(0x180, "SWIZZLE_64B") == 0x180 ^ 0x30
    assert swizzle_address(0x380 + 0x10, "SWIZZLE_128B") == 0x380 + (0x10 ^ 0x70)
    assert swizzle_address(0x390, "SWIZZLE_NONE") == 0x390


def test_tmem_address():
    # lane in bits 31..16, column in 15..0
    assert decode_tmem_addr(0x00100080) == decode_tmem_addr(encode_tmem_addr(16, 128))
    a = decode_tmem_addr(0x00100080)
    assert (a.lane, a.col) == (16, 128)


# ----------------------------------------------------------------- the compiler's encoder
def test_backend_instr_desc_agrees():
    enc = pytest.importorskip("choreo_py.lowering.sm100.descriptors")
    for m, n in [(64, 128), (128, 128), (128, 256), (64, 64)]:
        for bm in ("K", "MN"):
            d = decode_instr_desc(enc.instr_desc_f16(m, n, b_major=bm), "f16")
            assert (d.m, d.n, d.a_dtype, d.d_dtype, d.b_major) == (m, n, "bf16", "f32", bm)


def test_backend_smem_desc_agrees():
    enc = pytest.importorskip("choreo_py.lowering.sm100.descriptors")
    d = decode_smem_desc(enc.kmajor_sw128(2048))
    assert (d.start, d.sbo, d.layout, d.version, d.base_offset) == (2048, 1024, "SWIZZLE_128B", 1, 0)
    d = decode_smem_desc(enc.mnmajor_sw128(4096, 16384))
    assert (d.start, d.lbo, d.sbo) == (4096, 16384, 1024)
