"""The block's accumulators (`acc = mma.fill.f32 0.0f : block;`): one role issues their MMAs.

An accumulator declared `: block` in a `parallel ... : block` body is one
tile for the whole block, which every role of its thread-group level sees
(tensor memory on sm_100a), where a plain accumulator is one per thread group
that runs the code using it. Its MMAs accumulate into that one tile, so they
are issued by one role (`inthreads.async`), not by every thread group of the
level and not by two roles; the other roles read the tile after an event the
issuing role triggers once it waited the MMAs. Sema adds that the issuing
role selects one thread group, and that the declaration sits in the block,
before the thread-group level.
"""
from __future__ import annotations

from ..frontend import ast as A

_KEY = "block_accumulators"


def declared(ck, s: A.MmaFill) -> None:
    """Runs before the walk declares the name: it goes into the innermost scope."""
    if s.level == "block" and s.declares and isinstance(s.target, A.Name):
        ck.extra.setdefault(_KEY, {})[(id(ck.scopes[-1]), s.target.id)] = s.loc


def _block_acc(ck, name: str):
    """(declaration) if `name` resolves to a `: block` accumulator."""
    table = ck.extra.get(_KEY, {})
    for scope in reversed(ck.scopes):
        if name in scope.names:
            return table.get((id(scope), name))
    return None


def _where(loc) -> str:
    return f"{loc.line}:{loc.col}" if loc else "?"


def mma_issuer(ck, s: A.MmaOp) -> None:
    name = s.acc.id if isinstance(s.acc, A.Name) else None
    decl = _block_acc(ck, name) if name else None
    if decl is None or not ck.parallel:
        return
    level = ck.parallel[-1][1]
    groups = ck.fold(level.bounds[0]) if len(level.bounds) == 1 and not level.elements else None
    var = f"'parallel {level.var}'" if level.var else "the parallel level"
    roles = ck.inthreads[-1]
    if not roles:
        if groups != 1:
            ck.error(f"every thread group of {var} would issue MMAs into the block's "
                     f"accumulator '{name}' (declared at {_where(decl)}), one tile shared by "
                     "them; issue its MMAs from one role ('inthreads.async')", s.loc)
        return
    issuers = ck.extra.setdefault(_KEY + ".issuer", {})
    first = issuers.setdefault((decl.line, decl.col, name), (roles[0], s.loc))
    if first[0] is not roles[0]:
        ck.error(f"MMAs into the block's accumulator '{name}' (declared at {_where(decl)}) come "
                 f"from two roles: here and at {_where(first[1])}; one role issues them, the "
                 "others read the tile after an event", s.loc)


RULES = {A.MmaFill: [declared], A.MmaOp: [mma_issuer]}
