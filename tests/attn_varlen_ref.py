"""The torch reference of variable-length (packed THD) attention, as FlashAttention's
flash_attn_varlen_func defines it (examples/flash_atten_varlen.co, its tests and the
varlen rows of bench/attention_family.py), written out sequence by sequence in float32.

Sequence b holds query rows cu_q[b] .. cu_q[b + 1] - 1 of Q [total_q, H, D] and key rows
cu_k[b] .. cu_k[b] + len_k - 1 of K / V [total_k, H_KV, D], len_k = cu_k[b + 1] - cu_k[b]
or seqused_k[b] when given. Query head h reads KV head h // (H // H_KV) (GQA). Causal is
aligned bottom right per sequence: query i sees key j when j <= i + len_k - len_q. A row
that sees no key gets O = 0 and LSE = +inf; LSE is [H, total_q], natural log.
"""
from __future__ import annotations

import math

import torch


def lengths(cu: torch.Tensor) -> list[int]:
    """Per-sequence lengths of a cu_seqlens table."""
    cu = cu.tolist()
    return [cu[b + 1] - cu[b] for b in range(len(cu) - 1)]


def cu_seqlens(lens: list[int], device=None) -> torch.Tensor:
    """The int32 table of batch + 1 entries: 0 and the running sums of `lens`."""
    out = [0]
    for n in lens:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32, device=device)


def one_sequence(q, k, v, causal: bool):
    """(O [Sq, H, Dv], LSE [H, Sq]) of one sequence: q [Sq, H, D], k / v [Sk, H_KV, D]."""
    sq, h, d = q.shape
    sk, hkv = k.shape[0], k.shape[1]
    group = h // hkv
    kv_of = torch.arange(h, device=q.device) // group  # the KV head of each query head
    k, v = k[:, kv_of], v[:, kv_of]  # [Sk, H, D]
    s = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(d)
    i = torch.arange(sq, device=q.device)[:, None]
    j = torch.arange(sk, device=q.device)[None, :]
    keep = (j <= i + sk - sq) if causal else torch.ones(sq, sk, dtype=torch.bool,
                                                         device=q.device)
    s = s.masked_fill(~keep, float("-inf"))
    empty = ~keep.any(-1) if sk else torch.ones(sq, dtype=torch.bool, device=q.device)
    lse = torch.logsumexp(s, dim=-1) if sk else torch.full((h, sq), float("-inf"),
                                                            device=q.device)
    p = torch.exp(s - lse[..., None]).masked_fill(empty[:, None], 0.0)
    o = torch.einsum("hqk,khd->qhd", p, v)
    return o, lse.masked_fill(empty, float("inf"))


def varlen_attention(q, k, v, cu_q, cu_k, causal=False, seqused_k=None):
    """(O [total_q, H, Dv], LSE [H, total_q]) in float32 on the inputs' device."""
    q, k, v = (x.float() for x in (q, k, v))
    h, dv = q.shape[1], v.shape[2]
    assert h % k.shape[1] == 0, (h, k.shape[1])
    o = torch.zeros(q.shape[0], h, dv, device=q.device)
    lse = torch.full((h, q.shape[0]), float("inf"), device=q.device)
    starts_q, starts_k = cu_q.tolist(), cu_k.tolist()
    used = seqused_k.tolist() if seqused_k is not None else None
    for b in range(len(starts_q) - 1):
        q0, q1 = starts_q[b], starts_q[b + 1]
        k0 = starts_k[b]
        nk = used[b] if used is not None else starts_k[b + 1] - k0
        if q1 == q0:
            continue
        ob, lb = one_sequence(q[q0:q1], k[k0:k0 + nk], v[k0:k0 + nk], causal)
        o[q0:q1], lse[:, q0:q1] = ob, lb
    return o, lse
