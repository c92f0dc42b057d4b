"""Inline asm in a thread kernel: the template pasted between braces.

Each operand gets a register of its constraint's width (`r` .b32, `l` .b64, `h` .b16,
`f` .f32, `d` .f64); `n` operands are written as their constant. Inputs and the old
value of `+` outputs are moved into their registers before the template, outputs are
stored to their places after it. The braces give the template a scope of its own, so
the `.reg` declarations it may hold do not meet the kernel's (as CUDA compiles asm).
"""
from __future__ import annotations

import re

from choreo_py import ir
from choreo_py.diagnostics import ChoreoError
from choreo_py.ir import asm_letter as letter, asm_references as references

from .writer import V

#: constraint letter -> the operand register's type
REG_OF = {"r": "b32", "l": "b64", "h": "b16", "f": "f32", "d": "f64"}
_BITS = {"b16": 16, "u16": 16, "s16": 16, "b32": 32, "u32": 32, "s32": 32, "f32": 32,
         "b64": 64, "u64": 64, "s64": 64, "f64": 64}


def lower_asm(lw, s: ir.Asm, value, store) -> None:
    """`value(e, hint)` -> V of an expression; `store(place, V)` writes an output's place."""
    w = lw.w
    spelled = []
    for o in s.outputs:
        reg = w.reg(REG_OF[letter(o.constraint)], "asm_out")
        if o.constraint.startswith("+"):
            _move(lw, reg, value(o.expr, "asm_old"))
        spelled.append(reg)
    for o in s.inputs:
        v = value(o.expr, "asm_in")
        if letter(o.constraint) == "n":
            spelled.append(V.imm(v.const, "s64"))
            continue
        reg = w.reg(REG_OF[letter(o.constraint)], "asm_in")
        _move(lw, reg, v)
        spelled.append(reg)
    text = "\n".join(["{", *_lines(_substituted(s, spelled)), "}"])
    _check_parses(text, s.loc)
    w.call("ptx.raw", repr(text))
    for o, reg in zip(s.outputs, spelled):
        store(o.expr, reg)


def _check_parses(text: str, loc) -> None:
    """The template, pasted, must be PTX statements: pyptx parses what `ptx.raw` is given
    into the kernel's body, and a statement without its `;` (`__asm__("nop")`) makes the
    whole body unparseable (nvcc would paste it, and ptxas reject it)."""
    from pyptx.parser import parse

    wrapper = f".version 8.5\n.target sm_90a\n.address_size 64\n.entry _asm()\n{{\n{text}\n}}\n"
    try:
        body = getattr(parse(wrapper).directives[0], "body", None)
    except Exception:  # noqa: BLE001 - pyptx's parser raises its own kinds
        body = None
    if body is None:
        raise ChoreoError("the __asm__ template is not PTX statements (each PTX instruction "
                          f"ends with ';'): {text[2:-2]!r}", loc)


def _move(lw, reg: V, v: V) -> None:
    """`v` into the operand register: a move of the same width, else a conversion (a 16-bit
    operand of a value held widened in 32 bits)."""
    w = lw.w
    if v.is_const:
        w.op(f"mov.{reg.ty}", reg, v)
    elif _BITS.get(v.ty) == _BITS[reg.ty]:
        w.op(f"mov.{reg.ty}", reg, v)
    else:
        w.op(f"cvt.u{_BITS[reg.ty]}.u{_BITS[v.ty]}", reg, v)


def _lines(text: str) -> list[str]:
    """The template one statement, brace or label per line (pyptx keeps each parsed
    instruction's line as it prints it: two on a line would print that line twice)."""
    out, cur = [], ""
    for piece in re.split(r"([{};])", text):
        if piece in ("{", "}"):
            out += [cur.strip()] if cur.strip() else []
            out.append(piece)
            cur = ""
        elif piece == ";":
            out.append(cur.strip() + ";")
            cur = ""
        else:
            cur += piece
    return out + ([cur.strip()] if cur.strip() else [])


def _substituted(s: ir.Asm, spelled: list[V]) -> str:
    names = {o.name: i for i, o in enumerate(s.outputs + s.inputs) if o.name}
    out, last = [], 0
    for ref, start, end in references(s.template):
        out.append(s.template[last:start])
        if ref == "%":
            out.append("%")
        else:
            i = names[ref[1:-1]] if ref.startswith("[") else int(ref)
            out.append(spelled[i].ptx_name())
        last = end
    out.append(s.template[last:])
    return "".join(out)
