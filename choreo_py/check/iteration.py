"""Iteration: `with` binds bounded variables over an index space, `foreach`
iterates them.

A matcher `{x, y}` names one variable per dimension, so it matches the
rank; `_` is a placeholder of `chunkat`, never a variable; `where` relates
variables of its own `with`; an index space of extent 0 is empty, which is
a mistake.  `foreach` iterates variables a `with` bound (a parallel variable
is iterated by the hardware, not by a loop), and the local names it gives
(`foreach c = i(...)`) are distinct.
"""
from __future__ import annotations

from ..frontend import ast as A
from . import types as Ty


def with_stmt(ck, s: A.With) -> None:
    names = set()
    for b in s.bindings:
        _binding(ck, b, "with")
        names.update(b.elements)
        if b.name:
            names.add(b.name)
    for w in s.where:
        for side in (w.lhs, w.rhs):
            if side not in names:
                ck.error(f"'{side}' in 'where' is not a variable of this 'with'", w.loc)


def _binding(ck, b: A.WithBinding, what: str) -> None:
    dom = ck.t(b.domain)
    if b.name == "_" or "_" in b.elements:
        ck.error(f"'_' can not be a {what} variable (it is only a placeholder in 'chunkat')",
                 b.loc)
    if b.elements and dom.kind == Ty.INT and not isinstance(b.domain, A.MdSpanLit):
        ck.error(f"a matcher '{{...}}' needs an mdspan, but the {what} domain is an integer",
                 b.domain.loc)
    elif b.elements and dom.kind == Ty.MDSPAN and dom.rank is not None \
            and dom.rank != len(b.elements):
        ck.error(f"{len(b.elements)} {what} variables for an index space of rank {dom.rank}",
                 b.domain.loc)
    if dom.kind not in (Ty.INT, Ty.MDSPAN, Ty.UNKNOWN, Ty.BOUNDED):
        ck.error(f"the {what} domain is {Ty.describe(dom.kind)}; it must be an mdspan or an "
                 "integer", b.domain.loc)
    extents = b.domain.elements if isinstance(b.domain, A.MdSpanLit) else [b.domain]
    for e in extents:
        v = ck.fold(e)
        if v is not None and v <= 0:
            ck.error(f"the {what} domain has extent {v}; an index space must not be empty",
                     e.loc)


def foreach(ck, s: A.Foreach) -> None:
    for b in s.bindings:
        _binding(ck, b, "loop")
    locals_seen = set()
    for r in s.ranges:
        if r.var != r.bound:
            if r.var == "_":
                ck.error("'_' can not be a local iteration variable", r.loc)
            elif r.var in locals_seen:
                ck.error(f"the local iteration variable '{r.var}' is used twice in this "
                         "'foreach'", r.loc)
            locals_seen.add(r.var)
        if r.bound == "_":
            ck.error("'_' can not be iterated", r.loc)
            continue
        sym = ck.lookup(r.bound)
        if sym is None:
            ck.error(f"'{r.bound}' is used before its declaration", r.loc)
        elif sym.origin == "parallel":
            ck.error(f"'{r.bound}' is a parallel variable; 'foreach' iterates variables "
                     "bound by 'with'", r.loc)
        elif sym.origin not in ("with", "foreach") and sym.type.kind != Ty.UNKNOWN:
            ck.error(f"'{r.bound}' is not bound by a 'with'; 'foreach' iterates with-bound "
                     "variables", r.loc)
        else:
            sym.uses += 1
    for a in s.attrs:
        if a.name == "unroll" and a.args:
            v = ck.fold(a.args[0])
            if v is not None and v <= 0:
                ck.error(f"'unroll({v})': the unroll factor must be positive", a.args[0].loc)


RULES = {
    A.With: [with_stmt],
    A.Foreach: [foreach],
}
