"""The torch reference of the attention family (examples/flash_atten_family.co, its GPU
tests and bench/attention.py's family rows): FlashAttention's semantics in float32.

GQA / MQA by repeating each KV head over its H / H_KV query heads (repeat_interleave),
causal and windows aligned bottom right (query i sees key j when
i + KV_SEQ - Q_SEQ - left <= j <= i + KV_SEQ - Q_SEQ + right, -1 unbounded, causal sets
right = 0), softcap tanh(s / cap) * cap on the scaled scores, and the natural-log
log-sum-exp per row, [B, H, Q_SEQ]. A row that sees no key gets O = 0 and LSE = +inf,
as FlashAttention returns them.
"""
from __future__ import annotations

import math

import torch


def visible(sq: int, skv: int, causal=False, window=(-1, -1), device=None) -> torch.Tensor:
    """[sq, skv] bool: which keys each query sees."""
    left, right = window
    if causal:
        right = 0
    i = torch.arange(sq, device=device)[:, None] + (skv - sq)
    j = torch.arange(skv, device=device)[None, :]
    keep = torch.ones(sq, skv, dtype=torch.bool, device=device)
    if right >= 0:
        keep &= j <= i + right
    if left >= 0:
        keep &= j >= i - left
    return keep


def attention(q, k, v, causal=False, window=(-1, -1), softcap=None, scale=None):
    """(O [B, Sq, H, Dv], LSE [B, H, Sq]) of BSHD inputs, in float32 on their device."""
    q, k, v = (x.float() for x in (q, k, v))
    h, hkv = q.shape[2], k.shape[2]
    assert h % hkv == 0, (h, hkv)
    k = k.repeat_interleave(h // hkv, dim=2)
    v = v.repeat_interleave(h // hkv, dim=2)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if softcap:
        s = torch.tanh(s / softcap) * softcap
    keep = visible(q.shape[1], k.shape[1], causal, window, device=q.device)
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    empty = ~keep.any(-1)  # [Sq]: rows that see no key
    p = torch.exp(s - lse[..., None]).masked_fill(empty[:, None], 0.0)
    o = torch.einsum("bhqk,bkhd->bqhd", p, v)
    return o, lse.masked_fill(empty, float("inf"))
