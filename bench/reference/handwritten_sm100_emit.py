"""pyptx emitters for the tcgen05 constructs of the sm_100a lowering.

Each function is what the backend emits for one construct; apart from the
two multi-instruction helpers named as such (`wait_mma`, `tmem_publish`),
each `ptx.*` call is one PTX instruction. Descriptor constants come from
`descriptors.py`; these functions only add the run-time shared-memory or
tensor-memory address.

pyptx 0.1.1 gaps handled here with its `ptx.inst` escape hatch:
* `.16x32bx2` tcgen05.ld/st: the typed `ptx.tcgen05.ld/st` have no
  immHalfSplitoff operand, which that shape requires;
* `tcgen05.mma`: the typed wrapper, at PTX 8.8, materialises a zero register
  per call for the optional disable-output-lane vector (and a setp when the
  predicate is not a .pred register); the form without the vector is what
  CUTLASS emits and what ptxas 13.0 accepts.
"""
from __future__ import annotations

from pyptx import ptx, reg
from pyptx.reg import Reg
from pyptx.types import b32, f32, u32, u64


def smem_desc(addr: Reg, const_bits: int) -> Reg:
    """Shared memory descriptor: matrix-descriptor-encode(addr) | constant fields."""
    enc = reg.scalar(u32)
    ptx.inst.and_.b32(enc, addr, 0x3FFF0)
    ptx.inst.shr.u32(enc, enc, 4)
    desc = reg.scalar(u64)
    ptx.inst.cvt.u64.u32(desc, enc)
    ptx.inst.or_.b64(desc, desc, const_bits)
    return desc


def desc_at(desc: Reg, byte_offset: int) -> Reg:
    """The descriptor moved by a constant number of bytes (start field only)."""
    if byte_offset == 0:
        return desc
    out = reg.scalar(u64)
    ptx.inst.add.s64(out, desc, byte_offset >> 4)
    return out


def ring_desc(desc0: Reg, order: Reg, stages: int, slot_bytes: int) -> Reg:
    """Descriptor of ring slot ``order % stages`` (``stages`` a power of two, slots
    ``slot_bytes`` apart)."""
    slot = reg.scalar(u64)
    ptx.inst.cvt.u64.u32(slot, order & (stages - 1))
    out = reg.scalar(u64)
    ptx.inst.mad.lo.u64(out, slot, slot_bytes >> 4, desc0)
    return out


def tmem_offset(base: Reg, offset: Reg | int) -> Reg:
    """A TMEM address ``offset`` (lane << 16 | column) past ``base``."""
    if isinstance(offset, int) and offset == 0:
        return base
    out = reg.scalar(b32)
    ptx.inst.add.u32(out, base, offset)
    return out


def umma(d_tmem: Reg, a, b_desc: Reg, idesc: Reg, accumulate: Reg, *, a_tmem: bool = False) -> None:
    """``tcgen05.mma.cta_group::1.kind::f16 [d], a, b, idesc, p`` (A from TMEM: ``[a]``)."""
    ptx.inst.tcgen05.mma.cta_group__1.kind__f16(
        ptx.addr(d_tmem), ptx.addr(a) if a_tmem else a, b_desc, idesc, accumulate)


def mma_commit(mbar: Reg) -> None:
    """Arm ``mbar``: it completes a phase when this thread's prior MMAs have finished.
    The ISA only has the ``.shared::cluster`` form; a CTA's own shared address is valid
    in that window."""
    ptx.tcgen05.commit(mbar)


def wait_mma(mbar: Reg, parity: Reg) -> None:
    """``wait`` on an MMA future: mbarrier phase, then order later tcgen05 ops after it."""
    ptx.mbarrier.wait(mbar, parity)
    ptx.tcgen05.fence_after_thread_sync()


def tmem_load_rows(dst, taddr: Reg, half: int) -> None:
    """Layout-F rows of one warp: ``tcgen05.ld.16x32bx2``; threads 0-15 get columns
    [0, half), threads 16-31 the same lanes ``half`` columns on."""
    n = len(dst)
    getattr(ptx.inst.tcgen05.ld.sync.aligned._16x32bx2, f"x{n}").b32(list(dst), ptx.addr(taddr), half)


def tmem_store_rows(taddr: Reg, src, half: int) -> None:
    """The store with the same thread -> (lane, column) map as `tmem_load_rows`."""
    n = len(src)
    getattr(ptx.inst.tcgen05.st.sync.aligned._16x32bx2, f"x{n}").b32(ptx.addr(taddr), half, list(src))


def tmem_publish(bar_id: Reg | int, count: int) -> None:
    """Make this thread's tcgen05.st/ld complete and visible before a barrier that
    precedes another thread's tcgen05.mma (non-pipelined, different thread)."""
    ptx.tcgen05.wait_st()
    ptx.tcgen05.fence_before_thread_sync()
    ptx.bar.sync(bar_id, count)


def pair_allreduce(op: str, x: Reg) -> None:
    """Combine the two halves of a layout-F row: lanes t and t ^ 16."""
    other = reg.scalar(f32)
    ptx.inst.shfl.sync.bfly.b32(other, x, 16, 31, -1)
    getattr(ptx.inst, op).f32(x, x, other)
