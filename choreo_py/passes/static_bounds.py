"""Bounds of the places a statement touches, for the static fault check.

A shared or local view whose box lies outside its buffer, and an element read or
written outside its tensor or buffer (a global tensor's box may pass its end: the TMA
fills the rest; an element there is a fault), are reported when that holds for every
value of the indices, or for one case of them that runs (static_ranges: a role index,
a parallel index). A symbol of unknown range makes a check give up, silently.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass
from functools import cache

from .. import ir
from ..ir.printer import expr as print_expr
from .static_ranges import Scope, interval


# ---------------------------------------------------------------- places in a statement

@cache
def _field_names(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind))


def views(obj, depth: int = 0):
    """Every ir.View inside a statement's fields (not inside nested statement lists)."""
    if isinstance(obj, ir.View):
        yield obj
        return
    if isinstance(obj, (list, tuple)):
        for x in obj:
            if not isinstance(x, ir.Stmt):
                yield from views(x, depth + 1)
        return
    if is_dataclass(obj) and not isinstance(obj, type) and depth < 12:
        for name in _field_names(type(obj)):
            sub = getattr(obj, name)
            if not isinstance(sub, (str, int, float, type(None))):
                yield from views(sub, depth + 1)


def _exprs(obj, depth: int = 0):
    """Every expression a statement's fields hold (not views' offsets, not nested lists)."""
    if isinstance(obj, ir.Expr):
        yield obj
        return
    if isinstance(obj, (list, tuple)):
        for x in obj:
            if not isinstance(x, (ir.Stmt, ir.View)):
                yield from _exprs(x, depth + 1)
        return
    if is_dataclass(obj) and not isinstance(obj, (type, ir.View, ir.Frag)) and depth < 12:
        for name in _field_names(type(obj)):
            sub = getattr(obj, name)
            if not isinstance(sub, (str, int, float, type(None), ir.View)):
                yield from _exprs(sub, depth + 1)


def _surely_read(e: ir.Expr):
    """The buffer elements evaluating `e` reads whatever its values: not those of a
    select's arms or of the right side of `&&` / `||` (read only on some values)."""
    if isinstance(e, ir.BufElem):
        yield e
    if isinstance(e, ir.Select):
        yield from _surely_read(e.cond)
        return
    if isinstance(e, ir.Bin) and e.op in ("&&", "||"):
        yield from _surely_read(e.lhs)
        return
    for x in ir.expr_children(e):
        yield from _surely_read(x)


def elements(s: ir.Stmt):
    """(view, index, loc) of every element `s` surely reads or writes (a read's own
    location where it has one, else the statement's)."""
    if isinstance(s, ir.BufStore):
        yield s.view, s.index, s.loc
    for e in _exprs(s):
        for b in _surely_read(e):
            yield b.view, b.index, getattr(b, "loc", None) or s.loc


class Bounds:
    """The bounds checks of the fault walk (static_faults._Faults): `self.k` is the kernel,
    `self.report(message, loc)` records a finding."""

    def check_view(self, v: ir.View, scope: Scope, loc) -> None:
        buf = self.k.buffer(v.base)
        if buf is None:
            return
        names = set().union(*(ir.sym_names(o) for o in v.offsets))
        for when, env in [("for every value of its indices", scope.ranges)] + \
                [(f"when {d}", e) for d, e in scope.case_envs(names)]:
            if self._view_outside(v, buf, env, when, loc):
                return
        if v.slot is not None and buf.count:
            r = interval(v.slot, scope.ranges)
            if r is not None and (r[0] >= buf.count or r[1] < 0):
                self.report(f"'{v.base}[{int(r[0])}]' is outside the array of {buf.count} "
                            "buffers", loc)

    def _view_outside(self, v, buf, env, when: str, loc) -> bool:
        for k, (off, ext, size) in enumerate(zip(v.offsets, v.extents, buf.shape)):
            r, n = interval(off, env), ir_int(ext)
            if r is None or n is None:
                continue
            if r[0] + n > size or r[1] < 0:
                lo = int(r[0])
                self.report(f"this view of '{v.base}' {list(buf.shape)} spans elements "
                            f"[{lo}, {lo + n}) of dimension {k} {when}, outside the "
                            f"buffer's {size}", loc)
                return True
        return False

    def check_element(self, v: ir.View, index, scope: Scope, loc) -> None:
        """An element past its tensor or buffer (a global tensor's box may pass its end,
        the TMA fills it; an element read or written there is a fault)."""
        sizes = self._sizes(v.base, scope)
        kept = [k for k, keep in enumerate(v.keep) if keep]
        if sizes is None or len(kept) != len(index):
            return
        pos = list(v.offsets)
        for k, i in zip(kept, index):
            pos[k] = ir.Bin("+", pos[k], i, "s32")
        names = set().union(*(ir.sym_names(p) for p in pos))
        for when, env in [("for every value of its indices", scope.ranges)] + \
                [(f"when {d}", e) for d, e in scope.case_envs(names)]:
            if self._element_outside(v.base, pos, sizes, env, when, loc):
                return

    def _element_outside(self, base, pos, sizes, env, when, loc) -> bool:
        for k, (p, size) in enumerate(zip(pos, sizes)):
            r, n = interval(p, env), interval(size, env) if isinstance(size, ir.Expr) \
                else (size, size)
            if r is None or n is None:
                continue
            if r[0] >= n[1] or r[1] < 0:
                shown = [print_expr(d) if isinstance(d, ir.Expr) else d for d in sizes]
                self.report(f"this element of '{base}' [{', '.join(map(str, shown))}] is at "
                            f"index {int(r[0])} of dimension {k} {when}, outside its "
                            f"{shown[k]}", loc)
                return True
        return False

    def _sizes(self, base: str, scope: Scope):
        """The dimensions of a parameter (expressions) or buffer (ints); None for others."""
        if self.k.alias(base) is not None:
            return None
        buf = self.k.buffer(base)
        if buf is not None:
            return buf.shape
        p = self.k.param(base)
        return tuple(p.shape) if p is not None else None


def ir_int(e) -> int | None:
    if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None
