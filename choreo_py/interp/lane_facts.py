"""What a lane run reads off its body's text once (lanes.py): the names it binds,
the bases it may store to, and whether a view is the same box all through it.
"""
from __future__ import annotations

from .. import ir
from .memory import Box


def bound_names(s: ir.Parallel) -> frozenset:
    """The names a parallel's body binds (its variable among them): all else it reads is
    fixed for the run."""
    names = {s.var}
    for x in ir.walk(s.body):
        for attr in ("name", "var"):
            v = getattr(x, attr, None)
            if isinstance(v, str) and isinstance(x, (ir.Let, ir.Var, ir.Assign, ir.For,
                                                     ir.ViewDef)):
                names.add(v)
    return frozenset(names)


def stored_bases(s: ir.Parallel, env: dict) -> frozenset:
    """The bases (tensor and buffer names) a parallel's body may store to, through the
    views it names (`ViewDef`s, inside it or before it): no lane races on the others."""
    defs: dict[str, list] = {}
    for x in ir.walk(s.body):
        if isinstance(x, ir.ViewDef):
            defs.setdefault(x.name, []).append(x.view.base)

    def bases(name: str, seen: frozenset) -> set:
        if name in defs and name not in seen:
            return set().union(*(bases(b, seen | {name}) for b in defs[name]))
        v = env.get(name)
        return {v.base} if isinstance(v, Box) else {name}  # (a lane box is made later)

    return frozenset().union(*(bases(x.view.base, frozenset()) for x in ir.walk(s.body)
                               if isinstance(x, ir.BufStore)))


def fixed_view(view: ir.View, bound: frozenset) -> bool:
    """Whether a view resolves to the same box all through a run: its base and the names
    its offsets, extents and slot read are none the body binds, and it reads no memory."""
    if view.base in bound:
        return False
    exprs = list(view.offsets) + list(view.extents) + ([view.slot] if view.slot else [])
    for e in exprs:
        for x in ir.expr_walk(e):
            if isinstance(x, (ir.BufElem, ir.Elem)) or (isinstance(x, ir.Sym)
                                                        and x.name in bound):
                return False
    return True
