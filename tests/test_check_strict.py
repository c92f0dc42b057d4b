"""`choreo check --strict --target T` reports what `choreo compile --target T` reports:
it fails (exit 1) exactly when compile fails with a program error, for every program of
tests/co/ and both targets. A compile that fails only by refusing, by name, what the tile
IR cannot express yet ("... is not supported") is a valid program: check --strict
passes it (`check --lowerable` lists those).

The static-fault reproducers (tests/co/s04, s09, s10, s15, s16, s19, s20, s22: a wait
never triggered, an MMA K or dtype mismatch, more than 1024 threads in a block, a ring
not ready or never released, a double trigger) were "warning: ... (an error for
compile)" with exit 0 under --strict.
"""
from __future__ import annotations

import contextlib
import glob
import io
import os

import pytest

from choreo_py import cli

HERE = os.path.join(os.path.dirname(__file__), "co")
PROGRAMS = sorted(glob.glob(os.path.join(HERE, "*.co")))
STATIC = ["s04_wait_never_triggered", "s09_mma_k_mismatch", "s10_mma_dtype_mismatch",
          "s15_threads_1152", "s16_threads_2048", "s19_ring_not_ready",
          "s20_ring_never_released", "s22_double_trigger"]
TARGETS = ["sm_100a", "sm_90a"]


def _run(*argv) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = cli.main(list(argv))
    return rc, err.getvalue()


def _program_error(rc: int, err: str) -> bool:
    """compile failed for the program (exit 1), not only refusing what it cannot lower."""
    errors = [line for line in err.splitlines() if ": error: " in line]
    return rc == 1 and not all("not supported" in line for line in errors)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", PROGRAMS, ids=[os.path.basename(p) for p in PROGRAMS])
def test_check_strict_fails_iff_compile_does(path, target):
    compiled = _run("compile", path, "--target", target, "--emit", "ir", "-o", os.devnull)
    checked = _run("check", "--strict", "--target", target, path)
    assert checked[0] in (0, 1) and compiled[0] in (0, 1), (checked, compiled)
    assert (checked[0] == 1) == _program_error(*compiled), \
        f"check --strict: {checked}\ncompile: {compiled}"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", STATIC)
def test_static_faults_are_errors_under_strict(name, target):
    path = os.path.join(HERE, name + ".co")
    rc, err = _run("check", "--strict", "--target", target, path)
    assert rc == 1, err
    assert "(an error for compile)" not in err and "warning:" not in err, err
    compiled = _run("compile", path, "--target", target, "--emit", "ir", "-o", os.devnull)
    first = lambda text: next(l for l in text.splitlines() if ": error: " in l)
    assert first(err) == first(compiled[1]), (err, compiled)


def test_plain_check_still_warns(capsys):
    """Without --strict the findings compile refuses stay warnings (exit 0)."""
    rc, err = _run("check", os.path.join(HERE, "s09_mma_k_mismatch.co"))
    assert rc == 0 and "warning: MMA K mismatch" in err and "(an error for compile)" in err


def test_the_sample_is_not_vacuous():
    outcomes = {_run("compile", p, "--emit", "ir", "-o", os.devnull)[0] for p in PROGRAMS}
    assert outcomes == {0, 1}
