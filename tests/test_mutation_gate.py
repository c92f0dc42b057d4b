"""A sample of the mutation gate (bench/mutate_ptx.py; the whole table is in
bench/data/ and docs/emulator_sm100.md): fixed single-instruction mutants of the
causal example's sm_100a PTX that the strict emulator must reject, each a rule of the
PTX ISA the emulator did not model before (tcgen05 fences, the alloc's ordering, the
O rescale shown by growing key tiles). The unmutated PTX passes the same runs."""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import mutate_ptx as gate  # noqa: E402

pytestmark = pytest.mark.emu


@functools.lru_cache(maxsize=None)
def _spec():
    path, target, defines, _ = gate.EXAMPLES["causal"]
    return gate.from_co(str(ROOT / path), target, defines=defines)


def _site(cls: str, detail: str, k: int, after: str = ""):
    """The k-th site of `cls` whose opcode starts with `detail` (and whose preceding
    instruction line contains `after`, when given)."""
    lines = _spec().ptx.splitlines()
    found = [(i, m) for c, d, i, m in gate.sites(_spec().ptx)
             if c == cls and d.startswith(detail)
             and after in next(t for t in reversed(lines[:i]) if gate.opcode(t))]
    i, mutate = found[k]
    return "\n".join(mutate(list(lines), i)) + "\n"


def _caught(ptx: str, shape=(128, 1), schedule="round_robin") -> str:
    outcome, detail = gate.run_one(_spec(), ptx, True, *shape, schedule, 120)
    assert outcome == "caught", detail
    return detail


def test_unmutated_passes():
    assert gate.run_one(_spec(), _spec().ptx, True, 256, 4, "random", 120)[0] == "passes"


def test_fence_after_thread_sync_deleted_is_a_race():
    """The first fence::after_thread_sync after a wait (the softmax's tcgen05.ld of S
    after the S-full mbarrier): the load is not ordered after the MMA that wrote S."""
    report = _caught(_site("del_fence", "tcgen05.fence::after_thread_sync", 0, "bra $_mbar_wait"))
    assert "race" in report and "tcgen05.fence::after_thread_sync" in report


def test_fence_before_thread_sync_after_alloc_deleted_is_a_race():
    """tcgen05.alloc, then bar.sync without fence::before_thread_sync: the other warps'
    first tcgen05 accesses of the columns are not ordered after the allocation."""
    report = _caught(_site("del_fence", "tcgen05.fence::before_thread_sync", 0))
    assert "tcgen05.alloc" in report and "race" in report


@pytest.mark.slow
@pytest.mark.parametrize("schedule", gate.SCHEDULES)
def test_fence_deletions_caught_under_every_schedule(schedule):
    for detail, k, after in (("tcgen05.fence::after_thread_sync", 0, "bra $_mbar_wait"),
                             ("tcgen05.fence::before_thread_sync", 0, "")):
        _caught(_site("del_fence", detail, k, after), schedule=schedule)


def test_bulk_commit_group_deleted_is_reported():
    """The TMA store of O, then no cp.async.bulk.commit_group: the wait_group.read 0 that
    follows waits for no group, so the store's source may be read after the CTA moves on
    (PTX ISA, cp.async.bulk.commit_group / wait_group)."""
    report = _caught(_site("del_commit", "cp.async.bulk.commit_group", 0))
    assert "race" in report and "cp.async.bulk.wait_group.read 0" in report, report
    assert "not committed" in report, report


@functools.lru_cache(maxsize=None)
def _blackwell():
    path, target, defines, _ = gate.EXAMPLES["blackwell"]
    return gate.from_co(str(ROOT / path), target, defines=defines)


def _after_co_line(spec, example: str, text: str, which: int = 0) -> int:
    """Index of the PTX comment line that opens the `which`-th .co line containing `text`."""
    co = (ROOT / gate.EXAMPLES[example][0]).read_text().splitlines()
    at = [n for n, t in enumerate(co, 1) if text in t][which]
    return next(i for i, t in enumerate(spec.ptx.splitlines()) if t.strip().endswith(f".co:{at}"))


def test_bar_sync_before_the_dealloc_deleted_is_a_race():
    """flash_atten_blackwell.co: the last bar.sync 0 is all that orders the correction
    warps' tcgen05.ld/st of O before the TMEM warp's tcgen05.dealloc of the columns (PTX
    ISA, "tcgen05 Memory Consistency Model": dealloc is a tcgen05 operation)."""
    spec = _blackwell()
    lines = spec.ptx.splitlines()
    i = max(i for c, _, i, _ in gate.sites(spec.ptx) if c == "del_barrier")
    assert "tcgen05.dealloc" in "\n".join(lines[i:i + 4])
    ptx = "\n".join(gate.delete(list(lines), i)) + "\n"
    outcome, detail = gate.run_one(spec, ptx, False, 128, 1, "round_robin", 120)
    assert outcome == "caught" and "race: tcgen05.dealloc by warp" in detail, detail
    assert gate.run_one(spec, spec.ptx, False, 128, 1, "round_robin", 120)[0] == "passes"


