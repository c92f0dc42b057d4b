"""The FileCheck suite (tests/lit/): .co files with their own RUN: and CHECK: lines,
run by lit as in LLVM, MLIR and Triton. Fails when a lit test fails; skipped, with
the reason, where lit or filecheck is not installed (pip install -e '.[dev]')."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LIT_DIR = Path(__file__).resolve().parent / "lit"


def _filecheck() -> str | None:
    return shutil.which("filecheck", path=os.path.dirname(sys.executable)) or \
        shutil.which("filecheck")


@pytest.mark.skipif(importlib.util.find_spec("lit") is None, reason="needs lit (pip install lit)")
@pytest.mark.skipif(_filecheck() is None, reason="needs filecheck (pip install filecheck)")
def test_lit_suite():
    cmd = [sys.executable, "-c", "from lit.main import main; main()", "-v", str(LIT_DIR)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    tail = "\n".join((res.stdout + res.stderr).splitlines()[-80:])
    assert res.returncode == 0, f"lit failed:\n{tail}"
    n = sum(1 for _ in LIT_DIR.rglob("*.co"))
    passed = re.search(r"Passed\s*:\s*(\d+)", res.stdout)
    # Every file ran and passed (REQUIRES: ptxas may leave one unsupported without it).
    unsupported = re.search(r"Unsupported\s*:\s*(\d+)", res.stdout)
    count = int(passed.group(1)) if passed else 0
    count += int(unsupported.group(1)) if unsupported else 0
    assert count == n and n >= 12, f"expected {n} tests to pass:\n{tail}"
