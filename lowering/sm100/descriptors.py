"""tcgen05 (sm_100a) descriptor and tensor-memory address math: pure functions.

Everything here is integer arithmetic on Python ints, so it can be checked
without a GPU. Section numbers are those of the PTX ISA 9.1 ("Tensorcore
5th Generation Family Instructions", 9.7.16):

    9.7.16.1.1   Tensor Memory addressing      -> tmem_addr / tmem_lane / tmem_col
    9.7.16.1.2   Tensor Memory allocation      -> alloc_columns (choreo_py/ir/tmem_rules.py)
    9.7.16.2.1   Matrix shape (Table 39)       -> check_mma_shape (choreo_py/ir/tmem_rules.py)
    9.7.16.3.x   LBO / SBO and canonical layouts -> kmajor_sw128, mnmajor_sw128
    9.7.16.4.1   Shared memory descriptor (Table 40) -> smem_desc
    9.7.16.4.2   Instruction descriptor (Table 42)   -> instr_desc_f16
    9.7.16.8.1   ld/st access restrictions     -> warp_lane_base
    9.7.16.10.5  Data path layouts D and F     -> acc_lane, ld_base_addr, thread_fragment

The kernels keep the address-free part of a descriptor as a constant and OR
in the shared-memory address at run time (`smem_desc_const`).
"""
from __future__ import annotations

from dataclasses import dataclass

# the TMEM plan (an IR pass) decides with these; the lowering checks its shapes with them too
from choreo_py.ir.tmem_rules import ALLOC_UNIT, alloc_columns, check_mma_shape  # noqa: F401

# ---------------------------------------------------------------- instruction descriptor
# Table 42, column `.kind::f16` (bits not listed stay 0):
#   0-1   sparsity selector            0 (dense)
#   2     sparsity                     0 = dense
#   3     saturate                     0 (integer kinds only)
#   4-5   dtype, matrix D              F16 = 0, F32 = 1
#   6     reserved
#   7-9   atype                        F16 = 0, BF16 = 1
#   10-12 btype                        F16 = 0, BF16 = 1
#   13    negate A                     0 / 1
#   14    negate B                     0 / 1
#   15    transpose A                  0 = K-major, 1 = M-major   (9.7.16.10.6)
#   16    transpose B                  0 = K-major, 1 = N-major
#   17-22 N >> 3
#   23    reserved
#   24-28 M >> 4
#   29    reserved
#   30-31 max shift (.ws only)         0
AB_FORMAT_F16KIND = {"f16": 0, "bf16": 1}
D_FORMAT = {"f16": 0, "f32": 1}
MAJOR = {"K": 0, "MN": 1}

_IDESC_FIELDS = (  # name, low bit, width
    ("sparse_selector", 0, 2), ("sparse", 2, 1), ("saturate", 3, 1), ("d_format", 4, 2),
    ("a_format", 7, 3), ("b_format", 10, 3), ("negate_a", 13, 1), ("negate_b", 14, 1),
    ("a_major", 15, 1), ("b_major", 16, 1), ("n_shr3", 17, 6), ("m_shr4", 24, 5),
    ("max_shift", 30, 2),
)


def instr_desc_f16(m: int, n: int, *, ab_dtype: str = "bf16", d_dtype: str = "f32",
                   a_major: str = "K", b_major: str = "K", negate_a: bool = False,
                   negate_b: bool = False, a_in_tmem: bool = False) -> int:
    """32-bit instruction descriptor of a dense `tcgen05.mma ... kind::f16`.

    `a_major` / `b_major` are the transpose bits: "K" (0) when the K index is the
    contiguous one in shared memory, "MN" (1) otherwise. An A operand read from tensor
    memory (`a_in_tmem`, the `[a-tmem]` form) cannot be transposed: it is M rows (lanes)
    by K packed columns, i.e. K-major.
    """
    check_mma_shape(m, n)
    if ab_dtype not in AB_FORMAT_F16KIND:
        raise ValueError(f"kind::f16 inputs are f16 or bf16, got {ab_dtype}")
    if d_dtype not in D_FORMAT:
        raise ValueError(f"kind::f16 accumulates in f16 or f32, got {d_dtype}")
    if a_major not in MAJOR or b_major not in MAJOR:
        raise ValueError(f"major must be 'K' or 'MN', got {a_major!r}/{b_major!r}")
    if a_in_tmem and a_major != "K":
        raise ValueError("an A operand in tensor memory is K-major (it cannot be transposed)")
    ab = AB_FORMAT_F16KIND[ab_dtype]
    return (D_FORMAT[d_dtype] << 4 | ab << 7 | ab << 10 | int(negate_a) << 13
            | int(negate_b) << 14 | MAJOR[a_major] << 15 | MAJOR[b_major] << 16
            | (n >> 3) << 17 | (m >> 4) << 24)


