"""Races decided by happens-before (choreo_py/emu/hb.py), reported under every schedule.

Each broken kernel is built from an example at test time, with the one instruction that
orders two accesses deleted (or its parity flipped), found by pattern; the intact PTX is
covered by the example tests (test_emu_sm100_examples.py, test_flash_atten_blackwell*.py).
Shared memory and tensor memory; bar.sync, mbarrier phases, bulk-store wait_group.read.
"""
from __future__ import annotations

import dataclasses
import functools
import re
import sys
from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py.emu import RaceError, emulate_ptx
from choreo_py.emu.api import run_spec
from choreo_py.emu.launch import from_co

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_emu_core import MBAR_BODY, MBAR_REGS, kernel, launch  # noqa: E402

pytestmark = pytest.mark.emu

ROOT = Path(__file__).resolve().parents[1]
SCHEDULES = ("greedy", "round_robin", "reverse", "random")
NOT_ORDERED = "nothing orders the two accesses"


# ---------------------------------------------------------------- hand-written kernels
def _exchange(barrier: str) -> str:
    """64 threads: each stores its id, then reads the one of thread 63 - tid (other warp)."""
    return ("\tmov.u32 %sm, smem;\n\tshl.b32 %v, %tid, 2;\n\tadd.u32 %v, %v, %sm;\n"
            f"\tst.shared.u32 [%v], %tid;\n{barrier}"
            "\txor.b32 %w, %tid, 63;\n\tshl.b32 %w, %w, 2;\n\tadd.u32 %w, %w, %sm;\n"
            "\tld.shared.u32 %w, [%w];\n\tst.global.u32 [%b64], %w;")


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_shared_exchange_without_its_barrier_is_a_race_under_every_schedule(schedule):
    x, y = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    with pytest.raises(RaceError, match=NOT_ORDERED) as err:
        emulate_ptx(kernel(_exchange(""), "\t.reg .u32 %sm, %v, %w;"), launch(x, y, 64, smem=256),
                    {"X": x, "Y": y}, schedule=schedule)
    text = err.value.render()
    assert "st.shared" in text and "ld.shared" in text and "warp 0" in text and "warp 1" in text
    emulate_ptx(kernel(_exchange("\tbar.sync 1, 64;\n"), "\t.reg .u32 %sm, %v, %w;"),
                launch(x, y, 64, smem=256), {"X": x, "Y": y}, schedule=schedule)
    assert torch.equal(y, torch.arange(64, dtype=torch.int32) ^ 63)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_read_without_the_mbarrier_wait_is_a_race_under_every_schedule(schedule):
    x, y = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    body = MBAR_BODY.replace("ARRIVE", "mbarrier.arrive.shared.b64 %st, [%sm];")
    body = re.sub(r"WAIT:\n.*\n.*bra WAIT;\n", "", body)
    with pytest.raises(RaceError, match=NOT_ORDERED):
        emulate_ptx(kernel(body, MBAR_REGS), launch(x, y, 64, smem=2048), {"X": x, "Y": y},
                    schedule=schedule, seed=5)


BULK = """.version 8.5
.target sm_90a
.address_size 64
.extern .shared .align 128 .b8 smem[];

.visible .entry k(
\t.param .align 64 .b8 tmap_Y[128]
)
{
\t.reg .u32 %tid, %sm, %v, %w;
\t.reg .pred %p, %q;
\tmov.u32 %tid, %tid.x;
\tmov.u32 %sm, smem;
\tshl.b32 %v, %tid, 2;
\tadd.u32 %v, %v, %sm;
\tst.shared.u32 [%v], %tid;
\tfence.proxy.async.shared::cta;
\tbar.sync 0;
\tsetp.eq.u32 %p, %tid, 0;
\t@%p cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [tmap_Y, {0}], [%sm];
\t@%p cp.async.bulk.commit_group;
\t@%p cp.async.bulk.wait_group.read 0;
BARRIER\tsetp.ge.u32 %q, %tid, 32;
\tmov.u32 %w, 7;
\t@%q st.shared.u32 [%v], %w;
\tret;
}
"""
BULK_LAUNCH = {"grid": [1, 1, 1], "block": [64, 1, 1], "shared_bytes": 256,
               "params": [{"name": "tmap_Y", "tmap": "Y", "box": [64], "swizzle": 0}],
               "tensors": {"Y": {"dtype": "s32", "shape": [64]}}}


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_bulk_store_source_is_released_only_to_the_waiting_thread(schedule):
    # Thread 0's wait_group.read retires the store's read of its source for thread 0; warp 1
    # may overwrite the source only after synchronising with it (the bar.sync after the
    # wait). Without it, a race whichever order the warps run in (greedy used to pass it).
    y = torch.zeros(64, dtype=torch.int32)
    with pytest.raises(RaceError, match="race"):
        emulate_ptx(BULK.replace("BARRIER", ""), BULK_LAUNCH, {"Y": y}, schedule=schedule)
    emulate_ptx(BULK.replace("BARRIER", "\tbar.sync 0;\n"), BULK_LAUNCH, {"Y": y},
                schedule=schedule)
    assert torch.equal(y, torch.arange(64, dtype=torch.int32))


