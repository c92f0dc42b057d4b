"""Evaluation of scalar IR expressions on Python integers and floats.

Shared by the static passes (pipeline check, shape folding) that need the
value of control expressions for concrete dimensions. Integer semantics
follow the IR dtypes: C truncating division, unsigned wrap-around.
"""
from __future__ import annotations

import math
import operator

from . import ir
from .ir_build import _c_div

_MASK = {"u8": 0xFF, "u16": 0xFFFF, "u32": 0xFFFFFFFF, "u64": 0xFFFFFFFFFFFFFFFF}
#: Signed types wrap as the hardware's two's complement does (and Python integers stay
#: small: a loop that squares a counter would otherwise grow it without end).
_SIGNED = {"s8": 8, "s16": 16, "s32": 32, "s64": 64}


class EvalError(Exception):
    pass


def wrap(value, dtype: str):
    if type(value) is not int:
        return value
    mask = _MASK.get(dtype)
    if mask is not None:
        return value & mask
    bits = _SIGNED.get(dtype)
    if bits is not None and not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        return ((value + (1 << (bits - 1))) & ((1 << bits) - 1)) - (1 << (bits - 1))
    return value


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
    if op in ("/", "%"):
        if not ir.is_float(dtype):
            if b == 0:
                raise EvalError("integer division by zero")
            q = _c_div(int(a), int(b))
            return q if op == "/" else int(a) - q * int(b)
        if op == "/":
            return a / b if b else math.copysign(math.inf, a) if a else math.nan
    try:
        return _OPS[op](a, b)
    except KeyError:
        raise EvalError(f"the operator '{op}' on {dtype}") from None
    except (TypeError, OverflowError) as e:
        raise EvalError(str(e)) from None


def evaluate(e: ir.Expr, env: dict):
    t = type(e)
    if t is ir.Const:
        return e.value
    if t is ir.Sym:
        try:
            return env[e.name]
        except KeyError:
            raise EvalError(f"'{e.name}' has no value here") from None
    if t is ir.Bin:
        if e.op == "&&":
            return bool(evaluate(e.lhs, env)) and bool(evaluate(e.rhs, env))
        if e.op == "||":
            return bool(evaluate(e.lhs, env)) or bool(evaluate(e.rhs, env))
        return wrap(_arith(e.op, evaluate(e.lhs, env), evaluate(e.rhs, env), e.dtype), e.dtype)
    if isinstance(e, ir.Un):
        v = evaluate(e.operand, env)
        return wrap({"-": lambda: -v, "!": lambda: not v, "~": lambda: ~v}[e.op](), e.dtype)
    if isinstance(e, ir.Select):
        return evaluate(e.if_true if evaluate(e.cond, env) else e.if_false, env)
    if isinstance(e, ir.Call):
        args = [evaluate(a, env) for a in e.args]
        return _call(e.fn, args, e.dtype)
    raise EvalError(f"cannot evaluate {type(e).__name__} as a scalar")


def _call(fn: str, args: list, dtype: str):
    if fn == "cdiv":
        a, b = args
        if b == 0:
            raise EvalError("cdiv by zero")
        return -(-a // b)
    if fn in ("min", "max"):
        return (min if fn == "min" else max)(args)
    if fn == "to":
        return float(args[0]) if ir.is_float(dtype) else wrap(int(args[0]), dtype)
    one = {"exp2": lambda x: 2.0 ** x, "exp": math.exp, "log2": math.log2, "log": math.log,
           "sqrt": math.sqrt, "rsqrt": lambda x: 1 / math.sqrt(x), "abs": abs}
    return one[fn](args[0])