def decode_instr_desc(desc: int) -> dict[str, int]:
    """Field values of an instruction descriptor (for tests and listings)."""
    if desc >> 32:
        raise ValueError("an instruction descriptor is 32 bits")
    return {name: (desc >> lo) & ((1 << width) - 1) for name, lo, width in _IDESC_FIELDS}


# ---------------------------------------------------------------- shared memory descriptor
# Table 40 (64 bits):
#   0-13  matrix-descriptor-encode(start address)
#   16-29 matrix-descriptor-encode(leading dimension byte offset)   (or absolute, bit 52)
#   32-45 matrix-descriptor-encode(stride dimension byte offset)
#   46-48 fixed 0b001   <- new on sm_100: the wgmma (sm_90) descriptor has 0 here
#   49-51 matrix base offset (0 when the swizzle pattern starts on its repeat boundary:
#         1024 B for 128B swizzle, Table 41)
#   52    leading dimension stride mode: 0 relative offset, 1 absolute address
#   53-60 fixed 0
#   61-63 swizzle: 0 none, 1 128B with 32B atoms, 2 128B, 4 64B, 6 32B
# matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4; start, LBO and SBO are 16-B aligned.
SWIZZLE_MODE = {"none": 0, "128B_base32B": 1, "128B": 2, "64B": 4, "32B": 6}
SWIZZLE_REPEAT_BYTES = {"128B": 1024, "64B": 512, "32B": 256}
DESC_VERSION_SM100 = 0b001

SW128_ROW_BYTES = 128                      # one swizzle row: 64 bf16 elements
SW128_GROUP_BYTES = 8 * SW128_ROW_BYTES    # 8 rows = one 1024-B swizzle atom


def desc_encode(x: int) -> int:
    """matrix-descriptor-encode (9.7.16.4.1): 14 bits of a 16-byte-aligned value."""
    if x % 16:
        raise ValueError(f"descriptor addresses and offsets are 16-byte aligned, got {x}")
    return (x & 0x3FFFF) >> 4


def smem_desc_const(*, lbo: int, sbo: int, swizzle: str = "128B", base_offset: int = 0,
                    lbo_absolute: bool = False) -> int:
    """The address-free bits of a shared memory descriptor (start address = 0)."""
    if swizzle not in SWIZZLE_MODE:
        raise ValueError(f"swizzle must be one of {sorted(SWIZZLE_MODE)}, got {swizzle!r}")
    if not 0 <= base_offset <= 7:
        raise ValueError("base offset is 3 bits")
    return (desc_encode(lbo) << 16 | desc_encode(sbo) << 32 | DESC_VERSION_SM100 << 46
            | base_offset << 49 | int(lbo_absolute) << 52 | SWIZZLE_MODE[swizzle] << 61)


def smem_desc(start: int, *, lbo: int, sbo: int, swizzle: str = "128B", base_offset: int = 0,
              lbo_absolute: bool = False) -> int:
    """A full 64-bit shared memory descriptor for an operand starting at `start`."""
    return desc_encode(start) | smem_desc_const(lbo=lbo, sbo=sbo, swizzle=swizzle,
                                                base_offset=base_offset, lbo_absolute=lbo_absolute)