# ---------------------------------------------------------------- a .co program
def test_layernorm_missing_barrier_is_a_race_in_the_emulator_too():
    path = str(ROOT / "tests" / "co" / "layernorm_missing_barrier.co")
    x = torch.randn(2, 256).bfloat16()
    g, b = torch.ones(256).bfloat16(), torch.zeros(256).bfloat16()
    lib = choreo_py.emulate_program(path, target="sm_90a", schedule="greedy")
    with pytest.raises(RaceError, match=NOT_ORDERED) as err:
        lib.layernorm(x, g, b, torch.zeros(2, 256).bfloat16())
    assert "(layernorm_missing_barrier.co:41)" in err.value.where       # red[t] = v
    assert "(layernorm_missing_barrier.co:28)" in err.value.render()    # mean = red[0] / N


# ---------------------------------------------------------------- example mutants (sm_100a)
@functools.lru_cache(maxsize=None)
def _spec(path: str, sms=None):
    return from_co(str(ROOT / path), "sm_100a", defines={"NUM_SMS": str(sms)} if sms else None)


def _run(spec, ptx: str, s: int, schedule: str) -> None:
    g = torch.Generator().manual_seed(0)
    t = {n: torch.randn(1, s, 1, 128, generator=g).bfloat16() for n in "QKV"}
    t["O"] = torch.full((1, s, 1, 128), float("nan")).bfloat16()
    run_spec(dataclasses.replace(spec, ptx=ptx), t, schedule=schedule, strict=True)


def _delete(ptx: str, pattern: str) -> str:
    out, n = re.subn(pattern, r"\1", ptx)
    assert n == 1, pattern
    return out


def _flip(ptx: str, register: str, after: str) -> str:
    """The parity operand `register` of the try_wait followed by `after`, flipped."""
    pat = (r"(\$_mbar_wait_\d+:\n\tmbarrier\.try_wait\.parity\.shared\.b64 %p\d+, \[[^\]]+\], )"
           rf"({register});(\n\t@!%p\d+ bra \$_mbar_wait_\d+;\n(?:.*\n){{0,3}}.*{after})")
    m = re.search(pat, ptx)
    assert m, register
    out = ptx[:m.start()] + f"\txor.b32 %flip_par, {m.group(2)}, 1;\n" + m.group(1) + \
        "%flip_par;" + m.group(3) + ptx[m.end():]
    return out.replace("{\n", "{\n\t.reg .b32 %flip_par;\n", 1)


CAUSAL = "examples/flash_atten_causal.co"
BLACKWELL = "examples/flash_atten_blackwell.co"
# (name, example, NUM_SMS, the mutation) - the reproducers of the emulator's strict mode
# passing wrong PTX; names as the sites of the mutation search.
MUTANTS = {
    # the bar.sync of the O staging's writers before the leader's TMA store of O
    "site47_no_bar_sync_before_tma_store": (CAUSAL, None, lambda p: _delete(
        p, r"(fence\.proxy\.async\.shared::cta;\n)\tbar\.sync 4, 256;\n(?=\tmov\.b64 %tmap_O)")),
    # the softmax's wait for the correction to have read sc0 / sc1, parity flipped
    "site245_flip_sc0_empty": (BLACKWELL, 1, lambda p: _flip(
        p, r"%sc0_empty_phase_\d+", r"st\.shared\.f32 \[%sc0_row\+\d+\], %l0_0")),
    "site248_flip_sc1_empty": (BLACKWELL, 1, lambda p: _flip(
        p, r"%sc1_empty_phase_\d+", r"st\.shared\.f32 \[%sc1_row\+\d+\], %l1_0")),
    # the correction's wait for sc0, parity flipped
    "site249_flip_sc0_full": (BLACKWELL, 1, lambda p: _flip(p, r"%sc0_full_phase", r"")),
    # the correction warpgroup's bar.sync before its leader's arrival on sc0/sc1_empty
    "site280_del_bar_sync": (BLACKWELL, 1, lambda p: _delete(
        p, r"(L_row_vote_skip_0:\n.*\n\ttcgen05\.fence::before_thread_sync;\n"
           r"\tadd\.u32 %inst_bar_\d+, %r_, 1;\n)\tbar\.sync %inst_bar_\d+, 128;\n")),
    "site282_del_bar_sync": (BLACKWELL, 1, lambda p: _delete(
        p, r"(L_row_vote_skip_1:\n.*\n\ttcgen05\.fence::before_thread_sync;\n"
           r"\tadd\.u32 %inst_bar_\d+, %r_, 1;\n)\tbar\.sync %inst_bar_\d+, 128;\n")),
}
# In these orders the flipped wait of site 249 makes the correction wait for a phase that
# never comes before the racing accesses happen: a deadlock report (also a fault, exit 1).
DEADLOCKS = {("site249_flip_sc0_full", s) for s in ("greedy", "reverse", "random")}
# S = 128 (one KV tile) unless the mutant needs a second tile for both accesses to happen
SIZES = {"site249_flip_sc0_full": 256}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_example_mutants_are_races_under_every_schedule(name):
    path, sms, mutate = MUTANTS[name]
    spec = _spec(path, sms)
    ptx = mutate(spec.ptx)
    for schedule in SCHEDULES:
        if (name, schedule) in DEADLOCKS:
            with pytest.raises(choreo_py.emu.DeadlockError):
                _run(spec, ptx, SIZES.get(name, 128), schedule)
            continue
        with pytest.raises(RaceError, match="race") as err:
            _run(spec, ptx, SIZES.get(name, 128), schedule)
        assert ".co:" in err.value.render(), schedule   # both accesses, PTX and .co lines
