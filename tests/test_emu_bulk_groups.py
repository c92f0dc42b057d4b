"""Bulk async-groups of cp.async.bulk stores (PTX ISA, cp.async.bulk.commit_group and
cp.async.bulk.wait_group): a wait covers committed groups only, and the CTA must not exit
before its stores' source reads are retired."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from choreo_py.emu import RaceError, emulate_ptx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_emu_happens_before import BULK, BULK_LAUNCH  # noqa: E402

pytestmark = pytest.mark.emu

SAFE = BULK.replace("BARRIER", "\tbar.sync 0;\n")
COMMIT = "\t@%p cp.async.bulk.commit_group;\n"
WAIT = "\t@%p cp.async.bulk.wait_group.read 0;\n"
OVERWRITE = "\t@%q st.shared.u32 [%v], %w;\n"


def _run(ptx: str, **kw):
    y = torch.zeros(64, dtype=torch.int32)
    emulate_ptx(ptx, BULK_LAUNCH, {"Y": y}, **kw)
    return y


def test_a_committed_and_waited_store_runs():
    assert torch.equal(_run(SAFE), torch.arange(64, dtype=torch.int32))


def test_a_wait_group_after_an_uncommitted_store_is_reported_there():
    with pytest.raises(RaceError) as err:
        _run(SAFE.replace(COMMIT, ""))
    text = err.value.render()
    assert "cp.async.bulk.wait_group.read 0 waits for committed bulk async-groups only" in text
    assert "this: kernel.ptx:" in text and "with: kernel.ptx:" in text
    assert text.startswith("kernel.ptx:2"), text


def test_exiting_before_the_wait_group_is_reported():
    with pytest.raises(RaceError, match="the CTA exits while the TMA store at kernel.ptx:"
                                        r"\d+ \(warp 0\) may still read its shared-memory"):
        _run(SAFE.replace(WAIT, "").replace(OVERWRITE, ""))


def test_relaxed_mode_notes_the_uncommitted_store_and_runs():
    from choreo_py.emu.api import EmuStats
    stats = EmuStats()
    y = _run(SAFE.replace(COMMIT, "").replace(OVERWRITE, ""),
             strict=False, stats=stats)
    assert torch.equal(y, torch.arange(64, dtype=torch.int32))
    assert any("not committed" in n for n in stats.notes), stats.notes
