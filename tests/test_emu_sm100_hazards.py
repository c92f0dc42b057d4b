"""Regression tests of the two sm_100a lowering hazards the emulator work settled.

(a) Waits on the "full" events of tiles only tcgen05.mma reads (Q, the K/V rings, the
    GEMM ring) are the issuing thread's alone: a thread of the consumer role that falls
    behind could otherwise see a slot's mbarrier two phases on and wait forever.
(b) The A operand P@V reads from tensor memory (P) and that MMA's accumulator (O) sit
    at lane 0 for every consumer (CUTLASS's NonInterleaved TMEM-A path), never at the
    upper half-subpartition (lane 16) of the M=64 layout.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from choreo_py import targets
from choreo_py.driver import compile_file, ir_of_file
from choreo_py.lowering.sm100.lower_wait import mma_only_event
from choreo_py.lowering.sm100.target import Sm100Target
from choreo_py.runtime import build

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def ptx() -> dict:
    out = {}
    for name in ("flash_atten_causal", "gemm"):
        text = compile_file(str(EXAMPLES / f"{name}.co"), "pyptx", "sm_100a")
        out[name] = build.run_module(text).ptx()
    return out


def _kernel(name: str):
    return ir_of_file(str(EXAMPLES / f"{name}.co"), target="sm_100a").functions[0].kernels[0]


def _mma_role(kernel):
    t = Sm100Target(targets.get("sm_100a"))
    t.prepare(kernel)
    return t.role


def test_mma_only_events_of_the_seed():
    k = _kernel("flash_atten_causal")
    role = _mma_role(k)
    assert [e for e in ("qf", "kf", "vf", "ke", "ve") if mma_only_event(k, role, e)] == \
        ["qf", "kf", "vf"]


def test_an_event_whose_tile_is_also_stored_keeps_every_thread_waiting():
    # gemm's c_buf is written by mma.store and stored by TMA: no load publishes it, so it
    # never qualifies; its `full` ring (A and B tiles, MMA operands only) does.
    k = _kernel("gemm")
    role = _mma_role(k)
    assert mma_only_event(k, role, "full") and not mma_only_event(k, role, "empty")


def _blocks(text: str) -> list[str]:
    """Bodies of the issuer-only wait blocks."""
    return re.findall(r"@!%is_inst_leader bra (L_issuer_waited_\d+);\n(.*?)\n\1:", text, re.S)


def test_consumer_waits_on_full_barriers_are_issuer_only(ptx):
    text = ptx["flash_atten_causal"]
    blocks = _blocks(text)
    # qf, kf (prologue), kf and vf (loop), vf (last P@V)
    assert len(blocks) == 5
    assert all("mbarrier.try_wait.parity" in body for _, body in blocks)
    # Outside those blocks, the consumer role (after setmaxnreg.inc) waits only on the
    # MMA futures' mbarriers (%mma_bars) and on nothing the producer publishes.
    consumer = text[text.index("setmaxnreg.inc"):]
    outside = re.sub(r"@!%is_inst_leader bra (L_issuer_waited_\d+);\n.*?\n\1:", "", consumer,
                     flags=re.S)
    waits = re.findall(r"mbarrier\.try_wait\.parity\.shared\.b64 %p\d+, \[([^\]]+)\]", outside)
    assert waits and all(w.startswith("%mma_bars") for w in waits)


def test_gemm_ring_waits_are_issuer_only(ptx):
    assert len(_blocks(ptx["gemm"])) == 1


def test_ptx_reconverges_after_an_issuer_wait(ptx):
    for label in re.findall(r"\n(L_issuer_waited_\d+):\n", ptx["flash_atten_causal"]):
        after = ptx["flash_atten_causal"].split(f"\n{label}:\n", 1)[1]
        assert after.startswith("\tbar.warp.sync -1;")


def test_tmem_a_operand_and_its_accumulator_at_lane_0():
    plan = _kernel("flash_atten_causal").tmem  # the map pass tmem-plan recorded
    for frag in ("acc_s_cast", "acc_o"):
        assert {plan.region(frag, c).lane for c in (0, 1)} == {0}
    # both consumers' P and O are disjoint in columns (they share lanes)
    spans = sorted((r.col, r.col + r.ncols) for r in plan.regions
                   if r.frag in ("acc_s_cast", "acc_o"))
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_a_tile_also_read_by_the_threads_keeps_every_thread_waiting():
    # If the role also loads the K tile into registers (mma.load), kf no longer guards
    # only MMA operands: every thread must see the load complete.
    import copy

    from choreo_py import ir
    k = copy.deepcopy(_kernel("flash_atten_causal"))
    role = _mma_role(k)
    mma = next(s for s in ir.walk(role.body) if isinstance(s, ir.Mma) and s.b.base == "k_buf")
    role.body.append(ir.MmaLoad(frag="k_regs", src=copy.deepcopy(mma.b)))
    assert not mma_only_event(k, role, "kf") and mma_only_event(k, role, "vf")
