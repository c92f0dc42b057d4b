"""The tests themselves: each can fail, and each needs-something test says what it needs.

- Every test function asserts something: an `assert`, an `assert_*` call (numpy's and
  torch's testing helpers, the suite's own), `pytest.raises` / `warns` /
  `fail` / `skip`, or a call to a helper that asserts (ASSERTING_HELPERS).
- No test passes silently where a tool is missing: the `if report is not None:`
  form of a check that only runs with ptxas is not used (the test skips instead).
- Every marker a test uses is registered (pyproject.toml).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
#: helpers that assert (or fail the test) themselves
ASSERTING_HELPERS = {"check_golden", "golden", "raises", "warns", "fail", "skip", "assemble",
                     "run_case", "assert_reports", "assert_clean"}  # and end2end_refs.run_case  # tests/check_helpers.py


def _test_functions():
    for path in sorted(TESTS.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                yield path, node


def _asserts(fn: ast.FunctionDef) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ASSERTING_HELPERS or name.startswith("assert_"):  # numpy/torch.testing too
                return True
    return False


def test_every_test_asserts():
    silent = [f"{p.name}:{fn.lineno} {fn.name}" for p, fn in _test_functions() if not _asserts(fn)]
    assert not silent, "tests that cannot fail:\n" + "\n".join(silent)


def test_no_check_that_passes_without_its_tool():
    pattern = re.compile(r"if (report|log|out) is not None:\s*\n\s*assert")
    found = [p.name for p in sorted(TESTS.glob("*.py")) if pattern.search(p.read_text())]
    assert not found, f"checks that pass silently without their tool (skip instead): {found}"


def test_markers_are_registered(pytestconfig):
    registered = {line.split(":")[0].strip() for line in pytestconfig.getini("markers")}
    assert {"gpu", "ptxas", "slow"} <= registered
    builtin = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings"}
    used = set()
    for path in sorted(TESTS.glob("*.py")):
        used |= set(re.findall(r"pytest\.mark\.(\w+)", path.read_text()))
    assert used - builtin <= registered, used - builtin - registered


@pytest.mark.parametrize("source, silent", [
    ("def test_a():\n    f()\n", True),
    ("def test_a():\n    assert f()\n", False),
    ("def test_a():\n    with pytest.raises(E):\n        f()\n", False),
])
def test_the_detector_itself(source, silent):
    fn = ast.parse(source).body[0]
    assert _asserts(fn) is not silent
