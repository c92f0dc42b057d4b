"""Device functions a file defines, called from kernels (choreo_py/frontend/c_subset.py
reads their C, choreo_py/sema/device_funcs.py inlines them). tests/co/device_funcs.co
has a pure function used as a value and a template function with a branch and a printf;
the interpreter, the emulator (both targets) and ptxas check them. A function the file
does not define, and C outside the subset, are refused by name at the call."""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.frontend import c_subset
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "device_funcs.co")
WANT = [[min(q * 30, 100) - q for q in range(8)]]
PRINTED = ["q=0 shown=2 v=0.000000 100%", "q=1 shown=3 v=0.500000 100%",
           "q=2 shown=-7 v=1.000000 100%", "q=3 shown=-6 v=1.500000 100%"]


def test_device_functions_in_the_interpreter(capfd):
    lib = choreo_py.interpret(PATH, target="sm_90a")
    out = torch.zeros(1, 8, dtype=torch.int32)
    lib.device_funcs(out, 30)
    assert out.tolist() == WANT
    lib.device_prints()
    assert sorted(capfd.readouterr().out.splitlines()) == PRINTED


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_device_function_value_in_the_emulator(target):
    out = torch.zeros(1, 8, dtype=torch.int32)
    choreo_py.emulate_program(PATH, target=target, schedule="random", seed=1).device_funcs(out, 30)
    assert out.tolist() == WANT


def test_device_functions_assemble_without_calls():
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in ("sm_90a", "sm_100a"):
        text = compile_file(PATH, "ptx", target)
        ptxas(text, target)
        assert ".func" not in text.replace(".extern .func", "")  # inlined: no function
        calls = [ln for ln in text.splitlines() if ln.strip().startswith("call")]
        assert calls and all("vprintf" in ln for ln in calls)  # printf's only


def test_the_subset_reader_skips_other_text():
    fns = c_subset.functions("#include <cstdio>\nstruct S { int x; };\nint g;\n"
                             "__device__ float half(float x) { return x * 0.5f; }\n"
                             "__device__ void bump(float* v) { v[0] += 1.0f; }\n"
                             "__device__ int twice(int x);\n")
    assert sorted(fns) == ["bump", "half"]
    assert fns["half"].params == [("x", "f32")] and fns["half"].outside is None
    assert "pointer" in fns["bump"].outside


def _refusal(tmp_path, device: str, call: str) -> ChoreoError:
    path = tmp_path / "t.co"
    path.write_text(f"{device}\n__co__ void k(global s32 [1, 4] o) {{\n"
                    "  parallel p by 1 : block {\n    parallel q by 4 : thread {\n"
                    f"      {call}\n    }}\n  }}\n}}\n")
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ptx", "sm_90a")
    return info.value


REFUSALS = [
    ("", "call missing(q + 0);", "the device function 'missing', which this file does not "
     "define"),
    ("__device__ void f(float* v) { v[0] = 1.0f; }", "call f(q + 0);",
     "whose C is outside the subset read here (its parameter of a pointer type)"),
    ("__device__ int f(int x) { if (x > 1) x = 1; return x; }",
     "mutable int v = call f(q + 0);", "'f' used as a value (only a body of declarations"),
    ('__device__ void f(int x) { printf("%x", x); }', "call f(q + 0);",
     "the printf conversion '%x' in the device function 'f'"),
    ("__device__ void f(int x) { y = x; }", "call f(q + 0);",
     "an assignment to 'y', which is not a local or a parameter"),
]


@pytest.mark.parametrize("device,call,message", REFUSALS)
def test_refused_by_name_at_the_call(tmp_path, device, call, message):
    err = _refusal(tmp_path, device, call)
    assert message in err.message, err.message
    assert (err.loc.line, err.loc.col) == (5, 7 + call.index("call"))


def test_template_arguments_are_counted(tmp_path):
    err = _refusal(tmp_path, "__cok__ { template<int n> __device__ void f() { } }", "call f();")
    assert "'f' with 0 template argument(s) (its definition here takes 1)" in err.message


def test_the_interpreter_refuses_an_external_function(tmp_path):
    path = tmp_path / "t.co"
    path.write_text("__co__ void k() {\n  parallel p by 1 : block {\n    call ext(1);\n  }\n}\n")
    with pytest.raises(ChoreoError) as info:
        choreo_py.interpret(str(path), target="sm_90a").k()
    assert "the device function 'ext', which this file does not define" in info.value.message
