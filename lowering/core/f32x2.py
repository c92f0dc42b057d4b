"""Pairs independent float32 add / sub / mul / fma of an `apply` into the `.f32x2` forms.

sm_100a has packed float32 pairs (PTX ISA 8.6: `add{.rnd}{.ftz}.f32x2`, likewise sub and
mul, `fma.rnd{.ftz}.f32x2`; operands are .b64 registers, element 0 in bits 0-31), which
ptxas issues as FADD2 / FMUL2 / FFMA2: one issue slot for two results. Each element of
such a form is rounded as the scalar form with the same modifiers rounds it, so a pair
gives bit for bit what its two scalar instructions give; what changes is only the issue
count. ptxas pairs none of the scalar forms itself.

An apply's code is elementwise and unrolled: the same instructions, element after
element. While the Writer records a region (`Writer.pairing`), its instructions are
kept as `Inst` records; `pair` walks them in order and gives a pairable instruction
the nearest later one with the same opcode and the same immediates at the same places
whose registers pair in place (_aligned: element 2m of a register array with element
2m + 1, a shared register with itself), when that one can be moved up: it and the
instructions it depends on among those in between (its cone) are plain register
arithmetic that no instruction left in between reads or writes over. A first round
pairs neighbouring elements (element k's `s * c + t` with element k + 1's); a second
the fmas of scalar registers (a polynomial's Horner step with the other polynomial's;
SCALAR_ROUND). The pair is then `mov.b64 {x, y}` packs of its sources (a pair of
immediates is one 64-bit immediate: .f32x2 takes no immediate), the `.f32x2` form and
one `mov.b64` that unpacks the two results into the original registers, so every later
reader is unchanged (a later pair of the same two registers reads the result as it is).
Anything the pass cannot see through (memory, tensor memory, a branch, a string
operand) is a wall nothing moves across. Left scalar, by measurement (docs/
blackwell-notes.md, section 9): a reduction tree's nodes (Writer.solo) and a multiply
whose result a select reads (_selected).
"""
from __future__ import annotations

import re
import struct
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Optional

#: Whether an apply's independent f32 arithmetic is paired into .f32x2 forms on targets
#: that have them (this module): True always, False never, PROBE (the default) per kernel,
#: by ptxas (choreo_py/runtime/pairing.py): a kernel keeps its pairs when ptxas -v reports
#: no spill for its paired build; else, if it sets no per-role budget (setmaxnreg), when
#: it reports none with the kernel's register cap CAP_STEP lower (`.maxnreg`); else it is
#: lowered again with scalar arithmetic. Why a probe and not a rule: ptxas 13.0 spills the
#: pairs of some kernels at their register cap alone (tests/co/
#: flash_atten_blackwell_commit.co at 168 registers: 24 bytes; at 160 or with no cap,
#: none), while a kernel of the same shape does not (examples/
#: flash_atten_blackwell_persistent.co); docs/blackwell-notes.md, section 9.
PAIR: object = "probe"
PROBE = "probe"
#: registers the cap is lowered by for a kernel whose pairs spill at its cap (ptxas
#: allocates registers 8 at a time)
CAP_STEP = 8

#: the probe's verdicts while a module is lowered again (`decided`): kernels (names)
#: lowered with scalar arithmetic, and kernels paired under a cap CAP_STEP lower
_SCALAR: frozenset = frozenset()
_CAPPED: frozenset = frozenset()


def pairs_in(kernel: str) -> bool:
    """Whether the applies of `kernel` are paired (on a target that has the forms)."""
    if PAIR is True or PAIR is False:
        return PAIR
    return kernel not in _SCALAR


def capped(kernel: str) -> bool:
    """Whether `kernel`'s register cap is lowered by CAP_STEP (the probe's verdict)."""
    return PAIR == PROBE and kernel in _CAPPED


@contextmanager
def decided(scalar=(), capped=()):
    """Within the block, the kernels `scalar` are lowered with scalar arithmetic and the
    kernels `capped` with their register cap CAP_STEP lower."""
    global _SCALAR, _CAPPED
    old = _SCALAR, _CAPPED
    _SCALAR, _CAPPED = frozenset(scalar) | _SCALAR, frozenset(capped) | _CAPPED
    try:
        yield
    finally:
        _SCALAR, _CAPPED = old


