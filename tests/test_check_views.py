"""choreo check: iteration (with / foreach) and views (chunkat, subspan, at, sqz)."""
from __future__ import annotations

import pytest

from check_helpers import ids, run_case
from test_check_scopes import kern

ITERATION = [
    # (rule, invalid program, line, col, message fragment, valid counterpart)
    ("with-matcher-rank",
     kern("    with {x, y} in [4, 4, 2] {\n      z = x + y;\n    }\n"), 3, 20,
     "2 with variables for an index space of rank 3",
     kern("    with {x, y, w} in [4, 4, 2] {\n      z = x + y + w;\n    }\n")),
    ("foreach-matcher-rank",
     kern("    foreach {i, j} in [4] {\n      z = i;\n    }\n"), 3, 23,
     "2 loop variables for an index space of rank 1",
     kern("    foreach {i, j} in [4, 2] {\n      z = i + j;\n    }\n")),
    ("foreach-over-parallel-variable",
     kern("    foreach p {\n      z = p;\n    }\n"), 3, 13,
     "'p' is a parallel variable; 'foreach' iterates variables bound by 'with'",
     kern("    with x in [4] {\n      foreach x {\n        z = x;\n      }\n    }\n")),
    ("foreach-over-unbound-variable",
     kern("    int m = 2;\n    foreach m {\n      z = m;\n    }\n"), 4, 13,
     "'m' is not bound by a 'with'",
     kern("    with m in [2] {\n      foreach m {\n        z = m;\n      }\n    }\n")),
    ("underscore-with-variable",
     kern("    with {_, y} in [4, 4] {\n      z = y;\n    }\n"), 3, 10,
     "'_' can not be a with variable",
     kern("    with {x, y} in [4, 4] {\n      z = x + y;\n    }\n")),
    ("underscore-local-iteration-variable",
     kern("    with x in [8] {\n      foreach _ = x(1:) {\n        z = x;\n      }\n    }\n"),
     4, 15, "'_' can not be a local iteration variable",
     kern("    with x in [8] {\n      foreach c = x(1:) {\n        z = c;\n      }\n    }\n")),
    ("duplicate-local-iteration-name",
     kern("    with {x, y} in [8, 8] {\n      foreach c = x(1:), c = y(1:) {\n"
          "        z = c;\n      }\n    }\n"), 4, 26,
     "the local iteration variable 'c' is used twice",
     kern("    with {x, y} in [8, 8] {\n      foreach c = x(1:), d = y(1:) {\n"
          "        z = c + d;\n      }\n    }\n")),
    ("where-names-with-variables",
     kern("    int m = 2;\n    with {x, y} in [4, 4] where x <-> m {\n      z = x + y;\n"
          "    }\n"), 4, 33, "'m' in 'where' is not a variable of this 'with'",
     kern("    with {x, y} in [4, 4] where x <-> y {\n      z = x + y;\n    }\n")),
    ("zero-extent-with",
     kern("    int none = 4 - 4;\n    with x in [none] {\n      z = x;\n    }\n"), 4, 16,
     "the with domain has extent 0",
     kern("    with x in [1] {\n      z = x;\n    }\n")),
    ("unroll-factor",
     kern("    foreach i in [8] : unroll(0) {\n      z = i;\n    }\n"), 3, 31,
     "'unroll(0)': the unroll factor must be positive",
     kern("    foreach i in [8] : unroll(2) {\n      z = i;\n    }\n")),
]

VIEWS = [
    ("chunkat-factor-count",
     kern("    with {x, y} in [4, 4] {\n      dma.copy a.chunkat(x) => local;\n    }\n"), 4, 16,
     "'.chunkat' takes one factor per dimension: 1 for data of rank 2",
     kern("    with {x, y} in [4, 4] {\n      dma.copy a.chunkat(x, y) => local;\n    }\n")),
    ("chunkat-ituple-expansion",
     kern("    with idx = {x, y} in [4, 4] {\n      dma.copy a.chunkat(idx, p) => local;\n"
          "    }\n"), 4, 16, "3 for data of rank 2",
     kern("    with idx = {x, y} in [4, 4] {\n      dma.copy a.chunkat(idx) => local;\n"
          "    }\n")),
    ("chunkat-factor-within-dimension",
     kern("    with {x, y} in [128, 4] {\n      dma.copy a.chunkat(x, y) => local;\n    }\n"),
     4, 26, "'x' cuts a dimension of 64 into 128 chunks",
     kern("    with {x, y} in [64, 4] {\n      dma.copy a.chunkat(x, y) => local;\n    }\n")),
    ("subspan-extent-within-dimension",
     kern("    dma.copy a.subspan(128, 16).at(0, 0) => local;\n"), 3, 24,
     "the tile extent 128 is larger than the dimension it cuts (64)",
     kern("    dma.copy a.subspan(64, 16).at(0, 0) => local;\n")),
    ("constant-at-inside-grid",
     kern("    dma.copy a.subspan(16, 16).at(4, 0) => local;\n"), 3, 35,
     "tile index 4 is outside the 4 tiles of this dimension",
     kern("    dma.copy a.subspan(16, 16).at(3, 0) => local;\n")),
    ("constant-from-inside-data",
     kern("    dma.copy a.view(16, 8).from(50, 0) => local;\n"), 3, 33,
     "the window [50, 66) leaves a dimension of 64",
     kern("    dma.copy a.view(16, 8).from(48, 0) => local;\n")),
    ("sqz-needs-reshaping-view",
     kern("    with {x, y} in [4, 4] {\n      dma.copy a.chunkat(x, y).sqz() => local;\n"
          "    }\n"), 4, 16, "'.sqz()' follows a '.subspan', '.span_as' or '.view'",
     kern("    with {x, y} in [64, 4] {\n"
          "      dma.copy a.subspan(1, 16).at(x, y).sqz() => local;\n    }\n")),
    ("at-on-future",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n    wait f;\n"
          "    dma.copy f.at(0, 0) => a.subspan(16, 16).at(p, 0);\n"), 5, 14,
     "'.at()' on a future; use its data",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n    wait f;\n"
          "    dma.copy f.data => a.subspan(16, 16).at(p, 0);\n")),
]


@pytest.mark.parametrize("case", ITERATION, ids=ids(ITERATION))
def test_iteration_rule(case) -> None:
    run_case(case)


@pytest.mark.parametrize("case", VIEWS, ids=ids(VIEWS))
def test_view_rule(case) -> None:
    run_case(case)
