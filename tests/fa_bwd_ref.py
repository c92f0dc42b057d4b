"""Inputs and the torch reference of FlashAttention's backward (BSHD bf16 tensors): the
gradients of torch's SDPA in float32 on the CPU, and the forward's LSE (natural log)."""
from __future__ import annotations

import pathlib

import torch

import choreo_py

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
BWD = str(EXAMPLES / "flash_atten_bwd.co")
FWD = str(EXAMPLES / "flash_atten_bwd_fwd.co")


def bwd_inputs(b, s, h, d, seed=0):
    """Q, K, V, dO: seeded random bf16 [B, S, H, D]."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, s, h, d, generator=g).to(torch.bfloat16) for _ in range(4)]


def forward_ref(q, k, v, causal):
    """(O as bf16, LSE f32 [B, H, S]) of attention in float32."""
    qt, kt, vt = (x.float().transpose(1, 2) for x in (q, k, v))
    s = qt @ kt.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, -1)
    o = torch.softmax(s, -1) @ vt
    return o.transpose(1, 2).to(torch.bfloat16).contiguous(), lse.contiguous()


def grads_ref(q, k, v, do, causal):
    """(dQ, dK, dV) in float32 BSHD: torch autograd of SDPA in float32."""
    t = [x.float().transpose(1, 2).requires_grad_() for x in (q, k, v)]
    o = torch.nn.functional.scaled_dot_product_attention(*t, is_causal=causal)
    o.backward(do.float().transpose(1, 2))
    return [x.grad.transpose(1, 2) for x in t]


def rel(out, ref):
    """Relative Frobenius error of `out` against `ref`."""
    return ((out.float() - ref).norm() / ref.norm()).item()


def interpret_bwd(q, k, v, do, o, lse, causal, target="sm_90a"):
    """Runs the three kernels of examples/flash_atten_bwd.co in the interpreter;
    returns (dQ, dK, dV, Dlt)."""
    b, s, h, d = q.shape
    defines = {"CAUSAL": "1" if causal else "0", "DIM": str(d)}
    dlt = torch.full((b, h, s), float("nan"))
    dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
    run = dict(defines=defines, target=target)
    choreo_py.interpret(BWD, dict(O=o, dO=do, Dlt=dlt), function="fa_bwd_pre", **run)
    choreo_py.interpret(BWD, dict(Q=q, K=k, V=v, dO=do, LSE=lse, Dlt=dlt, dK=dk, dV=dv),
                        function="fa_bwd_dkdv", **run)
    choreo_py.interpret(BWD, dict(Q=q, K=k, V=v, dO=do, LSE=lse, Dlt=dlt, dQ=dq),
                        function="fa_bwd_dq", **run)
    return dq, dk, dv, dlt
