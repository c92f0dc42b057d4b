"""FlashAttention-4's CuTe-DSL forward kernel (sm_100a, 1-CTA, causal) in the emulator, against
torch SDPA (bench/fa4_emu.py: its compile and launch). Needs flash-attn-4 and the CuTe DSL,
which CI does not install; the parser rules FA4's PTX needed are tested without them."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import fa4_emu  # noqa: E402
from choreo_py.emu.ptx_parse import parse_ptx  # noqa: E402
from choreo_py.emu.report import RaceError  # noqa: E402

_PTX = []


def _fa4_ptx():
    why = fa4_emu.fa4_available()
    if why:
        pytest.skip(why)
    if not _PTX:
        _PTX.append(fa4_emu.compile_fa4(arch="sm_100a", causal=True, b=1, h=1, s=256))
    return _PTX[0]


def test_inline_asm_blocks_scope_their_labels():
    """Two inline-asm blocks reuse DONE: each branch reaches its own block's label."""
    ptx = """
.version 9.4
.target sm_100a
.visible .entry k(.param .u64 p)
{
.reg .pred %p<2>;
{
.reg .pred P1;
LAB:
bra.uni DONE;
DONE:
}
mov.u32 %r0, 1;
{
LAB:
bra.uni DONE;
DONE:
}
ret;
}
""".replace("mov.u32 %r0, 1;", "elect.sync _|%p0, -1;")
    k = parse_ptx(ptx)
    jumps = [i for i in k.insts if i.opcode == "bra.uni"]
    targets = [k.labels[i.operands[0].value] for i in jumps]
    assert targets == [1, 3]  # the instruction after each block's own DONE


@pytest.mark.slow
@pytest.mark.emu
@pytest.mark.parametrize("s,h,schedule", [(128, 1, "round_robin"), (320, 2, "random"),
                                          (256, 1, "greedy")])
def test_fa4_forward_matches_sdpa_relaxed(s, h, schedule):
    ptx = _fa4_ptx()
    g = torch.Generator().manual_seed(s + h)
    q, k, v = (torch.randn(1, s, h, 128, generator=g).bfloat16() for _ in range(3))
    o = fa4_emu.run_fa4(ptx, q, k, v, schedule=schedule, strict=False)
    assert fa4_emu.rel_error(o, q, k, v) < 5e-3


@pytest.mark.slow
@pytest.mark.emu
def test_fa4_forward_strict_reports_tcgen05_ld_before_wait():
    """FA4's forward has no tcgen05 fence pair around its thread synchronisations and
    reads tcgen05.ld results with no tcgen05.wait::ld (docs/emulator_sm100.md, rules 5 and
    6): strict mode reports the first it meets (since the fence rules, the MMA -> ld
    ordering without fence::after_thread_sync)."""
    ptx = _fa4_ptx()
    q = torch.randn(1, 128, 1, 128).bfloat16()
    with pytest.raises(RaceError, match="before tcgen05.wait::ld|without "
                                        "tcgen05.fence::after_thread_sync"):
        fa4_emu.run_fa4(ptx, q, q.clone(), q.clone(), strict=True)
