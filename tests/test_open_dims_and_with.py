"""Two forms of the language the reference's parse-stage programs use:

- an open dimension `?` in a parameter's shape (`s32 [?, 8] x`) is the argument's,
  named `x__dim0` as an unwritten shape's dimensions are (sema/kernel.py open_dims);
- `with k in [8]` binds a bounded ituple of rank 1 used as its integer, and `k(0)` is its
  element 0 (`k(-1)` stays the offset form);
- `|shape|`, `|type|`, shape-ituple arithmetic and `x[(1), (0)]` derived from data."""
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


# `|sp|` (the element count of a shape), `|f32|` (an element's bytes) and shape-ituple
# arithmetic (`shape / {4, 2, 8}`, dimension by dimension), as the language documents them.
SIZES = Path(__file__).parent / "co" / "shape_sizes.co"
SIZES_WANT = [6000, 4, 5 * 4, 32 * 10000 + 32 * 100 + 4, 130 * 10000 + 64 * 100 + 36, 10, 2, 0]


def test_sizes_and_shape_ituple_arithmetic_in_the_interpreter() -> None:
    out = torch.zeros(8, dtype=torch.int32)
    choreo_py.interpret(str(SIZES))(out, torch.zeros(5, 4, dtype=torch.int32))
    assert out.tolist() == SIZES_WANT


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_sizes_emulated(target) -> None:
    out = torch.zeros(8, dtype=torch.int32)
    choreo_py.emulate_program(str(SIZES), target=target)(out, torch.zeros(5, 4, dtype=torch.int32))
    assert out.tolist() == SIZES_WANT


@pytest.mark.ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_sizes_and_derivation_assemble(target) -> None:
    from choreo_py.runtime.build import ptxas

    for path in (SIZES, Path(__file__).parent / "co" / "derive_from_data.co"):
        cubin, _ = ptxas(compile_file(str(path), "ptx", target), target)
        assert cubin


@pytest.mark.parametrize("body,message", [
    ("  s : [4, 8] / {2, 0};\n", "division by zero"),
    ("  s : [4, 8] / {2, 1, 1};\n", "operator '/' on shapes of different ranks (2 vs. 3)"),
    ("  parallel p by 1 : thread\n    out.at(0) = |out|;\n",
     "'|...|' of a global tensor (the element count of a shape: '|x.span|')"),
])
def test_size_and_shape_errors(tmp_path, body, message) -> None:
    path = tmp_path / "e.co"
    path.write_text("__co__ void e(s32 [8] out) {\n" + body + "}\n")
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ir", "sm_90a")
    assert message in info.value.message, info.value.render()
    assert info.value.line == 2 or info.value.line == 3


# `x[(1), (0)]`: a shape derived from the name of spanned data is derived from its shape,
# as `x.span[(1), (0)]` is (the grammar's derivation takes a name with or without '.span').
DERIVE = Path(__file__).parent / "co" / "derive_from_data.co"


@pytest.mark.parametrize("engine", ["interpreter", "sm_90a", "sm_100a"])
def test_shape_derived_from_data(engine) -> None:
    out, x = torch.zeros(4, dtype=torch.int32), torch.zeros(3, 5, dtype=torch.int32)
    if engine == "interpreter":
        choreo_py.interpret(str(DERIVE))(out, x)
    else:
        choreo_py.emulate_program(str(DERIVE), target=engine)(out, x)
    assert out.tolist() == [5, 3, 15, 0]


def test_indexing_data_with_values_stays_refused(tmp_path) -> None:
    path = tmp_path / "i.co"
    path.write_text(DERIVE.read_text().replace("x[(1), (0)]", "x[1, 0]"))
    # the rule checker refuses it first now (check --strict and compile report alike)
    with pytest.raises(ChoreoError, match=r"indexing with '\[...\]' here|the mdspan 'rev' "
                                          r"can not be made from an integer") as err:
        compile_file(str(path), "ir", "sm_90a")
    assert err.value.loc is not None and err.value.loc.line == 2
