"""Cooperative launches (`parallel ... : block<cooperative>`) and their grid-wide barrier
(`sync.barrier : block` there; ir.GridSync): the interpreter runs the blocks together
(interp/grid.py), the thread lowering's barrier (lowering/core/grid_sync.py) runs in the
emulator with the CTAs taking turns (emu/machine.py), the runtime launches with
cuLaunchCooperativeKernel after checking that the grid can be resident."""
from __future__ import annotations

import pytest
import torch

import choreo_py
from choreo_py import frontend, ir, sema
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.ir.parse import parse_module
from choreo_py.ir.printer import print_module
from choreo_py.ir.verify import verify_module
from choreo_py.runtime.build import find_ptxas, ptxas

from conftest import need_shared
from test_host_programs import emulate_function

TARGETS = ["sm_90a", "sm_100a"]

#: Each round every block writes its slot, all meet, each reads its neighbour's, all meet
#: again before the next round overwrites: 8 barriers of one grid (a reused barrier).
ROUNDS = """
__co__ s32[8, 4] rounds() {
  s32[8] a;
  s32[8, 4] seen;
  parallel bx by 8 : block<cooperative> {
    foreach r in [4] {
      a.at(bx) = r * 10 + bx;
      sync.barrier : block;
      seen.at(bx, r) = a.at((bx + 1) % 8);
      sync.barrier : block;
    }
  }
  return seen;
}
"""

#: Threads of each block write, the grid meets, each thread reads the next block's element.
THREADS = """
__co__ s32[4, 64] shifted(s32[4, 64] x) {
  s32[4, 64] a;
  s32[4, 64] out;
  parallel b by 4 : block<cooperative> {
    parallel t by 64 : thread
      a.at(b, t) = x.at(b, t) * 2;
    sync.barrier : block;
    parallel t by 64 : thread
      out.at(b, t) = a.at((b + 1) % 4, t);
  }
  return out;
}
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _rounds_want():
    r, b = torch.meshgrid(torch.arange(4), torch.arange(8), indexing="ij")
    return (r * 10 + (b + 1) % 8).t().to(torch.int32)


def _corpus() -> str:
    return str(need_shared("corpus", "tests", "gpu", "end2end", "cooperative_grid_sync.co"))


def test_the_ir_of_a_cooperative_kernel(tmp_path):
    path = _write(tmp_path, "rounds.co", ROUNDS)
    module = sema.build_module(frontend.parse_file(path))
    k = module.functions[0].kernels[0]
    assert k.cooperative and ir.is_thread_kernel(k)
    assert sum(isinstance(s, ir.GridSync) for s in ir.walk(k.body)) == 2
    text = print_module(module)
    assert "  cooperative\n" in text and "sync.grid" in text
    assert print_module(parse_module(text)) == text  # the printer's form reads back


def test_a_grid_barrier_outside_a_cooperative_kernel_fails_verification(tmp_path):
    path = _write(tmp_path, "rounds.co", ROUNDS)
    text = print_module(sema.build_module(frontend.parse_file(path)))
    with pytest.raises(ChoreoError, match="a grid-wide barrier in a kernel not launched "
                                          "cooperatively"):
        verify_module(parse_module(text.replace("  cooperative\n", "")))


@pytest.mark.parametrize("schedule", ["round_robin", "random"])
def test_interpreter(tmp_path, schedule):
    got = choreo_py.interpret(_corpus(), target="sm_90a").coop_grid_sync()
    assert got.tolist() == [2, 1]
    path = _write(tmp_path, "rounds.co", ROUNDS)
    lib = choreo_py.interpret(path, target="sm_90a", schedule=schedule)
    assert torch.equal(lib.rounds(), _rounds_want())


def test_interpreter_threads(tmp_path):
    x = torch.randint(-100, 100, (4, 64), generator=torch.Generator().manual_seed(0),
                      dtype=torch.int32)
    got = choreo_py.interpret(_write(tmp_path, "t.co", THREADS), target="sm_90a").shifted(x)
    assert torch.equal(got, torch.roll(x * 2, -1, 0))


@pytest.mark.emu
@pytest.mark.parametrize("target", TARGETS)
def test_emulated(tmp_path, target):
    got, _ = emulate_function(_corpus(), "coop_grid_sync", (), target)
    assert got.tolist() == [2, 1]
    got, _ = emulate_function(_write(tmp_path, "rounds.co", ROUNDS), "rounds", (), target)
    assert torch.equal(got, _rounds_want())
    x = torch.randint(-100, 100, (4, 64), generator=torch.Generator().manual_seed(1),
                      dtype=torch.int32)
    got, _ = emulate_function(_write(tmp_path, "t.co", THREADS), "shifted", (x,), target)
    assert torch.equal(got, torch.roll(x * 2, -1, 0))


@pytest.mark.ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_ptxas_accepts(target):
    sync = str(need_shared("corpus", "tests", "gpu", "codegen", "cute", "sync.co"))
    for path in (_corpus(), sync):
        text = compile_file(path, "ptx", target)
        assert "atom.acq_rel.gpu.global.add.u32" in text and "ld.acquire.gpu.global.u32" in text
        _, log = ptxas(text, target, verbose=True)
        assert "error" not in log.lower()
    assert "membar.gl;" in text and "membar.cta;" in text  # sync.co's sync.fence : block / thread


def _refused(tmp_path, text: str) -> ChoreoError:
    with pytest.raises(ChoreoError) as e:
        compile_file(_write(tmp_path, "bad.co", text), "ptx", "sm_90a")
    assert e.value.loc is not None
    return e.value


def test_a_grid_barrier_inside_a_region_is_refused_by_name(tmp_path):
    e = _refused(tmp_path, THREADS.replace("      out.at(b, t) = a.at((b + 1) % 4, t);",
                                           "      { sync.barrier : block; out.at(b, t) = 0; }"))
    assert "a grid-wide barrier inside a parallel region or role" in e.message


def test_a_cooperative_mma_kernel_is_refused_by_name(tmp_path):
    e = _refused(tmp_path, """
