"""Conversions between register types, as C converts values (lowering/core/exprs.py uses them).

PTX wants every operand of an instruction in the instruction's type: `st.s32` of an
f32 register, `add.s64` of an s32 and an s64, `mov.u32` of a predicate are rejected by
ptxas. The tile IR keeps C's types; where a value meets a place of another type (a
store, an initialiser, an assignment, an operator's operand) it goes through `coerce`.
A narrow scalar (`s8`, `u4`, `bin1`, `f16`) lives in a wider register and is brought
back to its type's values after each assignment (`assign_scalar`), as the interpreter
does.
"""
from __future__ import annotations

from typing import Optional

from choreo_py import ir
from choreo_py.ir import subbyte as _subbyte

from .writer import V

# `ExprLowering` (exprs.py, which calls these) is named in annotations only, as text: an
# import, even one for type checkers, would make the two modules a circle.


def _bits(t: str) -> int:
    return 64 if t.endswith("64") else 32


_INT_REGS = ("s32", "u32", "b32", "s64", "u64", "b64")


def const_as(value, t: str):
    """A constant converted to register type `t` as C converts it (to an integer: toward
    zero, wrapped to the width; to a condition: non-zero)."""
    if t == "pred":
        return bool(value)
    if t in ("f32", "f64"):
        return float(value)
    if isinstance(value, float) and (value != value or abs(value) == float("inf")):
        return 0  # C leaves it undefined; 0 is what cvt.rzi gives NaN
    n, x = _bits(t), int(value)
    x &= (1 << n) - 1
    return x - (1 << n) if t.startswith("s") and x >> (n - 1) else x


def coerce(w, v: V, t: str, hint: str = "cv") -> Optional[V]:
    """`v` as a register of type `t`, converted as C converts a value assigned to a variable
    of that type (a store, an initialiser, an assignment): integer <-> float (`cvt.rn` /
    `cvt.rzi`), widening and narrowing integers, a condition as 1 or 0, a number as a
    condition (non-zero). PTX wants the operand of `st`/`mov` of the destination's type, so
    every such value goes through here. None when no C conversion exists here."""
    if v.ty == t:
        return v
    if v.is_const:
        return V.imm(const_as(v.const, t), t)
    if t in _INT_REGS and v.ty in _INT_REGS and _bits(t) == _bits(v.ty):
        return V(v.text, t)  # one word: the same bits (two's complement)
    out = w.reg(t, hint)
    if v.ty == "pred":
        one, zero = (V.imm(1, t), V.imm(0, t))
        w.op(f"selp.{'f32' if t == 'f32' else 'b' + str(_bits(t))}", out, one, zero, v)
    elif t == "pred" and v.ty in _INT_REGS + ("f32",):
        w.op(f"setp.ne.{'f32' if v.ty == 'f32' else 'b' + str(_bits(v.ty))}", out, v,
             V.imm(0, v.ty))
    elif t == "f32" and v.ty in _INT_REGS:
        w.op(f"cvt.rn.f32.{_signed(v.ty)}", out, v)
    elif v.ty == "f32" and t in ("u32", "u64", "b32", "b64"):
        # through s64: a negative value wraps (the interpreter's reading of C's undefined
        # case) instead of cvt.rzi.u32's clamp to 0
        wide = w.reg("s64", hint) if _bits(t) == 32 else V(out.text, "s64")
        w.op("cvt.rzi.s64.f32", wide, v)
        if _bits(t) == 32:
            w.op("cvt.u32.s64", out, wide)
    elif v.ty == "f32" and t in _INT_REGS:
        w.op(f"cvt.rzi.{_signed(t)}.f32", out, v)
    elif t in _INT_REGS and v.ty in _INT_REGS:
        w.op(f"cvt.{_signed(t)}.{_signed(v.ty)}", out, v)
    else:
        return None
    return out


