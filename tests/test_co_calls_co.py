"""A call of a __co__ function from another (tests/co/co_calls_co.co): `b = inc(a);` on
the host and `call inc(a);` in a kernel are refused at the call, by name: errors for
`check --strict` and `compile` (which said "'inc' is not declared" and "the device function
'inc', which this file does not define", and --strict passed the kernel call), warnings
from a plain `check`."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

CO = os.path.join(os.path.dirname(__file__), "co", "co_calls_co.co")
MSG = "a __co__ function cannot call the __co__ function 'inc' (the reference's rule)"
SITES = ["11:7", "12:7", "20:5"]


def _choreo(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "choreo_py", *args], capture_output=True,
                          text=True)


def _reported(stderr: str, severity: str) -> list[str]:
    return [line.split(": ")[0].split(":", 1)[1] for line in stderr.splitlines()
            if f"{severity}: {MSG}" in line]


@pytest.mark.parametrize("args", [["check", "--strict"], ["compile", "--emit", "ptx",
                                                          "--target", "sm_90a"]])
def test_strict_check_and_compile_refuse_each_call(args, tmp_path):
    extra = ["-o", str(tmp_path / "k.ptx")] if args[0] == "compile" else []
    got = _choreo(*args, CO, *extra)
    assert got.returncode != 0
    assert _reported(got.stderr, "error") == SITES, got.stderr
    assert "is not declared" not in got.stderr and "does not define" not in got.stderr


def test_plain_check_warns():
    got = _choreo("check", CO)
    assert got.returncode == 0, got.stderr
    assert _reported(got.stderr, "warning") == SITES, got.stderr
