"""`with ..., where a <-> b` (sema/iterate.py): the two bounded integers are one value, so
a `foreach` over either sets both; the interpreter, the PTX emulator (both targets) and
ptxas agree. Bounds that differ, a foreach over both, and a name that is not a bounded
integer stay refused by name."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file

WHERE = Path(__file__).parent / "co" / "with_where.co"


@pytest.mark.parametrize("engine", ["interpreter", "sm_90a", "sm_100a"])
def test_bound_variables_step_together(engine) -> None:
    x = torch.zeros((6, 2), dtype=torch.int32)
    y = torch.zeros((3, 4), dtype=torch.int32)
    if engine == "interpreter":
        choreo_py.interpret(str(WHERE))(x, y)
    else:
        choreo_py.emulate_program(str(WHERE), target=engine)(x, y)
    assert torch.equal(x, (torch.arange(6) * 11)[:, None].expand(6, 2).int())
    assert torch.equal(y, (torch.arange(3)[:, None] * 10 + torch.arange(4)[None, :]).int())


def test_one_loop_sets_both() -> None:
    ir = compile_file(str(WHERE), "ir", "sm_90a")
    assert "x<0+:6, 0+:2>[j, p] = j * 10 + j" in ir and "[a, b] = a * 10 + b" in ir


@pytest.mark.ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_assembles(target) -> None:
    from choreo_py.runtime.build import ptxas

    assert ptxas(compile_file(str(WHERE), "ptx", target), target)[0] is not None


@pytest.mark.parametrize("body, message", [
    ("with i in [6], j in [5] where i <-> j { foreach i { x.at(i) = j; } }",
     "a 'where' binding of bounded integers whose bounds are not the same"),
    ("with i in [6], j in [6] where i <-> j { foreach i, j { x.at(i) = j; } }",
     "a 'foreach' over 'i' and 'j', which a 'where' made one value"),
    ("int k = 2;\n    with i in [6] where i <-> k { foreach i { x.at(i) = k; } }",
     "'k' in 'where' is not a variable of this 'with'"),
])
def test_refused_by_name(tmp_path, body, message) -> None:
    path = tmp_path / "w.co"
    path.write_text("__co__ void w(s32 [6] x) {\n  parallel p by 1 : block {\n    " + body
                    + "\n  }\n}\n")
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ir", "sm_90a")
    assert info.value.message.startswith(message), info.value.render()
