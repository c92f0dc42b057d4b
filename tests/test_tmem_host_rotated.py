"""The rotated form of the P-over-S loop proof (passes/tmem_host_rotated.py): the MMA role
of examples/flash_atten_blackwell.co issues an item's first QKs before its KV loop,
PV0(t), QK0(t+1), PV1(t), QK1(t+1) a trip, and its last PVs after the loop (FA4's order).
The plan admits it (P0 in S0's columns, P1 in S1's: tests/test_flash_atten_blackwell.py
checks the map, the order in the PTX, and the results in the interpreter and the strict
emulator). Each variant the proof cannot prove is refused, located at P's declaration,
naming the statement in the way."""
from __future__ import annotations

from pathlib import Path

import pytest

from choreo_py import cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "flash_atten_blackwell.co"

QK0_NEXT = ("              wait kf.at(order + 1);\n"
            "              mma.fill s0, 0.0f;                // the next step's S0 over P0, read by pv0\n"
            "              qk0 = mma.row.row.async s0, q0_shared, k_buf[next];\n"
            "              trigger s0_full.at(order + 1) after qk0;\n")
LOOP_TOP = "              wait vf.at(order);\n              wait p0_full.at(order);           // P0 is over S0\n"


def _refused(tmp_path, capsys, old: str, new: str) -> str:
    src = EXAMPLE.read_text()
    assert src.count(old) == 1
    path = tmp_path / "v.co"
    path.write_text(src.replace(old, new))
    rc = cli.main(["compile", str(path), "--target", "sm_100a", "--emit", "ir",
                   "-o", str(tmp_path / "x.txt")])
    err = capsys.readouterr().err
    decl = next(i for i, ln in enumerate(path.read_text().splitlines())
                if "p0 : block in s0" in ln) + 1
    assert rc == 1 and f"v.co:{decl}:33: error: 'p0' cannot lie in the columns of 's0': " in err, err
    return err


def test_the_next_qk_before_this_pv_is_refused(tmp_path, capsys):
    """QK0(t+1) issued before PV0(t) would overwrite P0(t) before the PV reads it."""
    src = EXAMPLE.read_text()
    assert src.count(QK0_NEXT) == 1 and src.count(LOOP_TOP) == 1
    path = tmp_path / "w.co"
    path.write_text(src.replace(QK0_NEXT, "").replace(LOOP_TOP, QK0_NEXT + LOOP_TOP))
    rc = cli.main(["compile", str(path), "--target", "sm_100a", "--emit", "ir",
                   "-o", str(tmp_path / "y.txt")])
    err = capsys.readouterr().err
    assert rc == 1 and "the rotated MMA loop's statements naming 's0' or 'p0'" in err and \
        "are not: the MMA reading 'p0', then 'mma.fill s0, 0' at once followed by the MMA " \
        "into 's0' (the next step's)" in err, err


@pytest.mark.parametrize("old, new, why", [
    ("              trigger s0_full.at(order + 1) after qk0;\n",
     "              trigger s0_full.at(order) after qk0;\n",
     "names 's0_full' of another step than the writer's, in the rotated order"),
    ("            trigger s0_full.at(order) after qk0_first;\n",
     "            trigger s0_full.at(order + 1) after qk0_first;\n",
     "names 's0_full' of another step than the writer's, in the rotated order"),
    ("            trigger ve.at(order++) after pv1_last;\n",
     "            trigger ve.at(order) after pv1_last;\n",
     "has no step counter: a 'mutable' counter from 0 at the role's top level, increased "
     "once per trip and once after the loop"),
    ("            wait p0_full.at(order);\n            wait o0_ready.at(order);\n            if (kv_tiles",
     "            wait p0_full.at(order + 1);\n            wait o0_ready.at(order);\n            if (kv_tiles",
     "names 'p0_full' of another step than the writer's"),
])
def test_what_the_rotated_proof_cannot_prove_is_refused(tmp_path, capsys, old, new, why):
    assert why in _refused(tmp_path, capsys, old, new)
