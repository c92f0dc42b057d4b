"""choreo check: scopes (one declaration per name per scope, use before
declaration) and mutability, in host code and in every parallel level."""
from __future__ import annotations

import pytest

from check_helpers import assert_reports, ids, run_case


def host(body: str) -> str:
    """A function whose body starts on line 2, outside any parallel block."""
    return "__co__ void f(global f32 [64, 64] a, int n) {\n" + body + "}\n"


def kern(body: str) -> str:
    """A function whose body starts on line 3, inside `parallel p by 4 : block`."""
    return ("__co__ void f(global f32 [64, 64] a, int n) {\n"
            "  parallel p by 4 : block {\n" + body + "  }\n}\n")


CASES = [
    # (rule, invalid program, line, col, message fragment, valid counterpart)
    ("duplicate-local",
     host("  int x = 1;\n  int x = 2;\n"), 3, 7, "'x' is already declared in this scope at 2:7",
     host("  int x = 1;\n  int y = x + 2;\n")),
    ("duplicate-parameter",
     "__co__ void f(global f32 [64] a, int a) {\n}\n", 1, 34, "'a' is already declared",
     "__co__ void f(global f32 [64] a, int b) {\n}\n"),
    ("duplicate-with-variable",
     kern("    with {x, x} in [4, 4] {\n      y = x;\n    }\n"), 3, 14,
     "'x' is already declared in this scope at 3:11",
     kern("    with {x, z} in [4, 4] {\n      y = x + z;\n    }\n")),
    ("loop-body-redeclares-iteration-variable",
     kern("    foreach i in [4] {\n      int i = 3;\n    }\n"), 4, 11,
     "'i' is already declared",
     kern("    foreach i in [4] {\n      int j = 3;\n    }\n")),
    ("duplicate-buffer-in-parallel",
     kern("    shared f32 [16] b;\n    local f32 [4] b;\n"), 4, 19, "'b' is already declared",
     kern("    shared f32 [16] b;\n    local f32 [4] c;\n")),
    ("immutable-reassigned-host",
     host("  int x = 1;\n  x = 2;\n"), 3, 3, "'x' is immutable (declared at 2:7)",
     host("  mutable int x = 1;\n  x = 2;\n")),
    ("immutable-compound-assignment-in-thread-level",
     kern("    parallel q by 32 : thread {\n      int k = 0;\n      k += 1;\n    }\n"), 5, 7,
     "'k' is immutable",
     kern("    parallel q by 32 : thread {\n      mutable int k = 0;\n      k += 1;\n    }\n")),
    ("immutable-incremented",
     host("  int x = 1;\n  x++;\n"), 3, 3, "'x' is immutable (declared at 2:7)",
     host("  mutable int x = 1;\n  x++;\n")),
    ("ituple-reassigned",
     host("  mutable int m = 1;\n  ituple t = {1, 2};\n  t = {3, 4};\n"), 4, 3,
     "ituples can not be re-assigned",
     host("  ituple t = {1, 2};\n  ituple u = {3, 4};\n")),
    ("mdspan-reassigned",
     host("  s : [4, 8];\n  s = [8, 8];\n"), 3, 3, "mdspans can not be re-assigned",
     host("  s : [4, 8];\n  r : [8, 8];\n")),
    ("mutable-ituple",
     host("  mutable t = {1, 2};\n"), 2, 11, "ituples can not be 'mutable'",
     host("  t = {1, 2};\n")),
    ("mutable-in-ituple-definition",
     host("  mutable int m = 2;\n  ituple t = {m, 4};\n"), 3, 15,
     "the mutable 'm' can not define an ituple",
     host("  int m = 2;\n  ituple t = {m, 4};\n")),
    ("mutable-in-mdspan-definition",
     host("  mutable int m = 2;\n  s : [m, 4];\n"), 3, 8,
     "the mutable 'm' can not define an mdspan",
     host("  int m = 2;\n  s : [m, 4];\n")),
    ("mutable-in-buffer-dimension",
     kern("    mutable int m = 16;\n    shared f32 [m] b;\n"), 4, 17,
     "the mutable 'm' can not be a buffer dimension",
     kern("    int m = 16;\n    shared f32 [m] b;\n")),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_rule(case) -> None:
    run_case(case)


USES = [
    # (rule, invalid program, line, col) for use before declaration
    ("use-before-declaration-host", host("  int y = x + 1;\n  int x = 2;\n"), 2, 11),
    ("use-before-declaration-thread", kern("    parallel q by 32 : thread {\n"
                                           "      int y = z + 1;\n      int z = 2;\n    }\n"),
     4, 15),
]


@pytest.mark.parametrize("rule,text,line,col", USES, ids=[u[0] for u in USES])
def test_use_before_declaration(rule, text, line, col) -> None:
    assert_reports(text, line, col, "is used before its declaration")
    # reference parse-only programs break this rule: a plain `check` warns
    assert_reports(text, line, col, "is used before its declaration", strict=False,
                   severity="warning")


def test_a_name_never_declared_is_not_declared_with_a_hint() -> None:
    text = kern("    parallel q by 32 : thread {\n      int total = 1;\n      int y = totl;\n    }\n")
    assert_reports(text, 5, 15, "'totl' is not declared (did you mean 'total'?)")


def test_inner_scope_assignment_to_an_immutable_is_refused() -> None:
    """`x = ...` in an inner block, `x` immutable outside: an error at the assignment (it
    would update the enclosing `x`; it never declares a second one), a warning from a
    plain `check`; a variable (`mutable int`, `s32`) is updated, no diagnostic."""
    from check_helpers import assert_clean
    body = "    {} x = 1;\n    foreach i in [4] {{\n      x = i + 1;\n    }}\n"
    assert_reports(kern(body.format("int")), 5, 7, "'x' is immutable (declared at 3:9, outside "
                   "this block)")
    assert_reports(kern(body.format("int")), 5, 7, "'x' is immutable", strict=False,
                   severity="warning")
    assert_clean(kern(body.format("mutable int")))
    assert_clean(kern(body.format("s32")))


MORE = [
    # (rule, invalid program, line, col, message fragment, valid counterpart)
    ("duplicate-foreach-variable",
     kern("    foreach {i, i} in [4, 4] {\n      z = i;\n    }\n"), 3, 17,
     "'i' is already declared in this scope at 3:14",
     kern("    foreach {i, j} in [4, 4] {\n      z = i + j;\n    }\n")),
    ("loop-body-redeclares-local-iteration-variable",
     kern("    with x in [8] {\n      foreach c = x(1:) {\n        int c = 2;\n      }\n    }\n"),
     5, 13, "'c' is already declared in this scope at 4:15",
     kern("    with x in [8] {\n      foreach c = x(1:) {\n        int d = c;\n      }\n    }\n")),
]


@pytest.mark.parametrize("case", MORE, ids=ids(MORE))
def test_more_declaration_rules(case) -> None:
    run_case(case)


@pytest.mark.parametrize("text", [
    host("  int x = 2;\n  int y = x + 1;\n"),
    kern("    parallel q by 32 : thread {\n      int z = 2;\n      int y = z + 1;\n    }\n"),
], ids=["host", "thread"])
def test_use_after_declaration_is_clean(text) -> None:
    """The valid counterparts of the use-before-declaration cases."""
    from check_helpers import assert_clean
    assert_clean(text)
