"""Swizzles for the shared tiles whose layout no statement observes.

A buffer that only `mma.store` writes (or nothing does) and only `tma.copy`,
MMAs and `mma.load` read has no layout the program can see: every access
goes through an instruction that follows whatever layout the tile has. Such
a tile gets a swizzle here, when its offset allows one (a swizzle pattern
repeats every 8 rows of 128 bytes and starts at a 1024-byte boundary):

- an MMA operand: the widest swizzle that divides its rows (wgmma and
  tcgen05 read shared tiles only through a swizzled descriptor here);
- an epilogue tile: the 128-byte one (a warp's `mma.store` then hits 32
  distinct banks instead of 8-way conflicts).

Only 16-bit tiles with rows in multiples of 8: `mma.store` packs two 16-bit
columns per store, and wider elements straddle the 16-byte chunks a swizzle
moves. The pass runs after the shared-memory plan and does not move any
offset; the IR marks the choice `layout-free` (Buffer.free_swizzle).
"""
from __future__ import annotations

from .. import ir

SWIZZLE_BASE_ALIGN = 1024


def layout_free(k: ir.Kernel) -> tuple[set[str], set[str]]:
    """(buffers whose layout no statement observes, those of them an MMA reads).

    A TMA load keeps the swizzle the program wrote; element accesses see row-major."""
    bad, operands = set(), set()
    for s in ir.walk(k.body):
        if isinstance(s, ir.MmaStore) and s.transposed:
            bad.add(s.dst.base)  # stored element by element (no 16-byte pieces to swizzle)
        elif isinstance(s, (ir.MmaStore, ir.TmaStore, ir.MmaLoad)):
            pass
        elif isinstance(s, (ir.TmaLoad, ir.DmaCopy)):
            bad.add(s.dst.base)
            bad.add(s.src.base)
        elif isinstance(s, ir.Mma):
            operands.add(s.b.base)
            if isinstance(s.a, ir.View):
                operands.add(s.a.base)
        elif isinstance(s, (ir.BufStore, ir.Apply, ir.Let, ir.Assign, ir.If, ir.While)):
            for t in ir.walk([s]):
                if isinstance(t, ir.BufStore):
                    bad.add(t.view.base)
            bad |= _buf_reads(s)
    free = {b.name for b in k.buffers} - bad
    return free, operands & free


def _buf_reads(s) -> set[str]:
    out: set[str] = set()
    for attr in ("value", "cond"):
        e = getattr(s, attr, None)
        if isinstance(e, ir.Expr):
            out |= {x.view.base for x in ir.expr_walk(e) if isinstance(x, ir.BufElem)}
    return out


def choose(b: ir.Buffer, free: set[str], operands: set[str]):
    """The swizzle of a layout-free tile, or None (row-major)."""
    if b.storage != "shared" or len(b.shape) != 2 or b.swizzle is not None or b.name not in free:
        return None
    if b.offset is None or b.offset % SWIZZLE_BASE_ALIGN or b.shape[0] % 8 \
            or ir.dtype_bytes(b.dtype) != 2:
        return None
    row_bytes = b.shape[1] * ir.dtype_bytes(b.dtype)
    widths = (128, 64, 32) if b.name in operands else (128,)
    return next((w for w in widths if row_bytes % w == 0), None)


def run(kernel: ir.Kernel, target=None) -> None:
    """The same on every target: both MMA units read swizzled descriptors."""
    free, operands = layout_free(kernel)
    for b in kernel.buffers:
        swz = choose(b, free, operands)
        if swz is not None:
            b.swizzle, b.free_swizzle = swz, True
