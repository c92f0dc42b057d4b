"""Context rules: where a statement may stand.

`break` leaves a loop, so it stands in one (and a `parallel` body is no loop);
a `parallel` body is a kernel, which has nowhere to `return` to, while
`yield` and `call` of a device function belong to kernels only, and a call of
a `__co__` function to host code.  A kernel
call passes integers, spanned data or addresses.  `inthreads` selects threads
of a parallel level, so it needs one around it and a predicate that differs
between those threads; only the outermost `inthreads` of a level may be
`.async` (it is what splits the level into roles).  A `while` waits on an
event or tests a bool, not both at once.  A function returns a value exactly
when it is declared to.
"""
from __future__ import annotations

from ..frontend import ast as A
from ..frontend import co_calls
from ..frontend.ast import declared_result
from . import types as Ty


def brk(ck, s) -> None:
    if ck.loops == 0:
        word = "break" if isinstance(s, A.Break) else "continue"
        ck.error(f"'{word}' outside a loop ('foreach' or 'while')", s.loc)


def ret(ck, s: A.Return) -> None:
    ck.returns.append(s)
    if ck.in_parallel:
        ck.error("'return' inside a 'parallel' block: a kernel has nothing to return to",
                 s.loc)


def yld(ck, s: A.Yield) -> None:
    if not ck.in_parallel:
        ck.error("'yield' outside any 'parallel' block", s.loc)


def call(ck, c: A.Call) -> None:
    if c.func.startswith("croq::") or ck.co_callee(c) is not None:  # (a __co__ function: below)
        return
    if not ck.in_parallel:
        ck.lenient_error(f"'call {c.func}' outside any 'parallel' block: device functions are "
                 "called from kernels", c.loc)
    for i, a in enumerate(c.args, 1):
        t = ck.t(a)
        if t.kind in (Ty.FUTURE, Ty.EVENT, Ty.STRING, Ty.MDSPAN, Ty.ITUPLE):
            ck.error(f"argument {i} of 'call {c.func}' is {Ty.describe(t.kind)}, which can not be "
                     "passed to a device function", a.loc)


def co_call(ck, node) -> None:
    """A call of a `__co__` function is the host's (frontend/co_calls.py): inside a parallel
    region it is refused by name (a warning from a plain check: the reference's sema only
    warns that it finds no device function of that name)."""
    if ck.in_parallel and ck.co_callee(node) is not None:
        refusal = co_calls.in_kernel_call(node)
        ck.lenient_error(refusal.message, refusal.loc)


def function_returns(ck, fn: A.FunctionDef) -> None:
    name = getattr(fn.return_type, "name", None)
    valued = [r for r in ck.returns if r.value is not None]
    if name == "void":
        for r in valued:
            ck.lenient_error(f"'{fn.name}' is a void function and returns no value", r.value.loc)
    elif declared_result(fn) is not None and not valued:
        ck.strict_check_error(f"the non-void function '{fn.name}' has no 'return' statement",
                              fn.loc)


def inthreads(ck, s: A.InThreads) -> None:
    if not ck.in_parallel:
        ck.error("'inthreads' outside any 'parallel' block", s.loc)
        return
    t = ck.t(s.cond)
    if t.kind not in (Ty.BOOL, Ty.UNKNOWN):
        ck.error(f"the predicate of 'inthreads' is {Ty.describe(t.kind)}, not a bool", s.cond.loc)
    elif not ck.divergent(s.cond):
        ck.error("the predicate of 'inthreads' is the same for every thread; it must "
                 "depend on a parallel variable", s.cond.loc)
    if s.is_async and ck.inthreads[-1]:
        ck.error("only the outermost 'inthreads' of a parallel level can be '.async'",
                 s.loc)


def while_cond(ck, s: A.While) -> None:
    t = ck.t(s.cond)
    if t.kind not in (Ty.BOOL, Ty.EVENT, Ty.UNKNOWN):
        ck.error(f"the condition of 'while' is {Ty.describe(t.kind)}; it must be a bool or an event",
                 s.cond.loc)
        return
    for node in A.walk(s.cond):
        if isinstance(node, A.Binary) and node.op in ("&&", "||"):
            kinds = {ck.t(node.lhs).kind, ck.t(node.rhs).kind}
            if kinds == {Ty.EVENT, Ty.BOOL}:
                ck.error(f"an event and a bool can not be mixed with '{node.op}' in a "
                         "'while' condition", node.loc)


def if_cond(ck, s: A.If) -> None:
    t = ck.t(s.cond)
    if t.kind in (Ty.ITUPLE, Ty.MDSPAN, Ty.STRING, Ty.FUTURE):
        ck.error(f"the condition of 'if' is {Ty.describe(t.kind)}, not a bool", s.cond.loc)



RULES = {
    A.Break: [brk],
    A.Continue: [brk],
    A.Return: [ret],
    A.Yield: [yld],
    A.Call: [call, co_call],
    A.CallExpr: [co_call],
    A.DimOf: [co_call],
    A.InThreads: [inthreads],
    A.While: [while_cond],
    A.If: [if_cond],
}
EXIT_RULES = {A.FunctionDef: [function_returns]}
