"""`println` in the interpreter: the line C's printf writes for the thread that runs it.

The format is ir.print_format's (the one the device printf gets): integers
as `%lld` (printed by Python's `%d`), floats as `%g` of their double value
(Python's `%g` is C's), conditions as `%s` of "true" / "false".
"""
from __future__ import annotations

from .. import ir


def print_line(run, s: ir.Print, th) -> None:
    _write(s, lambda v: run.ev(v, th.env, s.loc))


def host_print(s: ir.Print, env: dict) -> None:
    """A `println` of the host program (its values: constants and the call's sizes)."""
    from ..ir.eval import EvalError, evaluate
    from .errors import InterpError

    def value(v):
        try:
            return evaluate(v, env)
        except EvalError as e:
            raise InterpError(str(e), s.loc) from None
    _write(s, value)


def _write(s: ir.Print, value) -> None:
    fmt, values = ir.print_format(s.items, s.c_format)
    args = []
    for v in values:
        x = value(v)
        x = x.item() if hasattr(x, "item") else x
        args.append(_argument(x, v.dtype, s.c_format))
    print(fmt.replace("%lld", "%d") % tuple(args), end="")


def _argument(x, dtype: str, c_format: bool):
    """The printf argument of one value (as the format's spec for its type reads it)."""
    if ir.is_float(dtype):
        return float(x)
    if dtype == "bool" and not c_format:
        return "true" if x else "false"
    return int(x)
