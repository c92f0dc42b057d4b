"""Expression evaluation with the IR's numeric semantics.

One evaluator serves scalar code (Python ints and floats: loop counters,
offsets, conditions) and `apply` bodies (torch tensors covering a whole
index space at once). A value is therefore either a Python number or a
tensor, and every operator picks the matching implementation.

Integers follow C, as defined once in choreo_py/ir/c_scalars.py: `/` and `%`
truncate toward zero, results wrap to their type's width.
Floats follow IEEE: division by zero gives inf/nan, `max`/`min` are
fmaxf/fminf (a NaN operand loses), f32 results are rounded to f32.
"""
from __future__ import annotations

import math
from contextlib import nullcontext
import struct

import torch

from ..ir import c_scalars, math_defs, subbyte
from .. import ir
from .errors import InterpError
from ..construct_names import describe

TORCH_DTYPES = {
    "bool": torch.bool, "s8": torch.int8, "u8": torch.uint8, "s16": torch.int16,
    "u16": torch.int32, "s32": torch.int32, "u32": torch.int64, "s64": torch.int64,
    "u64": torch.int64, "f16": torch.float16, "bf16": torch.bfloat16,
    "f32": torch.float32, "tf32": torch.float32, "f64": torch.float64,
    "f8_e4m3": torch.float8_e4m3fn, "f8_e5m2": torch.float8_e5m2,
    # sub-byte types: one uint8 code per element (choreo_py/ir/subbyte.py)
    **{t: torch.uint8 for t in subbyte.TYPES},
}
_BITS = c_scalars.INT_BITS
_NARROW_FLOATS = ("f16", "bf16", "f8_e4m3", "f8_e5m2")
_F32 = struct.Struct("f")


wrap_int = c_scalars.wrap  # two's complement of the type's width (c_scalars)


def round_to(x, dtype: str):
    """Convert a value to `dtype` as a store or `to` would (floats stay float32 tensors)."""
    if dtype in subbyte.FLOAT_FORMATS or dtype == "bin1":
        return subbyte.round_value(x, dtype)
    if isinstance(x, torch.Tensor):
        if dtype in _NARROW_FLOATS:
            return x.to(TORCH_DTYPES[dtype]).to(torch.float32)
        if dtype in ("f32", "tf32"):
            return x.to(torch.float32)
        if dtype == "f64":
            return x.to(torch.float64)
        if dtype == "bool":
            return x != 0
        x = torch.trunc(x).to(torch.int64) if x.is_floating_point() else x.to(torch.int64)
        bits = _BITS.get(dtype, 64)
        if bits < 64:  # two's complement, as wrap_int
            x = x & ((1 << bits) - 1)
            if dtype[0] == "s":
                x = torch.where(x >= 1 << (bits - 1), x - (1 << bits), x)
        return x
    if dtype in _NARROW_FLOATS:
        return float(torch.tensor(float(x), dtype=TORCH_DTYPES[dtype]).float())
    if dtype in ("f32", "tf32"):
        return _f32(float(x))
    if dtype == "f64":
        return float(x)
    if dtype == "bool":
        return bool(x)
    try:
        return c_scalars.to_int(x, dtype)  # C conversion: truncation toward zero, wrap
    except ValueError as e:
        raise InterpError(str(e)) from None


