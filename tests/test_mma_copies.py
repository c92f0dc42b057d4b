"""Synchronous copies and global stores in MMA kernels (passes/sync_copies.py,
passes/global_mma_stores.py).

A block-level `dma.copy global => shared` in a kernel of MMAs becomes TMA loads
published on an event of its own; `mma.store acc, <global tile>` goes through a
shared staging tile and a TMA store. Checked: the IR after the passes, the
interpreter and the emulated PTX of both targets against torch, ptxas, the
forms left alone (and refused by name), and (marked gpu) the H200.
"""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py import ir
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file, ir_of_file
from choreo_py.runtime.build import find_ptxas, ptxas

from test_host_programs import emulate_function

HERE = os.path.dirname(os.path.abspath(__file__))
GEMM_SYNC = os.path.join(HERE, "co", "gemm_sync_copies.co")
SHARED = os.environ.get("CHOREO_SHARED", os.path.join(HERE, "..", "..", "shared"))
AUTO_K = os.path.join(SHARED, "corpus", "tests", "gpu", "codegen", "cute", "wgmma",
                      "wgmma_auto_k_split.co")
needs_corpus = pytest.mark.skipif(not os.path.exists(AUTO_K), reason="no ../shared corpus")


def _ab(m, n, k=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, k, generator=g).to(torch.float16),
            torch.randn(n, k, generator=g).to(torch.float16))


def _rel(c, want) -> float:
    """Largest difference relative to the largest value (an f16 result of an f32 accumulation
    is within f16 rounding: 2^-9 of the largest value)."""
    return (c.float().cpu() - want.float().cpu()).abs().max().item() / want.abs().max().item()


def test_the_ir_after_the_passes():
    k = ir_of_file(GEMM_SYNC, target="sm_90a").functions[0].kernels[0]
    stmts = list(ir.walk(k.body))
    assert not any(isinstance(s, ir.DmaCopy) for s in stmts)
    loads = [s for s in stmts if isinstance(s, ir.TmaLoad)]
    assert [s.swizzle for s in loads] == [128, 128]
    trig = [s for s in stmts if isinstance(s, ir.Trigger)]
    assert len(trig) == 1 and trig[0].after == [s.future for s in loads]  # one group
    assert [e.name for e in k.events] == ["__copied"]
    stores = [s for s in stmts if isinstance(s, ir.TmaStore)]
    assert len(stores) == 1 and stores[0].dst.base == "C"
    assert k.buffer(stores[0].src.base).shape == (64, 128)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_interpreter_matches_torch(target):
    a, b = _ab(128, 256)
    c = choreo_py.interpret(GEMM_SYNC, target=target).gemm_sync(a, b)
    assert _rel(c, a.float() @ b.float().t()) <= 2 ** -9


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_emulated_ptx_matches_torch(target):
    a, b = _ab(128, 256, seed=1)
    c, _ = emulate_function(GEMM_SYNC, "gemm_sync", (a, b), target)
    assert _rel(c, a.float() @ b.float().t()) <= 2 ** -9


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_ptxas_accepts(target):
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    ptxas(compile_file(GEMM_SYNC, "ptx", target), target)


@needs_corpus
def test_a_corpus_file_of_two_mma_functions():
    """wgmma_auto_k_split.co: two functions, implicit `=> shared` copies, a group-4 region
    of two warpgroups each storing its own rows of the global result."""
    lib = choreo_py.interpret(AUTO_K, target="sm_90a")
    a, b = _ab(128, 128)
    want = a.float() @ b.float().t()
    assert _rel(lib.direct_row_row_auto_split(a, b), want) <= 2 ** -9
    c, _ = emulate_function(AUTO_K, "direct_row_row_auto_split", (a, b), "sm_90a")
    assert _rel(c, want) <= 2 ** -9
    a, bt = _ab(64, 128)
    b = bt.t().contiguous()  # [K, N]: the row.col form's B
    want = a.float() @ b.float()
    assert _rel(lib.direct_row_col_auto_split(a, b), want) <= 2 ** -9
    c, _ = emulate_function(AUTO_K, "direct_row_col_auto_split", (a, b), "sm_90a")
    assert _rel(c, want) <= 2 ** -9
    if find_ptxas() is not None:
        ptxas(compile_file(AUTO_K, "ptx", "sm_90a"), "sm_90a")


SRC = open(GEMM_SYNC).read() if os.path.exists(GEMM_SYNC) else ""


