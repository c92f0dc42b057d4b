"""`dma.copy` in thread kernels: element loops over a tile (see simt.py for the order).

A copy between global and shared memory is shared out over the block's
threads: thread t moves elements t, t + THREADS, ...; each element index is
split into the tile's coordinates by its (constant or run-time) extents and
read and written through the same address rules as per-thread code
(threads.py). Plain `ld`/`st` carry no alignment requirement, so any row
width copies. When the destination's extent is smaller than the source's
(a view of `X` rows, `X` computed), the destination's shape is moved. A copy
that touches a `local` buffer is the issuing thread's own loop.
"""
from __future__ import annotations

from choreo_py import ir
from choreo_py.ir import build as B

from .threads import RAW, barrier, elem_types
from .writer import V


def _storage(lw, v: ir.View) -> str:
    return lw.places.base_shape(v.base, None)[0]


def as_copy(s) -> ir.DmaCopy:
    """A TMA load or store of a thread kernel as the cooperative copy it amounts to (its
    swizzle is a layout of the tile no thread-kernel access observes)."""
    return ir.DmaCopy(s.src, s.dst, s.future, getattr(s, "swizzle", None), loc=s.loc,
                      leader_only=s.leader_only)


def copy(lw, s: ir.DmaCopy) -> None:
    # A swizzle is a layout of the shared tile for TMA and MMA reads; every access in a
    # thread kernel computes its own address, so the plain layout gives the same values.
    per_thread = "local" in (_storage(lw, s.src), _storage(lw, s.dst))
    shape = _shape(s)
    if not per_thread:
        barrier(lw)  # writers of the source (and readers of the destination) are done
    _loop(lw, s, shape, per_thread)
    if not per_thread:
        barrier(lw)  # the tile is there for every thread


def _shape(s: ir.DmaCopy) -> tuple[ir.Expr, ...]:
    """The extents written: the destination's. A smaller source tile is zero-filled to it
    (cp.async's zero fill; `_zero_filled`); a destination known only at run time takes
    its shape from the source's leading corner."""
    return tuple(s.dst.shape)


def _zero_filled(s: ir.DmaCopy) -> list[tuple[int, ir.Expr]]:
    """(dimension, source extent) where the source tile may be smaller than the (static)
    destination: a constant smaller extent, or one known only at run time."""
    out = []
    for k, (a, b) in enumerate(zip(s.src.shape, s.dst.shape)):
        if not isinstance(b, ir.Const):
            continue
        if not isinstance(a, ir.Const) or a.value < b.value:
            out.append((k, a))
    return out


def _loop(lw, s: ir.DmaCopy, shape, per_thread: bool) -> None:
    w = lw.w
    total: ir.Expr = ir.Const(1, "s32")
    for e in shape:
        total = ir.Bin("*", total, e, "s32")
    x = lw.exprs(s.loc)
    n = x.value(total, "n")
    i = w.reg("s32", "e")
    if per_thread:
        w.op("mov.s32", i, 0)
        step = V.imm(1, "s32")
    else:
        w.op("mov.s32", i, lw.tid)
        step = V.imm(lw.threads, "s32")
    top, end = w.label("copy"), w.label("copy_end")
    more = w.reg("pred", "copy_more")
    w.op("setp.ge.s32", more, i, n)
    w.bra(end, more)
    w.put_label(top)
    if _trips(n, 1 if per_thread else lw.threads) > UNROLL_LIMIT:
        # ptxas unrolls a loop of constant trip count in full: hundreds of element copies
        # (each with its index arithmetic) cost it minutes and gain nothing here
        w.call("ptx.pragma", '"nounroll"')
    lw.push()
    with lw.skippable():  # no iteration runs where the tile is empty
        _element(lw, s, i, shape)
    lw.pop()
    w.op("add.s32", i, i, step)
    w.op("setp.lt.s32", more, i, n)
    w.bra(top, more)
    w.put_label(end)


#: The longest element loop (iterations per thread) left for ptxas to unroll.
UNROLL_LIMIT = 32


