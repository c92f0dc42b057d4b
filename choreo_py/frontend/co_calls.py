"""Calls of one `__co__` function from another: which node calls which function.

The reference's CPU model, co-mock (tools/co-mock/mock_interp.cpp), knows every
`__co__` function of a file, and a call of one (`call f(a);`, or the value of
`f(a)` in `b = f(a);`) runs its body with its parameters bound to the arguments:
scalars by value, spanned data by reference (the caller's buffer itself); the value
of its `return` is the call's. Here such a call is one host statement of the caller
(sema/co_calls.py: `ir.HostCall`), which the host program runs (host/execute.py).

The parser reads `f(a)` as the dimension `a` of a shape named `f` (`sp(0)`), and
`f(a, b)` as a call of a builtin: a node is a call of `__co__` function `f` when its
name is no name the scope around it declares, and `f` is a function of the file
(`call f(...)` of a device function of that name is the device function's). Each
reader asks with its own scope (the rule checks, choreo_py/check/, and sema).
"""
from __future__ import annotations

from typing import Callable, Optional

from . import ast as A
from ..diagnostics import Diagnostic


def called_name(node) -> Optional[str]:
    """The function `node` calls by name, if it has the form of a call: `call f(..)`,
    `f(a, b)`, `f()`, or `f(a)` (a dimension `a` of a shape named `f`)."""
    if isinstance(node, (A.Call, A.CallExpr)):
        return node.func
    if isinstance(node, A.DimOf) and isinstance(node.base, A.Name):
        return node.base.id
    return None


def call_args(node) -> list:
    """The arguments of a call `called_name` names."""
    return [node.index] if isinstance(node, A.DimOf) else list(node.args)


def attach(items: list) -> None:
    """Gives every `__co__` function of a file the file's functions by name (`co_functions`,
    as `device_code` gives it the file's device code)."""
    table: dict[str, list[A.FunctionDef]] = {}
    for item in items:
        if isinstance(item, A.FunctionDef):
            table.setdefault(item.name, []).append(item)
    for item in items:
        if isinstance(item, A.FunctionDef):
            item.co_functions = table


def callee(fn: A.FunctionDef, node, declared: Callable[[str], bool]) -> Optional[list]:
    """The `__co__` functions of the file of that name (several: overloads) that `node`,
    in the body of `fn`, calls, or None. `declared(name)`: whether the reader's scope at
    `node` declares the name (then `f(a)` is a dimension of the shape `f`)."""
    name = called_name(node)
    if name is None:
        return None
    found = getattr(fn, "co_functions", {}).get(name)
    if not found or declared(name):
        return None
    if isinstance(node, A.Call) and name in device_function_names(fn):
        return None
    return found


def device_function_names(fn: A.FunctionDef) -> set[str]:
    """The device functions the file defines (frontend/c_subset.py reads them)."""
    from .c_subset import functions

    cached = fn.__dict__.get("_device_names")
    if cached is None:
        cached = set()
        for text in getattr(fn, "device_code", ()):
            cached |= set(functions(text))
        fn.__dict__["_device_names"] = cached
    return cached


def call_statement(s) -> Optional[tuple]:
    """(the call, the name its result is given or None) of a statement that is a call
    by its form: `call f(..);`, `f(..);`, `b = f(..);`, `b = call f(..);`."""
    if isinstance(s, A.ExprStmt) and called_name(s.expr) is not None:
        return s.expr, None
    if isinstance(s, A.Assign) and s.op == "=" and isinstance(s.target, A.Name) \
            and called_name(s.value) is not None:
        return s.value, s.target.id
    return None


def in_kernel_call(node) -> Diagnostic:
    """The refusal of a call of a `__co__` function inside a parallel region: the rule
    checks report it (check/context.py, a warning from a plain check), and sema's builds
    that run no rule check (`choreo run`) raise it (sema/co_calls.py): one wording."""
    name = called_name(node)
    return Diagnostic("error", f"a parallel region cannot call the __co__ function '{name}' "
                      "(the reference's rule: a kernel calls __co_device__ and __device__ "
                      f"functions with 'call'); call '{name}' from host code, outside any "
                      "parallel region", node.loc)
