"""The built-in functions of the language: one table, which the parser (a call of one of
these names is a builtin call, not a dimension access `sp(0)`), the rule checks (the "did
you mean" of a name that is not declared) and sema (the IR builtin each one computes) all
read, so that they cannot disagree on what is a builtin.

The names are the reference's (its scanner's keywords: `__rsqrt`, `__exp2f`, `__max`...)
and choreo-py's own (`cdiv`, `select`, the reductions, `print`). The reference accepts one
spelling of each math builtin: its scanner matches the longest token, so a C spelling such
as `__rsqrtf` or `__expf` is an identifier there, not a builtin; here it is reported as not
declared, with the language's spelling as the hint (`C_SPELLINGS`).

docs/reference/builtins.md is generated from `MATH` (bench/builtins_precision.py).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MathBuiltin:
    """A scalar math builtin: its spelling, the IR builtin it computes, its parameters
    (their names, for the reference page) and what it computes."""

    name: str
    ir: str
    params: tuple[str, ...]
    what: str

    def signature(self) -> str:
        return f"{self.name}({', '.join(self.params)})"


#: The reference's math builtins (its scanner's keywords), grouped as its numerics page.
MATH: tuple[MathBuiltin, ...] = tuple(MathBuiltin(n, ir, tuple(p.split()), what)
                                      for n, ir, p, what in (
    ("__exp", "exp", "x", "e^x"),
    ("__exp2f", "exp2", "x", "2^x"),
    ("__expm1", "expm1", "x", "e^x - 1"),
    ("__log", "log", "x", "natural logarithm"),
    ("__log1p", "log1p", "x", "log(1 + x)"),
    ("__pow", "pow", "x y", "x^y"),
    ("__sin", "sin", "x", "sine"),
    ("__cos", "cos", "x", "cosine"),
    ("__tan", "tan", "x", "tangent"),
    ("__asin", "asin", "x", "inverse sine"),
    ("__acos", "acos", "x", "inverse cosine"),
    ("__atan", "atan", "x", "inverse tangent"),
    ("__atan2", "atan2", "y x", "inverse tangent of y / x, in the quadrant of (x, y)"),
    ("__sinh", "sinh", "x", "hyperbolic sine"),
    ("__cosh", "cosh", "x", "hyperbolic cosine"),
    ("__tanh", "tanh", "x", "hyperbolic tangent"),
    ("__sqrt", "sqrt", "x", "square root"),
    ("__rsqrt", "rsqrt", "x", "1 / sqrt(x)"),
    ("__frcp_rn", "rcp", "x", "1 / x, rounded to nearest"),
    ("__fmaf", "fma", "x y z", "x * y + z, rounded once"),
    ("__fabs", "abs", "x", "absolute value"),
    ("__max", "max", "x y", "the larger (a NaN operand gives the other; +0 above -0)"),
    ("__min", "min", "x y", "the smaller (a NaN operand gives the other; -0 below +0)"),
    ("__ceil", "ceil", "x", "the least integer not below x"),
    ("__floor", "floor", "x", "the greatest integer not above x"),
    ("__round", "round", "x", "the nearest integer, a half away from zero"),
    ("__sign", "sign", "x", "-1, 0 or 1 (0 for NaN)"),
    ("__isfinite", "isfinite", "x", "1 if x is finite, else 0"),
    ("__gelu", "gelu", "x", "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"),
    ("__sigmoid", "sigmoid", "x", "1 / (1 + e^-x)"),
    ("__softplus", "softplus", "x", "log(1 + e^x)"),
))

#: name as written -> the IR builtin it computes (choreo_py.ir.BUILTINS), or None: a
#: builtin with a form of its own (a statement, an atomic, `select`, a reduction, the
#: alignments, which sema computes on integers).
FUNCTIONS: dict[str, str | None] = {
    **{m.name: m.ir for m in MATH},
    "__alignup": None, "__aligndown": None,
    # atomics and named barriers
    "__atomic_add": None, "__atomic_sub": None, "__atomic_exch": None, "__atomic_min": None,
    "__atomic_max": None, "__atomic_and": None, "__atomic_or": None, "__atomic_xor": None,
    "__atomic_cas": None, "__bar_arrive": None, "__bar_sync": None,
    # choreo-py's
    "cdiv": "cdiv", "select": None, "reduce_max": None, "reduce_sum": None,
    "all_reduce_sum": None, "copy": None, "assert": None, "print": None, "println": None,
}


#: the math builtins whose C library function has an `f` (float) form: `expf`, `rsqrtf`...
_C_FLOAT_FORMS = ("__exp", "__expm1", "__log", "__log1p", "__pow", "__sin", "__cos", "__tan",
                  "__asin", "__acos", "__atan", "__atan2", "__sinh", "__cosh", "__tanh",
                  "__sqrt", "__rsqrt", "__ceil", "__floor", "__round", "__fabs")


def _c_spellings() -> dict[str, str]:
    """The C and CUDA spellings of the math builtins (`__expf`, `__rsqrtf`, `__exp2`,
    `__fmaxf`...), which are not the language's, each with the builtin it means."""
    out = {c + "f": c for c in _C_FLOAT_FORMS}
    for c, name in (("__exp2", "__exp2f"), ("__fma", "__fmaf"), ("__abs", "__fabs"),
                    ("__fmax", "__max"), ("__fmaxf", "__max"), ("__fmin", "__min"),
                    ("__fminf", "__min"), ("__frcp", "__frcp_rn")):
        out[c] = name
    return out


#: a C spelling -> the language's builtin it means (the hint of "is not declared")
C_SPELLINGS = _c_spellings()

#: The prefix of a library call (`__lib_name(...)`): a builtin call of any such name.
LIBRARY_PREFIX = "__lib_"


def is_builtin(name: str) -> bool:
    return name in FUNCTIONS or name.startswith(LIBRARY_PREFIX)


def ir_builtin(name: str) -> str | None:
    """The IR builtin `name` computes; None for one without (see FUNCTIONS)."""
    return FUNCTIONS.get(name)


def spelling_hint(name: str) -> str:
    """" (did you mean '__exp'?)" for a C spelling of a math builtin, else ""."""
    meant = C_SPELLINGS.get(name)
    return f" (did you mean '{meant}'?)" if meant else ""
