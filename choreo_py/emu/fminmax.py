"""min / max of floats as PTX defines them (ISA 9.7.3.11-12 for f32/f64, 9.7.4.7-8 for
f16/bf16): numpy's fmin / fmax agree but for the sign of a tie of zeros."""
from __future__ import annotations

import numpy as np


def float_minmax(name: str, nan_wins: bool, a, b):
    """PTX min / max of floats (ISA 9.7.3.11-12, 9.7.4.7-8): a NaN input loses to a number
    (with .NaN the result is the canonical NaN), and -0.0 < +0.0 -- numpy's fmin / fmax
    return either zero of a tie."""
    if nan_wins:
        r = np.minimum(a, b) if name == "min" else np.maximum(a, b)
        r = np.where(np.isnan(a) | np.isnan(b), np.array(np.nan, dtype=r.dtype), r)
    else:
        r = np.fmin(a, b) if name == "min" else np.fmax(a, b)
    tie = (a == 0) & (b == 0)
    if np.any(tie):
        sa, sb = np.signbit(a), np.signbit(b)
        neg = (sa | sb) if name == "min" else (sa & sb)
        zero = np.where(neg, np.array(-0.0, dtype=r.dtype), np.array(0.0, dtype=r.dtype))
        r = np.where(tie, zero, r)
    return r
