"""examples/flash_atten_blackwell_persistent.co: causal attention for sm_100a on the block's
accumulators in a persistent grid (one block per SM walking query tiles longest first).

Each block runs several work items here (-D NUM_SMS=2), so what crosses items is
exercised: the rings and counters that continue, the MMA role's first PV of an item
overwriting O through the enable-input-d predicate (`if (step == 0) mma.fill o, 0.0f;`:
without it the items' O accumulate and the result is wrong), and the P-over-S order proof
reading the KV loop inside the work-item loop (passes/tmem_host_loop.lifted; its
refusals are checked here too). The interpreter and the strict PTX emulator match SDPA
on three shapes (partial last tiles among them) and schedules; ptxas: no spills."""
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
EXAMPLE = ROOT / "examples" / "flash_atten_blackwell_persistent.co"
DEFAULT_SMS = "#define NUM_SMS 148\n"


def _with(tmp_path, old: str = "", new: str = "", sms: int = 2) -> Path:
    src = EXAMPLE.read_text()
    assert DEFAULT_SMS in src and old in src
    path = tmp_path / "variant.co"
    path.write_text(src.replace(DEFAULT_SMS, f"#define NUM_SMS {sms}\n").replace(old, new))
    return path


def _inputs(s, h):
    q, k, v = bshd(1, s, h, 1), bshd(1, s, h, 2), bshd(1, s, h, 3)
    return q, k, v, torch.full_like(q, float("nan"))


def _sdpa(q, k, v):
    t = [x.float().transpose(1, 2) for x in (q, k, v)]
    return torch.nn.functional.scaled_dot_product_attention(*t, is_causal=True).transpose(1, 2)


def _interpret(path, s, h) -> float:
    q, k, v, o = _inputs(s, h)
    choreo_py.interpret(str(path), dict(Q=q, K=k, V=v, O=o), target="sm_100a")
    return rel(o, _sdpa(q, k, v)) if not o.float().isnan().any() else float("nan")


def test_interpreter_matches_sdpa(tmp_path):
    assert _interpret(_with(tmp_path), 384, 2) < 5e-3  # 6 items on 2 blocks


def test_the_per_item_overwrite_of_o_is_needed(tmp_path):
    old = "              if (step == 0)\n                mma.fill o, 0.0f;"
    path = _with(tmp_path, old, "              // (no overwrite)")
    assert not _interpret(path, 384, 2) < 5e-2


# 384 x 2 heads: 6 items, 3 a block; 200 x 3: a partial diagonal tile, 6 items; 330 x 2:
# a partial tile of 74 rows, 6 items of 1..3 KV steps
EMU = [(384, 2, "reverse"), (200, 3, "round_robin"), (330, 2, "random")]


@pytest.mark.emu
@pytest.mark.parametrize("s, h, schedule", EMU)
def test_emulator_matches_sdpa_strict(tmp_path, s, h, schedule):
    q, k, v, o = _inputs(s, h)
    assert emulate_strict(_with(tmp_path), dict(Q=q, K=k, V=v, O=o), schedule) == []
    assert not o.float().isnan().any()
    assert rel(o, _sdpa(q, k, v)) < 5e-3


@pytest.fixture(scope="module")
def ptx() -> str:
    return compile_file(str(EXAMPLE), emit="ptx", target="sm_100a")


def test_the_first_pv_of_an_item_reads_a_predicate(ptx):
    pv = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%o_tmem\], \[%p_tmem\][^;]*;", ptx)
    assert pv and all(x.endswith("%o_accumulate;") for x in pv[:1]), pv
    assert "mov.pred %o_accumulate, 0;" in ptx and "mov.pred %o_accumulate, 1;" in ptx
    assert "bra L_mma_issued" not in ptx  # the MMA role stays one thread


@pytest.mark.ptxas
def test_ptxas_accepts_it_without_spills(ptx):
    from choreo_py.runtime import build
    _, log = build.ptxas(ptx, "sm_100a", verbose=True)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in log, log


@pytest.mark.parametrize("old, new, why", [
    ("              trigger s_full.at(order);", "              trigger s_full.at(step);",
     "names 's_full' at no step number of the loop"),
    ("            bm = q_tiles - 1 - item / heads;\n            wait qf.at(q_order);",
     "            bm = q_tiles - 1 - item / heads;\n            order = 0;\n"
     "            wait qf.at(q_order);",
     "sets 'order', which the loop at line"),
])
def test_the_order_proof_refuses_what_it_cannot_prove(tmp_path, capsys, old, new, why):
    path = _with(tmp_path, old, new)
    rc = cli.main(["compile", str(path), "--target", "sm_100a", "-o", str(tmp_path / "x.py")])
    err = capsys.readouterr().err
    assert rc == 1 and "'p' cannot lie in the columns of 's'" in err and why in err, err


def test_sm90a_refuses_it_by_name(tmp_path, capsys):
    rc = cli.main(["compile", str(EXAMPLE), "--target", "sm_90a", "-o", str(tmp_path / "x.py")])
    assert rc == 1
    assert "a ': block' accumulator" in capsys.readouterr().err


def test_the_o_store_ending_an_item_is_read_before_the_threads_meet(ptx):
    """The next item's correction threads write o_buf again: the store's one issuing thread
    waits until the TMA engine has read the tile, then the role's threads meet (a store
    ending a loop body is not the kernel's end)."""
    store = ptx.rindex("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%tmap_O")
    after = ptx[store:ptx.index("bra.uni L_round_loop", store)]
    read = after.index("cp.async.bulk.wait_group.read 0;")
    assert re.search(r"bar\.sync %inst_bar_\d+, 128;", after[read:])
