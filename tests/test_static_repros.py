"""Statically wrong programs that compiled are refused, located, on both targets; the
valid programs they were made from still compile; the static checks take the kernel's
asserts as assumptions.

The programs (tests/co/static/) are each a one-place change of base_gemm.co or
base_tiled.co: a view past its buffer for one role index only (cid is 0..1; `.at(cid +
1)` passes the buffer for cid = 1), an MMA reading a tile before its load is waited, a
ring slot released before the MMA reading it is waited, a global element read past a
static tensor. s21_ring_wrong_generation.co releases the slot one generation late: a
slower pipeline, no fault.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from choreo_py import cli

CO = Path(__file__).resolve().parent / "co" / "static"
TARGETS = ("sm_100a", "sm_90a")

REFUSED = {
    "s02_oob_view_role.co": (44, 11, "this view of 'a_buf' [128, 64] spans elements "
                             "[128, 192) of dimension 0 when cid = 1, outside the buffer's 128"),
    "s05_load_used_before_wait.co": (14, 11, "this MMA reads 'a_s' while the copy 'a_load' "
                                     "(line 11) may still be writing it; 'wait a_load;'"),
    "s21b_ring_release_before_mma_wait.co": (46, 11, "this trigger hands 'a_buf' back to its "
                                             "producer while the MMA 'step' (line 44) may "
                                             "still be reading it; 'wait step;' first"),
    "s27_global_oob_static.co": (4, 17, "this element of 'a' [256] is at index 256 of "
                                 "dimension 0 for every value of its indices, outside its 256"),
}


def _compile(capsys, path: Path, target: str, emit: str = "ir", tmp=None) -> tuple[int, str]:
    out = str(tmp / "out") if tmp is not None else "-"
    rc = cli.main(["compile", str(path), "--target", target, "--emit", emit, "-o", out, "-q"])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_statically_wrong_program_is_a_located_error(capsys, name, target):
    line, col, message = REFUSED[name]
    path = CO / name
    rc, err = _compile(capsys, path, target)
    assert rc == 1, err
    head = f"{path}:{line}:{col}: error: {message}"
    assert head in err, err
    lines = err.splitlines()
    at = next(i for i, text in enumerate(lines) if text.startswith(head))
    source = path.read_text().splitlines()[line - 1]
    assert lines[at + 1] == source and lines[at + 2] == " " * (col - 1) + "^", err


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["base_gemm.co", "base_tiled.co", "s21_ring_wrong_generation.co"])
def test_the_valid_bases_still_compile(capsys, tmp_path, name, target):
    rc, err = _compile(capsys, CO / name, target, emit="ptx", tmp=tmp_path)
    assert rc == 0, err


def test_an_out_of_bounds_view_for_one_role_is_also_a_check_error(capsys):
    """The fault is certain for every run: `choreo check` says it too (not a warning)."""
    rc = cli.main(["check", str(CO / "s02_oob_view_role.co")])
    err = capsys.readouterr().err
    assert rc == 1 and "s02_oob_view_role.co:44:11: error: this view of 'a_buf'" in err, err


def _variant(tmp_path, name: str, old: str, new: str) -> Path:
    text = (CO / name).read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


def test_a_guard_on_the_role_index_keeps_the_other_role_out(capsys, tmp_path):
    """Only cid = 0 takes the view past its buffer's first half: no case is out of bounds."""
    old = "          step = mma.row.row.async acc,\n            a_buf[slot].subspan(WG_M, BK).at(cid + 1, 0), b_buf[slot];\n          wait step;\n"
    new = ("          if (cid == 0) {\n"
           "            step = mma.row.row.async acc,\n"
           "              a_buf[slot].subspan(WG_M, BK).at(cid + 1, 0), b_buf[slot];\n"
           "            wait step;\n          }\n")
    rc, err = _compile(capsys, _variant(tmp_path, "s02_oob_view_role.co", old, new), "sm_90a")
    assert "this view of 'a_buf'" not in err, err


def test_an_mma_reading_the_other_slot_of_the_ring_is_no_release_fault(capsys, tmp_path):
    """Releasing slot `order` while an MMA reads slot `order + 1` hands back a slot no
    MMA in flight reads (the comparison is of the same slot only)."""
    old = "a_buf[slot].subspan(WG_M, BK).at(cid, 0), b_buf[slot];"
    new = "a_buf[(order + 1) % STAGES].subspan(WG_M, BK).at(cid, 0), b_buf[(order + 1) % STAGES];"
    path = _variant(tmp_path, "s21b_ring_release_before_mma_wait.co", old, new)
    rc, err = _compile(capsys, path, "sm_90a")
    assert "hands 'a_buf' back" not in err, err


def test_a_load_waited_through_its_event_is_read_after_the_wait(capsys, tmp_path):
    old = "          mma.row.row acc, a_s, b_s;\n          wait loaded.at(kt);\n"
    new = "          wait loaded.at(kt);\n          mma.row.row acc, a_s, b_s;\n"
    path = _variant(tmp_path, "s05_load_used_before_wait.co", old, new)
    rc, err = _compile(capsys, path, "sm_100a")
    assert rc == 0, err


# ---------------------------------------------------------------- asserts as assumptions

ASSERTS = ('  assert(Q_SEQ <= KV_SEQ, "the queries are the last Q_SEQ positions of the KV_SEQ keys");\n'
           '  assert((KV_SEQ - Q_SEQ) % BLOCK_N == 0, "KV_SEQ - Q_SEQ must be a multiple of BLOCK_N");\n')


@pytest.mark.parametrize("target", TARGETS)
def test_the_pipeline_check_assumes_the_kernels_asserts(capsys, tmp_path, target):
    """Q_SEQ = 129, KV_SEQ = 1 (no K/V tile for the consumers' first wait) is a size the
    asserts exclude: no scenario of the check. Without the asserts it is one, and a hang."""
    rc, err = _compile(capsys, CO / "attn_causal_prefix_assert.co", target)
    assert rc == 0, err
    path = _variant(tmp_path, "attn_causal_prefix_assert.co", ASSERTS, "")
    rc, err = _compile(capsys, path, target)
    assert rc == 1 and ":87:9: error: pipeline check: role (p > 0) [p=1] waits kf.at(" \
        "k_pipe_order)" in err and "KV_SEQ=1" in err, err


GLOBAL = """__co__ void add(global f32[N] a, global f32[N] c) {
%s  parallel blk by 1 : block
    parallel t by 256 : thread
      c.at(t) = a.at(t + 256);
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_element_bounds_assume_the_asserts(capsys, tmp_path, target):
    """a.at(t + 256) of a tensor of N elements: past its end for every t when the asserts
    say N <= 256; with N unbounded it may be inside (no error)."""
    path = tmp_path / "g.co"
    path.write_text(GLOBAL % '  assert(N <= 256 && N > 0, "one block of at most 256");\n')
    rc, err = _compile(capsys, path, target)
    assert rc == 1 and "g.co:5:17: error: this element of 'a' [N] is at index 256 of " \
        "dimension 0 for every value of its indices, outside its N" in err, err
    path.write_text(GLOBAL % "")
    rc, err = _compile(capsys, path, target)
    assert "this element of 'a'" not in err, err
