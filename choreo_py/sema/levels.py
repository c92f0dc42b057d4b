"""Parallel levels inside a block written in one statement or over several dimensions.

`parallel g by 2 : group-4, t by 128 : thread { ... }` is the nested form
`parallel g by 2 : group-4 { parallel t by 128 : thread { ... } }` (the
levels nest left to right, as at the top of a kernel); when the inner level
is every thread of the group and the body never names its variable, it is
the group level alone (an MMA kernel's roles are per group).

`parallel {g0, g1} by [4, 2] : group { ... }` is one level of 8 groups; its
variables are the group's index taken apart row-major (g0 = i / 2,
g1 = i % 2: the last varies fastest), each bounded by its own extent. With
thread regions inside, the groups' threads are one region (as for one
dimension, sema/host.py's flattened groups) and i is thread / 32.
"""
from __future__ import annotations

from ..frontend import ast as A
from .. import ir
from ..ir import build as B
from .exprs import err
from .limits import check_region_threads
from .host import bind_row_major


def nest_levels(s: A.ParallelBy, threads: dict[str, int]) -> A.ParallelBy:
    """The nested form of a statement of several levels; `g by 2 : group-4, t by 128 :
    thread` whose body never names `t` is the group level alone (every thread of each
    group runs the body: what the inner level says), so that roles stay per group."""
    if len(s.levels) == 2 and _whole_group(s.levels, threads) and \
            not _names(s.body, s.levels[1].var):
        return A.ParallelBy(levels=s.levels[:1], is_async=s.is_async, stream=s.stream,
                            attributes=s.attributes, body=s.body, loc=s.loc)
    inner = A.ParallelBy(levels=s.levels[-1:], is_async=False, stream=None, attributes=[],
                         body=s.body, loc=s.levels[-1].loc)
    for level in reversed(s.levels[1:-1]):
        inner = A.ParallelBy(levels=[level], is_async=False, stream=None, attributes=[],
                             body=A.Block(stmts=[inner], loc=s.body.loc), loc=level.loc)
    return A.ParallelBy(levels=s.levels[:1], is_async=s.is_async, stream=s.stream,
                        attributes=s.attributes, body=A.Block(stmts=[inner], loc=s.body.loc),
                        loc=s.loc)


class LevelBuilder:
    """Mixin of the statement builder (needs scope, block, emit and the parallel state)."""

    def multi_dim_groups(self, s: A.ParallelBy, names: list[str], bounds: list,
                         level: str, threads: int, nested: bool) -> None:
        extents = [B.as_int(b) for b in bounds]
        if any(e is None for e in extents):
            raise err("the number of thread groups must be a compile-time integer", s.levels[0])
        total = 1
        for e in extents:
            total *= e
        if nested:  # one thread region over all groups' threads
            check_region_threads(total * threads, f" ({total} thread groups of {threads} "
                                 "threads)", s.loc)
            par = ir.Parallel("__".join(names) + "__t", total * threads, "thread", 1, [],
                              loc=s.loc)
            t = ir.Sym(par.var, "s32")
            inst = B.binop("/", t, B.const(threads))
            lanes = (t, threads)
        else:
            par = ir.Parallel("__".join(names) + "__g", total, level, threads, [], loc=s.loc)
            inst, lanes = ir.Sym(par.var, "s32"), None
        outer = self.scope
        self.scope = outer.child()
        bind_row_major(self.scope, names, extents, bounds, inst, total)
        self.in_parallel, self.group_lanes = par, lanes
        try:
            par.body = self.block(s.body.stmts)
        finally:
            self.in_parallel, self.group_lanes = None, None
            self.scope = outer
        self.emit(par)


def _whole_group(levels: list, threads: dict[str, int]) -> bool:
    outer, inner = levels
    n = threads.get(outer.level or "")
    return (outer.level in ("group", "group-4") and (inner.level or "thread") == "thread"
            and inner.var is not None and not inner.elements and len(inner.bounds) == 1
            and isinstance(inner.bounds[0], A.IntLit) and inner.bounds[0].value == n)


def _names(node, name: str) -> bool:
    """Whether `name` is read anywhere under `node`."""
    return any(isinstance(x, A.Name) and x.id == name for x in A.walk(node))
