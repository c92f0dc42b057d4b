"""Building IR expressions with constant folding and the usual algebraic identities.

Types and folded values follow the scalar C semantics of c_scalars.

Sema and the view normaliser build offsets such as `batch * 1 + 0 * Q_SEQ`;
folding here keeps the printed IR and the emitted code readable
(`batch`), and makes shapes concrete integers wherever they can be.
"""
from __future__ import annotations

from . import c_scalars, ir

INT = "s32"


def const(v, dtype: str | None = None) -> ir.Const:
    if dtype is None:
        dtype = "bool" if isinstance(v, bool) else ("f32" if isinstance(v, float) else INT)
    return ir.Const(v, dtype)


def as_int(e: ir.Expr) -> int | None:
    """The integer value of `e` if it is a constant, else None."""
    if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def result_type(a: ir.Expr, b: ir.Expr) -> str:
    """The type of `a op b`: C's usual arithmetic conversions (c_scalars.promote)."""
    return c_scalars.promote(getattr(a, "dtype", INT), getattr(b, "dtype", INT),
                             isinstance(a, ir.Const), isinstance(b, ir.Const))


COMPARISONS = c_scalars.COMPARISONS


def binop(op: str, a: ir.Expr, b: ir.Expr, dtype: str | None = None) -> ir.Expr:
    if dtype is None:
        dtype = "bool" if op in COMPARISONS else result_type(a, b)
    x, y = as_int(a), as_int(b)
    if x is not None and y is not None and not (op in ("/", "%") and y == 0):
        if op in ("<<", ">>") and not 0 <= y < 64:
            return ir.Bin(op, a, b, dtype)
        v = c_scalars.int_binary(op, x, y, dtype)  # what the GPU computes, wrap-around included
        return ir.Const(v, "bool") if isinstance(v, bool) else ir.Const(v, dtype)
    # Identities that never change a value: x+0, x-0, x*1, x/1, 0+x, 1*x, 0*x (ints).
    if op in ("+", "-") and y == 0:
        return a
    if op == "+" and x == 0:
        return b
    if op in ("*", "/") and y == 1:
        return a
    if op == "*" and x == 1:
        return b
    if op == "*" and (x == 0 or y == 0) and not dtype.startswith("f"):
        return ir.Const(0, dtype)
    return ir.Bin(op, a, b, dtype)


def add(a, b): return binop("+", a, b)
def sub(a, b): return binop("-", a, b)
def mul(a, b): return binop("*", a, b)


def cdiv(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    x, y = as_int(a), as_int(b)
    if x is not None and y is not None and y > 0:
        return ir.Const(c_scalars.cdiv(x, y), result_type(a, b))
    if y == 1:
        return a
    return ir.Call("cdiv", (a, b), result_type(a, b))
