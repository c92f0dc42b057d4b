"""Building IR expressions with constant folding and the usual algebraic identities.

Types and folded values follow the scalar C semantics of c_scalars.

Sema and the view normaliser build offsets such as `batch * 1 + 0 * Q_SEQ`;
folding here keeps the printed IR and the emitted code readable
(`batch`), and makes shapes concrete integers wherever they can be.
"""
from __future__ import annotations

import dataclasses

from . import c_scalars
from choreo_py import ir

INT = "s32"


def const(v, dtype: str | None = None) -> ir.Const:
    if dtype is None:
        dtype = "bool" if isinstance(v, bool) else ("f32" if isinstance(v, float) else INT)
    return ir.Const(v, dtype)


def dims(b) -> tuple[ir.Expr, ...]:
    """A buffer's shape as expressions (a `RunBuffer`'s already are)."""
    return tuple(d if isinstance(d, ir.Expr) else const(d) for d in b.shape)


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
LOGICAL = ("&&", "||")


def convert(e: ir.Expr, dtype: str) -> ir.Expr:
    """`e` as a value of `dtype`: a constant is converted here, anything else gets an
    explicit `to<dtype>` node, so that every operator's operands have the type the
    IR says (the PTX instructions are typed: `mul.f32` takes no integer operand)."""
    if getattr(e, "dtype", dtype) == dtype:
        return e
    if isinstance(e, ir.Const):
        if dtype == "bool":
            return ir.Const(bool(e.value), "bool")
        if ir.is_float(dtype):
            return ir.Const(c_scalars.to_float(e.value, dtype), dtype)
        if not ir.is_float(e.dtype):  # C: wraps to the type (4000000000u as s32 is negative)
            return ir.Const(c_scalars.wrap(int(e.value), dtype), dtype)
    if dtype == "bool":  # C: a number used as a condition is compared with zero
        return ir.Bin("!=", e, ir.Const(0.0 if ir.is_float(e.dtype) else 0, e.dtype), "bool")
    return ir.Call("to", (e,), dtype)


def promote(op: str, a: ir.Expr, b: ir.Expr) -> tuple[ir.Expr, ir.Expr]:
    """C's usual arithmetic conversions made explicit: a condition used as a number is
    an int (0 or 1); an integer meeting a float becomes that float; `&&`/`||` take
    conditions. Integer/integer mixes keep the IR's existing convention (a literal
    adopts the other side's integer type)."""
    if op in LOGICAL:
        return convert(a, "bool"), convert(b, "bool")
    ta, tb = getattr(a, "dtype", INT), getattr(b, "dtype", INT)
    if ta == "bool" and tb != "bool":
        a, ta = convert(a, INT), INT
    if tb == "bool" and ta != "bool":
        b, tb = convert(b, INT), INT
    if ta == tb == "bool" and op not in ("==", "!=", "?:"):
        a, b = convert(a, INT), convert(b, INT)
    rt = result_type(a, b)
    if ir.is_float(rt):
        a, b = convert(a, rt) if not ir.is_float(ta) else a, convert(b, rt) if not ir.is_float(tb) else b
    return a, b


def assigned(value: ir.Expr, dtype: str) -> ir.Expr:
    """`value` stored into a `dtype` destination: C's assignment promotions (an integer or
    a condition into a float, a condition into an integer) made explicit. Narrowing
    (float to int, f32 to bf16) stays as written: it needs `__to`."""
    vt = getattr(value, "dtype", dtype)
    if vt == dtype:
        return value
    if ir.is_float(dtype) and not ir.is_float(vt) or (vt == "bool" and dtype != "bool"):
        return convert(value, dtype)
    return value


def binop(op: str, a: ir.Expr, b: ir.Expr, dtype: str | None = None) -> ir.Expr:
    a, b = promote(op, a, b)
    if dtype is None:
        dtype = "bool" if op in COMPARISONS else result_type(a, b)
    x, y = as_int(a), as_int(b)
    if x is not None and y is not None and not (op in ("/", "%") and y == 0):
        if op in ("<<", ">>") and not 0 <= y < 64:
            return ir.Bin(op, a, b, dtype)
        if op in COMPARISONS and op not in ("&&", "||"):
            # two constants meet in C's common type of their own types: -1 <= 4000000000u
            # is false (-1 is 4294967295 there), as the GPU and the interpreter compare
            t = c_scalars.promote(a.dtype, b.dtype)
            x, y = c_scalars.wrap(x, t), c_scalars.wrap(y, t)
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
    a, b = (convert(e, INT) if getattr(e, "dtype", INT) == "bool" else e for e in (a, b))
    x, y = as_int(a), as_int(b)
    if x is not None and y is not None and y > 0:
        return ir.Const(c_scalars.cdiv(x, y), result_type(a, b))
    if y == 1:
        return a
    return ir.Call("cdiv", (a, b), result_type(a, b))


def fold_min_max(fn: str, args) -> ir.Const:
    """`__min` / `__max` of integer constants, in their common type (C's): `__min(1000u, 3u)`
    is `3u`, an unsigned 3 (a plain 3 made `3 <= x` of an unsigned x compare signed), and
    `__min(1000u, -1)` is 1000u (-1 is 4294967295 there)."""
    # both sides are constants: C's rule by their types alone (the literal-adopts-the-other-
    # side convention has no side to adopt)
    dtype = c_scalars.promote(args[0].dtype, args[1].dtype) if len(args) == 2 else args[0].dtype
    vals = [c_scalars.wrap(as_int(a), dtype) for a in args]
    return const((min if fn == "min" else max)(vals), dtype)


def substitute(e: ir.Expr, env: dict) -> ir.Expr:
    """`e` with each name of `env` replaced by its expression, folded again (a callee's
    `N / 2` of a call whose N is 16 is 8)."""
    if isinstance(e, ir.Sym):
        return env.get(e.name, e)
    if isinstance(e, ir.Bin):
        return binop(e.op, substitute(e.lhs, env), substitute(e.rhs, env), e.dtype)
    if isinstance(e, ir.Call) and e.fn == "cdiv":
        return cdiv(*(substitute(a, env) for a in e.args))
    kind = type(e)
    changes = {n: substitute(getattr(e, n), env) for n in ir._walked_fields(kind, ir.EXPR_FIELD)
               if getattr(e, n) is not None}
    changes.update({n: tuple(substitute(x, env) for x in getattr(e, n))
                    for n in ir._walked_fields(kind, ir.EXPRS_FIELD)})
    return dataclasses.replace(e, **changes) if changes else e
