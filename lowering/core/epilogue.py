"""`mma.store acc, tile`: accumulator registers -> a shared tile, by each thread.

Element k of the thread goes to (r0 + row_base + row_off[k], c0 +
col_base + col_off[k]) of the tile. Two neighbouring f32 columns become
one bf16x2 (`cvt.rn.bf16x2.f32`) and one `st.shared.b32`.

In a swizzled tile the 16-byte chunk of a column moves with the row
(chunk c of row r at c ^ (r % 8)). With row offsets that are multiples of
8 (checked) r % 8 is the same for all of a thread's registers, so the
thread computes one address per chunk of a stripe once, and every store
is `[chunk address + immediate]`. In the 128-byte swizzle a warp's 32
stores then hit 32 different banks.
"""
from __future__ import annotations

from choreo_py import ir

from .context import Lowering
from .fragments import info
from .memory import addr
from .writer import V


def mma_store(lw: Lowering, s: ir.MmaStore) -> None:
    fi = info(lw, s.acc, s.loc)
    lay = fi.layout
    if fi.kind != "acc":
        raise lw.refuse(f"mma.store of '{s.acc}', which is not an accumulator", s.loc)
    shape = tuple(e.value if isinstance(e, ir.Const) else None for e in s.dst.shape)
    if shape != (lay.rows, lay.cols):
        raise lw.refuse(f"mma.store of a [{lay.rows}, {lay.cols}] accumulator into a tile of "
                        f"shape {list(shape)}", s.loc)
    buf, origin, const, col0 = lw.memory.view_origin(s.dst, s.loc)
    if buf.dtype not in ("bf16", "f16", "f32"):
        raise lw.refuse(f"mma.store into a {buf.dtype} tile", s.loc)
    if buf.swizzle and col0 % buf.stripe_cols:
        raise lw.refuse("mma.store into a swizzled tile that starts inside a stripe", s.loc)
    lw.target.access(lw, fi.frag)
    w = lw.w
    rb, cb = lw.target.thread_bases(lw)
    esize = buf.esize
    base = w.reg("u32", f"{s.acc}_st")
    w.op("mad.lo.u32", base, rb, buf.row_bytes, origin)
    w.op("mad.lo.u32", base, cb, esize, base)
    chunks = _chunk_addresses(lw, buf, rb, base, lay, s.loc) if buf.swizzle else None
    packed = esize == 2
    step = 2 if packed else 1
    tmp = w.reg("b32" if packed else "f32", f"{s.acc}_pack")
    kind = "bf16x2" if buf.dtype == "bf16" else "f16x2"
    for k in range(0, lay.regs, step):
        if packed and (lay.col_off[k + 1] != lay.col_off[k] + 1
                       or lay.row_off[k + 1] != lay.row_off[k]):
            raise lw.refuse("mma.store of 16-bit elements from unpaired columns", s.loc)
        col, row = lay.col_off[k], lay.row_off[k]
        if buf.swizzle:
            stripe, within = divmod(col, buf.stripe_cols)
            chunk, inner = divmod(within * esize, 16)
            reg = chunks[chunk]
            off = const + stripe * buf.stripe_bytes + row * buf.row_bytes + inner
        else:
            reg, off = base, const + row * buf.row_bytes + col * esize
        if packed:
            w.op(f"cvt.rn.{kind}.f32", tmp, fi.reg(k + 1), fi.reg(k))
            w.op("st.shared.b32", addr(reg, off), tmp)
        else:
            w.op("st.shared.f32", addr(reg, off), fi.reg(k))
    lw.smem_dirty = True


def _chunk_addresses(lw: Lowering, buf, rb: V, base: V, lay, loc) -> list[V]:
    chunk_elems = 16 // buf.esize
    if any(r % 8 for r in lay.row_off):
        raise lw.refuse("mma.store into a swizzled tile from rows not 8 apart", loc)
    if any(c % chunk_elems + lay.col_base_max >= chunk_elems for c in lay.col_off):
        raise lw.refuse("mma.store into a swizzled tile from columns that straddle 16-byte "
                        "chunks", loc)
    w = lw.w
    rsw = w.reg("u32", "row_swz")
    w.op("and.b32", rsw, rb, 7)
    w.op("shl.b32", rsw, rsw, 4)
    out = []
    for c in range(buf.row_bytes // 16):
        a = w.reg("u32", f"chunk{c}_st")
        w.op("xor.b32", a, rsw, c << 4)
        w.op("add.u32", a, a, base)
        out.append(a)
    return out
