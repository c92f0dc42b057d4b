"""Decode attention over a paged KV cache in torch, spelled out (tests/test_attn_decode.py,
bench/attention_decode.py): each sequence's keys gathered page by page through its block
table, the GQA heads expanded, the keys past cache_seqlens (and a token's later ones)
masked; and the paged inputs themselves, with the memory no kernel should read poisoned.
"""
from __future__ import annotations

import math

import torch


def gather(cache, block_table, b: int, length: int, page: int):
    """Sequence b's first `length` rows of `cache` [NUM_PAGES, PAGE, H_KV, D], in order:
    key j lies in page block_table[b, j // PAGE], row j % PAGE."""
    pages = block_table[b, :math.ceil(length / page)].long()
    return cache[pages].reshape(-1, *cache.shape[2:])[:length]


def paged_attention(q, k_cache, v_cache, block_table, cache_seqlens):
    """(O [B, Q_LEN, H, D] f32, LSE [B, H, Q_LEN] f32, natural log) of softmax(Q K^T /
    sqrt(D)) V, token t of Q (position seqlen - Q_LEN + t) seeing keys j <= its position,
    query head h reading KV head h // (H / H_KV). A row that sees no key gets O = 0 and
    LSE = +inf."""
    b, qlen, h, d = q.shape
    page, hkv = k_cache.shape[1], k_cache.shape[2]
    outs, lses = [], []
    for i in range(b):
        n = int(cache_seqlens[i])
        k = gather(k_cache, block_table, i, n, page).float().repeat_interleave(h // hkv, 1)
        v = gather(v_cache, block_table, i, n, page).float().repeat_interleave(h // hkv, 1)
        s = torch.einsum("thd,khd->htk", q[i].float(), k) / math.sqrt(d)
        pos = torch.arange(n - qlen, n, device=q.device)[:, None]
        s = s.masked_fill(torch.arange(n, device=q.device)[None, :] > pos, float("-inf"))
        lse = torch.logsumexp(s, -1)
        seen = torch.isfinite(lse)
        p = torch.where(seen[..., None], torch.softmax(s, -1), torch.zeros_like(s))
        outs.append(torch.einsum("htk,khd->thd", p, v))
        lses.append(torch.where(seen, lse, torch.full_like(lse, float("inf"))))
    return torch.stack(outs), torch.stack(lses)


def paged_inputs(lens, page: int, h: int, hkv: int, d: int, qlen: int = 1, seed: int = 0,
                 spare_pages: int = 3, block_n: int = 0, poison: bool = True, device="cpu"):
    """(Q, K cache, V cache, block table, cache_seqlens) for sequences of `lens` keys, their
    pages scattered through the pool in a random order. What a correct kernel never reads
    is NaN: the spare pages (block-table entries past a sequence's pages point at one),
    K rows past each sequence's length, and V rows past its last key tile of `block_n`
    (V rows inside it are multiplied by P = 0, so must be finite). `poison` False leaves
    them random (a benchmark's pool: torch's masked SDPA propagates a NaN key)."""
    g = torch.Generator().manual_seed(seed)
    used = [math.ceil(n / page) for n in lens]
    npages = sum(used) + spare_pages
    k = torch.randn(npages, page, hkv, d, generator=g).bfloat16()
    v = torch.randn(npages, page, hkv, d, generator=g).bfloat16()
    perm = torch.randperm(npages, generator=g)
    table = torch.full((len(lens), max(used) + 1), int(perm[-1]), dtype=torch.int32)
    at = 0
    for i, (n, u) in enumerate(zip(lens, used)):
        table[i, :u] = perm[at:at + u].int()
        at += u
        if not poison:
            continue
        rows = k[table[i, :u].long()].reshape(-1, hkv, d)
        rows[n:] = float("nan")
        k[table[i, :u].long()] = rows.reshape(u, page, hkv, d)
        tile_end = math.ceil(n / (block_n or page)) * (block_n or page)
        rows = v[table[i, :u].long()].reshape(-1, hkv, d)
        rows[tile_end:] = float("nan")
        v[table[i, :u].long()] = rows.reshape(u, page, hkv, d)
    if poison:
        k[perm[at:].long()] = float("nan")
        v[perm[at:].long()] = float("nan")
    q = torch.randn(len(lens), qlen, h, d, generator=g).bfloat16()
    seqlens = torch.tensor(list(lens), dtype=torch.int32)
    return tuple(t.to(device) for t in (q, k, v, table, seqlens))
