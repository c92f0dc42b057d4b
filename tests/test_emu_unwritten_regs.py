"""The unwritten-register rule: a read of a register that, on an active lane, no
instruction of that thread wrote is an error in strict mode and a note in relaxed mode;
every form of write counts (vector and pair destinations, special registers, both arms
of a divergent branch), and a write on some lanes does not cover the others."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from choreo_py.emu import emulate_ptx
from choreo_py.emu.api import EmuStats
from choreo_py.emu.report import MisuseError

from test_emu_core import kernel, launch

pytestmark = pytest.mark.emu


def _ptx(body, regs, co=False):
    ptx = kernel(body, regs)
    if co:  # the Choreo line of every instruction after it, as launch.py carries it over
        ptx = ptx.replace("\tld.param.u64 %px", "\t// unwritten.co:7\n\tld.param.u64 %px", 1)
    return ptx


def _run(body, regs, threads=32, strict=True, co=False):
    ptx = _ptx(body, regs, co)
    x = torch.zeros(threads, dtype=torch.int32)
    y = torch.full((threads,), -1, dtype=torch.int32)
    stats = EmuStats()
    emulate_ptx(ptx, launch(x, y, threads), {"X": x, "Y": y}, strict=strict, stats=stats)
    return y, stats.notes


def _line_of(body: str, regs: str, text: str) -> int:
    lines = _ptx(body, regs, co=True).split("\n")
    return next(i for i, ln in enumerate(lines, 1) if ln.strip() == text)


NEVER = ("\tadd.u32 %s, %u, 1;\n\tst.global.u32 [%b64], %s;", "\t.reg .u32 %s, %u;")


def test_a_declared_register_never_written_is_an_error_naming_it_and_its_lines():
    body, regs = NEVER
    line = _line_of(body, regs, "add.u32 %s, %u, 1;")
    with pytest.raises(MisuseError) as err:
        _run(body, regs, co=True)
    text = str(err.value)
    assert f"kernel.ptx:{line} (unwritten.co:7): error: reads %u, which 32 active thread(s) " \
           "never wrote (the first: thread 0;" in text
    assert "add.u32 %s, %u, 1" in text


def test_relaxed_notes_it_once_and_reads_the_register():
    body, regs = NEVER
    y, notes = _run(body + "\n\tadd.u32 %s, %u, 2;", regs, strict=False)
    assert len([n for n in notes if "reads %u" in n]) == 2  # one per instruction, not per lane
    assert all("never wrote" in n for n in notes)
    np.testing.assert_array_equal(y.numpy(), np.full(32, 1))  # the emulator's registers start at 0


def test_a_write_on_some_lanes_leaves_the_others_unwritten():
    regs = "\t.reg .u32 %s, %u;\n\t.reg .pred %p;"
    body = ("\tsetp.lt.u32 %p, %tid, 16;\n\t@%p mov.u32 %u, 5;\n"
            "\tadd.u32 %s, %u, 1;\n\tst.global.u32 [%b64], %s;")
    partial = r"reads %u, which 16 active thread\(s\) never wrote \(the first: thread 16;"
    with pytest.raises(MisuseError, match=partial):
        _run(body, regs)
    # read only by the lanes that wrote it: no report
    body_ok = body.replace("\tadd.u32 %s, %u, 1;", "\tmov.u32 %s, 0;\n\t@%p add.u32 %s, %u, 1;")
    y, _ = _run(body_ok, regs)
    np.testing.assert_array_equal(y.numpy(), np.where(np.arange(32) < 16, 6, 0))


def test_both_arms_of_a_divergent_branch_write_every_lane():
    regs = "\t.reg .u32 %s, %u;\n\t.reg .pred %p;"
    body = ("\tsetp.lt.u32 %p, %tid, 16;\n\t@%p bra LOW;\n\tmov.u32 %u, 7;\n\tbra JOIN;\n"
            "LOW:\n\tmov.u32 %u, 5;\nJOIN:\n\tadd.u32 %s, %u, 1;\n\tst.global.u32 [%b64], %s;")
    y, _ = _run(body, regs)
    np.testing.assert_array_equal(y.numpy(), np.where(np.arange(32) < 16, 6, 8))


def test_vector_pair_and_special_register_destinations_count_as_writes():
    regs = ("\t.reg .u32 %s, %a, %b, %c, %d, %l;\n\t.reg .b64 %w;\n\t.reg .pred %p, %q;\n"
            "\t.reg .b16 %h0, %h1;")
    body = ("\tmov.u32 %l, %laneid;\n"
            "\tld.global.v2.u32 {%a, %b}, [%px];\n"
            "\tmov.b64 %w, {%l, %a};\n\tmov.b64 {%c, %d}, %w;\n"
            "\tmov.b32 {%h0, %h1}, %c;\n\tcvt.u32.u16 %s, %h0;\n"
            "\tsetp.lt.u32 {%p, %q}, %l, 8;\n\t@%q add.u32 %s, %s, 100;\n"
            "\tadd.u32 %s, %s, %b;\n\tadd.u32 %s, %s, %d;\n\tst.global.u32 [%b64], %s;")
    y, _ = _run(body, regs)
    lane = np.arange(32)
    np.testing.assert_array_equal(y.numpy(), lane + np.where(lane < 8, 0, 100))


def test_an_unwritten_guard_predicate_and_address_register_are_reported():
    regs = "\t.reg .u32 %s;\n\t.reg .pred %p;"
    with pytest.raises(MisuseError, match=r"reads %p, which 32 active thread\(s\) never wrote"):
        _run("\tmov.u32 %s, 1;\n\t@%p st.global.u32 [%b64], %s;", regs)
    regs = "\t.reg .u32 %s;\n\t.reg .u64 %addr;"
    with pytest.raises(MisuseError, match=r"reads %addr, which 32 active thread\(s\) never wrote"):
        _run("\tmov.u32 %s, 1;\n\tst.global.u32 [%addr], %s;", regs)


def test_threads_past_the_block_do_not_count():
    # 48 threads: lanes 16-31 of warp 1 do not exist, the others wrote the register
    regs = "\t.reg .u32 %s, %u;"
    y, _ = _run("\tmov.u32 %u, 3;\n\tadd.u32 %s, %u, %tid;\n\tst.global.u32 [%b64], %s;",
                regs, threads=48)
    np.testing.assert_array_equal(y.numpy(), np.arange(48) + 3)
