"""Tensor memory (TMEM) of one CTA on sm_100a, and the tcgen05.ld/st fragment maps.

TMEM is 128 lanes x 512 columns of 32-bit cells per CTA (PTX ISA 9.7.16.1). It is
allocated in columns (tcgen05.alloc: a power of two >= 32), every allocation spans
all 128 lanes, and the address of an allocation (lane 0, first column) is written to
shared memory by the allocating warp.

Rules modelled (each broken rule is a ``TmemError`` naming it):

* alloc: column count a power of two in [32, 512]; when no contiguous free range
  exists the instruction blocks until a dealloc frees one (``alloc`` returns None and
  the caller retries); an alloc after this CTA executed
  ``tcgen05.relinquish_alloc_permit`` is an error;
* dealloc: the exact (column, count) of a live allocation;
* tcgen05.ld / tcgen05.st by warp w reach only the lanes of its sub-partition,
  32 * (w % 4) .. +31 (ISA "Access restrictions"; CUTLASS asserts the same in
  ``copy_unpack``), and only allocated columns;
* a cell never written holds POISON (a quiet-NaN pattern); reading one is reported
  (an error in strict mode), since on hardware it is whatever the last kernel left.

The thread <-> (lane, column) maps of tcgen05.ld/st are taken from CUTLASS's
``Copy_Traits<SM100_TMEM_LOAD_*>`` (include/cute/atom/copy_traits_sm100.hpp): each
atom's ValID (bits of a lane, lanes) and DstLayout ((thread, value bit) -> bit) are
copied below as data and evaluated here, so the maps are NVIDIA's, not ours.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

LANES = 128
COLUMNS = 512
ALLOC_MIN = 32
POISON = 0x7FC0DEAD          # a quiet NaN as f32; recognisable in dumps


class TmemError(RuntimeError):
    """A tensor-memory rule broken by the kernel."""


# ----------------------------------------------------------------- the memory
@dataclass
class TensorMemory:
    cells: np.ndarray = field(default_factory=lambda: np.full((LANES, COLUMNS), POISON, np.uint32))
    written: np.ndarray = field(default_factory=lambda: np.zeros((LANES, COLUMNS), bool))
    allocations: dict = field(default_factory=dict)      # first column -> column count
    relinquished: bool = False

    # -- allocation ------------------------------------------------------
    def alloc(self, ncols: int) -> int | None:
        """First column of a new allocation, or None when it must wait for a dealloc."""
        if self.relinquished:
            raise TmemError("tcgen05.alloc after tcgen05.relinquish_alloc_permit in this CTA")
        if ncols < ALLOC_MIN or ncols > COLUMNS or ncols & (ncols - 1):
            raise TmemError(f"tcgen05.alloc of {ncols} columns: a power of 2 in "
                            f"[{ALLOC_MIN}, {COLUMNS}] is required")
        used = np.zeros(COLUMNS, bool)
        for start, count in self.allocations.items():
            used[start:start + count] = True
        # Allocations are aligned to their size in this model (a buddy scheme), which is
        # what keeps every address a kernel can receive a multiple of its column count.
        for start in range(0, COLUMNS, ncols):
            if not used[start:start + ncols].any():
                self.allocations[start] = ncols
                return start
        return None

    def alloc_possible(self, ncols: int) -> bool:
        """Whether an allocation of `ncols` would succeed now (a blocked alloc polls this)."""
        used = np.zeros(COLUMNS, bool)
        for start, count in self.allocations.items():
            used[start:start + count] = True
        return any(not used[s:s + ncols].any() for s in range(0, COLUMNS, ncols))

    def dealloc(self, col: int, ncols: int) -> None:
        if self.allocations.get(col) != ncols:
            live = ", ".join(f"{c}+{n}" for c, n in sorted(self.allocations.items())) or "none"
            raise TmemError(f"tcgen05.dealloc of columns {col}+{ncols}: not a live allocation "
                            f"(live: {live})")
        del self.allocations[col]

    def relinquish(self) -> None:
        self.relinquished = True

    def leaked(self) -> list[tuple[int, int]]:
        """Allocations still live (the ISA requires all to be freed before exit)."""
        return sorted(self.allocations.items())

    # -- access ------------------------------------------------------------
    def check_columns(self, cols: np.ndarray, what: str) -> None:
        ok = np.zeros(COLUMNS + 1, bool)
        for start, count in self.allocations.items():
            ok[start:start + count] = True
        cols = np.asarray(cols)
        bad = (cols < 0) | (cols >= COLUMNS)
        bad |= ~ok[np.clip(cols, 0, COLUMNS)]
        if bad.any():
            raise TmemError(f"{what}: column {int(cols[bad].flat[0])} is not allocated")

    def read(self, lanes: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cells at (lanes, cols) and a mask of those never written (poison)."""
        return self.cells[lanes, cols], ~self.written[lanes, cols]

    def write(self, lanes: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        self.cells[lanes, cols] = values
        self.written[lanes, cols] = True


def check_warp_lanes(warp_in_cta: int, lanes: np.ndarray, what: str) -> None:
    """A warp reaches the 32 lanes of its sub-partition only: 32 * (warp % 4) .. +31."""
    lo = 32 * (warp_in_cta % 4)
    lanes = np.asarray(lanes)
    bad = (lanes < lo) | (lanes >= lo + 32)
    if bad.any():
        raise TmemError(f"{what}: warp {warp_in_cta} touches tensor-memory lane "
                        f"{int(lanes[bad].flat[0])}, outside its lanes {lo}..{lo + 31} "
                        f"(warp % 4 = {warp_in_cta % 4})")


# ----------------------------------------------------------------- fragment maps
def _cute_eval(shape, stride, index: int) -> int:
    """CuTe layout (shape, stride) at a flat index (colexicographic coordinates)."""
    if isinstance(shape, int):
        return (index % shape) * stride
    offset = 0
    for sub_shape, sub_stride in zip(shape, stride):
        size = _size(sub_shape)
        offset += _cute_eval(sub_shape, sub_stride, index % size)
        index //= size
    return offset


def _size(shape) -> int:
    if isinstance(shape, int):
        return shape
    out = 1
    for s in shape:
        out *= _size(s)
    return out


# x1 atoms, unpacked (copy_traits_sm100.hpp): bits of one lane (ValID mode 0),
# lanes (ValID mode 1), DstLayout (thread, value bit) -> logical bit = bit + row_bits * lane.
_ATOMS_X1 = {
    "32x32b":   (32, 32, ((32, 32), (32, 1))),                                    # 32dp32b1x
    "16x64b":   (64, 16, (((2, 2, 8), 32), ((512, 32, 64), 1))),                  # 16dp64b1x
    "16x128b":  (128, 16, (((4, 8), (32, 2)), ((32, 128), (1, 1024)))),           # 16dp128b1x
    "16x256b":  (256, 16, (((4, 8), (64, 2)), ((64, 256), (1, 2048)))),           # 16dp256b1x
    # 16dp32b1x = .16x32bx2.x1 with immHalfSplitoff 1: logical column 1 is the split.
    "16x32bx2": (64, 16, (((16, 2), 32), ((64, 32), 1))),
}
# x2 atoms, used by the tests to confirm the repeat rule in `fragment_map`.
ATOMS_X2 = {
    "32x32b":   (64, 32, ((32, 64), (64, 1))),
    "16x64b":   (128, 16, (((2, 2, 8), (32, 2)), ((1024, 32, 128), (1, 64)))),
    "16x128b":  (256, 16, (((4, 8), (32, 2, 2)), ((32, 256), (1, 2048, 128)))),
    "16x256b":  (512, 16, (((4, 8), (64, 2, 2)), ((64, 512), (1, 4096, 256)))),
    "16x32bx2": (128, 16, (((16, 2), 64), ((128, 64), 1))),
}
SHAPES = tuple(_ATOMS_X1)


def atom_map(row_bits: int, lanes: int, dst) -> tuple[np.ndarray, np.ndarray]:
    """(lane, column) of each (thread, 32-bit register) of one CUTLASS atom."""
    shape, stride = dst
    thr_shape, val_shape = shape
    thr_stride, val_stride = stride
    nregs = _size(val_shape) // 32
    lane = np.zeros((32, nregs), np.int64)
    col = np.zeros((32, nregs), np.int64)
    for t in range(32):
        for r in range(nregs):
            bit = _cute_eval(thr_shape, thr_stride, t) + _cute_eval(val_shape, val_stride, 32 * r)
            lane[t, r], col[t, r] = bit // row_bits, (bit % row_bits) // 32
    assert lane.max() < lanes
    return lane, col


@dataclass(frozen=True)
class FragmentMap:
    """Where register r of thread t goes: lane[t, r], and columns col_lo / col_hi
    (col_hi is -1 unless .pack::16b / .unpack::16b joins two 16-bit cells in one register)."""
    lane: np.ndarray
    col_lo: np.ndarray
    col_hi: np.ndarray
    lanes_spanned: int


@lru_cache(maxsize=None)
def fragment_map(shape: str, num: int, pack16: bool = False, half_split: int | None = None) -> FragmentMap:
    """Thread/register map of `tcgen05.{ld,st}.<shape>.x<num>[.pack::16b]`.

    Repeats (.xN) place atom copy k `k * atom columns` further, registers k*R.. (checked
    against CUTLASS's x2 atoms in the tests). With .pack::16b each 32-bit register holds
    the low halves of two adjacent cells: logical column c becomes cells 2c and 2c+1
    (CUTLASS's *_16b ValIDs stride 16-bit values 32 bits apart). For .16x32bx2 the
    upper half-warp's base is `half_split` columns further (immHalfSplitoff, in cells).
    """
    if shape not in _ATOMS_X1:
        raise TmemError(f"tcgen05.ld/st shape .{shape} is not modelled")
    if num < 1 or num > 128 or num & (num - 1):
        raise TmemError(f"tcgen05.ld/st .x{num}: a power of 2 in [1, 128] is required")
    row_bits, lanes, dst = _ATOMS_X1[shape]
    if shape == "16x32bx2":
        if half_split is None:
            raise TmemError(".16x32bx2 needs its immHalfSplitoff operand")
        t = np.arange(32)[:, None]
        r = np.arange(num)[None, :]
        lane = np.broadcast_to(t % 16, (32, num)).copy()
        logical = np.broadcast_to(r, (32, num)).copy()
        split = np.broadcast_to((t // 16) * half_split, (32, num))
    else:
        lane1, col1 = atom_map(row_bits, lanes, dst)
        atom_cols, regs = row_bits // 32, lane1.shape[1]
        lane = np.concatenate([lane1] * num, axis=1)
        logical = np.concatenate([col1 + k * atom_cols for k in range(num)], axis=1)
        split = np.zeros_like(logical)
    if pack16:
        col_lo, col_hi = 2 * logical + split, 2 * logical + 1 + split
    else:
        col_lo, col_hi = logical + split, np.full_like(logical, -1)
    return FragmentMap(lane=lane, col_lo=col_lo, col_hi=col_hi, lanes_spanned=lanes)


# ----------------------------------------------------------------- MMA data-path layouts
def accumulator_lanes(m: int, lane_base: int) -> np.ndarray:
    """TMEM lane of each of the M rows of an accumulator (or of an A operand in TMEM).

    M = 128, cta_group::1 (ISA layout D): row r is lane r; the address's lane must be 0.
    M = 64 (layout F, CUTLASS tmem_frg_1sm atom ((16,4),N):((1,32),...)): rows
    16q .. 16q+15 sit in sub-partition q, lanes 32q + base + (0..15), base 0 or 16.
    """
    rows = np.arange(m)
    if m == 128:
        if lane_base:
            raise TmemError(f"M=128 accumulator at lane {lane_base}: layout D starts at lane 0")
        return rows
    if m == 64:
        if lane_base not in (0, 16):
            raise TmemError(f"M=64 accumulator at lane {lane_base}: layout F allows lane 0 or 16")
        return 32 * (rows // 16) + lane_base + rows % 16
    raise TmemError(f"M={m} has no cta_group::1 data-path layout")
