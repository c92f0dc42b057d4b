"""The interpreter's pieces on small hand-built kernels: events, futures, fragments, scalars, memory."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interp_programs import C, S, add, bin_, el, mul, store, sub, view, whole  # noqa: E402

from choreo_py import ir  # noqa: E402
from choreo_py.interp import (DeadlockError, EventError, FutureError, InterpError,  # noqa: E402
                              RaceError, StepLimitError, run_kernel)
from choreo_py.interp import executor as executor_mod  # noqa: E402
from choreo_py.interp.fragments import ApplyRun, FragState, all_reduce, column_layout  # noqa: E402
from choreo_py.interp.memory import Box, Memory  # noqa: E402
from choreo_py.interp.scalars import Evaluator, binary, call, round_to, wrap_int  # noqa: E402

SCHEDULES = [("round_robin", 0), ("random", 1), ("random", 2), ("random", 3)]


def role(name, members, body):
    cond = None
    for m in members:
        c = ir.Bin("==", S("p"), C(m), "bool")
        cond = c if cond is None else ir.Bin("||", cond, c, "bool")
    return ir.Role(name, cond, tuple(members), body)


def kernel(roles, extent, events=(), buffers=(), params=(), frags=()):
    body = [ir.Parallel("p", extent, "group-4", 128, list(roles))]
    return ir.Kernel("k", list(params), [], list(buffers), list(events), list(frags), body)


def ev(name, slots=None, ready=False):
    return ir.Event(name, slots, ready)


def trig(name, order=None, after=()):
    ref = ir.EventRef(name, order=None if order is None else C(order))
    return ir.Trigger(ref, list(after))


def wait(name, order=None):
    return ir.Wait([ir.EventRef(name, order=None if order is None else C(order))])


# ---------------------------------------------------------------- events


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_plain_events_count_generations_per_path(schedule, seed):
    """full/empty handshake on single events: each completed wait advances the path."""
    prod = role("producer", [0], [ir.For("n", C(0), C(5), [wait("empty"), trig("full")])])
    cons = role("consumer", [1], [ir.For("n", C(0), C(5), [wait("full"), trig("empty")])])
    k = kernel([prod, cons], 2, [ev("full"), ev("empty", ready=True)])
    stats = run_kernel(k, {}, schedule=schedule, seed=seed)
    # both roles ran all 5 iterations (a wait that blocked for good would be a deadlock)
    assert stats.blocks == 1 and stats.statements >= 2 * 5 * 2  # a wait and a trigger each


def test_generation_overrun_is_reported():
    prod = role("producer", [0], [trig("e"), trig("e")])
    cons = role("consumer", [1], [wait("e")])
    with pytest.raises(EventError, match="cannot tell them apart"):
        run_kernel(kernel([prod, cons], 2, [ev("e")]), {})


def test_early_parity_pass_is_reported():
    cons = role("consumer", [0], [wait("e", order=2)])
    with pytest.raises(EventError, match="pass early"):
        run_kernel(kernel([cons], 1, [ev("e", 2)]), {})


def test_a_trigger_arrives_on_its_slots_current_phase():
    """`trigger e.at(2)` on a 2-slot event selects slot 0 and triggers its current generation
    (0), whatever generation the order names: the waiter of generation 0 proceeds, and one
    of generation 1 still waits (a deadlock, reported)."""
    prod = role("producer", [0], [trig("e", order=2)])
    cons = role("consumer", [1], [wait("e", order=0)])
    run_kernel(kernel([prod, cons], 2, [ev("e", 2)]), {})
    late = role("consumer", [1], [wait("e", order=2)])
    with pytest.raises(DeadlockError, match=r"waits e\[0\] generation 1"):
        run_kernel(kernel([prod, late], 2, [ev("e", 2)]), {})


def test_a_primed_ring_released_by_its_loop_order():
    """wgmma_ss.co's pattern: each slot triggered once up front (generation 0), then the
    loop's `trigger empty.at(k)` completes each slot's next generation, which the producer's
    `wait empty.at(k + 2)` waits for."""
    prime = [trig("empty", order=0), trig("empty", order=1)]
    release = [x for k in range(4) for x in (wait("full", order=k), trig("empty", order=k))]
    cons = role("consumer", [1], prime + release)
    fill = [x for k in range(4) for x in (wait("empty", order=k), trig("full", order=k))]
    prod = role("producer", [0], fill)
    st = run_kernel(kernel([prod, cons], 2, [ev("empty", 2), ev("full", 2)]), {})
    assert st is not None  # ran to the end: no deadlock, no event error


def test_a_generation_needs_every_triggering_instance():
    """Two consumer instances trigger `done`; one skipping it leaves the waiter stuck."""
    waiter = role("waiter", [0], [wait("done")])
    skip = ir.If(ir.Bin("==", S("p"), C(1), "bool"), [trig("done")])
    rel = role("releaser", [1, 2], [skip])
    with pytest.raises(DeadlockError, match=r"role waiter\[p=0\] waits done generation 0") as info:
        run_kernel(kernel([waiter, rel], 3, [ev("done")]), {})
    assert "1/2 arrivals" in info.value.render()
    ok = role("releaser", [1, 2], [trig("done")])
    run_kernel(kernel([waiter, ok], 3, [ev("done")]), {})


# ---------------------------------------------------------------- futures and copies


def _copy_kernel(cons_body, prod_extra=(), n=8):
    params = [ir.Param("X", "f32", (C(n),)), ir.Param("Y", "f32", (C(n),))]
    bufs = [ir.Buffer("s", "shared", "f32", (n,))]
    load = ir.TmaLoad(whole("X", (n,)), whole("s", (n,)), "f")
    prod = role("producer", [0], [load] + list(prod_extra))
    return kernel([prod, role("consumer", [1], cons_body)], 2, [ev("e")], bufs, params)


def _xy(n=8):
    return dict(X=torch.arange(n, dtype=torch.float32), Y=torch.zeros(n))


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_trigger_after_publishes_the_copy(schedule, seed):
    k = _copy_kernel([wait("e"), ir.TmaStore(whole("s", (8,)), whole("Y", (8,)))], [trig("e", after=["f"])])
    t = _xy()
    run_kernel(k, t, schedule=schedule, seed=seed)
    assert torch.equal(t["Y"], t["X"])


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_reading_a_loaded_buffer_without_waiting_is_a_race(schedule, seed):
    k = _copy_kernel([ir.TmaStore(whole("s", (8,)), whole("Y", (8,)))], [trig("e", after=["f"])])
    with pytest.raises(RaceError, match="data race on s"):
        run_kernel(k, _xy(), schedule=schedule, seed=seed)


def test_future_waited_twice():
    k = _copy_kernel([], [ir.Wait([ir.FutureRef("f")]), ir.Wait([ir.FutureRef("f")])])
    with pytest.raises(FutureError, match="waited twice"):
        run_kernel(k, _xy())


def test_future_bound_then_waited():
    k = _copy_kernel([], [trig("e", after=["f"]), ir.Wait([ir.FutureRef("f")])])
    with pytest.raises(FutureError, match="already bound to an event"):
        run_kernel(k, _xy())


def test_future_never_issued():
    k = _copy_kernel([ir.Wait([ir.FutureRef("f")])])
    with pytest.raises(FutureError, match="has not been issued on this path"):
        run_kernel(k, _xy())


def test_copies_zero_fill_and_clip_at_tensor_edges():
    """A 8-element box at offset 4 of 10-element tensors: reads past the end are 0, writes clip."""
    params = [ir.Param("X", "f32", (C(10),)), ir.Param("Y", "f32", (C(10),))]
    bufs = [ir.Buffer("s", "shared", "f32", (8,))]
    body = [ir.TmaLoad(view("X", (4,), (8,)), whole("s", (8,))),
            ir.TmaStore(whole("s", (8,)), view("Y", (3,), (8,)))]
    t = dict(X=torch.arange(1, 11, dtype=torch.float32), Y=torch.full((10,), -1.0))
    run_kernel(kernel([role("r", [0], body)], 1, (), bufs, params), t)
    assert t["Y"].tolist() == [-1, -1, -1, 5, 6, 7, 8, 9, 10, 0]


# ---------------------------------------------------------------- MMA futures and fragments


def _mma_kernel(after_issue, a_frag=False):
    params = [ir.Param("A", "bf16", (C(64), C(16))), ir.Param("B", "bf16", (C(8), C(16))),
              ir.Param("R", "f32", (C(64),))]
    bufs = [ir.Buffer("a", "shared", "bf16", (64, 16)), ir.Buffer("b", "shared", "bf16", (8, 16)),
            ir.Buffer("r", "shared", "f32", (64,))]
    frags = [ir.Frag("acc", "f32", (64, 8), "acc"), ir.Frag("m", "f32", (64,), "row"),
             ir.Frag("x", "bf16", (64, 16), "operand")]
    body = [ir.TmaLoad(whole("A", (64, 16)), whole("a", (64, 16))),
            ir.TmaLoad(whole("B", (8, 16)), whole("b", (8, 16))),
            ir.FragDecl(frags[1]), ir.FragDecl(frags[2], C(1.0)),
            ir.MmaFill("acc", C(0.0)),
            ir.Mma("acc", "x" if a_frag else whole("a", (64, 16)), whole("b", (8, 16)), "row.row", "f")]
    body += after_issue
    return kernel([role("r", [0], body)], 1, (), bufs, params, frags)


def _mma_inputs():
    g = torch.Generator().manual_seed(5)
    return dict(A=torch.randn(64, 16, generator=g).to(torch.bfloat16),
                B=torch.randn(8, 16, generator=g).to(torch.bfloat16), R=torch.zeros(64))


def test_accumulator_read_after_wait():
    tail = [ir.Wait([ir.FutureRef("f")]), ir.Reduce("max", "m", "acc", 1)]
    stats = run_kernel(_mma_kernel(tail), _mma_inputs())
    assert stats.blocks == 1 and stats.statements > len(tail)  # no RaceError after the wait


def test_accumulator_read_before_wait_is_a_race():
    with pytest.raises(RaceError, match="reads fragment 'acc' while mma 'f' may still update it"):
        run_kernel(_mma_kernel([ir.Reduce("max", "m", "acc", 1)]), _mma_inputs())


def test_operand_fragment_overwritten_before_wait_is_a_race():
    body = [ir.Apply(("i", "j"), (64, 16), "x", [store("x", "ij", C(2.0), None)])]
    with pytest.raises(RaceError, match="writes fragment 'x' while mma 'f' may still read it"):
        run_kernel(_mma_kernel(body, a_frag=True), _mma_inputs())


def _committed(tail):
    k = _mma_kernel([trig("e", after=["f"])] + tail)
    k.events.append(ev("e"))
    return k


def test_trigger_after_an_mma_future_publishes_its_accumulator():
    """`trigger e after f` arrives once f has completed; a wait of e orders the thread
    after the MMA without waiting f (it is no longer in flight for the thread)."""
    tail = [wait("e"), ir.Reduce("max", "m", "acc", 1)]
    stats = run_kernel(_committed(tail), _mma_inputs())
    assert stats.blocks == 1 and stats.statements > len(tail)


def test_trigger_after_an_mma_future_does_not_order_the_issuer():
    with pytest.raises(RaceError, match="reads fragment 'acc' while mma 'f' may still update it"):
        run_kernel(_committed([ir.Reduce("max", "m", "acc", 1)]), _mma_inputs())


def test_column_ownership_follows_wgmma():
    owner, cols = column_layout(16, 4)
    assert owner.tolist() == [0, 0, 1, 1, 2, 2, 3, 3] * 2
    assert cols[1].tolist() == [2, 3, 10, 11]
    owner, cols = column_layout(16, 1)
    assert owner.tolist() == [0] * 16


def _row_sum(owners):
    acc = FragState("acc", "f32", (4, 16), owners)
    acc.data = torch.arange(64, dtype=torch.float32).reshape(4, 16)
    s = FragState("s", "f32", (4,), owners)
    s.fill(0.0)
    frags = {"acc": acc, "s": s}
    body = [store("s", "i", add(el("s", "i"), el("acc", "i", "j")), None)]
    stmt = ir.Apply(("i", "j"), (4, 16), "acc", body)
    evaluator = Evaluator(None)
    run = ApplyRun(stmt, frags, owners, evaluator, {})
    evaluator.hooks = type("H", (), {"elem": lambda self, e, env: run.load(e)})()
    run.run()
    return acc, s


def test_row_sum_in_apply_is_per_owner_until_all_reduce():
    acc, s = _row_sum(4)
    own = column_layout(16, 4)[0]
    for t in range(4):
        assert torch.equal(s.data[t], acc.data[:, own == t].sum(dim=1))
    all_reduce(s, "sum", None)
    assert torch.equal(s.data, acc.data.sum(dim=1).expand(4, 4))
    acc, s = _row_sum(1)  # one owner: the fold is already the full sum
    assert torch.equal(s.data[0], acc.data.sum(dim=1))


def test_apply_rejects_other_threads_elements():
    acc = FragState("acc", "f32", (4, 16), 4)
    acc.fill(1.0)
    shifted = ir.Elem("acc", (S("i"), add(S("j"), 1)), "f32")
    stmt = ir.Apply(("i", "j"), (4, 16), "acc", [store("acc", "ij", shifted, None)])
    evaluator = Evaluator(None)
    run = ApplyRun(stmt, {"acc": acc}, 4, evaluator, {})
    evaluator.hooks = type("H", (), {"elem": lambda self, e, env: run.load(e)})()
    with pytest.raises(InterpError, match="may belong to another thread"):
        run.run()


# ---------------------------------------------------------------- scalars, loops, memory


def test_integer_semantics():
    assert wrap_int(-1, "u32") == 0xFFFFFFFF
    assert wrap_int(0x80000000, "s32") == -0x80000000
    assert binary("/", -7, 2, "s32") == -3 and binary("%", -7, 2, "s32") == -1
    assert binary("-", 0, 1, "u32") == 0xFFFFFFFF
    assert call("cdiv", [257, 128], "s32") == 3 and call("cdiv", [256, 128], "s32") == 2
    with pytest.raises(InterpError, match="division by zero"):
        binary("/", 1, 0, "s32")


def test_float_semantics():
    assert binary("/", 1.0, 0.0, "f32") == math.inf
    assert call("exp2", [-math.inf], "f32") == 0.0
    assert call("max", [math.nan, 1.0], "f32") == 1.0  # fmaxf: a NaN operand loses
    assert round_to(1.0 + 2 ** -10, "bf16") == 1.0
    assert round_to(0.1, "f32") == float(torch.tensor(0.1, dtype=torch.float32))
    t = torch.tensor([math.nan, 2.0])
    assert call("max", [t, 1.0], "f32").tolist() == [1.0, 2.0]


def test_unsigned_counter_wraps_in_a_kernel():
    params = [ir.Param("out", "s64", (C(1),))]
    body = [ir.Var("x", "u32", C(0, "u32")),
            ir.Assign("x", sub(S("x", "u32"), C(1, "u32"))),
            ir.BufStore(whole("out", (1,)), (C(0),), S("x", "u32"))]
    t = dict(out=torch.zeros(1, dtype=torch.int64))
    run_kernel(kernel([role("r", [0], body)], 1, params=params), t)
    assert t["out"].item() == 0xFFFFFFFF


def test_runaway_loop_hits_the_step_limit():
    loop = ir.While(C(True, "bool"), [ir.Let("y", C(1))])
    with pytest.raises(StepLimitError, match="step limit"):
        run_kernel(kernel([role("r", [0], [loop])], 1), {}, step_limit=1000)


def test_memory_boxes_and_composed_views():
    k = ir.Kernel("k", [ir.Param("X", "f32", (C(5), C(3)))], [])
    mem = Memory(k, {"X": torch.arange(15, dtype=torch.float32).reshape(5, 3)})
    box = Box("X", None, (3, 0), (4, 3), (True, True))
    assert mem.read(box).tolist() == [[9, 10, 11], [12, 13, 14], [0, 0, 0], [0, 0, 0]]
    evaluator = Evaluator(None)
    row = mem.resolve(view("X", (S("r"), 0), (1, 3), (False, True)), {"r": 2}, evaluator)
    env = {"row": row}
    tail = mem.resolve(view("row", (1,), (2,)), env, evaluator)
    assert tail == Box("X", None, (2, 1), (1, 2), (False, True))
    assert mem.read(tail).tolist() == [7, 8]


def test_collective_store_is_issued_once_per_block(monkeypatch):
    """Both consumer warpgroups reach `tma.copy o_buf => ...`; the copy is issued once."""
    import interp_programs as P

    calls = []
    orig = executor_mod.BlockRun._store
    monkeypatch.setattr(executor_mod.BlockRun, "_store",
                        lambda self, *a: (calls.append(a[0]), orig(self, *a)))
    q = torch.randn(1, 256, 1, 128).to(torch.bfloat16)
    run_kernel(P.flash_attention(), dict(Q=q, K=q, V=q, O=torch.zeros_like(q)))
    assert len(calls) == 2  # two blocks


def test_condition_and_members_must_agree():
    bad = ir.Role("r", ir.Bin("==", S("p"), C(1), "bool"), (0,), [])
    with pytest.raises(InterpError, match="disagree"):
        run_kernel(kernel([bad], 2), {})


def test_comparison_helpers_build_bool():
    assert bin_("<", S("a"), 1).dtype == "bool"


def test_futures_complete_after_their_issue_and_schedules_differ(monkeypatch):
    """A future lands at a later scheduling point than its issue; seeds reorder completions."""
    import interp_programs as P
    from choreo_py.interp import scheduler as sched_mod

    log = []
    issue, complete = sched_mod.Scheduler.issue, sched_mod.Scheduler.complete

    def on_issue(self, fut):
        fut.issued_at = (self.steps, self.ticks)
        issue(self, fut)

    def on_complete(self, fut):
        if not fut.done:
            log.append((fut.var, fut.issued_at, (self.steps, self.ticks)))
        complete(self, fut)

    monkeypatch.setattr(sched_mod.Scheduler, "issue", on_issue)
    monkeypatch.setattr(sched_mod.Scheduler, "complete", on_complete)
    q = torch.randn(1, 384, 1, 128).to(torch.bfloat16)
    orders = set()
    for schedule, seed in SCHEDULES:
        log.clear()
        run_kernel(P.flash_attention(), dict(Q=q, K=q, V=q, O=torch.zeros_like(q)),
                   schedule=schedule, seed=seed)
        assert all(done > issued for _, issued, done in log)
        orders.add(tuple(name for name, _, _ in log))
    assert len(orders) >= 3


@pytest.mark.skipif(not hasattr(ir, "RoleSync"), reason="the IR has no RoleSync")
def test_leader_only_copy_is_issued_once_and_must_not_depend_on_the_instance():
    params = [ir.Param("X", "f32", (C(4),)), ir.Param("Y", "f32", (C(8),))]
    bufs = [ir.Buffer("s", "shared", "f32", (4,))]

    def body(offset):
        ld = ir.TmaLoad(whole("X", (4,)), whole("s", (4,)))
        st = ir.TmaStore(whole("s", (4,)), view("Y", (offset,), (4,)))
        ld.leader_only = st.leader_only = True
        return [ir.RoleSync(), ld, ir.RoleSync(), st]

    k = kernel([role("r", [1, 2], body(C(2)))], 3, (), bufs, params)
    t = dict(X=torch.ones(4), Y=torch.zeros(8))
    run_kernel(k, t)
    assert t["Y"].tolist() == [0, 0, 1, 1, 1, 1, 0, 0]
    k = kernel([role("r", [1, 2], body(mul(sub(S("p"), 1), 4)))], 3, (), bufs, params)
    with pytest.raises(InterpError, match="instance-dependent boxes"):
        run_kernel(k, dict(X=torch.ones(4), Y=torch.zeros(8)))
