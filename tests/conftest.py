"""Shared pytest configuration.

`--update-goldens` rewrites golden files instead of comparing against them;
use `check_golden(path, actual, request)` (or the `golden` fixture) in tests.

Markers (registered in pyproject.toml): a test marked `gpu` is skipped, with
the reason shown, where no CUDA GPU is present; one marked `ptxas` where
ptxas is not installed. `slow` marks the tests `-m "not slow"` leaves out.
"""
from __future__ import annotations

import difflib
from pathlib import Path

import pytest


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite golden files with the current output")


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _has_ptxas() -> bool:
    from choreo_py.runtime.build import find_ptxas

    return find_ptxas() is not None


_NEEDS = {"gpu": (_has_gpu, "needs a CUDA GPU"), "ptxas": (_has_ptxas, "ptxas not on PATH")}


def pytest_collection_modifyitems(config, items):
    found: dict[str, bool] = {}
    for item in items:
        for name, (probe, reason) in _NEEDS.items():
            if item.get_closest_marker(name) is None:
                continue
            if name not in found:
                found[name] = probe()
            if not found[name]:
                item.add_marker(pytest.mark.skip(reason=reason))


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
