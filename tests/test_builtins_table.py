"""One table of built-in functions (choreo_py/frontend/builtins.py), read by the parser,
the rule checks and sema, so that they cannot disagree on what is a builtin; a name that
is not declared is reported once, with a "did you mean" among the builtins too.

tests/co/layernorm_rsqrtf_bug.co calls `__rsqrtf` (a C spelling; the language's builtin
is `__rsqrt`): `check` said "'__rsqrtf' is not declared" twice (an error and a warning),
without a hint, as sema's table had `__rsqrtf` and the parser's did not.
"""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py import cli
from choreo_py.frontend import astbuild_exprs, builtins
from choreo_py.ir import BUILTINS
from choreo_py.sema import exprs

REPRO = os.path.join(os.path.dirname(__file__), "co", "layernorm_rsqrtf_bug.co")


def test_parser_and_sema_read_the_one_table():
    assert astbuild_exprs.BUILTIN_FUNCTIONS == frozenset(builtins.FUNCTIONS)
    assert exprs.BUILTIN_FUNCS == {k: v for k, v in builtins.FUNCTIONS.items() if v}
    assert all(fn in BUILTINS for fn in exprs.BUILTIN_FUNCS.values())
    assert not builtins.is_builtin("__rsqrtf") and builtins.is_builtin("__rsqrt")


@pytest.mark.parametrize("argv", [["check"], ["check", "--strict"],
                                  ["compile", "--emit", "ir", "-o", "-"],
                                  ["run", "--shape", "M=2,N=128"]])
def test_an_undeclared_builtin_spelling_is_reported_once_with_a_hint(argv, capsys):
    rc = cli.main([argv[0], REPRO, *argv[1:]])
    err = capsys.readouterr().err
    assert rc == 1, err
    message = "'__rsqrtf' is not declared (did you mean '__rsqrt'?)"
    assert err.count("__rsqrtf' is not declared") == 1, err
    assert f"layernorm_rsqrtf_bug.co:46:14: error: {message}" in err, err


def test_the_builtin_it_meant_checks(tmp_path, capsys):
    path = tmp_path / "fixed.co"
    path.write_text(open(REPRO).read().replace("__rsqrtf(", "__rsqrt("))
    assert cli.main(["check", str(path)]) == 0, capsys.readouterr().err


def test_a_use_before_the_declaration_is_reported_once(tmp_path, capsys):
    """The rule checks warn (the reference's parse stage accepts it), sema cannot build
    it: one error, in the rule checks' words."""
    path = tmp_path / "t.co"
    path.write_text("__co__ void k(global f32[64] o) {\n  parallel q by 64 : thread {\n"
                    "    o.at(q) = y;\n    y = 1.0f;\n  }\n}\n")
    assert cli.main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("t.co:3:15:") == 1, err
    assert "t.co:3:15: error: 'y' is used before its declaration" in err, err


FABS = """\
__co__ void k(global f32[64] x, global f32[64] o) {
  parallel q by 64 : thread {
    o.at(q) = __fabs(x.at(q)) + __rsqrt(4.0f);
  }
}
"""


def test_every_math_builtin_of_the_table_is_computed(tmp_path):
    """`__fabs` is the language's; sema computed only a C spelling (`__fabsf`) nobody
    could write: the table gives it the IR's abs."""
    path = tmp_path / "fabs.co"
    path.write_text(FABS)
    x = torch.linspace(-3, 3, 64)
    out = torch.zeros(64)
    choreo_py.interpret(str(path), target="sm_90a").k(x, out)
    assert torch.allclose(out, x.abs() + 0.5)
