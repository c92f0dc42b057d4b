"""Per-thread code: element addresses, loads and stores of global, shared and local data.

A kernel without MMAs, events or TMA (element-wise code, `dma.copy`,
`parallel ... : thread`) is lowered thread by thread (simt.py); this file
holds what it reads and writes:

- global tensors are kernel parameters (a `.u64` pointer each), row-major
  with the shapes the function declares (symbolic dimensions are `dim_*`
  parameters);
- shared buffers live at their offsets of the block's shared-memory plan;
- `local` buffers are private to a thread: each thread owns a slice of a
  per-thread area placed after the shared plan (indexed by the thread id), so
  a buffer indexed at run time needs no local-memory stack frame.

Element types narrower than 32 bits are widened in registers and narrowed
by the store (PTX `ld.s8` sign-extends, `st.u8` keeps the low byte: C's
wrap-around). f16 and bf16 are computed in f32 and rounded once per store.
"""
from __future__ import annotations

from choreo_py import ir
from choreo_py.ir import build as B

from . import subbyte_elems
from .conversions import coerce
from .exprs import ExprLowering, REG_TYPES
from .writer import V

#: Storage type of an element -> (ld/st type, register type of the value).
ELEM = {
    "s8": ("s8", "s32"), "u8": ("u8", "u32"), "s16": ("s16", "s32"), "u16": ("u16", "u32"),
    "s32": ("s32", "s32"), "u32": ("u32", "u32"), "s64": ("s64", "s64"), "u64": ("u64", "u64"),
    "f32": ("f32", "f32"), "f16": ("b16", "f32"), "bf16": ("b16", "f32"), "bool": ("u8", "u32"),
    "f8_e4m3": ("u8", "f32"), "f8_e5m2": ("u8", "f32"),
    **subbyte_elems.ELEMS,  # the sub-byte types: one byte each (subbyte_elems.py)
}
#: fp8 formats: their name in cvt's packed-pair conversions (sm_89 and later).
_FP8 = {"f8_e4m3": "e4m3", "f8_e5m2": "e5m2"}
#: Types moved as raw bits when copied element by element (no arithmetic on them here).
RAW = {"f8_e4m3": "u8", "f8_e5m2": "u8", **{t: "u8" for t in subbyte_elems.ELEMS}}
#: Scalar types of values in registers (narrow types widen: see the module docstring);
#: only thread kernels use these (`widened_types` of simt.ThreadLowering).
WIDENED = {t: r for t, (_, r) in ELEM.items() if t not in REG_TYPES}
_CVT_IN = {"f16": "cvt.f32.f16", "bf16": "cvt.f32.bf16"}
_CVT_OUT = {"f16": "cvt.rn.f16.f32", "bf16": "cvt.rn.bf16.f32"}


def elem_types(lw, dtype: str, loc) -> tuple[str, str]:
    t = ELEM.get(dtype)
    if t is None:
        raise lw.refuse(f"per-thread code on {dtype} elements", loc)
    return t


def _linear(dims: list[ir.Expr], shape: list[ir.Expr]) -> ir.Expr:
    """Row-major element index of `dims` in a tensor of `shape` (constants folded)."""
    out: ir.Expr = ir.Const(0, "s32")
    for d, n in zip(dims, shape):
        out = B.binop("+", B.binop("*", out, n, "s32"), d, "s32")
    return out


