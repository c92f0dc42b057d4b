"""The TMEM column plan (the IR pass choreo_py/passes/tmem_plan.py) on the seed and on variants
of it; the map it records is printed, read back and verified (tests/test_tmem_map.py)."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from choreo_py import ir, targets
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import ir_of_file
from choreo_py.lowering.sm100 import descriptors as d
from choreo_py.passes import tmem_plan

SEED = Path(__file__).resolve().parents[1] / "examples" / "flash_atten_causal.co"
SM100 = targets.get("sm_100a")


def plan_tmem(kernel: ir.Kernel) -> ir.TmemMap:
    """The pass's plan of `kernel` as it stands now (not the map the pipeline recorded)."""
    return tmem_plan.plan(kernel, SM100)


@pytest.fixture(scope="module")
def seed_kernel() -> ir.Kernel:
    return ir_of_file(str(SEED), target="sm_100a").functions[0].kernels[0]


def _variant(kernel: ir.Kernel, **shapes) -> ir.Kernel:
    k = copy.deepcopy(kernel)
    for name, shape in shapes.items():
        k.frag(name).shape = shape
    return k


def test_seed_plan(seed_kernel):
    plan = plan_tmem(seed_kernel)
    assert plan.role == (1, 2)
    assert seed_kernel.tmem == plan  # what the pipeline recorded on the IR
    got = [(r.frag, r.instance, r.kind, r.layout, r.lane, r.col, r.ncols)
           for r in plan.regions]
    # S (f32, 128 columns) of the two M=64 consumers shares columns at lane alignments
    # 0 and 16 (layout F). P (bf16 packed two per column: 64) is the TMEM A operand of
    # P@V, so P and O, the accumulator of that MMA, stay at lane 0 with their own
    # columns per consumer (CUTLASS's NonInterleaved TMEM-A allocation).
    assert got == [
        ("acc_s", 0, "acc", "F", 0, 0, 128), ("acc_s", 1, "acc", "F", 16, 0, 128),
        ("acc_o", 0, "acc", "F", 0, 128, 128), ("acc_o", 1, "acc", "F", 0, 256, 128),
        ("acc_s_cast", 0, "operand", "F", 0, 384, 64),
        ("acc_s_cast", 1, "operand", "F", 0, 448, 64),
    ]
    assert (plan.used, plan.alloc) == (512, 512)
    assert plan.staged == {}


def test_seed_region_addresses(seed_kernel):
    plan = plan_tmem(seed_kernel)
    # Offsets from the allocated base: lane alignment in bits 31-16, column in 15-0.
    def offset(frag, inst):
        r = plan.region(frag, inst)
        return d.tmem_addr(r.lane, r.col)
    assert offset("acc_s", 0) == 0x0000_0000
    assert offset("acc_s", 1) == 0x0010_0000
    assert offset("acc_o", 1) == 0x0000_0100
    assert offset("acc_s_cast", 1) == 0x0000_01C0
    # Consumer 1, warp 3 loads its S rows from lane 96 + 16 = 112, column 0, and its
    # O rows from lane 96, column 256.
    r = plan.region("acc_s", 1)
    assert d.ld_base_addr(64, 3, r.lane, r.col) == 0x0070_0000
    r = plan.region("acc_o", 1)
    assert d.ld_base_addr(64, 3, r.lane, r.col) == 0x0060_0100
    with pytest.raises(KeyError):
        plan.region("acc_s", 2)


def test_seed_region_descriptions(seed_kernel):
    plan = plan_tmem(seed_kernel)
    text = [tmem_plan.describe(r, seed_kernel.frag(r.frag)) for r in plan.regions]
    assert "acc_s[1] f32[64, 128] layout F lanes+16 cols 0..127 (128)" in text
    assert "acc_s_cast[1] bf16[64, 128] layout F lanes+0 cols 448..511 (64)" in text


def test_m128_instances_take_their_own_columns(seed_kernel):
    # With 128-row consumers (layout D) nothing shares columns: 2 x (128 + 128 + 64) = 640.
    k = _variant(seed_kernel, acc_s=(128, 128), acc_o=(128, 128), acc_s_cast=(128, 128))
    with pytest.raises(ChoreoError) as e:
        plan_tmem(k)
    msg = e.value.message
    assert "over-subscribed" in msg and "640 columns" in msg
    for part in ("acc_s[0]", "acc_s[1]", "acc_o[1]", "acc_s_cast[1]", "cols 512..575"):
        assert part in msg


def test_wide_accumulators_oversubscribe(seed_kernel):
    # N = 256: S 256 (shared by lane halves) + O 2 x 256 + P 2 x 128 = 1024 columns.
    k = _variant(seed_kernel, acc_s=(64, 256), acc_o=(64, 256), acc_s_cast=(64, 256))
    with pytest.raises(ChoreoError, match=r"need 1024 columns, more than the 512"):
        plan_tmem(k)


def test_single_m128_instance_fits(seed_kernel):
    k = _variant(seed_kernel, acc_s=(128, 128), acc_o=(128, 128), acc_s_cast=(128, 128))
    for s in ir.walk(k.body):
        if isinstance(s, ir.Role) and s.members == (1, 2):
            s.members = (1,)
    plan = plan_tmem(k)
    assert [(r.frag, r.layout, r.lane, r.col) for r in plan.regions] == [
        ("acc_s", "D", 0, 0), ("acc_o", "D", 0, 128), ("acc_s_cast", "D", 0, 256)]
    assert plan.alloc == 512


def test_small_plan_rounds_to_power_of_two(seed_kernel):
    k = _variant(seed_kernel, acc_s=(64, 32), acc_o=(64, 16), acc_s_cast=(64, 32))
    plan = plan_tmem(k)
    # regions start on 32-column boundaries: S 0..31 (both lane halves), O 32..47 and
    # 64..79, P 96..111 and 128..143 (lane 0, one block per consumer)
    assert [r.col for r in plan.regions if r.instance == 0] == [0, 32, 96]
    assert [r.col for r in plan.regions if r.instance == 1] == [0, 64, 128]
    assert (plan.used, plan.alloc) == (144, 256)


def test_operand_not_k_major_is_staged(seed_kernel):
    k = copy.deepcopy(seed_kernel)
    for s in ir.walk(k.body):
        if isinstance(s, ir.Mma) and s.a == "acc_s_cast":
            s.layout = "col.col"
    plan = plan_tmem(k)
    assert "acc_s_cast" in plan.staged and "K-major" in plan.staged["acc_s_cast"]
    assert {r.frag for r in plan.regions} == {"acc_s", "acc_o"}
    assert plan.used == 256 and plan.alloc == 256


def test_bad_accumulator_shape_is_recorded_not_raised(seed_kernel):
    # tcgen05 has no layout for 32 rows: the map says why (the backend refuses with it);
    # the program itself is valid and the interpreter runs it
    k = _variant(seed_kernel, acc_s=(32, 128))
    plan = plan_tmem(k)
    assert plan.regions == [] and "'acc_s'" in plan.refused and "M must be 64 or 128" in plan.refused
    assert plan.loc == k.frag("acc_s").loc


def test_kernel_without_mma(seed_kernel):
    k = copy.deepcopy(seed_kernel)
    k.body = []
    assert plan_tmem(k) is None
