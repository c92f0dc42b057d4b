"""The 2:4 structured-sparse MMA (mma.row.row.sp, ir.SparseMma): the interpreter's
reading of packed A and its metadata, and the emulator's wgmma.mma_async.sp, each
against a dense torch product of the matrix the runtime's encoder packed
(tests/end2end_sparse.py; the whole programs run from tests/test_end2end*.py)."""
from __future__ import annotations

import pytest
import torch

from choreo_py.interp import sparse as interp_sparse
from choreo_py.interp.errors import InterpError
from end2end_sparse import encode, structured_sparse


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float8_e4m3fn])
def test_interpreter_expands_the_encoders_packing(dtype):
    gen = torch.Generator().manual_seed(1)
    dense = structured_sparse(gen, 64, 64, dtype)
    packed, meta = encode(dense)
    got = interp_sparse.expand(packed.float(), meta.float(), None)
    assert torch.equal(got, dense.float())
    assert int((got != 0).sum()) == 64 * 32  # two of every four


def test_interpreter_reads_unordered_indices_and_refuses_equal_ones():
    packed = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    meta = torch.tensor([[0b0010 | (0b1101 << 4)]], dtype=torch.float32)  # (2, 0), (1, 3)
    got = interp_sparse.expand(packed, meta, None)
    assert got.tolist() == [[2.0, 0.0, 1.0, 0.0, 0.0, 3.0, 0.0, 4.0]]
    with pytest.raises(InterpError, match="0b0101"):
        interp_sparse.expand(packed, torch.tensor([[0b0101]], dtype=torch.float32), None)
