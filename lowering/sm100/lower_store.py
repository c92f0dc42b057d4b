"""`mma.store acc, tile` on sm_100a: the register copy of a TMEM tile -> shared memory.

The core's store (core/epilogue.py) assumes a thread's columns lie within one
16-byte chunk of its first column (wgmma fragments). Here a thread holds a
run of consecutive columns of one row (`.16x32bx2`: N/2 columns starting at
N/2 * (lane / 16); `.32x32b`: the whole row), so each 16 bytes of its run are
one `st.shared.v4` (8 bf16 packed by `cvt.rn.bf16x2.f32`, or 4 f32). A reader role of
the block's accumulator loads the run from tensor memory piece by piece before its
stores (block_acc.column_chunk), so it never holds the whole row in registers.

In a swizzled tile (the core's stripe layout, 16-byte chunk c of row r at
c ^ (r % 8)) the thread computes its row's chunk addresses once: with X =
(r % 8) ^ (first chunk of its run), chunk c of the run is at c ^ X. For the
seed each thread writes one full 128-byte row of one stripe with 8 stores;
the warp's 32 threads cover 16 rows x 2 stripes, so a store instruction's
16-byte pieces land in distinct bank groups per 8 rows.
"""
from __future__ import annotations

from choreo_py import ir

from ..core.context import Lowering
from ..core.fragments import info
from ..core.writer import V
from ..core.memory import addr as _addr
from .store_global import direct_store


def mma_store(lw: Lowering, s: ir.MmaStore) -> None:
    t = lw.target
    if s.transposed:
        raise lw.refuse("mma.store.transp (a transposed store of a tensor-memory accumulator)",
                        s.loc)
    fi = info(lw, s.acc, s.loc)
    if fi.kind != "acc":
        raise lw.refuse(f"mma.store of '{s.acc}', which is not an accumulator", s.loc)
    if s.direct:
        return direct_store(lw, s, fi)  # registers -> st.global (store_global.py)
    lay = fi.layout
    shape = tuple(e.value if isinstance(e, ir.Const) else None for e in s.dst.shape)
    if shape != (lay.rows, lay.cols):
        raise lw.refuse(f"mma.store of a [{lay.rows}, {lay.cols}] accumulator into a tile of "
                        f"shape {list(shape)}", s.loc)
    buf, origin, const, col0 = lw.memory.view_origin(s.dst, s.loc)
    if buf.dtype not in ("bf16", "f16", "f32"):
        raise lw.refuse(f"mma.store into a {buf.dtype} tile", s.loc)
    run = lay.regs  # consecutive columns per thread
    esize = buf.esize
    chunk = 16 // esize  # elements per 16-byte store
    if run % chunk or (col0 * esize) % 16:
        raise lw.refuse("mma.store of a run of columns that is not whole 16-byte pieces", s.loc)
    piece = t.column_chunk(lw, [fi.frag])  # a reader role loads the tile piece by piece
    if not piece or run % piece or piece % chunk:
        piece = 0
        t.access(lw, fi.frag)
    t._check_role(lw, s.loc, fi.frag.name)
    rb, cb = t.row_base(lw), t.col_base(lw, lay.cols)
    w = lw.w
    row = w.reg("u32", f"{s.acc}_row")
    w.op("mad.lo.u32", row, rb, buf.row_bytes, origin)
    if buf.swizzle:
        addrs, step = _swizzled(lw, buf, rb, cb, row, run, col0, s.loc)
    else:
        if cb.is_const:
            const += cb.const * esize
        else:
            w.op("mad.lo.u32", row, cb, esize, row)
        addrs, step = [row], None
    vec = [V(f"{fi.array}[{k}]", "f32") for k in range(run)]
    packed = w.array("b32", 4, f"{s.acc}_out") if esize == 2 else None
    kind = "bf16x2" if buf.dtype == "bf16" else "f16x2"
    for g in range(run // chunk):
        if piece and g * chunk % piece == 0:
            t.access_columns(lw, fi.frag, g * chunk, piece)
        if step is None:
            reg, off = addrs[0], const + 16 * g
        else:
            stripe, c = divmod(g, len(addrs))
            reg, off = addrs[c], const + stripe * step
        vals = vec[g * chunk:(g + 1) * chunk]
        if packed is not None:
            regs = [V(f"{packed}[{i}]", "b32") for i in range(4)]
            for i in range(4):  # the lower column in the low half
                w.op(f"cvt.rn.{kind}.f32", regs[i], vals[2 * i + 1], vals[2 * i])
            w.op("st.shared.v4.b32", _addr(reg, off), regs)
        else:
            w.op("st.shared.v4.f32", _addr(reg, off), vals)
    lw.smem_dirty = True


def _swizzled(lw: Lowering, buf, rb: V, cb: V, row: V, run: int, col0: int, loc):
    """Chunk addresses of the thread's row (one per 16-byte chunk of a stripe row) and the
    byte step between stripes."""
    w = lw.w
    esize, cols = buf.esize, buf.stripe_cols
    per_stripe = buf.row_bytes // 16
    if col0 % cols:
        raise lw.refuse("mma.store into a swizzled tile that starts inside a stripe", loc)
    chunks = run * esize // 16
    whole = run % cols == 0
    if not whole and (cols % run or chunks & (chunks - 1)):
        raise lw.refuse(f"mma.store of {run} columns per thread into {buf.swizzle} B stripes", loc)
    x = w.reg("u32", "row_swz")
    w.op("and.b32", x, rb, 7)  # the tile starts on an 8-row boundary (view_origin checks)
    if not cb.is_const:
        stripe = w.reg("u32", "run_stripe")  # which stripe the run starts in
        w.op("shr.u32", stripe, cb, cols.bit_length() - 1)
        w.op("mad.lo.u32", row, stripe, buf.stripe_bytes, row)
        if not whole:  # the run starts at chunk (cb % cols) / chunk of its stripe
            first = w.reg("u32", "run_chunk")
            w.op("and.b32", first, cb, cols - 1)
            w.op("shr.u32", first, first, (16 // esize).bit_length() - 1)
            w.op("xor.b32", x, x, first)
    w.op("shl.b32", x, x, 4)
    addrs = []
    for c in range(min(per_stripe, chunks)):
        a = w.reg("u32", f"chunk{c}")
        if c:
            w.op("xor.b32", a, x, c << 4)
            w.op("add.u32", a, a, row)
        else:
            w.op("add.u32", a, x, row)
        addrs.append(a)
    return addrs, buf.stripe_bytes
