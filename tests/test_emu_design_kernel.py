"""Calibration 2: the seed's hand-written Blackwell kernel (pyptx, restored from
../shared/seeds) traced to PTX and run in the emulator against SDPA
(bench/emu_design_kernel.py; docs/emulator_sm100.md, "Calibration 2").

Strict where the kernel is strict (its `dbg_scoreboard_ld=False` build, which
waits tcgen05.wait::ld before using loaded registers), relaxed where it relies
on what hardware tolerates (its defaults: registers read before wait::ld; and,
under a random schedule at S = 512, correction warps two phases behind on
PV_DONE)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from choreo_py.emu import RaceError, emulate_ptx
from choreo_py.emu.memory import SMEM_BASE

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "reference"))

import emu_design_kernel as design  # noqa: E402
import pyptx_fa_blackwell  # noqa: E402

pytestmark = [pytest.mark.emu, pytest.mark.slow]


@pytest.fixture(scope="module")
def traced():
    """Skips, saying why, when the seed is absent or pyptx cannot trace the restored kernel."""
    try:
        design.builder()
    except pyptx_fa_blackwell.SeedError as err:
        pytest.skip(str(err))
    try:
        design.design_launch(256, **design.STRICT_OPTIONS)
    except Exception as err:  # noqa: BLE001 - any tracing failure of an external kernel
        pytest.skip(f"pyptx cannot trace the restored kernel: {type(err).__name__}: {err}")
    return design


def test_restored_source_is_the_seed_with_its_indentation():
    try:
        source = pyptx_fa_blackwell.restore()
    except pyptx_fa_blackwell.SeedError as err:
        pytest.skip(str(err))
    seed = pyptx_fa_blackwell.seed_path().read_text(encoding="utf-8").split("\n")
    body = seed[pyptx_fa_blackwell.FIRST - 1:pyptx_fa_blackwell.LAST]
    assert [x.strip() for x in source.split("\n") if x.strip()] == [x.strip() for x in body
                                                                  if x.strip()]
    compile(source, "restored.py", "exec")
    assert "def build_flash_attention_blackwell(" in source


@pytest.mark.parametrize("schedule", ["round_robin", "random", "greedy"])
def test_design_kernel_strict_s256(traced, schedule):
    r = traced.run_case(256, traced.STRICT_OPTIONS, schedule, True)
    assert not r.error, r.error
    assert r.rel < traced.TOLERANCE and not r.notes


def test_design_kernel_defaults_read_ld_registers_before_wait_ld_strict_reports(traced):
    # the builder's default softmax stream relies on the register scoreboard
    ptx, launch = traced.design_launch(256)
    with pytest.raises(RaceError, match="before tcgen05.wait::ld"):
        emulate_ptx(ptx, launch, traced.inputs(256))


def test_design_kernel_s512_random_waiter_behind_strict_reports_relaxed_passes(traced):
    strict = traced.run_case(512, traced.STRICT_OPTIONS, "random", True, seed=0)
    assert "two or more phases behind" in strict.error
    pv_done = traced._MODULE[0].BAR_PV_DONE + SMEM_BASE  # the barrier, stage 0 or 1
    assert f"mbarrier at shared {pv_done:#x}" in strict.error or \
        f"mbarrier at shared {pv_done + 8:#x}" in strict.error
    relaxed = traced.run_case(512, traced.STRICT_OPTIONS, "random", False, seed=0)
    assert not relaxed.error and relaxed.rel < traced.TOLERANCE
    assert relaxed.notes and all("two or more phases behind" in n for n in relaxed.notes)


def test_design_kernel_defaults_s512_random_relaxed(traced):
    # f32x2 polynomial exp2 on four pairs per chunk, loads read without wait::ld, and
    # correction warps behind on PV_DONE: all three in one run (the seed is one whose
    # random schedule puts a waiter two phases behind; the tcgen05 fence rules shifted the
    # schedule, and seed 1 no longer does)
    r = traced.run_case(512, {}, "random", False, seed=0)
    assert not r.error, r.error
    assert r.rel < traced.TOLERANCE
    assert any("tcgen05.wait::ld" in n for n in r.notes)
    assert any("two or more phases behind" in n for n in r.notes)