def _trips(n: V, step: int) -> int:
    """Iterations per thread of a loop over `n` elements by `step` threads (0: unknown)."""
    return -(-int(n.const) // step) if n.is_const else 0


def _element(lw, s: ir.DmaCopy, i: V, shape) -> None:
    """One element of the copy: element `i` of the destination from its source."""
    coords = _split(lw, i, shape, s.loc)
    dtype = lw.places.base_shape(s.dst.base, s.loc)[2]
    src_dtype = lw.places.base_shape(s.src.base, s.loc)[2]
    if dtype != src_dtype:
        raise lw.refuse(f"a dma.copy from {src_dtype} to {dtype}", s.loc)
    moved = RAW.get(dtype, dtype)  # a copy moves bits: fp8 as bytes
    if s.transpose or s.pad:
        v = _laid_out(lw, s, coords, moved)
    else:
        zfill = _zero_filled(s)
        if zfill:
            v = _load_or_zero(lw, s, coords, moved, zfill)
        else:
            v = lw.places.load(s.src, coords, moved, s.loc)
    lw.places.store(s.dst, coords, moved, v, s.loc)


def _split(lw, i: V, shape, loc) -> tuple[ir.Expr, ...]:
    """Coordinates of element `i` of a row-major tile of `shape` (innermost fastest)."""
    w = lw.w
    coords: list[ir.Expr] = []
    rest = i
    x = lw.exprs(loc)
    for k in range(len(shape) - 1, -1, -1):
        ext = x.value(shape[k], "ext")
        c = w.reg("s32", f"c{k}")
        if k == 0:
            w.op("mov.s32", c, rest)
        else:  # the element index and the extents are never negative
            q = w.reg("s32", "q")
            bits = ext.const.bit_length() - 1 if ext.is_const and ext.const > 0 else -1
            if bits >= 0 and ext.const == 1 << bits:
                w.op("and.b32", c, rest, ext.const - 1)
                w.op("shr.u32", q, rest, bits)
            else:
                w.op("rem.u32", c, rest, ext)
                w.op("div.u32", q, rest, ext)
            rest = q
        name = w.fresh(f"_coord{k}")
        lw.bind(name, c, nonneg=True)
        coords.append(ir.Sym(name, "s32"))
    return tuple(reversed(coords))


def _laid_out(lw, s: ir.DmaCopy, coords, dtype: str) -> V:
    """Destination element `coords` of `dma.transp` (source dimension perm[k] is
    destination dimension k) or `dma.pad` (the source at offset `low`, else the value)."""
    if s.transpose:
        src = [None] * len(coords)
        for k, m in enumerate(s.transpose):
            src[m] = coords[k]
        return lw.places.load(s.src, tuple(src), dtype, s.loc)
    low, _, value = s.pad
    shifted = tuple(B.binop("-", c, ir.Const(a, "s32"), "s32") for c, a in zip(coords, low))
    inside = [(k, e) for k, e in enumerate(s.src.shape)]
    return _load_or_zero(lw, s, shifted, dtype, inside, low_bound=True, fill=value.value)


def _load_or_zero(lw, s: ir.DmaCopy, coords, dtype: str, zfill, low_bound: bool = False,
                  fill=0) -> V:
    """The source element where the coordinates are inside the source tile, else `fill`
    (0: the zero fill; dma.pad's value); `low_bound`: coordinates may also be negative."""


    w = lw.w
    reg = elem_types(lw, dtype, s.loc)[1]
    out = w.reg(reg, "zv", init=V.imm(fill, reg))
    skip, outside = w.label("zfill"), w.reg("pred", "outside")
    x = lw.exprs(s.loc)
    with lw.skippable():
        for k, extent in zfill:
            c = x.value(coords[k], "zc")
            w.op("setp.ge.s32", outside, c, x.value(extent, "zext"))
            w.bra(skip, outside)
            if low_bound:
                w.op("setp.lt.s32", outside, c, 0)
                w.bra(skip, outside)
        v = lw.places.load(s.src, coords, dtype, s.loc)
        w.op(f"mov.{'f32' if reg == 'f32' else 'b' + reg[1:]}", out, v)
    w.put_label(skip)
    return out
