"""TMA loads one elected thread issues for a role of single threads, and `inthreads`
nested in such a role (sema/role_forms.py). tests/co/elected_lane.co loads one tile
from a nested `inthreads (t == 32)` in a loop paced by an event, one from a role of
128 threads and one from a role of 32 (a part of a warpgroup); the interpreter and
the emulator (both targets, three schedules, strict) store the tiles as the reference
has them, each `trigger ... after` being the one arrival its event counts. The two
corpus programs of these forms assemble for both targets; the GPU check skips without
a CUDA GPU."""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py import driver, frontend
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.passes import event_arrivals
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "elected_lane.co")
CUTE = os.path.join(os.environ.get("CHOREO_SHARED", os.path.join(
    os.path.dirname(__file__), "..", "..", "shared")), "corpus", "tests", "gpu", "codegen", "cute")
CORPUS = [os.path.join(CUTE, f"{n}.co") for n in ("tma_subwarp_elected_lane",
                                                    "tma_nested_inthreads_elected_lane")]


def _case():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(32, 32, generator=g)
    b, c = torch.randn(16, 32, generator=g), torch.randn(16, 32, generator=g)
    return a, b, c, torch.cat([a, b, c])  # the tiles land in `out` in this order


def test_elected_loads_in_the_interpreter():
    a, b, c, want = _case()
    out = torch.zeros(64, 32)
    choreo_py.interpret(PATH, {"a": a, "b": b, "c": c, "out": out}, target="sm_90a")
    assert torch.equal(out, want)


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("schedule", ["round_robin", "random", "reverse"])
def test_elected_loads_in_the_emulator(target, schedule):
    a, b, c, want = _case()
    out = torch.zeros(64, 32)
    choreo_py.emulate_program(PATH, target=target, schedule=schedule, seed=1).elected_lane(
        a, b, c, out)
    assert torch.equal(out, want)


@pytest.mark.gpu
def test_elected_loads_on_the_gpu():
    a, b, c, want = _case()
    out = torch.zeros(64, 32, device="cuda")
    choreo_py.load(PATH).elected_lane(a.cuda(), b.cuda(), c.cuda(), out)
    assert torch.equal(out.cpu(), want)


def _ir(text: str):
    return driver.build_ir(frontend.parse_text(text, "t.co"), "sm_90a")


def test_one_arrival_per_elected_trigger():
    """A role of 32 threads issuing a load and its trigger once: `full` counts 1 arrival;
    a plain trigger of the same role still counts one per thread."""
    kernel = _ir(open(PATH).read()).functions[0].kernels[0]
    assert event_arrivals.arrivals(kernel) == {"a_full": 1, "b_full": 1, "c_full": 1,
                                               "a_empty": 128}


def test_elected_issuers_in_the_ptx():
    text = compile_file(PATH, "ptx", "sm_90a")
    # group-4 0's first thread issues `c`, thread 32 of group-4 1 (thread 160) issues `b`
    assert "setp.eq.s32 %cond_2, %g__t, 0;" in text
    assert "setp.eq.s32 %cond_3, %g__t, 160;" in text
    assert text.count("cp.async.bulk.tensor.2d.shared::cluster.global") == 3


ROLE = """\
__co__ void f(global f32 [16, 32] a) {
  parallel b by 1 : block {
    shared f32 [16, 32] a_s;
    shared event full;
    parallel g by 2 : group-4, t by 128 : thread {
      inthreads.async (g == 0 && t < 32) {
        %s
      }
      inthreads.async (g == 1) {
        wait full;
      }
    }
  }
}
"""


@pytest.mark.parametrize("body,line,col,what", [
    ("ld = tma.copy.async a => a_s;\n        trigger full after ld;\n        wait ld;", 9, 9,
     "a copy one elected thread issues"),
    ("ld = tma.copy.async a => a_s;\n        wait ld;\n        trigger full;", 7, 9,
     "not published by a 'trigger ... after ld' right after it"),
    ("ld = tma.copy.async a.subspan(1, 32).at(t, 0) => a_s.subspan(1, 32).at(t, 0);\n"
     "        trigger full after ld;", 7, 9, "whose tile depends on"),
])
def test_other_uses_of_an_elected_load_are_refused_by_name(body, line, col, what):
    with pytest.raises(ChoreoError) as info:
        _ir(ROLE % body)
    assert what in info.value.message
    assert "is not supported by the tile IR yet" in info.value.message
    assert (info.value.loc.line, info.value.loc.col) == (line, col)


def test_nested_async_inthreads_is_an_error():
    src = ROLE % "inthreads.async (t == 3) {\n          trigger full;\n        }"
    with pytest.raises(ChoreoError) as info:
        _ir(src)
    assert "only the outermost 'inthreads' of a parallel level can be '.async'" in \
        info.value.message


@pytest.mark.parametrize("path", [PATH, *CORPUS])
def test_elected_loads_assemble(path):
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    if not os.path.exists(path):
        pytest.skip("the shared corpus is not present")
    for target in ("sm_90a", "sm_100a"):
        ptxas(compile_file(path, "ptx", target), target)
