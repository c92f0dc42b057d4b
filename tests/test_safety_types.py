"""C's promotions are settled in sema and written in the IR, so that the typed PTX
instructions get operands of their type: an integer literal in float code and a
condition used as a number compile, assemble on both targets, and compute what the
interpreter computes."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py import driver, ir
from choreo_py.ir import build as B
from choreo_py.ir.eval import evaluate
from fa_helpers import assemble, bshd, rel, sdpa

EX = Path(__file__).resolve().parent.parent / "examples"
TARGETS = ("sm_90a", "sm_100a")


def _variant(tmp_path, example: str, old: str, new: str, name: str) -> Path:
    text = (EX / example).read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


@pytest.fixture
def int_literal_fa(tmp_path):
    """The causal seed with its float scale written as integer literals: `x * 12751743 /
    100000000` is float arithmetic (C converts each int operand to float)."""
    return _variant(tmp_path, "flash_atten_causal.co",
                    "acc_s.at(i, j) * 0.12751743f - scores_max.at(i) * 0.12751743f",
                    "acc_s.at(i, j) * 12751743 / 100000000 - scores_max.at(i) * 12751743 "
                    "/ 100000000", "int_lit.co")


@pytest.fixture
def condition_gemm(tmp_path):
    """`cdiv(K, BK) * (K > 0)`: a comparison used as a number (C: 1 or 0)."""
    return _variant(tmp_path, "gemm.co", "k_tiles = cdiv(K, BK);",
                    "k_tiles = cdiv(K, BK) * (K > 0);", "cond_num.co")


def test_promotions_are_explicit_in_the_ir(int_literal_fa, condition_gemm):
    fa_ir = driver.compile_file(str(int_literal_fa), "ir")
    assert "12751743.0" in fa_ir and "100000000.0" in fa_ir  # the literals became floats
    gemm_ir = driver.compile_file(str(condition_gemm), "ir")
    assert "to<s32>(K > 0)" in gemm_ir


@pytest.mark.parametrize("target", TARGETS)
def test_int_literal_in_float_code_assembles(int_literal_fa, target):
    ptx = driver.compile_file(str(int_literal_fa), "ptx", target)
    if assemble(ptx, target) is None:
        pytest.skip("ptxas is not installed")


@pytest.mark.parametrize("target", TARGETS)
def test_condition_as_number_assembles(condition_gemm, target):
    ptx = driver.compile_file(str(condition_gemm), "ptx", target)
    assert "selp.b32" in ptx  # the predicate becomes 1 or 0 before the multiply
    if assemble(ptx, target) is None:
        pytest.skip("ptxas is not installed")


def test_interpreter_agrees_with_the_promoted_meaning(int_literal_fa, condition_gemm):
    q, k, v = bshd(1, 128, 1, 1), bshd(1, 128, 1, 2), bshd(1, 128, 1, 3)
    o = torch.full_like(q, float("nan"))
    choreo_py.interpret(str(int_literal_fa), dict(Q=q, K=k, V=v, O=o))
    assert rel(o, sdpa(q, k, v)) < 1e-2
    g = torch.Generator().manual_seed(0)
    a = torch.randn(128, 64, generator=g).to(torch.bfloat16)
    b = torch.randn(128, 64, generator=g).to(torch.bfloat16)
    c = torch.full((128, 128), float("nan"), dtype=torch.bfloat16)
    choreo_py.interpret(str(condition_gemm), dict(A=a, B=b, C=c))
    assert rel(c, a.float() @ b.float().T) < 1e-2


@pytest.mark.parametrize("op,a,b,want", [
    ("*", ir.Sym("x", "f32"), ir.Const(2, "s32"), ("f32", ir.Const(2.0, "f32"))),
    ("*", ir.Sym("n", "s32"), ir.Bin(">", ir.Sym("n", "s32"), ir.Const(0, "s32"), "bool"),
     ("s32", ir.Call("to", (ir.Bin(">", ir.Sym("n", "s32"), ir.Const(0, "s32"), "bool"),), "s32"))),
    ("+", ir.Sym("x", "f32"), ir.Sym("n", "s32"),
     ("f32", ir.Call("to", (ir.Sym("n", "s32"),), "f32"))),
])
def test_binop_converts_the_operand(op, a, b, want):
    e = B.binop(op, a, b)
    assert isinstance(e, ir.Bin) and e.dtype == want[0] and e.rhs == want[1]
    assert e.lhs.dtype == e.rhs.dtype == e.dtype


def test_evaluation_follows_c():
    n = ir.Sym("n", "s32")
    e = B.binop("*", B.binop("+", n, ir.Const(1, "s32")), B.binop(">", n, ir.Const(3, "s32")))
    assert evaluate(e, {"n": 5}) == 6 and evaluate(e, {"n": 2}) == 0
    half = B.binop("/", ir.Sym("x", "f32"), ir.Const(2, "s32"))
    assert evaluate(half, {"x": 3.0}) == 1.5  # float division, not integer division


def test_logical_operators_take_conditions():
    e = B.binop("&&", ir.Sym("n", "s32"), ir.Sym("m", "s32"))
    assert e.lhs.dtype == e.rhs.dtype == "bool"


CONDITIONS = """__co__ void f(global f32[M, K] a) {
  parallel q by 1 : block {
    shared f32[16, 16] s;
    parallel p by 2 : group-4 {
      inthreads.async (p == 0) {
        mutable s32 n = K;
        if (n) { n = n - 1; }
        while (n > 0) { n = n - 1; }  // a while takes a bool or an event (check's rule)
        b = (n > 1) ? (n > 2) : (n > 3);
        if (b) { n = 2; }
      }
    }
  }
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_numbers_as_conditions_and_selected_conditions(tmp_path, target):
    """`if (n)` compares n with zero; a `?:` of two conditions is a condition (no selp of
    predicates, which PTX does not have)."""
    path = tmp_path / "c.co"
    path.write_text(CONDITIONS)
    text = driver.compile_file(str(path), "ir")
    assert "if n != 0" in text and "while n > 0" in text
    ptx = driver.compile_file(str(path), "ptx", target)
    assert "or.pred" in ptx
    if assemble(ptx, target) is None:
        pytest.skip("ptxas is not installed")
