"""End-to-end cases of the sub-byte types (fp6, fp4, u6..u1, s6..s2, bin1), ported from the
programs' main()s: add_fp6_fp4.co, float_types_fp6_fp4.co, copy_fp6_fp4.co, fp6_fp4_copy.co,
tma_fp6_fp4.co, hopper_mma.co and integral_types.co's sub-byte functions.

A caller passes these types as uint8 tensors of codes, one element per byte
(choreo_py/ir/subbyte.py). The inputs are what the programs' `fill_random(lo, hi)`
makes: uniform floats converted to the type (nearest code), or uniform integers in
[lo, hi]. The checks compare float(res) with float(a) + float(b) (or float(a)) under the
programs' tolerances, and integer results as codes (`res_val != ref` compares the types'
storage). fp6/fp4 arithmetic needs sm_100a's conversions: on sm_90a those functions are
refused by name (REFUSED); their copies move bytes and run on both targets.
"""
from __future__ import annotations

import os

import torch

from choreo_py.ir import subbyte


def _codes(dtype, shape, lo, hi, n):
    def make(gen, dev):
        out = []
        for _ in range(n):
            if dtype in subbyte.INT_FORMATS:
                v = torch.randint(lo, hi + 1, shape, generator=gen)
            else:
                v = torch.rand(shape, generator=gen) * (hi - lo) + lo
            out.append(subbyte.encode(v, dtype).to(dev))
        return tuple(out)
    return make


def _values(dtype):
    return lambda t: subbyte.decode(t.cpu(), dtype).double()


def _sum_of(dtype, rounded_to=None):
    """float(a) + float(b); `rounded_to`: float(T(float(a) + float(b))) (tma_fp6_fp4's f4)."""
    def ref(args):
        s = _values(dtype)(args[0]) + _values(dtype)(args[1])
        return s if rounded_to is None else subbyte.round_value(s, rounded_to).double()
    return ref


def _within(tol, dtype=None):
    """|float(res) - ref| <= tol everywhere; `dtype`: the result holds codes of that type."""
    def check(args, res, want):
        got = _values(dtype)(res) if dtype else res.cpu().double()
        diff = (got - want).abs().max().item()
        assert diff <= tol, f"max difference {diff} > {tol}"
    return check


def _same_codes(dtype):
    def check(args, res, want):
        assert res.dtype == torch.uint8, res.dtype
        assert torch.equal(subbyte.encode(_values(dtype)(res), dtype), want), \
            "values are not equal."
    return check


def _wrapped_sum(dtype):
    """static_cast<T>(a + b) as codes (integer_subbyte keeps the low bits)."""
    return lambda args: subbyte.encode(_values(dtype)(args[0]) + _values(dtype)(args[1]),
                                       dtype)


def _copy_codes(dtype):
    return lambda args: subbyte.encode(_values(dtype)(args[0]), dtype)


