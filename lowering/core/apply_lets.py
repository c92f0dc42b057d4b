"""Named values inside `apply` (`g_t = g_s.at(i);`): fragments.ApplyLowering's lets.

Element k's value is computed where the statement stands (into a register of its own
when it is a fragment element: a later store into that element does not change it), and
the name reads it in the statements after, for element k. A name that depends on the
apply's indices is no affine term of a condition (ApplyLowering.uses_index).
"""
from __future__ import annotations

from typing import Optional

from choreo_py import ir

from .writer import V


class ApplyLets:
    """Mixed into fragments.ApplyLowering (k, lets, value, out, w); its leaf and key fall
    through to these for names."""

    def let(self, s: ir.Let, ks: list, cond: Optional[dict] = None) -> None:
        """`cond`: the predicates of the branch the let stands in (its loads run only
        there: the branch is if-converted, not jumped around)."""
        for k in ks:
            self.k = k
            v = self.guarded(s.value, None if cond is None else cond[k], hint=s.name)
            if isinstance(s.value, ir.Elem):  # a copy: a later store changes the element
                reg = self.out(None, v.ty, s.name)
                self.w.op(f"mov.{v.ty}", reg, v)
                v = reg
            self.lets.setdefault(s.name, {})[k] = v

    def leaf(self, e: ir.Expr) -> Optional[V]:
        if isinstance(e, ir.Sym) and e.name in self.lets:
            return self.lets[e.name][self.k]
        return super().leaf(e)

    def key(self, e: ir.Expr):
        if isinstance(e, ir.Sym) and e.name in self.lets:
            return ("let", e.name, self.k, self.lets[e.name][self.k].text)
        return super().key(e)
