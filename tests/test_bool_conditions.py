"""Bool elements as conditions (tests/co/bool_conditions.co): a bool is a byte in memory,
and `||`, `&&`, `?:` need a condition register before not/and/or/selp take it. The PTX
of both targets assembles, and the interpreter and the emulated PTX give numpy's result.
(Found by bench/fuzz_grammar.py, seed 20261205, programs 494 and 3636.)"""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import ptxas

CO = os.path.join(os.path.dirname(__file__), "co", "bool_conditions.co")
N = 256
RNG = np.random.default_rng(5)
A = RNG.integers(0, 2, N).astype(bool)
B = RNG.integers(0, 2, N).astype(bool)
X = RNG.integers(-50, 50, N).astype(np.int32)


def _want():
    return {
        "or_then_read": np.where(A | B, 7, 3).astype(np.int32),
        "and_then_read": np.where(A & (X > 0), 1, 0).astype(np.int32),
        "select_on_bool": np.where(A, X, -X).astype(np.int32),
        "select_bool_arms": np.where(A, B, A),
    }


def _run(lib) -> None:
    a, b, x = (torch.from_numpy(v.copy()) for v in (A, B, X))
    args = {"or_then_read": (a, b), "and_then_read": (a, x), "select_on_bool": (a, x),
            "select_bool_arms": (a, b)}
    for name, want in _want().items():
        out = torch.zeros(N, dtype=torch.bool if want.dtype == bool else torch.int32)
        getattr(lib, name)(*args[name], out)
        assert np.array_equal(out.numpy(), want), f"{name}: {out.numpy()[:16]}"


def test_the_interpreter_gives_the_c_result():
    _run(choreo_py.interpret(CO, target="sm_90a"))


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_the_emulated_ptx_gives_the_c_result(target):
    _run(choreo_py.emulate_program(CO, target=target))


@pytest.mark.ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_ptxas_accepts_the_ptx(target):
    try:
        cubin, _ = ptxas(compile_file(CO, "ptx", target=target), target)
    except ChoreoError as err:
        pytest.fail(f"ptxas refused the {target} PTX: {err}")
    assert cubin
