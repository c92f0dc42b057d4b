"""FlashAttention as a `torch.autograd.Function` over Choreo kernels: the forward of
flash_atten_bwd_fwd.co (O and LSE) and the three kernels of flash_atten_bwd.co (the row
dot products Dlt, then dK/dV and dQ).

Tensors are BSHD bf16 with D = 64 or 128 and Q, K, V of one length; K and V may have
fewer heads than Q (GQA: H_KV dividing H, query head h using KV head h / (H / H_KV)).
On CUDA tensors the kernels run on the GPU (`choreo_py.load`); on CPU tensors the same
programs run in the interpreter (`choreo_py.interpret`), slowly, so that the pairing is
testable anywhere.

    from flash_atten_bwd import flash_attn
    out = flash_attn(q, k, v, causal=True)
    out.backward(grad)
"""
from __future__ import annotations

import functools
import os

import torch

import choreo_py

HERE = os.path.dirname(os.path.abspath(__file__))
FWD = os.path.join(HERE, "flash_atten_bwd_fwd.co")
BWD = os.path.join(HERE, "flash_atten_bwd.co")


@functools.lru_cache(maxsize=None)
def programs(causal: bool, dim: int, device_type: str, target=None):
    """(forward, backward) callables for one configuration; GPU kernels for CUDA
    tensors, the interpreter's callables (sm_90a's accumulator layout) otherwise."""
    defines = {"CAUSAL": str(int(causal)), "DIM": str(dim)}
    if device_type == "cuda":
        return tuple(choreo_py.load(p, target=target, defines=defines) for p in (FWD, BWD))
    return tuple(choreo_py.interpret(p, defines=defines, target=target or "sm_90a")
                 for p in (FWD, BWD))


def _check(q, k, v):
    """The kernels' contract: BSHD bf16 on one device, one length, D of 64 or 128, and as
    many KV heads as query heads or a divisor of them."""
    if not (q.dtype == k.dtype == v.dtype == torch.bfloat16):
        raise TypeError("flash_attn takes bf16 Q, K, V")
    ok = (q.dim() == 4 and k.shape == v.shape and k.dim() == 4 and q.shape[-1] in (64, 128)
          and q.shape[:2] == k.shape[:2] and q.shape[-1] == k.shape[-1]
          and k.shape[2] > 0 and q.shape[2] % k.shape[2] == 0)
    if not ok:
        raise ValueError(f"flash_attn takes BSHD Q, K, V of one length and D (64 or 128), "
                         f"K and V of one shape with a number of heads dividing Q's, not "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")


class FlashAttnFunction(torch.autograd.Function):
    """O = softmax(Q Kᵀ / sqrt(D)) V per batch and head; the backward recomputes P from LSE."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False, target=None):
        _check(q, k, v)
        q, k, v = (x.contiguous() for x in (q, k, v))
        b, s, h, d = q.shape
        fwd, _ = programs(bool(causal), d, q.device.type, target)
        o = torch.empty_like(q)
        # Rows padded to whole 64-row tiles: the forward TMA-stores them, which needs
        # a row stride of a multiple of 16 bytes (the backward reads the first S).
        lse = torch.empty(b, h, -(-s // 64) * 64, dtype=torch.float32, device=q.device)
        # Outside autocast: the interpreter's float32 arithmetic (CPU tensors) would
        # otherwise be cast to bf16 by an enclosing torch.autocast.
        with torch.autocast(q.device.type, enabled=False):
            fwd.fa_fwd_lse(q, k, v, o, lse)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.config = (bool(causal), d, q.device.type, target)
        return o

    @staticmethod
    def backward(ctx, grad):
        q, k, v, o, lse = ctx.saved_tensors
        _, bwd = programs(*ctx.config)
        do = grad.to(torch.bfloat16).contiguous()
        dlt = torch.empty(q.shape[0], q.shape[2], q.shape[1], dtype=torch.float32,
                          device=q.device)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        with torch.autocast(q.device.type, enabled=False):
            bwd.fa_bwd_pre(o, do, dlt)
            bwd.fa_bwd_dkdv(q, k, v, do, lse, dlt, dk, dv)
            bwd.fa_bwd_dq(q, k, v, do, lse, dlt, dq)
        return dq, dk, dv, None, None


def flash_attn(q, k, v, causal=False, target=None):
    """Attention of BSHD bf16 tensors with gradients for Q, K and V."""
    return FlashAttnFunction.apply(q, k, v, causal, target)