#: how far ahead (records) a partner is looked for
WINDOW = 96

_PAIRABLE = {"add", "sub", "mul", "fma"}
_MODS = {"rn", "rz", "rm", "rp", "ftz"}
#: register arithmetic: operand 0 is written, the others are read, nothing else is touched
_PURE = {"add", "sub", "mul", "fma", "mad", "ex2", "cvt", "max", "min", "selp", "mov", "neg",
         "abs", "shl", "shr", "and", "or", "xor", "not", "rcp", "sqrt", "rsqrt", "lg2", "div",
         "copysign", "setp", "tanh", "sin", "cos", "testp", "set", "lop3"}


@dataclass
class Inst:
    """One recorded instruction (operands as Writer.op got them), or a text line (`text`)."""
    opcode: str = ""
    operands: tuple = ()
    pred: object = None
    negate: bool = False
    at: object = None
    text: Optional[str] = None
    defs: frozenset = field(default_factory=frozenset)
    uses: frozenset = field(default_factory=frozenset)
    pure: bool = False
    solo: bool = False  # never paired (Writer.solo)
    pair: Optional[tuple] = None  # a pair made by pair(): its two instructions


def _regs(o) -> Optional[set]:
    """The register names an operand holds (None: a string the pass cannot read)."""
    if isinstance(o, (list, tuple)):
        out = set()
        for x in o:
            r = _regs(x)
            if r is None:
                return None
            out |= r
        return out
    if hasattr(o, "is_const"):
        return set() if o.is_const else {o.text}
    if isinstance(o, (int, float)) and not isinstance(o, bool):
        return set()
    return None


def record(opcode: str, operands: tuple, pred, negate: bool, at, solo: bool = False) -> Inst:
    """An Inst with what it reads and writes when it is register arithmetic."""
    ins = Inst(opcode, operands, pred, negate, at, solo=solo)
    if opcode.split(".")[0] not in _PURE or not operands:
        return ins
    regs = [_regs(o) for o in operands]
    if any(r is None for r in regs):
        return ins
    defs, uses = set(regs[0]), set().union(*regs[1:])
    if pred is not None:  # a guarded write keeps the old value elsewhere: it reads it too
        uses |= defs | {pred.text}
    ins.defs, ins.uses, ins.pure = frozenset(defs), frozenset(uses), True
    return ins


def pairable(ins: Inst) -> bool:
    """An unguarded f32 add/sub/mul/fma of registers and immediates (rounding and .ftz
    modifiers only: .f32x2 has no .sat)."""
    parts = ins.opcode.split(".")
    if not ins.pure or ins.solo or ins.pred is not None or parts[0] not in _PAIRABLE or \
            parts[-1] != "f32":
        return False
    if not set(parts[1:-1]) <= _MODS or len(ins.operands) != (4 if parts[0] == "fma" else 3):
        return False
    return all(hasattr(o, "is_const") for o in ins.operands) and not ins.operands[0].is_const


def _signature(ins: Inst) -> tuple:
    """What a partner must share: the opcode and the immediates, by position."""
    return (ins.opcode,) + tuple(o.text if o.is_const else None for o in ins.operands[1:])


def _element(o) -> Optional[tuple]:
    """(array, index) of a register that is an element of a register array, else None."""
    m = _ARRAY.match(o.text) if not o.is_const else None
    return (m.group(1), int(m.group(2))) if m else None


def _aligned(a: Inst, b: Inst) -> Optional[int]:
    """Whether b may be a's partner as to registers: where a reads or writes an element
    of a register array and b another register, a's is element 2m and b's element 2m + 1
    of the same array (a register pair ptxas can allocate in place: a tensor-memory
    load's registers, an apply's temporaries), so the packs cost no moves. None if not,
    else how many such element pairs there are."""
    n = 0
    for x, y in zip(a.operands, b.operands):
        if x.text == y.text:
            continue
        ex, ey = _element(x), _element(y)
        if ex is None and ey is None:
            continue
        if ex is None or ey is None or ex[0] != ey[0] or ex[1] % 2 or ey[1] != ex[1] + 1:
            return None
        n += 1
    return n


