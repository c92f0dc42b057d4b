"""The persistent causal example (examples/flash_atten_persistent.co) on the CPU.

Interpreted against float32 SDPA at small shapes. `-D NUM_SMS=3` shrinks the
grid to three blocks, so that every block walks several work items (pairs of
query tiles) and its K/V/Q rings continue across items; the default grid
(132 blocks) is run too, where most blocks find no work.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from choreo_py import cli, driver, frontend
from choreo_py.diagnostics import take_warnings
from choreo_py.interp import RunStats
from choreo_py.passes import pipeline_check

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fa_helpers import rel, run, sdpa  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PERSISTENT = ROOT / "examples" / "flash_atten_persistent.co"
SEED = ROOT / "examples" / "flash_atten_causal.co"
SCHEDULES = [("round_robin", 0), ("random", 1), ("random", 2)]


def items_per_block(b, h, s, sms):
    """The items (tile pairs) each block runs, as the example computes them."""
    tiles = -(-s // 128)
    pairs = -(-tiles // 2)
    n = pairs * h * b
    return [len(range(blk, n, sms)) for blk in range(sms)]


# (B, H, S): even and odd tile counts (an odd count leaves a middle tile alone),
# ragged S (TMA zero-fill and store clipping), one and several heads and batches.
SHAPES = [(1, 2, 384), (2, 1, 200), (1, 1, 72), (1, 3, 640), (2, 2, 256), (1, 1, 1000)]


@pytest.mark.parametrize("b,h,s", SHAPES)
def test_three_blocks_walk_several_items_and_match_sdpa(b, h, s):
    assert max(items_per_block(b, h, s, 3)) >= 1
    q, k, v, o = run(PERSISTENT, b, h, s, sms=3)
    assert not torch.isnan(o).any()
    assert rel(o, sdpa(q, k, v)) < 1e-2


def test_several_items_per_block_are_exercised():
    # 1 x 3 x 640: 5 tiles -> 3 pairs per head (the third is the middle tile
    # alone), 9 items over 3 blocks: 3 items and 5 query tiles per block.
    assert items_per_block(1, 3, 640, 3) == [3, 3, 3]
    assert items_per_block(1, 1, 1000, 3) == [2, 1, 1]


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_schedules_agree_with_sdpa(schedule, seed):
    q, k, v, o = run(PERSISTENT, 2, 2, 384, sms=3, schedule=schedule, seed=seed)
    assert rel(o, sdpa(q, k, v)) < 1e-2


def test_default_grid_of_132_blocks():
    stats = RunStats()
    q, k, v, o = run(PERSISTENT, 1, 2, 256, stats=stats)
    assert stats.blocks == 132
    assert rel(o, sdpa(q, k, v)) < 1e-2


@pytest.mark.parametrize("b,h,s", [(1, 2, 384), (2, 1, 200)])
def test_same_arithmetic_as_the_seed(b, h, s):
    # Each query tile is computed by the same statements in the same order as in
    # the seed; only the schedule of tiles over blocks differs.
    o_persistent = run(PERSISTENT, b, h, s, sms=3)[3]
    o_seed = run(SEED, b, h, s)[3]
    assert torch.equal(o_persistent, o_seed)


def test_check_and_strict_build_are_clean(capsys):
    take_warnings()
    assert cli.main(["check", str(PERSISTENT)]) == 0
    assert "warning" not in capsys.readouterr().err
    for defines in (None, {"NUM_SMS": "3"}):
        program = frontend.parse_file(str(PERSISTENT), defines=defines)
        kernel = driver.build_ir(program, target="sm_90a").functions[0].kernels[0]
        n = 3 if defines else 132
        assert [(g.var, g.extent.value) for g in kernel.grid] == [("blk", n)]
        assert pipeline_check.check_kernel(kernel) > 20


def test_producer_store_variant_matches_the_seed():
    # bench/variants/: the producer stores each tile; same arithmetic as the seed.
    variant = ROOT / "bench" / "variants" / "flash_atten_persistent_producer_store.co"
    for b, h, s in [(1, 3, 640), (2, 1, 200)]:
        o_variant = run(variant, b, h, s, sms=3)[3]
        o_seed = run(SEED, b, h, s)[3]
        assert torch.equal(o_variant, o_seed)
