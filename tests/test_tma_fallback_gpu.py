"""On the GPU: the GEMM of tests/test_tma_fallback.py with rows of 200 bytes (K = N = 100:
A, B and C have strides TMA cannot encode) runs through `choreo_py.load`, which picks the
build that copies those tensors with the threads, and matches torch; aligned rows keep TMA."""
from __future__ import annotations

from pathlib import Path

import pytest

import choreo_py

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu  # skipped without a CUDA GPU (conftest.py)

GEMM = Path(__file__).resolve().parent.parent / "examples" / "gemm.co"


@pytest.mark.parametrize("m, n, k", [(256, 100, 100), (256, 256, 128)])
def test_gemm_any_row_width_on_the_gpu(m, n, k):
    fn = choreo_py.load(str(GEMM))
    g = torch.Generator(device="cuda").manual_seed(m + 3 * n + 7 * k)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    fn(a, b, c)
    torch.cuda.synchronize()
    ref = (a.float() @ b.float().T)
    assert torch.allclose(c.float(), ref, atol=0.05, rtol=0.02)
    assert bool(fn._builds) == (n * 2 % 16 != 0 or k * 2 % 16 != 0)
