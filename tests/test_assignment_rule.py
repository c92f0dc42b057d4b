"""What `name = expr` binds (choreo_py/frontend/bindings.py), one rule for the rule checks,
sema, the interpreter and the backends: an assignment in a loop body (or an `if`, a
`foreach`, host code) to a variable of an enclosing block updates it, so the loop counts;
to an immutable one it is an error at the assignment, never a silent new binding.

tests/co/loop_assign.co is the reproducer (`int i = 0; while (i < 8) { ...; i = i + 1; }`:
it compiled to `while true` and output 0); tests/co/loop_counts.co has the counting forms,
run in the interpreter and in the emulator on the PTX of both targets.
"""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py import cli
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file

HERE = os.path.join(os.path.dirname(__file__), "co")
REPRO = os.path.join(HERE, "loop_assign.co")
COUNTS = os.path.join(HERE, "loop_counts.co")
X = torch.arange(64, dtype=torch.int32) - 20

#: function -> its output for the input X
EXPECTED = {
    "count_mutable": 8 * X,
    "count_s32": 8 * X,
    "nested_bodies": 8 * X + 100 * (X % 2 != 0).to(torch.int32),
    "count_on_host": 8 * X,
}


def _check(lib) -> None:
    for name, want in EXPECTED.items():
        out = torch.zeros(64, dtype=torch.int32)
        getattr(lib, name)(X, out)
        assert torch.equal(out, want), f"{name}: {out.tolist()}"


def _ir_of(function: str) -> str:
    text = compile_file(COUNTS, "ir")
    start = text.index(f"kernel {function}(")
    return text[start:text.index("\n}\n", start)]


@pytest.mark.parametrize("function", ["count_mutable", "count_s32"])
def test_the_loop_carries_its_variables_in_the_ir(function):
    ir = _ir_of(function)
    assert "while true" not in ir and "let acc" not in ir
    assert "var i: s32 = 0" in ir and "var acc: s32 = 0" in ir
    assert "while i < 8 {" in ir and "i := i + 1" in ir and "acc := acc + " in ir


def test_host_loop_updates_the_host_variable():
    text = compile_file(COUNTS, "ir")
    host = text[text.index("func count_on_host("):]
    assert "var n: s32 = 0" in host and "n := n + 1" in host


def test_loops_count_in_the_interpreter():
    _check(choreo_py.interpret(COUNTS, target="sm_90a"))


def test_choreo_run_counts(capsys):
    rc = cli.main(["run", COUNTS, "--function", "count_mutable", "--check", "none"])
    assert rc == 0, capsys.readouterr().err


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_loops_count_in_the_emulated_ptx(target):
    _check(choreo_py.emulate_program(COUNTS, target=target))


MESSAGE = ("'acc' is immutable (declared at 4:9, outside this block) and can not be assigned; "
           "declare it 'mutable' to change it")


@pytest.mark.parametrize("argv", [["compile", REPRO, "--emit", "ir", "-o", "-"],
                                  ["check", "--strict", REPRO], ["run", REPRO]])
def test_assigning_an_immutable_of_an_enclosing_block_is_a_located_error(argv, capsys):
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc == 1, err
    assert f"loop_assign.co:6:7: error: {MESSAGE}" in err
    assert "      acc = acc + input.at(q);\n      ^" in err
    assert "Traceback" not in err


def test_plain_check_warns_once_per_assignment(capsys):
    """The reference's parse-only stage accepts the program: a plain `check` warns (each
    assignment once: the rule checks own the report, sema does not repeat it)."""
    rc = cli.main(["check", REPRO])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert err.count("warning: 'acc' is immutable") == 1
    assert err.count("warning: 'i' is immutable") == 1
    assert "error" not in err


BODIES = {
    "foreach": "foreach j in [4] {{\n      {stmt}\n    }}",
    "if": "if (q > 3) {{\n      {stmt}\n    }}",
    "nested": "foreach j in [2] {{\n      if (j > 0) {{\n        {stmt}\n      }}\n    }}",
}


def _kernel(decl: str, body: str) -> str:
    return ("__co__ void k(global s32[64] out) {\n  parallel q by 64 : thread {\n"
            f"    {decl} v = 1;\n    {body}\n    out.at(q) = v;\n  }}\n}}\n")


@pytest.mark.parametrize("form", sorted(BODIES))
@pytest.mark.parametrize("stmt", ["v = v + 1;", "v += 1;", "v++;"])
def test_every_inner_block_updates_a_variable_and_refuses_an_immutable(tmp_path, form, stmt):
    path = tmp_path / "t.co"
    path.write_text(_kernel("mutable int", BODIES[form].format(stmt=stmt)))
    assert "v := v + 1" in compile_file(str(path), "ir")
    path.write_text(_kernel("int", BODIES[form].format(stmt=stmt)))
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ir")
    assert "'v' is immutable (declared at 3:9" in info.value.message


def test_host_code_refuses_an_immutable_updated_in_a_loop(tmp_path, capsys):
    path = tmp_path / "t.co"
    path.write_text("__co__ void k(global s32[4] out) {\n  int n = 0;\n  foreach j in [4] {\n"
                    "    n = n + 1;\n  }\n  parallel q by 4 : thread {\n    out.at(q) = n;\n"
                    "  }\n}\n")
    for argv in (["compile", str(path), "--emit", "ir", "-o", "-"], ["run", str(path)]):
        rc = cli.main(argv)
        err = capsys.readouterr().err
        assert rc == 1 and "t.co:4:5: error: " in err, err
        assert "'n' is immutable (declared at 2:7, outside this block)" in err, err


FIXED = {
    "a parameter": ("__co__ void k(global s32[64] out, int w) {\n  parallel q by 64 : thread {\n"
                    "    w = 3;\n    out.at(q) = w;\n  }\n}\n", "'w' is a parameter"),
    "a parallel variable": ("__co__ void k(global s32[64] out) {\n  parallel q by 64 : thread {"
                            "\n    q = 0;\n    out.at(q) = 1;\n  }\n}\n",
                            "'q' is a bounded variable"),
}


@pytest.mark.parametrize("what", sorted(FIXED))
@pytest.mark.parametrize("command", ["compile", "run"])
def test_a_name_that_is_never_a_variable_says_so(tmp_path, capsys, what, command):
    """A parameter or a parallel index can not be declared 'mutable': the message says
    what it is and how to change a copy (static repros s17, s18)."""
    text, subject = FIXED[what]
    path = tmp_path / "t.co"
    path.write_text(text)
    argv = [command, str(path)] + (["--emit", "ir", "-o", "-"] if command == "compile" else [])
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert f"t.co:3:5: error: {subject}" in err, err
    assert "copy it into a 'mutable' variable to change the copy" in err, err
