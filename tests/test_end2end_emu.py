"""Host programs in the PTX emulator: the cases of end2end_refs.py through `emulate_program`.

Each case runs as on a GPU (test_end2end_gpu.py), with the GPU's dtypes and the
host program runtime's bindings, allocations and launch order, but every kernel
launch executes its PTX entry in the emulator, strict, on CPU tensors; the
result is checked as the program's own main() checks it. So code that is wrong
only on the GPU (a register reused from a branch the PTX skips: tiled_dma.co
foo2, which the interpreter, running the IR, cannot see) fails here. Both
targets; a case a target refuses by name (REFUSED_ON) must be refused so, a
case the emulator does not model is skipped with its refusal (NOT_EMULATED,
checked to still be refused: an entry that starts passing fails the test).
"""
from __future__ import annotations

import pytest

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.emu import EmuError
from choreo_py.runtime.host_program import torch_dtypes

from end2end_refs import CASES, RACES, REFUSED_ON, case_id, case_ptx, run_case

pytestmark = pytest.mark.emu

TARGETS = ["sm_90a", "sm_100a"]

#: Cases the emulator refuses, with the words of its refusal (an EmuError naming the PTX
#: line and the Choreo statement).
NOT_EMULATED = {
    # printf in a kernel: its arguments in a .local buffer, then `call vprintf`
    "stream.co::foo": "'pbuf' is a .local variable: the emulator gives .local variables no storage",
    "debug_rtti_GDB_types.co::debug_builtin_non_scalar_types":
        "'pbuf' is a .local variable: the emulator gives .local variables no storage",
}

#: Cases emulated on one target only, to keep the suite's time (each still runs in the
#: interpreter and is assembled by ptxas for both targets in test_end2end.py): "same PTX"
#: ones, whose other target's PTX differs only in its header (checked here, then
#: skipped), f4 siblings of an f6 case that is emulated (the same kernel on 4-bit
#: codes), and a case whose smaller variant runs on the other target.
ONE_TARGET = {
    "tma_f32.co::tma_ab_buffer_fp8": ("sm_100a", "same PTX", "22 s in the emulator"),
    "tma_v2.co::tma_ab_buffer": ("sm_100a", "same PTX", "8 s in the emulator"),
    "tma_fp6_fp4.co::tma_ab_buffer_f4": ("sm_100a", "f6 sibling", "30 s in the emulator"),
    "hopper_mma.co::matmul_f4": ("sm_100a", "f6 sibling", "10 s in the emulator"),
    # sm_100a emulates its 4x2_tiles variant (end2end_gemms.py)
    "wgmma_persis.co::matmul_persis_hilbert_sm90": ("sm_100a", "its 4x2_tiles variant is",
                                                    "67 s in the emulator"),
}


def _body(ptx: str) -> list:
    return [line for line in ptx.splitlines() if not line.startswith((".version", ".target"))]


_programs: dict = {}


def _emulated(target: str):
    def call(path: str, function: str):
        key = (path, target)
        if key not in _programs:
            _programs[key] = choreo_py.emulate_program(path, target=target)
        return _programs[key][function]
    return call


#: Sub-byte cases whose emulation takes 9-36 s on one idle core (their programs' shapes are
#: fixed in the function signatures): `slow`, so that `-m "not slow"` keeps the suite fast;
#: the sub-byte copies and integral_types' cases, about 2 s each, stay fast, and
#: tests/test_subbyte.py emulates the fp6/fp4 conversions themselves.
SLOW = {"tma_fp6_fp4.co::tma_ab_buffer_f6", "tma_fp6_fp4.co::tma_ab_buffer_f4",
        "hopper_mma.co::matmul_f6", "hopper_mma.co::matmul_f4"}


def _params(cases):
    return [pytest.param(c, id=case_id(c), marks=[pytest.mark.slow] if case_id(c) in SLOW
                         else []) for c in cases]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", _params(CASES))
def test_emulator_matches_the_programs_check(case, target):
    one = ONE_TARGET.get(case_id(case))
    if one is not None and one[0] == target:
        if one[1] == "same PTX":
            other = next(t for t in TARGETS if t != target)
            assert _body(case_ptx(case, target)) == _body(case_ptx(case, other))
        pytest.skip(f"emulated on one target only ({one[1]}, {one[2]})")
    refused = REFUSED_ON.get(case_id(case))
    if refused is not None and refused[0] == target:
        with pytest.raises(ChoreoError) as e:  # by name, with its place
            run_case(case, _emulated(target), "cpu", torch_dtypes())
        assert refused[1] in e.value.message and e.value.loc is not None
        return
    race = RACES.get(case_id(case))
    if race is not None:  # the program races: the strict emulator must say so
        with pytest.raises(EmuError) as e:
            run_case(case, _emulated(target), "cpu", torch_dtypes())
        assert race[2] in str(e.value), str(e.value)
        return
    reason = NOT_EMULATED.get(case_id(case))
    if reason is None:
        run_case(case, _emulated(target), "cpu", torch_dtypes())
        return
    with pytest.raises(EmuError) as e:
        run_case(case, _emulated(target), "cpu", torch_dtypes())
    assert reason in str(e.value)
    pytest.skip(f"not emulated: {e.value.render().splitlines()[0]}")
