"""ituples and mdspans: declarations, literals, arithmetic, derivations."""
import pytest

from choreo_py.frontend import ast

from parser_util import body, error, expr, one


def test_mdspan_declarations():
    a, b, c = body("sp : [7, 8];\nmdspan dims : [9, c];\nmdspan<3> s3 : [a, b, c];")
    assert all(isinstance(s, ast.MdSpanDecl) for s in (a, b, c))
    assert a.name == "sp" and a.rank is None
    assert [e.value for e in a.value.elements] == [7, 8]
    assert c.rank == 3


def test_ituple_declarations():
    a, b, c = body("ituple t = {a, 9, 102};\nituple<4> g = {c, 2, 4, 3};\nn = {1, 2};")
    assert isinstance(a, ast.ITupleDecl) and isinstance(a.value, ast.ITupleLit)
    assert b.rank == 4
    assert isinstance(c, ast.Assign) and isinstance(c.value, ast.ITupleLit)


def test_shape_arithmetic_and_size():
    e = expr("d.span / {7, 8, 9} * {1, 2}")
    assert e.op == "*" and e.lhs.op == "/"
    assert isinstance(e.lhs.lhs, ast.Member)
    e = expr("|input.span|")
    assert isinstance(e, ast.SizeOf) and e.operand.name == "span"
    e = expr("|f32|")
    assert isinstance(e.operand, ast.TypeRef) and e.operand.name == "f32"


def test_dimension_access():
    e = expr("sp(0) + index(1)(-2) + d.span(2)")
    first = e.lhs.lhs
    assert isinstance(first, ast.DimOf) and first.base.id == "sp"
    nested = e.lhs.rhs
    assert isinstance(nested.base, ast.DimOf) and nested.index.op == "-"
    last = e.rhs
    assert isinstance(last, ast.DimOf) and isinstance(last.base, ast.Member)


def test_derivation_parens_pick_dimensions():
    stmt = one("r : input.span[(1), (0)/2, 4];")
    idx = stmt.value
    assert isinstance(idx, ast.Index)
    assert isinstance(idx.indices[0], ast.DimIndex) and idx.indices[0].index.value == 1
    assert isinstance(idx.indices[1].lhs, ast.DimIndex)
    assert isinstance(idx.indices[2], ast.IntLit)


def test_parens_in_plain_shapes_are_values():
    stmt = one("mds : [(1)];")
    assert isinstance(stmt.value.elements[0], ast.IntLit)


def test_ituple_selection():
    stmt = one("picked = vals {(2), (0)};")
    assert isinstance(stmt.value, ast.ITupleSelect)
    assert [i.index.value for i in stmt.value.indices] == [2, 0]


def test_concatenation_literal():
    e = expr("[sp, 6]")
    assert isinstance(e, ast.MdSpanLit) and e.elements[0].id == "sp"


@pytest.mark.parametrize("src, message", [
    ("mdspan it = [7, 8];", "must use ':' to initialize a mdspan."),
    ("ituple it: {7, 8};", "must use '=' to initialize an ituple."),
    ("ituple it;", "an ituple must be initialized."),
    ("ituple it[2] = {7, 8};", "no ituple array is allowed."),
])
def test_initialisation_rules(src, message):
    d = error(f"__co__ void f() {{\n  {src}\n}}\n")
    assert d.message == message and d.loc.line == 2


def test_rank_must_be_a_literal():
    d = error("__co__ void f(int a) {\n  ituple<a> it = {7, 8};\n}\n")
    assert d.message == "expected an integer, got name 'a'"
    assert (d.loc.line, d.loc.col) == (2, 10)


def test_empty_shape_is_a_syntax_error():
    d = error("__co__ void f() {\n  mds : [];\n}\n")
    assert d.message == "expected an expression, got ']'"
