"""`s32 r;`: a scalar of a data element type declared without a value starts at zero.

The reference's CPU model (LancerLab/croqtile, tools/co-mock/mock_interp.cpp
`MockInterpreter::ExecNamedVariableDecl`) gives a scalar without an initialiser the
value 0 of its type; its type-system page (Documents/Documentation/type-system.md,
"Immutability") makes an immutable `int b;` an error, which stays one here.
"""
from __future__ import annotations

import os

import pytest

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

HERE = os.path.join(os.path.dirname(__file__), "co", "comock", "zero_scalars.co")


def test_unset_scalars_start_at_zero_on_the_host_and_in_a_kernel(capfd):
    """Host: `s32 r; f32 z; r = r + a;` prints `r 3 0`; each thread's `s32 k; k += q;`
    prints its q."""
    choreo_py.interpret(HERE, target="sm_90a").f(3)
    lines = capfd.readouterr().out.splitlines()
    assert lines[0] == "r 3 0"
    assert sorted(lines[1:]) == ["0", "1"]


@pytest.mark.ptxas
def test_the_zero_variable_lowers_on_both_targets():
    for target in ("sm_90a", "sm_100a"):
        text = compile_file(HERE, "ptx", target)
        assert f".target {target}" in text and ".entry" in text
        _, log = ptxas(text, target, verbose=True)
        assert "error" not in log.lower()


def test_an_immutable_int_without_a_value_is_a_located_error(tmp_path):
    path = tmp_path / "b.co"
    path.write_text("__co__ void f(int a) {\n  int b;\n  println(b);\n}\n")
    with pytest.raises(ChoreoError) as e:
        compile_file(str(path), "ir", "sm_90a")
    assert e.value.loc.line == 2
    assert "the int 'b' is immutable and needs an initial value" in e.value.message
