"""`inthreads` forms beside the role of thread groups (sema/kernel.py's s_InThreads).

In a block's own code (no parallel level around it), `inthreads (p < 2) { ... }` is an
`if` on the block's indices: every thread of the block runs its code, so the blocks
whose indices satisfy the condition run the body and the others skip it.

In a region of single threads (`parallel g by 2 : group-4, t by 128 : thread`, one
instance per thread), a condition may also read values known only at run time:
`inthreads.async (g == 0 && t < limit)`. Its conjuncts that depend on the instance
alone choose the role's members, as any role's condition does; the others guard the
body inside the role (`if (t < limit)`), so that exactly the threads the whole condition
selects run it. That is only the same program where no statement of the body is an
operation of the whole role (a copy one thread issues for all, an MMA, a trigger whose
arrivals the event counts per member, a meeting of the role's threads), so a body
holding one stays refused by name.
"""
from __future__ import annotations

from ..frontend import ast as A
from .. import ir
from ..ir import build as B
from ..ir.eval import EvalError, evaluate
from ..ir.printer import expr as print_expr
from ..construct_names import describe
from .exprs import err
from .values import Unsupported

#: What a guarded role body may hold: statements each thread runs on its own.
PER_THREAD = (ir.Let, ir.Assign, ir.If, ir.For, ir.While, ir.Break, ir.Wait)


class RoleFormBuilder:
    """Mixin of the statement builder (needs scalar, block, emit and the parallel state)."""

    def block_inthreads(self, s: A.InThreads) -> None:
        cond = self.scalar(s.cond)
        body = self.block(s.body.stmts)
        if any(isinstance(x, ir.Parallel) for x in ir.walk(body)):
            raise Unsupported("'inthreads' around parallel levels of thread groups", s.loc)
        self.emit(ir.If(cond, body, loc=s.loc))

    def role_members(self, cond: ir.Expr, par: ir.Parallel, s: A.InThreads) -> list[int]:
        """The thread groups `cond` selects (it may read the parallel variable alone), none
        of them already in an asynchronous role of the same region."""
        members = []
        for p in range(par.extent):
            try:
                if evaluate(cond, {par.var: p}):
                    members.append(p)
            except EvalError:
                # Valid Choreo (the predicate need only differ between threads); the IR
                # assigns roles to thread groups when compiling.
                raise Unsupported(f"an 'inthreads' condition depending on more than the "
                                  f"parallel variable '{par.var}'", s.cond.loc) from None
        if not members:
            raise err(f"this 'inthreads' condition selects none of the {par.extent} thread groups",
                      s.cond)
        for other in self.out:
            if isinstance(other, ir.Role) and other.is_async and s.is_async:
                both = sorted(set(other.members) & set(members))
                if both:
                    raise err(f"roles ({other.name}) and ({print_expr(cond)}) both select thread "
                              f"group {par.var}={both[0]}; asynchronous roles must not overlap",
                              s.cond)
        return members

    def split_guard(self, cond: ir.Expr, par: ir.Parallel, s: A.InThreads):
        """(the condition on the instance, the run-time guard or None)."""
        if par.threads != 1:  # instances of several threads: a role's code is collective
            return cond, None
        static, dynamic = [], []
        for c in _conjuncts(cond):
            (static if _on_instance(c, par) else dynamic).append(c)
        if not dynamic:
            return cond, None
        return _conjunction(static) or B.const(True), _conjunction(dynamic)

    def guarded_body(self, guard: ir.Expr, body: list[ir.Stmt], s: A.InThreads):
        for x in ir.walk(body):
            items = getattr(x, "items", ())
            if not isinstance(x, PER_THREAD) or any(isinstance(i, ir.FutureRef) for i in items):
                raise Unsupported(f"an 'inthreads' condition on run-time values around "
                                  f"{describe(x)}, an operation of the whole role", x.loc or s.loc)
        return [ir.If(guard, body, loc=s.loc)]


def _conjuncts(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.Bin) and e.op == "&&":
        return _conjuncts(e.lhs) + _conjuncts(e.rhs)
    return [e]


def _conjunction(parts: list[ir.Expr]):
    out = None
    for p in parts:
        out = p if out is None else B.binop("&&", out, p)
    return out


def _on_instance(e: ir.Expr, par: ir.Parallel) -> bool:
    """Whether `e` has a value for every instance from the instance index alone."""
    try:
        for p in range(par.extent):
            evaluate(e, {par.var: p})
    except EvalError:
        return False
    return True