def _f32(x: float) -> float:
    """Rounds a double to the nearest f32 (values beyond f32 range become infinities)."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _scalar_float(op: str, a, b, dtype: str):
    # Python doubles then one rounding: exact for + - * / of f32 operands
    # (a double holds more than twice f32's precision).
    a, b = float(a), float(b)
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    elif op == "/":
        if b == 0.0:
            r = math.nan if a == 0.0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1.0, b)
        else:
            r = a / b
    elif op == "%":
        r = math.fmod(a, b) if b != 0.0 else math.nan
    else:
        raise InterpError(f"operator '{op}' on floating-point values")
    if dtype == "f64":
        return r
    return _f32(r) if dtype in ("f32", "tf32") else round_to(r, dtype)


_CMP = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}
_BITOPS = {
    "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b, "&": lambda a, b: a & b,
    "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
}


def compared_type(e: ir.Bin) -> str | None:
    """The integer type the two sides of a comparison meet in (C's usual conversions, as
    the lowering compares: ir/c_scalars.promote), or None where no integer conversion
    applies (a float or a condition on either side)."""
    t = c_scalars.promote(getattr(e.lhs, "dtype", "s32"), getattr(e.rhs, "dtype", "s32"),
                          isinstance(e.lhs, ir.Const), isinstance(e.rhs, ir.Const))
    return t if c_scalars.INT_BITS.get(t, 64) < 64 else None


def as_compared(v, t: str | None):
    """`v` converted to the compared type `t`: -1 against an unsigned int is 4294967295."""
    if t is None or isinstance(v, (bool, float)):
        return v
    if isinstance(v, int):
        return c_scalars.wrap(v, t)
    if isinstance(v, torch.Tensor) and not v.dtype.is_floating_point and v.dtype != torch.bool:
        bits = c_scalars.INT_BITS[t]
        w = v.to(torch.int64) & ((1 << bits) - 1)
        return w - ((w >> (bits - 1)) << bits) if t[0] == "s" else w
    return v


def binary(op: str, a, b, dtype: str, loc=None):
    if op in _CMP:
        return _CMP[op](a, b)
    if op in ("&&", "||"):
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            fn = torch.logical_and if op == "&&" else torch.logical_or
            return fn(torch.as_tensor(a), torch.as_tensor(b))
        return (bool(a) and bool(b)) if op == "&&" else (bool(a) or bool(b))
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return _tensor_arith(op, a, b, dtype)
    if ir.is_float(dtype):
        return _scalar_float(op, a, b, dtype)
    try:
        return c_scalars.int_binary(op, int(a), int(b), dtype)
    except ZeroDivisionError:
        raise InterpError("integer division by zero", loc) from None
    except ValueError as e:
        raise InterpError(str(e), loc) from None


def _tensor_arith(op: str, a, b, dtype: str):
    floating = ir.is_float(dtype)
    if op == "/":
        r = a / b if floating else torch.div(torch.as_tensor(a), b, rounding_mode="trunc")
    elif op == "%":
        r = torch.fmod(torch.as_tensor(a), b)
    elif op in _BITOPS:
        r = _BITOPS[op](a, b)
    else:
        r = a + b if op == "+" else a - b if op == "-" else a * b
    narrow = dtype in _NARROW_FLOATS or dtype in subbyte.FLOAT_FORMATS
    if narrow or (not floating and dtype in _BITS and isinstance(r, torch.Tensor)
                  and r.dtype != torch.bool):
        return round_to(r, dtype)  # integer lanes are int64: wrap to the type's width
    return r


def unary(op: str, v, dtype: str):
    if op == "-":
        if ir.is_float(dtype):
            return -v
        return round_to(-v, dtype) if isinstance(v, torch.Tensor) else c_scalars.int_unary("-", v, dtype)
    if op == "!":
        return torch.logical_not(v) if isinstance(v, torch.Tensor) else not v
    if op == "~":
        # tensors of integers are int64 lanes: ~ and - wrap to the type's width, as the
        # scalars do (~4000000000u is 294967295u, not -4000000001: difftest seed 21619)
        return round_to(~v, dtype) if isinstance(v, torch.Tensor) else c_scalars.int_unary("~", v, dtype)
    raise InterpError(f"unknown unary operator '{op}'")


def _fminmax(fn: str, a, b):
    """PTX's min / max (c_scalars.minmax): a NaN loses, -0.0 < +0.0."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        like = a if isinstance(a, torch.Tensor) else b
        a = torch.as_tensor(a, dtype=like.dtype)
        b = torch.as_tensor(b, dtype=like.dtype)
        if like.is_floating_point():
            return tensor_minmax(fn, a, b)
        return torch.maximum(a, b) if fn == "max" else torch.minimum(a, b)
    return c_scalars.minmax(fn, a, b)


def tensor_minmax(fn: str, a, b):
    """Elementwise PTX min / max of float tensors: torch.fmin / fmax keep either zero of a
    tie, PTX orders -0.0 below +0.0 (ISA 9.7.3.11-12)."""
    r = torch.fmax(a, b) if fn == "max" else torch.fmin(a, b)
    tie = (a == 0) & (b == 0)
    if bool(tie.any()):
        neg = torch.signbit(a) | torch.signbit(b) if fn == "min" else torch.signbit(a) & torch.signbit(b)
        r = torch.where(tie, torch.where(neg, -0.0, 0.0).to(r.dtype), r)
    return r


