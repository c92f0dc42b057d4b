"""Run-time faults that no schedule or shape avoids are compile-time errors: a shared view
out of bounds, a fragment read while its MMA may still write it, an event never
triggered. The interpreter reports the same programs at run time."""
from __future__ import annotations

from pathlib import Path

import pytest

from choreo_py import cli
from choreo_py.passes import static_faults
from choreo_py.driver import ir_of_file

EX = Path(__file__).resolve().parent.parent / "examples"


def _variant(tmp_path, example, old, new) -> Path:
    text = (EX / example).read_text()
    assert old in text
    path = tmp_path / "v.co"
    path.write_text(text.replace(old, new))
    return path


def _errors(capsys, argv):
    rc = cli.main(argv)
    return rc, capsys.readouterr().err


OOB = ("gemm.co", "c_buf.subspan(WG_M, BN).at(cid, 0)", "c_buf.subspan(WG_M, BN).at(cid, 1)")
NO_WAIT = ("gemm.co", "          wait step;\n", "")


@pytest.mark.parametrize("cmd", [["check"], ["compile", "--emit", "ptx", "-o", "-"]])
def test_shared_view_out_of_bounds(capsys, tmp_path, cmd):
    path = _variant(tmp_path, *OOB)
    rc, err = _errors(capsys, [cmd[0], str(path)] + cmd[1:])
    assert rc == 1
    # the language rule (a constant tile index within the grid) or, where it cannot
    # judge, the IR's bounds analysis says it
    assert ("v.co:49:56: error: tile index 1 is outside the 1 tiles" in err
            or "v.co:49:9: error: this view of 'c_buf' [128, 128] spans elements [128, 256) of "
               "dimension 1" in err)


def test_view_of_a_role_index_in_bounds_passes(tmp_path):
    """`at(cid, 0)` with cid = p - 1 in [0, 1] for the role p > 0 of 3 instances."""
    module = ir_of_file(str(EX / "gemm.co"))
    assert static_faults.faults(module.functions[0].kernels[0]) == []


def test_view_out_of_bounds_for_some_role_member(capsys, tmp_path):
    """cid = p + 1 in [2, 3] for p in [1, 2]: rows 128..255 of a 128-row buffer."""
    path = _variant(tmp_path, "gemm.co", "cid = p - 1;", "cid = p + 1;")
    rc, err = _errors(capsys, ["check", str(path)])
    assert rc == 1 and "this view of 'a_buf' [128, 64] spans elements [128, 192)" in err


@pytest.mark.parametrize("cmd", [["check"], ["compile", "--emit", "ptx", "-o", "-"]])
def test_accumulator_read_before_wait(capsys, tmp_path, cmd):
    path = _variant(tmp_path, *NO_WAIT)
    rc, err = _errors(capsys, [cmd[0], str(path)] + cmd[1:])
    assert rc == 1
    assert ("v.co:48:9: error: mma.store uses 'acc' while the MMA 'step' (line 44) may still "
            "be writing it; 'wait step;' first") in err


def test_run_refuses_before_running(capsys, tmp_path):
    path = _variant(tmp_path, *NO_WAIT)
    rc, err = _errors(capsys, ["run", str(path), "--shape", "M=128,N=128,K=64"])
    assert rc == 1 and "v.co:48:9: error: mma.store uses 'acc'" in err


def test_wait_in_a_later_iteration_is_not_enough(capsys, tmp_path):
    """The wait moved after the loop: the MMA of one iteration is still writing `acc`
    when the next accumulates; the store after the loop is fine, the epilogue is not."""
    text = (EX / "flash_atten_causal.co").read_text()
    old = "        wait first_qk;\n"
    assert old in text
    path = tmp_path / "v.co"
    path.write_text(text.replace(old, ""))
    rc, err = _errors(capsys, ["check", str(path)])
    assert rc == 1 and "uses 'acc_s' while the MMA 'first_qk'" in err


def test_event_never_triggered(capsys, tmp_path, monkeypatch):
    """The pipeline check finds it with roles and generations; where that check gives up
    (here: made to skip every block), the plain check still refuses the program."""
    from choreo_py.passes import pipeline_check
    path = _variant(tmp_path, "flash_atten_causal.co", "trigger kf.at", "// trigger kf.at")
    rc, err = _errors(capsys, ["compile", str(path), "--emit", "ptx", "-o", "-"])
    assert rc == 1 and "v.co:84:9: error: pipeline check: role (p > 0) [p=1] waits kf" in err
    monkeypatch.setattr(pipeline_check, "MAX_INSTANCES", 1)
    rc, err = _errors(capsys, ["compile", str(path), "--emit", "ptx", "-o", "-"])
    assert rc == 1
    assert "v.co:84:9: error: 'kf' is waited on but never triggered" in err
    rc, err = _errors(capsys, ["check", str(path)])
    assert rc == 0 and "v.co:84:9: warning: 'kf' is waited on but never triggered" in err


@pytest.mark.parametrize("example", sorted(EX.glob("*.co")), ids=lambda p: p.name)
def test_examples_have_no_static_fault(capsys, example):
    assert cli.main(["check", str(example)]) == 0
    assert "error" not in capsys.readouterr().err


def test_a_block_accumulators_guarded_fill_right_before_its_mma_is_the_overwrite(capsys, tmp_path):
    """examples/flash_atten_blackwell.co: `if (step == 0) mma.fill o0, 0.0f;` right before
    PV0, with the previous step's PV0 in flight (the MMA role never waits it), is that PV's
    overwrite (a predicate on sm_100a, no store to tensor memory); a statement between
    them makes it a fill of the tile the PV may still be writing."""
    assert cli.main(["check", str(EX / "flash_atten_blackwell.co")]) == 0
    capsys.readouterr()
    old = "                mma.fill o0, 0.0f;              // a new item: this PV overwrites O0\n"
    path = _variant(tmp_path, "flash_atten_blackwell.co", old, old + "              wait vf.at(order);\n")
    rc, err = _errors(capsys, ["check", str(path)])
    line = path.read_text().splitlines().index(old.rstrip("\n")) + 1
    assert rc == 1 and (f"v.co:{line}:17: error: this fill uses 'o0' while the MMA 'pv0' "
                        f"(line {line + 2}) may still be writing it; 'wait pv0;' first") in err, err
