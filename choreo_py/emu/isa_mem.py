"""Loads, stores and address conversions: shared, global, param; cvta.

Shared addresses are offsets in the CTA's shared window (the dynamic
shared memory starts at SMEM_BASE). Generic addresses of shared memory
(cvta.shared) are the window offset plus SHARED_WINDOW; of parameters
(cvta.param) the param-space offset plus PARAM_WINDOW; global addresses
are generic addresses as they are.
"""
from __future__ import annotations

import numpy as np

from .isa_table import Unsupported, decoder
from .lanes import LANES, NP
from . import report
from .memory import PARAM_WINDOW, GlobalFault, byte_offsets
from .report import MemoryFault
from .operands import address_reader, operand_reader, ptype_of, symbol_value, writer

SHARED_WINDOW = 0x7E00_0000_0000
_MIN, _MAX = np.minimum.reduce, np.maximum.reduce
_U64 = (1 << 64) - 1
_SPACES = ("shared", "global", "param", "local", "const")


def _space(inst) -> str:
    sp = next((p.split("::")[0] for p in inst.parts[1:] if p.split("::")[0] in _SPACES), "")
    if not sp:
        raise Unsupported(f"'{inst.opcode}': generic addressing is not modelled; "
                          "name the state space (ld.shared, ld.global, ...)")
    return sp


def _vec(inst) -> int:
    return next((int(p[1:]) for p in inst.parts if p in ("v2", "v4", "v8")), 1)


def _smem_index(w, addrs: np.ndarray, size: int) -> np.ndarray:
    """Active lanes' shared addresses, checked for bounds and alignment (inactive lanes: base)."""
    cta = w.cta
    if w.one >= 0:
        a = _one_lane_index(w, addrs, size)
        if a is not None:
            return a
    a = np.where(w.mask, addrs, np.uint64(cta.smem_base)).astype(np.int64)
    # the three per-lane conditions below, as two reductions and a count (no lane fails)
    if (int(_MIN(a)) < cta.smem_base or int(_MAX(a + size)) > cta.smem.size
            or np.count_nonzero(a % min(size, 16))):
        bad = a[(a < cta.smem_base) | (a + size > cta.smem.size) | (a % min(size, 16) != 0)][0]
        raise w.machine.misuse(
            f"shared access of {size} bytes at {int(bad):#x}: outside the "
            f"{cta.smem.size - cta.smem_base}-byte window at {cta.smem_base:#x} or misaligned",
            w.inst)
    return a


def _one_lane_index(w, addrs: np.ndarray, size: int):
    """_smem_index for one executing lane (w.one), its checks on Python ints (with int64's
    wrap-around, as the array form computes them); None when an access fails them (the
    array form then reports it)."""
    base, end = w.cta.smem_base, w.cta.smem.size
    x = int(addrs[w.one]) & _U64
    x = x - (1 << 64) if x >> 63 else x
    last = x + size
    last = last - (1 << 64) if last >> 63 else last
    al = min(size, 16)
    if x < base or max(last, base + size) > end or x % al or base % al:
        return None
    a = np.full(LANES, base, dtype=np.int64)
    a[w.one] = x
    return a


def smem_read(w, addrs, nbytes: int, dtype) -> np.ndarray:
    """(32, nbytes/itemsize) values of `dtype` read at per-lane addresses."""
    a = _smem_index(w, addrs, nbytes)
    races = w.cta.races
    if races.writes:
        races.generic_read(w.inst, a[w.mask], nbytes)
    races.hb_warp(w, w.inst, a[w.mask], nbytes, False, "ld.shared")
    idx = a[:, None] + byte_offsets(nbytes)
    return w.cta.smem[idx].view(dtype)


def smem_write(w, addrs, data: np.ndarray) -> None:
    """Writes (32, n) values at per-lane addresses, active lanes only."""
    raw = np.ascontiguousarray(data).view(np.uint8).reshape(LANES, -1)
    nbytes = raw.shape[1]
    a = _smem_index(w, addrs, nbytes)[w.mask]
    w.cta.races.generic_write(w, w.inst, a, nbytes)
    w.cta.races.hb_warp(w, w.inst, a, nbytes, True, "st.shared")
    idx = a[:, None] + byte_offsets(nbytes)
    w.cta.smem[idx] = raw[w.mask]


