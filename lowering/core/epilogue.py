"""Register fragments <-> shared tiles, by each thread.

`mma.store acc, tile`: element k of the thread goes to (r0 + row_base +
row_off[k], c0 + col_base + col_off[k]) of the tile. Two neighbouring f32
columns become one bf16x2 (`cvt.rn.bf16x2.f32`) and one `st.shared.b32`.

`f = mma.load tile` (a register A operand): the same places, read the
other way: each packed register (two neighbouring bf16 columns) is one
`ld.shared.b32`. The fragment has the accumulator's element placement, so
the registers land where the MMA reads its A operand.

In a swizzled tile the 16-byte chunk of a column moves with the row
(128-byte swizzle: chunk c of row r at c ^ (r % 8); 64 B: c ^ ((r / 2) % 4);
32 B: c ^ ((r / 4) % 2)). With row offsets that are multiples of
8 (checked) r % 8 is the same for all of a thread's registers, so the
thread computes one address per chunk of a stripe once, and every access
is `[chunk address + immediate]`. In the 128-byte swizzle a warp's 32
accesses then hit 32 different banks.
"""
from __future__ import annotations

from choreo_py import ir

from .context import Lowering
from .fragments import info
from .memory import addr
from .writer import V


def mma_store(lw: Lowering, s: ir.MmaStore) -> None:
    fi = info(lw, s.acc, s.loc)
    if fi.kind != "acc":
        raise lw.refuse(f"mma.store of '{s.acc}', which is not an accumulator", s.loc)
    if s.transposed:
        return _store_transposed(lw, s, fi)
    buf, places = _places(lw, fi, s.dst, s.loc, "mma.store")
    if buf.dtype not in ("bf16", "f16", "f32"):
        raise lw.refuse(f"mma.store into a {buf.dtype} tile", s.loc)
    lw.target.access(lw, fi.frag)
    w = lw.w
    packed = buf.esize == 2
    tmp = w.reg("b32" if packed else "f32", f"{s.acc}_pack")
    kind = "bf16x2" if buf.dtype == "bf16" else "f16x2"
    for k in range(0, fi.layout.regs, 2 if packed else 1):
        reg, off = places(k, packed)
        if packed:
            w.op(f"cvt.rn.{kind}.f32", tmp, fi.reg(k + 1), fi.reg(k))
            w.op("st.shared.b32", addr(reg, off), tmp)
        else:
            w.op("st.shared.f32", addr(reg, off), fi.reg(k))
    lw.smem_dirty = True


def _store_transposed(lw: Lowering, s: ir.MmaStore, fi) -> None:
    """`mma.store.transp acc, tile`: element (i, j) to (j, i) of an unswizzled tile, one
    store per element (neighbouring columns of the accumulator land in different rows)."""
    lay = fi.layout
    shape = tuple(e.value if isinstance(e, ir.Const) else None for e in s.dst.shape)
    if shape != (lay.cols, lay.rows):
        raise lw.refuse(f"mma.store.transp of a [{lay.rows}, {lay.cols}] fragment into a tile "
                        f"of shape {list(shape)}", s.loc)
    buf, origin, const, col0 = lw.memory.view_origin(s.dst, s.loc)
    if buf.swizzle:
        raise lw.refuse("mma.store.transp into a swizzled tile", s.loc)
    if buf.dtype not in ("bf16", "f16", "f32"):
        raise lw.refuse(f"mma.store.transp into a {buf.dtype} tile", s.loc)
    lw.target.access(lw, fi.frag)
    w = lw.w
    rb, cb = lw.target.thread_bases(lw)
    base = w.reg("u32", f"{s.acc}_stt")  # tile row = the accumulator's column, and back
    w.op("mad.lo.u32", base, cb, buf.row_bytes, origin)
    w.op("mad.lo.u32", base, rb, buf.esize, base)
    half = w.reg("b16", f"{s.acc}_h") if buf.esize == 2 else None
    for k in range(lay.regs):
        off = const + lay.col_off[k] * buf.row_bytes + lay.row_off[k] * buf.esize
        if half is None:
            w.op("st.shared.f32", addr(base, off), fi.reg(k))
        else:
            w.op(f"cvt.rn.{buf.dtype}.f32", half, fi.reg(k))
            w.op("st.shared.b16", addr(base, off), half)
    lw.smem_dirty = True


