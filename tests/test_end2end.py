"""Host programs in the interpreter, and their kernels assembled by ptxas for both targets.

The cases (tests/end2end_refs.py) are reference-compiler end-to-end programs
and the examples; each function is called like a Python function
(`choreo_py.interpret(path).name(a, b)`) and its result checked as the
program's own main() checks it. The same files compile to PTX for sm_90a
and sm_100a, and ptxas accepts it (skipped without ptxas). test_end2end_gpu.py
runs them on a GPU.
"""
from __future__ import annotations

import pytest

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

from choreo_py.interp.scalars import TORCH_DTYPES

from end2end_refs import (CASES, NOT_INTERPRETED, RACES, REFUSED_ON, case_id, case_ptx, need_file,
                          run_case)


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_interpreter_matches_the_programs_check(case):
    if case_id(case) in NOT_INTERPRETED:
        pytest.skip(NOT_INTERPRETED[case_id(case)])
    race = RACES.get(case_id(case))
    if race is not None:  # the program races: the detector must say so
        from choreo_py.interp.errors import RaceError

        with pytest.raises(RaceError, match=race[1]):
            run_case(case, lambda path, fn: choreo_py.interpret(path, function=fn,
                                                                target="sm_90a"),
                     "cpu", TORCH_DTYPES)
        return
    run_case(case, lambda path, fn: choreo_py.interpret(path, function=fn, target="sm_90a"),
             "cpu", TORCH_DTYPES)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_ptxas_accepts(case, target):
    """What the GPU would run for the case (its function, built for the case's shapes)."""
    refused = REFUSED_ON.get(case_id(case))
    if refused is not None and refused[0] == target:
        with pytest.raises(ChoreoError) as e:  # by name, with its place
            case_ptx(case, target)
        assert refused[1] in e.value.message and e.value.loc is not None
        return
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    _, log = ptxas(case_ptx(case, target), target, verbose=True)
    assert "error" not in log.lower()


FILES = sorted({c[0] for c in CASES})


def test_deterministic_output():
    path = need_file([f for f in FILES if f.endswith("float_types.co")][0])
    assert compile_file(path, "ptx", "sm_90a") == compile_file(path, "ptx", "sm_90a")


def test_load_without_function_names_the_functions():
    lib = choreo_py.interpret(need_file([f for f in FILES if f.endswith("float_types.co")][0]),
                              target="sm_90a")
    with pytest.raises(TypeError, match="call one by name"):
        lib()
    with pytest.raises(AttributeError, match="ele_add_f32"):
        lib.no_such_function
