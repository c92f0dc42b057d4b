"""Shared tiles whose layout no statement observes get a swizzle from the backend.

A buffer written only by `mma.store` (or by nothing) and read only by MMAs,
`mma.load` and `tma.copy` has no layout the program can see; wgmma and tcgen05 read
shared operands through swizzled descriptors, so the backend gives such an operand
the widest swizzle its rows take (a TMA-loaded tile keeps the swizzle the program
wrote). A tile the warpgroup wrote with `mma.store` and then feeds to an MMA is
fenced into the async proxy, with the instance's barrier, before the MMA.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import torch

import choreo_py
from choreo_py.driver import compile_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fa_helpers import assemble  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

UNWRITTEN = """\
__co__ void k() {
  parallel b by 1 : block {
    shared bf16[64, 64] lhs;
    shared bf16[64, 128] rhs;
    parallel g by 1 : group-4 {
      acc = mma.fill.f32 0.0f;
      mma.row.col acc, lhs, rhs;
    }
  }
}
"""

# S = Q K^T, P = bf16(S) through shared memory, O = P V: P's tile is written by
# mma.store and read by the second MMA.
THROUGH_SHARED = (ROOT / "tests" / "co" / "attention_through_shared.co").read_text()



def _compile(tmp_path, src: str, target: str) -> str:
    path = tmp_path / "k.co"
    path.write_text(src)
    ptx = compile_file(str(path), "ptx", target)
    assemble(ptx, target)
    return ptx


def test_unwritten_operands_get_a_swizzle(tmp_path):
    # (the sm_100a backend wants MMAs inside inthreads roles; this program has none)
    ptx = _compile(tmp_path, UNWRITTEN, "sm_90a")
    assert len(re.findall(r"wgmma\.mma_async", ptx)) == 4


def test_through_shared_compiles_for_sm100(tmp_path):
    ptx = _compile(tmp_path, THROUGH_SHARED, "sm_100a")
    assert "tcgen05.mma" in ptx and "fence.proxy.async.shared::cta" in ptx


def test_a_tile_stored_then_multiplied_is_fenced_first(tmp_path):
    ptx = _compile(tmp_path, THROUGH_SHARED, "sm_90a")
    stores = [m.start() for m in re.finditer(r"st\.shared\.b32", ptx)]
    mmas = [m.start() for m in re.finditer(r"wgmma\.mma_async", ptx)]
    first_store, second_mma = stores[0], mmas[4]  # the QK MMA is 4 k-steps (K = 64)
    between = ptx[first_store:second_mma]
    assert "fence.proxy.async.shared::cta" in between
    assert re.search(r"bar\.sync %inst_bar\w*, 128;", between)


def test_through_shared_matches_torch_in_the_interpreter():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(64, 64, generator=g).to(torch.bfloat16) for _ in range(3))
    o = torch.full((64, 64), float("nan"))
    choreo_py.interpret(str(ROOT / "tests" / "co" / "attention_through_shared.co"),
                        dict(Q=q, K=k, V=v, O=o))
    p = (q.float() @ k.float().T).to(torch.bfloat16).float()
    ref = p @ v.float()
    assert ((o - ref).norm() / ref.norm()).item() < 1e-2
