"""End-to-end cases of gemm_sp.co (2:4 structured-sparse A on wgmma.mma_async.sp), ported
from its main(): as end2end_refs.py's cases, `cases(end2end)`.

Its main() builds a dense [64, K] A with two non-zero values in each group of four
columns of a row (both places uniform among the 4, the values uniform in [-1, 1]
converted to the type, a value that converts to zero replaced by 1 or -1), packs it
with the runtime's WGMMA sparse encoder (the two values of each group in column order
into [64, K/2]; one nibble per group, i0 | i1 << 2, two groups per u8 of a [64, K/8]
metadata matrix, the even group in the low nibble), and B [N, K] uniform in [-1, 1]
with |b| < 0.1 moved to +-0.25. It checks the 64 x N result against the dense A @ B^T
within 0.1 (f16), 0.2 (bf16), 0.5 (fp8 e4m3). The port draws from torch's generator
(the distributions, not the program's mt19937 stream), encodes as the runtime does, and
decodes on its own to check that the encoding round-trips before the check uses it.
"""
from __future__ import annotations

import os

import torch

#: (function, element type, K, N, tolerance) as gemm_sp.co's main() calls them
FUNCTIONS = [
    ("matmul_f16_n32_k64", torch.float16, 64, 32, 0.1),
    ("matmul_f16_n32_k32", torch.float16, 32, 32, 0.1),
    ("matmul_fp8_n32", torch.float8_e4m3fn, 64, 32, 0.5),
    ("matmul_fp8_n64", torch.float8_e4m3fn, 64, 64, 0.5),
    ("matmul_fp8_n8", torch.float8_e4m3fn, 64, 8, 0.5),
    ("matmul_f16_n8k64", torch.float16, 64, 8, 0.1),
    ("matmul_bf16_n8k64", torch.bfloat16, 64, 8, 0.2),
    ("matmul_f16_n16_k64", torch.float16, 64, 16, 0.1),
]


def structured_sparse(gen, rows: int, k: int, dtype) -> torch.Tensor:
    """init_structured_sparse_A: two distinct places per group of four, values in [-1, 1]."""
    groups = k // 4
    order = torch.rand(rows, groups, 4, generator=gen).argsort(dim=2)
    places = order[..., :2].sort(dim=2).values                       # i0 < i1
    values = (torch.rand(rows, groups, 2, generator=gen) * 2 - 1).to(dtype)
    fallback = torch.tensor([1.0, -1.0]).to(dtype).expand_as(values)
    values = torch.where(values.float() == 0, fallback, values)
    dense = torch.zeros(rows, groups, 4, dtype=torch.float32)
    dense.scatter_(2, places, values.float())
    return dense.reshape(rows, k).to(dtype)


def encode(dense: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The runtime's WGMMA encoder: (packed [M, K/2], u8 metadata [M, K/8]). A group
    without exactly two non-zeros keeps its columns 0 and 1."""
    m, k = dense.shape
    g = dense.float().reshape(m, k // 4, 4)
    nonzero = g != 0
    two = nonzero.sum(dim=2) == 2
    # the first two non-zero columns: sort (nonzero first, then column) and take two
    key = (~nonzero).to(torch.int64) * 4 + torch.arange(4)
    first = key.argsort(dim=2)[..., :2].sort(dim=2).values
    idx = torch.where(two[..., None], first, torch.tensor([0, 1]))
    packed = g.gather(2, idx).reshape(m, k // 2).to(dense.dtype)  # (exact: values of dtype)
    nibble = idx[..., 0] | (idx[..., 1] << 2)                          # [M, K/4]
    meta = (nibble[:, 0::2] | (nibble[:, 1::2] << 4)).to(torch.uint8)
    return packed, meta


def decode(packed: torch.Tensor, meta: torch.Tensor) -> torch.Tensor:
    """The dense A that (packed, meta) stand for, group by group (the check's own reading)."""
    m, half = packed.shape
    dense = torch.zeros(m, 2 * half, dtype=torch.float32)
    p, codes = packed.float(), meta.to(torch.int64)
    for grp in range(half // 2):
        nib = (codes[:, grp // 2] >> (4 * (grp % 2))) & 0xF
        for slot, place in enumerate((nib & 3, nib >> 2)):
            dense[torch.arange(m), 4 * grp + place] = p[:, 2 * grp + slot]
    return dense


def _b_matrix(gen, n: int, k: int, dtype) -> torch.Tensor:
    v = torch.rand(n, k, generator=gen) * 2 - 1
    v = torch.where(v.abs() < 0.1, torch.where(v < 0, -0.25, 0.25), v)
    return v.to(dtype)


def _inputs(dtype, k, n):
    def make(gen, dev):
        dense = structured_sparse(gen, 64, k, dtype)
        rhs = _b_matrix(gen, n, k, dtype)
        packed, meta = encode(dense)
        assert torch.equal(decode(packed, meta), dense.float()), "the encoding does not round-trip"
        return packed.to(dev), meta.to(dev), rhs.to(dev)
    return make


def _ref(args):
    packed, meta, rhs = (a.cpu() for a in args[:3])
    return decode(packed, meta) @ rhs.float().T


def _within(tol):
    def check(args, res, want):
        diff = float((res.cpu().float() - want).abs().max())
        assert diff <= tol, f"max difference {diff} > {tol}"
    return check


#: sm_100a refuses the sparse MMA by name (at its metadata fragment, the first statement
#: of it the backend meets)
REFUSED = {f"gemm_sp.co::{name}": ("sm_100a", "of a sparse MMA (mma.row.row.sp; tcgen05.mma.sp "
                                               "reads it from tensor memory)")
           for name, *_ in FUNCTIONS}


def cases(end2end: str) -> list:
    path = os.path.join(end2end, "gemm_sp.co")
    return [(path, name, _inputs(dtype, k, n), _ref, _within(tol))
            for name, dtype, k, n, tol in FUNCTIONS]