def mma_load(lw: Lowering, s: ir.MmaLoad) -> None:
    fi = info(lw, s.frag, s.loc)
    if fi.kind == "meta":  # a sparse MMA's metadata (declared only by a target that has one)
        lw.target.load_sparse_meta(lw, fi, s)
        return
    if fi.kind != "operand":
        raise lw.refuse(f"mma.load into '{s.frag}', which is not the register A operand of "
                        "an MMA", s.loc)
    if lw.k.buffer(s.src.base) is None:
        raise lw.refuse("mma.load from global memory (load the tile into shared memory first)",
                        s.loc)
    buf, places = _places(lw, fi, s.src, s.loc, "mma.load")
    if buf.dtype != fi.frag.dtype or buf.esize != 2:
        raise lw.refuse(f"mma.load of a {buf.dtype} tile into a {fi.frag.dtype} operand", s.loc)
    for k in range(0, fi.layout.regs, 2):
        reg, off = places(k, True)
        lw.w.op("ld.shared.b32", fi.reg(k // 2), addr(reg, off))
    lw.smem_read = True  # an event this instance triggers next may free the tile


def _places(lw: Lowering, fi, view: ir.View, loc, what: str):
    """(buffer layout, places): places(k, packed) is the (register, offset) of element k."""
    lay = fi.layout
    shape = tuple(e.value if isinstance(e, ir.Const) else None for e in view.shape)
    if shape != (lay.rows, lay.cols):
        raise lw.refuse(f"{what} of a [{lay.rows}, {lay.cols}] fragment and a tile of shape "
                        f"{list(shape)}", loc)
    buf, origin, const, col0 = lw.memory.view_origin(view, loc)
    if buf.swizzle and col0 % buf.stripe_cols:
        raise lw.refuse(f"{what} of a swizzled tile that starts inside a stripe", loc)
    w = lw.w
    rb, cb = lw.target.thread_bases(lw)
    esize = buf.esize
    tag = "st" if what == "mma.store" else "ld"
    base = w.reg("u32", f"{fi.frag.name}_{tag}")
    w.op("mad.lo.u32", base, rb, buf.row_bytes, origin)
    w.op("mad.lo.u32", base, cb, esize, base)
    chunks = _chunk_addresses(lw, buf, rb, base, lay, loc, tag) if buf.swizzle else None

    def places(k: int, packed: bool) -> tuple[V, int]:
        if packed and (lay.col_off[k + 1] != lay.col_off[k] + 1
                       or lay.row_off[k + 1] != lay.row_off[k]):
            raise lw.refuse(f"{what} of 16-bit elements from unpaired columns", loc)
        col, row = lay.col_off[k], lay.row_off[k]
        if buf.swizzle:
            stripe, within = divmod(col, buf.stripe_cols)
            chunk, inner = divmod(within * esize, 16)
            return chunks[chunk], const + stripe * buf.stripe_bytes + row * buf.row_bytes + inner
        return base, const + row * buf.row_bytes + col * esize

    return buf, places


def _chunk_addresses(lw: Lowering, buf, rb: V, base: V, lay, loc, tag: str) -> list[V]:
    chunk_elems = 16 // buf.esize
    if any(r % 8 for r in lay.row_off):
        raise lw.refuse("a swizzled tile accessed from rows not 8 apart", loc)
    if any(c % chunk_elems + lay.col_base_max >= chunk_elems for c in lay.col_off):
        raise lw.refuse("a swizzled tile accessed from columns that straddle 16-byte chunks",
                        loc)
    w = lw.w
    # The S-byte swizzle XORs the 16-byte chunk index (S / 16 of them in a row of a
    # stripe) with bits 7.. of the row's byte offset (row * S): row % 8 for 128 B,
    # (row / 2) % 4 for 64 B, (row / 4) % 2 for 32 B.
    shift = {128: 0, 64: 1, 32: 2}[buf.swizzle]
    rsw = w.reg("u32", "row_swz")
    if shift:
        w.op("shr.u32", rsw, rb, shift)
        w.op("and.b32", rsw, rsw, buf.swizzle // 16 - 1)
    else:
        w.op("and.b32", rsw, rb, 7)
    w.op("shl.b32", rsw, rsw, 4)
    out = []
    for c in range(buf.row_bytes // 16):
        a = w.reg("u32", f"chunk{c}_{tag}")
        w.op("xor.b32", a, rsw, c << 4)
        w.op("add.u32", a, a, base)
        out.append(a)
    return out
