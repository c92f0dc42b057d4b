"""examples/flash_atten_blackwell.co (non-causal) and flash_atten_blackwell_causal.co:
attention for sm_100a on the block's accumulators (S and O in tensor memory, P over S, a
one-thread MMA role, a one-thread TMA load role, a softmax warpgroup that also rescales O
in place).

The plan puts P in S's columns (the loop form of the order proof admits the KV loop);
the interpreter and the strict PTX emulator match torch's SDPA under several schedules
and shapes (a partial last query tile and a partial last KV tile among them); the
masking of the partial KV tile and the rescale of O are both needed (variants without
them do not match); ptxas accepts the PTX with no spills; sm_90a refuses it by name."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py import cli
from choreo_py.driver import compile_file
from block_helpers import emulate_strict
from fa_helpers import bshd, rel

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "flash_atten_blackwell.co"
CAUSAL = ROOT / "examples" / "flash_atten_blackwell_causal.co"
BOTH = [EXAMPLE, CAUSAL]


def _inputs(sq, skv, h=1):
    q, k, v = bshd(1, sq, h, 1), bshd(1, skv, h, 2), bshd(1, skv, h, 3)
    return q, k, v, torch.full_like(q, float("nan"))


def _sdpa(q, k, v, causal=False):
    t = [x.float().transpose(1, 2) for x in (q, k, v)]
    return torch.nn.functional.scaled_dot_product_attention(
        *t, is_causal=causal).transpose(1, 2)


def _interpret(path, sq, skv, h=1, causal=False) -> float:
    q, k, v, o = _inputs(sq, skv, h)
    choreo_py.interpret(str(path), dict(Q=q, K=k, V=v, O=o), target="sm_100a")
    return rel(o, _sdpa(q, k, v, causal)) if not o.float().isnan().any() else float("nan")


@pytest.mark.parametrize("path", BOTH, ids=lambda p: p.stem)
def test_the_plan_puts_p_over_s(path):
    text = compile_file(str(path), emit="ir", target="sm_100a")
    assert "tmem p[0]: operand layout=D lanes=0+:128 cols=0+:64 in=s" in text
    assert "tmem_alloc 256 used=256 role={1}" in text


@pytest.mark.parametrize("path, sq, skv, h", [(EXAMPLE, 256, 256, 2), (EXAMPLE, 200, 330, 1),
                                              (CAUSAL, 384, 384, 2), (CAUSAL, 200, 200, 1)],
                         ids=lambda x: getattr(x, "stem", str(x)))
def test_interpreter_matches_sdpa(path, sq, skv, h):
    assert _interpret(path, sq, skv, h, causal=path is CAUSAL) < 5e-3


def test_the_causal_mask_is_needed(tmp_path):
    src = CAUSAL.read_text()
    old = "              if (j >= valid || j > i + diag)\n"
    assert old in src
    path = tmp_path / "v.co"
    path.write_text(src.replace(old, "              if (j >= valid)\n"))
    assert not _interpret(path, 256, 256, causal=True) < 5e-2


@pytest.mark.parametrize("old, new", [
    ("              if (j >= valid)\n                s.at(i, j) = -inf;\n",
     "              if (j >= valid + BLOCK_N)\n                s.at(i, j) = -inf;\n"),
    ("            o.at(i, j) = o.at(i, j) * scale.at(i);\n",
     "            o.at(i, j) = o.at(i, j) * 1.0f;\n"),
])
def test_the_mask_and_the_rescale_are_needed(tmp_path, old, new):
    src = EXAMPLE.read_text()
    assert old in src
    path = tmp_path / "v.co"
    path.write_text(src.replace(old, new))
    assert not _interpret(path, 128, 330) < 5e-2


@pytest.fixture(scope="module", params=BOTH, ids=lambda p: p.stem)
def ptx(request) -> str:
    return compile_file(str(request.param), emit="ptx", target="sm_100a")


def test_the_mma_role_is_one_thread_and_s_is_fresh(ptx):
    assert len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%s_tmem\]", ptx)) == 8
    assert re.search(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%s_tmem\], [^;]*%overwrite;",
                     ptx)
    assert "tcgen05.mma.cta_group::1.kind::f16 [%o_tmem], [%p_tmem]" in ptx
    assert "add.u32 %p_tmem, %tmem, 0;" in ptx
    assert "bra L_mma_issued" not in ptx  # the MMA role is issue-only: no election


@pytest.mark.ptxas
def test_ptxas_accepts_it_without_spills(ptx):
    from choreo_py.runtime import build
    _, log = build.ptxas(ptx, "sm_100a", verbose=True)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in log, log
    regs = int(re.search(r"Used (\d+) registers", log).group(1))
    assert regs <= 255


@pytest.mark.parametrize("path, line", [(EXAMPLE, 39), (CAUSAL, 35)], ids=["full", "causal"])
def test_sm90a_refuses_it_by_name(tmp_path, capsys, path, line):
    rc = cli.main(["compile", str(path), "--target", "sm_90a", "-o", str(tmp_path / "x.py")])
    assert rc == 1
    assert f"{path.name}:{line}:5: error: a ': block' accumulator (one tile the " \
        "block's roles share; wgmma accumulates in the registers of the warpgroup that " \
        "issues it) is not lowered for sm_90a yet" in capsys.readouterr().err


# The strict emulator: S = 256 (two KV tiles), 384 (three: the 2-slot rings reuse a slot),
# and Q = 200, KV = 330 (a partial last query tile, a partial last KV tile); causal: 256,
# 384 and 200 (a partial diagonal tile).
EMU = [(EXAMPLE, 256, 256, "round_robin"), (EXAMPLE, 256, 256, "reverse"),
       (EXAMPLE, 256, 256, "random"), (EXAMPLE, 384, 384, "greedy"),
       (EXAMPLE, 200, 330, "random"),
       (CAUSAL, 256, 256, "reverse"), (CAUSAL, 384, 384, "random"),
       (CAUSAL, 200, 200, "round_robin")]


@pytest.mark.emu
@pytest.mark.parametrize("path, sq, skv, schedule", EMU,
                         ids=lambda x: getattr(x, "stem", str(x)))
def test_emulator_matches_sdpa_strict(path, sq, skv, schedule):
    q, k, v, o = _inputs(sq, skv)
    assert emulate_strict(path, dict(Q=q, K=k, V=v, O=o), schedule) == []
    assert not o.float().isnan().any()
    assert rel(o, _sdpa(q, k, v, causal=path is CAUSAL)) < 5e-3
