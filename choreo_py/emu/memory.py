"""Memories other than registers: global (torch tensors), parameters, tensor maps.

Global memory: each tensor gets an address range in an emulated 64-bit
global space; loads and stores go to the tensor's own storage (CPU), so the
caller sees the kernel's writes in its tensors. Parameters live in a byte
block of their own (the param state space); `cvta.param` maps it into the
generic space at PARAM_WINDOW. A tensor-map parameter is a TensorMap built
from the launch description, as cuTensorMapEncodeTiled would encode it:
element type, global sizes and byte strides (innermost first), box, swizzle,
out-of-bounds elements filled with zero.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from choreo_py.ir import subbyte

SMEM_BASE = 1024  # shared address of the dynamic window (the first 1 KiB is reserved, as on sm_90)
GLOBAL_BASE = 0x1_0000_0000
PARAM_WINDOW = 0x7F00_0000_0000
ESIZE = {"bf16": 2, "f16": 2, "f32": 4, "s32": 4, "u32": 4, "u8": 1, "f64": 8, "s64": 8,
         "s8": 1, "f8_e4m3": 1, "f8_e5m2": 1, **{t: 1 for t in subbyte.TYPES}}
ELEM_NP = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@dataclass
class TensorMap:
    """A tiled tensor map (what the hardware reads from the 128-byte parameter)."""

    name: str
    dtype: str
    base: int            # global address of element (0, ..., 0)
    dims: tuple          # innermost first
    strides: tuple       # bytes, of dims 1.. (dims[0] is contiguous)
    box: tuple           # innermost first
    swizzle: int         # 0, 32, 64, 128 bytes

    @property
    def esize(self) -> int:
        return ESIZE[self.dtype]

    @property
    def box_bytes(self) -> int:
        n = self.esize
        for b in self.box:
            n *= b
        return n


class GlobalFault(IndexError):
    """An access outside every tensor; `lane`: its position among the addresses accessed
    (the instruction's handler names the thread and the source: isa_mem.global_fault)."""

    def __init__(self, addr: int, nbytes: int, lane: int) -> None:
        super().__init__(f"global address {addr:#x} ({nbytes} bytes) is outside every tensor")
        self.addr, self.nbytes, self.lane = addr, nbytes, lane


class GlobalMemory:
    """Address ranges backed by numpy byte views of the callers' tensors."""

    def __init__(self) -> None:
        self.regions: list = []  # (start, end, uint8 array, name)
        self.next = GLOBAL_BASE

    def add(self, name: str, data: np.ndarray) -> int:
        """Maps `data` (any contiguous numpy array, shared with its tensor); returns its address."""
        raw = data.reshape(-1).view(np.uint8)
        start = self.next
        self.regions.append((start, start + raw.size, raw, name))
        self.next = (start + raw.size + 0xFFFF) & ~0xFFFF
        return start

    def region(self, addr: int, size: int):
        for start, end, raw, name in self.regions:
            if start <= addr and addr + size <= end:
                return raw, addr - start, name
        return None

    def elements(self, tmap: TensorMap) -> np.ndarray:
        """The tensor a tensor map describes, as a strided numpy view (outermost first)."""
        found = self.region(tmap.base, 1)
        if found is None:
            raise ValueError(f"tensor map {tmap.name}: no tensor at {tmap.base:#x}")
        raw, off, _ = found
        es = tmap.esize
        shape = tuple(reversed(tmap.dims))
        strides = tuple(reversed((es,) + tuple(tmap.strides)))
        span = sum((d - 1) * s for d, s in zip(shape, strides)) + es
        if off + span > raw.size:
            raise ValueError(f"tensor map {tmap.name}: the box reaches past its tensor")
        buf = raw[off:off + span]
        return np.lib.stride_tricks.as_strided(buf.view(np.uint8), shape=shape + (es,),
                                               strides=strides + (1,))

    def load(self, addrs: np.ndarray, nbytes: int) -> np.ndarray:
        idx = self._gather_index(addrs, nbytes)
        if idx is not None:  # every lane in one tensor: one numpy gather
            return idx[0][idx[1]]
        out = np.zeros((len(addrs), nbytes), dtype=np.uint8)
        for i, a in enumerate(addrs.tolist()):
            raw, off, _ = self._must(a, nbytes, i)
            out[i] = raw[off:off + nbytes]
        return out

    def store(self, addrs: np.ndarray, data: np.ndarray) -> None:
        nbytes = data.shape[1]
        if len(addrs) == 1 or (len(addrs) > 1 and
                               not (np.diff(np.sort(addrs)) < nbytes).any()):
            idx = self._gather_index(addrs, nbytes)
            if idx is not None:  # one tensor, no two lanes' bytes overlap: one scatter
                idx[0][idx[1]] = data
                return
        for i, a in enumerate(addrs.tolist()):
            raw, off, _ = self._must(a, nbytes, i)
            raw[off:off + nbytes] = data[i]

    def _gather_index(self, addrs: np.ndarray, nbytes: int):
        """(the byte array, (lanes, nbytes) indices into it) when every lane's access lies in
        one region; None otherwise (the per-lane loop then finds the region or the fault of
        each lane, in lane order)."""
        if not len(addrs):
            return None
        lo, hi = int(addrs.min()), int(addrs.max())
        found = self.region(lo, hi - lo + nbytes)
        if found is None:
            return None
        raw, off, _ = found
        rel = (addrs - np.uint64(lo)).astype(np.int64) + off
        return raw, rel[:, None] + byte_offsets(nbytes)

    def _must(self, addr: int, nbytes: int, lane: int = 0):
        found = self.region(addr, nbytes)
        if found is None:
            raise GlobalFault(addr, nbytes, lane)
        return found


_ARANGES: dict = {}


def byte_offsets(n: int) -> np.ndarray:
    """np.arange(n) (int64), built once per n: the byte offsets of an n-byte access."""
    a = _ARANGES.get(n)
    if a is None:
        a = _ARANGES[n] = np.arange(n, dtype=np.int64)
    return a


class ParamSpace:
    """The kernel parameter block (.param state space) and its tensor maps."""

    def __init__(self, params) -> None:
        self.offsets: dict[str, int] = {}
        off = 0
        for p in params:
            off = (off + p.align - 1) // p.align * p.align
            self.offsets[p.name] = off
            off += p.size
        self.data = bytearray(max(off, 8))
        self.tmaps: dict[int, TensorMap] = {}  # param offset -> map

    def set_scalar(self, name: str, value: int, size: int) -> None:
        off = self.offsets[name]
        self.data[off:off + size] = int(value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")

    def set_tmap(self, name: str, tmap: TensorMap) -> None:
        self.tmaps[self.offsets[name]] = tmap

    def tmap_at(self, addr: int):
        """The tensor map at a param-space or generic address (None if none)."""
        if addr >= PARAM_WINDOW:
            addr -= PARAM_WINDOW
        return self.tmaps.get(addr)

    def load(self, off: int, size: int) -> int:
        return int.from_bytes(self.data[off:off + size], "little")
