"""choreo check: DMA, futures and events."""
from __future__ import annotations

import pytest

from check_helpers import assert_reports, ids, run_case
from test_check_scopes import kern

DMA = [
    # (rule, invalid program, line, col, message fragment, valid counterpart)
    ("dma-element-type",
     kern("    shared f16 [16, 16] b;\n    dma.copy a.subspan(16, 16).at(p, 0) => b;\n"), 4, 44,
     "copy from f32 data into a f16 destination",
     kern("    shared f32 [16, 16] b;\n    dma.copy a.subspan(16, 16).at(p, 0) => b;\n")),
    ("dma-rank",
     kern("    shared f32 [256] b;\n    dma.copy a.subspan(16, 16).at(p, 0) => b;\n"), 4, 44,
     "from rank-2 data into a rank-1 destination",
     kern("    shared f32 [16, 16] b;\n    dma.copy a.subspan(16, 16).at(p, 0) => b;\n")),
    ("dma-implicit-destination",
     kern("    shared f16 [16, 16] b;\n    f = dma.copy a.subspan(16, 16).at(p, 0) => local;\n"
          "    dma.copy f.data => b;\n"), 5, 24, "copy from f32 data into a f16 destination",
     kern("    shared f32 [16, 16] b;\n    f = dma.copy a.subspan(16, 16).at(p, 0) => local;\n"
          "    dma.copy f.data => b;\n")),
    ("dma-pad-lists",
     kern("    f = dma.pad<{1, 1}, {0}, {0, 0}, 0> a.subspan(16, 16).at(p, 0) => local;\n"),
     3, 12, "the lists of 'dma.pad' differ in length",
     kern("    f = dma.pad<{1, 1}, {0, 0}, {0, 0}, 0> a.subspan(16, 16).at(p, 0) => local;\n")),
    ("dma-transp-permutation",
     kern("    f = dma.transp<0, 0> a.subspan(16, 8).at(p, 0) => local;\n"), 3, 12,
     "is not a permutation",
     kern("    f = dma.transp<1, 0> a.subspan(16, 8).at(p, 0) => local;\n")),
    ("dma-transp-shape",
     kern("    shared f32 [16, 8] b;\n    dma.transp<1, 0> a.subspan(16, 8).at(p, 0) => b;\n"),
     4, 8, "the transposed shape [8, 16] differs from the destination's [16, 8]",
     kern("    shared f32 [8, 16] b;\n    dma.transp<1, 0> a.subspan(16, 8).at(p, 0) => b;\n")),
]

def swizzled(load: int) -> str:
    return ("__co__ void f(global bf16 [128, 64] A) {\n"
            "  parallel p by 2 : block {\n"
            "    shared bf16 [64, 64] buf;\n"
            "    parallel q by 1 : group-4 {\n"
            "      t = tma.load.async.swiz<128> A.subspan(64, 64).at(p, 0) => buf;\n"
            "      wait t;\n"
            f"      x = mma.load.swiz<{load}> buf;\n"
            "    }\n  }\n}\n")


DMA.append(("swizzle-agreement", swizzled(64), 7, 7,
            "'buf' is written and read with different swizzles", swizzled(128)))

FUTURES = [
    ("wait-on-data",
     kern("    shared f32 [16] b;\n    wait b;\n"), 4, 10, "'b' is spanned data",
     kern("    shared event e;\n    wait e;\n")),
    ("async-copy-unnamed",
     kern("    dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"), 3, 5,
     "has no future",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n    wait f;\n")),
    ("dma-any-initialises-nothing-else",
     kern("    f = dma.any;\n    g = f;\n"), 4, 9, "'f' is a 'dma.any' placeholder",
     kern("    f = dma.any;\n    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "    wait f;\n")),
    ("swap-non-futures",
     kern("    int x = 1;\n    int y = 2;\n    swap(x, y);\n"), 5, 5,
     "'swap' exchanges futures, but 'x' is an integer",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "    g = dma.copy.async a.subspan(16, 16).at(p, 1) => local;\n"
          "    swap(f, g);\n    wait f, g;\n")),
    ("swap-different-scopes",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "    foreach i in [2] {\n"
          "      g = dma.copy.async a.subspan(16, 16).at(p, i) => local;\n"
          "      swap(f, g);\n      wait g;\n    }\n    wait f;\n"), 6, 7,
     "declared in different scopes",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "    g = dma.copy.async a.subspan(16, 16).at(p, 1) => local;\n"
          "    rotate(f, g);\n    wait f, g;\n")),
    ("select-selector-kind",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "    g = dma.copy.async a.subspan(16, 16).at(p, 1) => local;\n"
          "    h = select(1.5f, f, g);\n    wait h;\n"), 5, 16,
     "the selector of 'select' is a floating-point value",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "    g = dma.copy.async a.subspan(16, 16).at(p, 1) => local;\n"
          "    h = select(p % 2, f, g);\n    wait h;\n")),
    ("select-candidate-types",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "    shared event e;\n    h = select(p % 2, f, e);\n    wait h;\n"), 5, 26,
     "the candidates of 'select' differ in type",
     kern("    shared event e, d;\n    h = select(p % 2, d, e);\n    wait h;\n")),
    ("select-constant-selector-range",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "    g = dma.copy.async a.subspan(16, 16).at(p, 1) => local;\n"
          "    h = select(2, f, g);\n    wait h;\n"), 5, 16,
     "the selector 2 is outside the 2 candidates",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "    g = dma.copy.async a.subspan(16, 16).at(p, 1) => local;\n"
          "    h = select(1, f, g);\n    wait h;\n")),
]