@decoder("ld")
def _dec_ld(inst):
    from .isa_support import machine
    m = machine()
    sp = _space(inst)
    t = ptype_of(inst)
    n = _vec(inst)
    dst, src = inst.operands[0], inst.operands[1]
    dsts = list(dst.items) if dst.kind == "vec" else [dst]
    if len(dsts) != n:
        raise Unsupported(f"'{inst.opcode}' with {len(dsts)} destinations")
    es = np.dtype(NP[t]).itemsize
    wrs = [writer(d, t, m) for d in dsts]
    if sp == "param":
        off = (symbol_value(src.base.value, m) if src.base is not None and src.base.kind == "sym"
               else 0) + src.offset
        if src.base is not None and src.base.kind != "sym":
            raise Unsupported("ld.param through a register address")
        vals = [np.full(LANES, m.launch.params.load(off + k * es, es), dtype=np.uint64)
                .astype(_uint(es)).view(NP[t]) for k in range(n)]

        def ld_param(w):
            for wr, v in zip(wrs, vals):
                wr(w, v)
        return ld_param
    addr = address_reader(src, m)
    if sp == "shared":
        def ld_shared(w):
            v = smem_read(w, addr(w), es * n, NP[t])
            for k, wr in enumerate(wrs):
                wr(w, np.ascontiguousarray(v[:, k]))
        return ld_shared
    if sp == "global":
        def ld_global(w):
            a = addr(w)  # inactive lanes read the first active lane's address
            a = np.where(w.mask, a, a[w.mask][0] if w.mask.any() else 0)
            try:
                raw = m.launch.gmem.load(a, es * n).view(NP[t])
            except GlobalFault as f:
                raise global_fault(w, f, f.lane, "reads") from None
            for k, wr in enumerate(wrs):
                wr(w, np.ascontiguousarray(raw[:, k]))
        return ld_global
    raise Unsupported(f"'{inst.opcode}' ({sp} space)")


def global_fault(w, f: GlobalFault, lane: int, verb: str):
    """The located report of an access outside every tensor: the instruction, the thread
    and block, and the element access of the program it lowers (report.MemoryFault)."""
    m = w.machine
    thread = int(w.tid[lane])
    return MemoryFault(f"{w.inst.opcode} {verb} {f.nbytes} bytes at {f.addr:#x}, outside every "
                       f"tensor, in thread {thread} of block {tuple(w.cta.ctaid)}",
                       m.where(w.inst), [report.show(w.inst, m.ptx_name)], at=w.inst.at)


def _uint(es: int):
    return {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[es]


def _columns(readers: list, dtype):
    """w -> the (32, len(readers)) array of the readers' lanes (np.stack(..., axis=1):
    every reader gives 32 lanes of `dtype`)."""
    if len(readers) == 1:
        (r,) = readers
        return lambda w: np.ascontiguousarray(r(w)).reshape(LANES, 1)

    def cols(w):
        out = np.empty((LANES, len(readers)), dtype=dtype)
        for k, r in enumerate(readers):
            out[:, k] = r(w)
        return out
    return cols


@decoder("st")
def _dec_st(inst):
    from .isa_support import machine
    m = machine()
    sp = _space(inst)
    t = ptype_of(inst)
    dst, src = inst.operands[0], inst.operands[1]
    srcs = list(src.items) if src.kind == "vec" else [src]
    readers = [operand_reader(s, t, m) for s in srcs]
    addr = address_reader(dst, m)
    columns = _columns(readers, NP[t])
    if sp == "shared":
        def st_shared(w):
            smem_write(w, addr(w), columns(w))
        return st_shared
    if sp == "global":
        def st_global(w):
            data = columns(w).view(np.uint8).reshape(LANES, -1)
            try:
                m.launch.gmem.store(addr(w)[w.mask], data[w.mask])
            except GlobalFault as f:
                raise global_fault(w, f, int(np.flatnonzero(w.mask)[f.lane]), "writes") from None
        return st_global
    raise Unsupported(f"'{inst.opcode}' ({sp} space)")


@decoder("cvta")
def _dec_cvta(inst):
    from .isa_support import machine
    m = machine()
    t = ptype_of(inst)
    to = "to" in inst.parts
    sp = next(p for p in inst.parts[1:] if p in _SPACES)
    window = {"param": PARAM_WINDOW, "shared": SHARED_WINDOW, "global": 0, "local": 0,
              "const": 0}[sp]
    a = operand_reader(inst.operands[1], t, m)
    wr = writer(inst.operands[0], t, m)
    dt = NP[t]
    delta = np.array(window).astype(dt)
    if to:
        return lambda w: wr(w, a(w) - delta)
    return lambda w: wr(w, a(w) + delta)
