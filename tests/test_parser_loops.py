"""with/foreach/apply/while/if and the jump statements."""
from choreo_py.frontend import ast

from parser_util import body, one


def test_with_forms():
    stmt = one("with index in [3, 2] {}")
    assert isinstance(stmt, ast.With)
    (b,) = stmt.bindings
    assert b.name == "index" and b.elements == [] and isinstance(b.domain, ast.MdSpanLit)
    stmt = one("with idx = {x, y} in sp {}")
    assert stmt.bindings[0].name == "idx" and stmt.bindings[0].elements == ["x", "y"]
    stmt = one("with {x, y} in a.span {}")
    b = stmt.bindings[0]
    assert b.name is None and isinstance(b.domain, ast.Member) and b.domain.name == "span"


def test_with_several_bindings_and_where():
    stmt = one("with a in s1,\n b in s2, c in s3\nwhere b <-> c { x = 1; }")
    assert [b.name for b in stmt.bindings] == ["a", "b", "c"]
    assert [(w.lhs, w.rhs) for w in stmt.where] == [("b", "c")]


def test_with_domain_arithmetic():
    stmt = one("with k in K / MMA_K {}")
    assert isinstance(stmt.bindings[0].domain, ast.Binary)
    stmt = one("with i in 3 {}")
    assert stmt.bindings[0].domain.value == 3


def test_foreach_over_bounded_variables():
    stmt = one("foreach i, j { }")
    assert isinstance(stmt, ast.Foreach) and stmt.bindings == []
    assert [(r.var, r.bound, r.sliced) for r in stmt.ranges] == [("i", "i", False),
                                                                  ("j", "j", False)]


def test_foreach_ranges():
    stmt = one("foreach m(1:-1:2), n(:), c = a(1:) {}")
    m, n, c = stmt.ranges
    assert m.sliced and m.lower.value == 1 and m.upper.op == "-" and m.step.value == 2
    assert n.sliced and n.lower is None and n.upper is None
    assert (c.var, c.bound) == ("c", "a") and c.upper is None


def test_foreach_sugar_declares_bindings():
    stmt = one("foreach {issue} in [kv_bound] { x = issue; }")
    assert stmt.ranges == [] and stmt.bindings[0].elements == ["issue"]
    stmt = one("foreach index in 6 if (p < 3) {}")
    assert stmt.bindings[0].name == "index"
    assert isinstance(stmt.body.stmts[0], ast.If)


def test_foreach_annotations():
    stmt = one("foreach i in [8] : unroll, vectorize(i, 4) {}")
    assert [(a.name, len(a.args)) for a in stmt.attrs] == [("unroll", 0), ("vectorize", 2)]


def test_apply():
    stmt = one("apply {i, j} in acc.span\n  acc.at(i, j) = 0.0f;")
    assert isinstance(stmt, ast.Apply) and stmt.indices == ["i", "j"]
    assert stmt.domain.name == "span"
    assert isinstance(stmt.body.stmts[0], ast.Assign)


def test_if_else_and_dangling_else():
    stmt = one("if (a > 3)\n if (b < 2) d = 1;\n else d = 2;")
    assert stmt.orelse is None
    assert stmt.then.stmts[0].orelse is not None


def test_while_and_jumps():
    stmt = one("while (a && b[0]) { break; continue; }")
    assert isinstance(stmt, ast.While)
    assert [type(s).__name__ for s in stmt.body.stmts] == ["Break", "Continue"]
    a, b, c = body("return;\nreturn x + 1;\nyield;")
    assert a.value is None and b.value.op == "+" and isinstance(c, ast.Yield)


def test_stray_semicolons_are_ignored():
    assert body(";;\nx = 1;;") and len(body(";;\nx = 1;;")) == 1