LENIENT = [
    ("dma-pad-rank",
     kern("    f = dma.pad<{1}, {0}, {0}, 0> a.subspan(16, 16).at(p, 0) => local;\n"), 3, 12,
     "'dma.pad' gives 1 entries per list for data of rank 2",
     kern("    f = dma.pad<{1, 1}, {0, 0}, {0, 0}, 0> a.subspan(16, 16).at(p, 0) => local;\n")),
    ("wait-synchronous-future",
     kern("    f = dma.copy a.subspan(16, 16).at(p, 0) => local;\n    wait f;\n"), 4, 10,
     "'f' is the future of a synchronous operation",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n    wait f;\n")),
    ("async-future-never-waited",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"), 3, 5,
     "the asynchronous future 'f' is never waited",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n    wait f;\n")),
    ("swap-future-types",
     "__co__ void f(global f32 [64, 64] a, global f16 [64, 64] c) {\n"
     "  parallel p by 4 : block {\n"
     "    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
     "    g = dma.copy.async c.subspan(16, 16).at(p, 0) => local;\n"
     "    swap(f, g);\n    wait f, g;\n  }\n}\n", 5, 5, "'swap' of futures of different types",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "    g = dma.copy.async a.subspan(16, 16).at(p, 1) => local;\n"
          "    swap(f, g);\n    wait f, g;\n")),
]


ROTATE = [
    ("rotate-non-futures",
     kern("    int x = 1;\n    int y = 2;\n    int w = 3;\n    rotate(x, y, w);\n"), 6, 5,
     "'rotate' exchanges futures, but 'x' is an integer",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "    g = dma.copy.async a.subspan(16, 16).at(p, 1) => local;\n"
          "    h = dma.copy.async a.subspan(16, 16).at(p, 2) => local;\n"
          "    rotate(f, g, h);\n    wait f, g, h;\n")),
    ("rotate-different-scopes",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "    foreach i in [2] {\n"
          "      g = dma.copy.async a.subspan(16, 16).at(p, i) => local;\n"
          "      rotate(f, g);\n      wait g;\n    }\n    wait f;\n"), 6, 7,
     "'rotate' of 'f' and 'g', which are declared in different scopes",
     kern("    foreach i in [2] {\n"
          "      f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "      g = dma.copy.async a.subspan(16, 16).at(p, i) => local;\n"
          "      rotate(f, g);\n      wait f, g;\n    }\n")),
]

ROTATE_LENIENT = [
    ("rotate-future-types",
     "__co__ void f(global f32 [64, 64] a, global f16 [64, 64] c) {\n"
     "  parallel p by 4 : block {\n"
     "    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
     "    g = dma.copy.async c.subspan(16, 16).at(p, 0) => local;\n"
     "    rotate(f, g);\n    wait f, g;\n  }\n}\n", 5, 5,
     "'rotate' of futures of different types ('f' and 'g')",
     kern("    f = dma.copy.async a.subspan(16, 16).at(p, 0) => local;\n"
          "    g = dma.copy.async a.subspan(16, 16).at(p, 1) => local;\n"
          "    rotate(f, g);\n    wait f, g;\n")),
]


@pytest.mark.parametrize("case", ROTATE, ids=ids(ROTATE))
def test_rotate_rule(case) -> None:
    run_case(case)


@pytest.mark.parametrize("case", ROTATE_LENIENT, ids=ids(ROTATE_LENIENT))
def test_lenient_rotate_rule(case) -> None:
    run_case(case)
    rule, bad, line, col, fragment, good = case
    assert_reports(bad, line, col, fragment, strict=False, severity="warning")


@pytest.mark.parametrize("case", DMA, ids=ids(DMA))
def test_dma_rule(case) -> None:
    run_case(case)


@pytest.mark.parametrize("case", FUTURES, ids=ids(FUTURES))
def test_future_rule(case) -> None:
    run_case(case)


@pytest.mark.parametrize("case", LENIENT, ids=ids(LENIENT))
def test_lenient_future_rule(case) -> None:
    run_case(case)
    rule, bad, line, col, fragment, good = case
    assert_reports(bad, line, col, fragment, strict=False, severity="warning")