def test_a_deleted_mbarrier_wait_completes_at_once():
    """Deleting an mbarrier wait leaves its predicate true (the loop falls through), not
    unwritten: what the gate tests is the missing wait, not a register misuse."""
    lines = ["{", "\t@%p1 mbarrier.try_wait.parity.shared::cta.b64 %p2, [%rd1+8], %r3;"]
    (cls, _, i, mutate), = [s for s in gate.sites("\n".join(lines)) if s[0] == "del_wait"]
    assert mutate(list(lines), i)[i].split("//")[0].strip() == "@%p1 mov.pred %p2, 1;"


def test_a_result_several_times_the_unmutated_error_is_wrong():
    """The bound is relative to the unmutated kernel in the same run, not only the absolute
    2e-2: the same O judged against a base WORSE x 2 times smaller is `wrong`."""
    outcome, detail = gate.run_one(_spec(), _spec().ptx, True, 128, 1, "round_robin", 120)
    base = gate.rel_error(detail)
    assert outcome == "passes" and base < gate.TOLERANCE / gate.WORSE, detail
    again = gate.run_one(_spec(), _spec().ptx, True, 128, 1, "round_robin", 120, base)
    assert again[0] == "passes", again
    outcome, detail = gate.run_one(_spec(), _spec().ptx, True, 128, 1, "round_robin", 120,
                                   base / (2 * gate.WORSE))
    assert outcome == "wrong" and "unmutated" in detail, detail


def test_a_wrong_first_qk_of_the_second_query_tile_is_seen():
    """flash_atten_blackwell.co's first QK into S1 with Q read transposed: at S = 128 the
    second query tile has no rows, at S = 256 the grown keys make the first tile's scores
    negligible; the S = 512 shape (random keys, four tiles) must show it."""
    spec = _blackwell()
    lines = spec.ptx.splitlines()
    start = _after_co_line(spec, "blackwell", "qk1_first = mma")
    mma = [i for i in range(start, start + 40) if gate.opcode(lines[i]).startswith("tcgen05.mma")]
    (_, _, i, mutate), = [s for s in gate.sites(spec.ptx)
                          if s[2] == mma[2] and s[1] == "idesc.a_major"]
    ptx = "\n".join(mutate(list(lines), i)) + "\n"
    assert gate.run_one(spec, ptx, False, 256, 4, "round_robin", 120)[0] == "passes"
    outcome, detail = gate.run_one(spec, ptx, False, *gate.SHAPES[2], "round_robin", 120)
    assert outcome == "wrong", detail


def test_a_deleted_release_inside_the_kv_loop_deadlocks():
    """The consumers' release of a K slot inside the KV loop: with two stages, only a fourth
    KV tile refills a slot the loop released, so the gate's S = 512 shape deadlocks at the
    producer's wait where S = 384 (three tiles) passed."""
    spec = _spec()
    lines = spec.ptx.splitlines()
    start = _after_co_line(spec, "causal", "trigger ke.at(", -1)
    i = next(s[2] for s in gate.sites(spec.ptx) if s[0] == "del_arrive" and s[2] > start)
    ptx = "\n".join(gate.delete(list(lines), i)) + "\n"
    assert gate.run_one(spec, ptx, True, 384, 1, "round_robin", 120)[0] == "passes"
    outcome, detail = gate.run_one(spec, ptx, True, *gate.SHAPES[2], "round_robin", 120)
    assert outcome == "caught" and "deadlock" in detail and "ke_bar" in detail, detail


def test_a_fence_given_again_is_benign_and_a_lone_one_is_not():
    """`redundant` names a pass benign only where straight-line code gives the same
    ordering again; a wait loop may sit between, an MMA may not."""
    loop = ["$W:", "\tmbarrier.try_wait.parity.shared.b64 %p1, [%r1], %r2;", "\t@!%p1 bra $W;"]
    after = "\ttcgen05.fence::after_thread_sync;"
    mma = "\ttcgen05.mma.cta_group::1.kind::f16 [%r3], %rd1, %rd2, %r4, %p2;"
    assert "line 6" in gate.redundant([after, "\tmov.u32 %r2, 1;"] + loop + [after, mma], 0)
    assert gate.redundant([after, mma, after, mma], 0) == ""
    assert "line 1" in gate.redundant([after, "\tadd.s64 %rd1, %rd1, 2;", after, mma], 2)
    assert gate.redundant([loop[1], after, mma], 1) == ""
    bar = "\tbar.sync %r5, 128;"
    arrive = "\t@%p3 mbarrier.arrive.shared.b64 %rd3, [%r6];"
    before = "\ttcgen05.fence::before_thread_sync;"
    assert "line 1" in gate.redundant([bar, arrive, before, bar], 3)
    assert gate.redundant([bar, "\tst.shared.f32 [%r7], %f1;", bar], 2) == ""
    assert "line 2" in gate.redundant([before, before, bar], 0)
    assert gate.redundant([before, bar, before], 0) == ""
    st = "\ttcgen05.st.sync.aligned.32x32b.x8.b32 [%r8], {%r9};"
    wait_st = "\ttcgen05.wait::st.sync.aligned;"
    assert "line 3" in gate.redundant([wait_st, st, wait_st, bar], 0)
    assert "line 1" in gate.redundant([wait_st, before, wait_st], 2)
    assert gate.redundant([st, wait_st, bar, wait_st], 1) == ""
    assert gate.redundant(["L_end:", wait_st, wait_st], 2) == "no tcgen05.st since the " \
        "thread's tcgen05.wait::st at line 2: nothing to wait for"
    assert gate.redundant([wait_st, "L_end:", wait_st], 2) == ""
