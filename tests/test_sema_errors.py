"""Semantic errors: message, line and column, for each rule sema enforces."""
from __future__ import annotations

import pytest

from choreo_py import driver, frontend, sema
from choreo_py.diagnostics import ChoreoError

PROLOGUE = """\
__co__ void k(global bf16[M, 128] A, global bf16[M, 128] C) {
  parallel {t} by [cdiv(M, 128)] : block {
"""
EPILOGUE = """\
  }
}
"""


def kernel(body: str) -> str:
    """A kernel whose body starts on line 3."""
    return PROLOGUE + body + EPILOGUE


def error_of(text: str) -> ChoreoError:
    with pytest.raises(ChoreoError) as info:
        frontend.check_text(text, "t.co")
    return info.value


CASES = [
    # (body, expected message fragment, line, col)
    ("    shared bf16[64, 128] buf;\n"
     "    tma.copy A.subspan(128, 128).at(t, 0) => buf;\n",
     "copy of a [128, 128] tile into a [64, 128] destination", 4, 14),
    ("    x = 1 + y;\n", "'y' is not declared", 3, 13),
    ("    shared bf16[128, 128] buf;\n    shared f32[4] buf;\n",
     "'buf' is already declared in this scope at 3:27", 4, 19),
    ("    shared bf16[0, 128] buf;\n", "The mdspan size \"0\" is invalid", 3, 17),
    ("    shared bf16[128, 128] b[2];\n    tma.copy A.subspan(128, 128).at(t, 0) => b[2];\n",
     "slot 2 is out of range for 'b[2]'", 4, 46),
    ("    shared bf16[128, 128] b[2];\n    tma.copy A.subspan(128, 128).at(t, 0) => b;\n",
     "'b' is an array of 2 buffers; select one with 'b[slot]'", 4, 46),
    ("    shared bf16[128, 128] b;\n    tma.copy.swiz<256> A.subspan(128, 128).at(t, 0) => b;\n",
     "swizzle value must be 128, 64, or 32", 4, 19),
    ("    shared f32[128, 128] b;\n    tma.copy A.subspan(128, 128).at(t, 0) => b;\n",
     "copy from bf16 data into a f32 destination", 4, 46),
    ("    parallel p by 2 : group-4 {\n      inthreads.async (p > 5) { }\n    }\n",
     "this 'inthreads' condition selects none of the 2 thread groups", 4, 24),
    ("    parallel p by 2 : group-4 {\n      inthreads.async (p == 0) { call croq::cuda::setreg_inc(100); }\n    }\n",
     "the register count must be a multiple of 8 in [24, 256]", 4, 62),
]


@pytest.mark.parametrize("body,message,line,col", CASES, ids=[c[1][:40] for c in CASES])
def test_sema_error(body, message, line, col) -> None:
    e = error_of(kernel(body))
    assert message in e.message
    assert (e.loc.line, e.loc.col) == (line, col), e.render()
    assert e.render().startswith(f"t.co:{line}:{col}: error: ")


MMA_PROLOGUE = """\
__co__ void k() {
  parallel b by 1 : block {
    shared bf16[64, 128] q;
    shared bf16[128, 128] kt;
    shared bf16[128, 64] v;
    parallel g by 1 : group-4 {
"""
MMA_EPILOGUE = """\
    }
  }
}
"""

