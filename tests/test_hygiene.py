"""The tests themselves: each can fail, and each needs-something test says what it needs.

- Every test function asserts something: an `assert`, an `assert_*` call (numpy's and
  torch's testing helpers, the suite's own), `pytest.raises` / `warns` /
  `fail` / `skip`, or a call to a helper that asserts (ASSERTING_HELPERS).
- No test passes silently where a tool is missing: the `if report is not None:`
  form of a check that only runs with ptxas is not used, nor an `if` on a probe for a
  tool or a GPU (`find_ptxas()`, `shutil.which(...)`, `torch.cuda.is_available()`)
  around asserts (the test skips instead: the `ptxas` / `gpu` markers, `pytest.skip`).
- Tests look ptxas up as the compiler does (`runtime.build.find_ptxas`, the `ptxas`
  marker), never `shutil.which("ptxas")`, so both agree on whether it is there.
- No assert on constants alone (`assert True`, `assert 2 > 1`): it cannot fail.
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


def _asserts(fn: ast.FunctionDef, helpers=frozenset()) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ASSERTING_HELPERS or name in helpers or name.startswith("assert_"):
                return True  # (assert_*: numpy/torch.testing too)
    return False


def _local_helpers(tree: ast.Module) -> frozenset:
    """The file's own helper functions that assert (directly or through each other)."""
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("test")]
    found: set[str] = set()
    while True:
        more = {d.name for d in defs if d.name not in found and _asserts(d, frozenset(found))}
        if not more:
            return frozenset(found)
        found |= more


def _silent_tests(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    helpers = _local_helpers(tree)
    return [f"{path.name}:{fn.lineno} {fn.name}" for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test")
            and not _asserts(fn, helpers)]


def test_every_test_asserts():
    silent = [t for path in sorted(TESTS.glob("test_*.py")) for t in _silent_tests(path)]
    assert not silent, "tests that cannot fail:\n" + "\n".join(silent)


def test_no_check_that_passes_without_its_tool():
    pattern = re.compile(r"if (report|log|out) is not None:\s*\n\s*assert")
    found = [p.name for p in sorted(TESTS.glob("*.py")) if pattern.search(p.read_text())]
    assert not found, f"checks that pass silently without their tool (skip instead): {found}"


#: calls that probe for a tool or a GPU
PROBES = {"find_ptxas", "which", "is_available", "_has_ptxas", "_has_gpu"}


def _probes(test: ast.expr) -> bool:
    for node in ast.walk(test):
        if isinstance(node, ast.Call):
            f = node.func
            if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in PROBES:
                return True
    return False


def _guarded_asserts(fn: ast.FunctionDef) -> list[int]:
    """Lines of `if <probe>:` blocks (no else) that hold asserts or return: checks that
    pass, unrun, when the tool is missing (or present)."""
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and not node.orelse and _probes(node.test) \
                and any(isinstance(x, (ast.Assert, ast.Return))
                        for b in node.body for x in ast.walk(b)):
            out.append(node.lineno)
    return out


def test_no_assert_guarded_by_a_tool_probe():
    found = [f"{p.name}:{line} {fn.name}" for p, fn in _test_functions()
             for line in _guarded_asserts(fn)]
    assert not found, "asserts that only run when a tool is there (skip instead):\n" + \
        "\n".join(found)


def test_one_ptxas_lookup():
    pattern = re.compile(r"""which\(\s*["']ptxas["']""")
    found = [p.name for p in sorted(TESTS.glob("*.py"))
             if p.name != Path(__file__).name and pattern.search(p.read_text())]
    assert not found, f"tests that look ptxas up on their own (use find_ptxas): {found}"


def _constant_asserts(fn: ast.FunctionDef) -> list[int]:
    names = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Starred)
    return [n.lineno for n in ast.walk(fn) if isinstance(n, ast.Assert)
            and not any(isinstance(x, names) for x in ast.walk(n.test))]


def test_no_constant_asserts():
    found = [f"{p.name}:{line} {fn.name}" for p, fn in _test_functions()
             for line in _constant_asserts(fn)]
    assert not found, "asserts on constants alone (they cannot fail):\n" + "\n".join(found)


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


def test_a_local_helper_that_asserts_counts(tmp_path):
    path = tmp_path / "test_x.py"
    path.write_text("def _close(a, b):\n    assert a == b\n\n"
                    "def _twice(a):\n    _close(a, a)\n\n"
                    "def _quiet(a):\n    print(a)\n\n"
                    "def test_a():\n    _twice(1)\n\n"
                    "def test_b():\n    _quiet(1)\n")
    assert _silent_tests(path) == ["test_x.py:13 test_b"]


@pytest.mark.parametrize("source, lines", [
    ("def test_a():\n    if shutil.which('ptxas'):\n        assert f()\n", [2]),
    ("def test_a():\n    if build.find_ptxas() is not None:\n        assert f()\n", [2]),
    ("def test_a():\n    if find_ptxas() is None:\n        pytest.skip('x')\n    assert f()\n", []),
    ("def test_a():\n    if col is not None:\n        assert f(col)\n", []),
    ("def test_a():\n    if shutil.which('nvcc') is None:\n        return\n    assert f()\n", [2]),
])
def test_the_probe_detector(source, lines):
    assert _guarded_asserts(ast.parse(source).body[0]) == lines


@pytest.mark.parametrize("source, lines", [
    ("def test_a():\n    assert True\n", [2]),
    ("def test_a():\n    assert 2 > 1, 'x'\n", [2]),
    ("def test_a():\n    assert n > 1\n", []),
    ("def test_a():\n    assert f() == 1\n", []),
])
def test_the_constant_detector(source, lines):
    assert _constant_asserts(ast.parse(source).body[0]) == lines
