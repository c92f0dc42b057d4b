"""A TMA box starts 16-byte aligned (PTX ISA 5.5.3.1, tiled mode: "the address of the
bounding box must also be aligned to 16 bytes"). Found on the H200: the varlen example's
LSE store (f32, at a sequence's first row, 1078) stopped the GPU with an illegal
instruction while the interpreter and the emulator passed it. Now the emulator reports
such a box where it is issued, the lowering proves each box's innermost coordinate a
multiple of 16 bytes or refuses the copy by name, and the row-bounded store takes the
threads' path at run time where the coordinate is off the grid."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from choreo_py import ir
from choreo_py.driver import compile_file

ROOT = Path(__file__).resolve().parents[1]
GEMM = ROOT / "examples" / "gemm.co"
VARLEN = ROOT / "examples" / "flash_atten_varlen.co"
STORE = "tma.copy c_buf => C.subspan(BM, BN).at(tm, tn);"


def _sym(n):
    return ir.Sym(n)


def _c(v):
    return ir.Const(v, "s32")


@pytest.mark.parametrize("expr,lets,want", [
    (_c(48), {}, 48),
    (_c(0), {}, 0),
    (ir.Bin("*", _sym("t"), _c(128), "s32"), {}, 128),
    (ir.Bin("+", ir.Bin("*", _sym("t"), _c(64), "s32"), _c(32), "s32"), {}, 32),
    (ir.Bin("+", _sym("t"), _c(4), "s32"), {}, 1),
    (ir.Bin("<<", _sym("t"), _c(3), "s32"), {}, 8),
    (_sym("base"), {"base": ir.Bin("*", _sym("i"), _c(16), "s32")}, 16),
    (ir.Select(_sym("c"), _c(8), _c(12), "s32"), {}, 4),
])
def test_the_proven_divisor(expr, lets, want):
    from choreo_py.lowering.core.tma_align import multiple_of

    assert multiple_of(expr, lets) == want


def test_a_let_bound_twice_proves_nothing():
    from choreo_py.lowering.core.tma_align import kernel_lets

    k = ir.Kernel("k", [], [], body=[ir.Let("x", _c(16)), ir.Let("y", _c(32)), ir.Let("x", _c(3))])
    assert kernel_lets(k) == {"y": _c(32)}


@pytest.mark.parametrize("coord", ["C.view(BM, BN).from(tm * BM, 4)",
                                   "C.view(BM, BN).from(tm * BM, tn * BN + 4)"])
def test_a_box_off_the_grid_is_stored_by_the_threads(tmp_path, coord):
    """A box that starts 8 bytes (bf16 4) into C's rows, a constant or not proven: no TMA
    store of C, the threads store it (tma_fallback), as for rows TMA cannot describe."""
    src = GEMM.read_text()
    assert STORE in src
    path = tmp_path / "g.co"
    path.write_text(src.replace(STORE, f"tma.copy c_buf => {coord};"))
    ptx = compile_file(str(path), "ptx", "sm_90a")
    assert "tmap_C" not in ptx and "st.global" in ptx
    plain = compile_file(str(GEMM), "ptx", "sm_90a")  # C.subspan(BM, BN).at(tm, tn): TMA
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta.*tmap_C", plain)


@pytest.mark.ptxas
def test_the_row_bounded_store_checks_the_grid_at_run_time():
    ptx = compile_file(str(VARLEN), "ptx", "sm_90a", defines={"LSE": "1"})
    assert "setp.ne.u32 %off_grid" in ptx and "or.pred %part_tile, %part_tile, %off_grid" in ptx


@pytest.mark.emu
def test_the_emulator_stops_a_box_off_the_grid(monkeypatch):
    """The lowering before the fix (its proof patched to say yes): the emulator reports
    the store the H200 stopped, with its lines."""
    import sys

    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    from test_attn_varlen import CASES, inputs

    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co
    from choreo_py.emu.report import MisuseError
    from choreo_py.lowering.core import tma_align

    monkeypatch.setattr(tma_align, "check", lambda lw, inner, esize, loc=None: True)
    c = CASES["gqa"]  # a full tile of the third sequence at row 38: 152 bytes into L's row
    args, _, _, _ = inputs(c)
    with pytest.raises(MisuseError, match=r"innermost coordinate 38, 152 bytes into its row.*"
                                          r"PTX ISA 5\.5\.3\.1") as e:
        run_spec(from_co(str(VARLEN), "sm_90a", defines=c.defines), args, schedule="random",
                 seed=3, strict=True)
    assert "flash_atten_varlen.co:314" in str(e.value)
    assert torch.isnan(args["L"]).any()  # stopped before the whole LSE was written
