"""Thread kernels: `sync.barrier : group` / `: thread` (the warp's barrier) and the
`__atomic_*` built-ins.

Each program runs in the interpreter and, for both targets, as PTX in the emulator,
against a value computed here with torch; ptxas assembles both targets' PTX.
"""
from __future__ import annotations

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

TARGETS = ("sm_90a", "sm_100a")


def _write(tmp_path, name: str, src: str) -> str:
    path = tmp_path / name
    path.write_text(src)
    return str(path)


def _emulated(path: str, target: str, grid: int, threads: int, smem: int,
              tensors: dict[str, torch.Tensor], params: list[str]) -> dict:
    """The target's PTX of `path` run in the emulator on copies of `tensors`; each pointer
    parameter `ptr_<name>` is the tensor of that name."""
    from choreo_py.emu.api import emulate_ptx

    ptx = compile_file(path, "ptx", target)
    end = ptx.rindex("}")
    ptx = ptx[:end] + "\tret;\n}\n"  # the emulator stops at an exit, not at the entry's end
    names = {"s32": torch.int32, "u32": torch.int32, "f32": torch.float32}
    dtype = {t: k for k, t in names.items() if k != "u32"}
    desc = {"grid": [grid, 1, 1], "block": [threads, 1, 1], "shared_bytes": smem,
            "params": [{"name": f"ptr_{p}", "ptr": p} for p in params],
            "tensors": {n: {"dtype": dtype[t.dtype], "shape": list(t.shape)}
                        for n, t in tensors.items()}}
    copies = {n: t.clone() for n, t in tensors.items()}
    res = emulate_ptx(ptx, desc, copies)
    return res if isinstance(res, dict) and res else copies


def _assembles(path: str) -> None:
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in TARGETS:
        ptxas(compile_file(path, "ptx", target), target)


WARP_REVERSE = """
__co__ s32 [64] warp_rev(s32 [64] a) {
  s32 [64] out;
  parallel p by 2 : block {
    parallel q by 32 : thread {
      shared s32 [32] s;
      s.at(q) = a.at(p * 32 + q);
      sync.barrier : LEVEL;
      out.at(p * 32 + q) = s.at(31 - q);
    }
  }
  return out;
}
"""


@pytest.mark.parametrize("level", ["group", "thread"])
def test_a_warp_barrier_orders_the_warps_shared_accesses(tmp_path, level):
    path = _write(tmp_path, "warp.co", WARP_REVERSE.replace("LEVEL", level))
    a = torch.randint(-1000, 1000, (64,), dtype=torch.int32)
    want = a.view(2, 32).flip(1).reshape(64)
    assert torch.equal(choreo_py.interpret(path, target="sm_90a").warp_rev(a), want)
    for target in TARGETS:
        assert "bar.warp.sync -1;" in compile_file(path, "ptx", target)
        got = _emulated(path, target, 2, 32, 128, {"a": a, "out": torch.zeros(64, dtype=torch.int32)},
                        ["a", "out"])
        assert torch.equal(got["out"], want), target
    _assembles(path)


def test_the_interpreter_keeps_a_race_across_warps(tmp_path):
    """A warp barrier does not order two warps: the interpreter reports the race."""
    src = WARP_REVERSE.replace("LEVEL", "group").replace("by 32 : thread", "by 64 : thread") \
        .replace("s32 [32] s", "s32 [64] s").replace("31 - q", "63 - q").replace("p * 32 + q", "q")
    path = _write(tmp_path, "race.co", src)
    with pytest.raises(Exception, match="data race on s"):
        choreo_py.interpret(path, target="sm_90a").warp_rev(torch.zeros(64, dtype=torch.int32))


def test_a_warp_barrier_in_part_of_a_warp_is_refused(tmp_path):
    src = WARP_REVERSE.replace("LEVEL", "group").replace(
        "parallel q by 32 : thread {", "parallel r by 32 : thread {} parallel q by 16 : thread {")
    path = _write(tmp_path, "part.co", src)
    with pytest.raises(ChoreoError, match="a warp barrier inside a parallel region that covers "
                       "part of a warp") as e:
        compile_file(path, "ptx", "sm_90a")
    assert "part.co:5:34:" in str(e.value)
