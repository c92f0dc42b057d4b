"""Shared memory, tensor maps and TMA copies.

Shared memory is one dynamic buffer; the plan (choreo_py/passes/smem_plan)
gives every buffer and event a byte offset. The base is rounded up to
1024 B at run time (pyptx declares extern shared memory `.align 128`), so
the launch asks for 1 KiB more than the plan.

Buffer layout. A 2-D buffer [rows, cols] with a swizzle of S bytes is kept
as column stripes of S bytes ([cols*e/S][rows][S/e]), each stripe in the
S-byte swizzle (16-byte chunk c of row r at chunk c ^ (r % 8)); that is the
layout TMA writes with a box S bytes wide and wgmma reads through a
descriptor. Without a swizzle a buffer is row-major.

A buffer that only `mma.store` writes (or nothing does) and only `tma.copy`,
MMAs and `mma.load` read has no layout the program can see; the pass
choreo_py/passes/free_tile_swizzle gives it a swizzle in the IR, and this
module follows the IR.

Tensor maps. Each (tensor, box, swizzle) used by a copy becomes one
by-value `CUtensorMap` kernel parameter (`.param .align 64 .b8 [128]`,
the `__grid_constant__` convention); the generated module lists them in
`PARAMS` and the runtime encodes them with cuTensorMapEncodeTiled. Boxes
are given innermost dimension first; the S-byte stripes of a swizzled tile
are separate copies.
"""
from __future__ import annotations

from .names import short

from dataclasses import dataclass
from typing import Optional

from choreo_py import ir
from choreo_py.ir import subbyte
from choreo_py.targets import SMEM_ALIGN
from choreo_py.diagnostics import ChoreoError

from .context import Lowering
from .exprs import ExprLowering
from . import tma_align
from .writer import V

#: (the 1-byte types move as bytes: fp8 and the sub-byte types, one code per byte)
_TMA_DTYPES = ("bf16", "f16", "f32", "u8", "s8", "s32", "u32", "f8_e4m3", "f8_e5m2") + subbyte.TYPES


#: tma_align.check could not prove the box's start 16-byte aligned (PTX ISA 5.5.3.1)
_UNPROVEN = ("a TMA {what} of '{name}' at an innermost coordinate not known to be a multiple "
             "of 16 bytes (the PTX ISA asks the box's address to be 16-byte aligned; a "
             "multiple of a constant of the right size proves it)")


@dataclass
class BufLayout:
    name: str
    dtype: str
    rows: int
    cols: int
    count: int
    offset: int
    swizzle: Optional[int]
    vector: bool = False  # a rank-1 buffer, a tile of one row: TMA copies only

    @property
    def esize(self) -> int:
        return ir.dtype_bytes(self.dtype)

    @property
    def slot_bytes(self) -> int:
        return self.rows * self.cols * self.esize

    @property
    def stripe_cols(self) -> int:
        return self.swizzle // self.esize if self.swizzle else self.cols

    @property
    def row_bytes(self) -> int:
        return self.stripe_cols * self.esize

    @property
    def stripe_bytes(self) -> int:
        return self.rows * self.row_bytes


@dataclass(frozen=True)
class TensorMap:
    name: str
    tensor: str
    dtype: str
    box: tuple[int, ...]  # innermost dimension first
    swizzle: int  # bytes, 0 = none


