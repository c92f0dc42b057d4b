"""Broken programs (tests/co/): the interpreter shows each fault, located in the source."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py import cli
from choreo_py.interp import DeadlockError, RaceError, lanes
from choreo_py.interp.api import ChoreoWarning

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_run_examples import SCHEDULES, attention, rel, sdpa  # noqa: E402

CO = Path(__file__).resolve().parent / "co"


def _short(text: str) -> str:
    return text.replace(str(CO) + "/", "")


# ---------------------------------------------------------------- copies of the seed


@pytest.mark.parametrize("schedule,seed", SCHEDULES[:2])
def test_missing_all_reduce_is_detectably_wrong(schedule, seed):
    """Each of the 4 owners of a row divides by its own partial sum of the row."""
    q, k, v, o = attention(CO / "fa_causal_no_all_reduce.co", 1, 1, 256, 256, schedule, seed)
    ref = sdpa(q, k, v, True)
    # Row 0 sees one key: three owners' partial sums are 0, so 1/0 = inf.
    assert not torch.isfinite(o.float()).all()
    finite = torch.isfinite(o.float()).all(dim=-1, keepdim=True).expand_as(o)
    assert rel(torch.where(finite, o.float(), 0), torch.where(finite, ref, 0)) > 0.5
    # One owner per row (a uniform owners=1) needs no all-reduce: the same file is right.
    q, k, v, o = attention(CO / "fa_causal_no_all_reduce.co", 1, 1, 256, 256, owners=1)
    assert rel(o, sdpa(q, k, v, True)) < 1e-2


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_missing_trigger_deadlocks_naming_roles_and_generations(schedule, seed):
    with pytest.warns(ChoreoWarning, match="pipeline check"):
        with pytest.raises(DeadlockError) as info:
            attention(CO / "fa_causal_no_trigger_kf.co", 1, 1, 512, 512, schedule, seed)
    msg = _short(info.value.message)
    assert msg.startswith("deadlock: ")
    for p in (1, 2):
        assert (f"role (p > 0)[p={p}] waits kf[0] generation 0 at "
                f"fa_causal_no_trigger_kf.co:84:9") in msg
    # The random schedule also shuffles the blocks; a block with at most two
    # K/V tiles lets the producer finish, the others leave it waiting too.
    if schedule == "round_robin" or "p == 0" in msg:
        assert ("role (p == 0)[p=0] waits ke[0] generation 1 at "
                "fa_causal_no_trigger_kf.co:54:11") in msg
        assert "0/2 arrivals on generation 0" in info.value.render()
    assert info.value.loc.line in (54, 84)


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_mma_without_wait_is_a_race_with_both_locations(schedule, seed):
    with pytest.raises(RaceError) as info:
        attention(CO / "fa_causal_no_wait_kf.co", 1, 1, 256, 256, schedule, seed)
    assert sorted(loc.line for loc in info.value.locs) == [55, 85]  # the k_load, the first QK
    assert (info.value.loc.line, info.value.loc.col) == (85, 9)
    msg = info.value.message
    assert "data race on k_buf[0]" in msg and "tma.load 'k_load'" in msg
    assert "mma.row.row 'first_qk' reads" in msg


def test_missing_trigger_is_caught_by_the_static_pipeline_check(capsys):
    path = str(CO / "fa_causal_no_trigger_kf.co")
    assert cli.main(["compile", path, "--emit", "ir", "--target", "sm_90a"]) == 1
    err = _short(capsys.readouterr().err)
    assert "fa_causal_no_trigger_kf.co:84:9: error: pipeline check: role (p > 0) [p=1] waits " \
           "kf.at(k_pipe_order) = kf[0] generation 0, which is never completed" in err
    assert "role (p > 0) [p=2] waits kf[0] generation 0" in err
    assert cli.main(["check", path]) == 0
    err = _short(capsys.readouterr().err)
    assert "fa_causal_no_trigger_kf.co:84:9: warning: pipeline check: role (p > 0) [p=1] " \
           "waits kf.at(k_pipe_order) = kf[0] generation 0" in err
    assert "error" not in err.split("warning")[0]


def test_the_other_broken_copies_pass_the_static_checks(capsys):
    """A missing all-reduce or wait is for the interpreter (or the hardware) to show."""
    for name in ("fa_causal_no_all_reduce.co", "fa_causal_no_wait_kf.co"):
        assert cli.main(["compile", str(CO / name), "--emit", "ir", "--target", "sm_90a"]) == 0
    assert "warning" not in capsys.readouterr().err


# ---------------------------------------------------------------- per-thread code


def _divergent_ref(x):
    y = torch.empty_like(x)
    for n in range(x.shape[0]):
        m = n % 16
        y[n, : m + 1] = x[n, : m + 1].sum()
        y[n, m + 1:] = -x[n, m + 1:] * ((m + 1).bit_length() - 1)  # halvings of m + 1 to 1
    return y


@pytest.mark.parametrize("n", [64, 150])
def test_divergent_per_thread_code(n):
    """Lane-dependent trip counts, branches, a while loop, a guard for a ragged tile."""
    x = torch.randn(n, 16, generator=torch.Generator().manual_seed(n))
    y = torch.full_like(x, float("nan"))
    choreo_py.interpret(str(CO / "thread_divergent.co"), dict(X=x, Y=y))
    assert torch.allclose(y, _divergent_ref(x), atol=1e-5)


def test_threads_run_as_lanes_give_what_one_thread_each_gives(monkeypatch):
    x = torch.randn(150, 16, generator=torch.Generator().manual_seed(1))
    outs = []
    for vectorise in (True, False):
        if not vectorise:
            monkeypatch.setattr(lanes, "eligible", lambda body, top=True, private=(): False)
        y = torch.full_like(x, float("nan"))
        choreo_py.interpret(str(CO / "thread_divergent.co"), dict(X=x, Y=y))
        x2 = torch.randn(200, generator=torch.Generator().manual_seed(2))
        y2 = torch.full_like(x2, float("nan"))
        choreo_py.interpret(str(CO / "thread_shift.co"), dict(X=x2, Y=y2), defines={"SYNC": "1"})
        outs.append((y, y2))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


def test_threads_exchanging_data_across_a_barrier():
    x = torch.randn(200, generator=torch.Generator().manual_seed(3))
    y = torch.full_like(x, float("nan"))
    choreo_py.interpret(str(CO / "thread_shift.co"), dict(X=x, Y=y), defines={"SYNC": "1"})
    n = torch.arange(200)
    src = n - n % 64 + (n + 1) % 64
    ref = torch.where(src < 200, 2 * x[src.clamp(max=199)], 0.0)  # zero-filled past N
    assert torch.equal(y, ref)


def test_threads_reading_a_neighbours_store_without_a_barrier_race():
    x = torch.randn(128)
    with pytest.raises(RaceError) as info:
        choreo_py.interpret(str(CO / "thread_shift.co"), dict(X=x, Y=torch.zeros(128)))
    msg = info.value.message
    assert msg.startswith("data race on buf: instance r=0 of parallel r reads buf[1] while "
                          "instance r=1 wrote it")
    assert [(loc.line, loc.col) for loc in info.value.locs] == [(21, 7), (14, 7)]


def test_two_threads_storing_one_element_race():
    x = torch.randn(128)
    with pytest.raises(RaceError, match=r"instance r=0 of parallel r writes out\[0\] while "
                                        r"instance r=1 writes it too"):
        choreo_py.interpret(str(CO / "thread_shift.co"), dict(X=x, Y=torch.zeros(128)),
                            defines={"SYNC": "1", "COLLIDE": "1"})


def test_threads_past_the_end_are_masked_by_their_guard():
    x = torch.randn(100)
    y = torch.full_like(x, float("nan"))
    choreo_py.interpret(str(CO / "thread_guard.co"), dict(X=x, Y=y))
    assert torch.equal(y, x * 3 + 1)


def test_threads_past_the_end_without_a_guard_are_reported():
    with pytest.raises(choreo_py.interp.InterpError) as info:
        choreo_py.interpret(str(CO / "thread_guard.co"), dict(X=torch.randn(100),
                                                              Y=torch.zeros(100)),
                            defines={"NOGUARD": "1"})
    assert info.value.message == ("index 100 outside extent 100 of dimension 0 of a view of 'X' "
                                  "in instance r=36 (and 27 more)")
    assert (info.value.loc.line, info.value.loc.col) == (10, 17)  # at the read of X


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_threads_reading_an_async_load_they_did_not_wait_race(schedule, seed):
    x = torch.randn(128, 128).to(torch.bfloat16)
    path = str(CO / "softmax_async.co")
    with pytest.raises(RaceError) as info:
        choreo_py.interpret(path, dict(X=x, Y=torch.zeros_like(x)), schedule=schedule, seed=seed)
    assert sorted(loc.line for loc in info.value.locs) == [13, 21]  # the load, the first read
    assert "data race on x_s" in info.value.message
    assert "per-thread code of parallel r" in info.value.message
    y = torch.zeros_like(x)
    choreo_py.interpret(path, dict(X=x, Y=y), schedule=schedule, seed=seed,
                        defines={"WAIT": "1"})
    assert rel(y, torch.softmax(x.float(), dim=-1)) < 1e-2


@pytest.mark.parametrize("defines, expected", [
    ({}, r"instance r=63 of parallel r reads buf\[0\] while instance r=0 wrote it"),
    ({"SYNC": "1", "COLLIDE": "1"}, r"instance r=1 of parallel r writes out\[0\] while "
                                    r"instance r=0 wrote it"),
    ({"SYNC": "1"}, None),
])
def test_races_between_threads_on_large_bases(monkeypatch, defines, expected):
    """Bases too large for a per-element map keep access records, checked at the barrier
    or the end of the region and compacted as they grow: the same races are found."""
    from choreo_py.interp import lane_races

    monkeypatch.setattr(lane_races, "DENSE_LIMIT", 0)
    monkeypatch.setattr(lane_races, "COMPACT_AT", 100)
    x = torch.randn(200)
    y = torch.zeros(200)
    path = str(CO / "thread_shift.co")
    if expected is None:
        choreo_py.interpret(path, dict(X=x, Y=y), defines=defines)
        assert torch.equal(y[:63], 2 * x[1:64])
        return
    with pytest.raises(RaceError, match=expected):
        choreo_py.interpret(path, dict(X=x, Y=y), defines=defines)


@pytest.mark.parametrize("schedule", ["round_robin", "random"])
def test_threads_overwriting_a_buffer_others_still_read_race(schedule):
    """A barrier inside a loop makes the body guarded lanes, which fall back to one thread
    per instance at the race; the threads' element accesses are checked by
    happens-before: red[0] read by every thread, then red[t] overwritten with no barrier
    between (a write-after-read across threads)."""
    x = torch.randn(2, 200).bfloat16()
    args = dict(X=x, GAMMA=torch.ones(200).bfloat16(), BETA=torch.zeros(200).bfloat16(),
                Y=torch.zeros(2, 200).bfloat16())
    with pytest.raises(RaceError) as info:
        choreo_py.interpret(str(CO / "layernorm_missing_barrier.co"), args, schedule=schedule)
    msg = info.value.message
    assert msg.startswith("data race on red: thread t=0 writes red[0] while the read by thread")
    assert [(loc.line, loc.col) for loc in info.value.locs] == [(41, 7), (28, 7)]
    choreo_py.interpret(str(CO / "layernorm_missing_barrier.co"), args, schedule=schedule,
                        defines={"FIXED": "1"})
    ref = torch.nn.functional.layer_norm(x.float(), (200,), eps=1e-5)
    assert rel(args["Y"].float(), ref) < 1e-2
