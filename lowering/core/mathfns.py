"""f32 math builtins without a PTX instruction of their own, as short instruction sequences.

The hardware has approximate sin, cos, 2^x and log2 (`sin.approx`, ...); the
rest is built from them, from IEEE division and square root, and from short
polynomials on reduced ranges, each accurate to a few units in the last
place of f32 over the range that matters (well inside the 2e-4 relative
tolerance of programs that compare with the C library):

- sin, cos, tan: the argument reduced by multiples of 2*pi (two-part
  constant) before `sin.approx` / `cos.approx`; tan = sin / cos.
- expm1: Taylor series to x^7 for |x| < 0.5 (no cancellation near 0), else
  exp(x) - 1; sinh likewise (series to x^9, else (e - 1/e) / 2); cosh =
  (e + 1/e) / 2; tanh = e / (e + 2) with e = expm1(2x), 2x clamped to +-40 (NaN kept).
- log1p: 2 * atanh(x / (2 + x)) as a series for |x| < 0.5, else log(1 + x).
- atan: |x| > 1 folds to pi/2 - atan(1/|x|), then |x| > tan(pi/12) to
  pi/6 + atan((sqrt3*x - 1) / (sqrt3 + x)), then the series to x^11;
  atan2 fixes the quadrant of atan(y / x) (two infinities: that of +-1, +-1);
  asin and acos are atan2 of x and sqrt((1 - x)(1 + x)).
- pow: 2^(y * log2|x|); a negative base gives a result only for an
  integral exponent (signed by its parity), else NaN, as in C; y = 0 gives 1.
- fma: `fma.rn.f32`; frcp_rn: `rcp.rn.f32`.
- ceil, floor: `cvt.rpi` / `cvt.rmi` (exact); round (half away from zero, C's, which
  `cvt.rni`'s half-to-even is not): the truncation, moved one away from zero when the
  exact remainder is at least a half.
- sign: -1, 0 or 1 by two comparisons (NaN: 0); isfinite: |x| < inf (NaN: 0).
- sigmoid: 1 / (1 + e^-x); softplus: max(x, 0) + log1p(e^-|x|) (no overflow, no
  cancellation); gelu, tanh form: 0.5 (1 + tanh u) = 1 / (1 + e^-2u), so
  gelu = x / (1 + e^-2u) with u = sqrt(2/pi) (x + 0.044715 x^3), which keeps the
  relative precision of the negative tail that 1 + tanh u loses to cancellation
  (x below -20, where the value is -0, is taken as -20).

The meanings are choreo_py/ir/math_defs.py's; bench/builtins_precision.py measures each
sequence in the emulator against them in float64.
"""
from __future__ import annotations

import math

from .writer import V

LOG2E = 1.4426950408889634
TWO_PI_HI = 6.28125  # exact in f32 (few mantissa bits), so k * TWO_PI_HI is exact
TWO_PI_LO = 2 * math.pi - 6.28125
SQRT3 = math.sqrt(3.0)
TAN_PI_12 = 2 - SQRT3
GELU_K0 = 0.044715
GELU_K1 = math.sqrt(2.0 / math.pi)

FUNCS = {"sin": 1, "cos": 1, "tan": 1, "asin": 1, "acos": 1, "atan": 1, "atan2": 2,
         "sinh": 1, "cosh": 1, "tanh": 1, "expm1": 1, "log1p": 1, "pow": 2, "fma": 3,
         "rcp": 1, "round": 1, "sign": 1, "isfinite": 1, "sigmoid": 1, "softplus": 1,
         "gelu": 1}


class _Seq:
    """A sequence's scratch registers and the few idioms it is written in."""

    def __init__(self, w) -> None:
        self.w = w

    def f(self, hint: str = "m") -> V:
        return self.w.reg("f32", hint)

    def op(self, opcode: str, *args) -> V:
        out = self.f()
        self.w.op(opcode, out, *args)
        return out

    def c(self, x: float) -> V:
        return V.imm(x, "f32")

    def pred(self, cmp: str, a, b) -> V:
        p = self.w.reg("pred", "mp")
        self.w.op(f"setp.{cmp}.f32", p, a, b)
        return p

    def sel(self, a, b, p) -> V:
        return self.op("selp.f32", a, b, p)

    def poly(self, x: V, coeffs: list[float]) -> V:
        """c0 + c1 x + c2 x^2 + ... by Horner's rule."""
        acc = self.op("mov.f32", self.c(coeffs[-1]))
        for k in reversed(coeffs[:-1]):
            acc = self.op("fma.rn.f32", acc, x, self.c(k))
        return acc

    def exp(self, x) -> V:
        t = self.op("mul.f32", x, self.c(LOG2E))
        return self.op("ex2.approx.ftz.f32", t)


