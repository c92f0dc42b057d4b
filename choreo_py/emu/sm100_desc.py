"""Decoders of the sm_100a (tcgen05) descriptors the emulator meets in PTX.

Written from the PTX ISA (9.7.16 "Tensorcore 5th Generation Family Instructions")
and CUTLASS's definitions of the same bit fields (include/cute/arch/mma_sm100_desc.hpp:
``UMMA::InstrDescriptor``, ``UMMA::SmemDescriptor``, the canonical layouts above
``make_umma_desc``). It deliberately does not import the compiler's encoders
(lowering/sm100): the emulator judges them, so it must read the bits on its own.

Three things are decoded:

* the 32-bit instruction descriptor of ``tcgen05.mma`` (kinds f16, tf32, f8f6f4, i8);
* the 64-bit shared-memory matrix descriptor (start, LBO, SBO, version, base offset,
  LBO mode, layout type), and from it the byte address of every element of an
  operand slice (the canonical K-major / MN-major layouts and their swizzles);
* tensor-memory addresses (lane in bits 31..16, column in bits 15..0).

Anything the emulator cannot model exactly (sparsity, a non-zero base offset, the
absolute LBO mode, SWIZZLE_128B_BASE32B) raises ``DescriptorError`` naming it, so a
kernel using it is refused rather than computed wrongly.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .swizzle import swizzle


class DescriptorError(ValueError):
    """A descriptor the hardware would reject, or one the emulator does not model."""


def _bits(value: int, low: int, width: int) -> int:
    return (value >> low) & ((1 << width) - 1)


# ----------------------------------------------------------------- instruction descriptor
# UMMA::InstrDescriptor (mma_sm100_desc.hpp), PTX ISA "Instruction descriptor" table:
#   [0,2) sparse id2   [2] sparse flag   [3] saturate   [4,6) D format (c_format)
#   [7,10) A format    [10,13) B format  [13] negate A  [14] negate B
#   [15] A major (0 K, 1 MN)   [16] B major   [17,23) N >> 3   [23] reserved
#   [24,29) M >> 4    [29] reserved     [30,32) max shift (.ws only)
# Format codes depend on the kind named in the instruction text:
_AB_FORMATS = {
    "f16": {0: "f16", 1: "bf16"},
    "tf32": {2: "tf32"},
    "f8f6f4": {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"},
    "i8": {0: "u8", 1: "s8"},
}
_D_FORMATS = {
    "f16": {0: "f16", 1: "f32"},
    "tf32": {1: "f32"},
    "f8f6f4": {0: "f16", 1: "f32"},
    "i8": {2: "s32"},
}
# K of one MMA is always 32 bytes of A/B per row (dense): 16 x 16-bit, 8 x tf32, 32 x 8-bit.
_K_PER_MMA = {"f16": 16, "tf32": 8, "f8f6f4": 32, "i8": 32}
_AB_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "e2m3": 1, "e3m2": 1,
             "e2m1": 1, "u8": 1, "s8": 1}


@dataclass(frozen=True)
class InstrDesc:
    kind: str
    m: int
    n: int
    k: int
    a_dtype: str
    b_dtype: str
    d_dtype: str
    a_major: str          # "K" or "MN"
    b_major: str
    negate_a: bool
    negate_b: bool
    saturate: bool
    sparse: bool
    max_shift: int
    raw: int

    @property
    def ab_bytes(self) -> int:
        return _AB_BYTES[self.a_dtype]


def decode_instr_desc(raw: int, kind: str) -> InstrDesc:
    """Decode a dense-or-sparse tcgen05.mma instruction descriptor of `kind`.

    The shape check is Table "Matrix shape" for cta_group::1: M = 64 or 128,
    N a multiple of 8 in [8, 256] (16 when M = 128); M = 256 is a cta_group::2
    shape and is refused here by name.
    """
    if raw >> 32:
        raise DescriptorError(f"instruction descriptor {raw:#x} is wider than 32 bits")
    if kind not in _AB_FORMATS:
        raise DescriptorError(f"tcgen05.mma kind::{kind} is not modelled")
    a_code, b_code, d_code = _bits(raw, 7, 3), _bits(raw, 10, 3), _bits(raw, 4, 2)
    try:
        a_dtype, b_dtype = _AB_FORMATS[kind][a_code], _AB_FORMATS[kind][b_code]
        d_dtype = _D_FORMATS[kind][d_code]
    except KeyError as exc:
        raise DescriptorError(f"kind::{kind}: invalid format code {exc.args[0]} in "
                              f"instruction descriptor {raw:#010x}") from None
    m, n = _bits(raw, 24, 5) << 4, _bits(raw, 17, 6) << 3
    if m == 256:
        raise DescriptorError("M = 256 needs cta_group::2, which the emulator does not model")
    if m not in (64, 128):
        raise DescriptorError(f"instruction descriptor M = {m}: cta_group::1 allows 64 or 128")
    step = 8 if m == 64 else 16
    if n < step or n > 256 or n % step:
        raise DescriptorError(f"instruction descriptor N = {n}: M = {m} needs a multiple of "
                              f"{step} in [{step}, 256]")
    for bit in (6, 23, 29):
        if _bits(raw, bit, 1):
            raise DescriptorError(f"instruction descriptor {raw:#010x}: reserved bit {bit} set")
    return InstrDesc(
        kind=kind, m=m, n=n, k=_K_PER_MMA[kind], a_dtype=a_dtype, b_dtype=b_dtype,
        d_dtype=d_dtype, a_major="MN" if _bits(raw, 15, 1) else "K",
        b_major="MN" if _bits(raw, 16, 1) else "K", negate_a=bool(_bits(raw, 13, 1)),
        negate_b=bool(_bits(raw, 14, 1)), saturate=bool(_bits(raw, 3, 1)),
        sparse=bool(_bits(raw, 2, 1)), max_shift=_bits(raw, 30, 2), raw=raw)


# ----------------------------------------------------------------- shared memory descriptor
# PTX ISA, tcgen05 "Matrix Descriptors" / "Shared memory descriptor" (the layout table of
# section tcgen05-shared-memory-desc-layout; CUTLASS's UMMA::SmemDescriptor splits the
# fixed field as a 2-bit version and a reserved bit 48):
#   [0,14) start address >> 4      [14,16) unused
#   [16,30) leading byte offset >> 4   [30,32) unused
#   [32,46) stride byte offset >> 4    [46,49) fixed constant 0b001 (0 is sm_90's wgmma)
#   [49,52) base offset   [52] LBO mode (0 relative, 1 absolute)
#   [53,61) fixed constant 0   [61,64) layout type
# The unused bits are not checked (the ISA calls them unused, not fixed).
LAYOUT_TYPES = {0: "SWIZZLE_NONE", 1: "SWIZZLE_128B_BASE32B", 2: "SWIZZLE_128B",
                4: "SWIZZLE_64B", 6: "SWIZZLE_32B"}
# Width in 16-byte units of one swizzle row (the atom's MN / K extent): Swizzle<B,4,3>.
_ATOM_UNITS = {"SWIZZLE_NONE": 1, "SWIZZLE_32B": 2, "SWIZZLE_64B": 4, "SWIZZLE_128B": 8}


@dataclass(frozen=True)
class SmemDesc:
    start: int            # bytes (shared::cta window)
    lbo: int              # bytes
    sbo: int              # bytes
    version: int
    base_offset: int
    lbo_mode: int
    layout: str
    raw: int


def decode_smem_desc(raw: int) -> SmemDesc:
    """Decode and validate a 64-bit sm_100 shared memory descriptor."""
    if raw >> 64:
        raise DescriptorError(f"shared memory descriptor {raw:#x} is wider than 64 bits")
    code = _bits(raw, 61, 3)
    if code not in LAYOUT_TYPES:
        raise DescriptorError(f"shared memory descriptor {raw:#018x}: layout type {code} "
                              f"is not defined (bits 61-63)")
    desc = SmemDesc(start=_bits(raw, 0, 14) << 4, lbo=_bits(raw, 16, 14) << 4,
                    sbo=_bits(raw, 32, 14) << 4, version=_bits(raw, 46, 2),
                    base_offset=_bits(raw, 49, 3), lbo_mode=_bits(raw, 52, 1),
                    layout=LAYOUT_TYPES[code], raw=raw)
    if desc.version != 1:
        raise DescriptorError(f"shared memory descriptor {raw:#018x}: version bits 46-47 = "
                              f"{desc.version}, sm_100 requires 1 (0 is the sm_90 wgmma form)")
    for lo, width, want in _FIXED_SMEM_FIELDS:
        got = _bits(raw, lo, width)
        if got != want:
            raise DescriptorError(f"shared memory descriptor {raw:#018x}: bits {lo}-"
                                  f"{lo + width - 1} = {got:#x}, the ISA fixes them at {want:#x}")
    return desc


#: (first bit, width, value) of the fields the ISA fixes beyond the version bits 46-47.
_FIXED_SMEM_FIELDS = ((48, 1, 0), (53, 8, 0))


def _check_modelled(desc: SmemDesc) -> None:
    if desc.layout == "SWIZZLE_128B_BASE32B":
        raise DescriptorError("layout type SWIZZLE_128B_BASE32B is not modelled")
    if desc.base_offset:
        raise DescriptorError(f"shared memory descriptor base offset {desc.base_offset} "
                              "(bits 49-51) is not modelled: only tiles on a swizzle-repeat "
                              "boundary (base offset 0) are")
    if desc.lbo_mode:
        raise DescriptorError("shared memory descriptor LBO mode 1 (absolute, bit 52) is not modelled")


_SWIZZLE_SPAN = {"SWIZZLE_NONE": 0, "SWIZZLE_32B": 32, "SWIZZLE_64B": 64, "SWIZZLE_128B": 128}


def swizzle_address(addr, layout: str):
    """Swizzle<B,4,3> on absolute shared-memory byte addresses: bits [4, 4+B) ^= bits [7, 7+B)
    (the same XOR pattern TMA writes; swizzle.py holds it for both).

    The XOR pattern is a function of the address itself, which is why a tile must start
    on a 2^(7+B)-byte boundary for the pattern TMA wrote to be the one the MMA reads
    (base offset 0).
    """
    return swizzle(addr, _SWIZZLE_SPAN[layout])


def operand_addresses(desc: SmemDesc, major: str, rows: int, k: int, elem_bytes: int) -> np.ndarray:
    """Byte address (shared::cta) of element [row, kk] of a rows x k operand slice.

    `rows` is M (operand A) or N (operand B); `k` the MMA's K. Canonical layouts in
    16-byte units (T elements each), from make_umma_desc's comment:

        K-major   NONE : ((8,n),2):((1,SBO),LBO)      SWxx : ((8,n),2):((W,SBO),1)
        MN-major  NONE : ((1,n),(8,k)):((X,SBO),(1,LBO))
                  SWxx : ((W,n),(8,k)):((1,LBO),(W,SBO))

    with W the swizzle atom width in units (2, 4, 8 for 32B, 64B, 128B), then the
    swizzle applied to the absolute address.
    """
    _check_modelled(desc)
    t = 16 // elem_bytes
    w = _ATOM_UNITS[desc.layout]
    r = np.arange(rows)[:, None]
    kk = np.arange(k)[None, :]
    if major == "K":
        if rows % 8:
            raise DescriptorError(f"K-major operand with {rows} rows: a multiple of 8 is required")
        unit_k, elem = kk // t, kk % t
        k_stride = desc.lbo if desc.layout == "SWIZZLE_NONE" else 16
        off = (r % 8) * (w * 16) + (r // 8) * desc.sbo + unit_k * k_stride + elem * elem_bytes
    elif major == "MN":
        unit_mn, elem = r // t, r % t
        if desc.layout == "SWIZZLE_NONE":
            mn_off = unit_mn * desc.sbo
            k_off = (kk % 8) * 16 + (kk // 8) * desc.lbo
        else:
            mn_off = (unit_mn % w) * 16 + (unit_mn // w) * desc.lbo
            k_off = (kk % 8) * (w * 16) + (kk // 8) * desc.sbo
        off = mn_off + k_off + elem * elem_bytes
    else:
        raise DescriptorError(f"major must be K or MN, got {major!r}")
    return swizzle_address(desc.start + off, desc.layout)


# ----------------------------------------------------------------- tensor memory addresses
# PTX ISA "Tensor Memory addressing": a 32-bit address, lane in bits 31..16, column in 15..0.
TMEM_LANES = 128
TMEM_COLUMNS = 512


@dataclass(frozen=True)
class TmemAddr:
    lane: int
    col: int


def decode_tmem_addr(raw: int) -> TmemAddr:
    raw &= 0xFFFFFFFF
    return TmemAddr(lane=raw >> 16, col=raw & 0xFFFF)


def encode_tmem_addr(lane: int, col: int) -> int:
    return (lane << 16) | col
