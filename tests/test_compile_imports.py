"""The compile path imports neither torch nor numpy: they cost seconds of CPU on every
`choreo compile` / `choreo check` (torch alone is 2.5 s), and the compiler needs neither.
Only the interpreter, the emulator and `choreo_py.load` may import them, on first use."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "numpy")

_PROBE = """
import sys
from choreo_py import cli
code = 0
try:
    cli.main({argv!r})
except SystemExit as exc:
    code = exc.code or 0
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print("HEAVY", ",".join(heavy), "EXIT", code)
"""


def _imports_of(argv: list[str]) -> tuple[str, str]:
    out = subprocess.run([sys.executable, "-c", _PROBE.format(argv=argv, heavy=HEAVY)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("HEAVY")]
    assert line, out.stdout + out.stderr
    _, heavy, _, code = line[-1].split(" ")
    return heavy, code


@pytest.mark.parametrize("target", ["sm_100a", "sm_90a"])
@pytest.mark.parametrize("example", ["flash_atten_causal.co", "gemm.co", "vector_add.co"])
def test_compile_to_ptx_imports_no_torch(tmp_path, example, target):
    heavy, code = _imports_of(["compile", str(ROOT / "examples" / example), "--target", target,
                               "--emit", "ptx", "-o", str(tmp_path / "k.ptx")])
    assert code == "0"
    assert heavy == "", f"choreo compile imported {heavy}"


def test_check_imports_no_torch():
    heavy, code = _imports_of(["check", str(ROOT / "examples" / "flash_atten_causal.co")])
    assert code == "0"
    assert heavy == "", f"choreo check imported {heavy}"


def test_probe_sees_an_import():
    # The probe itself can fail: `choreo run` needs torch, and the probe must say so.
    pytest.importorskip("torch")
    heavy, _ = _imports_of(["run", str(ROOT / "examples" / "vector_add.co"), "--shape", "N=64"])
    assert "torch" in heavy
