"""choreo check: parameters, buffers, parallel structure, barriers, atomics, attributes."""
from __future__ import annotations

import pytest

from check_helpers import assert_reports, ids, run_case
from test_check_scopes import kern

PARAMS = [
    # (rule, invalid program, line, col, message fragment, valid counterpart)
    ("reference-to-scalar",
     "__co__ void f(int &n) {\n}\n", 1, 15, "the scalar parameter 'n' can not be passed by "
     "reference", "__co__ void f(int n) {\n}\n"),
    ("reference-to-global",
     "__co__ void f(global f32 [16] &a) {\n}\n", 1, 15, "the global parameter 'a' can not be "
     "passed by reference", "__co__ void f(f32 [16] &a) {\n}\n"),
    ("unknown-dimension-not-global",
     "__co__ void f(f32 [??, 16] a) {\n}\n", 1, 20, "'??' (a dimension without value) is only "
     "allowed on 'global' parameters", "__co__ void f(global f32 [??, 16] a) {\n}\n"),
    ("unknown-dimension-sizes-buffer",
     "__co__ void f(global f32 [??, 16] a) {\n  n = a.span(0);\n"
     "  parallel p by 4 : block {\n    shared f32 [n] b;\n  }\n}\n", 4, 17,
     "a dimension derived from '??' has no value when compiling",
     "__co__ void f(global f32 [??, 16] a) {\n  n = a.span(1);\n"
     "  parallel p by 4 : block {\n    shared f32 [16] b;\n  }\n}\n"),
    ("storage-on-scalar",
     kern("    shared s32 x;\n"), 3, 16, "the scalar 'x' can not have the storage qualifier",
     kern("    shared s32 [1] x;\n")),
    ("buffer-array-dimension-positive",
     kern("    int none = 0;\n    shared f32 [16] b[none];\n"), 4, 23,
     "a buffer array dimension must be greater than 0",
     kern("    int two = 2;\n    shared f32 [16] b[two];\n")),
    ("event-array-dimension-static",
     kern("    shared event e[n];\n"), 3, 20, "'n' is only known at run time",
     kern("    shared event e[4];\n")),
    ("buffer-array-dimension-integer",
     kern("    shared f32 [16] b[2.0f];\n"), 3, 23, "a buffer array dimension is an integer",
     kern("    shared f32 [16] b[2];\n")),
]

PARAMS += [
    ("buffer-array-dimension-positive-multi",
     kern("    int none = 0;\n    shared f32 [16] b[2][none];\n"), 4, 26,
     "a buffer array dimension must be greater than 0",
     kern("    shared f32 [16] b[2][2];\n")),
    ("buffer-dimension-integer",
     kern("    float w = 2.0f;\n    local f32 [w, 4] b;\n"), 4, 16,
     "a buffer dimension is an integer, not a floating-point value",
     kern("    int w = 2;\n    local f32 [w, 4] b;\n")),
    ("buffer-dimension-not-a-loop-variable",
     kern("    with x in [4] {\n      local f32 [x] b;\n    }\n"), 4, 18,
     "'x' is a variable of a parallel, with or foreach; a buffer dimension is a constant",
     kern("    with x in [4] {\n      local f32 [4] b;\n    }\n")),
    ("event-array-dimension-static-multi",
     kern("    shared event e[2][n];\n"), 3, 23, "'n' is only known at run time",
     kern("    shared event e[2][4];\n")),
]