class Places:
    """Where each global tensor, shared buffer and local buffer of a kernel lives."""

    def __init__(self, lw, local_base: int, threads: int) -> None:
        self.lw = lw
        self.local_base = local_base  # byte offset of the per-thread area in shared memory
        self.threads = threads
        self.local_offsets: dict[str, int] = {}  # buffer -> byte offset inside one slice
        self.local_bytes = 0
        for b in lw.k.buffers:
            if b.storage == "local":
                self.local_offsets[b.name] = self.local_bytes
                self.local_bytes += (b.nbytes + 15) // 16 * 16
        self.pointers: dict[str, V] = {}
        # run-time-sized shared buffers (ir.RunBuffer): after the per-thread area, 16-aligned
        run_base = local_base + (self.local_bytes * threads + 15) // 16 * 16
        offsets, self.run_bytes = ir.run_offsets(lw.k.run_buffers)
        self.run_base = run_base
        self.run_offsets: dict[str, ir.Expr] = {
            b.name: B.binop("+", off, ir.Const(run_base, "s32"), "s32")
            for b, off in zip(lw.k.run_buffers, offsets)}

    @classmethod
    def of_mma_kernel(cls, lw) -> "Places":
        """The places of an MMA kernel's element reads (global_reads.py): no local buffers,
        pointers filled in as tensors are first read."""
        got = lw.element_places
        if got is None:
            got = lw.element_places = cls(lw, 0, 0)
        return got

    def base_shape(self, name: str, loc) -> tuple[str, list[ir.Expr], str]:
        """(storage, shape, dtype) of a tensor or buffer (an alias: its base's, its shape)."""
        a = self.lw.k.alias(name)
        if a is not None:
            storage, _, dtype = self.base_shape(a.base, loc)
            return storage, [ir.Const(n, "s32") for n in a.shape], dtype
        p = self.lw.k.param(name)
        if p is not None:
            return "global", list(p.shape), p.dtype
        b = self.lw.k.buffer(name) or self.lw.k.run_buffer(name)
        if b is None:
            raise self.lw.refuse(f"the data '{name}' here", loc)
        return b.storage, list(B.dims(b)), b.dtype

    def address(self, view: ir.View, index: tuple[ir.Expr, ...], loc,
                expr=None) -> tuple[str, V]:
        """(state space, address register) of `view.at(index)`; `expr` lowers the index
        (an apply's, whose indices are registers of its own), else scalar code does."""
        storage, shape, dtype = self.base_shape(view.base, loc)
        it = iter(index)
        dims = [B.binop("+", off, next(it), "s32") if keep else off
                for off, keep in zip(view.offsets, view.keep)]
        lin = _linear(dims, shape)
        size = ir.dtype_bytes(dtype)
        x = expr or ExprLowering(self.lw, loc)
        if storage == "global":
            li = x.value(lin, "idx")
            wide = self.lw.w.reg("u64", "off")
            self.lw.w.op("mul.wide.s32", wide, li, size)
            addr = self.lw.w.reg("u64", "ga")
            self.lw.w.op("add.u64", addr, self.pointers[self.lw.k.root(view.base)], wide)
            return "global", addr
        if storage == "shared" and view.base in self.run_offsets:
            byte = B.binop("+", B.binop("*", lin, ir.Const(size, "s32"), "s32"),
                           self.run_offsets[view.base], "s32")
            off = x.value(byte, "so")
            addr = self.lw.w.reg("u32", "sa")
            self.lw.w.op("add.u32", addr, self.lw.smem_base, off)
            return "shared", addr
        if storage == "shared":
            b = self.lw.k.buffer(self.lw.k.root(view.base))
            start = b.offset or 0
            if view.slot is not None:  # slots lie one buffer's size apart (nbytes: all slots)
                per_slot = b.nbytes // (b.count or 1) // size
                lin = ir.Bin("+", lin, ir.Bin("*", view.slot, ir.Const(per_slot, "s32"),
                                              "s32"), "s32")
            byte = B.binop("+", B.binop("*", lin, ir.Const(size, "s32"), "s32"),
                           ir.Const(start, "s32"), "s32")
            off = x.value(byte, "so")
            addr = self.lw.w.reg("u32", "sa")
            self.lw.w.op("add.u32", addr, self.lw.smem_base, off)
            return "shared", addr
        # local: this thread's slice of the per-thread area
        slice_bytes = self.local_bytes
        byte = B.binop("+", B.binop("*", lin, ir.Const(size, "s32"), "s32"),
                       ir.Const(self.local_base + self.local_offsets[self.lw.k.root(view.base)],
                                "s32"), "s32")
        off = x.value(byte, "lo")
        addr = self.lw.w.reg("u32", "la")
        self.lw.w.op("mad.lo.u32", addr, self.lw.tid, slice_bytes, off)
        self.lw.w.op("add.u32", addr, addr, self.lw.smem_base)
        return "shared", addr

    def load(self, view: ir.View, index, dtype: str, loc, space_addr=None, expr=None,
             at=None) -> V:
        """The element, widened to its register type; `at`: where the read stands."""
        mem, reg = elem_types(self.lw, dtype, loc)
        space, addr = space_addr or self.address(view, index, loc, expr)
        w = self.lw.w
        if dtype in subbyte_elems.ELEMS:
            return subbyte_elems.load(self.lw, space, addr, dtype, loc, at)
        if dtype in _FP8:  # byte -> f16 (the low half of a converted pair) -> f32
            byte = w.reg("b16", "q8")
            self.lw.element_load(f"ld.{space}.u8", byte, f"ptx.addr({addr.text})", at)
            pair = w.reg("b32", "h2")
            w.op(f"cvt.rn.f16x2.{_FP8[dtype]}x2", pair, byte)
            low = w.reg("b16", "h")
            w.op("cvt.u16.u32", low, pair)
            out = w.reg("f32", "v")
            w.op("cvt.f32.f16", out, low)
            return out
        if dtype in _CVT_IN:
            raw = w.reg("b16", "h")
            self.lw.element_load(f"ld.{space}.b16", raw, f"ptx.addr({addr.text})", at)
            out = w.reg("f32", "v")
            w.op(_CVT_IN[dtype], out, raw)
            return out
        out = w.reg(reg, "v")
        self.lw.element_load(f"ld.{space}.{mem}", out, f"ptx.addr({addr.text})", at)
        return out

    def store(self, view: ir.View, index, dtype: str, value: V, loc, space_addr=None) -> None:
        """`loc`: the store statement's (writer.op's `at`: a fault of the store is there)."""
        mem, reg = elem_types(self.lw, dtype, loc)
        space, addr = space_addr or self.address(view, index, loc)
        w = self.lw.w
        # the value as the element's register type (C's conversion on assignment)
        got = coerce(w, value, reg)
        if got is None:
            raise self.lw.refuse(f"storing a {value.ty} value into {dtype} elements", loc)
        value = got
        if value.is_const:
            value = self.lw.w.reg(reg, "c", init=V.imm(value.const, reg))
        if dtype in subbyte_elems.ELEMS:
            subbyte_elems.store(self.lw, space, addr, dtype, value, loc)
            return
        if dtype in _FP8:  # f32 -> the low byte of a saturated pair (the high one is 0)
            pair = w.reg("b16", "q8")
            w.op(f"cvt.rn.satfinite.{_FP8[dtype]}x2.f32", pair, V.imm(0.0, "f32"), value)
            w.op(f"st.{space}.u8", f"ptx.addr({addr.text})", pair, at=loc)
            return
        if dtype in _CVT_OUT:
            raw = w.reg("b16", "h")
            w.op(_CVT_OUT[dtype], raw, value)
            w.op(f"st.{space}.b16", f"ptx.addr({addr.text})", raw, at=loc)
            return
        w.op(f"st.{space}.{mem}", f"ptx.addr({addr.text})", value, at=loc)


