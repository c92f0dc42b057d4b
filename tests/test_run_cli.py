"""`choreo run`: output, checks, exit status, usage errors; never a traceback."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from choreo_py import cli

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"
CO = ROOT / "tests" / "co"
FA_CAUSAL = str(EX / "flash_atten_causal.co")
FA = str(EX / "flash_atten.co")
SHAPE = "B=1,H=2,Q_SEQ=256,KV_SEQ=256"


def run(capsys, *argv):
    rc = cli.main(["run", *map(str, argv)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err.replace(str(ROOT) + "/", "")


def _number(pattern: str, text: str) -> float:
    return float(re.search(pattern, text).group(1))


# ---------------------------------------------------------------- success


def test_causal_seed_runs_and_matches_sdpa(capsys):
    rc, out, err = run(capsys, FA_CAUSAL, "--shape", SHAPE, "--target", "sm_90a")
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("ran flash_atten [B=1 Q_SEQ=256 H=2 KV_SEQ=256] "
                               "schedule=round_robin seed=0 owners=4 per 64 rows (sm_90a): 4 blocks, ")
    assert lines[1].startswith("check sdpa-causal (auto: guessed from the parameters Q, K, V, O "
                               "and the names ('flash', 'atten', 'causal'); --check or --ref to "
                               "choose): O max abs error ")
    assert lines[1].endswith("(tolerance 0.01): ok")
    assert _number(r"relative error ([0-9.e+-]+)", lines[1]) < 1e-2
    assert _number(r"max abs error ([0-9.e+-]+)", lines[1]) < 5e-2


@pytest.mark.parametrize("argv, check", [
    ([FA, "--shape", "B=2,H=1,Q_SEQ=200,KV_SEQ=136", "--schedule", "random", "--seed", "4"],
     "sdpa"),
    ([FA, "--shape", "B=1", "--shape", "H=1,Q_SEQ=128,KV_SEQ=128", "--check", "sdpa"], "sdpa"),
    ([EX / "gemm.co", "--shape", "M=200,N=136,K=100"], "matmul"),
    ([EX / "softmax.co", "--shape", "ROWS=130", "--schedule", "random"], "softmax"),
    ([FA_CAUSAL, "--shape", SHAPE, "--owners", "1", "--target", "sm_100a"], "sdpa-causal"),
])
def test_examples_pass_their_checks(capsys, argv, check):
    rc, out, err = run(capsys, *argv)
    assert rc == 0, err
    assert f"check {check} (" in out and out.rstrip().endswith(": ok")


def test_check_none_runs_without_comparing(capsys):
    rc, out, _ = run(capsys, EX / "gemm.co", "--shape", "M=128,N=128,K=64", "--check", "none")
    assert rc == 0
    assert "check none (--check): outputs (C) not compared" in out
    rc, out, _ = run(capsys, CO / "thread_shift.co", "--shape", "N=64", "-D", "SYNC")
    assert rc == 0
    assert "check none (auto: no reference fits this function's parameters)" in out


# ---------------------------------------------------------------- wrong results and faults


def test_a_wrong_reference_fails_with_the_error(capsys):
    """The causal seed is not non-causal attention: the check must notice."""
    rc, out, err = run(capsys, FA_CAUSAL, "--shape", SHAPE, "--check", "sdpa")
    assert rc == 1
    assert out.rstrip().endswith(": FAILED")
    assert re.match(r"examples/flash_atten_causal.co: error: O differs from the sdpa reference: "
                    r"relative error \S+ exceeds the tolerance 0.01", err)


def test_missing_all_reduce_fails_the_check(capsys):
    # The name says more than "causal attention" ('no', 'all', 'reduce'): auto picks no
    # reference for it (test_auto_does_not_guess_...), so the check is named.
    rc, out, err = run(capsys, CO / "fa_causal_no_all_reduce.co", "--shape",
                       "B=1,H=1,Q_SEQ=256,KV_SEQ=256", "--target", "sm_90a", "--check", "sdpa-causal")
    assert rc == 1
    assert "O differs from the sdpa-causal reference" in err


def test_default_target_is_the_gpu_present_else_sm_100a(capsys, monkeypatch):
    """One target rule: `run` without --target takes the GPU's own target, else sm_100a,
    and models that target's owners of accumulator rows: the all-reduce-free file's 64-row
    accumulators have two owners per row on sm_100a (.16x32bx2), four on sm_90a, so it is
    wrong on both."""
    from choreo_py import targets

    monkeypatch.setattr(targets, "_gpu_capability", lambda: None)
    rc, out, _ = run(capsys, CO / "fa_causal_no_all_reduce.co", "--shape",
                     "B=1,H=1,Q_SEQ=256,KV_SEQ=256", "--check", "sdpa-causal")
    assert rc == 1 and " owners=2 per 64 rows, 1 per 128 rows (sm_100a): " in out
    monkeypatch.setattr(targets, "_gpu_capability", lambda: (9, 0))
    rc, out, _ = run(capsys, CO / "fa_causal_no_all_reduce.co", "--shape",
                     "B=1,H=1,Q_SEQ=256,KV_SEQ=256", "--check", "sdpa-causal")
    assert rc == 1 and " owners=4 per 64 rows (sm_90a): " in out


def test_a_looser_tolerance_is_honoured(capsys):
    rc, out, _ = run(capsys, FA_CAUSAL, "--shape", SHAPE, "--check", "sdpa", "--rtol", "10")
    assert rc == 0 and "(tolerance 10): ok" in out


def test_deadlock_is_reported_at_its_location(capsys):
    rc, out, err = run(capsys, CO / "fa_causal_no_trigger_kf.co", "--shape",
                       "B=1,H=1,Q_SEQ=512,KV_SEQ=512")
    assert rc == 1 and out == ""
    lines = err.splitlines()
    # The static check's warning first, then the deadlock the run hits.
    assert lines[0].startswith("tests/co/fa_causal_no_trigger_kf.co:84:9: warning: pipeline check")
    errors = [ln for ln in lines if ": error: " in ln]
    assert len(errors) == 1
    assert errors[0].startswith("tests/co/fa_causal_no_trigger_kf.co:54:11: error: deadlock: "
                                "role (p == 0)[p=0] waits ke[0] generation 1")
    assert "role (p > 0)[p=1] waits kf[0] generation 0" in errors[0]


def test_race_is_reported_at_its_location(capsys):
    rc, _, err = run(capsys, CO / "fa_causal_no_wait_kf.co", "--shape",
                     "B=1,H=1,Q_SEQ=256,KV_SEQ=256", "--schedule", "random", "--seed", "5")
    assert rc == 1
    assert err.startswith("tests/co/fa_causal_no_wait_kf.co:85:9: error: data race on k_buf[0]")
    assert "tests/co/fa_causal_no_wait_kf.co:55:11: note: the conflicting write" in err
    rc, _, err = run(capsys, CO / "thread_shift.co", "--shape", "N=64")
    assert rc == 1
    assert err.startswith("tests/co/thread_shift.co:21:7: error: data race on buf: instance r=0")


def test_step_limit_is_a_located_error(capsys):
    rc, _, err = run(capsys, EX / "softmax.co", "--shape", "ROWS=128", "--step-limit", "1000")
    assert rc == 1
    assert re.match(r"examples/softmax.co:\d+:\d+: error: step limit of 1000 statements exceeded",
                    err)


def test_program_errors_are_reported_as_for_compile(capsys, tmp_path):
    bad = tmp_path / "bad.co"
    bad.write_text("__co__ void f(global f32[N] X) { parallel {t} by [N] : block { y = ; } }\n")
    rc, _, err = run(capsys, bad, "--shape", "N=4")
    assert rc == 1 and "bad.co:1:" in err and "error" in err


# ---------------------------------------------------------------- usage errors


@pytest.mark.parametrize("argv, message", [
    ([FA, "--shape", "B=1,H=2"],
     "missing --shape entries for Q_SEQ, KV_SEQ (flash_atten needs --shape "
     "B=...,Q_SEQ=...,H=...,KV_SEQ=...)"),
    ([FA], "missing --shape entries for B, Q_SEQ, H, KV_SEQ"),
    ([EX / "gemm.co", "--shape", "M=128,N=128"], "missing --shape entry for K "),
    ([FA, "--shape", SHAPE + ",S=4"],
     "flash_atten has no dimension 'S' (its dimensions: B, Q_SEQ, H, KV_SEQ)"),
    ([FA, "--shape", "B=1,H"], "--shape: 'H' is not NAME=SIZE"),
    ([FA, "--shape", "B=1,H=two"], "--shape: 'H=two' is not NAME=SIZE"),
    ([FA, "--shape", "B=0,H=1"], "--shape: B must be at least 1, not 0"),
    ([FA, "--shape", "B=1,B=2"], "--shape: B is given twice (1 and 2)"),
    ([EX / "gemm.co", "--shape", "M=128,N=128,K=64", "--check", "sdpa"],
     "--check sdpa needs parameters Q, K, V, O; gemm has A, B, C"),
    ([FA, "--shape", SHAPE, "--function", "nope"],
     "no __co__ function named 'nope' (the file has flash_atten)"),
])
def test_usage_errors(capsys, argv, message):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.startswith(f"choreo: error: {message}")


@pytest.mark.parametrize("argv", [[FA, "--schedule", "fifo"], [FA, "--check", "conv"],
                                  [FA, "--seed", "x"], [FA, "--owners", "3"]])
def test_argument_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as info:  # argparse's own errors, as for every subcommand
        cli.main(["run", *argv])
    assert info.value.code == 2
    assert "choreo: error: argument" in capsys.readouterr().err


def test_a_missing_file_is_a_usage_error(capsys):
    rc, _, err = run(capsys, EX / "missing.co", "--shape", "N=1")
    assert rc == 2 and err.startswith("choreo: error: ") and "missing.co" in err


@pytest.mark.parametrize("cmd", ["run", "emulate"])
def test_scalar_arguments_take_their_values_from_arg(capsys, cmd):
    """--arg gives a function's scalar arguments (it was an internal KeyError in `emulate`,
    'has no value here' in `run`); one left out, or one the function lacks, is named."""
    path = str(ROOT / "tests" / "co" / "run_sized_shared.co")
    base = [cmd, path, "--shape", "B=2,N=40,K=3", "--target", "sm_90a"]
    assert cli.main(base) == 2
    assert "error: flip takes the scalar argument W: give its value with --arg W=..." in \
        capsys.readouterr().err
    assert cli.main(base + ["--arg", "W=5,V=1"]) == 2
    assert "--arg: flip has no scalar argument 'V' (its scalar arguments: W)" in \
        capsys.readouterr().err
    assert cli.main(base + ["--arg", "W=x"]) == 2
    assert "--arg: W=x is not a number, true or false" in capsys.readouterr().err
    assert cli.main(base + ["--arg", "W=5"]) == 0
    out = capsys.readouterr().out
    if cmd == "emulate":  # compared with the interpreter's run of the same call
        assert "check interpreter: Y max abs error 0.000e+00" in out


def test_a_bool_argument_from_arg_runs_the_corpus_attention_in_the_emulator(capsys):
    from conftest import need_shared

    path = str(need_shared("corpus", "tests", "gpu", "end2end", "flash_atten.co"))
    assert cli.main(["emulate", path, "--shape", "B=1,H=1,Q_SEQ=64,KV_SEQ=64", "--arg",
                     "is_causal=true", "--target", "sm_90a"]) == 0
    assert "is_causal=True] (host program)" in capsys.readouterr().out
