"""The emulator against the H200: the outputs saved by `bench/emu_calibrate.py --gpu`
(tests/data/emu_h200) must be reproduced within the calibration tolerance."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "emu_h200"
sys.path.insert(0, str(ROOT / "bench"))

import emu_calibrate  # noqa: E402

pytestmark = pytest.mark.emu


@pytest.mark.parametrize("name", sorted(emu_calibrate.CASES))
def test_emulator_reproduces_the_h200(name):
    file = DATA / f"{name}.pt"
    if not file.is_file():
        pytest.skip(f"no H200 data ({os.path.relpath(file, ROOT)}): run "
                    f"`python bench/emu_calibrate.py --gpu tests/data/emu_h200` on the H200")
    r = emu_calibrate.compare(name, torch.load(file))
    assert r["rel"] <= emu_calibrate.TOLERANCE, r
