"""One small program through every stage, both targets: the heart of `pytest -m quick`.

vector_add (a thread kernel) and gemm (TMA, events, MMA roles) are preprocessed, parsed,
checked, built into verified tile IR, lowered to pyptx and PTX, assembled by ptxas, run
in the interpreter and executed by the PTX emulator, each against torch. The deeper tests
of each stage live in their own files; this one says in seconds whether a change broke
the chain."""
from __future__ import annotations

from pathlib import Path

import pytest

from choreo_py import driver, frontend
from choreo_py.ir.verify import verify_module
from choreo_py.runtime import build

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TARGETS = ("sm_90a", "sm_100a")
pytestmark = pytest.mark.quick


@pytest.mark.parametrize("name", ["vector_add", "gemm"])
def test_front_end_and_ir(name):
    unit = frontend.preprocess(str(EXAMPLES / f"{name}.co"))
    assert "__co__" in unit.text
    module = driver.ir_of_file(str(EXAMPLES / f"{name}.co"), target="sm_100a")
    verify_module(module)
    assert module.functions


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["vector_add", "gemm"])
def test_lowers_to_ptx(name, target):
    text = driver.compile_file(str(EXAMPLES / f"{name}.co"), "pyptx", target)
    ptx = build.run_module(text).ptx()
    assert f".target {target}" in ptx and ".entry" in ptx


@pytest.mark.ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_ptxas_accepts_gemm(target):
    ptx = driver.compile_file(str(EXAMPLES / "gemm.co"), "ptx", target)
    cubin, report = build.ptxas(ptx, target, verbose=True)
    assert cubin[:4] == b"\x7fELF" and "registers" in report


def test_interpreter_adds():
    torch = pytest.importorskip("torch")
    import choreo_py
    a, b = torch.arange(512.0), torch.full((512,), 0.5)
    lib = choreo_py.interpret(str(EXAMPLES / "vector_add.co"))
    assert torch.equal(lib.vector_add(a, b), a + b)


@pytest.mark.parametrize("target", TARGETS)
def test_emulator_adds(target):
    torch = pytest.importorskip("torch")
    import choreo_py
    a, b = torch.arange(512.0), torch.full((512,), 0.25)
    lib = choreo_py.emulate_program(str(EXAMPLES / "vector_add.co"), target=target)
    assert torch.equal(lib.vector_add(a, b), a + b)