class ThreadExprs(ExprLowering):
    """Scalar expressions whose leaves may be elements of tensors and buffers (loaded here,
    never shared between statements: memory changes between them)."""

    def __init__(self, lw, places: Places, loc=None) -> None:
        super().__init__(lw, loc)
        self.places = places

    def leaf(self, e: ir.Expr):
        if isinstance(e, ir.BufElem):
            return self.places.load(e.view, e.index, e.dtype, self.loc, at=e.loc or self.loc)
        if isinstance(e, ir.Elem):
            raise self.lw.refuse("a fragment element in per-thread code", self.loc)
        return super().leaf(e)

    def binary(self, e: ir.Bin, hint: str, dst):
        v = super().binary(e, hint, None if subbyte_elems.is_float(e.dtype) else dst)
        if not subbyte_elems.is_float(e.dtype) or e.op not in ("+", "-", "*", "/"):
            return v
        # fp6/fp4 arithmetic gives an fp6/fp4 value (the interpreter's and the reference's
        # semantics): the f32 result, rounded
        r = subbyte_elems.round_float(self.lw, e.dtype, v, self.loc)
        if dst is None:
            return r
        self.lw.w.op(f"mov.{dst.ty}", dst, r)
        return dst

    def call(self, e: ir.Call, hint: str, dst):
        """`__to<f16>(x)` / `__to<bf16>(x)`: f16 and bf16 values live in f32 registers and
        their arithmetic is computed in f32, so the conversion is a rounding to the narrow
        type and back (cvt.rn there, the exact widening back), whatever x's type (a bf16
        sum is an f32 value until converted). Without it the value kept the f32 bits the
        conversion drops, and a bf16 scalar held 2054.7 where the type holds 2048."""
        if e.fn != "to" or e.dtype not in _CVT_OUT:
            return super().call(e, hint, dst)
        w = self.lw.w
        wide = self.convert(e.args[0], "f32", hint, None)
        if wide.is_const:
            wide = w.reg("f32", "c", init=V.imm(wide.const, "f32"))
        raw = w.reg("b16", "h")
        w.op(_CVT_OUT[e.dtype], raw, wide)
        out = self.out(dst, "f32", hint)
        w.op(_CVT_IN[e.dtype], out, raw)
        return out

    def key(self, e: ir.Expr):
        if any(isinstance(x, ir.BufElem) for x in ir.expr_walk(e)):
            return ("mem", id(e))  # a value read from memory is computed where it is used
        return super().key(e)

    def reuse(self, e, key):
        return None if key[0] == "mem" else super().reuse(e, key)

    def keep(self, e, key, v) -> None:
        if key[0] != "mem":
            super().keep(e, key, v)


def barrier(lw) -> None:
    """The block's barrier (`bar.sync 0`): every thread of the block meets here."""
    lw.w.op("bar.sync", 0)
