"""The reference interpreter on the example kernels: results, schedules, faults, speed."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import interp_programs as P  # noqa: E402

from choreo_py.interp import (DeadlockError, RaceError, interpret_module, run_kernel,  # noqa: E402
                              static_counts)

SCHEDULES = [("round_robin", 0), ("random", 1), ("random", 2)]


def _bshd(b, s, h, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, s, h, 128, generator=g).to(torch.bfloat16)


def _attention(kernel, b, h, s, schedule="round_robin", seed=0, owners=4, kv=None):
    q, k, v = _bshd(b, s, h, 1), _bshd(b, kv or s, h, 2), _bshd(b, kv or s, h, 3)
    o = torch.zeros_like(q)
    run_kernel(kernel, dict(Q=q, K=k, V=v, O=o), schedule=schedule, seed=seed, owners=owners)
    return q, k, v, o


def _sdpa(q, k, v, causal):
    t = [x.float().transpose(1, 2) for x in (q, k, v)]
    ref = torch.nn.functional.scaled_dot_product_attention(*t, is_causal=causal)
    return ref.transpose(1, 2)


def _rel(out, ref):
    return ((out.float() - ref).norm() / ref.norm()).item()


# ---------------------------------------------------------------- results

# Q_SEQ need not be a multiple of 128 for the causal seed: rows past Q_SEQ are
# clipped by the TMA store, and for every real row the diagonal mask also
# hides the zero-filled keys past KV_SEQ (= Q_SEQ).
CAUSAL_SHAPES = [(1, 1, 256), (1, 2, 384), (2, 1, 128), (1, 1, 200)]


@pytest.mark.parametrize("b,h,s", CAUSAL_SHAPES)
@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_causal_seed_matches_sdpa(b, h, s, schedule, seed):
    q, k, v, o = _attention(P.flash_attention(), b, h, s, schedule, seed)
    assert _rel(o, _sdpa(q, k, v, True)) < 1e-2


@pytest.mark.parametrize("b,h,s", [(1, 1, 256), (1, 2, 384), (2, 1, 200)])
@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_noncausal_example_matches_sdpa(b, h, s, schedule, seed):
    """examples/flash_atten.co: its prologue masks the keys past a ragged KV_SEQ."""
    q, k, v, o = _attention(P.flash_attention(causal=False), b, h, s, schedule, seed)
    assert _rel(o, _sdpa(q, k, v, False)) < 1e-2


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_noncausal_without_mask(schedule, seed):
    """Without the tail mask the program is right for multiples of 128 only."""
    kern = P.flash_attention(causal=False, tail_mask=False)
    q, k, v, o = _attention(kern, 1, 2, 256, schedule, seed)
    assert _rel(o, _sdpa(q, k, v, False)) < 1e-2
    q, k, v, o = _attention(kern, 1, 1, 200, schedule, seed)
    assert _rel(o, _sdpa(q, k, v, False)) > 5e-2  # zero-filled keys get weight


def _gemm(kernel, m, n, k, schedule="round_robin", seed=0):
    g = torch.Generator().manual_seed(m * 7 + n)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    c = torch.zeros(m, n, dtype=torch.bfloat16)
    run_kernel(kernel, dict(A=a, B=b, C=c), schedule=schedule, seed=seed)
    return a, b, c


@pytest.mark.parametrize("m,n,k", [(256, 256, 256), (128, 384, 64), (200, 136, 100)])
@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_gemm_matches_matmul(m, n, k, schedule, seed):
    a, b, c = _gemm(P.gemm(), m, n, k, schedule, seed)
    ref = a.float() @ b.float().T
    assert _rel(c, ref) < 1e-2


def test_gemm_accumulator_shape_from_first_mma():
    a, b, c = _gemm(P.gemm(declare_acc=False), 128, 128, 192)
    assert _rel(c, a.float() @ b.float().T) < 1e-2


def test_results_do_not_depend_on_the_schedule():
    outs = [_attention(P.flash_attention(), 1, 2, 384, sch, seed)[3] for sch, seed in
            SCHEDULES + [("random", 7)]]
    for o in outs[1:]:
        assert torch.equal(o, outs[0])
    outs = [_gemm(P.gemm(), 200, 136, 100, sch, seed)[2] for sch, seed in SCHEDULES]
    for c in outs[1:]:
        assert torch.equal(c, outs[0])


def test_interpret_module_runs_the_launches():
    mod = P.module_of(P.flash_attention())
    q, k, v = _bshd(1, 256, 1, 1), _bshd(1, 256, 1, 2), _bshd(1, 256, 1, 3)
    o = torch.zeros_like(q)
    stats = interpret_module(mod, dict(Q=q, K=k, V=v, O=o), schedule="random", seed=3)
    assert stats.blocks == 2
    assert _rel(o, _sdpa(q, k, v, True)) < 1e-2


def test_arrival_counts_of_the_seed():
    arrivals, _ = static_counts(P.flash_attention())
    assert arrivals == {"qf": 1, "kf": 1, "vf": 1, "ke": 2, "ve": 2}


# ---------------------------------------------------------------- broken programs


def test_missing_all_reduce_is_detectably_wrong():
    q, k, v, o = _attention(P.flash_attention(all_reduce=False), 1, 1, 256)
    ref = _sdpa(q, k, v, True)
    err = (o.float() - ref).abs()
    assert not torch.isfinite(err).all() or _rel(o, ref) > 0.1
    # Non-causal rows have every owner's partial sum positive: finite, still wrong.
    q, k, v, o = _attention(P.flash_attention(causal=False, all_reduce=False), 1, 1, 256)
    assert _rel(o, _sdpa(q, k, v, False)) > 0.5


def test_missing_all_reduce_is_right_with_one_owner_per_row():
    """owners=1 (as sm_100a's 128-row accumulators: a thread holds a whole row): nothing
    to combine."""
    q, k, v, o = _attention(P.flash_attention(all_reduce=False), 1, 1, 256, owners=1)
    assert _rel(o, _sdpa(q, k, v, True)) < 1e-2


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_missing_trigger_deadlocks_with_role_positions(schedule, seed):
    with pytest.raises(DeadlockError) as info:
        _attention(P.flash_attention(trigger_kf=False), 1, 1, 512, schedule, seed)
    msg = info.value.message
    assert msg.startswith("deadlock: ")
    for part in ("role consumer[p=1] waits kf[0] generation 0 at flash_atten_causal.co:84:9",
                 "role consumer[p=2] waits kf[0] generation 0 at flash_atten_causal.co:84:9"):
        assert part in msg.replace(str(P.EXAMPLES) + "/", "")
    # The random schedule also shuffles the blocks; a block with at most two
    # K/V tiles lets the producer finish, the others leave it waiting too.
    if schedule == "round_robin" or "producer" in msg:
        assert "role producer[p=0] waits ke[0] generation 1 at" in msg
        assert "flash_atten_causal.co:54:11" in msg
        assert "0/2 arrivals" in info.value.render()


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_mma_without_wait_is_a_race(schedule, seed):
    with pytest.raises(RaceError) as info:
        _attention(P.flash_attention(wait_kf=False), 1, 1, 256, schedule, seed)
    lines = sorted(loc.line for loc in info.value.locs)
    assert lines == [55, 85]  # the k_load and the first QK MMA
    assert "k_buf[0]" in info.value.message


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_reloading_a_slot_an_mma_still_reads_is_a_race(schedule, seed):
    with pytest.raises(RaceError) as info:
        _attention(P.flash_attention(release_k_early=True), 1, 1, 384, schedule, seed)
    assert sorted(loc.line for loc in info.value.locs) == [55, 85]
    assert "tma.load 'k_load' writes" in info.value.message


# ---------------------------------------------------------------- speed


def test_seed_runs_fast():
    kern = P.flash_attention()
    start = time.perf_counter()
    q, k, v, o = _attention(kern, 1, 1, 256)
    elapsed = time.perf_counter() - start
    assert _rel(o, _sdpa(q, k, v, True)) < 1e-2
    assert elapsed < 60.0, f"{elapsed:.2f} s"  # a hang guard; speed: bench/interp.py


@pytest.mark.skipif(not P.COLLECTIVES, reason="the IR has no RoleSync")
def test_shared_store_without_role_sync_is_a_race():
    """Each consumer writes half of o_buf; the leader's store must wait for the other half."""
    with pytest.raises(RaceError, match="data race on o_buf") as info:
        _attention(P.flash_attention(role_sync=False), 1, 1, 256)
    assert sorted(loc.line for loc in info.value.locs) == [171, 172]


@pytest.mark.parametrize("owners", [1, 2, 4, 8])
def test_seed_is_right_for_any_number_of_row_owners(owners):
    q, k, v, o = _attention(P.flash_attention(), 1, 1, 256, owners=owners)
    assert _rel(o, _sdpa(q, k, v, True)) < 1e-2
