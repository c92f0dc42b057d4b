"""A load()ed kernel inside torch.compile and inside a captured CUDA graph gives
eager's output (on a Hopper GPU: the kernels are compiled for sm_90a).

Skipped without a CUDA GPU of compute capability 9.0 and cuda-python (marked `gpu`).
Run on the H200 with:

    python -m pytest -v tests/test_gpu_torch_integration.py
    python3 bench/compile.py --cache --launch --target sm_90a --repeat 5   # first vs second load
"""
from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import choreo_py  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GEMM = str(ROOT / "examples" / "gemm.co")
FA = str(ROOT / "examples" / "flash_atten_causal.co")


def _hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def _cuda_python() -> bool:
    try:
        from cuda.bindings import driver  # noqa: F401
    except ImportError:
        return False
    return True


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _hopper(), reason="needs a CUDA GPU of compute capability 9.0"),
    pytest.mark.skipif(not _cuda_python(), reason="needs cuda-python (cuda.bindings)"),
]


def _gemm_inputs(m=512, n=256, k=512, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
    b = torch.randn(n, k, device="cuda", generator=g).bfloat16()
    return a, b


def _rel(out, ref):
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


@pytest.fixture(scope="module")
def gemm():
    return choreo_py.load(GEMM, target="sm_90a")


def _step(kernel):
    def step(a, b):
        c = torch.empty(a.shape[0], b.shape[0], dtype=torch.bfloat16, device=a.device)
        kernel.op(a, b, c)
        return torch.relu(c.float()) * 2 + 1
    return step


def test_eager_matches_torch(gemm):
    a, b = _gemm_inputs()
    c = torch.full((a.shape[0], b.shape[0]), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a, b, c)
    torch.backends.cuda.matmul.allow_tf32 = False
    assert _rel(c, a.float() @ b.float().T) < 1e-2


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_torch_compile_matches_eager(gemm, mode):
    """Inductor traces through the custom op (one graph); reduce-overhead also runs
    the compiled graph as a CUDA graph."""
    torch._dynamo.reset()
    step = _step(gemm)
    compiled = torch.compile(step, mode=mode, fullgraph=True)
    for seed in range(3):  # several calls: reduce-overhead records, then replays
        a, b = _gemm_inputs(seed=seed)
        eager = step(a, b)
        out = compiled(a, b).clone()
        torch.cuda.synchronize()
        assert torch.equal(out, eager), f"seed {seed}: max diff {(out - eager).abs().max()}"


def test_cuda_graph_capture_matches_eager(gemm):
    a, b = _gemm_inputs()
    c = torch.empty(a.shape[0], b.shape[0], dtype=torch.bfloat16, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up outside the capture: module load, tensor maps
        gemm(a, b, c)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemm(a, b, c)
    for seed in (1, 2):  # new data in the same buffers, then replay
        a2, b2 = _gemm_inputs(seed=seed)
        a.copy_(a2)
        b.copy_(b2)
        c.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        eager = torch.empty_like(c)
        gemm(a2, b2, eager)
        torch.cuda.synchronize()
        assert torch.equal(c, eager)


def test_flash_attention_op_in_torch_compile_and_graph():
    fa = choreo_py.load(FA, target="sm_90a")
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, 512, 4, 128, device="cuda", generator=g).bfloat16()
               for _ in range(3))

    def attn(q, k, v):
        o = torch.empty_like(q)
        fa.op(q, k, v, o)
        return o

    eager = attn(q, k, v)
    torch._dynamo.reset()
    assert torch.equal(torch.compile(attn, fullgraph=True)(q, k, v), eager)
    o = torch.empty_like(q)
    fa(q, k, v, o)  # warm-up
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fa(q, k, v, o)
    o.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(o, eager)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(x.float().transpose(1, 2) for x in (q, k, v)), is_causal=True).transpose(1, 2)
    assert _rel(eager, ref) < 1e-2
