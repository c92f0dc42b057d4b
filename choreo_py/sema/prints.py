"""`println(...)` / `print(...)` in a kernel: text and scalar values, one line per thread.

The arguments are printed one after another with one space between two of them
(the reference's CPU model, tools/co-mock/mock_interp.cpp `CallBIF`, writes " "
before every argument but the first). String literals are printed as written; an ituple as its elements in braces
(`{0, 1, 3}`, the form the reference compiler prints), an mdspan as its extents
in brackets (`[7, 8, 9]`, the form it is written in); every other argument
must be a scalar: an integer in decimal, a float as C++'s `ostream <<` writes
it (`%g`: six significant digits), a condition as `true` / `false`
(tools/co-mock/mock_memory.cpp `Value::ToString`). The statement becomes an
`ir.Print` (lowered to a device printf). Outside a kernel it is host code.
"""
from __future__ import annotations

from ..frontend import ast as A
from .. import ir
from .values import ITupleValue, Scalar, ShapeValue, Unsupported


class PrintBuilder:
    """Mixin of the statement builder (needs value, emit, the kernel state)."""

    def print_stmt(self, c: A.CallExpr) -> None:
        items: list = []
        for i, a in enumerate(c.args):
            if i > 0:
                items.append(" ")
            if isinstance(a, A.StringLit):
                items.append(a.value)
                continue
            v = self.value(a)
            if isinstance(v, (ITupleValue, ShapeValue)):  # a bounded one: its current values
                tup = isinstance(v, ITupleValue)
                items.append("{" if tup else "[")
                for k, e in enumerate(v.elems if tup else v.dims):
                    items += [", "] * (k > 0) + [e]
                items.append("}" if tup else "]")
                continue
            if not isinstance(v, Scalar):
                raise Unsupported(f"printing {self.describe(a)}, which is not a scalar", a.loc)
            items.append(v.expr)
        if c.func == "println":
            items.append("\n")
        self.emit(ir.Print(_merged(items), loc=c.loc))


def _merged(items: list) -> list:
    """Adjacent texts as one (the printed form stays short)."""
    out: list = []
    for x in items:
        if isinstance(x, str) and out and isinstance(out[-1], str):
            out[-1] += x
        else:
            out.append(x)
    return out
