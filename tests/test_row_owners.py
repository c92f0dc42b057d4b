"""The interpreter's owners of accumulator rows are the target's (targets.Target.acc_rows),
the entry the backend's register layout is built from, so a kernel that is wrong on the
target is wrong in `choreo run` for that target too.

tests/co/row_softmax_no_all_reduce.co is a row softmax whose row sums miss their
all_reduce_sum: each owner of a row divides by its own partial sum. On sm_90a four
threads share a row (wgmma), on sm_100a the 64-row accumulator's two half-warps
(tcgen05.ld .16x32bx2): it is wrong on both, and the interpreter says so for both;
tests/co/row_softmax.co (with the all-reduce) is right on both.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py import cli, ir, targets
from choreo_py.interp.fragments import RowOwners
from choreo_py.lowering.sm90.wgmma import Sm90Target
from choreo_py.lowering.sm100.target import Sm100Target

ROOT = Path(__file__).resolve().parent.parent
CO = ROOT / "tests" / "co"
WRONG, RIGHT = CO / "row_softmax_no_all_reduce.co", CO / "row_softmax.co"
REF = f"{ROOT / 'docs' / 'refs.py'}:row_softmax"
BACKENDS = {"sm_90a": Sm90Target, "sm_100a": Sm100Target}


def run(capsys, *argv):
    rc = cli.main(["run", *map(str, argv)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


@pytest.mark.parametrize("target", list(targets.NAMES))
def test_missing_all_reduce_fails_in_run_for_each_target(capsys, target):
    rc, out, err = run(capsys, WRONG, "--shape", "M=128,K=64", "--ref", REF, "--target", target)
    assert rc == 1 and "C differs from the reference" in err


@pytest.mark.parametrize("target", list(targets.NAMES))
def test_row_softmax_with_its_all_reduce_passes_for_each_target(capsys, target):
    rc, out, err = run(capsys, RIGHT, "--shape", "M=128,K=64", "--ref", REF, "--target", target)
    assert rc == 0 and ": ok" in out, err


def test_the_default_target_is_modelled_by_rows(capsys, monkeypatch):
    """Without a GPU, `run` is sm_100a's: two owners per 64-row accumulator row."""
    monkeypatch.setattr(targets, "_gpu_capability", lambda: None)
    rc, out, _ = run(capsys, WRONG, "--shape", "M=128,K=64", "--ref", REF)
    assert rc == 1 and " owners=2 per 64 rows, 1 per 128 rows (sm_100a): " in out


@pytest.mark.parametrize("target", list(targets.NAMES))
def test_interpreter_computes_what_the_compiled_kernel_computes(target, tmp_path, monkeypatch):
    """The wrong kernel's wrong values: the interpreter's equal the emulated PTX's (both
    divide each owner's columns by that owner's partial sum)."""
    monkeypatch.setenv("CHOREO_PY_CACHE_DIR", str(tmp_path))
    g = torch.Generator().manual_seed(0)
    a = torch.randn(128, 64, generator=g).to(torch.bfloat16)
    b = torch.randn(128, 64, generator=g).to(torch.bfloat16)
    c_run, c_emu = (torch.zeros(128, 128, dtype=torch.bfloat16) for _ in range(2))
    choreo_py.interpret(str(WRONG), {"A": a, "B": b, "C": c_run}, target=target)
    choreo_py.emulate(str(WRONG), {"A": a, "B": b, "C": c_emu}, target=target)
    ref = torch.softmax(a.float() @ b.float().T, dim=1)
    assert (c_run.float() - ref).norm() / ref.norm() > 0.5  # wrong ...
    # ... in the same way (the two sum in different orders: a few bf16 roundings differ)
    assert (c_run.float() - c_emu.float()).abs().max() < 1e-3


@pytest.mark.parametrize("target", list(targets.NAMES))
def test_lowering_layout_gives_each_owner_the_targets_columns(target):
    """The backend's registers of each accumulator shape (acc_layout) hold, per row,
    exactly the columns the target's split (and so the interpreter) gives that owner."""
    rec = targets.get(target)
    backend = BACKENDS[target](rec)
    for m, split in rec.acc_rows.items():
        for n in (8, 16, 64, 128, 256):
            lay = backend.acc_layout(ir.Frag("acc", "f32", (m, n), "acc"), None)
            assert lay.row_lanes == split.lanes
            owner_of, _ = RowOwners.of(rec).layout(m, n)
            for t in range(split.owners):
                base = split.col_base(n, t)
                for r in set(lay.row_off):
                    held = [base + c for c, ro in zip(lay.col_off, lay.row_off) if ro == r]
                    assert held == list(split.columns(n, t))
                    assert set(torch.nonzero(owner_of == t).flatten().tolist()) == set(held)


@pytest.mark.parametrize("target", list(targets.NAMES))
def test_a_thread_s_own_fragments_have_one_owner(target):
    """Fragments of a `: thread` region are each thread's arrays (ir.per_thread_frags):
    a 64-row fold is the whole row's sum on every target, as the lowered loop computes."""
    x = torch.arange(64 * 8, dtype=torch.float32).reshape(64, 8)
    y = torch.zeros(64)
    choreo_py.interpret(str(CO / "thread_frag_row_sum.co"), {"X": x, "Y": y}, target=target)
    assert torch.equal(y, (x + 1).sum(dim=1))
