"""Every analysis is bounded: a block of 65,538 warpgroups, a 10,000-statement kernel and
an exponential macro are checked (or refused) quickly, with located notes when an
analysis gives up. The times asserted are hang guards in CPU seconds, far above what
these take (about 0.3 s, 3 s and 1 s): a test may say "it ends", not "it is fast", since a
loaded machine makes any tighter bound flaky. bench/bounds.py measures the speed against
the issue's bounds (2 s for the wide block, 5 s for 10,000 statements)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from choreo_py import cli
from choreo_py.passes import pipeline_check

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import bounds  # noqa: E402  (bench/bounds.py: the program generators)

HANG_GUARD_S = 60.0  # "it ends", not a speed bound (see the module docstring)


def _check(capsys, tmp_path, text: str):
    path = tmp_path / "b.co"
    path.write_text(text)
    start = time.process_time()  # CPU seconds: other work on the machine does not count
    rc = cli.main(["check", str(path)])
    return rc, time.process_time() - start, capsys.readouterr().err


def test_65538_warpgroups_are_checked_or_refused(capsys, tmp_path):
    rc, secs, err = _check(capsys, tmp_path, bounds.wide(65536))
    # the event arrays sized by the instances overflow shared memory: a located error
    assert secs < HANG_GUARD_S and (rc == 0 or "bytes of shared memory, more than" in err)
    assert "b.co:23:5: warning: the block has 8388864 threads" in err
    # the pipeline check comes after the shared-memory plan: reached only when it fits
    assert rc == 1 or "b.co:23:5: warning: pipeline check: not run: the block has 65538 role " \
        "instances" in err
    assert "no end after" not in err


def test_ten_thousand_statements(capsys, tmp_path):
    rc, secs, err = _check(capsys, tmp_path, bounds.straight(10_000))
    assert rc == 0 and secs < HANG_GUARD_S, (secs, err)
    assert "no end after" not in err  # a long kernel is not an endless loop


def test_pipeline_check_stops_at_its_budget_with_a_note(capsys, tmp_path, monkeypatch):
    """The K loop holds 1,000 statements: each scenario costs thousands of steps, and a
    small total budget makes the check stop early, saying so where the kernel starts."""
    spent = []
    real = pipeline_check._Sim.run

    def run(self):
        try:
            return real(self)
        finally:
            spent.append(self.steps)

    monkeypatch.setattr(pipeline_check, "TOTAL_STEPS", 30_000)
    monkeypatch.setattr(pipeline_check._Sim, "run", run)
    rc, _, err = _check(capsys, tmp_path, bounds.loop(1000))
    assert rc == 0
    assert "b.co:16:3: warning: pipeline check: stopped after" in err
    assert sum(spent) < 30_000 + max(spent)


@pytest.mark.parametrize("depth", [20, 40])
def test_exponential_macro_is_refused_at_the_invocation(capsys, tmp_path, depth):
    rc, secs, err = _check(capsys, tmp_path, bounds.macro(depth))
    assert rc == 1 and secs < HANG_GUARD_S
    assert f"b.co:{depth + 2}:9: error: macro expansion too large" in err


def test_large_but_finite_expansion_passes(tmp_path):
    from choreo_py import frontend
    path = tmp_path / "m.co"
    path.write_text(bounds.macro(12))  # 4,096 tokens
    assert frontend.preprocess(str(path)).text.count("x") == 4096
