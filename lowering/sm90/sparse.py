"""The 2:4 sparse MMA on sm_90a: wgmma.mma_async.sp (ir.SparseMma).

One instruction covers K = 32 of the dense A for 16-bit types (m64nNk32) and K = 64
for fp8 (m64nNk64): 32 bytes of each packed A row, 64 bytes of each B row. A and B
come through descriptors (K-major, as the dense form's); an instruction's K must lie
in one swizzle atom of each operand's rows.

The metadata fragment (u8 [64, K/8]: 4 bits per group of four along K, row-major as
the runtime's encoder writes it) lives in one 32-bit register per thread per
instruction, placed as CUTLASS's sparse GMMA traits lay it out (ELayout_64x32 /
ELayout_64x64; lane = 4 g + c, warp w of the warpgroup):
- 16-bit types: lane's register holds K columns 16 (c & 1) .. + 15 (bytes 2 (c & 1),
  + 1 of the step's 4) of row 16 w + g in bits 0-15 and of row 16 w + g + 8 in bits
  16-31. Lanes c and c + 2 hold the same value, so either pair of each quad may be the
  one the sparsity selector names; the instruction names pair 0.
- fp8: lane's register holds K columns 32 (c >> 1) .. + 31 (bytes 4 (c >> 1) .. + 3
  of the step's 8) of row 16 w + g + 8 (c & 1); selector 0 (every thread contributes).
"""
from __future__ import annotations

from choreo_py import ir

from ..core.context import Lowering
from ..core.memory import addr, multiple_of

#: input kind -> dense K of one wgmma.mma_async.sp
K_STEP = {"bf16": 32, "f16": 32, "e4m3": 64, "e5m2": 64}


def meta_registers(frag: ir.Frag, kind: str) -> int:
    """Registers per thread of a [64, K/8] metadata fragment: one per instruction."""
    return max(1, frag.shape[1] // meta_bytes(kind))


def meta_bytes(kind: str) -> int:
    """Bytes of each metadata row one instruction reads."""
    return K_STEP[kind] // 8


def load_meta(lw: Lowering, fi, s: ir.MmaLoad, kind: str) -> None:
    """mma.load of the metadata tile: each thread's bytes, one register per instruction."""
    view = s.src
    lay = lw.memory.layout(view.base, s.loc)
    rows, cols = (e.value if isinstance(e, ir.Const) else None for e in view.shape)
    piece = 2 if meta_bytes(kind) == 4 else 4  # bytes one load reads (one row's run)
    if lay.swizzle or lay.esize != 1 or rows != 64 or cols is None:
        raise lw.refuse("a sparse MMA's metadata from a swizzled or other than u8 [64, K/8] "
                        "tile", s.loc)
    r0, c0 = view.offsets
    if lay.row_bytes % piece or not multiple_of(c0, piece) or lay.offset % piece:
        raise lw.refuse(f"a sparse MMA's metadata whose rows are not {piece}-byte aligned",
                        s.loc)
    terms = ([(view.slot, lay.slot_bytes)] if view.slot is not None else []) + \
        [(r0, lay.row_bytes), (c0, 1)]
    origin, const = lw.memory.address(terms, s.loc, f"{s.frag}_tile")
    const += lay.offset
    w = lw.w
    tid = lw.role.local_tid
    rb, _ = lw.target.thread_bases(lw)  # 16 w + g
    row, off = w.reg("u32", f"{s.frag}_row"), w.reg("u32", f"{s.frag}_byte")
    if piece == 2:
        w.op("mov.u32", row, rb)
        w.op("and.b32", off, tid, 1)
        w.op("shl.b32", off, off, 1)
    else:
        w.op("and.b32", row, tid, 1)
        w.op("mad.lo.u32", row, row, 8, rb)
        w.op("shr.u32", off, tid, 1)
        w.op("and.b32", off, off, 1)
        w.op("shl.b32", off, off, 2)
    base = w.reg("u32", f"{s.frag}_ld")
    w.op("mad.lo.u32", base, row, lay.row_bytes, origin)
    w.op("add.u32", base, base, off)
    steps = cols // meta_bytes(kind)
    for k in range(steps):
        at = const + k * meta_bytes(kind)
        if piece == 4:
            w.op("ld.shared.b32", fi.reg(k), addr(base, at))
            continue
        lo, hi = w.reg("b16", f"{s.frag}_lo"), w.reg("b16", f"{s.frag}_hi")
        w.op("ld.shared.b16", lo, addr(base, at))
        w.op("ld.shared.b16", hi, addr(base, at + 8 * lay.row_bytes))
        w.op("mov.b32", fi.reg(k), [lo, hi])  # lo in bits 0-15
    lw.smem_read = True  # an event this instance triggers next may free the tile


def meta_kind(lw: Lowering, name: str, loc, kind_of: dict) -> str:
    """The input kind (kind_of: element type -> wgmma kind) of the sparse MMAs reading
    metadata fragment `name` (one kind)."""
    kinds = {kind_of.get(lw.memory.layout(s.a.base, loc).dtype) for s in ir.walk(lw.k.body)
             if isinstance(s, ir.SparseMma) and s.meta == name}
    if len(kinds) != 1 or None in kinds:
        raise lw.refuse(f"the metadata fragment '{name}' read by sparse MMAs of types "
                        f"{sorted(map(str, kinds))}", loc)
    return kinds.pop()


def check_in_atom(lw: Lowering, lay, col0: int, k_cols: int, what: str, loc) -> None:
    """An instruction's K (k_cols columns from col0) in one swizzle atom of the rows."""
    if lay.swizzle and (col0 % lay.stripe_cols) + k_cols > lay.stripe_cols:
        raise lw.refuse(f"a sparse MMA whose {what} reads {k_cols * lay.esize} bytes of each row "
                        f"across a {lay.swizzle}-byte swizzle atom", loc)
