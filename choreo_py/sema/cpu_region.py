"""The parallel levels inside a `: device(cpu)` region, run as loops.

A CPU region is one host thread (sema/host.py device_region). A parallel
statement inside it (`parallel by 1 : block  parallel q by 4 : thread {...}`)
says its iterations are independent, so running them one after another is
one of the schedules the statement allows: each level becomes a `foreach`
over its variables (`p by N` binds `p` in [0, N), unnamed levels get a
hidden name). That holds only while the iterations do not wait for each
other: a body with a barrier, an event, a wait or trigger, a role
(`inthreads`), a shared buffer or a device call is left as it is, and
refused by name as before.
"""
from __future__ import annotations

import itertools

from ..frontend import ast as A

# Statements whose meaning needs the iterations to run at once (they synchronise or
# share per-block state), so a parallel level around them is no loop.
_CONCURRENT = (A.Sync, A.Wait, A.Trigger, A.InThreads, A.EventDecl, A.Yield, A.Swap,
               A.MmaFill, A.MmaLoad, A.MmaOp, A.MmaStore, A.MmaScale, A.AsmStmt, A.InlineCpp)


def as_loops(stmts: list[A.Stmt], hidden=None) -> list[A.Stmt]:
    """`stmts` with each parallel statement that may run sequentially made loops
    (`hidden` numbers the variables of unnamed levels, `_cpu0`, `_cpu1`, ...)."""
    hidden = itertools.count() if hidden is None else hidden
    return [_statement(s, hidden) for s in stmts]


def _statement(s: A.Stmt, hidden) -> A.Stmt:
    if isinstance(s, A.ParallelBy) and _sequential(s):
        names = [lv.elements or [lv.var or f"_cpu{next(hidden)}"] for lv in s.levels]
        body = A.Block(stmts=as_loops(s.body.stmts, hidden), loc=s.body.loc)
        for lvl, level_names in reversed(list(zip(s.levels, names))):
            body = _loop(lvl, level_names, body)
        return body
    return s


def _sequential(s: A.ParallelBy) -> bool:
    if s.is_async or s.stream or s.attributes:
        return False
    if any(lv.device_target or len(lv.bounds) != len(lv.elements or [None])
           for lv in s.levels):  # (`parallel p by [4, 2]`: a 2-D index, no loop variable)
        return False
    return not any(_concurrent(n) for n in A.walk(s.body))


def _concurrent(n) -> bool:
    if isinstance(n, _CONCURRENT):
        return True
    if isinstance(n, A.BufferDecl) and n.storage == "shared":
        return True
    return isinstance(n, A.Call) and not n.func.startswith("croq::")


def _loop(lvl: A.ParallelLevel, names: list[str], body: A.Block) -> A.Block:
    for name, bound in reversed(list(zip(names, lvl.bounds))):
        loop = A.Foreach(ranges=[], bindings=[A.WithBinding(name=name, elements=[], domain=bound,
                                                 loc=lvl.loc)],
                         attrs=[], body=body, loc=lvl.loc)
        body = A.Block(stmts=[loop], loc=lvl.loc)
    return body
