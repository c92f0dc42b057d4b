"""The examples, compiled by sema and interpreted, against torch references."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py.interp import InterpError, RunStats
from choreo_py.interp.api import UsageError

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"
SCHEDULES = [("round_robin", 0), ("random", 1), ("random", 2)]


def bshd(b, s, h, seed, d=128):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, s, h, d, generator=g).to(torch.bfloat16)


def rel(out, ref):
    return ((out.float() - ref).norm() / ref.norm()).item()


def sdpa(q, k, v, causal):
    t = [x.float().transpose(1, 2) for x in (q, k, v)]
    return torch.nn.functional.scaled_dot_product_attention(*t, is_causal=causal).transpose(1, 2)


def attention(path, b, h, s, kv, schedule="round_robin", seed=0, **kw):
    """Interprets an FA program; the target is sm_90a (4 owners per accumulator row, the
    stricter model) unless `kw` says otherwise."""
    kw.setdefault("target", "sm_90a")
    q, k, v = bshd(b, s, h, 1), bshd(b, kv, h, 2), bshd(b, kv, h, 3)
    o = torch.full_like(q, float("nan"))
    choreo_py.interpret(str(path), dict(Q=q, K=k, V=v, O=o), schedule=schedule, seed=seed, **kw)
    return q, k, v, o


# The causal seed needs Q_SEQ == KV_SEQ; a ragged Q_SEQ works: rows past it
# are clipped by the TMA store, and the diagonal mask hides the zero-filled
# keys past KV_SEQ from every real row.
@pytest.mark.parametrize("b,h,s", [(1, 1, 256), (1, 2, 384), (2, 1, 200), (1, 1, 72)])
@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_causal_seed_matches_sdpa(b, h, s, schedule, seed):
    q, k, v, o = attention(EX / "flash_atten_causal.co", b, h, s, s, schedule, seed)
    assert rel(o, sdpa(q, k, v, True)) < 1e-2


# The non-causal example masks the keys past a ragged KV_SEQ in its prologue.
@pytest.mark.parametrize("b,h,s,kv", [(1, 1, 256, 256), (1, 2, 384, 200), (2, 1, 200, 136),
                                      (1, 1, 128, 520)])
@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_noncausal_example_matches_sdpa(b, h, s, kv, schedule, seed):
    q, k, v, o = attention(EX / "flash_atten.co", b, h, s, kv, schedule, seed)
    assert rel(o, sdpa(q, k, v, False)) < 1e-2


def test_attention_results_do_not_depend_on_the_schedule():
    outs = [attention(EX / "flash_atten_causal.co", 1, 2, 384, 384, sch, seed)[3]
            for sch, seed in SCHEDULES + [("random", 7)]]
    for o in outs[1:]:
        assert torch.equal(o, outs[0])


@pytest.mark.parametrize("owners", [1, 2, 8])
def test_seed_is_right_for_other_row_ownerships(owners):
    q, k, v, o = attention(EX / "flash_atten_causal.co", 1, 1, 256, 256, owners=owners)
    assert rel(o, sdpa(q, k, v, True)) < 1e-2


def gemm(m, n, k, schedule="round_robin", seed=0):
    g = torch.Generator().manual_seed(m * 7 + n)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    choreo_py.interpret(str(EX / "gemm.co"), dict(A=a, B=b, C=c), schedule=schedule, seed=seed)
    return a, b, c


@pytest.mark.parametrize("m,n,k", [(256, 256, 256), (128, 384, 64), (200, 136, 100)])
@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_gemm_matches_matmul(m, n, k, schedule, seed):
    a, b, c = gemm(m, n, k, schedule, seed)
    assert rel(c, a.float() @ b.float().T) < 1e-2


@pytest.mark.parametrize("rows", [128, 300])
@pytest.mark.parametrize("schedule,seed", SCHEDULES[:2])
def test_softmax_matches_torch(rows, schedule, seed):
    """Per-thread scalar code: 128 threads, each one row of a full 128 x 128 tile."""
    g = torch.Generator().manual_seed(rows)
    x = (3 * torch.randn(rows, 128, generator=g)).to(torch.bfloat16)
    y = torch.full_like(x, float("nan"))
    stats = RunStats()
    choreo_py.interpret(str(EX / "softmax.co"), dict(X=x, Y=y), schedule=schedule, seed=seed,
                        stats=stats)
    ref = torch.softmax(x.float(), dim=-1)
    assert rel(y, ref) < 1e-2
    assert (y.float() - ref).abs().max() < 4e-3  # bf16 rounding of values up to 1
    assert stats.blocks == (rows + 127) // 128
    # Three loops of 128 over 128 threads: every thread's statements are counted.
    assert stats.statements > stats.blocks * 128 * 3 * 128


# ---------------------------------------------------------------- the Python API


def test_interpret_returns_the_tensors_updated_in_place():
    q, k, v = bshd(1, 128, 1, 1), bshd(1, 128, 1, 2), bshd(1, 128, 1, 3)
    o = torch.zeros_like(q)
    tensors = dict(Q=q, K=k, V=v, O=o)
    out = choreo_py.interpret(str(EX / "flash_atten_causal.co"), tensors, B=1, H=1)
    assert out is tensors and out["O"] is o
    assert rel(o, sdpa(q, k, v, True)) < 1e-2


def test_interpret_checks_names_and_dims():
    q, k, v = bshd(1, 128, 1, 1), bshd(1, 128, 1, 2), bshd(1, 128, 1, 3)
    o = torch.zeros_like(q)
    path = str(EX / "flash_atten_causal.co")
    with pytest.raises(UsageError, match="no tensor for parameter 'O'"):
        choreo_py.interpret(path, dict(Q=q, K=k, V=v))
    with pytest.raises(UsageError, match="has no parameter 'P'"):
        choreo_py.interpret(path, dict(Q=q, K=k, V=v, O=o, P=o))
    with pytest.raises(UsageError, match="has no dimension 'S'"):
        choreo_py.interpret(path, dict(Q=q, K=k, V=v, O=o), S=128)
    with pytest.raises(UsageError, match=r"Q: dimension 2 \(H\) is 1, but H = 2"):
        choreo_py.interpret(path, dict(Q=q, K=k, V=v, O=o), H=2)
    with pytest.raises(UsageError, match=r"Q: dtype torch.float32, flash_atten takes "
                                         r"torch.bfloat16 \(bf16\)"):
        choreo_py.interpret(path, dict(Q=q.float(), K=k, V=v, O=o))
    with pytest.raises(UsageError, match="no __co__ function named 'nope'"):
        choreo_py.interpret(path, dict(Q=q, K=k, V=v, O=o), function="nope")
