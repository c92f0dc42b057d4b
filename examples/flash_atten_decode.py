"""Decode attention over a paged KV cache: the two kernels of flash_atten_decode.co (the
split kernel, then the combine) behind one call, with the partials allocated here.

    from flash_atten_decode import decode
    out = decode(q, k_cache, v_cache, block_table, cache_seqlens)       # [B, Q_LEN, H, D]
    out, lse = decode(..., return_lse=True)                              # lse [B, H, Q_LEN]

q [B, Q_LEN, H, D] bf16 (the Q_LEN newest tokens, bottom-right causal among themselves);
k_cache, v_cache [NUM_PAGES, PAGE, H_KV, D] bf16; block_table [B, MAX_PAGES] and
cache_seqlens [B] int32. On CUDA tensors the kernels run on the GPU (`choreo_py.load`);
on CPU tensors in the interpreter (sm_90a's accumulator layout), slowly, so that the
pairing and the split heuristic are testable anywhere.
"""
from __future__ import annotations

import functools
import os

import torch

import choreo_py

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "flash_atten_decode.co")
TILE_ROWS = 64  # the split kernel's BLOCK_M: the LSEs of one partial in L_part
CONSUMERS = 2   # consumer warpgroups a block, each writing a partial of its own
H200_SMS = 132


def block_n(page: int) -> int:
    """The key tile of a page size, as the program's default BLOCK_N."""
    return min(page, 128)


def num_splits(batch: int, kv_heads: int, max_keys: int, page: int, sms: int = H200_SMS) -> int:
    """Splits per (batch, KV head): enough blocks to fill the SMs once (one block an SM:
    the ring takes most of the shared memory), never more than the longest sequence has
    key tiles, and none for short ones (four tiles or fewer), as FA's heuristic."""
    tiles = -(-max_keys // block_n(page))
    if tiles <= 4:
        return 1
    return max(1, min(sms // (batch * kv_heads), tiles, 128))


def defines(q, k_cache, lse: bool, consumers: int = CONSUMERS) -> dict:
    b, qlen, h, d = q.shape
    _, page, hkv, _ = k_cache.shape
    if h % hkv:
        raise ValueError(f"H_KV ({hkv}) must divide H ({h})")
    return {"PAGE": str(page), "GROUP": str(h // hkv), "QLEN": str(qlen), "DIM": str(d),
            "LSE": str(int(lse)), "CONSUMERS": str(consumers)}


@functools.lru_cache(maxsize=None)
def programs(items: tuple, device_type: str, target=None):
    """The program's two functions for one configuration: GPU kernels for CUDA tensors,
    the interpreter's callables otherwise."""
    d = dict(items)
    if device_type == "cuda":
        return choreo_py.load(PATH, target=target, defines=d)
    return choreo_py.interpret(PATH, defines=d, target=target or "sm_90a")


def partials(splits: int, b: int, qlen: int, h: int, hkv: int, d: int, device,
             consumers: int = CONSUMERS):
    """(O_part, L_part) for `splits` blocks a (sequence, KV head): a partial per consumer
    warpgroup of each, L_part holding each partial's 64 tile rows side by side."""
    parts = splits * consumers
    f32 = dict(dtype=torch.float32, device=device)
    return (torch.empty(parts, b, qlen, h, d, **f32),
            torch.empty(b, hkv, parts * TILE_ROWS, **f32))


def decode(q, k_cache, v_cache, block_table, cache_seqlens, *, splits: int = 0,
           return_lse: bool = False, target=None, sms: int = H200_SMS,
           consumers: int = CONSUMERS):
    """O (and with `return_lse` the rows' log-sum-exp) of one decode step; `splits` (blocks
    a sequence and KV head) 0 picks them by num_splits()."""
    lib = programs(tuple(sorted(defines(q, k_cache, return_lse, consumers).items())),
                   q.device.type, target)
    b, qlen, h, d = q.shape
    hkv = k_cache.shape[2]
    if splits < 1:
        splits = num_splits(b, hkv, block_table.shape[1] * k_cache.shape[1], k_cache.shape[1],
                            sms)
    o_part, l_part = partials(splits, b, qlen, h, hkv, d, q.device, consumers)
    lib.decode_split(q, k_cache, v_cache, block_table, cache_seqlens, o_part, l_part)
    out = torch.empty(b, qlen, h, d, dtype=torch.bfloat16, device=q.device)
    if not return_lse:
        lib.decode_combine(o_part, l_part, out)
        return out
    lse = torch.empty(b, h, qlen, dtype=torch.float32, device=q.device)
    lib.decode_combine(o_part, l_part, out, lse)
    return out, lse
