"""Atomics: red (a reduction the memory system applies) and atom (the same, giving the
old value back), on shared and global memory.

red.{shared,global}.{add,min,max,and,or,xor}.T and
atom.{shared,global}.{add,min,max,and,or,xor,exch,cas}.T: the active lanes of the warp
update their elements one after another in lane order (a valid order of the hardware's
serialisation: add, min, max and the bitwise operations do not depend on it; exch and cas
to one element from several lanes may take any order on the hardware). Atomics are not
recorded by the race checker: they do not race with each other (a plain access racing
with one is not reported either).
"""
from __future__ import annotations

import numpy as np

from .isa_table import Unsupported, decoder
from .lanes import LANES, NP
from .operands import address_reader, operand_reader, ptype_of, writer

_OPS = ("add", "min", "max", "and", "or", "xor", "exch", "cas", "inc", "dec")


def _combine(op: str, old, b, c):
    """The new element from the old one, operand b (and c: cas's new value)."""
    if op == "add":
        return old + b
    if op == "min":
        return min(old, b)
    if op == "max":
        return max(old, b)
    if op == "and":
        return old & b
    if op == "or":
        return old | b
    if op == "xor":
        return old ^ b
    if op == "exch":
        return b
    if op == "cas":
        return c if old == b else old
    raise Unsupported(f"an atomic {op}")


def _decode(inst, returns: bool):
    from .isa_support import machine
    m = machine()
    parts = inst.parts[1:]
    space = next((p for p in parts if p in ("shared", "global")), None)
    op = next((p for p in parts if p in _OPS), None)
    if space is None or op is None or op in ("inc", "dec"):
        raise Unsupported(f"'{inst.opcode}'")
    t = ptype_of(inst)
    dt = np.dtype(NP[t])
    ops = list(inst.operands)
    dst = writer(ops.pop(0), t, m) if returns else None
    addr = address_reader(ops[0], m)
    b = operand_reader(ops[1], t, m)
    c = operand_reader(ops[2], t, m) if op == "cas" else None

    def ex(w):
        a, bv = addr(w), b(w)
        cv = c(w) if c is not None else None
        olds = np.zeros(LANES, dtype=dt)
        with np.errstate(over="ignore"):
            for lane in np.flatnonzero(w.mask):
                cell = _cell(w, m, space, int(a[lane]), dt)
                old = cell[0]
                olds[lane] = old
                cell[0] = dt.type(_combine(op, old, bv[lane], None if cv is None else cv[lane]))
        if dst is not None:
            dst(w, olds)
    return ex


def _cell(w, m, space: str, addr: int, dt) -> np.ndarray:
    """A one-element view of the bytes at `addr` (checked for bounds and alignment)."""
    size = dt.itemsize
    if addr % size:
        raise w.machine.misuse(f"atomic access of {size} bytes at {addr:#x} is misaligned", w.inst)
    if space == "shared":
        cta = w.cta
        if addr < cta.smem_base or addr + size > cta.smem.size:
            raise w.machine.misuse(f"atomic access of {size} bytes at {addr:#x}: outside the "
                                   "shared window", w.inst)
        return cta.smem[addr:addr + size].view(dt)
    found = m.launch.gmem.region(addr, size)
    if found is None:
        raise w.machine.misuse(f"global address {addr:#x} ({size} bytes) is outside every "
                               "tensor", w.inst)
    raw, off, _ = found
    return raw[off:off + size].view(dt)


@decoder("red")
def _dec_red(inst):
    return _decode(inst, False)


@decoder("atom")
def _dec_atom(inst):
    return _decode(inst, True)
