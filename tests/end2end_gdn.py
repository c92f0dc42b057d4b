"""The port of gdn_recurrence.co's main() (a Gated Delta Network's chunked state update)
as an end2end_refs.py case: `cases(end2end)`.

Its main: BH = 2 heads, SEQ = 128 (two chunks of 64), K, W, U uniform in [-0.05, 0.05)
(bf16), gates G = -0.01 * uniform [0, 1) (f32), the state zero; V_new_T holds the
reference's transposed V_new (the kernel reads it as the second MMA's A operand), and
the state the kernel leaves must match the reference's (`reference_gdn`, f32 throughout,
ported below) element by element within 5e-3 (it counts the mismatches, and passes at 0).
The inputs are drawn from torch's generator, not C's rand(): the same distributions.
"""
from __future__ import annotations

import os

import torch

DK = DV = CHUNK = 64


def gdn_reference(K, W, U, G, State, chunk=CHUNK):
    """reference_gdn of the program: (the state after every chunk, V_new), both bf16."""
    K, W, U, G = (x.cpu().float() for x in (K, W, U, G))
    heads, seq, _ = K.shape
    state_out = torch.empty(heads, DV, DK, dtype=torch.bfloat16)
    v_out = torch.empty(heads, seq, DV, dtype=torch.bfloat16)
    for bh in range(heads):
        S = State[bh].cpu().float().t().clone()  # S[k][j] = State[j][k]
        for t0 in range(0, seq, chunk):
            t1 = min(t0 + chunk, seq)
            vn = U[bh, t0:t1] - W[bh, t0:t1] @ S
            g_last = G[bh, t1 - 1]
            vn = vn * torch.exp2((g_last - G[bh, t0:t1]) * 1.442695)[:, None]
            S = S * torch.exp2(g_last * 1.442695)
            v_out[bh, t0:t1] = vn.to(torch.bfloat16)
            S = S + K[bh, t0:t1].t() @ vn
        state_out[bh] = S.t().to(torch.bfloat16)
    return state_out, v_out


def _inputs(gen, dev):
    heads, seq = 2, 128

    def rf(*shape):
        return ((torch.rand(shape, generator=gen) - 0.5) * 0.1).to(torch.bfloat16)
    K, W, U = rf(heads, seq, DK), rf(heads, seq, DK), rf(heads, seq, DV)
    G = -0.01 * torch.rand(heads, seq, generator=gen)
    state = torch.zeros(heads, DV, DK, dtype=torch.bfloat16)
    _, v_new = gdn_reference(K, W, U, G, state)
    v_new_t = v_new.transpose(1, 2).contiguous()
    v_out = torch.zeros(heads, seq, DV, dtype=torch.bfloat16)
    return tuple(x.to(dev) for x in (K, W, U, G, state, v_out, v_new_t))


def _ref(args):
    K, W, U, G = args[:4]
    return gdn_reference(K, W, U, G, torch.zeros(K.shape[0], DV, DK))[0]


def _check(args, res, want):
    got = args[4].cpu().float()
    bad = int(((got - want.float()).abs() > 5e-3).sum())
    assert bad == 0, f"{bad} state elements differ from the reference by more than 5e-3"


def cases(end2end: str) -> list:
    return [(os.path.join(end2end, "gdn_recurrence.co"), "gdn_chunk_state", _inputs, _ref,
             _check)]
