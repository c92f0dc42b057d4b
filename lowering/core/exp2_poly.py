"""2^x on the FMA pipes: the polynomial that pass exp2-split gives part of P's exponentials.

MUFU (`ex2.approx`) computes 16 exponentials per clock per SM, the FMA pipes 128
FP32 operations: attention's softmax, which needs one exponential per score, is
bound by MUFU unless some of them are computed by FMAs. A result rounded to bf16
(8 significant bits) tolerates a polynomial's error, so for the applies the pass
marks (`Apply.exp2_poly`), the marked elements take this sequence instead of
`ex2.approx.ftz.f32` (Cody-Waite range reduction, 2^x = 2^n * 2^f):

    x = min(max(x, -127), 127.99999)      clamp: n stays in [-127, 127]
    t = x + 1.5 * 2^23   (add.rm)         t's low mantissa bits hold n = floor(x)
    f = x - (t - 1.5 * 2^23)              f in [0, 1), both subtractions exact
    p = ((C3 f + C2) f + C1) f + 1        3 fma: p ~ 2^f in [1, 2)
    bits(2^x) = bits(p) + (bits(t) << 23) the shift leaves n << 23: n added to p's exponent

C1..C3 minimise the maximal relative error of p over [0, 1] with the constant
term fixed at 1 (a linear program over 4001 points, then rounded to f32): 8.56e-5
(2^-13.51) in exact arithmetic. tests/test_exp2_split.py measures the f32
sequence against float64 exp2 over 5.5 million points of [-126, 127): 8.565e-5
(2^-13.51), the polynomial's own error (every f32 of [2^-20, 1) gives the same),
far under bf16's half ulp (2^-9); rounded to bf16, 1% of the values land one ulp
from the correctly rounded exp2. At x = -127 exactly (every x below it,
-inf included) f = 0 and p = 1, so the result's bits are 0: +0.0, as ex2 gives.
Unlike ex2.approx, x >= 128 gives a finite value just under 2^128 (bf16 rounds
it to inf, as it does ex2's inf) and NaN gives +0.0.
"""
from __future__ import annotations

import struct

from .writer import V


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


SHIFTER = 12582912.0           # 1.5 * 2^23: the ulp of t is 1, so t rounds x to an integer
LOW = -127.0                   # the clamp: 2^LOW's bits are 0 (the result's +0.0)
HIGH = _f32(0x42FFFFFF)        # the f32 just under 128: n <= 127 keeps the exponent finite
C1 = _f32(0x3F31F32D)          # 0.69511682
C2 = _f32(0x3E691BBC)          # 0.22764486
C3 = _f32(0x3D9DD560)          # 0.07706714
COEFFS = (1.0, C1, C2, C3)     # p(f) = 1 + C1 f + C2 f^2 + C3 f^3


def emit(w, out: V, x: V) -> None:
    """out = 2^x by the polynomial (`x` an f32 register or immediate)."""
    def f(hint: str) -> V:
        return w.reg("f32", hint)

    c = lambda v: V.imm(v, "f32")  # noqa: E731
    a = f("e2x")
    w.op("max.f32", a, x, c(LOW))
    w.op("min.f32", a, a, c(HIGH))
    t = f("e2t")
    w.op("add.rm.f32", t, a, c(SHIFTER))
    n = f("e2n")
    w.op("sub.f32", n, t, c(SHIFTER))
    e = w.reg("b32", "e2e")
    w.op("shl.b32", e, t, 23)  # t's last use: few registers live through the polynomial
    frac = f("e2f")
    w.op("sub.f32", frac, a, n)
    # p is a .b32 register: an .f32 instruction takes it (a bit-size type is compatible
    # with every type of its size) and so does the integer add, so the exponent joins the
    # polynomial's bits with no move between register types; one move gives `out` its type
    p = w.reg("b32", "e2p")
    w.op("fma.rn.f32", p, frac, c(C3), c(C2))
    w.op("fma.rn.f32", p, p, frac, c(C1))
    w.op("fma.rn.f32", p, p, frac, c(1.0))
    w.op("add.s32", p, p, e)
    w.op("mov.b32", out, p)

