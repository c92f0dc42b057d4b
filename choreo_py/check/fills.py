"""`mma.fill` sets an MMA's accumulator: a fragment the function uses as an MMA's A or B
operand is refused as the target of a fill (the reference: only the accumulator of an MMA
may be filled). Operands are register fragments of another layout (`mma.load`'s), not
accumulators, so a fill of one has no meaning the hardware gives it.

The MMA may come after the fill (a fill at the top of a loop body), so the fills are
resolved at the end of the function, by symbol: a name declared again in an inner scope
is another fragment.
"""
from __future__ import annotations

from ..frontend import ast as A

_FILLS, _OPERANDS = "fills.targets", "fills.operands"


def filled(ck, s: A.MmaFill) -> None:
    """Runs before the walk declares a new target: the scope it goes into is recorded."""
    if isinstance(s.target, A.Name):
        entry = (ck.lookup(s.target.id), ck.scopes[-1], s.target.id, s.loc)
        ck.extra.setdefault(_FILLS, []).append(entry)


def operands(ck, s: A.MmaOp) -> None:
    for e in (s.a, s.b):
        sym = ck.lookup(e.id) if isinstance(e, A.Name) else None
        if sym is not None:
            ck.extra.setdefault(_OPERANDS, {}).setdefault(id(sym), (sym, e.loc))


def only_accumulators(ck, fn) -> None:
    used = ck.extra.get(_OPERANDS, {})
    for sym, scope, name, loc in ck.extra.get(_FILLS, []):
        sym = sym or scope.names.get(name)
        if sym is not None and id(sym) in used:
            at = used[id(sym)][1]
            ck.error(f"only the accumulator of an MMA can be filled: '{name}' is an operand "
                     f"of the MMA at {at.line}:{at.col}", loc)


RULES = {A.MmaFill: [filled], A.MmaOp: [operands]}
EXIT_RULES = {A.FunctionDef: [only_accumulators]}
