"""Per-thread loads and stores of the sub-byte types (one byte per element, the code in its
low bits: choreo_py/ir/subbyte.py).

- The integers (u6..u1, s6..s2, bin1) widen to u32/s32 registers: a load keeps the code's
  bits (`and`, or a shift pair's sign extension for the signed ones), a store keeps the value's
  low bits (cute's integer_subbyte: wrap-around) or, for bin1, stores value != 0.
- fp6 (e2m3, e3m2) and fp4 (e2m1) widen to f32 through the hardware's packed-pair
  conversions: `cvt.rn.f16x2.e2m3x2` (then f16 -> f32, exact) on a load,
  `cvt.rn.satfinite.e2m3x2.f32` on a store, the value in the pair's low element. They
  exist on sm_100a only (target.fp6_fp4_cvt); elsewhere a conversion is refused by name
  (a copy of the bytes needs none: simt._store moves them raw).
- An arithmetic result of an fp6/fp4 type is rounded to that type (a store and a load
  in registers), as the interpreter and the reference's element types compute.
"""
from __future__ import annotations

from choreo_py.diagnostics import ChoreoError
from choreo_py.ir import subbyte

from .writer import V

#: cvt's name of each fp6/fp4 format, and the register type of a pair of codes
_CVT = {"f6_e2m3": ("e2m3x2", "b16"), "f6_e3m2": ("e3m2x2", "b16"), "f4_e2m1": ("e2m1x2", "b8")}
#: the register type a sub-byte integer widens to
INT_REGS = {t: ("s32" if signed else "u32") for t, (_, signed) in subbyte.INT_FORMATS.items()}
ELEMS = {**{t: ("u8", r) for t, r in INT_REGS.items()}, **{t: ("u8", "f32") for t in _CVT}}


def check_cvt(lw, dtype: str, loc) -> None:
    """Refuses an fp6/fp4 conversion on a target without the hardware's."""
    if dtype in _CVT and not lw.target.record.fp6_fp4_cvt:
        raise ChoreoError(f"converting {dtype} to or from f32 needs the fp6/fp4 conversions "
                          f"of sm_100a (cvt ... .{_CVT[dtype][0]}); {lw.target.arch} has none "
                          f"(a copy of {dtype} data needs no conversion)", loc)


def load(lw, space: str, addr: V, dtype: str, loc, at=None) -> V:
    w = lw.w
    if dtype in _CVT:
        check_cvt(lw, dtype, loc)
        name, pair_t = _CVT[dtype]
        byte = w.reg("b16", "q6")
        lw.element_load(f"ld.{space}.u8", byte, f"ptx.addr({addr.text})", at)
        if pair_t == "b8":
            narrow = w.reg("b8", "q4")
            w.op("cvt.u8.u16", narrow, byte)
            byte = narrow
        pair = w.reg("b32", "h2")
        w.op(f"cvt.rn.f16x2.{name}", pair, byte)
        return _low_half_f32(w, pair)
    bits, signed = subbyte.INT_FORMATS[dtype]
    out = w.reg(INT_REGS[dtype], "v")
    lw.element_load(f"ld.{space}.u8", out, f"ptx.addr({addr.text})", at)
    if signed:  # sign extension of the code's top bit
        w.op("shl.b32", out, out, 32 - bits)
        w.op("shr.s32", out, out, 32 - bits)
    else:
        w.op("and.b32", out, out, (1 << bits) - 1)
    return out


def _low_half_f32(w, pair: V) -> V:
    low = w.reg("b16", "h")
    w.op("cvt.u16.u32", low, pair)
    out = w.reg("f32", "v")
    w.op("cvt.f32.f16", out, low)
    return out


def store(lw, space: str, addr: V, dtype: str, value: V, loc) -> None:
    w = lw.w
    if dtype in _CVT:
        w.op(f"st.{space}.u8", f"ptx.addr({addr.text})", _codes(lw, dtype, value, loc), at=loc)
        return
    bits, _ = subbyte.INT_FORMATS[dtype]
    byte = w.reg("b32", "q")
    if dtype == "bin1":  # a bool: any nonzero value is 1
        nz = w.reg("pred", "nz")
        w.op(f"setp.ne.{value.ty}", nz, value, 0)
        w.op("selp.b32", byte, 1, 0, nz)
    else:
        w.op("and.b32", byte, value, (1 << bits) - 1)
    w.op(f"st.{space}.u8", f"ptx.addr({addr.text})", byte, at=loc)


def _codes(lw, dtype: str, value: V, loc) -> V:
    """A pair of codes whose low one is `value` converted to `dtype` (the high one is 0)."""
    check_cvt(lw, dtype, loc)
    name, pair_t = _CVT[dtype]
    pair = lw.w.reg(pair_t, "q6")
    lw.w.op(f"cvt.rn.satfinite.{name}.f32", pair, V.imm(0.0, "f32"), value)
    return pair


def round_float(lw, dtype: str, value: V, loc) -> V:
    """`value` (f32) rounded to the fp6/fp4 type `dtype`, back in f32."""
    name, pair_t = _CVT[dtype]
    codes = _codes(lw, dtype, value, loc)
    pair = lw.w.reg("b32", "h2")
    lw.w.op(f"cvt.rn.f16x2.{name}", pair, codes)
    return _low_half_f32(lw.w, pair)


def is_float(dtype: str) -> bool:
    return dtype in _CVT
