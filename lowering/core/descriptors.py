"""Shared-memory matrix descriptors of MMA operands (wgmma and tcgen05 alike).

Both MMA units read a swizzled tile through a 64-bit descriptor: the tile's
address in 16-byte units in the low bits, layout fields (strides, swizzle
mode, version) above it. The layout bits differ by target (`bits_of`); how
the address part is built does not: the part of the address that does not
move (buffer, invariant row offset) is one descriptor computed once, and a
ring slot or a moving row is added to it in 16-byte units.
"""
from __future__ import annotations

from typing import Callable

from choreo_py import ir

from .context import Lowering
from .exprs import ExprLowering
from .writer import V


def tile_descriptor(lw: Lowering, view: ir.View, loc, bits_of: Callable) -> tuple[V, int]:
    """(descriptor register, first column) of a shared tile; `bits_of(layout)` gives the
    target's layout bits for the tile's buffer layout."""
    lay, const, terms, col0 = lw.memory.origin_terms(view, loc, runtime_col=True)
    if lay.swizzle not in (32, 64, 128):
        raise lw.refuse(f"an MMA operand '{view.base}' without a 32/64/128-byte swizzle", loc)
    bits = bits_of(lay)
    fixed = [t for t in terms if lw.invariant(t[0])]
    moving = [t for t in terms if not lw.invariant(t[0])]
    reg, extra = lw.memory.address(fixed, loc, "tile_addr")
    addr = const + extra

    def make() -> V:
        w = lw.w
        t = w.reg("u32", f"{view.base}_a16")
        if addr:
            w.op("add.u32", t, reg, addr)
            w.op("shr.u32", t, t, 4)
        else:
            w.op("shr.u32", t, reg, 4)
        d = w.reg("u64", f"{view.base}_desc")
        w.op("cvt.u64.u32", d, t)
        w.op("or.b64", d, d, hex(bits))
        return d
    d = lw.once(("desc", reg.text, addr, bits), make)
    for e, scale in moving:
        v = ExprLowering(lw, loc).value(e)
        if v.is_const:
            d = desc_add(lw, d, v.const * scale)
            continue
        if scale % 16:  # the descriptor's address field counts 16-byte units
            raise lw.refuse(f"an MMA operand '{view.base}' moving by {scale} bytes per step",
                            loc)
        wide = lw.w.reg("u64", f"{view.base}_step")
        lw.w.op("cvt.u64.u32", wide, v)
        out = lw.w.reg("u64", f"{view.base}_desc")
        lw.w.op("mad.lo.u64", out, wide, scale >> 4, d)
        d = out
    return d, col0


def desc_add(lw: Lowering, desc: V, byte_offset: int) -> V:
    """The descriptor of the tile `byte_offset` bytes further on (a K step, a stripe)."""
    if byte_offset == 0:
        return desc
    out = lw.w.reg("u64", "desc_k")
    lw.w.op("add.s64", out, desc, byte_offset >> 4)
    return out
