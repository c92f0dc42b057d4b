"""Syntax and parse-level errors: messages in Choreo terms, with locations."""
import subprocess
import sys

import pytest

from choreo_py.diagnostics import ChoreoError

from parser_util import checked, error


def _err(src):
    return error(src, check=True)


def test_missing_semicolon_points_after_the_statement():
    d = _err("__co__ void f(int a) {\n  x = a + 1\n  y = 3;\n}\n")
    assert d.message == "expected ';' after statement"
    assert (d.loc.line, d.loc.col) == (2, 12)


def test_missing_expression():
    d = _err("__co__ void f() {\n  x = ;\n}\n")
    assert d.message == "expected an expression, got ';'"
    assert (d.loc.line, d.loc.col) == (2, 7)


def test_expected_a_type():
    d = _err("__co__ void f( {\n}\n")
    assert d.message.startswith("expected a type")


def test_unexpected_closing_brace():
    d = _err("__co__ void f() {\n  x = (1 + 2 }\n")
    assert d.message.startswith("unexpected '}'")
    assert (d.loc.line, d.loc.col) == (2, 14)


def test_after_parallel():
    d = _err("__co__ void f() {\n  parallel [p] by 6 { }\n}\n")
    assert d.message == "expected '{', 'by' or a name after 'parallel'"
    assert (d.loc.line, d.loc.col) == (2, 12)


def test_missing_closing_brace_at_end():
    d = _err("__co__ void f() {\n  x = 1;\n")
    assert d.message == "expected '}' at end of input"


def test_list_separator():
    d = _err("__co__ void f(int a) {\n  it = {7 a};\n}\n")
    assert d.message == "expected '}' or ',', got name 'a'"
    assert (d.loc.line, d.loc.col) == (2, 11)


def test_bad_character():
    d = _err("__co__ void f() {\n  x = 1 @ 2;\n}\n")
    assert d.message == "unexpected character '@'" and (d.loc.line, d.loc.col) == (2, 9)


def test_no_lark_terminal_names_leak():
    sources = ["__co__ void f() { x = ; }", "__co__ void f() { parallel p by }",
               "__co__ void f() { with x in | {} }", "__co__ void f(int a int b) {}",
               "__co__ void f() { mma.row.col a b c; }", "__co__ void f() { x = y..z; }"]
    for src in sources:
        with pytest.raises(ChoreoError) as info:
            checked(src)
        msg = info.value.message
        assert "__ANON" not in msg and "SEMICOLON" not in msg and "RBRACE" not in msg, msg


@pytest.mark.parametrize("literal, message", [
    ("18446744073709551619ull",
     "unsigned integer literal '18446744073709551619ull' out of range "
     "[0, 18446744073709551615]."),
    ("9223372036854775808",
     "signed integer literal '9223372036854775808' out of range [0, 9223372036854775807]."),
    ("0x1ffffffffffffffffULL",
     "unsigned integer literal '0x1ffffffffffffffffULL' out of range [0, 0xffffffffffffffff]."),
])
def test_integer_literal_ranges(literal, message):
    d = _err(f"__co__ void f() {{\n  x = {literal};\n}}\n")
    assert d.message == message and (d.loc.line, d.loc.col) == (2, 7)


def test_mdspan_sizes_all_reported():
    with pytest.raises(ChoreoError) as info:
        checked("__co__ void foo(f32[5-10, 5-5, 3/4, 10/5-3, 10%2] a) {}\n"
                            "__co__ void bar(f32[5+(3-10), 3/(3-4), (3-6)*(4-8)] b) {}\n")
    values = [d.message.split('"')[1] for d in info.value.diagnostics]
    assert values == ["-5", "0", "0", "-1", "0", "-2", "-3"]


@pytest.mark.parametrize("src, message", [
    ("parallel {p} by [6, 128] {}", "parallel variables are less than their bounds (1 vs. 2)."),
    ("parallel {p, q} by [128] {}", "parallel variables are more than their bounds (2 vs. 1)."),
    ("s : [3, 4];\n  parallel {q} by [s];",
     "parallel variables are less than their bounds (1 vs. 2)."),
    ("parallel p by [5, 6] {}", "The parallel variable 'p' can not be assigned multiple bounds."),
    ("parallel by 1 : device(tpu) {}",
     "unknown device target 'tpu'; available targets: cpu, gpu"),
    ("parallel by 1 : blok {}", "unknown parallel level 'blok'"),
])
def test_parallel_rules(src, message):
    d = _err(f"__co__ void f() {{\n  {src}\n}}\n")
    assert d.message.startswith(message)


def test_several_functions_report_all_errors():
    with pytest.raises(ChoreoError) as info:
        checked("__co__ void a() { x = ; }\n__co__ void b() { y = ; }\n")
    assert [d.loc.line for d in info.value.diagnostics] == [1, 2]


def test_cli_renders_caret_and_exit_status(tmp_path):
    path = tmp_path / "bad.co"
    path.write_text("__co__ void f() {\n  x = 1\n}\n")
    proc = subprocess.run([sys.executable, "-m", "choreo_py", "check", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0] == f"{path}:2:8: error: expected ';' after statement"
    assert lines[1] == "  x = 1" and lines[2] == "       ^"
    assert "Traceback" not in proc.stderr


def test_missing_body_is_not_a_missing_semicolon():
    d = _err("__co__ void f() {\n  foreach i in [4] }\n")
    assert d.message.startswith("unexpected '}', expected a statement")


def test_operators_are_not_listed_as_expected():
    d = _err("__co__ void f() {\n  x = (a b);\n}\n")
    assert d.message == "expected ')', got name 'b'"


def test_angle_bracket_of_a_rank_is_listed():
    d = _err("__co__ void f() {\n  ituple[2] it = {7, 8};\n}\n")
    assert d.message == "expected '<' or a name, got '['"
