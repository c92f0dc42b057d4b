"""Grid extents as host-side Python: the launcher computes them from the dimensions."""
from __future__ import annotations

from choreo_py import ir
from choreo_py.diagnostics import ChoreoError

from .names import py_name


def dim_params(dims: list[str]):
    """(parameter list, how a size is spelt) of the launcher's functions of the sizes
    (called with the sizes as keyword arguments): the sizes by name, unless one is not a
    plain Python name of the module (`lambda`, `max`, `_n`, a very long one); then they
    come as `**dims`."""
    if all(py_name(d) == d for d in dims):
        return ", ".join(dims), str
    return "**dims", lambda name: f"dims[{name!r}]"


def py_expr(e: ir.Expr, sym=str) -> str:
    """Host-side Python for a grid extent (dims are keyword arguments, spelt by `sym`)."""
    if isinstance(e, ir.Const):
        return str(e.value)
    if isinstance(e, ir.Sym):
        return sym(e.name)
    if isinstance(e, ir.Bin) and e.op in ("+", "-", "*", "/", "%"):
        op = "//" if e.op == "/" else e.op
        return f"({py_expr(e.lhs, sym)} {op} {py_expr(e.rhs, sym)})"
    if isinstance(e, ir.Call) and e.fn == "cdiv":
        a, b = (py_expr(x, sym) for x in e.args)
        return f"(-(-{a} // {b}))"
    if isinstance(e, ir.Call) and e.fn in ("min", "max"):
        return f"{e.fn}({', '.join(py_expr(x, sym) for x in e.args)})"
    raise ChoreoError("a grid extent that the launcher cannot compute")
