"""A kernel's assignment to a host variable (tests/co/host_scalar_in_kernel.co) changes
each instance's copy only: `check` and `compile` warn, located at the first assignment;
the host's value after the region is the one before it, in the interpreter as in the
reference's model; a kernel's own variables and host variables it only reads do not warn."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoWarning

CO = os.path.join(os.path.dirname(__file__), "co", "host_scalar_in_kernel.co")
WARNING = "is a host variable: each instance of the parallel region assigns its own copy"


def _choreo(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "choreo_py", *args], capture_output=True,
                          text=True)


def test_check_warns_at_the_assignment_once():
    got = _choreo("check", CO)
    assert got.returncode == 0, got.stderr
    lines = [x for x in got.stderr.splitlines() if WARNING in x]
    assert len(lines) == 1, got.stderr
    assert lines[0].startswith(f"{CO}:11:5: warning: 'sum' is a host variable"), lines[0]
    assert "    sum += a.at(p);\n    ^" in got.stderr


def test_compile_warns_too(tmp_path):
    got = _choreo("compile", "--target", "sm_90a", "--emit", "ptx", CO,
                  "-o", str(tmp_path / "k.ptx"))
    assert got.returncode == 0, got.stderr
    assert f"{CO}:11:5: warning: 'sum'" in got.stderr


def test_the_host_value_is_unchanged(capfd):
    a = torch.arange(16, dtype=torch.int32)
    with pytest.warns(ChoreoWarning, match="'sum' is a host variable"):
        out = choreo_py.interpret(CO, target="sm_90a").k(a)
    assert torch.equal(out, a + 3)
    assert "sum= 0" in capfd.readouterr().out
