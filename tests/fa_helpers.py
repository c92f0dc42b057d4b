"""Helpers shared by the tests: causal attention inputs and references, interpreting an
FA program on them, and assembling PTX with ptxas where it is installed."""
from __future__ import annotations

import pytest
import torch

import choreo_py


def bshd(b, s, h, seed, d=128):
    """Random bf16 [B, S, H, D] (seeded)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, s, h, d, generator=g).to(torch.bfloat16)


def sdpa(q, k, v):
    """Causal attention of BSHD inputs in float32."""
    t = [x.float().transpose(1, 2) for x in (q, k, v)]
    return torch.nn.functional.scaled_dot_product_attention(*t, is_causal=True).transpose(1, 2)


def sdpa_full(q, k, v):
    """Non-causal attention of BSHD inputs in float32."""
    t = [x.float().transpose(1, 2) for x in (q, k, v)]
    return torch.nn.functional.scaled_dot_product_attention(*t).transpose(1, 2)


def fa_inputs(sq, skv, h=1):
    """Q, K, V (BSHD bf16, as tests/test_flash_atten_blackwell.py makes them) and a NaN O."""
    q, k, v = bshd(1, sq, h, 1), bshd(1, skv, h, 2), bshd(1, skv, h, 3)
    return q, k, v, torch.full_like(q, float("nan"))


def rel(out, ref):
    return ((out.float() - ref).norm() / ref.norm()).item()


def run(path, b, h, s, sms=None, schedule="round_robin", seed=0, stats=None, target="sm_90a"):
    """Interprets the FA program at `path` on fresh inputs for `target` (sm_90a: 4 owners
    per accumulator row, the stricter model); returns (q, k, v, o)."""
    q, k, v = bshd(b, s, h, 1), bshd(b, s, h, 2), bshd(b, s, h, 3)
    o = torch.full_like(q, float("nan"))
    defines = {"NUM_SMS": str(sms)} if sms else None
    choreo_py.interpret(str(path), dict(Q=q, K=k, V=v, O=o), schedule=schedule, seed=seed,
                        defines=defines, stats=stats, target=target)
    return q, k, v, o


def run_error(path, b, h, s, schedule="round_robin", seed=0, sms=3):
    """(rel. error against SDPA, output) of interpreting the FA program at `path`."""
    q, k, v, o = run(path, b, h, s, sms=sms, schedule=schedule, seed=seed)
    return rel(o, sdpa(q, k, v)), o


def assemble(ptx: str, target: str) -> str:
    """ptxas -v on `ptx` (must succeed); its report. Without ptxas the calling test is
    skipped (visibly), never passed: what it checks of the assembled code is unchecked."""
    from choreo_py.runtime.build import find_ptxas, ptxas

    if find_ptxas() is None:
        pytest.skip("ptxas not on PATH: the generated PTX was not assembled")
    return ptxas(ptx, target, verbose=True)[1]
