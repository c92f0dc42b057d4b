"""Evaluation of scalar IR expressions on Python integers and floats.

Shared by the static passes (pipeline check, shape folding) that need the
value of control expressions for concrete dimensions. Integer semantics
follow the IR dtypes as the interpreter's do (c_scalars: C truncating
division, two's-complement wrap-around).
"""
from __future__ import annotations

import math
import operator

from . import c_scalars, math_defs
from choreo_py import ir
from choreo_py.construct_names import describe


class EvalError(Exception):
    pass


wrap = c_scalars.wrap


def _shift(f):
    def shift(a, b):
        if not 0 <= b < 64:
            raise EvalError(f"shift by {b} is outside [0, 64)")
        return f(a, b)
    return shift


#: One table, built once: evaluation is the inner loop of the static passes.
_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul,
        "<<": _shift(operator.lshift), ">>": _shift(operator.rshift), "&": operator.and_,
        "|": operator.or_, "^": operator.xor, "==": operator.eq, "!=": operator.ne,
        "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _arith(op: str, a, b, dtype: str):
    if dtype in c_scalars.INT_BITS:
        try:
            return c_scalars.int_binary(op, int(a), int(b), dtype)
        except (ZeroDivisionError, ValueError) as e:
            raise EvalError(str(e)) from None
    if op == "/":
        return a / b if b else math.copysign(math.inf, a) if a else math.nan
    try:
        return _OPS[op](a, b)
    except KeyError:
        raise EvalError(f"the operator '{op}' on {dtype}") from None
    except (TypeError, OverflowError) as e:
        raise EvalError(str(e)) from None


def evaluate(e: ir.Expr, env: dict):
    rule = EXPRESSIONS.get(type(e))
    if rule is None:
        raise EvalError(f"cannot evaluate {describe(e)} as a scalar")
    return rule(e, env)


def _sym(e: ir.Sym, env: dict):
    try:
        return env[e.name]
    except KeyError:
        raise EvalError(f"'{e.name}' has no value here") from None


def _bin(e: ir.Bin, env: dict):
    if e.op == "&&":
        return bool(evaluate(e.lhs, env)) and bool(evaluate(e.rhs, env))
    if e.op == "||":
        return bool(evaluate(e.lhs, env)) or bool(evaluate(e.rhs, env))
    a, b = evaluate(e.lhs, env), evaluate(e.rhs, env)
    if e.op in ("==", "!=", "<", "<=", ">", ">=") and isinstance(a, int) and isinstance(b, int):
        # the common type of the two sides (C; the interpreter and the lowering compare so)
        t = c_scalars.promote(e.lhs.dtype, e.rhs.dtype, isinstance(e.lhs, ir.Const),
                              isinstance(e.rhs, ir.Const))
        a, b = wrap(a, t), wrap(b, t)
    return wrap(_arith(e.op, a, b, e.dtype), e.dtype)


def _un(e: ir.Un, env: dict):
    v = evaluate(e.operand, env)
    return wrap({"-": lambda: -v, "!": lambda: not v, "~": lambda: ~v}[e.op](), e.dtype)


def _call(fn: str, args: list, dtype: str):
    if fn == "cdiv":
        a, b = args
        if b == 0:
            raise EvalError("cdiv by zero")
        return c_scalars.wrap(c_scalars.cdiv(int(a), int(b)), dtype)
    if fn in ("min", "max"):
        return c_scalars.minmax(fn, *args) if len(args) == 2 else (min if fn == "min" else max)(args)
    if fn == "to":
        if ir.is_float(dtype):
            return c_scalars.to_float(args[0], dtype)
        try:
            return c_scalars.to_int(args[0], dtype)
        except ValueError as e:
            raise EvalError(str(e)) from None
    if fn in ("atan2", "pow", "fma"):
        try:
            return {"atan2": math.atan2, "pow": math.pow,
                    "fma": lambda a, b, c: a * b + c}[fn](*[float(a) for a in args])
        except (ValueError, OverflowError, ZeroDivisionError) as e:
            raise EvalError(f"{fn}: {e}") from None
    if fn in math_defs.FUNCTIONS:
        return math_defs.FUNCTIONS[fn](float(args[0]))
    one = {"exp2": lambda x: 2.0 ** x, "exp": math.exp, "log2": math.log2, "log": math.log,
           "sqrt": math.sqrt, "rsqrt": lambda x: 1 / math.sqrt(x), "abs": abs,
           "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin,
           "acos": math.acos, "atan": math.atan, "sinh": math.sinh, "cosh": math.cosh,
           "tanh": math.tanh, "expm1": math.expm1, "log1p": math.log1p, "rcp": lambda x: 1 / x}
    try:
        return one[fn](args[0])
    except (ValueError, OverflowError, ZeroDivisionError) as e:
        raise EvalError(f"{fn}: {e}") from None


#: The rule of each expression kind (tests/test_ir_coverage.py checks every kind has one
#: or is in REFUSED).
EXPRESSIONS = {
    ir.Const: lambda e, env: e.value,
    ir.Sym: _sym,
    ir.Bin: _bin,
    ir.Un: _un,
    ir.Select: lambda e, env: evaluate(e.if_true if evaluate(e.cond, env) else e.if_false, env),
    ir.Call: lambda e, env: _call(e.fn, [evaluate(a, env) for a in e.args], e.dtype),
}
#: Kinds with no scalar value outside a running kernel: `evaluate` refuses them by name
#: ("cannot evaluate a fragment element as a scalar").
REFUSED = (ir.Elem, ir.BufElem)
