"""A name bound to a mutable variable's value keeps that value (`int b = v;` then `v = ...`),
and increments as a declaration's value (`old = v++;`).

The lowering bound such a name to the variable's register, so a later assignment of the
variable changed it too (the emulated kernel returned v's last value). The program runs in
the interpreter and, for both targets, as PTX in the emulator, against torch.
"""
from __future__ import annotations

import torch

import choreo_py
from choreo_py.driver import compile_file

SRC = """
__co__ s32 [32] al(s32 [32] a) {
  s32 [32] out;
  parallel p by 1 : block
    parallel q by 32 : thread {
      mutable int v = a.at(q);
      int b = v;
      v = v + 5;
      out.at(q) = b * 100 + v;
    }
  return out;
}
"""


def _emulated(path: str, target: str, a: torch.Tensor, shape: list) -> torch.Tensor:
    from choreo_py.emu.api import emulate_ptx

    ptx = compile_file(path, "ptx", target)
    end = ptx.rindex("}")
    ptx = ptx[:end] + "\tret;\n}\n"  # the emulator stops at an exit
    desc = {"grid": [1, 1, 1], "block": [32, 1, 1], "shared_bytes": 0,
            "params": [{"name": "ptr_a", "ptr": "a"}, {"name": "ptr_out", "ptr": "out"}],
            "tensors": {"a": {"dtype": "s32", "shape": [32]}, "out": {"dtype": "s32", "shape": shape}}}
    out = torch.zeros(shape, dtype=torch.int32)
    res = emulate_ptx(ptx, desc, {"a": a.clone(), "out": out})
    return res["out"] if isinstance(res, dict) and res else out


def test_a_copy_of_a_mutable_variable_keeps_its_value(tmp_path):
    path = tmp_path / "copy.co"
    path.write_text(SRC)
    a = torch.randint(-50, 50, (32,), dtype=torch.int32)
    want = a * 100 + a + 5
    assert torch.equal(choreo_py.interpret(str(path), target="sm_90a").al(a), want)
    for target in ("sm_90a", "sm_100a"):
        assert torch.equal(_emulated(str(path), target, a, [32]), want), target


INCREMENTS = """
__co__ s32 [32, 4] inc(s32 [32] a) {
  s32 [32, 4] out;
  parallel p by 1 : block
    parallel q by 32 : thread {
      mutable int v = a.at(q);
      old = v++;
      int cur = ++v;
      mutable int down = v--;
      out.at(q, 0) = old; out.at(q, 1) = cur; out.at(q, 2) = down; out.at(q, 3) = v;
    }
  return out;
}
"""


def test_an_increment_as_a_declarations_value(tmp_path):
    """`old = v++` is v before the increment, `cur = ++v` after it (the corpus's
    event_post_increment, scalar part)."""
    path = tmp_path / "inc.co"
    path.write_text(INCREMENTS)
    a = torch.randint(-50, 50, (32,), dtype=torch.int32)
    want = torch.stack([a, a + 2, a + 2, a + 1], dim=1)
    assert torch.equal(choreo_py.interpret(str(path), target="sm_90a").inc(a), want)
    from choreo_py.runtime.build import find_ptxas, ptxas

    for target in ("sm_90a", "sm_100a"):
        assert torch.equal(_emulated(str(path), target, a, [32, 4]), want), target
        if find_ptxas() is not None:
            ptxas(compile_file(str(path), "ptx", target), target)


def test_an_increment_of_an_immutable_value_is_an_error(tmp_path):
    import pytest
    from choreo_py.diagnostics import ChoreoError

    path = tmp_path / "bad.co"
    path.write_text(INCREMENTS.replace("mutable int v", "int v"))
    with pytest.raises(ChoreoError, match=r"'v' is immutable \(declared at 6:11\)"):
        compile_file(str(path), "ptx", "sm_90a")