MMA_CASES = [
    ("      acc = mma.fill.f32 0.0f;\n      mma.row.col acc, q, kt.subspan(64, 128).at(0, 0);\n",
     "MMA K mismatch: A is [64, 128] but B is [64, 128]; 'mma.row.col' needs B as [128, N]", 8, 27),
    ("      acc = mma.fill.f32 0.0f;\n      mma.row.row acc, q, kt;\n      mma.row.row acc, q, v.subspan(64, 64).at(0, 0);\n",
     "MMA K mismatch", 9, 27),
    ("      acc = mma.fill.f32 0.0f;\n      mma.row.row acc, q, kt;\n"
     "      mma.store acc, kt;\n", "'mma.store' of a [64, 128] accumulator into a [128, 128] destination", 9, 22),
    ("      acc = mma.fill.f32 0.0f;\n      mma.row.row acc, q, kt;\n      frag f32[32] m;\n"
     "      reduce_max(m, acc, 1);\n", "'reduce_max' of [64, 128] over dimension 1 gives [64]", 10, 18),
    ("      frag f32[64] m {0.0f};\n      all_reduce_sum(m);\n",
     "'m' holds no per-owner partial values here", 8, 7),
    ("      acc = mma.fill.f32 0.0f;\n      [[schedule(k_tiles(0, 1, 2, 2, 4, 5, 6, 7))]]\n"
     "      mma.row.row acc, q, kt;\n", "must be a permutation of the 8 K tiles", 9, 7),
]


@pytest.mark.parametrize("body,message,line,col", MMA_CASES, ids=[c[1][:40] for c in MMA_CASES])
def test_mma_error(body, message, line, col) -> None:
    e = error_of(MMA_PROLOGUE + body + MMA_EPILOGUE)
    assert message in e.message, e.render()
    assert (e.loc.line, e.loc.col) == (line, col), e.render()


def test_unsupported_construct_is_named_in_compile_but_skipped_in_check() -> None:
    text = kernel("    shared bf16[128, 128] b;\n    dma.pad<{0, 0}, {0, 0}, {0, 0}, 0> A => b;\n")
    program = frontend.check_text(text, "t.co")  # valid Choreo: check accepts it
    with pytest.raises(ChoreoError) as info:
        sema.build_module(program)
    assert "is not supported by the tile IR yet" in info.value.message
    assert info.value.loc.line == 4


def test_errors_after_an_unsupported_statement_are_still_found() -> None:
    text = kernel("    shared bf16[128, 128] b;\n    dma.pad<{0, 0}, {0, 0}, {0, 0}, 0> A => b;\n"
                  "    z = nope;\n")
    e = error_of(text)
    assert "'nope' is not declared" in e.message and e.loc.line == 5


def test_names_from_unsupported_statements_are_not_false_errors() -> None:
    text = kernel("    shared bf16[128, 128] b;\n    f = dma.any;\n    wait f;\n")
    program = frontend.check_text(text, "t.co")  # raises on an error
    assert len(program.functions) == 1


def test_shared_memory_budget() -> None:
    text = kernel("    shared bf16[128, 128] a[8];\n")
    e = error_of(text)
    assert "the block needs 262144 bytes of shared memory, more than the 232448" in e.message


def test_collective_copy_that_depends_on_the_instance() -> None:
    body = ("    shared bf16[128, 128] buf;\n    parallel p by 2 : group-4 {\n"
            "      inthreads.async (p >= 0) {\n"
            "        tma.copy C.subspan(64, 128).at(t * 2 + p, 0) => buf.subspan(64, 128).at(p, 0);\n"
            "      }\n    }\n")
    program = frontend.check_text(kernel(body), "t.co")  # valid Choreo: check accepts it
    with pytest.raises(ChoreoError) as info:  # compile refuses it by name
        sema.build_module(program)
    e = info.value
    assert "issued once for all 2 thread groups" in e.message and "'p'" in e.message
    assert "is not supported by the tile IR yet" in e.message
    assert (e.loc.line, e.loc.col) == (6, 9)


def test_span_as_keeps_the_element_count() -> None:
    body = "    shared bf16[128, 128] b;\n    v = b.span_as([64, 64]);\n"
    e = error_of(kernel(body))
    assert "16384 elements cannot take a shape of 4096" in e.message
    assert (e.loc.line, e.loc.col) == (4, 9)
    frontend.check_text(kernel("    shared bf16[128, 128] b;\n    v = b.span_as([64, 256]);\n"), "t.co")