#: Narrow integer scalars held in 32-bit registers: (bits, signed).
_NARROW_INTS = {"s8": (8, True), "u8": (8, False), "s16": (16, True), "u16": (16, False),
                **{t: f for t, f in _subbyte.INT_FORMATS.items() if t != "bin1"}}
_HALF = {"f16": ("cvt.rn.f16.f32", "cvt.f32.f16"), "bf16": ("cvt.rn.bf16.f32", "cvt.f32.bf16")}


def assign_scalar(ex: "ExprLowering", dtype: str, e: ir.Expr, r: V) -> None:
    """`e` into `r`, the register of a mutable scalar of type `dtype` (an initialiser, an
    assignment), converted as C converts: `e` computed into `r`'s register type, then a
    narrow type's register (`s8`, `u4`, `bin1`, `f16`) brought back to the type's values
    (`s8 v = 300` is 44, `bin1 v = 0.5` is 1, `f16 v = 300.7` is 300.75). A float into an
    unsigned narrow type goes through s32 (`u8 v = -1.0f` is 255: cvt to u32 would clamp)."""
    w = ex.w
    unsigned_narrow = dtype == "bin1" or (dtype in _NARROW_INTS and not _NARROW_INTS[dtype][1])
    if unsigned_narrow and ex.natural_type(e) == "f32":
        v = ex.value(e)
        if dtype == "bin1" and not v.is_const:
            p = w.reg("pred", "nz")
            w.op("setp.ne.f32", p, v, V.imm(0.0, "f32"))
            w.op(f"selp.{r.ty}", r, V.imm(1, r.ty), V.imm(0, r.ty), p)
            return
        w.op(f"mov.{r.ty}", r, V(ex.as_type(v, "s32").text, r.ty) if not v.is_const
             else V.imm(const_as(v.const != 0 if dtype == "bin1" else v.const, "s32"), r.ty))
    else:
        ex.value(e, dst=r)
    _narrow(w, dtype, r)


def _narrow(w, dtype: str, r: V) -> None:
    if dtype == "bin1" and r.ty != "f32":
        p = w.reg("pred", "nz")
        w.op("setp.ne.b32", p, r, V.imm(0, r.ty))
        w.op(f"selp.{r.ty}", r, V.imm(1, r.ty), V.imm(0, r.ty), p)
    elif dtype in _HALF and r.ty == "f32":
        h = w.reg("b16", "h")
        w.op(_HALF[dtype][0], h, r)
        w.op(_HALF[dtype][1], r, h)
    elif dtype in _NARROW_INTS and r.ty in ("s32", "u32", "b32"):
        bits, signed = _NARROW_INTS[dtype]
        if signed:  # sign-extend the low bits
            w.op("shl.b32", r, r, 32 - bits)
            w.op("shr.s32", r, r, 32 - bits)
        else:
            w.op("and.b32", r, r, (1 << bits) - 1)


def common_type(a: V, b: V) -> str:
    """The type two compared values meet in (C: a float if either is one, else the wider
    integer, else the left operand's; a constant takes the other's)."""
    if a.is_const and not b.is_const:
        return b.ty
    if b.is_const:
        return a.ty
    types = (a.ty, b.ty)
    if "f32" in types:
        return "f32"
    if "pred" in types and types != ("pred", "pred"):
        return next(t for t in types if t != "pred")
    if _bits(a.ty) != _bits(b.ty):
        return a.ty if _bits(a.ty) == 64 else b.ty
    return a.ty


def fits(natural: Optional[str], t: str) -> bool:
    """Whether a value of register type `natural` can be computed straight into a `t`
    register (the same type, or integers of one width: PTX takes either); unknown: yes."""
    return (natural is None or natural == t
            or (natural in _INT_REGS and t in _INT_REGS and _bits(natural) == _bits(t)))


def _signed(t: str) -> str:
    """A bit type as cvt takes it (unsigned)."""
    return "u" + t[1:] if t.startswith("b") else t
