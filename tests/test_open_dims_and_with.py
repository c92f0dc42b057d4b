"""Two forms of the language the reference's parse-stage programs use:

- an open dimension `?` in a parameter's shape (`s32 [?, 8] x`) is the argument's,
  named `x__dim0` as an unwritten shape's dimensions are (sema/kernel.py open_dims);
- `with k in [8]` binds a bounded ituple of rank 1 used as its integer, and `k(0)` is its
  element 0 (`k(-1)` stays the offset form)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file

OPEN = Path(__file__).parent / "co" / "open_dimension.co"  # x.at(b, t) += b for every row b


def test_open_dimension_is_the_arguments() -> None:
    assert "kernel inc(x: global s32[x__dim0, 8])" in compile_file(str(OPEN), "ir", "sm_90a")
    x = torch.zeros(5, 8, dtype=torch.int32)
    choreo_py.interpret(str(OPEN))(x)
    assert torch.equal(x, torch.arange(5, dtype=torch.int32)[:, None].expand(5, 8))


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_open_dimension_emulated(target) -> None:
    x = torch.full((3, 8), 7, dtype=torch.int32)
    choreo_py.emulate_program(str(OPEN), target=target)(x)
    assert torch.equal(x, 7 + torch.arange(3, dtype=torch.int32)[:, None].expand(3, 8))


@pytest.mark.ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_open_dimension_assembles(target) -> None:
    from choreo_py.runtime.build import ptxas

    cubin, _ = ptxas(compile_file(str(OPEN), "ptx", target), target)
    assert cubin


def _run(tmp_path, body: str) -> torch.Tensor:
    path = tmp_path / "w.co"
    path.write_text("__co__ void w(s32 [8] out) {\n" + body + "}\n")
    out = torch.zeros(8, dtype=torch.int32)
    choreo_py.interpret(str(path))(out)
    return out


def test_element_zero_of_a_rank_one_with_variable(tmp_path) -> None:
    out = _run(tmp_path, "  with k in [8] {\n    foreach k {\n"
                         "      parallel p by 1 : thread\n        out.at(k) = k(0) * 10 + k;\n"
                         "    }\n  }\n")
    assert out.tolist() == [11 * i for i in range(8)]


def test_offset_form_of_a_rank_one_with_variable_is_unchanged(tmp_path) -> None:
    out = _run(tmp_path, "  with k in [8] {\n    foreach k {\n"
                         "      parallel p by 1 : thread\n        out.at(k) = k(-1);\n"
                         "    }\n  }\n")
    assert out.tolist() == [7] * 8


def test_a_positive_offset_is_still_refused(tmp_path) -> None:
    with pytest.raises(ChoreoError, match="the offset form of a bounded variable other than"):
        _run(tmp_path, "  with k in [8] {\n    foreach k {\n"
                       "      parallel p by 1 : thread\n        out.at(k) = k(1);\n    }\n  }\n")
