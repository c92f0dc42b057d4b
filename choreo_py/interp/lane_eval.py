"""The evaluators of lane code (lanes.py): every scalar of the scalar rule
(scalars.py) may be a tensor of one value per lane.

`LaneEval` guards integer division lane by lane. `ExactEval`, the evaluator of
a guarded run, gives each lane the bits the threads' scalar code gives (see
its docstring), and refuses what the scalar rule refuses, so that the run
falls back to the threads, which report it.
"""
from __future__ import annotations

import math

import torch

from .. import ir
from . import scalars
from .errors import InterpError
from .scalars import Evaluator, binary, round_to
from ..ir import subbyte


def lane_dtype(dtype: str) -> torch.dtype:
    if dtype == "bool":
        return torch.bool
    if dtype == "f64":
        return torch.float64
    return torch.float32 if ir.is_float(dtype) else torch.int64


class LaneEval(Evaluator):
    """The scalar evaluator, with integer division guarded lane by lane."""

    def __call__(self, e, env, loc=None):
        if type(e) is ir.Bin and e.op in ("/", "%") and not ir.is_float(e.dtype):
            a, b = self(e.lhs, env, loc), self(e.rhs, env, loc)
            if isinstance(b, torch.Tensor):
                zero = b == 0
                if bool(self.hooks.active_any(zero)):
                    raise InterpError("integer division by zero in instance "
                                      f"{self.hooks.lane_names(zero)}", loc)
                b = torch.where(zero, torch.ones_like(b), b)
            elif isinstance(a, torch.Tensor) and b == 0:
                raise InterpError("integer division by zero", loc)
            return binary(e.op, a, b, e.dtype, loc)
        return super().__call__(e, env, loc)


_EXACT_SCALAR_MATH = ("exp", "exp2", "log", "log2") + scalars._C_MATH


class ExactEval(LaneEval):
    """The lane evaluator of a guarded run: lane by lane the same bits as the scalar code
    that the threads run (what the body gave before it ran as lanes): integer results
    wrap to their type at every operation, and math functions are computed in double
    (as Python's math does) and rounded once, the transcendental ones by Python's math
    itself, lane by lane."""

    def __call__(self, e, env, loc=None):
        t = type(e)
        if t is ir.Bin and e.op in ("<<", ">>"):
            return self.shift(e, env, loc)
        if t is ir.Call and e.fn in _VECTOR_CALLS:
            args = [self(a, env, loc) for a in e.args]
            if any(isinstance(a, torch.Tensor) for a in args):
                return _VECTOR_CALLS[e.fn](self, args, e.dtype, loc)
            return scalars.call(e.fn, args, e.dtype, loc)
        r = super().__call__(e, env, loc)
        if isinstance(r, torch.Tensor) and (t is ir.Bin or t is ir.Un) \
                and e.dtype in _WRAPPED and not r.dtype == torch.bool:
            return round_to(r, e.dtype)
        return r

    def shift(self, e, env, loc):
        """A shift by a lane-dependent amount: one the scalar rule refuses (negative) or
        that int64 lanes cannot hold (64 or more) is left to the threads."""
        a, b = self(e.lhs, env, loc), self(e.rhs, env, loc)
        if isinstance(b, torch.Tensor) and self.hooks.active_any((b < 0) | (b >= 64)):
            raise InterpError(f"shift by {e.op} outside 0..63 in a lane", loc)
        if isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor) and not 0 <= b < 64:
            raise InterpError(f"shift by {b}", loc)
        r = binary(e.op, a, b, e.dtype, loc)
        return round_to(r, e.dtype) if isinstance(r, torch.Tensor) and e.dtype in _WRAPPED \
            else r

    def convert(self, args, dtype: str, loc):
        convertible(self.hooks, args[0], dtype, loc)
        return round_to(args[0], dtype)

    def minmax(self, fn: str, args, dtype: str, loc):
        """PTX's min / max a lane each (scalars.tensor_minmax): a NaN loses, -0.0 < +0.0."""
        like = next(x for x in args if isinstance(x, torch.Tensor))
        a, b = (torch.as_tensor(x, dtype=like.dtype) for x in args)
        if a.is_floating_point():
            return scalars.tensor_minmax(fn, a, b)
        return torch.maximum(a, b) if fn == "max" else torch.minimum(a, b)

    def per_lane(self, fn: str, args, dtype: str, loc):
        n = self.hooks.n
        cols = [a.expand(n).tolist() if isinstance(a, torch.Tensor) else [a] * n
                for a in args]
        vals = [scalars.call(fn, list(xs), dtype, loc) for xs in zip(*cols)]
        return torch.tensor(vals, dtype=lane_dtype(dtype))

    def cdiv(self, args, dtype, loc):
        a, b = (torch.as_tensor(x, dtype=torch.int64) for x in args)
        if bool(self.hooks.active_any(b == 0)):
            raise InterpError("cdiv by zero", loc)
        b = torch.where(b == 0, torch.ones_like(b), b)
        up = torch.div(a + b - 1, b, rounding_mode="trunc")
        return round_to(torch.where(a >= 0, up, torch.div(a, b, rounding_mode="trunc")), dtype)


def convertible(run, v, dtype: str, loc) -> None:
    """Raises, as the scalar rule (c_scalars.to_int) does, where an active lane holds a
    float that has no integer of `dtype`: NaN, an infinity (and, for int64 lanes, a
    magnitude of 2^63 or more, which the scalar rule would still wrap)."""
    if dtype in _WRAPPED and isinstance(v, torch.Tensor) and v.is_floating_point():
        bad = ~torch.isfinite(v) | (v.abs() >= 2.0 ** 63)
        if run.active_any(bad):
            raise InterpError(f"conversion of a float no {dtype} holds, in a lane", loc)


def _sqrt64(x):
    return torch.sqrt(torch.as_tensor(x).to(torch.float64))


def _rsqrt64(x):
    """1 / sqrt(x) in double, as the scalar rule: +inf at either zero."""
    x = torch.as_tensor(x).to(torch.float64)
    return torch.where(x == 0, torch.full_like(x, math.inf), 1 / torch.sqrt(x))


def _abs(x, dtype: str):
    x = torch.as_tensor(x)
    return torch.abs(x.to(torch.float64) if ir.is_float(dtype) else x)


#: Calls a guarded run computes for all lanes at once, bit for bit as the scalar rule.
_VECTOR_CALLS = {
    "sqrt": lambda ev, a, dt, loc: round_to(_sqrt64(a[0]), dt),
    "rsqrt": lambda ev, a, dt, loc: round_to(_rsqrt64(a[0]), dt),
    "abs": lambda ev, a, dt, loc: round_to(_abs(a[0], dt), dt),
    "cdiv": lambda ev, a, dt, loc: ev.cdiv(a, dt, loc),
    "to": lambda ev, a, dt, loc: ev.convert(a, dt, loc),
    "min": lambda ev, a, dt, loc: ev.minmax("min", a, dt, loc),
    "max": lambda ev, a, dt, loc: ev.minmax("max", a, dt, loc),
    **{fn: (lambda f: lambda ev, a, dt, loc: ev.per_lane(f, a, dt, loc))(fn)
       for fn in _EXACT_SCALAR_MATH},
}
#: Integer types whose every operation wraps (the scalar rule, c_scalars.int_binary).
_WRAPPED = frozenset(t for t in scalars.TORCH_DTYPES if t != "bool" and not ir.is_float(t)
                     and t not in subbyte.TYPES)
