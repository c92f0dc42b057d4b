"""`f = mma.load tile`: a shared tile into a register fragment, the A operand of an MMA.

Sema's rules, the IR, the interpreter (the Q-in-registers variant of the persistent
example against SDPA; releasing Q before loading it is a race), and the sm_90a
lowering (one ld.shared.b32 per packed register at the swizzled places of the
accumulator layout; QK in wgmma's RS form; no spills at 236 registers).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

from choreo_py import frontend
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.interp import RaceError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fa_helpers import assemble, run_error  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
QREG = ROOT / "bench" / "variants" / "flash_atten_persistent_qreg.co"


def kernel(body: str) -> str:
    """A kernel whose body starts on line 5."""
    return ("__co__ void k(global bf16[128, 128] A, global bf16[128, 128] B) {\n"
            "  parallel.async b by 1 : block {\n"
            "    shared bf16[128, 128] a_s;\n"
            "    parallel p by 2 : group-4 {\n"
            f"{body}"
            "    }\n"
            "  }\n"
            "}\n")


SEMA_ERRORS = [
    ("      f = mma.load a_s.subspan(64, 128).at(p, 0);\n"
     "      f = mma.load a_s.subspan(64, 128).at(p, 0);\n",
     "'f' is already a fragment; 'mma.load tile, f' refills it", 6, 7),
    ("      f = mma.load a_s.subspan(64, 128).at(p, 0);\n"
     "      mma.load a_s.subspan(64, 64).at(p, 0), f;\n",
     "'mma.load' of a bf16[64, 64] tile into 'f', a bf16[64, 128] fragment", 6, 46),
]


@pytest.mark.parametrize("body,message,line,col", SEMA_ERRORS)
def test_sema_rules(body, message, line, col):
    with pytest.raises(ChoreoError) as info:
        frontend.check_text(kernel(body), "t.co")
    err = info.value
    assert message in err.message, err.message
    assert (err.loc.line, err.loc.col) == (line, col)


def test_ir_declares_an_operand_fragment():
    text = compile_file(str(QREG), "ir", "sm_90a")
    assert "frag q_frag: bf16[64, 128] layout=operand" in text
    assert re.search(r"mma\.load q_shared<cid \* 64\+:64, 0\+:128> => q_frag", text)
    assert "mma.row.row.async acc_s += q_frag * k_buf[k_slot]" in text


def test_load_from_global_memory_is_valid_but_not_lowered(tmp_path):
    # WMMA-style programs load fragments from global memory (the language allows it);
    # the sm_90a backend refuses it by name.
    path = tmp_path / "t.co"
    path.write_text(kernel("      f = mma.load A.subspan(64, 128).at(p, 0);\n"
                           "      acc = mma.fill.f32 0.0f;\n      mma.row.row acc, f, a_s;\n"))
    frontend.check_text(path.read_text(), "t.co")
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "pyptx", "sm_90a")
    assert "mma.load from global memory" in info.value.message
    assert (info.value.loc.line, info.value.loc.col) == (5, 7)


def test_async_load_is_refused_by_name(tmp_path):
    path = tmp_path / "t.co"
    path.write_text(kernel("      f = mma.load.async a_s.subspan(64, 128).at(p, 0);\n"))
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ir", "sm_90a")
    assert "'mma.load.async' is not supported by the tile IR yet" in info.value.message
    assert (info.value.loc.line, info.value.loc.col) == (5, 7)




@pytest.mark.parametrize("b,h,s,schedule,seed", [(1, 3, 640, "round_robin", 0),
                                                 (2, 2, 384, "random", 1),
                                                 (1, 1, 1000, "random", 2)])
def test_q_in_registers_matches_sdpa(b, h, s, schedule, seed):
    err, o = run_error(QREG, b, h, s, schedule, seed)
    assert not torch.isnan(o).any()
    assert err < 1e-2


def test_releasing_q_before_loading_it_is_a_race(tmp_path):
    src = QREG.read_text()
    load = "              q_frag = mma.load q_shared.subspan(WG_M, DIM).at(cid, 0);\n"
    release = "              trigger qe.at(q_order++);\n"
    broken = src.replace(load + release, release + load)
    assert broken != src
    path = tmp_path / "early_release.co"
    path.write_text(broken)
    with pytest.raises(RaceError) as info:
        for seed in range(4):
            run_error(path, 1, 2, 640, "random", seed)
    assert "q_shared" in str(info.value)


def test_sm90_lowering_loads_the_operand_registers():
    ptx = compile_file(str(QREG), "ptx", "sm_90a")
    loads = re.findall(r"ld\.shared\.b32 %q_frag(\d+), \[%chunk(\d)_ld(?:_\d+)?\+?(\d*)\];", ptx)
    assert len(loads) == 32  # 64 bf16 per thread, two per register
    assert sorted(int(r) for r, _, _ in loads) == list(range(32))
    # the QKs read A from those registers (RS form); the PVs still from acc_s_cast
    assert len(re.findall(r"\{%q_frag\d+, %q_frag\d+, %q_frag\d+, %q_frag\d+\}, %\w+", ptx)) == 16
    assert "setmaxnreg.inc.sync.aligned.u32 240;" in ptx
    report = assemble(ptx, "sm_90a")
    assert "0 bytes spill stores, 0 bytes spill loads" in report


def test_sm90_loads_go_through_the_swizzled_chunk_addresses():
    # q_shared has the 128-byte swizzle: a thread's 16-byte chunk c of a row sits at
    # c ^ (row % 8); the lowering forms the 8 chunk addresses once (xor with the row's
    # phase) and every load is [chunk address + immediate], as mma.store's stores are.
    qreg = compile_file(str(QREG), "ptx", "sm_90a")
    ld = re.findall(r"ld\.shared\.b32 %q_frag\d+, \[%chunk(\d)_ld(?:_\d+)?\+?(\d*)\]", qreg)
    assert {c for c, _ in ld} == {str(c) for c in range(8)}
    xors = re.findall(r"xor\.b32 %chunk(\d)_ld\w*, %row_swz\w*, (\d+);", qreg)
    assert sorted((int(c), int(x)) for c, x in xors) == [(c, c << 4) for c in range(8)]


def test_sm100_refuses_by_name():
    with pytest.raises(ChoreoError) as info:
        compile_file(str(QREG), "pyptx", "sm_100a")
    assert "mma.load (a register A operand" in info.value.message
    assert (info.value.loc.line, info.value.loc.col) == (142, 15)


def test_loads_finish_before_the_tile_is_released():
    # `trigger qe` right after the load frees q_shared for the next TMA load; one thread
    # arrives for its warpgroup, so every thread's loads must be done first: an instance
    # barrier sits between the last load and the arrive (without it the next Q can land
    # under a slow warp's loads; compute-sanitizer's timing showed a 1.6e-2 error).
    ptx = compile_file(str(QREG), "ptx", "sm_90a")
    after = ptx[ptx.index("ld.shared.b32 %q_frag31"):]
    between = after[:after.index("mbarrier.arrive")]
    assert re.search(r"bar\.sync %inst_bar\w*, 128;", between)
    assert "fence.proxy.async" not in between  # reads need no proxy fence