class Memory:
    def __init__(self, lw: Lowering) -> None:
        self.lw = lw
        self.layouts: dict[str, BufLayout] = {}
        self.maps: list[TensorMap] = []
        self._read: Optional[set[str]] = None
        self._elems: Optional[set[str]] = None
        for b in lw.k.buffers:  # swizzles: the program's, or passes/free_tile_swizzle's
            if b.storage != "shared" or len(b.shape) not in (1, 2) \
                    or (len(b.shape) == 1 and b.swizzle):
                continue
            # a vector (`shared f32[64] g_s`) is a tile of one row, unswizzled
            rows, cols = (1, b.shape[0]) if len(b.shape) == 1 else b.shape
            self.layouts[b.name] = BufLayout(b.name, b.dtype, rows, cols, b.count or 1,
                                             b.offset, b.swizzle, len(b.shape) == 1)

    # ------------------------------------------------------------ layouts
    def layout(self, name: str, loc, *, vector: bool = False) -> BufLayout:
        """The buffer's layout as a tile; a vector's only where `vector` (a TMA copy's)."""
        lay = self.layouts.get(name)
        if lay is None or (lay.vector and not vector):
            b = self.lw.k.buffer(name)
            what = f"the {b.storage} buffer '{name}' of rank {len(b.shape)}" if b else f"'{name}'"
            raise self.lw.refuse(f"{what} as a tile", loc)
        if lay.swizzle and (lay.cols * lay.esize) % lay.swizzle:
            raise self.lw.refuse(f"'{name}': rows of {lay.cols * lay.esize} B in a "
                                 f"{lay.swizzle} B swizzle", loc)
        return lay

    def view_origin(self, view: ir.View, loc, *, row_align: int = 8,
                    vector: bool = False) -> tuple[BufLayout, V, int, int]:
        """(layout, register, byte offset, first column) of a 2-D box of a shared buffer.

        The register holds the run-time part of the address (base, slot,
        row offset); the constant part is returned separately so that it
        can ride in the instruction's address operand."""
        lay, const, terms, col = self.origin_terms(view, loc, row_align=row_align, vector=vector)
        hint = "tile_addr" if view.slot is None else f"{view.base}_slot_addr"
        reg, extra = self.address(terms, loc, hint)
        return lay, reg, const + extra, col

    def origin_terms(self, view: ir.View, loc, *, row_align: int = 8, runtime_col=False,
                     vector: bool = False):
        """(layout, constant bytes, [(expr, bytes per unit)], first column) of a tile's origin.

        `runtime_col` (an MMA operand's descriptor): a first column known only at run time
        (`chunkat(_, k)` in a loop over k) is a term of its own where the buffer's rows are
        one swizzle stripe and the column is a whole number of 16-byte chunks: the
        descriptor then moves by `column * element bytes`, as it does for a constant
        column; the first column returned is then 0 (the stepping inside the stripe is the
        same from any start)."""
        lw = self.lw
        lay = self.layout(view.base, loc, vector=vector)
        r0, c0 = view.offsets if len(view.offsets) == 2 else (ir.Const(0, "s32"), view.offsets[0])
        if not isinstance(c0, ir.Const):
            chunk = 16 // lay.esize
            if not (runtime_col and lay.swizzle and lay.stripe_cols >= lay.cols
                    and multiple_of(c0, chunk)):
                raise lw.refuse("a shared tile whose first column is not a constant", loc)
            if not multiple_of(r0, row_align):
                raise lw.refuse(f"a swizzled tile whose first row is not a multiple of "
                                f"{row_align}", loc)
            terms = [(view.slot, lay.slot_bytes)] if view.slot is not None else []
            # in 16-byte chunks (a descriptor counts addresses in 16 bytes): exact, checked
            chunks = ir.Bin("/", c0, ir.Const(chunk, "s32"), "s32")
            return lay, lay.offset, terms + [(r0, lay.row_bytes), (chunks, 16)], 0
        col = c0.value
        if lay.swizzle and (col % lay.stripe_cols) * lay.esize % 16:
            raise lw.refuse("a swizzled tile starting inside a 16-byte chunk", loc)
        if lay.swizzle and not multiple_of(r0, row_align):
            raise lw.refuse(f"a swizzled tile whose first row is not a multiple of {row_align}",
                            loc)
        const = lay.offset + (col // lay.stripe_cols) * lay.stripe_bytes \
            + (col % lay.stripe_cols) * lay.esize
        terms = []
        if view.slot is not None:
            terms.append((view.slot, lay.slot_bytes))
        terms.append((r0, lay.row_bytes))
        return lay, const, terms, col

    def address(self, terms, loc, hint: str) -> tuple[V, int]:
        """smem_base + sum(expr * scale): (register, constant bytes)."""
        lw = self.lw
        ex = ExprLowering(lw, loc)
        const, dyn = 0, []
        for e, scale in terms:
            v = ex.value(e)
            if v.is_const:
                const += v.const * scale
            else:
                dyn.append((e, v, scale))
        if not dyn:
            return lw.smem_base, const
        key = ("addr",) + tuple((ex.key(e), scale) for e, _, scale in dyn)
        invariant = all(lw.invariant(e) for e, _, _ in dyn)

        def make() -> V:
            out = lw.w.reg("u32", hint)
            acc = lw.smem_base
            for _, v, scale in dyn:  # an index of any integer type: a u32 word of the address
                lw.w.op("mad.lo.u32", out, ex.as_type(v, "u32"), scale, acc)
                acc = out
            return out
        return (lw.once(key, make) if invariant else make()), const

    # ------------------------------------------------------------ tensor maps
    def tensor_map(self, tensor: str, dtype: str, box: tuple[int, ...], swizzle: int, loc) -> V:
        if dtype not in _TMA_DTYPES:
            raise self.lw.refuse(f"a TMA copy of {dtype} elements", loc)
        for m in self.maps:
            if (m.tensor, m.box, m.swizzle) == (tensor, box, swizzle):
                break
        else:
            n = sum(1 for m in self.maps if m.tensor == tensor)
            m = TensorMap(f"tmap_{short(tensor)}" + (f"_{n + 1}" if n else ""), tensor, dtype, box, swizzle)
            self.maps.append(m)

        def make() -> V:
            sym = self.lw.w.reg("u64", m.name + "_param")
            self.lw.w.op("mov.b64", sym, f'"{m.name}"')
            gen = self.lw.w.reg("u64", m.name)
            self.lw.w.op("cvta.param.u64", gen, sym)
            return gen
        return self.lw.once(("tmap", m.name), make)

    def box(self, s, glob: ir.View, tile: ir.View, lay: BufLayout) -> tuple[tuple[int, ...], int]:
        """TMA box (innermost first) of one stripe, and the number of stripes."""
        lw = self.lw
        p = lw.k.param(glob.base)
        kept = [d for d, keep in enumerate(glob.keep) if keep]
        ext = []
        for e in glob.extents:
            if not isinstance(e, ir.Const):
                raise lw.refuse("a TMA copy whose box is not a compile-time constant", s.loc)
            ext.append(e.value)
        rank = len(p.shape)
        if len(kept) not in (1, 2) or kept[-1] != rank - 1:
            raise lw.refuse("a TMA copy other than a 2-D box whose rows are contiguous in "
                            "global memory, or a run of one row", s.loc)
        rows, cols = (ext[kept[0]], ext[kept[1]]) if len(kept) == 2 else (1, ext[kept[0]])
        want = (rows, cols) if len(kept) == 2 else (cols,)
        if tuple(x.value if isinstance(x, ir.Const) else None for x in tile.shape) != want:
            raise ChoreoError(f"copy of a [{rows}, {cols}] box into a tile of another shape", s.loc)
        width = lay.stripe_cols if lay.swizzle else cols
        if lay.vector and width * lay.esize % 16:
            raise lw.refuse(f"a TMA copy of a vector of {width * lay.esize} B (TMA boxes "
                            "move rows of a multiple of 16 B)", s.loc)
        if cols % width:
            raise lw.refuse(f"a box of {cols} columns in {lay.swizzle} B stripes", s.loc)
        if max(ext) > 256 or width > 256:
            raise lw.refuse("a TMA box wider than 256 elements", s.loc)
        box = tuple(width if d == rank - 1 else ext[d] for d in reversed(range(rank)))
        return box, cols // width

    def coords(self, glob: ir.View, stripe_cols: int, stripe: int, loc) -> str:
        ex = ExprLowering(self.lw, loc)
        parts = []
        rank = len(glob.offsets)
        for d in reversed(range(rank)):
            e = glob.offsets[d]
            if d == rank - 1 and stripe:
                e = ir.Bin("+", e, ir.Const(stripe * stripe_cols, "s32"), "s32")
            parts.append(ex.value(e, "coord").ptx_name())
        return '", {' + ", ".join(parts) + '}"'

    # ------------------------------------------------------------ copies
    def tma_load(self, s: ir.TmaLoad, mbar: tuple[V, int], pred: Optional[V]) -> None:
        lw = self.lw
        lay, dst, off, _ = self.view_origin(s.dst, s.loc, vector=True)
        if (s.swizzle or None) != lay.swizzle:
            raise ChoreoError(f"tma.load with swizzle {s.swizzle} into '{lay.name}', whose "
                              f"layout has swizzle {lay.swizzle}", s.loc)
        p = lw.k.param(s.src.base)
        box, stripes = self.box(s, s.src, s.dst, lay)
        if not tma_align.check(lw, s.src.offsets[-1], ir.dtype_bytes(p.dtype), s.loc):
            raise lw.refuse(_UNPROVEN.format(what="load", name=p.name), s.loc)
        tmap = self.tensor_map(p.name, p.dtype, box, lay.swizzle or 0, s.loc)
        policy = self.policy(s.evict, s.loc)
        rank = len(box)
        hint = ".L2::cache_hint" if policy else ""
        opcode = (f"cp.async.bulk.tensor.{rank}d.shared::cluster.global"
                  f".mbarrier::complete_tx::bytes{hint}")
        for st in range(stripes):
            ops = [addr(dst, off + st * lay.stripe_bytes),
                   f"ptx.addr({tmap.text}, {self.coords(s.src, box[0], st, s.loc)})",
                   addr(*mbar)]
            if policy:
                ops.append(policy)
            lw.w.op(opcode, *ops, pred=pred)

    def tma_store(self, s: ir.TmaStore, pred: Optional[V], last: bool,
                  aligned_at_run_time: bool = False) -> None:
        """(`aligned_at_run_time`: the caller branches to the threads' stores where the
        box's innermost coordinate is off the 16-byte grid: roles._store_rows.)"""
        lw = self.lw
        lay, src, off, _ = self.view_origin(s.src, s.loc, vector=True)
        p = lw.k.param(s.dst.base)
        box, stripes = self.box(s, s.dst, s.src, lay)
        if not tma_align.check(lw, s.dst.offsets[-1], ir.dtype_bytes(p.dtype), s.loc) \
                and not aligned_at_run_time:
            raise lw.refuse(_UNPROVEN.format(what="store", name=p.name), s.loc)
        tmap = self.tensor_map(p.name, p.dtype, box, lay.swizzle or 0, s.loc)
        rank = len(box)
        for st in range(stripes):
            lw.w.op(f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group",
                    f"ptx.addr({tmap.text}, {self.coords(s.dst, box[0], st, s.loc)})",
                    addr(src, off + st * lay.stripe_bytes), pred=pred)
        lw.w.op("cp.async.bulk.commit_group", pred=pred)
        # The shared tile may be reused once the copy has read it. Its writes must
        # also be complete before anything of the kernel reads that tensor; when
        # nothing does (or nothing follows), reading is all that must finish.
        read_only = last or p.name not in self.tensors_read()
        lw.w.op("cp.async.bulk.wait_group.read" if read_only else "cp.async.bulk.wait_group", 0,
                pred=pred)
        if not read_only and p.name in self.elements_read():
            # its writes (async proxy) before the role's element loads (generic proxy), which
            # the role's barrier after the store (roles.tma_store) orders after this
            lw.w.call("ptx.fence.proxy_async", *([f"pred={pred.text}"] if pred else []))

    def tensors_read(self) -> set[str]:
        """Global tensors the kernel reads (copies from them, element reads)."""
        if self._read is None:
            self._read = {s.src.base for s in ir.walk(self.lw.k.body)
                          if isinstance(s, (ir.TmaLoad, ir.DmaCopy))}
            self._read |= self.elements_read()
            self._read &= {p.name for p in self.lw.k.params}
        return self._read

    def elements_read(self) -> set[str]:
        """Global tensors and buffers the kernel reads element by element (`U.at(i, j)`)."""
        if self._elems is None:
            self._elems = set()
            for s in ir.walk(self.lw.k.body):
                for attr in ("value", "cond", "init", "start", "stop", "step", "rows"):
                    e = getattr(s, attr, None)
                    if isinstance(e, ir.Expr):
                        self._elems |= _elem_bases(e)
                for e in getattr(s, "index", ()) or ():
                    self._elems |= _elem_bases(e)
            self._elems = {self.lw.k.root(n) for n in self._elems}
        return self._elems

    def policy(self, evict: Optional[str], loc) -> Optional[V]:
        if evict is None:
            return None
        if evict not in ("evict_first", "evict_last", "evict_normal", "evict_unchanged"):
            raise self.lw.refuse(f"the cache hint .{evict}", loc)

        def make() -> V:
            r = self.lw.w.reg("b64", evict)
            self.lw.w.op(f"createpolicy.fractional.L2::{evict}.b64", r, V.imm(1.0, "f32"))
            return r
        return self.lw.once(("policy", evict), make)


def addr(reg: V, off: int = 0) -> str:
    return f"ptx.addr({reg.text}, {off})" if off else f"ptx.addr({reg.text})"


def multiple_of(e: ir.Expr, n: int) -> bool:
    if isinstance(e, ir.Const):
        return e.value % n == 0
    if isinstance(e, ir.Bin) and e.op == "*":
        return multiple_of(e.lhs, n) or multiple_of(e.rhs, n)
    if isinstance(e, ir.Bin) and e.op in ("+", "-"):
        return multiple_of(e.lhs, n) and multiple_of(e.rhs, n)
    if isinstance(e, ir.Bin) and e.op == "<<" and isinstance(e.rhs, ir.Const):
        return (1 << e.rhs.value) % n == 0 or multiple_of(e.lhs, n)
    return False


def _elem_bases(e: ir.Expr) -> set[str]:
    """Bases of the buffer/tensor elements an expression reads."""
    from .context import children

    out = {e.view.base} if isinstance(e, ir.BufElem) else set()
    for c in children(e):
        out |= _elem_bases(c)
    return out
