"""TMA copies of tensors whose rows are not 16-byte multiples: cooperative ld/st copies.

A tensor map needs byte strides that are multiples of 16 (cuTensorMapEncodeTiled):
a tensor of 100 bf16 columns (rows of 200 bytes) or a u8 metadata tensor [64, 8]
has none. Its TMA loads and stores in an MMA kernel are lowered here instead, as
copies by the threads that reach the statement (the role instance's, the block's
at block level, the one thread of an issue-only role):

  load   each element of the box: `ld.global` where it is inside the tensor, else 0
         (the box's zero fill), `st.shared` at its place in the tile's layout
         (column stripes of S bytes, 16-byte chunks XOR-swizzled by bits [7, 7+B) of
         the shared address, as TMA writes it and the MMA descriptors read it); then
         every writer fences its writes into the async proxy
         (fence.proxy.async.shared::cta), the threads meet, and the issuing thread
         completes the box's bytes on the group's mbarrier (`mbarrier.complete_tx`:
         the arm, `arrive.expect_tx` of the whole group, is unchanged), so the MMA and
         the waiters see the tile exactly as after the TMA's completion;
  store  the tile read back from that layout, each element inside the tensor
         written by `st.global` (a TMA store's clipping); the threads meet after it
         (the tile may be written again).

A store `tma.copy.rows<n>` (ir.TmaStore.rows) writes only the box's first n rows, n known
at run time: where n is below the box's rows it is stored here too, each access
predicated on its row (roles._store_rows: the TMA store otherwise), by every thread of
the role when several warpgroups share it (roles.role_wide_store).

A box may be a run of one row into or out of a shared vector (`shared f32[128] v`: an
attention row's log-sum-exp, examples/flash_atten_family.co, whose rows of Q_SEQ floats
need not be 16-byte multiples).

Which tensors: those whose row strides are known here and not 16-byte multiples
(static shapes, functions built for a call's shapes), and those the build names
(`cooperative(names)`, a compile option the launchers set when a call's strides
are known only at run time: runtime/kernel.py, the emulator's launcher). Every
other copy is the TMA's, its PTX unchanged. Each access moves the widest power of
two up to 8 bytes that the rows' alignment allows (known from static shapes, or named
by the launcher as `name:bytes`), else one element.
"""
from __future__ import annotations

import contextlib
import contextvars
import math

from choreo_py import ir

from . import tma_align
from .exprs import ExprLowering
from .global_reads import pointer as _pointer
from .writer import V

_NAMED: contextvars.ContextVar = contextvars.ContextVar("cooperative_tma_tensors",
                                                        default=frozenset())


@contextlib.contextmanager
def cooperative(names):
    """Builds inside copy the named tensors cooperatively (their strides at run time are
    not 16-byte multiples)."""
    token = _NAMED.set(frozenset(names))
    try:
        yield
    finally:
        _NAMED.reset(token)


def row_strides(p: ir.Param) -> list:
    """Byte strides of dimensions 0..rank-2 of a row-major tensor (None: known at run time)."""
    esize = ir.dtype_bytes(p.dtype)
    out, acc = [], esize
    for e in reversed(p.shape[1:]):
        acc = acc * e.value if acc is not None and isinstance(e, ir.Const) else None
        out.append(acc)
    return out


def applies(lw, tensor: str) -> bool:
    p = lw.k.param(tensor)
    if p is None:
        return False
    if _named_align(tensor) is not None:
        return True
    if tensor in tma_align.off_grid_tensors(lw):  # a box not proven 16-byte aligned
        return True
    return any(s is not None and s % 16 for s in row_strides(p))


def _named_align(tensor: str):
    """The alignment of the rows of a tensor the build names (`name` or `name:bytes`), else
    None."""
    for n in _NAMED.get():
        name, _, align = n.partition(":")
        if name == tensor:
            return int(align) if align else 1
    return None