def _matmul_subset(dtype, base_tol, rel_tol):
    """verify_matmul_row_col_subset: res[i][j] against sum_k float(lhs[i][k]) *
    float(rhs[k][j]) on an 8 x 8 subset, within base_tol + rel_tol * |ref|."""
    def check(args, res, want):
        lhs, rhs = _values(dtype)(args[0]), _values(dtype)(args[1])
        m, n = res.shape
        rows, cols = range(0, m, max(1, m // 8)), range(0, n, max(1, n // 8))
        ref = (lhs @ rhs)[list(rows)][:, list(cols)]
        got = res.cpu().double()[list(rows)][:, list(cols)]
        assert bool(((got - ref).abs() <= base_tol + rel_tol * ref.abs()).all()), \
            "values are not equal."
    return check


def cases(end2end: str) -> list:
    def at(name):
        return os.path.join(end2end, name)
    out = [
        # add_fp6_fp4.co: inputs in [-2, 2], the f16 sum within 0.35 (f6) / 0.6 (f4)
        (at("add_fp6_fp4.co"), "ele_add_f6", _codes("f6_e2m3", (6, 64), -2.0, 2.0, 2),
         _sum_of("f6_e2m3"), _within(0.35)),
        (at("add_fp6_fp4.co"), "ele_add_f4", _codes("f4_e2m1", (6, 64), -2.0, 2.0, 2),
         _sum_of("f4_e2m1"), _within(0.6)),
        # tma_fp6_fp4.co: double-buffered TMA tiles, the f32 sum within 0.2 of float(a) +
        # float(b) (f6) and of float(f4_e2m1(float(a) + float(b))) (f4)
        (at("tma_fp6_fp4.co"), "tma_ab_buffer_f6",
         _codes("f6_e2m3", (16, 16, 128), -2.0, 2.0, 2), _sum_of("f6_e2m3"), _within(0.2)),
        (at("tma_fp6_fp4.co"), "tma_ab_buffer_f4",
         _codes("f4_e2m1", (16, 16, 128), -2.0, 2.0, 2), _sum_of("f4_e2m1", "f4_e2m1"),
         _within(0.2)),
        # hopper_mma.co: tiles widened to f16 in shared memory, then an f16 MMA; the
        # row-col subset check with (0.6, 0.3) for f6, (1.0, 0.5) for f4
        (at("hopper_mma.co"), "matmul_f6", _matmul_in("f6_e2m3"), None,
         _matmul_subset("f6_e2m3", 0.6, 0.3)),
        (at("hopper_mma.co"), "matmul_f4", _matmul_in("f4_e2m1"), None,
         _matmul_subset("f4_e2m1", 1.0, 0.5)),
    ]
    # fp6_fp4_copy.co: [6, 17, 32] inputs in [-2, 2] through implicit shared buffers;
    # float(res) == float(a) for the copies, the f16 sum within 0.35 of float(a) + float(b)
    for t in ("f6", "f4"):
        dtype = "f6_e2m3" if t == "f6" else "f4_e2m1"
        out.append((at("fp6_fp4_copy.co"), f"dma_copy_{t}",
                    _codes(dtype, (6, 17, 32), -2.0, 2.0, 1), _copy_codes(dtype),
                    _same_codes(dtype)))
    out.append((at("fp6_fp4_copy.co"), "dma_add_f6",
                _codes("f6_e2m3", (6, 17, 32), -2.0, 2.0, 2), _sum_of("f6_e2m3"),
                _within(0.35)))
    # float_types_fp6_fp4.co: element-wise copies, inputs in [-10, 10]; copy_fp6_fp4.co:
    # dma.copy through shared memory, inputs in [-2, 2]; float(res) == float(a)
    for t in ("f6_e3m2", "f6_e2m3", "f4_e2m1"):
        out.append((at("float_types_fp6_fp4.co"), f"copy_{t}",
                    _codes(t, (6, 64), -10.0, 10.0, 1), _copy_codes(t), _same_codes(t)))
        out.append((at("copy_fp6_fp4.co"), f"dma_copy_sync_{t}",
                    _codes(t, (6, 17, 64), -2.0, 2.0, 1), _copy_codes(t), _same_codes(t)))
    # integral_types.co: static_cast<T>(a + b) for inputs in [0, 1]; copies of every code
    for t in ("s6", "u6", "s4", "u4"):
        out.append((at("integral_types.co"), f"ele_add_{t}", _codes(t, (6, 64), 0, 1, 2),
                    _wrapped_sum(t), _same_codes(t)))
    for t in ("s2", "u2", "bin1", "u1"):
        bits, signed = subbyte.INT_FORMATS[t]
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        out.append((at("integral_types.co"), f"copy_{t}", _codes(t, (6, 64), lo, hi, 1),
                    _copy_codes(t), _same_codes(t)))
    return out


def _matmul_in(dtype):
    def make(gen, dev):
        return (_codes(dtype, (64, 32), -2.0, 2.0, 1)(gen, dev)[0],
                _codes(dtype, (32, 32), -2.0, 2.0, 1)(gen, dev)[0])
    return make


_SM90 = "needs the fp6/fp4 conversions of sm_100a"
#: fp6/fp4 arithmetic or conversions on sm_90a: refused by name
REFUSED = {f"{f}::{fn}": ("sm_90a", _SM90) for f, fn in (
    ("add_fp6_fp4.co", "ele_add_f6"), ("add_fp6_fp4.co", "ele_add_f4"),
    ("tma_fp6_fp4.co", "tma_ab_buffer_f6"), ("tma_fp6_fp4.co", "tma_ab_buffer_f4"),
    ("hopper_mma.co", "matmul_f6"), ("hopper_mma.co", "matmul_f4"),
    ("fp6_fp4_copy.co", "dma_add_f6"))}
