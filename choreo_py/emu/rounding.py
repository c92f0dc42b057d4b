"""float32 results under the four IEEE rounding directions (.rn .rz .rm .rp).

numpy rounds float32 arithmetic to nearest even only. A float32 add, sub,
mul or fma is computed here as an exact value hi + lo in float64 (a product
of two float32 is exact in float64; TwoSum gives the exact rounding error of
the sum), rounded to nearest float32, then stepped one ulp when the
direction asks for it. `.rn` keeps the result numpy gives; an fma's exact
sum is first rounded to float64 to odd (an inexact float64 keeps its last bit
set), which makes the one rounding to float32 after it the correct one (53
bits >= 24 + 2: no double rounding). A leaf module: isa_alu and isa_f32x2 use it.
"""
from __future__ import annotations

import numpy as np

DIRECTED = ("rz", "rm", "rp")
MODES = ("rn",) + DIRECTED


def mode_of(parts) -> str:
    """The rounding modifier of an instruction's opcode parts ('rn' when none)."""
    return next((p for p in parts if p in MODES), "rn")


def two_sum(a: np.ndarray, b: np.ndarray):
    """(s, err) with s = fl(a + b) and s + err == a + b exactly (float64)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def round_f32(hi: np.ndarray, lo: np.ndarray, mode: str) -> np.ndarray:
    """hi + lo (float64, |lo| at most half an ulp of hi) rounded to float32 by `mode`."""
    r = hi.astype(np.float32)
    if mode == "rn":
        return r
    over = (r.astype(np.float64) - hi) - lo  # r - exact: > 0 when r rounded up
    with np.errstate(invalid="ignore"):
        if mode == "rm":
            step = over > 0
            toward = -np.inf
        elif mode == "rp":
            step = over < 0
            toward = np.inf
        else:  # rz: step toward zero when r moved away from it
            step = np.where(hi > 0, over > 0, over < 0) & (hi != 0)
            toward = 0.0
    return np.where(step, np.nextafter(r, np.float32(toward)), r)


def add_f32(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    if mode == "rn":
        return a + b
    return round_f32(*two_sum(a.astype(np.float64), b.astype(np.float64)), mode)


def mul_f32(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    if mode == "rn":
        return a * b
    p = a.astype(np.float64) * b  # exact: 24 + 24 significant bits
    return round_f32(p, np.zeros_like(p), mode)


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray, mode: str) -> np.ndarray:
    p = a.astype(np.float64) * b  # exact
    if mode == "rn":
        return _to_odd(*two_sum(p, c.astype(np.float64))).astype(np.float32)
    return round_f32(*two_sum(p, c.astype(np.float64)), mode)


def _to_odd(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """hi + lo (TwoSum's pair) rounded to float64 to odd: hi when exact, else the float64
    next to hi toward lo when hi's last bit is 0 (the exact value lies between the two)."""
    with np.errstate(invalid="ignore"):
        even = (hi.view(np.uint64) & np.uint64(1)) == 0
        step = np.isfinite(lo) & (lo != 0) & even
    return np.where(step, np.nextafter(hi, np.where(lo > 0, np.inf, -np.inf)), hi)