def decode_smem_desc(desc: int) -> dict[str, int]:
    """Byte values of a descriptor's fields (start/LBO/SBO decoded back to bytes)."""
    return {
        "start": (desc & 0x3FFF) << 4, "lbo": ((desc >> 16) & 0x3FFF) << 4,
        "sbo": ((desc >> 32) & 0x3FFF) << 4, "version": (desc >> 46) & 0x7,
        "base_offset": (desc >> 49) & 0x7, "lbo_mode": (desc >> 52) & 1,
        "fixed_53_60": (desc >> 53) & 0xFF, "swizzle": (desc >> 61) & 0x7,
        "reserved_14_15": (desc >> 14) & 3, "reserved_30_31": (desc >> 30) & 3,
    }


# Canonical 128B-swizzled layouts (9.7.16.3.3, T = 8 bf16 = 16 B):
#   K-major  ((8,m),(T,2k)) : ((8T,SBO),(1,T))  -- rows of 128 B, 8-row groups SBO apart;
#            LBO is "not used, assumed 1" for swizzled K-major (9.7.16.3.1.1): we write 16 B.
#   MN-major ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO)) -- 64-element MN stripes LBO apart,
#            8 K-rows (1024 B) SBO apart.
# Both assume the tile starts on a 1024-B boundary (base offset 0).
KMAJOR_SW128_LBO = 16
SW128_SBO = SW128_GROUP_BYTES


def kmajor_sw128_const() -> int:
    return smem_desc_const(lbo=KMAJOR_SW128_LBO, sbo=SW128_SBO)


def mnmajor_sw128_const(stripe_bytes: int) -> int:
    """MN-major operand whose MN extent spans several 64-element stripes `stripe_bytes` apart."""
    return smem_desc_const(lbo=stripe_bytes, sbo=SW128_SBO)


def kmajor_sw128(start: int) -> int:
    return smem_desc(start, lbo=KMAJOR_SW128_LBO, sbo=SW128_SBO)


def mnmajor_sw128(start: int, stripe_bytes: int) -> int:
    return smem_desc(start, lbo=stripe_bytes, sbo=SW128_SBO)