def _cone(recs: list, i: int, j: int, taken: set) -> Optional[list]:
    """Positions (ascending) of j and of what it depends on among i+1 .. j-1, if they can
    all move to just before i; None if not."""
    cone, need = [j], set(recs[j].uses)
    for k in range(j - 1, i - 1, -1):
        if k in taken:
            continue
        r = recs[k]
        if r.text is not None:
            continue
        if k == i or not r.pure:
            if not r.pure or need & r.defs:
                return None  # a wall, or j needs what i itself writes
            continue
        if need & r.defs:
            cone.append(k)
            need |= r.uses
    cone.sort()
    members = set(cone)
    for c in cone:  # nothing that stays in between may read or write what a member writes
        for k in range(i, c):
            if k in members or k in taken or recs[k].text is not None:
                continue
            if recs[c].defs & (recs[k].uses | recs[k].defs):
                return None
    return cone


def _selected(recs: list) -> set:
    """Registers a select reads: an if-converted store `o = selp(x * s, o, p)`. Left
    scalar, ptxas folds each multiply and its select into one predicated FMUL; a pair
    would be one FMUL2 and two SELs (measured: the O rescale of
    flash_atten_blackwell.co, 403 -> 531 SASS instructions a step)."""
    out: set = set()
    for r in recs:
        if r.text is None and r.pure and r.opcode.startswith("selp."):
            out |= r.uses
    return out


#: what the second round pairs: the fmas of scalar registers (a polynomial exp2's Horner
#: steps with the other polynomial's). Its add.rm and subs paired too made ptxas spill in
#: flash_atten_blackwell.co's softmax (24 to 48 bytes, whichever of them; measured with
#: ptxas 13.0), so they stay scalar.
SCALAR_ROUND = ("fma",)


def pair(recs: list) -> list:
    """The records in their new order, a pair as one Inst (`pair`: its two halves).
    First the pairs of array elements (k, k + 1: an apply's neighbouring elements), then
    the fmas of scalar registers (SCALAR_ROUND), which may move whole pairs of the first
    round up with their cones."""
    selected = _selected(recs)
    return _pairs(_pairs(recs, selected, 1, _PAIRABLE), selected, 0, SCALAR_ROUND)


def _pairs(recs: list, selected: set, least: int, ops) -> list:
    """One round: each pairable record of `ops`, in order, takes the nearest later partner
    whose registers pair with at least `least` array element pairs (_aligned)."""
    out, taken = [], set()
    for i, r in enumerate(recs):
        if i in taken:
            continue
        if r.text is None and pairable(r) and r.opcode.split(".")[0] in ops and \
                not r.defs & selected:
            sig = _signature(r)
            for j in range(i + 1, min(len(recs), i + WINDOW)):
                if j in taken or recs[j].text is not None:
                    continue
                if not recs[j].pure:
                    break
                if not pairable(recs[j]) or _signature(recs[j]) != sig or recs[j].defs & r.defs:
                    continue
                n = _aligned(r, recs[j])
                if n is None or n < least:
                    continue
                cone = _cone(recs, i, j, taken)
                if cone is None:
                    continue
                out += [recs[c] for c in cone if c != j]
                taken.update(cone)
                r = _joined(r, recs[j])
                break
        out.append(r)
    return out


def _joined(a: Inst, b: Inst) -> Inst:
    """The pair of a and b, a pure record that is paired no further."""
    return Inst(a.opcode, a.operands, at=a.at, defs=a.defs | b.defs, uses=a.uses | b.uses,
                pure=True, solo=True, pair=(a, b))


def imm64(lo, hi) -> str:
    """Two f32 immediates as one .b64 immediate (lo in bits 0-31)."""
    bits = [struct.unpack("<I", struct.pack("<f", float(v.const)))[0] for v in (lo, hi)]
    return '"0x%08X%08X"' % (bits[1], bits[0])


_ARRAY = re.compile(r"^(\w+)\[(\d+)\]$")
_WORD = re.compile(r"[A-Za-z_]\w*")


def mentioned(ins: Inst) -> set:
    """The names (a register's, an array's) an instruction's operands spell anywhere: what
    an instruction the pass cannot read may write."""
    out: set = set()
    for o in ins.operands + ((ins.pred,) if ins.pred is not None else ()):
        _spelled(o, out)
    return out


def _spelled(o, out: set) -> None:
    if isinstance(o, (list, tuple)):
        for x in o:
            _spelled(x, out)
    else:
        out.update(_WORD.findall(o.text if hasattr(o, "text") else str(o)))
