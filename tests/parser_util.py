"""Helpers for the parser tests: parse small Choreo snippets."""
from __future__ import annotations

from pathlib import Path

import pytest

from choreo_py.frontend import ast, parse_checks
from choreo_py import frontend
from choreo_py.diagnostics import ChoreoError

CASES = Path(__file__).resolve().parent / "parse_cases"


def program(src: str, name: str = "<test>") -> ast.Program:
    return frontend.parse_text(src, name)


def checked(src: str, name: str = "<test>") -> ast.Program:
    """Parsed and through the parse-level checks (not the semantic analysis,
    so that snippets need not declare everything they use)."""
    prog = program(src, name)
    parse_checks.check(prog)
    return prog


def function(src: str) -> ast.FunctionDef:
    """The only function of `src`."""
    fns = program(src).functions
    assert len(fns) == 1
    return fns[0]


def body(stmts_src: str, params: str = "") -> list[ast.Stmt]:
    """Statements of `__co__ void f(params) { stmts_src }`."""
    return function(f"__co__ void f({params}) {{\n{stmts_src}\n}}\n").body.stmts


def one(stmts_src: str, params: str = "") -> ast.Stmt:
    stmts = body(stmts_src, params)
    assert len(stmts) == 1, stmts
    return stmts[0]


def expr(text: str) -> ast.Expr:
    """The value of `x = text;`."""
    stmt = one(f"x = {text};")
    assert isinstance(stmt, ast.Assign)
    return stmt.value


def error(src: str, check: bool = True):
    """The first diagnostic of a program expected to be rejected."""
    with pytest.raises(ChoreoError) as info:
        (checked if check else program)(src)
    return info.value.diagnostics[0]


def case(name: str) -> str:
    return (CASES / name).read_text(encoding="utf-8")