def kmajor_sw128_kstep(kk: int, *, rows: int, elem_bytes: int = 2, k_per_mma: int = 16) -> int:
    """Byte offset of MMA k-step `kk` in a K-major tile stored as 128-B stripes.

    A k-step reads k_per_mma * elem_bytes = 32 B of each row; 4 steps fill one 128-B
    stripe row, and the next stripe ([rows] x 128 B) holds the next 64 columns.
    Moving the start address inside a 1024-B atom keeps base offset 0: the hardware
    swizzles on address bits, as TMA wrote them.
    """
    step = kk * k_per_mma * elem_bytes
    return (step // SW128_ROW_BYTES) * rows * SW128_ROW_BYTES + step % SW128_ROW_BYTES


def mnmajor_sw128_kstep(kk: int, *, k_per_mma: int = 16) -> int:
    """Byte offset of k-step `kk` in an MN-major tile: k_per_mma K-rows of 128 B."""
    return kk * k_per_mma * SW128_ROW_BYTES


def desc_advance(desc: int, byte_offset: int) -> int:
    """The descriptor of the same operand moved by `byte_offset` bytes (adds to bits 0-13)."""
    start = (desc & 0x3FFF) + desc_encode(byte_offset)
    if start >> 14:
        raise ValueError("descriptor start address overflows 14 bits")
    return (desc & ~0x3FFF) | start


# ---------------------------------------------------------------- tensor memory
# 9.7.16.1: 128 lanes x 512 columns of 32-bit cells per CTA (sm_100a).
# 9.7.16.1.1: an address is lane << 16 | column.
TMEM_LANES = 128
TMEM_COLUMNS = 512


def tmem_addr(lane: int, col: int) -> int:
    if not (0 <= lane < TMEM_LANES and 0 <= col < TMEM_COLUMNS):
        raise ValueError(f"tensor memory lane {lane} / column {col} out of range")
    return lane << 16 | col


def tmem_lane(addr: int) -> int:
    return addr >> 16


def tmem_col(addr: int) -> int:
    return addr & 0xFFFF


def warp_lane_base(warp: int) -> int:
    """First lane warp `warp` may touch with tcgen05.ld/st: warp % 4 of its warpgroup
    owns lanes [32 * (warp % 4), +32) (9.7.16.8.1)."""
    return 32 * (warp % 4)


def check_lane_align(m: int, lane_align: int) -> None:
    # Data path layouts (9.7.16.10.5): M = 128 (layout D) uses every lane, alignment 0;
    # M = 64 (layout F) uses half of each warp's 32 lanes, alignment 0 or 16.
    allowed = (0, 16) if m == 64 else (0,)
    if lane_align not in allowed:
        raise ValueError(f"M={m}: tensor memory lane alignment must be one of {allowed}")


def acc_lane(m: int, row: int, lane_align: int = 0) -> int:
    """Tensor memory lane of accumulator row `row` (columns map 1:1 from the base column).

    Layout D (M = 128, cta_group::1): row r is lane r.
    Layout F (M = 64): 4x1 data paths, half used: rows 16q..16q+15 sit in the sub-partition
    of warp q, lanes 32q + align + (0..15). CUTLASS writes the same atom as
    ((16,4),N):((1,32),col) (tmem_frg_1sm, M_MMA == 64). A and D of one MMA must share
    the alignment.
    """
    check_lane_align(m, lane_align)
    if not 0 <= row < m:
        raise ValueError(f"row {row} outside M={m}")
    if m == 128:
        return row
    return 32 * (row // 16) + lane_align + row % 16


LD_SHAPE = {128: "32x32b", 64: "16x32bx2"}


def ld_base_addr(m: int, warp: int, lane_align: int = 0, col: int = 0) -> int:
    """Base address (relative to the allocation) of warp `warp`'s tcgen05.ld/st of an
    M-row accumulator region starting at column `col`.

    M = 128: `.32x32b`, the warp's 32 lanes. M = 64: `.16x32bx2`, the warp's 16 lanes at
    its alignment; the second half-warp reads the same lanes `immHalfSplitoff` columns on.
    """
    check_lane_align(m, lane_align)
    return tmem_addr(warp_lane_base(warp) + lane_align, col)


@dataclass(frozen=True)
class ThreadFragment:
    row: int          # accumulator row this thread holds
    col_start: int    # first column (relative to the region)
    ncols: int        # consecutive columns, one 32-bit register each


def thread_fragment(m: int, n: int, warp: int, lane: int, *, acc_rows: dict) -> ThreadFragment:
    """Which part of an [m, n] TMEM accumulator thread `lane` of warp `warp` (% 4) gets from
    the loads `ld_base_addr` describes; `acc_rows` is the target record's split of a row
    among its owners (targets.Target.acc_rows).

    M = 128, `.32x32b.x{n}`: thread t holds row 32w + t, all n columns (a whole row).
    M = 64, `.16x32bx2.x{n/2}` with immHalfSplitoff = n/2: threads 0-15 hold rows
    16w + t, columns [0, n/2); threads 16-31 hold the same rows, columns [n/2, n).
    A row is split over the pair (t, t ^ 16): one `shfl.bfly 16` completes a row reduction.
    """
    w = warp % 4
    split = acc_rows.get(m)  # the owners of a row, their columns
    if split is None:
        raise ValueError(f"M must be 64 or 128, got {m}")
    row = 32 * w + lane if m == 128 else 16 * w + lane % 16
    t = split.owner_of_lane(lane)
    return ThreadFragment(row, split.col_base(n, t), len(split.columns(n, t)))


SWIZZLE_NAMES = {128: "128B", 64: "64B", 32: "32B"}


def smem_desc_bits(swizzle: int, *, mn_major: bool, stripe_bytes: int, row_bytes: int) -> int:
    """The address-free bits of an sm_100 shared memory descriptor for a tile of the
    core's stripe layout (Table 40)."""
    lbo = stripe_bytes if mn_major else KMAJOR_SW128_LBO
    return smem_desc_const(lbo=lbo, sbo=8 * row_bytes, swizzle=SWIZZLE_NAMES[swizzle])

