"""`__bar_sync(id, count)` / `__bar_arrive(id, count)`: hardware named barriers.

Sema's rules (located errors), the IR they become, the interpreter's model
(turn-taking works, a missing arrival is a deadlock naming the barrier, a
count that disagrees is an error) and the PTX both targets emit.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

from choreo_py import frontend
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.interp import DeadlockError, EventError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fa_helpers import assemble, run_error  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PINGPONG = ROOT / "bench" / "variants" / "flash_atten_persistent_pingpong.co"


def roles(body: str, consumer_extent: int = 3, level: str = "group-4") -> str:
    """A kernel whose role `p > 0` runs `body` (which starts on line 7)."""
    return (
        "__co__ void k(global f32[128] A) {\n"
        "  parallel.async b by 1 : block {\n"
        f"    parallel p by {consumer_extent} : {level} {{\n"
        "      inthreads.async (p > 0) {\n"
        "        cid = p - 1;\n"
        "        mutable s32 n = 0;\n"
        f"{body}"
        "      }\n"
        "    }\n"
        "  }\n"
        "}\n")


def error_of(text: str) -> ChoreoError:
    with pytest.raises(ChoreoError) as info:
        frontend.check_text(text, "t.co")
    return info.value


SEMA_ERRORS = [
    # (source, message fragment, line, col)
    (roles("        __bar_sync(1, 100);\n"), "thread count 100", 7, 23),
    (roles("        __bar_sync(1, 64);\n"), "whole thread groups of this parallel level (128", 7, 23),
    (roles("        __bar_sync(1, 512);\n"), "exceeds the 384 threads of the block", 7, 23),
    (roles("        __bar_arrive(16, 256);\n"), "barrier id 16: the hardware has named barriers "
     "0..15", 7, 22),
    (roles("        __bar_sync(1);\n"), "takes 2 arguments", 7, 9),
    (roles("        __bar_sync(1.5f, 256);\n"), "must be an integer, not f32", 7, 20),
    (roles("        __bar_sync(1, n);\n"), "the thread count must be a compile-time integer", 7, 23),
]


@pytest.mark.parametrize("src,message,line,col", SEMA_ERRORS)
def test_sema_rules(src, message, line, col):
    err = error_of(src)
    assert message in err.message, err.message
    assert (err.loc.line, err.loc.col) == (line, col)


def test_barrier_outside_a_role_is_valid_but_not_compiled(tmp_path):
    """Named barriers in a parallel region of thread groups outside any role are valid
    Choreo; the IR models them between roles and between the threads of a `: thread`
    region (tests/test_thread_named_barriers.py), so `check` accepts the program and
    `compile` refuses the construct by name at its place."""
    src = ("__co__ void k(global f32[128] A) {\n"
           "  parallel.async b by 1 : block {\n"
           "    parallel p by 3 : group-4 {\n"
           "      __bar_sync(1, 256);\n"
           "    }\n"
           "  }\n"
           "}\n")
    frontend.check_text(src, "t.co")
    path = tmp_path / "t.co"
    path.write_text(src)
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ir", "sm_90a")
    assert ("'__bar_sync' outside an 'inthreads.async' role or a ': thread' region is not "
            "supported") in info.value.message
    assert (info.value.loc.line, info.value.loc.col) == (4, 7)


def test_ir_prints_the_barrier_operations(tmp_path):
    path = tmp_path / "t.co"
    path.write_text(roles("        __bar_arrive(cid + 1, 256);\n        __bar_sync(2 - cid, 256);\n"))
    text = compile_file(str(path), "ir", "sm_90a")
    assert "bar.arrive cid + 1, 256" in text
    assert "bar.sync 2 - cid, 256" in text




@pytest.mark.parametrize("schedule,seed", [("round_robin", 0), ("random", 1), ("random", 2)])
def test_turn_taking_consumers_match_sdpa(schedule, seed):
    err, o = run_error(PINGPONG, 1, 3, 640, schedule, seed)
    assert not torch.isnan(o).any()
    assert err < 1e-2


def test_missing_first_turn_is_a_deadlock_on_the_barrier(tmp_path):
    src = PINGPONG.read_text()
    broken = src.replace("        if (cid == 1)\n          __bar_arrive(1, 256);\n", "")
    assert broken != src
    path = tmp_path / "no_first_turn.co"
    path.write_text(broken)
    with pytest.raises(DeadlockError) as info:
        run_error(path, 1, 1, 256)
    msg = str(info.value)
    assert "role (p > 0)[p=1] waits named barrier 1 generation 0" in msg
    assert "role (p > 0)[p=2] waits named barrier 2 generation 0" in msg


def test_an_arrival_counting_differently_is_an_error(tmp_path):
    src = PINGPONG.read_text()
    broken = src.replace("          __bar_arrive(1, 256);\n", "          __bar_arrive(1, 384);\n")
    path = tmp_path / "count.co"
    path.write_text(broken)
    with pytest.raises(EventError) as info:
        run_error(path, 1, 1, 256)
    assert ("role (p > 0)[p=2] arrives on named barrier 1 counting 384 threads, but the "
            "generation being filled counts 256 (128 arrived)") in str(info.value)


def test_barrier_state_counts_threads_per_generation():
    from choreo_py.interp.sync import NamedBarrierState

    bar = NamedBarrierState(3)
    assert bar.arrive(128, 256, {1: 1}, None, "a") == 0
    assert bar.completed == 0
    assert bar.arrive(128, 256, {2: 4}, None, "b") == 0
    assert bar.completed == 1 and bar.clocks[0] == {1: 1, 2: 4}
    assert bar.arrive(128, 256, {}, None, "a") == 1  # the next generation starts
    with pytest.raises(EventError, match="brings 256 threads to named barrier 3, 128 of 256"):
        bar.arrive(256, 256, {}, None, "c")


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_ptx_of_the_turn_taking_consumers(target):
    ptx = compile_file(str(PINGPONG), "ptx", target)
    assert re.search(r"bar\.arrive 1, 256;", ptx)
    assert len(re.findall(r"bar\.sync %bar_id\w*, 256;", ptx)) == 2
    assert len(re.findall(r"bar\.arrive %bar_id\w*, 256;", ptx)) == 2
    # the compiler's own barriers take ids the program does not name
    own = {int(b) for b in re.findall(r"bar\.sync (\d+), \d+;", ptx)}
    own |= {int(b) for b in re.findall(r"add\.u32 %inst_bar\w*, %\w+, (\d+);", ptx)}
    assert own and not own & {1, 2}
    report = assemble(ptx, target)
    assert "0 bytes spill stores, 0 bytes spill loads" in report


def test_ids_the_program_computes_reserve_1_to_7(tmp_path):
    path = tmp_path / "t.co"
    path.write_text(roles("        __bar_arrive(cid + 1, 256);\n        __bar_sync(2 - cid, 256);\n"
                          "        __bar_sync(12, 256);\n"))
    ptx = compile_file(str(path), "ptx", "sm_90a")
    assert "bar.sync 12, 256;" in ptx


def test_barrier_zero_is_refused_by_the_backend(tmp_path):
    path = tmp_path / "t.co"
    path.write_text(roles("        __bar_sync(0, 256);\n"))
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "pyptx", "sm_90a")
    assert "__bar_sync on barrier 0 (the whole-block barrier" in info.value.message
    assert (info.value.loc.line, info.value.loc.col) == (7, 9)


def test_without_named_barriers_the_compiler_keeps_ids_from_1():
    ptx = compile_file(str(ROOT / "examples" / "flash_atten_persistent.co"), "ptx", "sm_90a")
    assert re.search(r"bar\.sync 1, 256;", ptx)


def test_a_role_with_a_barrier_runs_on_every_thread(tmp_path):
    # The producer is otherwise issue-only (one thread runs it); a named barrier counts
    # threads, so with one all of its threads run the role and arrive.
    src = PINGPONG.read_text().replace(
        "        call croq::cuda::setreg_dec(40);\n",
        "        call croq::cuda::setreg_dec(40);\n        __bar_arrive(3, 128);\n", 1)
    path = tmp_path / "producer.co"
    path.write_text(src)
    plain = compile_file(str(PINGPONG), "ptx", "sm_90a")
    ptx = compile_file(str(path), "ptx", "sm_90a")
    assert "bar.arrive 3, 128;" in ptx
    assert "L_role_exit_0" in plain and "%not_issuer" in plain
    assert "%not_issuer" not in ptx.split("bar.arrive 3, 128;")[0]
