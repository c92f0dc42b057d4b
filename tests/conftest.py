"""Shared pytest configuration.

`--update-goldens` rewrites golden files instead of comparing against them;
use `check_golden(path, actual, request)` (or the `golden` fixture) in tests.
"""
from __future__ import annotations

import difflib
from pathlib import Path

import pytest


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite golden files with the current output")


def check_golden(path, actual: str, request) -> None:
    """Compare `actual` with the golden file at `path`; with --update-goldens,
    (re)write the file instead."""
    path = Path(path)
    if request.config.getoption("--update-goldens"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"golden file {path} is missing; run pytest with --update-goldens")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                            str(path), "actual", n=2))
        pytest.fail(f"output differs from {path} (run with --update-goldens to accept):\n"
                    + diff[:6000])


@pytest.fixture
def golden(request):
    """`golden(path, actual)`: check_golden bound to the current test."""
    return lambda path, actual: check_golden(path, actual, request)