STRUCTURE = [
    ("nested-level-not-deeper",
     kern("    parallel q by 4 : block {\n      x = q;\n    }\n"), 3, 14,
     "the parallel level ': block' is nested inside ': block'",
     kern("    parallel q by 4 : group-4 {\n      x = q;\n    }\n")),
    ("nested-level-order",
     kern("    parallel q by 32 : thread {\n      parallel r by 2 : group {\n        x = r;\n"
          "      }\n    }\n"), 4, 16, "': group' is nested inside ': thread'",
     kern("    parallel q by 2 : group {\n      parallel r by 32 : thread {\n        x = r;\n"
          "      }\n    }\n")),
    ("level-inference-impossible",
     kern("    parallel q by 4 {\n      parallel r by 4 : group-4 {\n        x = r;\n"
          "      }\n    }\n"), 4, 16, "can not be inferred",
     kern("    parallel q by 4 {\n      parallel r by 32 : thread {\n        x = r;\n"
          "      }\n    }\n")),
    ("level-inference-below-thread",
     kern("    parallel q by 32 : thread {\n      parallel r by 2 {\n        x = r;\n"
          "      }\n    }\n"), 4, 16, "no level is deeper than a thread",
     kern("    parallel q by 32 : thread {\n      x = q;\n    }\n")),
    ("device-barrier-needs-cooperative",
     kern("    sync.barrier : device;\n"), 3, 5, "needs an enclosing 'parallel ... : "
     "block<cooperative>'",
     "__co__ void f(global f32 [64] a) {\n  parallel p by 4 : block<cooperative> {\n"
     "    sync.barrier : device;\n  }\n}\n"),
    ("atomic-arity",
     kern("    shared f32 [16] b;\n    __atomic_add(b.at(0));\n"), 4, 5,
     "'__atomic_add' takes 2 arguments, not 1",
     kern("    shared f32 [16] b;\n    __atomic_add(b.at(0), 1.0f);\n")),
    ("atomic-target",
     kern("    local f32 [16] b;\n    __atomic_add(b.at(0), 1.0f);\n"), 4, 18,
     "the first argument of '__atomic_add' is an element of shared or global data",
     kern("    shared f32 [16] b;\n    __atomic_add(b.at(0), 1.0f);\n")),
    ("maxnreg-level",
     kern("    [[maxnreg(64)]]\n    parallel q by 4 : group-4 {\n      x = q;\n    }\n"), 3, 5,
     "'[[maxnreg]]' caps the registers of a whole kernel",
     "__co__ void f(global f32 [64] a) {\n  [[maxnreg(64)]]\n  parallel p by 4 : block {\n"
     "    x = p;\n  }\n}\n"),
    ("maxnreg-positive",
     "__co__ void f(global f32 [64] a) {\n  [[maxnreg(0)]]\n  parallel p by 4 : block {\n"
     "    x = p;\n  }\n}\n", 2, 13, "the register count must be positive",
     "__co__ void f(global f32 [64] a) {\n  [[maxnreg(128)]]\n  parallel p by 4 : block {\n"
     "    x = p;\n  }\n}\n"),
    ("maxnreg-constant",
     "__co__ void f(global f32 [64] a, int n) {\n  [[maxnreg(n)]]\n"
     "  parallel p by 4 : block {\n    x = p;\n  }\n}\n", 2, 13,
     "'[[maxnreg(n)]]' needs a constant",
     "__co__ void f(global f32 [64] a, int n) {\n  int r = 96;\n  [[maxnreg(r)]]\n"
     "  parallel p by 4 : block {\n    x = p;\n  }\n}\n"),
    ("maxnreg-integer",
     "__co__ void f(global f32 [64] a) {\n  [[maxnreg(2.5f)]]\n"
     "  parallel p by 4 : block {\n    x = p;\n  }\n}\n", 2, 13,
     "'[[maxnreg(n)]]' takes an integer register count",
     "__co__ void f(global f32 [64] a) {\n  [[maxnreg(64 + 8)]]\n"
     "  parallel p by 4 : block {\n    x = p;\n  }\n}\n"),
]


@pytest.mark.parametrize("case", PARAMS, ids=ids(PARAMS))
def test_parameter_rule(case) -> None:
    run_case(case)


@pytest.mark.parametrize("case", STRUCTURE, ids=ids(STRUCTURE))
def test_structure_rule(case) -> None:
    run_case(case)


def test_shared_buffer_outside_parallel() -> None:
    """Shared memory exists while a kernel runs; the reference's parse-only
    programs break this, so a plain `check` warns and `compile` refuses."""
    run_case(("shared-outside-parallel",
              "__co__ void f(global f32 [64] a) {\n  shared f32 [16] b;\n}\n", 2, 19,
              "a shared buffer is declared outside any 'parallel' block",
              "__co__ void f(global f32 [64] a) {\n  parallel p by 2 : block {\n"
              "    shared f32 [16] b;\n  }\n}\n"))
    assert_reports("__co__ void f(global f32 [64] a) {\n  shared f32 [16] b;\n}\n", 2, 19,
                   "outside any 'parallel' block", strict=False, severity="warning")