#: Over tensors in float64, rounded by the caller, as the scalar path's Python math: the
#: float32 kernels of torch differ by the CPU's vector unit (AVX-512 and AVX2 builds gave
#: __exp, __log and __sqrt different last bits), and the interpreter's results may not.
_TORCH_MATH = {"exp2": torch.exp2, "exp": torch.exp, "log2": torch.log2, "log": torch.log,
               "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "abs": torch.abs}


def _log(x, base2=False):
    if x == 0.0:
        return -math.inf
    if x < 0.0 or math.isnan(x):
        return math.nan
    return math.log2(x) if base2 else math.log(x)


def _exp(x, base2=False):
    try:
        return math.exp2(x) if base2 else math.exp(x)
    except OverflowError:
        return math.inf


_PY_MATH = {"exp2": lambda x: _exp(x, True), "exp": _exp, "log2": lambda x: _log(x, True),
            "log": _log, "sqrt": lambda x: math.sqrt(x) if x >= 0 else math.nan,
            "rsqrt": lambda x: 1 / math.sqrt(x) if x > 0 else (math.inf if x == 0 else math.nan),
            "abs": abs}


_C_MATH = ("sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh",
           "expm1", "log1p", "pow", "fma", "rcp")


def _c_math(fn: str, *args: float) -> float:
    """The C library's value (double precision, rounded by the caller): a domain error is
    NaN, an overflow is infinite (with the sign of the true result), as in C."""
    f = {"sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin,
         "acos": math.acos, "atan": math.atan, "atan2": math.atan2, "sinh": math.sinh,
         "cosh": math.cosh, "tanh": math.tanh, "expm1": math.expm1, "log1p": math.log1p,
         "pow": math.pow, "fma": lambda a, b, c: a * b + c, "rcp": lambda x: 1 / x}[fn]
    try:
        return f(*args)
    except OverflowError:
        if fn == "pow":
            x, y = args
            return -math.inf if x < 0 and float(y).is_integer() and int(y) % 2 else math.inf
        return math.copysign(math.inf, args[0]) if fn in ("sinh", "expm1") else math.inf
    except ZeroDivisionError:
        return math.copysign(math.inf, args[0])
    except ValueError:
        if fn == "pow" and args[0] == 0.0:  # 0 to a negative power
            return math.inf
        if fn == "log1p" and args[0] == -1.0:
            return -math.inf
        return math.nan


def _torch_math(fn: str, args: list):
    """The same over tensors (fragment code: a float32 value per element)."""
    xs = [a.to(torch.float64) if isinstance(a, torch.Tensor) else torch.tensor(float(a),
          dtype=torch.float64) for a in args]
    if fn == "fma":
        return xs[0] * xs[1] + xs[2]
    if fn == "rcp":
        return 1 / xs[0]
    return getattr(torch, {"asin": "asin", "acos": "acos", "atan": "atan", "pow": "pow",
                           "atan2": "atan2"}.get(fn, fn))(*xs)


def _torch_defined(fn: str, x: torch.Tensor) -> torch.Tensor:
    """math_defs' functions over a tensor, in float64 (its definitions, element by element)."""
    x = x.to(torch.float64)
    if fn == "round":
        t = torch.trunc(x)
        t = torch.where((x - t).abs() >= 0.5, t + torch.sign(x), t)
        return torch.where(torch.isfinite(x), torch.copysign(t, x), x)
    if fn == "sign":
        return (x > 0).double() - (x < 0).double()
    if fn == "isfinite":
        return torch.isfinite(x).double()
    if fn == "softplus":
        return torch.where(torch.isnan(x), x, x.clamp(min=0) + torch.log1p(torch.exp(-x.abs())))
    if fn == "gelu":
        u = math_defs.GELU_K1 * (x + math_defs.GELU_K0 * x * x * x)
        return torch.where(x == -math.inf, -0.0, x / (1 + torch.exp(-2 * u)))
    return {"ceil": torch.ceil, "floor": torch.floor, "sigmoid": torch.sigmoid}[fn](x)


def call(fn: str, args: list, dtype: str, loc=None):
    if fn == "cdiv":
        a, b = int(args[0]), int(args[1])
        if b == 0:
            raise InterpError("cdiv by zero", loc)
        return wrap_int(c_scalars.cdiv(a, b), dtype)
    if fn in ("min", "max"):
        return _fminmax(fn, args[0], args[1])
    if fn == "to":
        return round_to(args[0], dtype)
    if fn in _C_MATH:
        if any(isinstance(a, torch.Tensor) for a in args):
            return round_to(_torch_math(fn, args), dtype)
        return round_to(_c_math(fn, *[float(a) for a in args]), dtype)
    x = args[0]
    if fn in math_defs.FUNCTIONS:
        if isinstance(x, torch.Tensor):
            return round_to(_torch_defined(fn, x), dtype)
        return round_to(math_defs.FUNCTIONS[fn](float(x)), dtype)
    if fn == "abs" and not ir.is_float(dtype):  # in integers: |4294967295u| is itself
        if isinstance(x, torch.Tensor):
            return round_to(torch.abs(x.to(torch.int64)), dtype)
        return wrap_int(abs(int(x)), dtype)
    if isinstance(x, torch.Tensor):
        return round_to(_TORCH_MATH[fn](x.to(torch.float32).to(torch.float64)), dtype)
    return round_to(_PY_MATH[fn](float(x)), dtype)


class Evaluator:
    """Evaluates expressions in an environment; element reads go to `hooks`.

    `hooks.elem(e)` reads a fragment element inside `apply`, and
    `hooks.buf_elem(e, env)` reads a buffer element (per-thread code).
    """

    def __init__(self, hooks) -> None:
        self.hooks = hooks

    def __call__(self, e: ir.Expr, env: dict, loc=None):
        rule = EXPRESSIONS.get(type(e))
        if rule is None:
            raise InterpError(f"cannot evaluate {describe(type(e))}", loc)
        return rule(self, e, env, loc)

    def _sym(self, e: ir.Sym, env: dict, loc):
        try:
            return env[e.name]
        except KeyError:
            raise InterpError(f"'{e.name}' has no value here", loc) from None

    def _bin(self, e: ir.Bin, env: dict, loc):
        if e.op in ("&&", "||"):
            a = self(e.lhs, env, loc)
            if not isinstance(a, torch.Tensor):
                if bool(a) == (e.op == "||"):
                    return bool(a)  # C short-circuit for scalar conditions
                return binary(e.op, a, self(e.rhs, env, loc), e.dtype, loc)
            # per point (fragment code): the right side is read where the left decides not
            taken = a.to(torch.bool) if e.op == "&&" else ~a.to(torch.bool)
            with self._reads_under(taken):
                b = self(e.rhs, env, loc)
            return binary(e.op, a, b, e.dtype, loc)
        a, b = self(e.lhs, env, loc), self(e.rhs, env, loc)
        if e.op in _CMP:
            t = compared_type(e)
            a, b = as_compared(a, t), as_compared(b, t)
        return binary(e.op, a, b, e.dtype, loc)

    def _select(self, e: ir.Select, env: dict, loc):
        c = self(e.cond, env, loc)
        if isinstance(c, torch.Tensor):
            c = c.to(torch.bool)
            with self._reads_under(c):  # each arm reads memory only where it is taken
                a = self(e.if_true, env, loc)
            with self._reads_under(~c):
                b = self(e.if_false, env, loc)
            return torch.where(c, torch.as_tensor(a), torch.as_tensor(b))
        return self(e.if_true if c else e.if_false, env, loc)

    def _reads_under(self, cond):
        """The hooks' narrowing of the points element reads touch (fragment code), if any."""
        narrow = getattr(self.hooks, "reads_under", None)
        return narrow(cond) if narrow is not None else nullcontext()

    def integer(self, e: ir.Expr, env: dict, loc=None) -> int:
        v = self(e, env, loc)
        if isinstance(v, torch.Tensor) or isinstance(v, float):
            raise InterpError(f"expected an integer, got {v!r}", loc)
        return int(v)


def _const(e: ir.Const):
    """A constant as its type holds it: the f32 literal `0.3f` is the f32 nearest 0.3 (the
    IR keeps the double), so `x - 0.3f` of x = 0.3f is 0, as on the GPU."""
    v = e.value
    if isinstance(v, float) and e.dtype in ("f32", "tf32"):
        return _f32(v)
    return v


#: The rule of each expression kind (tests/test_ir_coverage.py checks every kind has one).
EXPRESSIONS = {
    ir.Const: lambda ev, e, env, loc: _const(e),
    ir.Sym: Evaluator._sym,
    ir.Bin: Evaluator._bin,
    ir.Un: lambda ev, e, env, loc: unary(e.op, ev(e.operand, env, loc), e.dtype),
    ir.Select: Evaluator._select,
    ir.Call: lambda ev, e, env, loc: call(e.fn, [ev(a, env, loc) for a in e.args], e.dtype, loc),
    ir.Elem: lambda ev, e, env, loc: ev.hooks.elem(e, env),
    ir.BufElem: lambda ev, e, env, loc: ev.hooks.buf_elem(e, env),
}
