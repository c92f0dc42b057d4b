"""Arrays of buffers and events of several dimensions (sema/arrays.py): `b[i][j]` is the
row-major slot i * 2 + j of `b[2][2]`; a partial subscription is the first buffer of
its sub-array; an event array is subscribed fully."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file

CO = Path(__file__).parent / "co"
TILES = CO / "buffer_array_2d.co"  # tile i*2+j of each 128 rows goes to tile j*2+i of C


def _transposed_tiles(a: torch.Tensor) -> torch.Tensor:
    return a.view(-1, 2, 2, 32, 64).transpose(1, 2).reshape(a.shape)


def test_interpreter_selects_the_row_major_slot() -> None:
    a = torch.randn(256, 64).bfloat16()
    c = torch.zeros_like(a)
    choreo_py.interpret(str(TILES), {"A": a, "C": c}, target="sm_90a")
    assert torch.equal(c, _transposed_tiles(a))


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_emulated_ptx_agrees(target) -> None:
    a = torch.randn(128, 64).bfloat16()
    c = torch.zeros_like(a)
    choreo_py.emulate(str(TILES), {"A": a, "C": c}, target=target)
    assert torch.equal(c, _transposed_tiles(a))


@pytest.mark.ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_ptxas_assembles_it(target) -> None:
    from choreo_py.runtime.build import ptxas

    cubin, _ = ptxas(compile_file(str(TILES), "ptx", target), target)
    assert cubin


def _ir(body: str) -> str:
    path = CO.parent / "_arrays_tmp.co"
    try:
        path.write_text("__co__ void k(global bf16[M, 64] A) {\n"
                        "  parallel {t} by [cdiv(M, 32)] : block {\n" + body + "  }\n}\n")
        return compile_file(str(path), "ir", "sm_90a")
    finally:
        path.unlink()


def test_slots_in_the_ir() -> None:
    ir = _ir("    shared bf16[32, 64] b[3][2];\n"
             "    tma.copy A.subspan(32, 64).at(t, 0) => b[2][1];\n"
             "    tma.copy A.subspan(32, 64).at(t, 0) => b[1];\n")
    assert "shared b[6]: bf16[32, 64]" in ir
    assert "=> b[5]<0+:32, 0+:64>" in ir      # 2 * 2 + 1
    assert "=> b[2]<0+:32, 0+:64>" in ir      # partial: b[1][0]


def test_events_of_two_dimensions_in_the_interpreter() -> None:
    src = TILES.read_text().replace("shared event full[4];", "shared event full[2][2];") \
        .replace("full.at(i * 2 + j)", "full[i][j]")
    path = CO.parent / "_arrays_events_tmp.co"
    try:
        path.write_text(src)
        a = torch.randn(128, 64).bfloat16()
        c = torch.zeros_like(a)
        choreo_py.interpret(str(path), {"A": a, "C": c}, target="sm_90a")
        assert torch.equal(c, _transposed_tiles(a))
        with pytest.raises(ChoreoError, match="indexing event 'full' by physical slot"):
            compile_file(str(path), "ptx", "sm_90a")  # refused by name, as for 1-D arrays
    finally:
        path.unlink()


ERRORS = [
    ("    shared bf16[32, 64] b[3][2];\n    tma.copy A.subspan(32, 64).at(t, 0) => b[1][2];\n",
     "index 2 is out of range for dimension 2 of 'b[3][2]'", 4, 49),
    ("    shared bf16[32, 64] b[3][2];\n    tma.copy A.subspan(32, 64).at(t, 0) => b[1][0][0];\n",
     "'b[3][2]' is an array of buffers of 2 dimension(s), subscribed 3 times", 4, 44),
    ("    shared event e[2][2];\n    parallel p by 1 : group-4 {\n"
     "      inthreads.async (p == 0) { wait e[1]; }\n    }\n",
     "a partial subscription of the event array 'e[2][2]'", 5, 39),
    ("    shared event e[2][2];\n    parallel p by 1 : group-4 {\n"
     "      inthreads.async (p == 0) { wait e[1][0][1]; }\n    }\n",
     "'e[2][2]' is an array of events of 2 dimension(s), subscribed 3 times", 5, 39),
    ("    shared event e[2][2];\n    parallel p by 1 : group-4 {\n"
     "      inthreads.async (p == 0) { wait e[0][2]; }\n    }\n",
     "index 2 is out of range for the dimension of 2 of event 'e'", 5, 44),
]


@pytest.mark.parametrize("body,message,line,col", ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_errors(tmp_path, body, message, line, col) -> None:
    path = tmp_path / "t.co"
    path.write_text("__co__ void k(global bf16[M, 64] A) {\n"
                    "  parallel {t} by [cdiv(M, 32)] : block {\n" + body + "  }\n}\n")
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ir", "sm_90a")
    assert message in info.value.message, info.value.render()
    assert (info.value.line, info.value.col) == (line, col), info.value.render()
