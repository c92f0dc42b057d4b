"""Scalar C semantics, defined once (choreo_py/ir/c_scalars.py): constant folding in sema,
the passes' evaluator and the interpreter compute the same value for every integer
operation, wrap-around and truncation included."""
from __future__ import annotations

import itertools

import pytest

from choreo_py.ir import c_scalars as C
from choreo_py import ir
from choreo_py.ir import build as ir_build, eval as ir_eval
from choreo_py.interp.scalars import Evaluator

VALUES = [0, 1, 7, -7, 255, 0x7FFFFFFF, -0x80000000, 0xFFFFFFFF, 1 << 40]
OPS = ["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "==", "<", ">="]
DTYPES = ["s32", "u32", "s64", "u8"]


def test_promotion_rules():
    assert C.promote("s32", "f32") == "f32" and C.promote("bf16", "s32") == "f32"
    assert C.promote("u32", "s32") == "u32" and C.promote("s64", "u32") == "s64"
    assert C.promote("bool", "s32") == "s32"
    assert C.promote("s32", "u32", a_literal=True) == "u32"  # `2 % order` stays u32


def test_integer_rules():
    assert C.wrap(0x80000000, "s32") == -0x80000000 and C.wrap(-1, "u32") == 0xFFFFFFFF
    assert (C.c_div(-7, 2), C.c_mod(-7, 2)) == (-3, -1)
    assert (C.cdiv(7, 2), C.cdiv(8, 2), C.cdiv(0, 4)) == (4, 4, 0)
    assert C.to_int(-2.9, "s32") == -2 and C.to_int(2.0 ** 32 + 3, "u32") == 3
    with pytest.raises(ValueError):
        C.to_int(float("nan"), "s32")
    with pytest.raises(ZeroDivisionError):
        C.int_binary("%", 1, 0, "s32")


def _three_ways(op, a, b, dtype):
    """(folded by ir_build, evaluated by ir_eval, evaluated by the interpreter)."""
    x, y = ir.Const(C.wrap(a, dtype), dtype), ir.Const(C.wrap(b, dtype), dtype)
    folded = ir_build.binop(op, x, y)
    expr = ir.Bin(op, ir.Sym("x", dtype), ir.Sym("y", dtype),
                  "bool" if op in C.COMPARISONS else dtype)
    env = {"x": x.value, "y": y.value}
    return folded, ir_eval.evaluate(expr, env), Evaluator(None)(expr, env)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_folding_evaluation_and_interpreter_agree(op, dtype):
    checked = 0
    for a, b in itertools.product(VALUES, VALUES):
        if op in ("/", "%") and C.wrap(b, dtype) == 0:
            continue
        if op in ("<<", ">>") and not 0 <= C.wrap(b, dtype) < 64:
            continue
        folded, evaluated, interpreted = _three_ways(op, a, b, dtype)
        assert isinstance(folded, ir.Const), (op, a, b)
        assert folded.value == evaluated == interpreted, (op, a, b, dtype)
        checked += 1
    assert checked >= 20
