"""Grid extents as host-side Python: the launcher computes them from the dimensions."""
from __future__ import annotations

from choreo_py import ir
from choreo_py.diagnostics import ChoreoError


def py_expr(e: ir.Expr) -> str:
    """Host-side Python for a grid extent (dims are keyword arguments)."""
    if isinstance(e, ir.Const):
        return str(e.value)
    if isinstance(e, ir.Sym):
        return e.name
    if isinstance(e, ir.Bin) and e.op in ("+", "-", "*", "/", "%"):
        op = "//" if e.op == "/" else e.op
        return f"({py_expr(e.lhs)} {op} {py_expr(e.rhs)})"
    if isinstance(e, ir.Call) and e.fn == "cdiv":
        a, b = (py_expr(x) for x in e.args)
        return f"(-(-{a} // {b}))"
    if isinstance(e, ir.Call) and e.fn in ("min", "max"):
        return f"{e.fn}({', '.join(py_expr(x) for x in e.args)})"
    raise ChoreoError("a grid extent that the launcher cannot compute")
