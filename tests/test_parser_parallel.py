"""parallel-by (levels, bindings, annotations, streams) and inthreads."""
from choreo_py.frontend import ast

from parser_util import body, case, one, program


def _levels(src):
    stmt = one(src)
    assert isinstance(stmt, ast.ParallelBy)
    return stmt, stmt.levels


def test_anonymous_and_named():
    _, (lv,) = _levels("parallel by 12 {}")
    assert lv.var is None and lv.elements == [] and lv.bounds[0].value == 12
    _, (lv,) = _levels("parallel p by 6 {}")
    assert lv.var == "p" and lv.bounds[0].value == 6


def test_single_bound_in_brackets_is_the_bound():
    _, (lv,) = _levels("parallel p by [8] {}")
    assert len(lv.bounds) == 1 and lv.bounds[0].value == 8


def test_grouped_variables():
    _, (lv,) = _levels("parallel {x, y} by [2, 4] : block {}")
    assert lv.var is None and lv.elements == ["x", "y"] and lv.bracketed
    assert [b.value for b in lv.bounds] == [2, 4] and lv.level == "block"
    _, (lv,) = _levels("parallel g = {a, b} by [2, 4] {}")
    assert lv.var == "g" and lv.elements == ["a", "b"]


def test_multi_level_and_async():
    stmt, levels = _levels("parallel.async p by n : block, q by 4 : thread {}")
    assert stmt.is_async
    assert [(l.var, l.level) for l in levels] == [("p", "block"), ("q", "thread")]


def test_nested_single_statement_bodies():
    stmt = one("parallel by 1 : block\nparallel by 1 : group-4\nparallel by 1 : thread {}")
    inner = stmt.body.stmts[0]
    assert isinstance(inner, ast.ParallelBy) and inner.levels[0].level == "group-4"
    assert inner.body.stmts[0].levels[0].level == "thread"


def test_device_target_and_cooperative():
    _, (lv,) = _levels("parallel.async by 1 : device(cpu) {}")
    assert lv.level == "device" and lv.device_target == "cpu"
    _, (lv,) = _levels("parallel by 2 : block<cooperative> {}")
    assert lv.cooperative


def test_stream_binding():
    fn = program(case("parallel_forms.co")).functions[1]
    a, b = fn.body.stmts
    assert a.stream == "s0" and not a.is_async
    assert b.stream == "s0" and b.is_async


def test_launch_bounds_attribute():
    stmt = one("[[launch_bounds(_, 1)]]\n[[maxnreg(40)]]\nparallel p by 2 : block {}")
    assert [a.name for a in stmt.attributes] == ["launch_bounds", "maxnreg"]
    assert stmt.attributes[0].args[0].id == "_"


def test_empty_and_single_statement_bodies():
    a, b = body("parallel by 3 ;\nparallel by 3 i = 3;")
    assert a.body.stmts == []
    assert isinstance(b.body.stmts[0], ast.Assign)


def test_parallel_forms_case():
    fn = program(case("parallel_forms.co")).functions[0]
    assert all(isinstance(s, ast.ParallelBy) for s in fn.body.stmts)


def test_inthreads():
    stmt = one("inthreads.async (p == 0) { x = 1; }")
    assert isinstance(stmt, ast.InThreads) and stmt.is_async
    assert stmt.cond.op == "=="
    stmt = one("inthreads (p < 2);")
    assert not stmt.is_async and stmt.body.stmts == []
