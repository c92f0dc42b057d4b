"""`: cluster` levels (sema/clusters.py): the rank variable, the grid a cluster needs, the
multicast copies and cluster triggers it allows, and what it refuses by name.

The GEMMs of wgmma_ss.co with clusters (multicast loads, `trigger.cluster`) run as
end-to-end cases (tests/end2end_gemms.py: interpreter, emulator, ptxas, GPU).
"""
from __future__ import annotations

import os
import types
from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py import frontend, targets
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.host.specialize import Functions
from choreo_py.runtime.build import find_ptxas, ptxas

from end2end_refs import END2END

ROOT = Path(__file__).resolve().parent
RANKS = str(ROOT / "co" / "cluster_ranks.co")
WGMMA_SS = os.path.join(END2END, "wgmma_ss.co")


def _want(n: int) -> torch.Tensor:
    b = torch.arange(n, dtype=torch.int32)
    return b % 2 + 10 * b


def test_the_rank_is_the_block_index_modulo_the_cluster_size():
    assert torch.equal(choreo_py.interpret(RANKS, target="sm_90a").ranks(
        torch.zeros(6, dtype=torch.int32)), _want(6))


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_the_emulated_ranks(target):
    out = choreo_py.emulate_program(RANKS, target=target).ranks(torch.zeros(8, dtype=torch.int32))
    assert torch.equal(out, _want(8))
    if find_ptxas() is not None:
        ptxas(compile_file(RANKS, "ptx", target), target)


def test_a_grid_of_no_whole_clusters_fails_the_entry_check():
    with pytest.raises(ChoreoError, match="a cluster of 2 blocks needs a grid whose first "
                                          "dimension is a multiple of 2") as e:
        choreo_py.interpret(RANKS, target="sm_90a").ranks(torch.zeros(5, dtype=torch.int32))
    assert (e.value.loc.line, e.value.loc.col) == (5, 12)


def test_main_s_grid_for_clusters_of_four_is_refused_where_the_sizes_are_known():
    """matmul_e4m3_mwg_tbc at wgmma_ss.co's M = 384: 3 blocks of 128 rows, clusters of 4."""
    if not os.path.exists(WGMMA_SS):
        pytest.skip("the corpus is not available (CHOREO_SHARED)")
    s = types.SimpleNamespace
    funcs = Functions(frontend.parse_file(WGMMA_SS), targets.get("sm_90a"), strict=True)
    with pytest.raises(ChoreoError, match="this one has 3 blocks") as e:
        funcs.for_call("matmul_e4m3_mwg_tbc", (s(shape=(384, 128)), s(shape=(384, 128)),
                                               s(shape=(384, 384))))
    assert (e.value.loc.line, e.value.loc.col) == (70, 12)


GEMM = """
__co__ void g(global f16 [M, K] lhs, global f16 [N, K] rhs, global f16 [M, N] output) {
  parallel {cm} by [2] : cluster {
    parallel {block_m, block_n} by [cdiv(M, 64), cdiv(N, 128)] : block {
      shared f16 [64, 64] lhs_s;
      shared f16 [128, 64] rhs_s;
      acc = mma.fill.f16 0.0f;
      foreach {iv_k} in [cdiv(K, 64)] {
        tma.copy.swiz<128> lhs.subspan(64, 64).at(block_m, iv_k) => lhs_s;
        tma.copy.multicast.swiz<128> RHS_TILE => rhs_s;
        parallel by 1 : group-4 {
          mma.row.row acc, lhs_s, rhs_s;
        }
      }
      shared f16 [64, 128] output_s;
      mma.store acc, output_s;
      tma.copy output_s => output.subspan(64, 128).at(block_m, block_n);
    }
  }
}
"""


def _without_cluster(src: str) -> str:
    src = src.replace("  parallel {cm} by [2] : cluster {\n", "")
    return src[:src.rindex("  }\n")] + src[src.rindex("  }\n") + 4:]


@pytest.mark.parametrize("src,message,line", [
    # the blocks of a cluster differ in block_m (and cm): a multicast tile may not
    (GEMM.replace("RHS_TILE", "rhs.subspan(128, 64).at(block_m, iv_k)"),
     "a multicast copy whose tile depends on 'block_m'", 10),
    (GEMM.replace("RHS_TILE", "rhs.subspan(128, 64).at(cm, iv_k)"),
     "a multicast copy whose tile depends on 'block_m'", 10),
    (_without_cluster(GEMM.replace("RHS_TILE", "rhs.subspan(128, 64).at(block_n, iv_k)")),
     "'tma.copy.multicast' outside a ': cluster' region", 9),
    (GEMM.replace("RHS_TILE", "rhs.subspan(128, 64).at(block_n, iv_k)")
         .replace("parallel {cm} by [2] : cluster {", "parallel {cm, cn} by [2, 1] : cluster {"),
     "a cluster of more than one dimension", 3),
    (GEMM.replace("RHS_TILE", "rhs.subspan(128, 64).at(block_n, iv_k)")
         .replace("parallel {cm} by [2] : cluster {", "parallel {cm} by [16] : cluster {"),
     "a cluster of 16 blocks (more than 8)", 3),
], ids=["tile_of_block_m", "tile_of_the_rank", "outside_a_cluster", "two_dimensions",
        "sixteen_blocks"])
def test_refused_by_name(tmp_path, src, message, line):
    path = tmp_path / "g.co"
    path.write_text(src)
    with pytest.raises(ChoreoError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        compile_file(str(path), "ptx", "sm_90a")
    assert e.value.loc.line == line


def test_the_multicast_gemm_compiles_and_assembles(tmp_path):
    path = tmp_path / "g.co"
    path.write_text(GEMM.replace("RHS_TILE", "rhs.subspan(128, 64).at(block_n, iv_k)"))
    ptx = compile_file(str(path), "ptx", "sm_90a")
    # each block loads both tiles
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global") == 2
    if find_ptxas() is not None:
        ptxas(ptx, "sm_90a")
