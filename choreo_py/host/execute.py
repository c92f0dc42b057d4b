"""The host program of a `__co__` function: its statements run in order on the host.

`ir.Function.body` is the host code (sema/host_code.py): launches, and around
them host loops, branches and scalars, prints, entry asserts and whole-tensor
copies. `run_host` walks it with an environment of the call's sizes and the
host variables, and hands each launch, print and copy to the engine's
callbacks (the interpreter: interp/host.py; the GPU runtime:
runtime/host_program.py), so both run the same host semantics. A kernel
launched inside a host loop sees the environment of that iteration: its
scalar arguments (`ir.Kernel.scalars`) are read from it.

Integer arithmetic is C's (ir/eval.py); a loop variable is local to its loop
(its previous value, if any, is restored after it).
"""
from __future__ import annotations

from typing import Callable, Optional

from .. import ir
from ..construct_names import describe
from ..diagnostics import ChoreoError
from ..ir.eval import EvalError, evaluate
from .missing_result import MissingResult


class HostError(ChoreoError):
    """A host statement that cannot be run, located at it (a division by zero, say)."""


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class HostRun:
    """One call's host program. `launch(stmt, env)`, `show(stmt, env)` (a println),
    `check(stmt, env)` (an assert), `copy(stmt, env)` (a DmaCopy) and `call(stmt, args,
    env)` (a HostCall: returns the callee's result) are the engine's; an engine without
    `call` refuses one by name."""

    def __init__(self, env: dict, launch: Callable, show: Callable, check: Callable,
                 copy: Callable, call: Optional[Callable] = None) -> None:
        self.env = env
        self.launch, self.show, self.check, self.copy = launch, show, check, copy
        self.call = call

    def value(self, e: ir.Expr, loc):
        try:
            return evaluate(e, self.env)
        except EvalError as x:
            raise HostError(f"host code: {x}", loc) from None

    def run(self, stmts: list[ir.Stmt]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: ir.Stmt) -> None:
        rule = _RULES.get(type(s))
        if rule is None:
            # sema/host_code.py builds no other statement on the host
            raise HostError(f"host code cannot run {describe(s)}", getattr(s, "loc", None))
        rule(self, s)

    def s_Launch(self, s): self.launch(s, self.env)
    def s_Print(self, s): self.show(s, self.env)
    def s_Assert(self, s): self.check(s, self.env)
    def s_Break(self, s): raise _Break()
    def s_Continue(self, s): raise _Continue()

    def s_DmaCopy(self, s): self.copy(s, self.env)

    def s_HostCall(self, s):
        """The callee runs with the values of its scalar arguments (the engine binds its
        tensors); a scalar result becomes the caller's host variable."""
        if self.call is None:
            raise HostError(f"{describe(s)} ('{s.func}') is not run by this engine yet", s.loc)
        scalars = {n: self.value(v, s.loc) for n, v in zip(s.scalars, s.values)}
        result = self.call(s, scalars, self.env)
        if s.result is not None and s.result_dtype is not None:
            self.env[s.result] = result

    def s_Let(self, s): self.env[s.name] = self.value(s.value, s.loc)
    def s_Var(self, s): self.env[s.name] = self.value(s.init, s.loc)
    def s_Assign(self, s): self.env[s.name] = self.value(s.value, s.loc)

    def s_If(self, s):
        self.run(s.then if self.value(s.cond, s.loc) else s.orelse)

    def s_While(self, s):
        while self.value(s.cond, s.loc):
            if not self._iteration(s.body):
                break

    def s_For(self, s):
        start, stop = self.value(s.start, s.loc), self.value(s.stop, s.loc)
        step = self.value(s.step, s.loc)
        had, saved = s.var in self.env, self.env.get(s.var)
        try:
            for i in range(int(start), int(stop), int(step)):
                self.env[s.var] = i
                if not self._iteration(s.body):
                    break
        finally:
            if had:
                self.env[s.var] = saved
            else:
                self.env.pop(s.var, None)

    def _iteration(self, body) -> bool:
        """Runs one iteration; False after a `break`."""
        try:
            self.run(body)
        except _Break:
            return False
        except _Continue:
            pass
        return True


_RULES = {ir.Launch: HostRun.s_Launch, ir.Print: HostRun.s_Print, ir.Assert: HostRun.s_Assert,
          ir.Break: HostRun.s_Break, ir.Continue: HostRun.s_Continue,
          ir.DmaCopy: HostRun.s_DmaCopy, ir.HostCall: HostRun.s_HostCall, ir.Let: HostRun.s_Let, ir.Var: HostRun.s_Var,
          ir.Assign: HostRun.s_Assign, ir.If: HostRun.s_If, ir.While: HostRun.s_While,
          ir.For: HostRun.s_For}


def kernel_env(kernel: ir.Kernel, env: dict) -> dict:
    """The dimensions and scalar arguments a kernel launched now receives."""
    return {d: env[d] for d in kernel.symbolic_dims if d in env}


def function_result(fn: ir.Function, tensors: dict, values: dict):
    """What a call returns: the result tensor, a scalar result's number (a host variable,
    sema/host.py), or None for a function that returns nothing; a function declared to
    return a value that ends without `return` gives a MissingResult, which refuses use."""
    if fn.missing_return is not None:
        return MissingResult(fn.name, fn.missing_return, fn.loc)
    if fn.result is None:
        return None
    return tensors[fn.result] if fn.result in tensors else values[fn.result]
