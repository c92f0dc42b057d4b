"""`__atomic_add` of a fragment's elements into a global f32 tensor inside an `apply` over
an accumulator (FA3's dQ accumulation): the interpreter adds each element's value, and both
backends lower one predicated `red.global.add.f32` per element; the PTX emulator runs it.
Other forms are refused by name."""
from __future__ import annotations

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from fa_helpers import assemble

# Two blocks add the same product into C: every element of C gets both.
PROGRAM = """__co__ void k(global bf16[64, 64] A, global bf16[64, 64] B, global f32[M, 64] C) {
  parallel blk by 2 : block {
    shared bf16[64, 64] a_s;
    shared bf16[64, 64] b_s;
    parallel p by 1 : group-4 {
      inthreads.async (p == 0) {
        tma.copy.swiz<128> A => a_s;
        tma.copy.swiz<128> B => b_s;
        acc = mma.fill.f32 0.0f;
        mma.row.row acc, a_s, b_s;
        apply {i, j} in acc.span {
          BODY
        }
      }
    }
  }
}
"""
PLAIN = "__atomic_add(C.at(i, j), acc.at(i, j));"
GUARDED = "if (i < M && j != 5) __atomic_add(C.at(i, j), acc.at(i, j) * 2.0f);"


def _program(tmp_path, body):
    path = tmp_path / "atomic_apply.co"
    path.write_text(PROGRAM.replace("BODY", body))
    return str(path)


def _operands(m):
    g = torch.Generator().manual_seed(m)
    a, b = (torch.randn(64, 64, generator=g).to(torch.bfloat16) for _ in range(2))
    return a, b, a.float() @ b.float().T


def _want(body, prod, m):
    if body == PLAIN:
        return 1 + 2 * prod[:m]
    w = 1 + 4 * prod[:m]
    w[:, 5] = 1
    return w


@pytest.mark.parametrize("body,m", [(PLAIN, 64), (GUARDED, 40)])
def test_interpreter_adds_every_element(tmp_path, body, m):
    a, b, prod = _operands(m)
    c = torch.ones(m, 64)
    choreo_py.interpret(_program(tmp_path, body), dict(A=a, B=b, C=c), target="sm_90a")
    assert torch.allclose(c, _want(body, prod, m), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("body,m", [(PLAIN, 64), (GUARDED, 40)])
def test_emulated_red_global_add(tmp_path, target, body, m):
    path = _program(tmp_path, body)
    ptx = compile_file(path, emit="ptx", target=target)
    assert "red.global.add.f32" in ptx
    a, b, prod = _operands(m)
    c = torch.ones(m, 64)
    choreo_py.emulate(path, dict(A=a, B=b, C=c), target=target)
    assert torch.allclose(c, _want(body, prod, m), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_assembles(tmp_path, target):
    assemble(compile_file(_program(tmp_path, GUARDED), emit="ptx", target=target), target)


def test_a_row_apply_is_refused_by_name(tmp_path):
    """In an apply over a row vector every owner of the row would add it once."""
    body = "}\n        frag f32[64] r {1.0f};\n        apply {i} in r.span {\n" \
           "          __atomic_add(C.at(i, 0), r.at(i));"
    with pytest.raises(ChoreoError, match="'__atomic_add' inside apply other than on a "
                                          "global f32 tensor in an apply over a 2-D fragment"):
        compile_file(_program(tmp_path, "acc.at(i, j) = acc.at(i, j);\n        " + body),
                     emit="ptx", target="sm_90a")
