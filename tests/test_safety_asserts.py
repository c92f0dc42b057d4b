"""`assert(cond, "message")` (the language's construct): decided at compile time when
constant, else hoisted to the function's entry and checked by the interpreter and by a
`choreo_py.load` kernel before launching, so a causal kernel refuses Q_SEQ != KV_SEQ
instead of computing something else."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py import cli, driver
from choreo_py.diagnostics import ChoreoError
from choreo_py.runtime.kernel import ChoreoRuntimeError

EX = Path(__file__).resolve().parent.parent / "examples"
CAUSAL = [EX / "flash_atten_causal.co", EX / "flash_atten_persistent.co"]


@pytest.mark.parametrize("path", CAUSAL, ids=lambda p: p.name)
def test_run_refuses_unequal_lengths(capsys, path):
    rc = cli.main(["run", str(path), "--shape", "B=1,H=1,Q_SEQ=256,KV_SEQ=128"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "error: assertion failed: the causal mask pairs query i with key i" in err
    assert "(KV_SEQ=128, Q_SEQ=256)" in err


def test_interpret_refuses_unequal_lengths():
    q = torch.zeros(1, 256, 1, 128, dtype=torch.bfloat16)
    kv = torch.zeros(1, 128, 1, 128, dtype=torch.bfloat16)
    with pytest.raises(ChoreoError, match="Q_SEQ must equal KV_SEQ"):
        choreo_py.interpret(str(CAUSAL[0]), dict(Q=q, K=kv, V=kv, O=torch.zeros_like(q)))


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("path", CAUSAL, ids=lambda p: p.name)
def test_loaded_kernel_checks_its_sizes(path, target, monkeypatch):
    fn = choreo_py.load(str(path), target=target)
    fn.check_assertions({"B": 1, "Q_SEQ": 256, "H": 2, "KV_SEQ": 256})  # fine
    with pytest.raises(ChoreoRuntimeError) as info:
        fn.check_assertions({"B": 1, "Q_SEQ": 256, "H": 2, "KV_SEQ": 512})
    msg = str(info.value)
    assert f"{path.name}:" in msg and "assertion failed" in msg and "KV_SEQ=512" in msg
    # The call path runs the check before it needs a GPU.
    monkeypatch.setattr(fn, "bind", lambda tensors: {"B": 1, "Q_SEQ": 128, "H": 1,
                                                     "KV_SEQ": 64})
    with pytest.raises(ChoreoRuntimeError, match="assertion failed"):
        fn._prepare(())


def _program(tmp_path, body: str) -> Path:
    path = tmp_path / "a.co"
    path.write_text("__co__ void f(global f32[M, K] a) {\n" + body +
                    "  parallel p by 1 : block {\n    shared f32[16, 16] s;\n  }\n}\n")
    return path


def test_constant_assertion_is_decided_at_compile_time(capsys, tmp_path):
    path = _program(tmp_path, '  assert(16 % 3 == 0, "sixteen is no multiple of three");\n')
    assert cli.main(["check", str(path)]) == 1
    assert "a.co:2:3: error: assertion failed: sixteen is no multiple of three" in \
        capsys.readouterr().err
    ok = _program(tmp_path, '  assert(16 % 4 == 0, "fine");\n')
    assert "assert" not in driver.compile_file(str(ok), "ir")


def test_entry_assertion_in_the_ir(tmp_path):
    path = _program(tmp_path, '  assert(M % 16 == 0 && K > 0, "M in 16s");\n')
    assert "assert M % 16 == 0 && K > 0, 'M in 16s'" in driver.compile_file(str(path), "ir")


def test_assert_needs_a_message(capsys, tmp_path):
    path = _program(tmp_path, "  assert(M > 0, M);\n")
    assert cli.main(["check", str(path)]) == 1
    assert "a.co:2:3: error: assert takes a condition and a message" in capsys.readouterr().err


def test_assert_on_a_kernel_value_is_refused_by_name(capsys, tmp_path):
    path = tmp_path / "a.co"
    path.write_text("__co__ void f(global f32[M, K] a) {\n  parallel p by 2 : block {\n"
                    "    shared f32[16, 16] s;\n    assert(p < 2, \"p\");\n  }\n}\n")
    assert cli.main(["compile", str(path), "--emit", "ir"]) == 1
    assert "a.co:4:5: error: an assert on 'p'" in capsys.readouterr().err
