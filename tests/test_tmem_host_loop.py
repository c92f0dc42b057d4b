"""The loop form of the P-over-S proof (passes/tmem_host_loop.py), FA4's KV loop:
examples/gemm_block_p_over_s_loop.co writes P over a fresh S every K step, and the next
step's MMA into S overwrites P after the MMA that read it (one thread issues both, in
order). The plan admits it (P in S's columns); the interpreter and the strict emulator
(three schedules, two shapes, one with partial N and K tiles) match torch; ptxas accepts
it with no spills. Each variant the proof cannot prove is refused, located at P's
declaration, naming the statement in the way."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py import cli
from choreo_py.driver import compile_file
from block_helpers import assert_no_spills, emulate_strict
from test_block_fresh_s import _close, _inputs, _reference

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "gemm_block_p_over_s_loop.co"
SHAPES = [(128, 128, 256), (256, 100, 200)]
DECL = "v.co:26:23: error: 'p' cannot lie in the columns of 's': "


def test_the_plan_puts_p_in_s():
    text = compile_file(str(EXAMPLE), emit="ir", target="sm_100a")
    tmem = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("tmem ")]
    assert tmem == ["tmem s[0]: acc layout=D lanes=0+:128 cols=0+:128",
                    "tmem o[0]: acc layout=D lanes=0+:128 cols=128+:128",
                    "tmem p[0]: operand layout=D lanes=0+:128 cols=0+:64 in=s"]
    assert "tmem_alloc 256 used=256 role={1}" in text


@pytest.fixture(scope="module")
def ptx() -> str:
    return compile_file(str(EXAMPLE), emit="ptx", target="sm_100a")


def test_p_is_stored_at_s_and_read_from_there(ptx):
    assert "add.u32 %p_tmem, %tmem, 0;" in ptx  # S's first column
    assert "tcgen05.mma.cta_group::1.kind::f16 [%o_tmem], [%p_tmem]" in ptx


@pytest.mark.ptxas
def test_ptxas_accepts_it_without_spills(ptx):
    assert_no_spills(ptx)


@pytest.mark.parametrize("shape", SHAPES)
def test_interpreter_matches_torch(shape):
    a, b, c = _inputs(*shape)
    choreo_py.interpret(str(EXAMPLE), dict(A=a, B=b, C=c), target="sm_100a")
    assert _close(c, _reference(a, b))


@pytest.mark.emu
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("schedule", ["round_robin", "reverse", "random"])
def test_emulator_matches_torch_strict(shape, schedule):
    a, b, c = _inputs(*shape)
    assert emulate_strict(EXAMPLE, dict(A=a, B=b, C=c), schedule) == []
    assert _close(c, _reference(a, b))


REFUSED = [
    # S accumulated across steps: the next MMA adds onto P's columns
    ("          mma.fill s, 0.0f;               // S = A_k B_k^T: this step's alone\n", "",
     "the MMA loop's statements naming 's' or 'p' (from line 45) are not: 'mma.fill s, 0', "
     "at once the MMA into 's' (a fresh s), then the MMA reading 'p'"),
    # S read as S after P was written over it
    ("          trigger p_full.at(order++);\n",
     "          trigger p_full.at(order++);\n          mma.store s, c_buf;\n",
     "line 64 touches 's' and is not between the wait at line 60 and the apply at line 61"),
    ("        wait o_done;\n", "        wait o_done;\n        mma.store s, c_buf;\n",
     "line 66 touches 's' outside the loop at line 59 that writes 'p'"),
    # the writer does not wait S's completion
    ("          wait s_full.at(order);\n", "",
     "between line 47 and line 50 the MMA role triggers no event the writer waits before "
     "the apply at line 60"),
    ("          wait qk;\n", "",
     "the MMA into 's' at line 46 is not waited (nor named by 'trigger ... after qk') before the MMA reading 'p' at line 49"),
    # the MMA role does not wait P
    ("          wait p_full.at(order);          // P is in tensor memory\n", "",
     "the MMA reading 'p' at line 49 waits no event the writer triggers after the apply at "
     "line 60"),
    ("    shared event s_full[1], p_full[1], o_done;",
     "    shared event s_full[1] = ready, p_full[1], o_done;",
     "'s_full' (waited at line 60) is declared ready: its first wait does not wait a trigger"),
    # the events do not pair one step
    ("          wait s_full.at(order);\n", "          wait s_full.at(order + 1);\n",
     "line 60 names 's_full' at no step number of the loop at line 59"),
    ("          trigger p_full.at(order++);\n", "          order++;\n          trigger p_full.at(order);\n",
     "line 49 waits 'p_full' of another step than the one line 64 triggers"),
    ("          trigger p_full.at(order++);\n",
     "          trigger p_full.at(order++);\n          if (kt == 0)\n            break;\n",
     "the loop at line 59 breaks or continues"),
    ("          wait s_full.at(order);\n",
     "          mutable u32 order = 0;\n          wait s_full.at(order);\n",
     "line 61 names 's_full' at no step number of the loop at line 59"),
    # more than one thread might issue the MMAs: their order is not one thread's
    ("        trigger o_done;\n", "        trigger o_done;\n        mma.store o, c_buf;\n",
     "the MMA role is not issue-only (line 55 is more than a copy, an MMA, a wait or a "
     "trigger)"),
    ("    parallel r by 3 : group-4 {\n      inthreads.async (r == 0) {",
     "    parallel r by 4 : group-4 {\n      inthreads.async (r == 3) {\n        wait o_done;\n"
     "        mma.store s, c_buf;\n      }\n      inthreads.async (r == 0) {",
     "line 31 touches 's' in a third role"),
]


@pytest.mark.parametrize("old, new, message", REFUSED)
def test_what_the_loop_proof_refuses(tmp_path, capsys, old, new, message):
    src = EXAMPLE.read_text()
    assert old in src
    path = tmp_path / "v.co"
    path.write_text(src.replace(old, new, 1))
    assert cli.main(["compile", str(path), "--target", "sm_100a",
                     "-o", str(tmp_path / "x.py")]) == 1
    err = capsys.readouterr().err
    assert DECL in err and message in err, err
    assert err.count("cannot lie in the columns") == 1


def test_a_read_of_s_before_p_in_its_step_is_admitted(tmp_path):
    """A reduction of S between the wait on s_full and the apply reads S before P."""
    src = EXAMPLE.read_text()
    path = tmp_path / "v.co"
    path.write_text(src.replace("          apply {i, j} in p.span\n",
                                "          reduce_max(row_max, s, 1);\n"
                                "          apply {i, j} in p.span\n").replace(
        "      inthreads.async (r == 2) {\n",
        "      inthreads.async (r == 2) {\n        frag f32[BM] row_max;\n"))
    text = compile_file(str(path), emit="ir", target="sm_100a")  # a read of S before P: admitted
    assert "cols=0+:64 in=s" in text


@pytest.mark.emu
@pytest.mark.parametrize("schedule", ["reverse", "greedy", "random"])
def test_the_emulator_reports_p_written_while_the_mma_still_uses_s(schedule):
    """The PTX with the MMA role's wait on p_full removed: the MMA reads S's columns as P
    before P is written, and the writer's tcgen05.st lands while that MMA (or the next
    one into S) is in flight. Strict mode reports the store; under round_robin the MMAs
    happen to complete first, and only the result shows it."""
    import dataclasses
    from choreo_py.emu import RaceError
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co

    spec = from_co(str(EXAMPLE), "sm_100a")
    at = spec.ptx.index("], %p_full_phase;\n")
    line = spec.ptx.index("\t@!", at)
    end = spec.ptx.index("\n", line)
    assert " bra $_mbar_wait_" in spec.ptx[line:end]
    broken = dataclasses.replace(spec, ptx=spec.ptx[:line] + spec.ptx[end + 1:])
    a, b, c = _inputs(128, 128, 256)
    # Either race the missing wait opens may come first: the store into an MMA still in
    # flight, or (happens-before) the next MMA into S unordered with the reader's tcgen05.ld.
    with pytest.raises(RaceError, match=r"tcgen05\.st at line \d+ writes tensor memory lane "
                       r"\d+ column \d+ that the tcgen05\.mma at line \d+ (reads as its A "
                       r"operand|writes) and has not completed|tcgen05\.mma \(its D accumulator\)"
                       r" by the tcgen05\.mma pipe .* writes tensor memory .* which tcgen05\.ld"):
        run_spec(broken, dict(A=a, B=b, C=c), schedule=schedule, seed=2, strict=True)
