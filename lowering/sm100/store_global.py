"""`mma.store.direct acc, <global tile>` on sm_100a: tensor memory -> registers -> `st.global`.

A thread of a reader role holds a run of consecutive columns of one row of the
accumulator (`.32x32b`: the whole row; `.16x32bx2`: half of it), so each 16 bytes of
its run are one `st.global.v4.b32` (8 bf16 packed by `cvt.rn.bf16x2.f32`, or 4 f32) at
its row's address in the tensor. No shared staging tile and no TMA: the stores leave
the thread at issue (it never waits for them), so a role that stores an item's O
this way goes on to the next item's work at once, where a TMA store's staging tile
must be drained (`cp.async.bulk.wait_group.read`) before the tile is written again.
The registers are read at issue, and the tensor-memory loads before them are waited
(`tcgen05.wait::ld`), so an event the role triggers next may let an MMA overwrite
the accumulator.

The tensor's edge is what a TMA store clips: a row past the tensor's extent (a
partial last query tile), or a position of a squeezed dimension past its extent, is
not stored (one predicate per thread). The columns must lie inside the tensor's last
(contiguous) dimension, statically, and its rows must be whole 16-byte pieces; the
tensor's address is a kernel parameter of its own (`ptr_<tensor>`, as element reads
have: core/global_reads.py).
"""
from __future__ import annotations

from choreo_py import ir

from ..core.context import Lowering
from ..core.exprs import ExprLowering
from ..core.global_reads import pointer
from ..core.writer import V


def direct_store(lw: Lowering, s: ir.MmaStore, fi) -> None:
    t, w, lay = lw.target, lw.w, fi.layout
    param = lw.k.param(lw.k.root(s.dst.base))
    if param is None or s.dst.base != param.name:
        raise lw.refuse("mma.store.direct into a view of a view (store into the tensor's own "
                        "subspan)", s.loc)
    esize = ir.dtype_bytes(param.dtype)
    if param.dtype not in ("bf16", "f16", "f32"):
        raise lw.refuse(f"mma.store.direct into a {param.dtype} tensor", s.loc)
    rows_dim, cols_dim = _dims(lw, s.dst, param, lay, esize, s.loc)
    run, chunk = lay.regs, 16 // esize
    if run % chunk:
        raise lw.refuse("mma.store.direct of a run of columns that is not whole 16-byte pieces",
                        s.loc)
    piece = t.column_chunk(lw, [fi.frag])  # a reader role loads the tile piece by piece
    if not piece or run % piece or piece % chunk:
        piece = 0
        t.access(lw, fi.frag)
    t._check_role(lw, s.loc, fi.frag.name)
    rb, cb = t.row_base(lw), t.col_base(lw, lay.cols)
    x = ExprLowering(lw, s.loc)
    addr = _row_address(lw, x, s.dst, param, rows_dim, rb, cb, esize)
    inside = _inside(lw, x, s.dst, param, rows_dim, rb)
    vec = [V(f"{fi.array}[{k}]", "f32") for k in range(run)]
    packed = w.array("b32", 4, f"{s.acc}_gout") if esize == 2 else None
    kind = "bf16x2" if param.dtype == "bf16" else "f16x2"
    for g in range(run // chunk):
        if piece and g * chunk % piece == 0:
            t.access_columns(lw, fi.frag, g * chunk, piece)
        vals = vec[g * chunk:(g + 1) * chunk]
        if packed is not None:
            regs = [V(f"{packed}[{i}]", "b32") for i in range(4)]
            for i in range(4):  # the lower column in the low half
                w.op(f"cvt.rn.{kind}.f32", regs[i], vals[2 * i + 1], vals[2 * i])
            w.op("st.global.v4.b32", f"ptx.addr({addr.text}, {16 * g})", regs, pred=inside)
        else:
            w.op("st.global.v4.f32", f"ptx.addr({addr.text}, {16 * g})", vals, pred=inside)


def _dims(lw, view: ir.View, param, lay, esize: int, loc) -> tuple[int, int]:
    """(row dimension, column dimension) of the tile in the tensor, checked."""
    kept = [d for d, k in enumerate(view.keep) if k]
    shape = tuple(e.value if isinstance(e, ir.Const) else None for e in view.shape)
    if len(kept) != 2 or shape != (lay.rows, lay.cols):
        raise lw.refuse(f"mma.store.direct of a [{lay.rows}, {lay.cols}] accumulator into a "
                        f"tile of shape {list(shape)}", loc)
    rows_dim, cols_dim = kept
    last, c0 = param.shape[-1], view.offsets[cols_dim]
    if cols_dim != len(param.shape) - 1 or not isinstance(last, ir.Const) \
            or not isinstance(c0, ir.Const) or c0.value + lay.cols > last.value \
            or (last.value * esize) % 16 or (c0.value * esize) % 16:
        raise lw.refuse("mma.store.direct whose columns are not statically inside the "
                        "tensor's last dimension, in whole 16-byte pieces", loc)
    return rows_dim, cols_dim


def _row_address(lw, x, view, param, rows_dim: int, rb: V, cb: V, esize: int) -> V:
    """The global address of the thread's first element: tile origin + rb rows + cb."""
    w = lw.w
    lin: ir.Expr = ir.Const(0, "s32")
    for off, n in zip(view.offsets, param.shape):
        lin = ir.Bin("+", ir.Bin("*", lin, n, "s32"), off, "s32")
    stride: ir.Expr = ir.Const(1, "s32")
    for n in param.shape[rows_dim + 1:]:
        stride = ir.Bin("*", stride, n, "s32")
    elem = w.reg("s32", "gst_elem")
    w.op("mad.lo.s32", elem, rb, x.value(stride, "gst_stride"), x.value(lin, "gst_origin"))
    if not (cb.is_const and cb.const == 0):
        w.op("add.s32", elem, elem, cb)
    wide = w.reg("u64", "gst_off")
    w.op("mul.wide.s32", wide, elem, esize)
    addr = w.reg("u64", "gst_addr")
    w.op("add.u64", addr, pointer(lw, param.name), wide)
    return addr


def _inside(lw, x, view, param, rows_dim: int, rb: V) -> V:
    """Whether the thread's row lies inside the tensor (a TMA store's clipping): its row
    below the row extent, each squeezed position below its extent (unsigned: >= 0 too)."""
    w = lw.w
    ok = w.reg("pred", "gst_in")
    row = w.reg("s32", "gst_row")
    w.op("add.s32", row, rb, x.value(view.offsets[rows_dim], "gst_r0"))
    w.op("setp.lt.u32", ok, row, x.value(param.shape[rows_dim], "gst_rows"))
    for d, (off, keep) in enumerate(zip(view.offsets, view.keep)):
        n = param.shape[d]
        if keep or (isinstance(off, ir.Const) and isinstance(n, ir.Const)
                    and 0 <= off.value < n.value):
            continue
        more = w.reg("pred", "gst_in")
        w.op("setp.lt.u32", more, x.value(off, "gst_at"), x.value(n, "gst_ext"))
        w.op("and.pred", ok, ok, more)
    return ok
