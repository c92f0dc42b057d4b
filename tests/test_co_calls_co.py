"""Calls of one __co__ function from another (tests/co/co_calls_co.co), as co-mock runs
them (tools/co-mock/mock_interp.cpp, ExecCall and a Call's value): the callee's body
with its tensor parameters bound to the caller's tensors (by reference) and its scalar
ones to the values; the value of its `return` is the call's. On the host they are
`ir.HostCall`s that `choreo run` and interpret() run; the GPU lowering refuses them by
name; inside a parallel region (tests/co/co_calls_co_in_kernel.co) a call stays refused,
in the rule checks' words, by check, compile and run alike.

Every expected value is computed here from the program's arithmetic, not read from a run.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import choreo_py
from choreo_py.ir import parse as ir_parse, printer as ir_printer, verify as ir_verify

HERE = os.path.join(os.path.dirname(__file__), "co")
CO = os.path.join(HERE, "co_calls_co.co")
IN_KERNEL = os.path.join(HERE, "co_calls_co_in_kernel.co")
KERNEL_MSG = ("a parallel region cannot call the __co__ function 'inc' (the reference's rule: "
              "a kernel calls __co_device__ and __device__ functions with 'call'); call 'inc' "
              "from host code, outside any parallel region")


def _choreo(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "choreo_py", *args], capture_output=True,
                          text=True)


def _printed(stdout: str) -> list[str]:
    return [x for x in stdout.splitlines() if not x.startswith(("ran ", "check "))]


def _expected_main() -> list[str]:
    """main: x = i*i; y = twice(x) = x + 2; z = scaled(y, 3) = 3y; acc (zeroed, as co-mock
    allocates) gets z added three times; total = sum(acc); w = inc(x), then twice more in
    place: x + 3."""
    x = [i * i for i in range(16)]
    y = [v + 2 for v in x]
    z = [3 * v for v in y]
    acc = [3 * v for v in z]
    w = [v + 3 for v in x]
    return [f"{y[0]} {y[15]} {z[4]}", f"{acc[2]} {sum(acc)} {w[3]}"]


def test_choreo_run_prints_what_co_mock_prints():
    """With no function named, `run` runs the functions that take no arguments (main): the
    others run where main calls them, as co-mock's calls run them."""
    got = _choreo("run", CO)
    assert got.returncode == 0, got.stderr
    assert _printed(got.stdout) == _expected_main()
    assert "ran main" in got.stdout and "ran inc" not in got.stdout


def test_the_callees_as_python_callables():
    lib = choreo_py.interpret(CO, target="sm_90a")
    a = torch.arange(16, dtype=torch.int32) * 5 - 7
    assert torch.equal(lib.twice(a), a + 2)
    assert torch.equal(lib.scaled(a, -4), a * -4)
    assert lib.sum(a) == int(a.sum())
    acc = torch.full((16,), 11, dtype=torch.int32)
    lib.add_into(acc, a)  # a tensor parameter is the caller's tensor: written in place
    assert torch.equal(acc, a + 11)


def test_check_and_strict_check_accept_host_calls():
    for args in (["check"], ["check", "--strict"]):
        got = _choreo(*args, CO)
        assert got.returncode == 0 and "warning" not in got.stderr, got.stderr


def test_the_ir_holds_host_calls_that_read_back():
    got = _choreo("compile", "--emit", "ir", CO)
    assert got.returncode == 0, got.stderr
    text = got.stdout
    for line in ("call inc(a = &a) -> b", "call scaled(a = &y, k = 3) -> z",
                 "call add_into(acc = &acc, a = &z)", "call sum(a = &acc) -> total: s32",
                 "call inc(a = &w) -> w__1", "dma.copy w__1<0+:16> => w<0+:16>"):
        assert line in text, text
    module = ir_parse.parse_module(text)
    ir_verify.verify_module(module)
    assert ir_printer.print_module(module) == text


def test_the_verifier_refuses_a_call_that_binds_what_the_callee_lacks():
    text = _choreo("compile", "--emit", "ir", CO).stdout.replace("call inc(a = &a) -> b",
                                                                 "call inc(q = &a) -> b")
    with pytest.raises(choreo_py.ChoreoError, match="call inc: binds q; its parameters are a"):
        ir_verify.verify_module(ir_parse.parse_module(text))


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_gpu_target_refuses_a_host_call_by_name(target, tmp_path):
    got = _choreo("compile", "--emit", "ptx", "--target", target, CO, "-o",
                  str(tmp_path / "k.ptx"))
    assert got.returncode != 0 and "Traceback" not in got.stderr
    lines = got.stderr.splitlines()
    head = f"{CO}:12:7: error: a call of the __co__ function 'inc' from the host code of "
    assert lines[0] == head + f"'twice' (it runs in 'choreo run') is not lowered for {target} yet"
    assert lines[1] == "  b = inc(a);" and lines[2] == "      ^"
    assert not (tmp_path / "k.ptx").exists()
    report = _choreo("check", "--lowerable", "--target", target, CO).stdout.splitlines()
    assert report[-1] == f"4 of 6 functions compile for {target} (not compiled: twice, main)"


