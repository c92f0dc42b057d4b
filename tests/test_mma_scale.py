"""Block-scaled MMAs (sema/mma_scale.py, docs/reference/mma.md "Block-scaled MMA").

tests/co/gemm_blockscale.co's three functions (`mma.scale` after a block's MMAs,
`mma.row.row.scale` on each MMA, row scales as a [1, M] tile) against torch, with
random scales per 64-wide K block: in the interpreter and in the PTX emulator on both
targets (sm_90a: the part in registers; sm_100a: the part and the sum in tensor memory,
each fold a tcgen05.ld of both and a tcgen05.st of the sum); the IR they are built into;
the errors. The
corpus programs (wgmma_ss.co, wgmma_persis.co) are end-to-end cases
(tests/end2end_gemms.py).
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
GEMM = os.path.join(HERE, "co", "gemm_blockscale.co")
FUNCTIONS = ("scale_after", "scale_each", "scale_rows_t")
M, N, K = 128, 256, 192  # 3 K blocks of 64, 2 column tiles of 128


def _inputs(name, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).to(torch.float16)
    b = torch.randn(N, K, generator=g).to(torch.float16)
    sa = 0.25 + 2 * torch.rand(M, K // 64, generator=g)
    sb = 0.25 + 2 * torch.rand(N // 128, K // 64, generator=g)
    c = torch.zeros(M, N)
    want = torch.zeros(M, N)
    for kb in range(K // 64):
        part = a[:, kb * 64:(kb + 1) * 64].float() @ b[:, kb * 64:(kb + 1) * 64].float().T
        want += part * sa[:, kb:kb + 1] * sb[:, kb].repeat_interleave(128)[None, :]
    rows = sa.T.contiguous() if name == "scale_rows_t" else sa
    return (a, rows, b, sb, c), want


def _rel(c, want) -> float:
    return (c.float() - want).abs().max().item() / want.abs().max().item()


@pytest.mark.parametrize("name", FUNCTIONS)
def test_interpreter_matches_torch(name):
    args, want = _inputs(name)
    getattr(choreo_py.interpret(GEMM, target="sm_90a"), name)(*args)
    assert _rel(args[4], want) <= 2 ** -18  # f32 sums of the same products


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_emulated_ptx_matches_torch(name, target):
    args, want = _inputs(name, seed=1)
    out, _ = emulate_function(GEMM, name, args, target)
    assert _rel(out["C"], want) <= 2 ** -18


@pytest.mark.gpu
@pytest.mark.parametrize("name", FUNCTIONS)
def test_gpu_matches_torch(name):
    args, want = _inputs(name, seed=2)
    args = tuple(t.cuda() for t in args)
    getattr(choreo_py.load(GEMM), name)(*args)
    # (the tensor cores' f32 sums are not IEEE-rounded: a looser bound than the CPU's,
    # still far below a wrong scale's O(1) error)
    assert _rel(args[4].cpu(), want) <= 2 ** -12


def test_the_ir_zeroes_a_part_and_folds_it():
    """Each K step: the part zeroed, the MMA into it, then an apply over mc that reads it
    (and the row scale, a global element) -- no MMA writes mc itself."""
    k = ir_of_file(GEMM, target="sm_90a").functions[0].kernels[0]
    stmts = list(ir.walk(k.body))
    assert [s.acc for s in stmts if isinstance(s, ir.Mma)] == ["mc__part"]
    assert [s.acc for s in stmts if isinstance(s, ir.MmaFill)] == ["mc", "mc__part"]
    fold = [s for s in stmts if isinstance(s, ir.Apply)]
    assert len(fold) == 1 and fold[0].domain == "mc"
    reads = {e.frag for e in ir.expr_walk(fold[0].body[0].value) if isinstance(e, ir.Elem)}
    bases = {e.view.base for e in ir.expr_walk(fold[0].body[0].value)
             if isinstance(e, ir.BufElem)}
    assert reads == {"mc", "mc__part"} and bases == {"SA", "SB"}


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_ptxas_accepts(target):
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    ptxas(compile_file(GEMM, "ptx", target), target)


def test_sm100a_keeps_the_sum_in_tensor_memory_beside_its_part():
    """The sum no MMA writes gets columns of its own (passes/tmem_plan.py), as the part does."""
    k = ir_of_file(GEMM, target="sm_100a").functions[0].kernels[0]
    cols = {r.frag: (r.col, r.ncols) for r in k.tmem.regions}
    assert set(cols) == {"mc", "mc__part"} and cols["mc"] != cols["mc__part"]
    assert all(n == 128 for _, n in cols.values())


KERNEL = """__co__ void k(global f32 [64, 2] sa, global s32 [64, 1] si) {{
  parallel b by 1 : block {{
    shared bf16[64, 128] q;
    shared bf16[128, 128] kt;
    parallel g by 1 : group-4 {{
      acc = mma.fill.f32 0.0f;
{body}
      mma.store acc, kt.subspan(64, 128).at(0, 0);
    }}
  }}
}}
"""


@pytest.mark.parametrize("body, message", [
    ("      mma.scale acc, sa.subspan(64, 1).at(0, 0), 1.0f;",
     "'mma.scale' needs an MMA on 'acc' before it in its block"),
    ("      mma.row.row.scale acc, q, kt, sa, 1.0f;",
     "the row scales of a [64, 128] accumulator are an [64, 1] or [1, 64] tile; 'sa' is [64, 2]"),
    ("      mma.row.row.scale acc, q, kt, si, 1.0f;", "a block scale is f32; 'si' is s32"),
    ("      f = mma.row.row.async.scale acc, q, kt, sa.subspan(64, 1).at(0, 0), 1.0f;\n"
     "      wait f;",
     "an asynchronous scaled MMA"),
    ("      mma.row.row acc, q, kt;\n"
     "      mma.row.row.scale acc, q, kt, sa.subspan(64, 1).at(0, 0), 1.0f;\n"
     "      mma.scale acc, sa.subspan(64, 1).at(0, 1), 1.0f;",
     "'acc' is folded by an 'mma.scale' later in this block"),
    ("      foreach {i} in [2] {\n        mma.row.row acc, q, kt;\n"
     "        mma.scale acc, sa.subspan(64, 1).at(0, i), 1.0f;\n      }\n"
     "      mma.scale acc, sa.subspan(64, 1).at(0, 0), 2.0f;",
     "'mma.scale' on 'acc' inside a block whose MMAs on it an outer 'mma.scale'"),
])
def test_errors_are_located(tmp_path, body, message):
    path = tmp_path / "k.co"
    path.write_text(KERNEL.format(body=body))
    with pytest.raises(ChoreoError) as e:
        compile_file(str(path), "ptx", "sm_90a")
    assert message in e.value.message and e.value.loc is not None


def test_a_second_segment_zeroes_the_part_again(tmp_path):
    """Two `mma.scale`s in one block: the second folds only the MMAs after the first."""
    path = tmp_path / "two.co"
    path.write_text(KERNEL.format(body=(
        "      mma.row.row acc, q, kt;\n"
        "      mma.scale acc, sa.subspan(64, 1).at(0, 0), 2.0f;\n"
        "      mma.row.row acc, q, kt;\n"
        "      mma.scale acc, sa.subspan(64, 1).at(0, 1), 3.0f;")))
    stmts = [type(s).__name__ for s in ir.walk(
        ir_of_file(str(path), target="sm_90a").functions[0].kernels[0].body)]
    assert [s for s in stmts if s in ("MmaFill", "Mma", "Apply")] == \
        ["MmaFill", "MmaFill", "Mma", "Apply", "MmaFill", "Mma", "Apply"]