def emit(w, fn: str, out: V, args: list[V]) -> None:
    s = _Seq(w)
    args = [s.op("mov.f32", a) if a.is_const else a for a in args]  # sources in registers
    r = _BODIES[fn](s, *args)
    w.op("mov.f32", out, r)


def _reduce(s: _Seq, x) -> V:
    k = s.op("mul.f32", x, s.c(1 / (2 * math.pi)))
    k = s.op("cvt.rni.f32.f32", k)
    r = s.op("fma.rn.f32", k, s.c(-TWO_PI_HI), x)
    return s.op("fma.rn.f32", k, s.c(-TWO_PI_LO), r)


def _sin(s, x):
    return s.op("sin.approx.ftz.f32", _reduce(s, x))


def _cos(s, x):
    return s.op("cos.approx.ftz.f32", _reduce(s, x))


def _tan(s, x):
    r = _reduce(s, x)
    return s.op("div.rn.f32", s.op("sin.approx.ftz.f32", r), s.op("cos.approx.ftz.f32", r))


def _expm1(s, x):
    series = s.op("mul.f32", x, s.poly(x, [1 / math.factorial(n + 1) for n in range(7)]))
    big = s.op("sub.f32", s.exp(x), s.c(1.0))
    small = s.pred("lt", s.op("abs.f32", x), s.c(0.5))
    return s.sel(series, big, small)


def _sinh(s, x):
    x2 = s.op("mul.f32", x, x)
    series = s.op("mul.f32", x, s.poly(x2, [1 / math.factorial(2 * n + 1) for n in range(5)]))
    e = s.exp(x)
    big = s.op("mul.f32", s.op("sub.f32", e, s.op("rcp.rn.f32", e)), s.c(0.5))
    small = s.pred("lt", s.op("abs.f32", x), s.c(0.5))
    return s.sel(series, big, small)


def _cosh(s, x):
    e = s.exp(x)
    return s.op("mul.f32", s.op("add.f32", e, s.op("rcp.rn.f32", e)), s.c(0.5))


def _tanh(s, x):
    two = s.op("mul.f32", x, s.c(2.0))
    two = s.op("min.NaN.f32", s.op("max.NaN.f32", two, s.c(-40.0)), s.c(40.0))  # NaN stays
    e = _expm1(s, two)
    return s.op("div.rn.f32", e, s.op("add.f32", e, s.c(2.0)))


def _log1p(s, x):
    t = s.op("div.rn.f32", x, s.op("add.f32", x, s.c(2.0)))
    t2 = s.op("mul.f32", t, t)
    series = s.op("mul.f32", t, s.poly(t2, [2 / (2 * n + 1) for n in range(6)]))
    u = s.op("add.f32", x, s.c(1.0))
    big = s.op("mul.f32", s.op("lg2.approx.ftz.f32", u), s.c(math.log(2)))
    small = s.pred("lt", s.op("abs.f32", x), s.c(0.5))
    return s.sel(series, big, small)


def _atan(s, x):
    a = s.op("abs.f32", x)
    inv = s.pred("gt", a, s.c(1.0))
    b = s.sel(s.op("rcp.rn.f32", a), a, inv)
    shift = s.pred("gt", b, s.c(TAN_PI_12))
    moved = s.op("div.rn.f32", s.op("fma.rn.f32", b, s.c(SQRT3), s.c(-1.0)),
                 s.op("add.f32", b, s.c(SQRT3)))
    c = s.sel(moved, b, shift)
    c2 = s.op("mul.f32", c, c)
    p = s.op("mul.f32", c, s.poly(c2, [(-1) ** n / (2 * n + 1) for n in range(6)]))
    p = s.sel(s.op("add.f32", p, s.c(math.pi / 6)), p, shift)
    p = s.sel(s.op("sub.f32", s.c(math.pi / 2), p), p, inv)
    return s.op("copysign.f32", x, p)  # copysign.f32 d, a, b: |b| with a's sign


