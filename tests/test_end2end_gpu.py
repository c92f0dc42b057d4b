"""Host programs on a CUDA GPU: the cases of end2end_refs.py through `choreo_py.load`.

Skipped without a CUDA device (conftest.py's `gpu` mark). Each case makes
its inputs on the GPU, calls the compiled function, and checks the result as
the program's own main() does; the same cases run in the interpreter in
test_end2end.py. The target is the GPU's (sm_90a on an H200).

    pytest tests/test_end2end_gpu.py -v
    compute-sanitizer --tool memcheck python tests/test_end2end_gpu.py
    compute-sanitizer --tool racecheck python tests/test_end2end_gpu.py
"""
from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from end2end_refs import CASES, REFUSED_ON, case_id, run_case  # noqa: E402

pytestmark = pytest.mark.gpu  # skipped without a CUDA GPU (conftest.py)

_loaded: dict = {}


def _load(path: str, function: str):
    import choreo_py

    if path not in _loaded:
        _loaded[path] = choreo_py.load(path)
    return _loaded[path][function]


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_gpu_matches_the_programs_check(case):
    refused = REFUSED_ON.get(case_id(case))
    if refused is not None and refused[0] == _gpu_target():
        from choreo_py.diagnostics import ChoreoError

        with pytest.raises(ChoreoError) as e:  # by name (fp6/fp4 arithmetic on sm_90a)
            run_case(case, _load, "cuda", _dtypes())
        assert refused[1] in e.value.message
        return
    run_case(case, _load, "cuda", _dtypes())
    torch.cuda.synchronize()


def _gpu_target() -> str:
    from choreo_py import targets

    t = targets.for_capability(torch.cuda.get_device_capability())
    return t.name if t is not None else ""


def _dtypes():
    from choreo_py.runtime.host_program import torch_dtypes

    return torch_dtypes()


if __name__ == "__main__":  # every case once, for compute-sanitizer
    failed = 0
    for c in CASES:
        refused = REFUSED_ON.get(case_id(c))
        if refused is not None and refused[0] == _gpu_target():
            print("refused (as expected)", case_id(c))  # the pytest test checks the words
            continue
        try:
            run_case(c, _load, "cuda", _dtypes())
            torch.cuda.synchronize()
            print("ok  ", case_id(c))
        except pytest.skip.Exception as e:
            print("skip", case_id(c), e)
        except Exception as e:  # noqa: BLE001 - every case is reported, the run goes on
            failed += 1
            print("FAIL", case_id(c), type(e).__name__, e)
    sys.exit(1 if failed else 0)
