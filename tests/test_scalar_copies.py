"""A name bound to a mutable variable's value keeps that value (`int b = v;` then `v = ...`).

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


def test_a_copy_of_a_mutable_variable_keeps_its_value(tmp_path):
    from choreo_py.emu.api import emulate_ptx

    path = tmp_path / "copy.co"
    path.write_text(SRC)
    a = torch.randint(-50, 50, (32,), dtype=torch.int32)
    want = a * 100 + a + 5
    assert torch.equal(choreo_py.interpret(str(path), target="sm_90a").al(a), want)
    for target in ("sm_90a", "sm_100a"):
        ptx = compile_file(str(path), "ptx", target)
        end = ptx.rindex("}")
        ptx = ptx[:end] + "\tret;\n}\n"  # the emulator stops at an exit
        desc = {"grid": [1, 1, 1], "block": [32, 1, 1], "shared_bytes": 0,
                "params": [{"name": "ptr_a", "ptr": "a"}, {"name": "ptr_out", "ptr": "out"}],
                "tensors": {"a": {"dtype": "s32", "shape": [32]},
                            "out": {"dtype": "s32", "shape": [32]}}}
        out = torch.zeros(32, dtype=torch.int32)
        res = emulate_ptx(ptx, desc, {"a": a.clone(), "out": out})
        got = res["out"] if isinstance(res, dict) and res else out
        assert torch.equal(got, want), target