__co__ void k(f16 [64, 64] a, f16 [64, 64] b, f32 [64, 64] c) {
  parallel p by 1 : block<cooperative> {
    a_s = dma.copy.swiz<128> a => shared;
    b_s = dma.copy.swiz<128> b => shared;
    parallel g by 1 : group-4 {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a_s.data, b_s.data;
      mma.store mc, c;
    }
  }
}
""")
    assert "a cooperative launch (': block<cooperative>') of an MMA kernel" in e.message


def test_a_grid_too_large_to_be_resident_is_refused_at_launch(monkeypatch):
    """The launcher checks occupancy before cuLaunchCooperativeKernel (which would fail, or
    on some drivers hang the barrier)."""
    from choreo_py.runtime.launch import CudaKernel, LaunchError

    k = CudaKernel.__new__(CudaKernel)
    k.fn, k.smem = None, 0
    monkeypatch.setattr(CudaKernel, "resident_blocks", lambda self, threads: (2, 3))
    with pytest.raises(LaunchError, match=r"the cooperative kernel 'rounds' has 8 blocks, but at "
                                          r"most 6 \(2 per SM x 3 SMs\)"):
        k.launch_cooperative("rounds", (8, 1, 1), 32, None, 0)


@pytest.mark.gpu
def test_gpu(tmp_path):
    assert choreo_py.load(_corpus()).coop_grid_sync().cpu().tolist() == [2, 1]
    lib = choreo_py.load(_write(tmp_path, "rounds.co", ROUNDS))
    for _ in range(3):  # fresh barrier words each launch
        assert torch.equal(lib.rounds().cpu(), _rounds_want())
    x = torch.randint(-100, 100, (4, 64), dtype=torch.int32, device="cuda")
    got = choreo_py.load(_write(tmp_path, "t.co", THREADS)).shifted(x)
    assert torch.equal(got.cpu(), torch.roll(x.cpu() * 2, -1, 0))
