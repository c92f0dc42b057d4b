"""`println`'s printed form, as the reference's CPU model writes it.

The rule (LancerLab/croqtile, tools/co-mock/mock_interp.cpp `MockInterpreter::CallBIF`
and tools/co-mock/mock_memory.cpp `Value::ToString`): the arguments one after another
with one space between two of them, a string as written, an integer in decimal, a float
as C++'s `ostream <<` writes it (`%g`: six significant digits, `3` for 3.0, `1e+08`), a
condition as `true` / `false`. An ituple prints as `{a, b}` and an mdspan as `[a, b]`
(the reference compiler's device printf, lib/Target/GPU/cute_codegen.cpp). The same
format reaches the interpreter, the host program and the device printf of both targets.
"""
from __future__ import annotations

import pytest
import torch

import choreo_py
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

KERNEL = """
__co__ void show(int a) {
  ituple<2> t = {a, 4};
  s : [a, 5];
  parallel p by 1 : block {
    parallel q by 2 : thread {
      bool b = q == 1;
      println("min =", a, "q:", q, b, 1.5f * q, 0.1f, 100000000.0f, t, s);
      print("no", "newline");
      println();
    }
  }
  println("host", a, true, false, 2.5f);
}
"""

#: What each thread prints (sorted: threads print in any order), then the host's line.
WANT = sorted([
    "min = 3 q: 0 false 0 0.1 1e+08 {3, 4} [3, 5]",
    "min = 3 q: 1 true 1.5 0.1 1e+08 {3, 4} [3, 5]",
    "no newline", "no newline",
]) + ["host 3 true false 2.5"]


def _write(tmp_path, src: str) -> str:
    path = tmp_path / "show.co"
    path.write_text(src)
    return str(path)


def _lines(out: str) -> list[str]:
    lines = out.splitlines()
    return sorted(lines[:-1]) + lines[-1:]


def test_the_interpreter_prints_as_the_reference_model(tmp_path, capfd):
    """Space-separated arguments, `%g` floats, `true`/`false` conditions (co-mock's
    CallBIF / Value::ToString), in a kernel and in the host program."""
    choreo_py.interpret(_write(tmp_path, KERNEL), target="sm_90a").show(3)
    assert _lines(capfd.readouterr().out) == WANT


def test_the_device_format_is_the_same(tmp_path):
    """The device printf's format string: `%lld` integers, `%g` floats, `%s` of the module
    strings "true" / "false" for a condition, one space between two arguments."""
    path = _write(tmp_path, KERNEL)
    for target in ("sm_90a", "sm_100a"):
        text = compile_file(path, "ptx", target)
        fmt = b"min = %lld q: %lld %s %g %g %g {%lld, %lld} [%lld, %lld]\n\0"
        assert "{" + ", ".join(str(c) for c in fmt) + "}" in text, target
        for word in (b"true\0", b"false\0"):
            assert "{" + ", ".join(str(c) for c in word) + "}" in text, target
        if find_ptxas() is not None:
            ptxas(text, target)


def test_a_device_function_printf_keeps_cs_conversions(tmp_path, capfd):
    """A `printf` of a device function is C's: `%f` stays `%f` (not println's `%g`)."""
    from choreo_py.ir.parse import parse_module
    from choreo_py.ir.printer import print_module
    from choreo_py import frontend, sema

    src = """
__cok__ {
__device__ void tell(float x, int i) { printf("x=%f i=%d\\n", x, i); }
}
__co__ void f() {
  parallel p by 1 : block
    parallel q by 1 : thread
      call tell(1.5f, 2);
}
"""
    path = _write(tmp_path, src)
    choreo_py.interpret(path, target="sm_90a").f()
    assert capfd.readouterr().out == "x=1.500000 i=2\n"
    text = print_module(sema.build_module(frontend.parse_file(path)))
    assert "printf 'x=', " in text
    assert print_module(parse_module(text)) == text


@pytest.mark.gpu
def test_the_gpu_prints_as_the_interpreter(tmp_path, capfd):
    choreo_py.load(_write(tmp_path, KERNEL)).show(3)
    torch.cuda.synchronize()
    out = capfd.readouterr().out
    # The lanes of a warp execute each printf together, so on the GPU the two threads'
    # `print("no", "newline")` come out side by side before their `println()`s (the H200:
    # "no newlineno newline" then an empty line); the interpreter runs one thread's
    # statements after the other's. The whole lines are the same.
    whole = [ln for ln in WANT if ln.startswith(("min =", "host"))]
    assert [ln for ln in _lines(out) if ln.startswith(("min =", "host"))] == whole
    assert out.count("no newline") == 2
