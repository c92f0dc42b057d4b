"""`yield` in thread kernels: the thread leaves the kernel (PTX `ret`).

The programs run in the interpreter and, for both targets, as PTX in the emulator against
values computed here; ptxas assembles both targets' PTX.
"""
from __future__ import annotations

import pytest
import torch

import choreo_py
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

TARGETS = ("sm_90a", "sm_100a")


def _write(tmp_path, name: str, src: str) -> str:
    path = tmp_path / name
    path.write_text(src)
    return str(path)


def _emulated(path: str, target: str, a: torch.Tensor, x: int) -> torch.Tensor:
    from choreo_py.emu.api import emulate_ptx

    ptx = compile_file(path, "ptx", target)
    end = ptx.rindex("}")
    ptx = ptx[:end] + "\tret;\n}\n"  # the emulator stops at an exit, not at the entry's end
    out = torch.zeros(64, dtype=torch.int32)
    desc = {"grid": [2, 1, 1], "block": [32, 1, 1], "shared_bytes": 0,
            "params": [{"name": "ptr_a", "ptr": "a"}, {"name": "ptr_out", "ptr": "out"},
                       {"name": "dim_x", "u32": x}],
            "tensors": {"a": {"dtype": "s32", "shape": [64]}, "out": {"dtype": "s32", "shape": [64]}}}
    res = emulate_ptx(ptx, desc, {"a": a.clone(), "out": out})
    return res["out"] if isinstance(res, dict) and res else out


def _assembles(path: str) -> None:
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in TARGETS:
        ptxas(compile_file(path, "ptx", target), target)


SOME = """
__co__ s32 [64] y(s32 [64] a, int x) {
  s32 [64] out {0};
  parallel p by 2 : block {
    parallel q by 32 : thread {
      int i = p * 32 + q;
      if (a.at(i) < x) {
        yield;
      }
      out.at(i) = a.at(i) * 2;
    }
  }
  return out;
}
"""

# Block p == x: every thread yields, so the block's code after the region is skipped too.
ALL = """
__co__ s32 [64] y(s32 [64] a, int x) {
  s32 [64] out {0};
  parallel p by 2 : block {
    parallel q by 32 : thread {
      if (p == x) {
        yield;
      }
      out.at(p * 32 + q) = a.at(p * 32 + q);
    }
    out.at(p * 32) = 7;
  }
  return out;
}
"""


def test_the_threads_that_yield_skip_the_rest(tmp_path):
    path = _write(tmp_path, "some.co", SOME)
    a = torch.randint(-100, 100, (64,), dtype=torch.int32)
    want = torch.where(a < 10, torch.zeros_like(a), a * 2)
    assert torch.equal(choreo_py.interpret(path, target="sm_90a").y(a, 10), want)
    for target in TARGETS:
        assert "ret;" in compile_file(path, "ptx", target)
        assert torch.equal(_emulated(path, target, a, 10), want), target
    _assembles(path)


@pytest.mark.parametrize("x", [0, 1])
def test_a_block_whose_threads_all_yield_skips_its_code_after_the_region(tmp_path, x):
    path = _write(tmp_path, "all.co", ALL)
    a = torch.randint(1, 100, (64,), dtype=torch.int32)
    want = a.clone()
    want[x * 32:(x + 1) * 32] = 0
    want[(1 - x) * 32] = 7
    assert torch.equal(choreo_py.interpret(path, target="sm_90a").y(a, x), want)
    for target in TARGETS:
        assert torch.equal(_emulated(path, target, a, x), want), target
    _assembles(path)


def test_a_region_after_a_yield_of_some_threads_is_refused_by_the_interpreter(tmp_path):
    """The GPU runs the second region without the threads that left; the interpreter's
    instances are not threads, so it says so instead of running them all."""
    src = SOME.replace("      out.at(i) = a.at(i) * 2;\n    }\n",
                       "      out.at(i) = a.at(i) * 2;\n    }\n"
                       "    parallel r by 32 : thread { out.at(p * 32 + r) = 1; }\n")
    path = _write(tmp_path, "after.co", src)
    a = torch.arange(64, dtype=torch.int32)
    with pytest.raises(Exception, match="cannot run a parallel region after a yield that only "
                       "some instances took") as e:
        choreo_py.interpret(path, target="sm_90a").y(a, 10)
    assert "after.co:12:5:" in str(e.value) and "after.co:8:9)" in str(e.value)
    # The emulated GPU: the threads that left run neither region's rest nor the second one
    # (the regions' joins, bar.sync, wait only for the threads that have not exited).
    want = torch.where(a < 10, torch.zeros_like(a), torch.ones_like(a))
    for target in TARGETS:
        assert torch.equal(_emulated(path, target, a, 10), want), target
    _assembles(path)


NESTED = """
__co__ void foo(int x) {
  parallel by 1 : block {
    parallel by 256 : thread {
      if (x == 0) {
        yield;
      }
    }
    println("here");
  }
  println("there ", x);
}
"""


@pytest.mark.parametrize("x", [0, 1])
def test_a_yield_skips_the_kernels_code_and_the_host_goes_on(tmp_path, capsys, x):
    """As the corpus's yield_nested: when every thread yields, the kernel's println after
    the region is skipped; the host's println runs after the launch either way."""
    from choreo_py.ir import parse as ir_parse, printer as ir_printer

    path = _write(tmp_path, "nested.co", NESTED)
    choreo_py.interpret(path, target="sm_90a").foo(x)
    assert capsys.readouterr().out == ("" if x == 0 else "here\n") + f"there  {x}\n"
    text = compile_file(path, "ir", "sm_90a")
    assert "print 'there  '" in text  # a statement of the host function
    assert ir_printer.print_module(ir_parse.parse_module(text)) == text
    _assembles(path)
