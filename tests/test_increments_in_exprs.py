"""`++` / `--` inside expressions and `__alignup` / `__aligndown` as values.

The reference's grammar (LancerLab/croqtile lib/parser.yy, `s_expr`: `PPLUS IDENTIFIER`,
`IDENTIFIER PPLUS`, ...) allows an increment of a variable in any expression, with C's
meaning (its code generators emit `i++`: lib/Target/CPU/cc_codegen.cpp); `__alignup` /
`__aligndown` are built-ins of its CPU model (tools/co-mock/mock_interp.cpp CallBIF).
Where the expression is evaluated once and the variable is named once, sema/increments.py
evaluates the increment in turn; elsewhere it is refused by name, located.
"""
from __future__ import annotations

import os

import pytest

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

HERE = os.path.join(os.path.dirname(__file__), "co", "comock", "increments.co")


def test_increments_and_alignment_in_expressions(capfd):
    """Host: i=0; x = i++ + 1 -> i 1, x 1; y = __alignup(3, 16) + --j (j 5 -> 4) -> 20;
    z = __aligndown(20, 16) -> 16. Thread q: buf.at(k++) with k = q, w = k++ + 1."""
    choreo_py.interpret(HERE, target="sm_90a").f(3)
    lines = capfd.readouterr().out.splitlines()
    assert lines[0] == "1 1 20 16 4"
    assert sorted(lines[1:]) == ["2 2 5 4", "3 3 5 4"]


@pytest.mark.ptxas
def test_they_lower_on_both_targets():
    for target in ("sm_90a", "sm_100a"):
        text = compile_file(HERE, "ptx", target)
        assert f".target {target}" in text and ".entry" in text
        _, log = ptxas(text, target, verbose=True)
        assert "error" not in log.lower()


@pytest.mark.parametrize("line", [
    "int x = i++ + i;",                 # unsequenced in C
    "int x = a > 1 ? i++ : 0;",         # evaluated only sometimes
    "int x = (a > 1) && (i++ > 0);",
])
def test_an_increment_without_one_answer_is_refused_by_name(tmp_path, line):
    path = tmp_path / "r.co"
    path.write_text("__co__ void f(int a) {\n  mutable int i = 0;\n  " + line +
                    "\n  println(x);\n}\n")
    with pytest.raises(ChoreoError) as e:
        compile_file(str(path), "ir", "sm_90a")
    assert e.value.loc.line == 3
    assert "'++' inside this expression" in e.value.message
