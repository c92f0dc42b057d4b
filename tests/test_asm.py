"""Inline asm in thread kernels: operands, the emulated PTX, and the refusals.

The template is PTX pasted into the kernel, so the interpreter does not run it;
the PTX emulator runs the compiled kernel instead (and ptxas assembles it for
both targets). Each program's result is computed independently here.
"""
from __future__ import annotations

import re

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

KERNEL = """
__co__ s32 [32] k(s32 [32] a, s32 v) {{
  s32 [32] out;
  parallel p by 1 : block
    parallel q by 32 : thread {{
      mutable s32 x = a.at(q);
      {body}
      out.at(q) = x;
    }}
  return out;
}}
"""


def _write(tmp_path, body: str) -> str:
    path = tmp_path / "asm.co"
    path.write_text(KERNEL.format(body=body))
    return str(path)


def _emulated(path: str, a: torch.Tensor, v: int) -> torch.Tensor:
    from choreo_py.emu.api import emulate_ptx

    ptx = compile_file(path, "ptx", "sm_90a")
    end = ptx.rindex("}")
    ptx = ptx[:end] + "\tret;\n}\n"  # the emulator stops at an exit
    params = [{"name": m, "ptr": m[len("ptr_"):]} if m.startswith("ptr_") else
              {"name": m, "u32": v} for m in re.findall(r"\.param \.u(?:64|32) (\w+)", ptx)]
    desc = {"grid": [1, 1, 1], "block": [32, 1, 1], "shared_bytes": 256, "params": params,
            "tensors": {"a": {"dtype": "s32", "shape": [32]},
                        "out": {"dtype": "s32", "shape": [32]}}}
    out = torch.zeros(32, dtype=torch.int32)
    emulate_ptx(ptx, desc, {"a": a.clone(), "out": out})
    return out


CASES = {
    # an add of an input into a read-write operand, by number
    '__asm__("add.s32 %0, %0, %1;" : "+r"(x) : "r"(v));': lambda a, v: a + v,
    # named operands, a constant, and the literal %% of a special register
    '__asm__ volatile("{ .reg .u32 %%t; mov.u32 %%t, %%laneid; add.u32 %[d], %%t, %[c]; }"'
    ' : [d] "=r"(x) : [c] "n"(5));': lambda a, v: torch.arange(32, dtype=torch.int32) + 5,
    # a register the template declares without '%' (valid PTX: any identifier)
    '__asm__("{ .reg .s32 t; add.s32 t, %1, 1; mul.lo.s32 %0, t, 2; }" : "=r"(x) : "r"(x));':
        lambda a, v: (a + 1) * 2,
    # an output straight into a buffer element, then read back
    '__asm__("mul.lo.s32 %0, %1, %2;" : "=r"(out.at(q)) : "r"(x), "r"(v)); x = out.at(q);':
        lambda a, v: a * v,
}


@pytest.mark.emu
@pytest.mark.parametrize("body", list(CASES), ids=["readwrite", "named_const", "bare_register", "buffer_out"])
def test_inline_asm_runs_in_the_emulator(tmp_path, body):
    path = _write(tmp_path, body)
    a = torch.randint(-100, 100, (32,), dtype=torch.int32)
    assert torch.equal(_emulated(path, a, 3), CASES[body](a, 3).to(torch.int32))
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in ("sm_90a", "sm_100a"):
        ptxas(compile_file(path, "ptx", target), target)


def test_the_template_is_pasted_with_the_operands_registers(tmp_path):
    path = _write(tmp_path, '__asm__("add.s32 %0, %0, %1;" : "+r"(x) : "r"(v));')
    ptx = compile_file(path, "ptx", "sm_90a")
    assert re.search(r"\{\s*add\.s32 %asm_out\w*, %asm_out\w*, %asm_in\w*;\s*\}", ptx)


REFUSED = [
    ('__asm__("mov.u32 %0, %2;" : "=r"(x) : "r"(v));', "reads '%2' of 2 operand(s)"),
    ('__asm__("mov.u32 %[y], %0;" : "=r"(x) : "r"(v));', "names '%[y]', which no operand"),
    ('__asm__("mov.u32 %0, %1;" : "r"(x) : "r"(v));', "must start with '='"),
    ('__asm__("mov.u32 %0, %1;" : "=r"(x) : "=r"(v));', "cannot write"),
    ('__asm__("mov.u32 %0, %1;" : "=r"(x) : "n"(v));', "takes a compile-time integer"),
    ('__asm__("mov.u64 %0, %1;" : "=l"(x) : "r"(v));', "is for a 64-bit integer, not s32"),
    ('__asm__("mov.u32 %0, %1;" : "=q"(x) : "r"(v));', "the asm constraint '=q'"),
]


@pytest.mark.parametrize("body,message", REFUSED)
def test_bad_operands_are_located_errors(tmp_path, body, message):
    path = _write(tmp_path, body)
    with pytest.raises(ChoreoError) as e:
        compile_file(path, "ptx", "sm_90a")
    text = str(e.value)
    assert message in text and "asm.co:7:" in text


def test_the_interpreter_refuses_inline_asm_by_name(tmp_path):
    path = _write(tmp_path, '__asm__("add.s32 %0, %0, %1;" : "+r"(x) : "r"(v));')
    with pytest.raises(Exception) as e:
        choreo_py.interpret(path, target="sm_90a").k(torch.zeros(32, dtype=torch.int32), 1)
    assert "inline asm" in str(e.value)
