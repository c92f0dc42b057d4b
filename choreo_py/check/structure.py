"""Structure: parallel levels, barriers, atomics and attributes.

Parallel levels nest strictly deeper (block > group-4 > group > thread: a
warpgroup is made of warps, a warp of threads); a level left unwritten is
inferred, which needs room between the written levels around it.  A
device-wide barrier needs every block resident at once, which only a
`<cooperative>` launch guarantees.  Atomics update memory other threads see
(shared or global), with one operand (two for compare-and-swap).  The
register cap `[[maxnreg(n)]]` applies to a whole kernel, so it sits on the
block level, with a positive constant.
"""
from __future__ import annotations

from ..frontend import ast as A
from . import types as Ty
from .walker import LEVEL_ORDER

#: Levels below which an unwritten level can still be placed.
_DEPTH = {name: i for i, name in enumerate(LEVEL_ORDER)}


def parallel_levels(ck, s: A.ParallelBy) -> None:
    outer = ck.parallel[:]          # (statement, level) pairs around this statement
    for lvl in s.levels:
        _one_level(ck, outer, lvl)
        outer.append((s, lvl))


def _one_level(ck, outer, lvl: A.ParallelLevel) -> None:
    explicit = [(i, l) for i, (_, l) in enumerate(outer) if l.level]
    parent_i, parent = explicit[-1] if explicit else (-1, None)
    unwritten_between = len(outer) - 1 - parent_i
    if lvl.level is None:
        if parent is not None and parent.level == "thread":
            ck.error("a parallel level inside ': thread' can not be inferred: no level is "
                     "deeper than a thread", lvl.loc)
        return
    if lvl.level not in _DEPTH:
        return
    if parent is not None and parent.level in _DEPTH:
        if _DEPTH[lvl.level] <= _DEPTH[parent.level]:
            ck.error(f"the parallel level ': {lvl.level}' is nested inside ': {parent.level}'; "
                     "nested levels must be strictly deeper (block > group-4 > group > "
                     "thread)", lvl.loc)
            return
        room = _DEPTH[lvl.level] - _DEPTH[parent.level] - 1
    else:
        room = _DEPTH[lvl.level] - _DEPTH["block"]  # unwritten outer levels: block and below
        if lvl.level in ("device", "cluster", "block"):
            room = 0 if unwritten_between else room
    if unwritten_between > max(room, 0):
        ck.error(f"the {unwritten_between} unwritten parallel level(s) around ': {lvl.level}' "
                 "can not be inferred: there is no level left between them", lvl.loc)


def attributes(ck, s: A.ParallelBy) -> None:
    for attr in s.attributes:
        if attr.name != "maxnreg":
            continue
        level = s.levels[0].level
        inner = bool(ck.parallel)
        if level not in (None, "block") or (level is None and inner):
            ck.error("'[[maxnreg]]' caps the registers of a whole kernel and belongs on the "
                     "': block' level", attr.loc)
        if len(attr.args) != 1:
            ck.error("'[[maxnreg(n)]]' takes one argument", attr.loc)
            continue
        v = ck.fold(attr.args[0])
        if v is None and ck.t(attr.args[0]).kind not in (Ty.UNKNOWN,) and \
                not _constant(ck, attr.args[0]):
            ck.error("'[[maxnreg(n)]]' needs a constant", attr.args[0].loc)
        elif v is not None and v <= 0:
            ck.error(f"'[[maxnreg({v})]]': the register count must be positive",
                     attr.args[0].loc)


def _constant(ck, e) -> bool:
    for node in A.walk(e):
        if isinstance(node, A.Name):
            sym = ck.lookup(node.id)
            if sym is None or sym.written_mutable or sym.origin in ("param", "dim", "parallel",
                                                            "with", "foreach"):
                return False
    return True


def barrier(ck, s: A.Sync) -> None:
    if s.kind == "barrier" and s.level == "device":
        if not any(l.cooperative for _, l in ck.parallel):
            ck.error("'sync.barrier : device' waits for every block at once, which needs an "
                     "enclosing 'parallel ... : block<cooperative>'", s.loc)


_ATOMIC_ARITY = {"__atomic_cas": 3}


def atomic(ck, c: A.CallExpr) -> None:
    if not c.func.startswith("__atomic_"):
        return
    want = _ATOMIC_ARITY.get(c.func, 2)
    if len(c.args) != want:
        ck.error(f"'{c.func}' takes {want} arguments, not {len(c.args)}", c.loc)
        return
    first = c.args[0]
    root = first
    while isinstance(root, (A.MethodCall, A.Index)):
        root = root.base
    sym = ck.lookup(root.id) if isinstance(root, A.Name) else None
    if sym is None:
        return
    element = first is not root
    if sym.type.kind == Ty.DATA and element and sym.type.storage in ("shared", "global"):
        return
    if sym.type.kind in (Ty.UNKNOWN,) or (sym.type.kind == Ty.DATA and sym.type.storage is None):
        return
    ck.error(f"the first argument of '{c.func}' is an element of shared or global data "
             f"(e.g. 'x.at(i)'), not '{root.id}'", first.loc)


RULES = {
    A.ParallelBy: [parallel_levels, attributes],
    A.Sync: [barrier],
    A.CallExpr: [atomic],
}