def _access_bytes(lw, glob: ir.View, cols: int) -> int:
    """Bytes each access moves: the widest power of two (up to 8) dividing every row's
    byte stride (each a multiple of the innermost's), the tile's row and its first column's
    byte offset; else one element.
    (The innermost extent of a row-major tensor is its row stride over the element size,
    so an access never straddles the tensor's end.)"""
    p = lw.k.param(glob.base)
    es = ir.dtype_bytes(p.dtype)
    align = _named_align(glob.base)
    # Each outer stride is a multiple of the innermost row's (the last extent's bytes), so
    # that one known is enough: the outer extents may be symbolic ([TOTAL, H, 128]).
    strides = [x for x in row_strides(p)[:1] if x is not None]
    if strides:
        align = math.gcd(16, *strides) if align is None else math.gcd(align, *strides)
    width = min(align or es, 8)
    from .memory import multiple_of

    while width > es and (cols * es % width or not multiple_of(glob.offsets[-1], width // es)):
        width //= 2
    return max(width, es)


# ---------------------------------------------------------------- loads and stores

def load(lw, s: ir.TmaLoad, mbar, pred) -> None:
    from .memory import addr

    mem = lw.memory
    lay, base, off, _ = mem.view_origin(s.dst, s.loc, vector=True)
    if (s.swizzle or None) != lay.swizzle:
        from choreo_py.diagnostics import ChoreoError
        raise ChoreoError(f"tma.load with swizzle {s.swizzle} into '{lay.name}', whose "
                          f"layout has swizzle {lay.swizzle}", s.loc)
    mem.box(s, s.src, s.dst, lay)  # the box's rules (static, 2-D, the tile's shape)
    w = lw.w
    w.comment(f"'{s.src.base}': rows not 16-byte multiples: the threads copy the box "
              "(tma_fallback.py)")
    _elements(lw, s.src, lay, base, off, s.loc, to_shared=True)
    w.comment("the copy -> visible to the async proxy, then complete its bytes")
    w.call("ptx.fence.proxy_async_shared_cta")
    _meet(lw)
    rows, cols = _tile_shape(s.dst)
    nbytes = rows * cols * lay.esize
    w.op("mbarrier.complete_tx.shared::cta.b64", addr(*mbar), V.imm(nbytes, "u32"), pred=pred)


def store(lw, s: ir.TmaStore, last: bool, workers=None) -> None:
    """The threads' store of the box (`workers`: (this thread's first access, the step)
    where the threads of several instances share it, else the instance's or block's)."""
    mem = lw.memory
    lay, base, off, _ = mem.view_origin(s.src, s.loc, vector=True)
    mem.box(s, s.dst, s.src, lay)
    w = lw.w
    if lw.role is None:  # (roles.tma_store has the instance's threads meet, before and after)
        w.call("ptx.bar.sync", "0")
    limit = None
    if s.rows is not None:
        w.comment(f"'{s.dst.base}': the box's first rows only (.rows<n>): the threads store "
                  "them (tma_fallback.py)")
        limit = ExprLowering(lw, s.loc).value(s.rows, "rows")
    else:
        w.comment(f"'{s.dst.base}': rows not 16-byte multiples: the threads store the box "
                  "(tma_fallback.py)")
    _elements(lw, s.dst, lay, base, off, s.loc, to_shared=False, limit=limit, workers=workers)
    if s.dst.base in mem.tensors_read():  # a later TMA load of it reads through the async proxy
        w.op("fence.proxy.async.global")
    if lw.role is None and not last:
        w.call("ptx.bar.sync", "0")


def _meet(lw) -> None:
    """The copying threads meet (none to meet in an issue-only role)."""
    role = lw.role
    if role is None:
        lw.w.call("ptx.bar.sync", "0")
        lw.smem_dirty = lw.smem_read = False
    elif not (role.single_thread or role.threads == 1):
        lw.instance_barrier()


def _workers(lw) -> tuple[V, int]:
    """(first element index, step) of this thread's share of a copy."""
    role = lw.role
    if role is None:
        return lw.tid, _block_threads(lw.k)
    if role.single_thread or role.threads == 1:
        return V.imm(0, "s32"), 1
    return role.local_tid, role.threads


def _block_threads(k: ir.Kernel) -> int:
    # (kernel.py's count of the block's threads; repeated here: kernel.py imports this
    # module through roles.py)
    par = [s for s in ir.walk(k.body) if isinstance(s, ir.Parallel)]
    return max((p.extent * (p.threads or 1) for p in par), default=1)


def _elements(lw, glob: ir.View, lay, base: V, off: int, loc, *, to_shared: bool,
              limit: V | None = None, workers=None) -> None:
    """The loop over the box's elements, `step` apart from this thread's first; with
    `limit` (a store's `.rows<n>`), only those of its first n rows."""
    w = lw.w
    rows, cols = _tile_shape(glob)
    width = _access_bytes(lw, glob, cols)
    if limit is not None and len(glob.shape) == 1:
        width = lay.esize  # (a limit inside an access of several elements would split it)
    per = width // lay.esize  # elements per access
    n = rows * cols // per
    first, step = workers or _workers(lw)
    i = w.reg("u32", "ce")
    w.op("mov.u32", i, first)
    top, end = w.label("coop"), w.label("coop_end")
    more = w.reg("pred", "coop_more")
    w.op("setp.ge.u32", more, i, n)
    w.bra(end, more)
    w.put_label(top)
    if -(-n // step) > 32:  # (as dma.py: ptxas would unroll a long constant loop in full)
        w.call("ptx.pragma", '"nounroll"')
    lw.push()
    with lw.skippable():
        _element(lw, glob, lay, base, off, i, (cols, per, width), loc, to_shared, limit)
    lw.pop()
    w.op("add.u32", i, i, step)
    w.op("setp.lt.u32", more, i, n)
    w.bra(top, more)
    w.put_label(end)


def _tile_shape(glob: ir.View) -> tuple[int, int]:
    """(rows, columns) of the box; a run of one row (a vector's copy) is one row."""
    shape = tuple(e.value for e in glob.shape)
    return (1, shape[0]) if len(shape) == 1 else shape


def _element(lw, glob, lay, base, off, i, access, loc, to_shared, limit=None) -> None:
    """Access `i`: `per` elements (`width` bytes) of a row from column (i % (cols/per)) * per;
    a store under `limit` writes it only in the box's first `limit` rows (of a run of one
    row, its first `limit` elements: such a run moves one element an access)."""
    w = lw.w
    cols, per, width = access
    r, c = w.reg("u32", "cr"), w.reg("u32", "cc")
    across = cols // per
    if across & (across - 1) == 0:
        w.op("shr.u32", r, i, across.bit_length() - 1)
        w.op("and.b32", c, i, across - 1)
    else:
        w.op("div.u32", r, i, across)
        w.op("rem.u32", c, i, across)
    if per > 1:
        w.op("mul.lo.u32", c, c, per)
    sh = _shared_address(lw, lay, base, off, r, c)
    inside, gaddr = _global_address(lw, glob, r, c, loc)
    if limit is not None:
        inside = _below(lw, inside, c if len(glob.shape) == 1 else r, limit)
    bits = width * 8
    ty = f"b{bits}" if bits > 8 else "b16"  # (a byte moves in a 16-bit register)
    mem = f"b{bits}" if bits > 8 else "u8"
    v = w.reg(ty, "cv")
    if to_shared:
        w.op(f"mov.{ty}", v, V.imm(0, ty))
        w.op(f"ld.global.{mem}", v, f"ptx.addr({gaddr.text})", pred=inside)
        w.op(f"st.shared.{mem}", f"ptx.addr({sh.text})", v)
    else:
        w.op(f"ld.shared.{mem}", v, f"ptx.addr({sh.text})")
        w.op(f"st.global.{mem}", f"ptx.addr({gaddr.text})", v, pred=inside)


def _below(lw, inside: V, pos: V, limit: V) -> V:
    """`inside` and pos < limit (signed: a limit <= 0 keeps nothing)."""
    w = lw.w
    ok = w.reg("pred", "crows")
    w.op("setp.lt.s32", ok, pos, limit)
    w.op("and.pred", ok, ok, inside)
    return ok


def _shared_address(lw, lay, base: V, off: int, r: V, c: V) -> V:
    """The byte address of tile element (r, c) in the layout memory.py describes."""
    w = lw.w
    a = w.reg("u32", "csa")
    es = lay.esize
    if lay.swizzle:
        bits = lay.stripe_cols.bit_length() - 1  # stripe_cols = S / e: a power of two
        stripe, within = w.reg("u32", "cst"), w.reg("u32", "cin")
        w.op("shr.u32", stripe, c, bits)
        w.op("and.b32", within, c, lay.stripe_cols - 1)
        w.op("mad.lo.u32", a, stripe, lay.stripe_bytes, base)
        w.op("mad.lo.u32", a, r, lay.row_bytes, a)
        w.op("mad.lo.u32", a, within, es, a)
    else:
        w.op("mad.lo.u32", a, r, lay.row_bytes, base)
        w.op("mad.lo.u32", a, c, es, a)
    if off:
        w.op("add.u32", a, a, off)
    if lay.swizzle:  # chunk bits [4, 4+B) ^= address bits [7, 7+B) (the TMA's swizzle)
        mask = {32: 1, 64: 3, 128: 7}[lay.swizzle]
        t = w.reg("u32", "csw")
        w.op("shr.u32", t, a, 7)
        w.op("and.b32", t, t, mask)
        w.op("shl.b32", t, t, 4)
        w.op("xor.b32", a, a, t)
    return a


def _global_address(lw, glob: ir.View, r: V, c: V, loc) -> tuple[V, V]:
    """(inside the tensor, global address) of box element (r, c)."""

    w = lw.w
    p = lw.k.param(glob.base)
    x = ExprLowering(lw, loc)
    kept = [d for d, k in enumerate(glob.keep) if k]
    inside = None
    lin = w.reg("u32", "cli")
    w.op("mov.u32", lin, 0)
    for d, (o, n) in enumerate(zip(glob.offsets, p.shape)):
        coord = w.reg("u32", "cg")
        w.op("mov.u32", coord, x.value(o, "co"))
        if d in kept:
            # (a run of one row, a vector's copy, has only columns)
            w.op("add.u32", coord, coord, r if d == kept[0] and len(kept) > 1 else c)
        ext = x.value(n, "cext")
        ok = w.reg("pred", "cok")
        w.op("setp.lt.u32", ok, coord, ext)  # (a negative coordinate is a large one)
        if inside is not None:
            w.op("and.pred", ok, ok, inside)
        inside = ok
        w.op("mad.lo.u32", lin, lin, ext, coord)
    wide = w.reg("u64", "cgo")
    w.op("mul.wide.u32", wide, lin, ir.dtype_bytes(p.dtype))
    g = w.reg("u64", "cga")
    w.op("add.u64", g, _pointer(lw, glob.base), wide)
    return inside, g