def _atan2(s, y, x):
    # both infinite: the quadrant's diagonal (y / x would be NaN), as atan2(+-1, +-1)
    both_inf = s.w.reg("pred", "mp")
    s.w.op("setp.eq.f32", both_inf, s.op("abs.f32", y), s.c(math.inf))
    s.w.op("setp.eq.and.f32", both_inf, s.op("abs.f32", x), s.c(math.inf), both_inf)
    y = s.sel(s.op("copysign.f32", y, s.c(1.0)), y, both_inf)
    x = s.sel(s.op("copysign.f32", x, s.c(1.0)), x, both_inf)
    r = _atan(s, s.op("div.rn.f32", y, x))
    turn = s.sel(s.c(math.pi), s.c(-math.pi), s.pred("ge", y, s.c(0.0)))
    r = s.sel(s.op("add.f32", r, turn), r, s.pred("lt", x, s.c(0.0)))
    both_zero = s.w.reg("pred", "mp")
    s.w.op("setp.eq.f32", both_zero, y, s.c(0.0))
    s.w.op("setp.eq.and.f32", both_zero, x, s.c(0.0), both_zero)
    return s.sel(s.c(0.0), r, both_zero)


def _side(s, x):
    """sqrt((1 - x)(1 + x)): the other side of a unit right triangle, exact near |x| = 1."""
    return s.op("sqrt.rn.f32", s.op("mul.f32", s.op("sub.f32", s.c(1.0), x),
                                    s.op("add.f32", s.c(1.0), x)))


def _asin(s, x):
    return _atan2(s, x, _side(s, x))


def _acos(s, x):
    return _atan2(s, _side(s, x), x)


def _pow(s, x, y):
    mag = s.op("ex2.approx.ftz.f32", s.op("mul.f32", y, s.op("lg2.approx.ftz.f32",
                                                             s.op("abs.f32", x))))
    whole = s.op("cvt.rni.f32.f32", y)
    half = s.op("mul.f32", y, s.c(0.5))
    odd = s.pred("neu", s.op("cvt.rni.f32.f32", half), half)
    signed = s.sel(s.op("neg.f32", mag), mag, odd)
    neg_base = s.sel(signed, s.c(math.nan), s.pred("eq", whole, y))
    r = s.sel(neg_base, mag, s.pred("lt", x, s.c(0.0)))
    return s.sel(s.c(1.0), r, s.pred("eq", y, s.c(0.0)))


def _round(s, x):
    t = s.op("cvt.rzi.f32.f32", x)
    half_or_more = s.pred("ge", s.op("abs.f32", s.op("sub.f32", x, t)), s.c(0.5))
    away = s.op("add.f32", t, s.op("copysign.f32", x, s.c(1.0)))
    return s.sel(away, t, half_or_more)


def _sign(s, x):
    r = s.sel(s.c(1.0), s.c(0.0), s.pred("gt", x, s.c(0.0)))
    return s.sel(s.c(-1.0), r, s.pred("lt", x, s.c(0.0)))


def _isfinite(s, x):
    return s.sel(s.c(1.0), s.c(0.0), s.pred("lt", s.op("abs.f32", x), s.c(math.inf)))


def _sigmoid(s, x):
    e = s.exp(s.op("neg.f32", x))
    return s.op("rcp.rn.f32", s.op("add.f32", e, s.c(1.0)))


def _softplus(s, x):
    e = s.exp(s.op("neg.f32", s.op("abs.f32", x)))
    return s.op("add.f32", s.op("max.f32", x, s.c(0.0)), _log1p(s, e))


def _gelu(s, x):
    # below -20 the value is -0 in f32 (e^-2u overflows; -inf / inf would be NaN)
    x = s.sel(x, s.c(-20.0), s.pred("gtu", x, s.c(-20.0)))
    x2 = s.op("mul.f32", x, x)
    u = s.op("mul.f32", x, s.op("fma.rn.f32", x2, s.c(GELU_K1 * GELU_K0), s.c(GELU_K1)))
    e = s.exp(s.op("mul.f32", u, s.c(-2.0)))
    return s.op("div.rn.f32", x, s.op("add.f32", e, s.c(1.0)))


_BODIES = {
    "sin": _sin, "cos": _cos, "tan": _tan, "asin": _asin, "acos": _acos, "atan": _atan,
    "atan2": _atan2, "sinh": _sinh, "cosh": _cosh, "tanh": _tanh, "expm1": _expm1,
    "log1p": _log1p, "pow": _pow,
    "fma": lambda s, a, b, c: s.op("fma.rn.f32", a, b, c),
    "rcp": lambda s, x: s.op("rcp.rn.f32", x),
    "round": _round, "sign": _sign, "isfinite": _isfinite, "sigmoid": _sigmoid,
    "softplus": _softplus, "gelu": _gelu,
}
