"""Which of P's exponentials run on the FMA pipes instead of MUFU (`Apply.exp2_poly`).

FA4 computes part of softmax's 2^x with a polynomial on the FMA pipes
(lowering/core/exp2_poly.py) to unload MUFU (16 exponentials per clock per SM
against 128 FP32 FMAs): one per score is MUFU's whole budget at attention's
rates. The polynomial's error (2^-13 relative) is invisible once the value is
rounded to bf16, so the decision is made only where it is: an apply every one of
whose `__exp2f` calls lies inside a `__to(...)` stored into a bf16 or f16 MMA
operand (P = __to(__exp2f(...)), the A operand of the next MMA), or that is the
same call as one of those (the row sum of P's f32 values in the same apply).

Of each 16 elements a thread computes, the fraction f the program asks for with
`[[exp2_split(f)]]` on the apply (in sixteenths) takes the polynomial, spread
evenly (1/4: elements 3, 7, 11, 15 of each 16; in tensor memory's 32x32b layout
of sm_100a, the columns j with j % 16 among them); `--emit ir` prints the
elements chosen. Both targets take it (the sequence is plain FP32 and integer
code). Without the attribute no target splits yet (`DEFAULT`): in the one-tile
Blackwell FA (tests/co/fa_blackwell_one_tile.co), at the 168 registers a thread of its three
warpgroups gets, every fraction from 1/16 to 1/2 made ptxas spill (16 to 44
bytes), because its P apply holds all 128 loaded columns of S at once; a
default waits for P applies that work through S in column chunks.
"""
from __future__ import annotations

from .. import ir
from ..diagnostics import ChoreoError

DEFAULT: dict = {}  # a target's fraction when the program asks for none (see above)
GROUP = 16          # the split repeats every 16 elements of a thread


def run(kernel: ir.Kernel, target) -> None:
    rounded = _rounded_operands(kernel)
    for a in (s for s in ir.walk(kernel.body) if isinstance(s, ir.Apply)):
        fits = _qualifies(a, rounded)
        if a.exp2_fraction is not None and not fits:
            raise ChoreoError("'[[exp2_split]]': this apply has no __exp2f whose result is "
                              "rounded to bf16 or f16 alone (P = __to(__exp2f(...)) stored "
                              "into an MMA operand)", a.loc)
        fraction = a.exp2_fraction if a.exp2_fraction is not None else DEFAULT.get(target.name, 0)
        a.exp2_poly = columns(fraction) if fits else ()


def _rounded_operands(kernel: ir.Kernel) -> set:
    frags = list(kernel.frags) + [s.frag for s in ir.walk(kernel.body)
                                  if isinstance(s, ir.FragDecl)]
    return {f.name for f in frags if f.layout == "operand" and f.dtype in ("bf16", "f16")}


def _qualifies(a: ir.Apply, rounded: set) -> bool:
    """Some __exp2f in a conversion stored into a 16-bit operand, and every other __exp2f
    of the apply the same call as one of those (P's f32 values summed into a row vector in
    the same apply: the lowering computes the call once per element, so the sum adds the
    values P was rounded from, polynomial or MUFU alike)."""
    inside, other = set(), []
    for s in ir.walk(a.body):
        for attr in ("value", "cond"):
            e = getattr(s, attr, None)
            if not isinstance(e, ir.Expr):
                continue
            calls = _exp2_calls(e)
            ok = (attr == "value" and isinstance(s, ir.ElemStore) and s.frag in rounded
                  and isinstance(e, ir.Call) and e.fn == "to")
            (inside.update if ok else other.extend)(calls)
    return bool(inside) and all(c in inside for c in other)


def _exp2_calls(e: ir.Expr) -> list:
    return [x for x in ir.expr_walk(e) if isinstance(x, ir.Call) and x.fn == "exp2"]


def columns(fraction: float) -> tuple[int, ...]:
    """The elements k % GROUP that take the polynomial for `fraction` of them, spread
    evenly (4 of 16: 3, 7, 11, 15), so that MUFU and FMA work interleave."""
    count = round(fraction * GROUP)
    return tuple(k for k in range(GROUP) if (k + 1) * count // GROUP > k * count // GROUP)