def test_a_copy_inside_a_role_is_left_and_refused_by_name(tmp_path):
    path = tmp_path / "in_role.co"
    path.write_text(SRC.replace(
        "        acc = mma.fill.f32 0.0f;\n",
        "        acc = mma.fill.f32 0.0f;\n"
        "        dma.copy.swiz<128> A.subspan(BM, BK).at(tm, 0) => a_s.data;\n"))
    with pytest.raises(ChoreoError, match="dma.copy is not lowered for sm_90a yet"):
        compile_file(str(path), "ptx", "sm_90a")


def test_an_asynchronous_copy_is_left(tmp_path):
    path = tmp_path / "async.co"
    path.write_text(SRC.replace("    b_s = dma.copy.swiz<128>", "    b_s = dma.copy.async.swiz<128>")
                    # the wait comes before the MMA's read: a read before it is refused first
                    .replace("        mma.row.row acc, a_s.data, b_s.data;",
                             "        wait b_s;\n        mma.row.row acc, a_s.data, b_s.data;"))
    with pytest.raises(ChoreoError) as e:
        compile_file(str(path), "ptx", "sm_90a")
    assert "dma.copy is not lowered for sm_90a yet" in e.value.message
    assert (e.value.loc.line, e.value.loc.col) == (13, 5)


@pytest.mark.gpu
def test_gpu_matches_torch():
    a, b = (t.cuda() for t in _ab(256, 384, seed=2))
    c = choreo_py.load(GEMM_SYNC).gemm_sync(a, b)
    assert _rel(c.cpu(), a.cpu().float() @ b.cpu().float().t()) <= 2 ** -9


def _no_swizzle_named(tmp_path, extra: str = "") -> str:
    src = SRC.replace("dma.copy.swiz<128>", "dma.copy")
    src = src.replace("        acc = mma.fill.f32 0.0f;\n", "        acc = mma.fill.f32 0.0f;\n" + extra)
    path = tmp_path / "no_swizzle.co"
    path.write_text(src)
    return str(path)


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_tile_only_mmas_read_gets_a_swizzle(tmp_path, target):
    path = _no_swizzle_named(tmp_path)
    k = ir_of_file(path, target=target).functions[0].kernels[0]
    assert {b.name: b.swizzle for b in k.buffers}["a_s__shared"] == 128
    a, b = _ab(64, 128, seed=3)
    c, _ = emulate_function(path, "gemm_sync", (a, b), target)
    assert _rel(c, a.float() @ b.float().t()) <= 2 ** -9


def test_a_tile_an_element_access_reads_stays_row_major(tmp_path):
    path = _no_swizzle_named(tmp_path, "        f16 first = a_s.data.at(0, 0);\n")
    k = ir_of_file(path, target="sm_90a").functions[0].kernels[0]
    swz = {b.name: b.swizzle for b in k.buffers}
    assert swz["a_s__shared"] is None and swz["b_s__shared"] == 128
    with pytest.raises(ChoreoError, match="is not lowered for sm_90a yet"):
        compile_file(path, "ptx", "sm_90a")  # (the element access, by name)


def _without_role(tmp_path) -> str:
    src = SRC.replace("      inthreads.async (p == 0) {\n", "").replace(
        "        mma.store acc, C.subspan(BM, BN).at(tm, tn);\n      }\n",
        "        mma.store acc, C.subspan(BM, BN).at(tm, tn);\n")
    assert "inthreads" not in src
    path = tmp_path / "no_role.co"
    path.write_text(src)
    return str(path)


def test_one_instance_without_roles_is_one_role_on_sm100a_only(tmp_path):
    """passes/mma_roles.py: the tcgen05 lowering issues from its MMA role."""
    path = _without_role(tmp_path)
    roles = {t: [s for s in ir.walk(ir_of_file(path, target=t).functions[0].kernels[0].body)
                 if isinstance(s, ir.Role)] for t in ("sm_90a", "sm_100a")}
    assert roles["sm_90a"] == []
    assert [(r.name, r.members) for r in roles["sm_100a"]] == [("p == 0", (0,))]


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_one_instance_without_roles_emulated(tmp_path, target):
    path = _without_role(tmp_path)
    a, b = _ab(128, 128, seed=4)
    c, _ = emulate_function(path, "gemm_sync", (a, b), target)
    assert _rel(c, a.float() @ b.float().t()) <= 2 ** -9
    if find_ptxas() is not None:
        ptxas(compile_file(path, "ptx", target), target)


