"""The built-in functions of the language: one table, which the parser (a call of one of
these names is a builtin call, not a dimension access `sp(0)`), the rule checks (the "did
you mean" of a name that is not declared) and sema (the IR builtin each one computes) all
read, so that they cannot disagree on what is a builtin.

The names are the reference's (its scanner's keywords: `__rsqrt`, `__exp2f`, `__max`...;
a C spelling such as `__rsqrtf` or `__expf` is no builtin there, only an identifier) and
choreo-py's own (`cdiv`, `select`, the reductions, `print`).
"""
from __future__ import annotations

#: name as written -> the IR builtin it computes (choreo_py.ir.BUILTINS), or None: a
#: builtin with a form of its own (a statement, an atomic, `select`, a reduction) or one
#: the tile IR does not compute yet (sema refuses it by name where it is used).
FUNCTIONS: dict[str, str | None] = {
    # math (the reference's scalar builtins)
    "__acos": "acos", "__asin": "asin", "__atan": "atan", "__atan2": "atan2",
    "__cos": "cos", "__cosh": "cosh", "__sin": "sin", "__sinh": "sinh", "__tan": "tan",
    "__tanh": "tanh", "__exp": "exp", "__exp2f": "exp2", "__expm1": "expm1", "__log": "log",
    "__log1p": "log1p", "__pow": "pow", "__sqrt": "sqrt", "__rsqrt": "rsqrt",
    "__fabs": "abs", "__fmaf": "fma", "__frcp_rn": "rcp", "__max": "max", "__min": "min",
    "__ceil": None, "__floor": None, "__round": None, "__sign": None, "__isfinite": None,
    "__gelu": None, "__sigmoid": None, "__softplus": None,
    "__alignup": None, "__aligndown": None,
    # atomics and named barriers
    "__atomic_add": None, "__atomic_sub": None, "__atomic_exch": None, "__atomic_min": None,
    "__atomic_max": None, "__atomic_and": None, "__atomic_or": None, "__atomic_xor": None,
    "__atomic_cas": None, "__bar_arrive": None, "__bar_sync": None,
    # choreo-py's
    "cdiv": "cdiv", "select": None, "reduce_max": None, "reduce_sum": None,
    "all_reduce_sum": None, "copy": None, "assert": None, "print": None, "println": None,
}

#: The prefix of a library call (`__lib_name(...)`): a builtin call of any such name.
LIBRARY_PREFIX = "__lib_"


def is_builtin(name: str) -> bool:
    return name in FUNCTIONS or name.startswith(LIBRARY_PREFIX)


def ir_builtin(name: str) -> str | None:
    """The IR builtin `name` computes; None for one without (see FUNCTIONS)."""
    return FUNCTIONS.get(name)