def test_async_roles_must_not_overlap() -> None:
    body = ("    parallel p by 3 : group-4 {\n      inthreads.async (p >= 1) { }\n"
            "      inthreads.async (p == 2) { }\n    }\n")
    e = error_of(kernel(body))
    assert "roles (p >= 1) and (p == 2) both select thread group p=2" in e.message
    assert (e.loc.line, e.loc.col) == (5, 24)


def test_accumulator_shape_used_before_its_mma() -> None:
    # `apply` over acc.span before the MMA that gives acc its shape (in program order,
    # e.g. a rescale placed ahead of the next PV): sema finds the shape in a first pass.
    body = ("      acc = mma.fill.f32 0.0f;\n"
            "      apply {i, j} in acc.span\n"
            "        acc.at(i, j) = acc.at(i, j) * 2.0f;\n"
            "      mma.row.row acc, q, kt;\n")
    program = frontend.check_text(MMA_PROLOGUE + body + MMA_EPILOGUE, "t.co")
    module = driver.build_ir(program, target="sm_90a")
    acc = module.functions[0].kernels[0].frag("acc")
    assert acc.shape == (64, 128) and acc.layout == "acc"


def test_accumulator_shape_that_no_mma_gives() -> None:
    body = ("      acc = mma.fill.f32 0.0f;\n"
            "      apply {i, j} in acc.span\n"
            "        acc.at(i, j) = 1.0f;\n")
    program = frontend.check_text(MMA_PROLOGUE + body + MMA_EPILOGUE, "t.co")  # check: skipped
    with pytest.raises(ChoreoError) as info:
        sema.build_module(program)
    assert "using the shape of accumulator 'acc' before any MMA gives it" in info.value.message
    assert (info.value.loc.line, info.value.loc.col) == (8, 23)


# Valid Choreo that the reference accepts and sema builds only in part: `check` accepts
# it, `compile` (strict sema) refuses it by name at its place, never as a program error.
VALID_NOT_BUILT = [
    # an index of chunkat that is an expression of no bounded variable (`k - 1` chunks
    # by k's bound)
    ("    parallel p by 4 : thread {\n      foreach k in 2 {\n"
     "        x = dma.copy A.chunkat(t, 2 - 1) => local;\n      }\n    }\n",
     "'chunkat' of an index that is no bounded variable", 5, 35),
    # the offset form of a bounded variable other than `x(-n)` (its last values)
    ("    parallel p by 4 : thread {\n      with x in 2 {\n"
     "        x1 = dma.copy A.chunkat(t, x(1)) => local;\n      }\n    }\n",
     "the offset form of a bounded variable", 5, 36),
]


@pytest.mark.parametrize("body, message, line, col", VALID_NOT_BUILT)
def test_valid_choreo_sema_cannot_build_is_refused_by_name(body, message, line, col) -> None:
    program = frontend.check_text(kernel(body), "t.co")  # check accepts it
    with pytest.raises(ChoreoError) as info:
        sema.build_module(program)
    e = info.value
    assert message in e.message and "is not supported by the tile IR yet" in e.message, e.render()
    assert (e.loc.line, e.loc.col) == (line, col), e.render()


def test_error_inside_a_with_block_is_skipped_by_check_and_reported_by_compile() -> None:
    # A copy of a [64, 128] tile into a [32, 128] buffer, inside a with block: the reference
    # accepts such programs at its parse stage; sema finds the mismatch.
    body = ("    shared bf16[32, 128] b;\n    with x in 2 {\n"
            "      dma.copy A.subspan(64, 128).at(t, 0) => b;\n    }\n")
    from choreo_py.diagnostics import take_warnings
    take_warnings()
    program = frontend.check_text(kernel(body), "t.co")  # check: a warning, at its place
    warned = [w for w in take_warnings() if "into a [32, 128] destination" in w.message]
    assert warned and "(an error for compile)" in warned[0].message
    assert (warned[0].loc.line, warned[0].loc.col) == (5, 16)
    with pytest.raises(ChoreoError) as info:
        sema.build_module(program)
    assert "copy of a [64, 128] tile into a [32, 128] destination" in info.value.message
    assert "not supported" not in info.value.message