TWO_GROUPS = """
__co__ auto two(f16 [128, 64] lhs, f16 [64, 64] rhs) {
  f32 [128, 64] output{0.0f};
  parallel pb by 1 : block {
    lhs_s = dma.copy.swiz<128> lhs => shared;
    rhs_s = dma.copy.swiz<128> rhs => shared;
    parallel wgm by 2 : group-4 {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, lhs_s.chunkat(wgm, _), rhs_s;
      mma.store mc, output.subspan(64, 64).at(wgm, 0);
    }
  }
  return output;
}
"""


def test_two_instances_without_roles_are_one_role_of_both_on_sm100a(tmp_path):
    """passes/mma_roles.py: each warpgroup its own tile, as an explicit role of both."""
    path = tmp_path / "two.co"
    path.write_text(TWO_GROUPS)
    roles = {t: [s for s in ir.walk(ir_of_file(str(path), target=t).functions[0].kernels[0].body)
                 if isinstance(s, ir.Role)] for t in ("sm_90a", "sm_100a")}
    assert roles["sm_90a"] == []
    assert [(r.name, r.members, r.is_async) for r in roles["sm_100a"]] == \
        [("wgm < 2", (0, 1), True)]


@pytest.mark.emu
@pytest.mark.parametrize("engine", ["interpreter", "sm_100a"])  # sm_90a: the corpus test above
def test_two_instances_without_roles_emulated(tmp_path, engine):
    path = tmp_path / "two.co"
    path.write_text(TWO_GROUPS)
    a, b = _ab(128, 64, seed=5)
    if engine == "interpreter":
        c = choreo_py.interpret(str(path)).two(a, b)
    else:
        c, _ = emulate_function(str(path), "two", (a, b), engine)
        if find_ptxas() is not None:
            ptxas(compile_file(str(path), "ptx", engine), engine)
    assert _rel(c, a.float() @ b.float().t()) <= 2 ** -9


# ---------------------------------------------------------------- register A operands
RS = """
__co__ auto rs(f16 [64, K] lhs, f16 [64, K] rhs) {
  f32 [64, 64] output{0.0f};
  parallel {bm, bn} by [1, 1] : block {
    lhs_s = tma.copy.swiz<SWZ> lhs => shared;
    rhs_s = tma.copy.swiz<SWZ> rhs => shared;
    parallel by 1 : group-4 {
      mc = mma.fill.f32 0.0f;
      ma = mma.load.frag lhs_s;
      mma.row.row mc, ma, rhs_s;
      mma.store mc, output;
    }
  }
  return output;
}
"""


@pytest.mark.emu
@pytest.mark.parametrize("swizzle,k", [(32, 16), (64, 32), (128, 64)])
def test_mma_load_from_each_swizzle(tmp_path, swizzle, k):
    """mma.load reads a thread's 16-byte chunks where the S-byte swizzle put them (the
    chunk index XORs with row % 8, (row / 2) % 4 or (row / 4) % 2)."""
    path = tmp_path / f"rs{swizzle}.co"
    path.write_text(RS.replace("SWZ", str(swizzle)).replace("K]", f"{k}]"))
    a, b = _ab(64, 64, k, seed=5)
    c, _ = emulate_function(str(path), "rs", (a, b), "sm_90a")
    assert (c - a.float() @ b.float().t()).abs().max().item() < 1e-3


WGMMA_RS = os.path.join(SHARED, "corpus", "tests", "gpu", "end2end", "wgmma_rs.co")


@pytest.mark.emu
@needs_corpus
def test_wgmma_rs_emulated():
    """end2end/wgmma_rs.co: a constant register operand (`frag f16[64, 16] a {1.0f}`: the
    value's f16 bits in both halves of each register; on sm_100a stored to its tensor-memory
    columns) and mma.load, with the accumulator filled and stored around the region
    (passes/one_region.py)."""
    g = torch.Generator().manual_seed(6)
    lhs = (torch.rand(64, 16, generator=g) * 2 - 1).to(torch.float16)
    rhs = (torch.rand(64, 16, generator=g) * 2 - 1).to(torch.float16)
    ones = torch.ones(64, 16) @ rhs.float().t()
    for target in ("sm_90a", "sm_100a"):
        c, _ = emulate_function(WGMMA_RS, "wgmma_rs1", (rhs,), target)
        assert (c - ones).abs().max().item() < 1e-3, target
    c, _ = emulate_function(WGMMA_RS, "wgmma_rs2", (lhs, rhs), "sm_90a")
    assert (c - lhs.float() @ rhs.float().t()).abs().max().item() < 1e-3


