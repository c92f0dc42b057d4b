"""The end-to-end cases of wmma.co and ampere_mma.co (warp MMAs on register fragments: the
mma.sync / WMMA form), as end2end_refs.py lists its others (it adds these to CASES).

Their mains: lhs, rhs filled with random values in [1, 10) (ints for s8/u8) or set from
the indices; ref[i][j] = sum over k of the product rounded to the operands' type (C++'s
`lhs[i][k] * rhs[k][j]` on f16/bf16; on f32 and ints its __half2float conversion rounds
the product, and the s32 result, to f16); a case passes when |(ref - res) / ref| < tol,
as the program's check does. `warp_cases` takes end2end_refs' helpers (this module
imports nothing of it: end2end_refs imports this one).
"""
from __future__ import annotations

import os

import torch

_ET = {torch.int8: "s8", torch.uint8: "u8"}
_F16, _BF16 = torch.float16, torch.bfloat16


def warp_cases(end2end: str, dtypes: dict, floats, ints, equal_as_int) -> list:
    def inputs(dtype, m, k, n, lo=1, hi=10):
        def make(gen, dev):
            if dtype.is_floating_point:
                return (floats(gen, (m, k), lo, hi, dtype, dev), floats(gen, (k, n), lo, hi, dtype, dev))
            return (ints(gen, (m, k), lo, hi, dev).to(dtypes[_ET[dtype]]),
                    ints(gen, (k, n), lo, hi, dev).to(dtypes[_ET[dtype]]))
        return make

    def with_bias(make):
        """... and an f16 scalar in [1, 10) (a float argument: its value, already an f16's)."""
        def made(gen, dev):
            bias = floats(gen, (1,), 1, 10, torch.float16, "cpu")
            return make(gen, dev) + (float(bias[0]),)
        return made

    wmma, ampere = (os.path.join(end2end, f) for f in ("wmma.co", "ampere_mma.co"))
    exact = lambda args, res, want: equal_as_int(args, res, want.long())  # noqa: E731
    return [(wmma, f"matmul_{name}", inputs(dtype, 128, 256, 256), _rounded_products(prod),
             _relative(0.005, res)) for name, dtype, prod, res in [
        ("f16_f32", _F16, _F16, None), ("f16_f16", _F16, _F16, None),
        ("bf16_f32", _BF16, _BF16, None), ("s8_s32", torch.int8, None, _F16),
        ("u8_s32", torch.uint8, None, _F16), ("tf32_f32", torch.float32, _F16, _F16)]] + [
        (ampere, "matmul_group_rc", inputs(_F16, 128, 256, 256),
         _rounded_products(_F16), _relative(0.005)),
        (ampere, "matmul_fusion_scalar", with_bias(inputs(_F16, 128, 256, 256)),
         lambda args: _rounded_products(_F16, args[2])(args[:2]), _relative(0.005)),
        # (its main: verify_matmul_row_col_subset with base 0.001, relative 0.002 on a
        # sample of elements; here every element)
        (ampere, "matmul_pipeline", inputs(_F16, 64, 16, 32), _rounded_products(None),
         _within(0.001, 0.002)),
        (ampere, "mma_m8n8k4_f16_f16", _indexed(128, 64, 256, (0.02, 0.1), (0.1, 0.03)),
         _rounded_products(_F16, 1.5), _relative(0.005)),
        (ampere, "mma_m8n8k16_s8_s32", inputs(torch.int8, 128, 64, 128, -10, 10),
         _rounded_products(None), exact),
        (ampere, "mma_m16n8k8_f16_f32", _indexed(64, 64, 128, (0.02, 0.1), (0.07, 0.03)),
         _rounded_products(_F16), _relative(0.002)),
    ]


def _indexed(m, k, n, a, b):
    """lhs[i][j] = f16(i * a[0] + j * a[1]), rhs likewise (ampere_mma.co's ptx_mma_main)."""
    def make(gen, dev):
        def grid(r, c, f):
            i, j = torch.meshgrid(torch.arange(r), torch.arange(c), indexing="ij")
            return (i * f[0] + j * f[1]).to(torch.float16).to(dev)
        return grid(m, k, a), grid(k, n, b)
    return make


def _rounded_products(product_type, init=0.0):
    def ref(args):
        a, b = (x.cpu().double() for x in args)
        prods = a[:, :, None] * b[None, :, :]
        return (prods.to(product_type) if product_type else prods).double().sum(1) + init
    return ref


def _relative(tol, result_type=None):
    def check(args, res, want):
        got = res.cpu()
        got = (got.to(result_type) if result_type is not None else got).double()
        delta = ((want - got) / want).abs()
        assert bool((delta < tol).all()), f"values are not equal: delta {delta.max().item()}"
    return check


def _within(base, rel):
    def check(args, res, want):
        diff = (res.cpu().double() - want).abs()
        assert bool((diff <= base + rel * want.abs()).all()), f"max difference {diff.max().item()}"
    return check
