"""The static checks dispatch by tables keyed by IR node kind, one entry for every kind:
a kind added to choreo_py/ir without an entry is an internal error when met, never a
statement (or expression) the check skips silently."""
from __future__ import annotations

import pytest

from choreo_py import ir
from choreo_py.diagnostics import InternalError
from choreo_py.passes import pipeline_check, static_faults, static_ranges

STATEMENT_KINDS = sorted((c for c in vars(ir).values()
                          if isinstance(c, type) and issubclass(c, ir.Stmt) and c is not ir.Stmt),
                         key=lambda c: c.__name__)
EXPRESSION_KINDS = sorted((c for c in vars(ir).values()
                           if isinstance(c, type) and issubclass(c, ir.Expr) and c is not ir.Expr),
                          key=lambda c: c.__name__)
TABLES = {"static_faults.STATEMENTS": static_faults.STATEMENTS,
          "pipeline_check.SIM_STATEMENTS": pipeline_check.SIM_STATEMENTS}


def test_the_kinds_are_found():
    assert {ir.Let, ir.Mma, ir.SparseMma, ir.Yield, ir.Asm} <= set(STATEMENT_KINDS)
    assert {ir.Const, ir.BufElem, ir.Select} <= set(EXPRESSION_KINDS)


@pytest.mark.parametrize("table", sorted(TABLES))
@pytest.mark.parametrize("kind", STATEMENT_KINDS, ids=lambda c: c.__name__)
def test_every_statement_kind_has_an_entry(table, kind):
    assert kind in TABLES[table], f"{table} has no entry for ir.{kind.__name__}"


@pytest.mark.parametrize("table", sorted(TABLES))
def test_the_tables_name_only_statement_kinds(table):
    assert set(TABLES[table]) <= set(STATEMENT_KINDS)


@pytest.mark.parametrize("kind", EXPRESSION_KINDS, ids=lambda c: c.__name__)
def test_every_expression_kind_has_an_interval_rule(kind):
    assert kind in static_ranges.INTERVALS


class _Unknown(ir.Stmt):
    """A statement kind no table knows."""

    loc = None


class _UnknownExpr(ir.Expr):
    pass


def test_an_unknown_statement_is_an_internal_error_in_the_fault_walk():
    k = ir.Kernel("k", [], [], body=[_Unknown()])
    with pytest.raises(InternalError, match="no rule for the statement kind _Unknown"):
        static_faults.faults(k)


def test_an_unknown_statement_is_an_internal_error_in_the_simulation():
    sim = pipeline_check._Sim(ir.Kernel("k", [], []), {}, "s")
    with pytest.raises(InternalError, match="no rule for the statement kind _Unknown"):
        list(sim.stmt(_Unknown(), {}, None, {}))


def test_an_unknown_expression_is_an_internal_error_in_the_ranges():
    with pytest.raises(InternalError, match="_UnknownExpr"):
        static_ranges.interval(_UnknownExpr(), {})


def test_a_yield_ends_the_role_in_the_simulation():
    """`yield`: the thread leaves the kernel; its later triggers never happen."""
    k = ir.Kernel("k", [], [], events=[ir.Event("e", None)])
    sim = pipeline_check._Sim(k, {}, "s")
    run = pipeline_check._RoleRun("r", None)
    body = [ir.Yield(), ir.Trigger(ir.EventRef("e"))]
    list(sim.run_role(body, {}, run))
    assert run.triggers == {}