def test_a_call_inside_a_parallel_region_is_refused_in_one_wording():
    plain = _choreo("check", IN_KERNEL)
    assert plain.returncode == 0 and f"15:5: warning: {KERNEL_MSG}" in plain.stderr
    for args in (["check", "--strict"], ["compile", "--emit", "ir"], ["run"]):
        got = _choreo(*args, IN_KERNEL)
        errors = [x for x in got.stderr.splitlines() if ": error: " in x]
        assert got.returncode == 1 and "Traceback" not in got.stderr, got.stderr
        assert errors == [f"{IN_KERNEL}:15:5: error: {KERNEL_MSG}"], (args, got.stderr)


def _run_source(tmp_path, capfd, src: str) -> list[str]:
    path = tmp_path / "p.co"
    path.write_text(INC + src)
    choreo_py.interpret(str(path), target="sm_90a").main()
    return capfd.readouterr().out.splitlines()


INC = """
__co__ s32 [4] inc(s32 [4] a, int k) {
  s32 [4] out;
  parallel p by 4 : thread {
    out.at(p) = a.at(p) + k;
  }
  return out;
}
"""


def test_a_result_named_anew_is_the_returned_tensor_and_one_named_before_a_copy(tmp_path,
                                                                               capfd):
    """co-mock binds a new name to the returned buffer itself (here the callee's parameter,
    so `v` is `x`), and copies into a buffer that has the name already (`a = ...` of a
    parameter: the caller's tensor changes)."""
    src = """
__co__ s32 [4] same(s32 [4] a) {
  return a;
}
__co__ void bump(s32 [4] a) {
  a = inc(a, 10);
}
__co__ void main() {
  s32 [4] x;
  foreach i in [4] { x.at(i) = i; }
  call bump(x);
  v = same(x);
  v.at(0) = 99;
  println(x.at(0), x.at(1), v.at(3));
}
"""
    assert _run_source(tmp_path, capfd, src) == [f"99 {1 + 10} {3 + 10}"]


def test_scalar_results_and_arguments_of_host_variables(tmp_path, capfd):
    src = """
__co__ int twice_sum(s32 [4] a, int k) {
  mutable int s = 0;
  foreach i in [4] { s += a.at(i) * k; }
  return s;
}
__co__ void main() {
  s32 [4] x;
  foreach i in [4] { x.at(i) = 3 - i; }
  mutable int m = 2;
  mutable int n = 0;
  n = twice_sum(x, m);
  m = m + n;
  b = inc(x, m);
  println(n, b.at(0));
}
"""
    x = [3 - i for i in range(4)]
    n = sum(v * 2 for v in x)
    assert _run_source(tmp_path, capfd, src) == [f"{n} {x[0] + 2 + n}"]


@pytest.mark.parametrize("body, message", [
    ("  b = inc(x);", "16:7: error: 'inc' takes 2 arguments, but the call passes 1"),
    ("  b = inc(y, 1);", "16:11: error: argument 1 of 'inc' is a f32 tensor of rank 1; its "
                         "parameter 'a' is s32 of rank 1"),
    ("  b = inc(z, 1);", "16:11: error: argument 1 of 'inc': a dimension is 8, where the "
                         "function needs 4"),
    ("  int n = inc(x, 1).at(0);", "16:11: error: a call of the __co__ function 'inc' inside an "
                                   "expression"),
    ("  call r(x);", "error: a recursive call of the __co__ function 'r'"),
    ("  b = inc(x, x.at(0));", "16:14: error: a tensor element as argument 2 of 'inc'"),
])
def test_calls_the_callee_does_not_take_are_refused_by_name(tmp_path, body, message):
    path = tmp_path / "bad.co"
    path.write_text(INC + "__co__ void r(s32 [4] a) {\n  call r(a);\n}\n"
                    "__co__ void main() {\n  s32 [4] x;\n  f32 [4] y;\n  s32 [8] z;\n"
                    + body + "\n}\n")
    got = _choreo("run", str(path), "--function", "main")
    assert got.returncode == 1 and "Traceback" not in got.stderr
    assert message in got.stderr, got.stderr


def test_run_reports_an_error_inside_a_host_loop_as_check_does(tmp_path):
    """`choreo run` said "this foreach block as sema builds it (...) is not supported" of
    an error inside a host loop; it reports the error, as check does (a warning there)."""
    path = tmp_path / "loop.co"
    path.write_text(INC + "__co__ void main() {\n  s32 [4] x;\n  foreach i in [2] {\n"
                    "    b = inc(x);\n  }\n}\n")
    message = "'inc' takes 2 arguments, but the call passes 1"
    plain = _choreo("check", str(path))
    assert plain.returncode == 0 and f"12:9: warning: {message} (an error for compile)" \
        in plain.stderr, plain.stderr
    got = _choreo("run", str(path), "--function", "main")
    assert got.returncode == 1 and "as sema builds it" not in got.stderr
    assert got.stderr.splitlines()[0] == f"{path}:12:9: error: {message}"
