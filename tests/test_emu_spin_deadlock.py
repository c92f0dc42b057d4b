"""A wait loop whose head is not the wait itself (pure register operations before the
try_wait, as the mutation gate's flipped parity inserts) parks the warp like the plain
`try_wait; @!p bra` loop, so a wait that never completes is a located deadlock report,
not a spin to the step limit."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from choreo_py.emu import DeadlockError, emulate_ptx

pytestmark = pytest.mark.emu

ROOT = Path(__file__).resolve().parents[1]

# A producer (warp 1) waits on EMPTY for the phase before the first (parity 1: complete
# at once), stores, arrives on FULL; the consumer (warp 0) waits on FULL, loads, arrives
# on EMPTY. Both loops recompute the parity at their head. FLIP xors the producer's
# parity: waiting for EMPTY's phase 0, which only the consumer completes, after FULL.
PTX = """.version 8.5
.target sm_100a
.address_size 64
.extern .shared .align 1024 .b8 smem[];

.visible .entry k(
\t.param .u64 p_y
)
{
\t.reg .u64 %py, %b64;
\t.reg .u32 %tid, %off, %sm, %w, %v, %par, %mp;
\t.reg .pred %p, %q;
\t.reg .b64 %st;
\tld.param.u64 %py, [p_y];
\tmov.u32 %tid, %tid.x;
\tshl.b32 %off, %tid, 2;
\tcvt.u64.u32 %b64, %off;
\tadd.s64 %b64, %py, %b64;
\tmov.u32 %sm, smem;
\tsetp.eq.u32 %p, %tid, 0;
\t@%p mbarrier.init.shared::cta.b64 [%sm], 32;
\t@%p mbarrier.init.shared::cta.b64 [%sm+8], 32;
\tfence.mbarrier_init.release.cluster;
\tbar.sync 0;
\tshr.u32 %w, %tid, 5;
\tsetp.eq.u32 %p, %w, 1;
\t@%p bra PRODUCER;
\tmov.u32 %par, 0;
WAIT_FULL:
\tand.b32 %mp, %par, 1;
\tmbarrier.try_wait.parity.shared::cta.b64 %q, [%sm], %mp;
\t@!%q bra WAIT_FULL;
\tld.shared.u32 %v, [%sm+64];
\tst.global.u32 [%b64], %v;
\tmbarrier.arrive.shared::cta.b64 %st, [%sm+8];
\tbra.uni END;
PRODUCER:
\tmov.u32 %par, 1;
WAIT_EMPTY:
\txor.b32 %mp, %par, FLIP;
\tmbarrier.try_wait.parity.shared::cta.b64 %q, [%sm+8], %mp;
\t@!%q bra WAIT_EMPTY;
\tsetp.eq.u32 %p, %tid, 32;
\tmov.u32 %v, 4242;
\t@%p st.shared.u32 [%sm+64], %v;
\tmbarrier.arrive.shared::cta.b64 %st, [%sm];
END:
\tret;
}
"""
LAUNCH = {"grid": [1, 1, 1], "block": [64, 1, 1], "shared_bytes": 2048,
          "params": [{"name": "p_y", "ptr": "Y"}],
          "tensors": {"Y": {"dtype": "s32", "shape": [64]}}}


def _run(flip: int, **kw):
    y = torch.zeros(64, dtype=torch.int32)
    emulate_ptx(PTX.replace("FLIP", str(flip)), LAUNCH, {"Y": y}, **kw)
    return y


@pytest.mark.parametrize("schedule", ["round_robin", "reverse", "greedy", "random"])
def test_unflipped_loops_with_a_head_still_run(schedule):
    assert (_run(0, schedule=schedule, seed=3)[:32] == 4242).all()


@pytest.mark.parametrize("schedule", ["round_robin", "greedy"])
def test_flipped_parity_is_a_deadlock_located_at_the_wait(schedule):
    # Without the loop-head rule the producer spins to the step limit instead.
    with pytest.raises(DeadlockError) as err:
        _run(1, schedule=schedule, step_limit=200_000)
    text = err.value.render()
    lines = PTX.splitlines()
    full = next(n for n, t in enumerate(lines, 1) if "[%sm], %mp" in t)
    empty = next(n for n, t in enumerate(lines, 1) if "[%sm+8], %mp" in t)
    # located at the first waiting warp's wait (the consumer's), every warp listed
    assert text.startswith(f"kernel.ptx:{full}: deadlock: "), text
    assert "(the first: warp 0 at mbarrier.try_wait.parity.shared::cta.b64 %q, [%sm]" in text
    assert f"warp 1: waits on mbarrier at shared 0x408 (phase 0, parity 0; 0/32 " in text
    assert f"for parity 0 at kernel.ptx:{empty}: mbarrier.try_wait" in text


def test_a_loop_head_that_rereads_what_it_writes_is_not_parked():
    # `xor %par, %par, 1` toggles at every pass: the loop is not a pure poll, so it is
    # executed as written (the wait completes on the second pass).
    ptx = PTX.replace("FLIP", "1").replace("xor.b32 %mp, %par, 1;",
                                           "xor.b32 %par, %par, 1;\n\tmov.u32 %mp, %par;")
    y = torch.zeros(64, dtype=torch.int32)
    emulate_ptx(ptx, LAUNCH, {"Y": y})
    assert (y[:32] == 4242).all()


def _causal_flip(k: int):
    sys.path.insert(0, str(ROOT / "bench"))
    import mutate_ptx as gate
    path, target, defines, _ = gate.EXAMPLES["causal"]
    spec = gate.from_co(str(ROOT / path), target, defines=defines)
    found = [(i, m) for c, _, i, m in gate.sites(spec.ptx) if c == "flip_parity"]
    i, mutate = found[k]
    lines = mutate(spec.ptx.splitlines(), i)
    line = next(n for n, t in enumerate(lines, 1) if "try_wait" in t and "%mut_par" in t)
    return gate, spec, "\n".join(lines) + "\n", line


def test_flipped_parity_in_the_causal_example_is_a_located_deadlock():
    """The first K-slot wait of the producer, its parity flipped: it waits for a phase no
    one completes (the gate's flip_parity timed out at 120 s here before)."""
    gate, spec, ptx, line = _causal_flip(0)
    outcome, detail = gate.run_one(spec, ptx, True, 128, 1, "round_robin", 60)
    assert outcome == "caught" and detail.startswith("DeadlockError: "), detail
    assert f".ptx:{line} (flash_atten_causal.co:" in detail, detail