@needs_corpus
def test_one_region_holds_the_whole_block():
    """passes/one_region.py: the block's statements around its only one-instance region
    (the fills before, the store after) are the region's."""
    k = ir_of_file(WGMMA_RS, target="sm_90a").functions[0].kernels[0]
    assert len(k.body) == 1 and isinstance(k.body[0], ir.Parallel)
    inside = [type(s).__name__ for s in k.body[0].body]
    assert {"MmaFill", "FragDecl"} <= set(inside) and inside[-2:] == ["MmaStore", "TmaStore"]


def test_one_region_leaves_kernels_of_several_regions(tmp_path):
    src = (SRC.replace("    parallel p by 1 : group-4 {\n",
                       "    parallel q by 1 : group-4 { }\n    parallel p by 1 : group-4 {\n", 1))
    path = tmp_path / "two_regions.co"
    path.write_text(src)
    k = ir_of_file(str(path), target="sm_90a").functions[0].kernels[0]
    assert sum(isinstance(s, ir.Parallel) for s in k.body) == 2


GEMM_K_LOOP = os.path.join(HERE, "co", "gemm_k_loop.co")


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_region_in_a_loop_over_k_tiles(target):
    """Synchronous copies and a one-instance MMA region in a loop over K tiles, the
    accumulator filled before the loop and stored after it: the interpreter and the
    emulated PTX (which reports a copy that overwrites a tile an MMA still reads) against
    torch, and ptxas."""
    a, b = _ab(128, 256, 192, seed=7)
    want = a.float() @ b.float().t()
    assert _rel(choreo_py.interpret(GEMM_K_LOOP, target=target).gemm_k_loop(a, b), want) \
        <= 2 ** -9
    c, _ = emulate_function(GEMM_K_LOOP, "gemm_k_loop", (a, b), target)
    assert _rel(c, want) <= 2 ** -9
    if find_ptxas() is not None:
        ptxas(compile_file(GEMM_K_LOOP, "ptx", target), target)


@pytest.mark.gpu
def test_gpu_a_region_in_a_loop_over_k_tiles():
    a, b = (t.cuda() for t in _ab(256, 384, 512, seed=8))
    c = choreo_py.load(GEMM_K_LOOP).gemm_k_loop(a, b)
    assert _rel(c.cpu(), a.cpu().float() @ b.cpu().float().t()) <= 2 ** -9


def test_constant_operand_bits_against_torch():
    from choreo_py.lowering.core.f16_values import half_bits

    for v in (1.0, -2.5, 0.1, 1.00390625, 1.01171875, 65504.0, 3.0e38):
        for dtype, tdt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
            if dtype == "f16" and abs(v) > 65504:
                continue
            want = torch.tensor([v], dtype=torch.float32).to(tdt).view(torch.int16).item()
            assert half_bits(v, dtype) == want & 0xFFFF, (v, dtype)


@pytest.mark.emu
def test_a_parallel_region_inside_a_loop_joins(tmp_path):
    """Its roles end at a join where the block's threads meet (lowering/core/roles.py), so
    the loop goes on: the emulated sm_90a kernel runs both iterations and
    matches torch (a kernel whose warps left after the first would hang or differ); sm_100a
    refuses it by name."""
    src = SRC.replace("    parallel p by 1 : group-4 {\n", "    foreach {it} in [2] {\n"
                      "    parallel p by 1 : group-4 {\n").replace("  return C;", "  }\n  return C;")
    src = src.replace("    }\n  }\n  }\n  return C;", "    }\n    }\n  }\n  return C;")
    path = tmp_path / "in_loop.co"
    path.write_text(src)
    a, b = _ab(128, 256, seed=4)
    want = a.float() @ b.float().t()
    text = compile_file(str(path), "ptx", "sm_90a")
    assert "_join_" in text and "bar.sync 0;" in text.split("_join_")[-1]
    c = choreo_py.emulate_program(str(path), target="sm_90a").gemm_sync(a, b)
    assert _rel(c, want) <= 2 ** -9
    with pytest.raises(ChoreoError, match="in a kernel with tensor-memory accumulators"):
        compile_file(str(path), "ptx", "sm_100a")  # sm_100a frees tensor memory at role end
