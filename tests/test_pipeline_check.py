"""The static pipeline check over event rings, on the examples and on broken seeds."""
from __future__ import annotations

import re

from pathlib import Path

import pytest

from choreo_py import cli, driver, frontend, targets
from choreo_py.diagnostics import ChoreoError, take_warnings
from choreo_py.passes import pipeline, pipeline_check

ROOT = Path(__file__).resolve().parent.parent
SEED = (ROOT / "examples" / "flash_atten_causal.co").read_text()


def broken(old: str, new: str) -> str:
    assert SEED.count(old) == 1, old
    return SEED.replace(old, new)


def line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def compile_error(text: str) -> ChoreoError:
    program = frontend.parse_text(text, "broken.co")
    with pytest.raises(ChoreoError) as info:  # the IR's passes alone, not the language rules
        pipeline.build_module(program, targets.get("sm_90a"))
    return info.value


@pytest.mark.parametrize("name", ["flash_atten_causal", "flash_atten", "gemm"])
def test_examples_pass_over_many_trip_counts(name: str) -> None:
    program = frontend.parse_file(str(ROOT / "examples" / f"{name}.co"))
    kernel = driver.build_ir(program, target="sm_90a").functions[0].kernels[0]
    assert pipeline_check.check_kernel(kernel) >= 5  # distinct trip-count scenarios


def test_missing_k_trigger_is_a_deadlock_with_roles_and_generations() -> None:
    text = broken("trigger kf.at(k_pipe_order++) after k_load;", "k_pipe_order++;")
    e = compile_error(text)
    msg = e.message
    assert msg.startswith("pipeline check: role (p > 0) [p=1] waits kf.at(k_pipe_order) = kf[0] "
                          "generation 0, which is never completed")
    assert "no role triggers kf" in msg and "when " in msg
    assert e.loc.line == line_of(text, "wait kf.at(k_pipe_order);")


def test_producer_one_tile_short_names_the_trip_count() -> None:
    text = broken("foreach {issue} in [kv_bound] {", "foreach {issue} in [kv_bound - 1] {")
    msg = compile_error(text).message
    assert "waits kf.at(k_pipe_order) = kf[0] generation 0, which is never completed" in msg
    assert "role (p == 0) [p=0] finished after triggering kf[0] 0 time(s)" in msg
    assert "kv_bound=1" in msg


def test_consumer_one_release_short_deadlocks_the_producer() -> None:
    # The final PV release is dropped: the producer still finishes (it never
    # needs that slot again), but with a longer loop a release is missing.
    text = broken("""        wait pv;
          trigger ve.at(v_pipe_order++);""", """        wait pv;
          v_pipe_order++;""")
    msg = compile_error(text).message
    assert "role (p == 0) [p=0] waits ve.at(v_pipe_order)" in msg
    assert "never completed" in msg


def test_producer_without_empty_wait_overruns_the_ring() -> None:
    text = broken("          wait ke.at(k_pipe_order);\n", "")
    msg = compile_error(text).message
    assert "parity wait cannot tell them apart" in msg or "would pass early" in msg


def test_check_warns_where_compile_refuses(capsys, tmp_path) -> None:
    path = tmp_path / "broken.co"
    path.write_text(broken("trigger kf.at(k_pipe_order++) after k_load;", "k_pipe_order++;"))
    take_warnings()
    assert cli.main(["check", str(path)]) == 0
    err = capsys.readouterr().err
    assert "warning: pipeline check: role (p > 0)" in err
    assert cli.main(["compile", str(path), "--emit", "ir"]) == 1
    err = capsys.readouterr().err
    assert "error: pipeline check:" in err and "^" in err


PERSISTENT = (ROOT / "examples" / "flash_atten_persistent.co").read_text()


def test_persistent_example_meets_multi_tile_items_in_many_blocks() -> None:
    program = frontend.parse_text(PERSISTENT, "flash_atten_persistent.co")
    kernel = driver.build_ir(program, target="sm_90a").functions[0].kernels[0]
    # Blocks read their grid index inside the roles, so blocks 0, 1 and 131 are scenarios;
    # the one-dimension families give blocks several items of several K/V tiles.
    assert pipeline_check.check_kernel(kernel) >= 50


def test_persistent_q_ring_without_release_deadlocks_at_the_second_tile() -> None:
    text = PERSISTENT.replace("trigger qe.at(q_order++);", "q_order++;")
    assert text != PERSISTENT
    e = compile_error(text)
    assert "role (p == 0) [p=0] waits qe.at(q_order) = qe[0] generation 1" in e.message
    assert "no role triggers qe" in e.message


def test_scenarios_over_the_step_budget_are_skipped_but_never_ending_code_is_not() -> None:
    # A scenario that would take too long ends its family (larger values cost more)...
    program = frontend.parse_text(PERSISTENT, "flash_atten_persistent.co")
    kernel = driver.build_ir(program, target="sm_90a").functions[0].kernels[0]
    finished = []
    for family in pipeline_check._families(kernel):
        assert [d for d in family] == sorted(family, key=lambda d: sum(d.values()))
        finished.append(family)
    assert len(finished) == 1 + 2 * len(kernel.symbolic_dims)
    # ...but a loop that never ends fails every scenario, and that is reported.
    text = broken("mutable u32 k_pipe_order = 0;\n        mutable u32 v_pipe_order = 0;\n"
                  "        foreach",
                  "mutable u32 k_pipe_order = 0;\n        mutable u32 v_pipe_order = 0;\n"
                  "        mutable u32 spin = 0;\n        while (spin < 1) { spin = 0; }\n"
                  "        foreach")
    e = compile_error(text)
    # (the step budget grows with the kernel's size: 4,000 plus 4 per statement and instance)
    assert re.match(r"pipeline check: no end after \d+ steps in role \(p == 0\)", e.message)
    assert "nor in any other scenario" in e.message
