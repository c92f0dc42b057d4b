"""A non-void `__co__` function that ends without `return` (check/context.py,
host/missing_result.py): `check --strict` refuses it; a plain `check`,
`compile` and a call warn at the function, the code is built and runs, and
the call's result refuses every use by the function's name."""
from __future__ import annotations

import pytest
import torch

import choreo_py
from choreo_py import cli
from choreo_py.diagnostics import take_warnings
from choreo_py.host.missing_result import MissingResult, MissingResultError

BUMP = """__co__ int bump(s32 [64] x) {
  parallel p by 64 : thread
    x.at(p) = x.at(p) + 1;
}
"""
WARNING = "1:1: warning: the non-void function 'bump' has no 'return' statement"


@pytest.fixture
def bump(tmp_path):
    path = tmp_path / "bump.co"
    path.write_text(BUMP)
    return str(path)


def test_strict_check_refuses_plain_check_warns(bump, capsys) -> None:
    assert cli.main(["check", "--strict", bump]) == 1
    assert "1:1: error: the non-void function 'bump' has no 'return' statement" in \
        capsys.readouterr().err
    assert cli.main(["check", bump]) == 0
    assert WARNING in capsys.readouterr().err


@pytest.mark.ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_compile_warns_with_caret_and_ptxas_accepts(bump, tmp_path, capsys, target) -> None:
    out = tmp_path / "bump.ptx"
    assert cli.main(["compile", bump, "--emit", "ptx", "--target", target, "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert WARNING in err and "__co__ int bump(s32 [64] x) {\n^" in err
    from choreo_py.runtime.build import ptxas

    cubin, _ = ptxas(out.read_text(), target)
    assert cubin


def test_ir_says_the_function_returns_nothing(bump) -> None:
    from choreo_py.driver import compile_file
    from choreo_py.ir.parse import parse_module
    from choreo_py.ir.printer import print_module

    text = compile_file(bump, "ir", "sm_90a")
    assert "func bump(x: global s32[64]) -> nothing (declared int) {" in text
    module = parse_module(text)  # the printed IR reads back
    assert module.functions[0].missing_return == "int" and print_module(module) == text
    take_warnings()


def _refuses(result: MissingResult) -> None:
    assert repr(result) == "<no result: 'bump' ends without 'return'>"
    assert result is not None
    uses = [lambda r: r + 1, lambda r: 1 + r, int, bool, float, str, lambda r: r == 0,
            lambda r: r < 1, lambda r: r[0], lambda r: r.shape, lambda r: torch.tensor(r),
            lambda r: f"{r}"]
    for use in uses:
        with pytest.raises(MissingResultError) as e:
            use(result)
        assert e.value.message.startswith("the result of 'bump' is used, but 'bump' (declared "
                                          "to return 'int') ends without a 'return'")
        assert (e.value.line, e.value.col) == (1, 1)


def test_interpreter_runs_it_and_its_result_refuses_use(bump) -> None:
    f = choreo_py.interpret(bump, target="sm_90a")  # (the interpreter runs no rule checks)
    x = torch.arange(64, dtype=torch.int32)
    result = f(x)
    assert torch.equal(x, torch.arange(64, dtype=torch.int32) + 1)  # the side effect happened
    _refuses(result)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_emulated_ptx_agrees_and_its_result_refuses_use(bump, target) -> None:
    x = torch.arange(64, dtype=torch.int32) * 3
    with pytest.warns(Warning, match="has no 'return' statement"):
        result = choreo_py.emulate_program(bump, target=target).bump(x)
    assert torch.equal(x, torch.arange(64, dtype=torch.int32) * 3 + 1)
    _refuses(result)


def test_emulate_command_compares_the_writes_not_the_result(bump, capsys) -> None:
    assert cli.main(["emulate", bump, "--target", "sm_90a"]) == 0
    out = capsys.readouterr().out
    assert "check interpreter: x max abs error 0.000e+00" in out and "result" not in out


def test_emulate_command_prints_the_warning_once_as_the_compiler_writes_it(bump, capsys) -> None:
    assert cli.main(["emulate", bump, "--target", "sm_90a"]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: the non-void function 'bump' has no 'return' statement") == 1
    assert err.startswith(f"{bump}:") and "ChoreoWarning" not in err


def test_spanned_return_type_without_return_warns(tmp_path, capsys) -> None:
    path = tmp_path / "span.co"
    path.write_text("__co__ f16 [1, 2] bar(f32 [3, 4, 5] b) { }\n")
    assert cli.main(["check", "--strict", str(path)]) == 1
    assert "error: the non-void function 'bar' has no 'return' statement" in \
        capsys.readouterr().err


@pytest.mark.gpu
def test_gpu_call_runs_it_and_its_result_refuses_use(bump) -> None:
    x = torch.arange(64, dtype=torch.int32, device="cuda")
    with pytest.warns(Warning, match="has no 'return' statement"):
        result = choreo_py.load(bump)(x)
    assert torch.equal(x.cpu(), torch.arange(64, dtype=torch.int32) + 1)
    _refuses(result)
