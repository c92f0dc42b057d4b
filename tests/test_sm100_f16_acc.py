"""f16 accumulators on sm_100a: an f32 tile in tensor memory, rounded to f16 after each MMA.

The program's `mc = mma.fill.f16 0.0f; mma.row.row mc, a, b` accumulates as
`mc = f16(mc + a @ b)` per MMA statement, the product summed in f32 (the
interpreter). tcgen05.mma writes the f32 sum into tensor memory (instruction
descriptor D format f32), and the role's threads round the tile to f16 when
the statement completes (lowering/sm100/lower_mma.py says why not an f16 D).

tests/co/f16_accumulator_k.co sums 16 MMAs of K = 16 into one f16 tile: with a
rounding missing, most elements would differ from the interpreter's (checked
here against the f32 sum rounded once), so agreeing to the last place, but for
the f32 summation order inside one MMA, shows every rounding is there.
"""
from __future__ import annotations

import os
import re

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.emu.sm100_desc import decode_instr_desc
from choreo_py.runtime.build import find_ptxas, ptxas

HERE = os.path.dirname(__file__)
PATH = os.path.join(HERE, "co", "f16_accumulator_k.co")
ASYNC = """__co__ void f16_future(global f16 [64, 64] A, global f16 [128, 64] B) {
  parallel b by 1 : block {
    shared f16 [64, 64] lhs;
    shared f16 [128, 64] rhs;
    parallel g by 1 : group-4 {
      inthreads.async (g == 0) {
        acc = mma.fill.f16 0.0f;
        qk = mma.row.row.async acc, lhs, rhs;
        wait qk;
      }
    }
  }
}
"""


def _inputs():
    gen = torch.Generator().manual_seed(0)
    a = (torch.randn(64, 256, generator=gen) / 2).half()
    b = (torch.randn(128, 256, generator=gen) / 2).half()
    return a, b


def _ulps(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x.view(torch.int16).int() - y.view(torch.int16).int()).abs()


_interpreted: dict = {}


def _interpreter_result() -> torch.Tensor:
    if "c" not in _interpreted:
        a, b = _inputs()
        c = torch.zeros(64, 128, dtype=torch.float16)
        choreo_py.interpret(PATH, {"A": a, "B": b, "C": c}, target="sm_100a")
        _interpreted["c"] = c
    return _interpreted["c"]


def test_the_rounding_after_each_mma_is_visible():
    """The case can tell: the interpreter's 16 roundings differ from one at the end."""
    a, b = _inputs()
    once = (a.float() @ b.float().T).half()
    assert int((_ulps(_interpreter_result(), once) > 0).sum()) > once.numel() // 2


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("schedule", ["round_robin", "random"])
def test_emulated_f16_accumulator_matches_the_interpreter(target, schedule):
    from choreo_py.emu.api import emulate

    a, b = _inputs()
    c = torch.zeros(64, 128, dtype=torch.float16)
    emulate(PATH, {"A": a, "B": b, "C": c}, target=target, schedule=schedule, seed=3)
    ulps = _ulps(c, _interpreter_result())
    assert int(ulps.max()) <= 1 and int((ulps > 0).sum()) < c.numel() // 100


def test_sm100a_accumulates_in_f32_and_rounds_after_each_mma():
    text = compile_file(PATH, "ptx", "sm_100a")
    idescs = {int(v) for v in re.findall(r"mov\.b32\s+%idesc_\w+, (\d+);", text)}
    assert idescs and all(decode_instr_desc(v, "f16").d_dtype == "f32" for v in idescs)
    # one tile of 64 f32 cells per thread (M = 64, N = 128 in .16x32bx2), rounded once per
    # MMA statement: the statement sits in a loop of 4 x 4, emitted once (a load and a store
    # besides the fill's store before the loop and mma.store's load after it)
    assert text.count("cvt.rn.f16.f32") == 64
    assert text.count("tcgen05.ld.") == 2 and text.count("tcgen05.st.") == 2
    if find_ptxas() is not None:
        ptxas(text, "sm_100a")


def test_an_asynchronous_mma_into_an_f16_accumulator_is_refused(tmp_path):
    path = tmp_path / "f16_future.co"
    path.write_text(ASYNC)
    with pytest.raises(ChoreoError) as e:
        compile_file(str(path), "ptx", "sm_100a")
    assert "an asynchronous MMA into the f16 accumulator 'acc'" in e.value.message
    assert e.value.loc is not None and e.value.loc.line == 8


#: End-to-end functions with f16 accumulators that sm_100a lowers (all four are emulated
#: under the default schedule by test_end2end_emu.py); the two quickest again under another.
@pytest.mark.emu
@pytest.mark.parametrize("name", ["wgmma_ss.co::matmul_st_masked",
                                  "wgmma_persis.co::matmul_persis_hilbert_sm90[4x2_tiles]"])
def test_f16_gemms_under_a_random_schedule(name):
    from choreo_py.runtime.host_program import torch_dtypes
    from end2end_refs import CASES, case_id, need_file, run_case

    case = next(c for c in CASES if case_id(c) == name)
    lib = choreo_py.emulate_program(need_file(case[0]), target="sm_100a", schedule="random", seed=5)
    run_case(case, lambda path, function: lib[function], "cpu", torch_dtypes())
