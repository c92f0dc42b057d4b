"""The port of end2end/flash_atten.co's main() check (tests/end2end_refs.py's cases, the
emulator's tests in test_scalar_params.py)."""
from __future__ import annotations

import torch


def _floats(gen, shape, lo, hi, dtype, device):
    return (torch.rand(shape, generator=gen) * (hi - lo) + lo).to(dtype).to(device)


# end2end/flash_atten.co: attention with a run-time causal flag (a bool parameter of the
# MMA kernel); its main: B=2, H=2, Q_SEQ=KV_SEQ=100 (64-row tiles: the last one partial),
# Q, K in [-0.5, 0.5), V in [-1, 1); an element fails where rel > 0.05 and err > 0.01.
# Its reference keeps the non-causal scores of the padded keys (0, up to a whole tile) in
# the row maximum and the sum, as the kernel computes them, and rounds P to f16.
def fa_inputs(causal):
    def make(gen, dev):
        q, k = (_floats(gen, (2, 2, 100, 64), -0.5, 0.5, torch.float16, dev) for _ in range(2))
        v = _floats(gen, (2, 2, 100, 64), -1.0, 1.0, torch.float16, dev)
        return q, k, v, causal
    return make


def fa_ref(args):
    q, k, v = (a.cpu().float() for a in args[:3])
    causal = args[3]
    seq, kv = q.shape[2], k.shape[2]
    past, pad = kv - seq, -(-kv // 64) * 64
    scale = 1.0 / 64 ** 0.5 * 1.44269504
    cols = kv if causal else pad
    s = torch.zeros(q.shape[0], q.shape[1], seq, cols)
    s[..., :kv] = q @ k.transpose(-1, -2)
    keep = torch.ones(seq, cols, dtype=torch.bool)
    if causal:
        i, j = torch.meshgrid(torch.arange(seq), torch.arange(cols), indexing="ij")
        keep = j <= i + past
    s = s.masked_fill(~keep, float("-inf"))
    m = s.amax(-1, keepdim=True)
    p = torch.exp2(s * scale - m * scale)
    lsum = p.sum(-1, keepdim=True)
    p16 = p.half().float()[..., :kv]
    return (p16 @ v) / lsum


def fa_check(args, res, want):
    got = res.cpu().float()
    err = (got - want).abs()
    bad = (err / (want.abs() + 1e-6) > 0.05) & (err > 0.01)
    assert not bool(bad.any()), f"{int(bad.sum())} mismatches, max_err={err.max().item()}"
