"""Operands as closures: the readers and writers every instruction family builds at decode time.

`operand_reader(op, ptype, machine)` gives w -> 32 lanes of a register, immediate, special
register or symbol as a PTX type; `writer(op, ptype, machine)` gives (w, lanes) -> None, a
register write under the active mask (recording the lanes written: Warp.mark_written);
`address_reader(op, machine)` gives w -> per-lane uint64 addresses of an [address]
operand. A register read checks that every active lane wrote it (Warp.check_read). A
leaf of the package's import graph: warp.py and the families (isa_alu, isa_mem, ...)
import it, it imports none of them.
"""
from __future__ import annotations

import numpy as np

from .isa_table import Unsupported
from .lanes import LANES, NP
from .memory import SMEM_BASE
from .ptx_parse import REG_STORAGE

_TYPES = set(NP)
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def ptype_of(inst, default=None) -> str:
    """The instruction type: its last part that is a PTX type."""
    for p in reversed(inst.parts):
        if p in _TYPES:
            return p
    if default is None:
        raise Unsupported(f"'{inst.opcode}': no operand type")
    return default


def const(value, ptype: str) -> np.ndarray:
    """32 lanes of an immediate, typed as `ptype`."""
    dt = np.dtype(NP[ptype])
    if isinstance(value, tuple):  # float bit patterns 0fXXXXXXXX / 0dXXXXXXXXXXXXXXXX
        kind, bits = value
        f = (np.array([bits], np.uint32).view(np.float32) if kind == "f32"
             else np.array([bits], np.uint64).view(np.float64))
        if dt.kind == "f":
            return np.full(LANES, f[0], dtype=dt)
        if dt.itemsize == f.dtype.itemsize:
            return np.full(LANES, f.view(_UNSIGNED[dt.itemsize])[0]).astype(_UNSIGNED[dt.itemsize]).view(dt)
        return np.full(LANES, int(f[0]), dtype=dt)
    if dt.kind == "f":
        return np.full(LANES, value, dtype=dt)
    if dt.kind == "b":
        return np.full(LANES, bool(value))
    u = _UNSIGNED[dt.itemsize]
    return np.full(LANES, value & ((1 << (8 * dt.itemsize)) - 1), dtype=u).view(dt)


def _sreg_values(name: str, w) -> np.ndarray:
    base, _, axis = name.partition(".")
    k = "xyz".index(axis) if axis in ("x", "y", "z") else 0
    launch = w.machine.launch
    if base == "%tid":
        return w.tid_xyz[k]
    if base == "%ntid":
        return np.full(LANES, launch.block[k])
    if base == "%ctaid":
        return np.full(LANES, w.cta.ctaid[k])
    if base == "%nctaid":
        return np.full(LANES, launch.grid[k])
    if base == "%laneid":
        return w.lane
    if base == "%warpid":
        return np.full(LANES, w.warp_id)
    if base == "%nwarpid":
        return np.full(LANES, len(w.cta.warps))
    if base in ("%clock", "%clock64", "%globaltimer"):
        return np.full(LANES, w.cta.step)
    if base == "%smid":
        return np.zeros(LANES)
    raise Unsupported(f"special register {name}")


def symbol_value(name: str, machine) -> int:
    """Address of a symbol: the dynamic shared window (the kernel's `.extern .shared` array,
    `smem` in choreo's PTX, `global_smem` in pyptx's) or a parameter (param space)."""
    if name in machine.kernel.shared_window:
        return SMEM_BASE
    offs = machine.launch.params.offsets
    if name in offs:
        return offs[name]
    space = machine.kernel.variables.get(name)
    if space is not None:
        raise Unsupported(f"'{name}' is a .{space} variable: the emulator gives .{space} variables "
                          "no storage (a kernel's printf keeps its arguments in one)")
    raise Unsupported(f"unknown symbol '{name}'")


def operand_reader(op, ptype: str, machine):
    """A closure w -> 32 lanes of `op` as PTX type `ptype`."""
    want = np.dtype(NP[ptype])
    if op.kind == "reg":
        r = op.reg
        have = np.dtype(_storage(machine, r))
        # `r in w.unset`: a register some live lane has not written yet (Warp.check_read)
        if have == want:
            def rd(w):
                if r in w.unset:
                    w.check_read(r)
                return w.R[r]
        elif have.itemsize == want.itemsize:
            def rd(w):
                if r in w.unset:
                    w.check_read(r)
                return w.R[r].view(want)
        else:
            def rd(w):
                if r in w.unset:
                    w.check_read(r)
                return w.R[r].astype(want)
        return rd
    if op.kind == "imm":
        c = const(op.value, ptype)
        return lambda w: c
    if op.kind == "sreg":
        name = op.value
        return lambda w: _sreg_values(name, w).astype(want)
    if op.kind == "sym":
        c = const(symbol_value(op.value, machine), ptype)
        return lambda w: c
    raise Unsupported(f"operand {op.text} cannot be read as a value")


def _storage(machine, r: int) -> str:
    return REG_STORAGE[machine.kernel.reg_types[r]]


def writer(op, ptype: str, machine):
    """A closure (w, lanes) that writes `op` under the active mask."""
    if op.kind == "sink":
        return lambda w, v: None
    if op.kind != "reg":
        raise Unsupported(f"destination {op.text} is not a register")
    r = op.reg
    have = np.dtype(_storage(machine, r))
    want = np.dtype(NP[ptype])
    if have == want:
        conv = None
    elif have.itemsize == want.itemsize:
        def conv(v): return v.view(have)
    else:
        def conv(v): return v.astype(have)

    if conv is None:
        def wr(w, v):
            if w.full:
                w.R[r] = v
            else:
                w.R[r] = merge(w, v, w.R[r])
            if r in w.unset:
                w.mark_written(r)
    else:
        def wr(w, v):
            v = conv(v)
            if w.full:
                w.R[r] = v
            else:
                w.R[r] = merge(w, v, w.R[r])
            if r in w.unset:
                w.mark_written(r)
    return wr


_ND = np.ndarray
_SHAPE = (LANES,)


def merge(w, v, cur: np.ndarray) -> np.ndarray:
    """np.where(w.mask, v, cur): `v` on the executing lanes, `cur` elsewhere (a new array).
    One executing lane (w.one: a one-thread block's warp) with `v` 32 lanes of cur's dtype:
    a copy of cur with that lane set, which is cheaper and the same array."""
    one = w.one
    if one >= 0 and type(v) is _ND and v.dtype == cur.dtype and v.shape == _SHAPE:
        out = cur.copy()
        out[one] = v[one]
        return out
    return np.where(w.mask, v, cur)


def address_reader(op, machine):
    """A closure w -> per-lane uint64 addresses of an [address] operand."""
    if op.kind != "addr":
        raise Unsupported(f"operand {op.text} is not an address")
    off = np.uint64(op.offset & 0xFFFF_FFFF_FFFF_FFFF)
    base = op.base
    if base is None:
        c = np.full(LANES, op.offset, dtype=np.uint64)
        return lambda w: c
    if base.kind == "sym":
        c = np.full(LANES, symbol_value(base.value, machine) + op.offset, dtype=np.uint64)
        return lambda w: c
    r = base.reg

    def rd(w):
        if r in w.unset:
            w.check_read(r)
        return w.R[r].astype(np.uint64) + off
    return rd
