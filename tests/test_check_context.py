"""choreo check: initialisers and context rules (where statements may stand)."""
from __future__ import annotations

import pytest

from check_helpers import assert_reports, ids, run_case
from test_check_scopes import host, kern

INITIALISERS = [
    # (rule, invalid program, line, col, message fragment, valid counterpart)
    ("ituple-from-scalar",
     host("  ituple t = 5;\n"), 2, 14, "write it as '{...}'",
     host("  ituple t = {5};\n")),
    ("ituple-arity",
     host("  ituple<3> t = {1, 2};\n"), 2, 17, "has 3 elements but is initialised with 2",
     host("  ituple<3> t = {1, 2, 3};\n")),
    ("bool-from-int",
     host("  bool b = 1;\n"), 2, 12, "can not be initialised with an integer",
     host("  bool b = 1 != 0;\n")),
    ("mdspan-from-scalar",
     host("  s : 4;\n"), 2, 7, "can not be made from an integer",
     host("  s : [4];\n")),
    ("mdspan-from-ituple",
     host("  t = {4, 8};\n  s : t;\n"), 3, 7, "can not be made from an ituple",
     host("  s : [4, 8];\n")),
    ("mdspan-rank",
     host("  mdspan<2> s : [4, 8, 2];\n"), 2, 17, "has rank 2 but is initialised with a rank-3",
     host("  mdspan<3> s : [4, 8, 2];\n")),
    ("string-variable",
     host('  s = "hello";\n'), 2, 7, "string variables are not part of Choreo",
     host('  println("hello");\n')),
    ("int-without-initialiser",
     host("  int x;\n"), 2, 7, "the int 'x' is immutable and needs an initial value",
     host("  mutable int x;\n  s32 y;\n  y = 3;\n")),
    ("untyped-without-initialiser",
     host("  mutable d;\n"), 2, 11, "'d' has neither a type nor an initial value",
     host("  mutable d = 0;\n")),
    ("mdspan-arithmetic-bool",
     host("  s : [4, 8];\n  r : s * true;\n"), 3, 7, "can not combine an mdspan with a bool",
     host("  s : [4, 8];\n  r : s * 2;\n")),
]

INITIALISERS += [
    ("ituple-arithmetic-bool",
     host("  t = {1, 2};\n  u = t + true;\n"), 3, 7, "can not combine an ituple with a bool",
     host("  t = {1, 2};\n  u = t + 2;\n")),
    ("ituple-arithmetic-ranks",
     host("  t = {1, 2};\n  u = t + {1, 2, 3};\n"), 3, 7,
     "operator '+' on shapes of different ranks (2 vs. 3)",
     host("  t = {1, 2};\n  u = t + {1, 2};\n")),
]

CONTEXT = [
    ("break-outside-loop",
     kern("    if (p == 0) {\n      break;\n    }\n"), 4, 7, "'break' outside a loop",
     kern("    foreach i in [4] {\n      if (i == 2) {\n        break;\n      }\n    }\n")),
    ("break-in-parallel-inside-loop",
     host("  foreach i in [4] {\n    parallel p by 2 : block {\n      break;\n    }\n  }\n"),
     4, 7, "'break' outside a loop",
     host("  foreach i in [4] {\n    break;\n  }\n")),
    ("return-in-parallel",
     kern("    return;\n"), 3, 5, "'return' inside a 'parallel' block",
     "__co__ void f(global f32 [64, 64] a) {\n  parallel p by 4 : block { }\n  return;\n}\n"),
    ("yield-outside-parallel",
     host("  yield;\n"), 2, 3, "'yield' outside any 'parallel' block",
     kern("    yield;\n")),
    ("kernel-call-argument",
     kern("    e = {1, 2};\n    call dev(e);\n"), 4, 14, "argument 1 of 'call dev' is an ituple",
     kern("    call dev(a, n);\n")),
    ("inthreads-outside-parallel",
     host("  inthreads (n > 0) { }\n"), 2, 3, "'inthreads' outside any 'parallel' block",
     kern("    parallel q by 4 : group-4 {\n      inthreads (q > 0) { }\n    }\n")),
    ("inthreads-predicate-not-bool",
     kern("    parallel q by 4 : group-4 {\n      t = {1, 2};\n      inthreads (t) { }\n"
          "    }\n"), 5, 18, "the predicate of 'inthreads' is an ituple",
     kern("    parallel q by 4 : group-4 {\n      inthreads (q == 1) { }\n    }\n")),
    ("inthreads-predicate-not-divergent",
     kern("    parallel q by 4 : group-4 {\n      inthreads (n > 3) { }\n    }\n"), 4, 18,
     "the same for every thread",
     kern("    parallel q by 4 : group-4 {\n      inthreads (q > 0 && n > 3) { }\n    }\n")),
    ("inthreads-inner-async",
     kern("    parallel q by 4 : group-4 {\n      inthreads.async (q > 0) {\n"
          "        inthreads.async (q > 1) { }\n      }\n    }\n"), 5, 9,
     "only the outermost 'inthreads' of a parallel level can be '.async'",
     kern("    parallel q by 4 : group-4 {\n      inthreads.async (q > 0) {\n"
          "        inthreads (q > 1) { }\n      }\n    }\n")),
    ("while-condition-kind",
     kern("    while (n) { }\n"), 3, 12, "the condition of 'while' is an integer",
     kern("    while (n > 0) { }\n")),
    ("while-event-mixed-with-bool",
     kern("    shared event e;\n    while (e && n > 0) { }\n"), 4, 12,
     "an event and a bool can not be mixed with '&&'",
     kern("    shared event e, g;\n    while (e && g) { }\n")),
]

RETURNS = [
    # (rule, invalid program, line, col, fragment, valid counterpart)
    ("void-returns-value",
     "__co__ void f(int n) {\n  return n;\n}\n", 2, 10, "is a void function and returns no value",
     "__co__ void f(int n) {\n  return;\n}\n"),
    ("non-void-without-return",
     "__co__ int f(int n) {\n  x = n;\n}\n", 1, 1, "has no 'return' statement",
     "__co__ int f(int n) {\n  return n;\n}\n"),
    ("shape-arithmetic-ranks",
     host("  s : [7, 8, 9] + {1, 2};\n"), 2, 7, "operator '+' on shapes of different ranks (3 vs. 2)",
     host("  s : [7, 8, 9] + {1, 2, 3};\n")),
    ("call-outside-parallel",
     host("  call dev(a);\n"), 2, 3, "'call dev' outside any 'parallel' block",
     kern("    call dev(a);\n")),
]


@pytest.mark.parametrize("case", INITIALISERS, ids=ids(INITIALISERS))
def test_initialiser_rule(case) -> None:
    run_case(case)


@pytest.mark.parametrize("case", CONTEXT, ids=ids(CONTEXT))
def test_context_rule(case) -> None:
    run_case(case)


@pytest.mark.parametrize("case", RETURNS, ids=ids(RETURNS))
def test_lenient_rule(case) -> None:
    """Rules the reference's parse-only programs break: errors when strict, and a
    plain `check` warns at the same place."""
    run_case(case)
    rule, bad, line, col, fragment, good = case
    assert_reports(bad, line, col, fragment, strict=False, severity="warning")
