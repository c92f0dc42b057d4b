"""The value each math builtin without a C library function of its own denotes, in
double precision: the interpreter, constant evaluation (ir/eval.py) and the precision
measurement of the backends' instruction sequences (bench/builtins_precision.py) all read
these, so that the three agree on what `__gelu` or `__round` means.

The meanings are the reference's (its GPU target's numerics and its mock interpreter):

- `__round` rounds half away from zero (C's `round`), not to even;
- `__sign` is -1, 0 or 1 (0 for NaN: neither comparison holds), in the argument's type;
- `__isfinite` is 1 or 0, in the argument's type;
- `__gelu` is the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), which
  the reference's GPU target and mock interpreter compute (its C++ target's erf form
  differs by up to 1e-3 and is not the one GPU programs see);
- `__sigmoid` is 1 / (1 + e^-x); `__softplus` is log(1 + e^x), computed here as
  max(x, 0) + log1p(e^-|x|) so that it does not overflow for large x.
"""
from __future__ import annotations

import math

GELU_K0 = 0.044715
GELU_K1 = math.sqrt(2.0 / math.pi)


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def ceil(x: float) -> float:
    return float(math.ceil(x)) if math.isfinite(x) else x


def floor(x: float) -> float:
    return float(math.floor(x)) if math.isfinite(x) else x


def round_away(x: float) -> float:
    """C's round: the nearest integer, a half away from zero; the sign of x kept (-0.3 -> -0)."""
    if not math.isfinite(x):
        return x
    t = float(math.trunc(x))
    if abs(x - t) >= 0.5:
        t += math.copysign(1.0, x)
    return math.copysign(t, x)


def sign(x: float) -> float:
    return float((x > 0) - (x < 0))


def isfinite(x: float) -> float:
    return 1.0 if math.isfinite(x) else 0.0


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + _exp(-x))


def softplus(x: float) -> float:
    if math.isnan(x):
        return x
    return max(x, 0.0) + math.log1p(_exp(-abs(x)))


def gelu(x: float) -> float:
    """0.5 x (1 + tanh u) computed as x / (1 + e^-2u), the same value without the
    cancellation of 1 + tanh u (which leaves no digit of the tail below x = -6)."""
    if math.isinf(x):
        return x if x > 0 else -0.0
    return x / (1.0 + _exp(-2.0 * GELU_K1 * (x + GELU_K0 * x * x * x)))


#: IR builtin -> its value in double precision
FUNCTIONS = {"ceil": ceil, "floor": floor, "round": round_away, "sign": sign,
             "isfinite": isfinite, "sigmoid": sigmoid, "softplus": softplus, "gelu": gelu}
